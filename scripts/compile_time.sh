#!/usr/bin/env bash
# Compile cost of the constexpr pipeline: tests/compile_time/qwen2_0_5b_plan.cpp (Qwen2-0.5B planned
# and verified in both modes in constant evaluation) at FUSED_LAYERS = 1, 8, 24, 48, and
# tests/compile_time/llama_3_2_1b_plan.cpp (Llama-3.2-1B, the same) at 1, 8, 16, 32, per compiler.
#
#   scripts/compile_time.sh [reps]      (default 3; run from anywhere)
#
# Each compile is `-fsyntax-only`: all of the planning happens in the front end, and code generation
# of the file's tiny main() is not what the budget is about. Flags: -std=c++20 -Iinclude -Ikernels
# plus each file's own first line (`// flags: <g++ flags> (g++); <clang flags> (clang)`).
# Figures: user+sys CPU seconds (median of reps) and peak RSS (max of reps), from /usr/bin/time
# (Debian package `time`) or, without it, from getrusage of the child in Python. CPU time, not wall
# time, so that other work on the machine disturbs the figures less; the load average is printed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
reps=${1:-3}
# file : layer counts (the second is the checkpoint's own).
subjects=("qwen2_0_5b_plan:1 8 24 48" "llama_3_2_1b_plan:1 8 16 32")

# A file's flags for g++ and clang, from its first line -> gcc_flags, clang_flags.
read_flags() {
  local first
  first=$(head -n 1 "$1")
  if [[ ! $first =~ ^//\ flags:\ (.*)\ \(g\+\+\)\;\ (.*)\ \(clang\)$ ]]; then
    echo "compile_time.sh: unexpected first line of $1: $first" >&2
    exit 1
  fi
  gcc_flags=${BASH_REMATCH[1]}
  clang_flags=${BASH_REMATCH[2]}
}

compilers=()
for c in g++ clang++-16; do command -v "$c" >/dev/null && compilers+=("$c"); done

# One compile -> "user+sys_seconds peak_rss_kb".
measure() {
  if [[ -x /usr/bin/time ]]; then
    local out
    out=$(mktemp)
    /usr/bin/time -f '%U %S %M' -o "$out" "$@" >/dev/null 2>&1 || { echo "FAILED: $*" >&2; exit 1; }
    awk '{ printf "%.3f %d\n", $1 + $2, $3 }' "$out"
    rm -f "$out"
  else
    python3 - "$@" <<'PY'
import resource, subprocess, sys
if subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode:
    sys.exit("FAILED: " + " ".join(sys.argv[1:]))
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print("%.3f %d" % (r.ru_utime + r.ru_stime, r.ru_maxrss))
PY
  fi
}

echo "# $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $reps reps"
printf '| %-18s | %-17s | %6s | %10s | %8s |\n' compiler file layers "seconds" "peak MB"
printf '|%s|%s|%s|%s|%s|\n' "--------------------" "-------------------" "--------" "------------" "----------"
for cxx in "${compilers[@]}"; do
  version=$("$cxx" --version | head -n 1 | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -n 1)
  for subject in "${subjects[@]}"; do
    name=${subject%%:*}
    src=$root/tests/compile_time/$name.cpp
    read_flags "$src"
    case $cxx in g++*) flags=$gcc_flags ;; *) flags=$clang_flags ;; esac
    for layers in ${subject#*:}; do
      times=() rss=0
      for ((i = 0; i < reps; i++)); do
        # shellcheck disable=SC2086  # the flags are words
        result=$(measure "$cxx" -std=c++20 -I"$root/include" -I"$root/kernels" $flags -DFUSED_LAYERS=$layers -fsyntax-only "$src")
        read -r t m <<<"$result"
        times+=("$t")
        ((m > rss)) && rss=$m
      done
      median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
      printf '| %-18s | %-17s | %6d | %10.2f | %8d |\n' "$cxx $version" "$name" "$layers" "$median" $((rss / 1024))
    done
  done
done
