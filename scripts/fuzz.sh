#!/usr/bin/env bash
# Usage: scripts/fuzz.sh [seconds-per-harness]      (default 60)
#
# Builds the libFuzzer harnesses of tests/fuzz (tests/fuzz/fuzz_*.cpp, one program: fuzz_fused) with
# clang-16 under ASan + UBSan in build-fuzz/, or in FUSED_FUZZ_BUILD, a build tree configured with
# -DFUSED_FUZZ=ON and clang (scripts/test's sanitizer stage, which has built it), then runs each for
# the given time. Each run starts from a fresh
# temporary corpus seeded with real files from tests/data (see seeds_for below) plus
# tests/fuzz/corpus/<name>/ when present, and uses tests/fuzz/<name>.dict when present, where
# <name> is the harness without its fuzz_ prefix (fuzz_safetensors -> corpus/safetensors/).
# A crashing input is kept as <build>/crashes/<harness>/crash-*; reproduce it with
#   <build>/tests/fuzz/<harness> <build>/crashes/<harness>/crash-...
# Exits non-zero if any harness found a problem. CXX / CC override the compilers,
# FUSED_FUZZ_JOBS the build parallelism and how many harnesses run at once (default 2).
set -euo pipefail

seconds=${1:-60}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FUSED_FUZZ_BUILD:-$root/build-fuzz}
export CXX=${CXX:-clang++-16} CC=${CC:-clang-16}

# Real inputs for each harness to start from: mutating a valid file reaches the deep checks far
# sooner than mutating nothing. Small files only, so that each run stays fast.
seeds_for() {
  case $1 in
    fuzz_safetensors|fuzz_c_safetensors)
      ls "$root"/tests/data/reference/tiny_mha/reference.safetensors \
         "$root"/tests/data/reference/tiny_mha/model.safetensors ;;
    fuzz_hf_config)
      ls "$root"/tests/data/configs/*.json "$root"/tests/data/reference/*/*config.json \
         "$root"/examples/models/*/*config.json ;;
  esac
}

# Extra libFuzzer options per harness (input size bounds as docs/TOKENIZER.md runs them).
options_for() {
  case $1 in
    fuzz_tokenizer_encode) echo -max_len=4096 ;;
    fuzz_tokenizer_load) echo -max_len=8192 ;;
  esac
}

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# -O1 (with line tables, tests/fuzz/CMakeLists.txt), as libFuzzer's documentation builds harnesses:
# CI's fuzz stage built for 157 s at -O2 -g to fuzz for 60 on 2 cores (fuzz_graph_file.cpp alone: 76 s
# against 55 at -O1), and line tables are all a crash's stack trace needs.
if [[ -z ${FUSED_FUZZ_BUILD:-} ]]; then
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -DNDEBUG" \
        -DFUSED_FUZZ=ON -DFUSED_BUILD_TOOLS=OFF -DFUSED_BUILD_EXAMPLES=OFF >/dev/null
fi

harnesses=()
for src in "$root"/tests/fuzz/fuzz_*.cpp; do  # each a link to fuzz_fused
  harnesses+=("$(basename "$src" .cpp)")
done
cmake --build "$build" -j "${FUSED_FUZZ_JOBS:-2}" --target fuzz_fused

# Each harness is one process on one core: run FUSED_FUZZ_JOBS (default 2) at a time, each into its
# own log, printed in harness order once all have ended. Each still gets `seconds` of its own.
run_one() {  # harness log
  local harness=$1 log=$2 corpus i=0 name options
  corpus=$(mktemp -d)
  for seed in $(seeds_for "$harness"); do  # numbered: several seeds are called config.json
    cp "$seed" "$corpus/$((i++))-$(basename "$seed")"
  done
  name=${harness#fuzz_}
  if [[ -d $root/tests/fuzz/corpus/$name ]]; then cp -r "$root/tests/fuzz/corpus/$name"/. "$corpus/"; fi
  options=(-max_total_time="$seconds" -timeout=10 -print_final_stats=1 $(options_for "$harness"))
  if [[ -f $root/tests/fuzz/$name.dict ]]; then options+=(-dict="$root/tests/fuzz/$name.dict"); fi
  mkdir -p "$build/crashes/$harness"
  local status=0
  { echo "== $harness: ${seconds}s, $(ls "$corpus" | wc -l) seeds"
    "$build/tests/fuzz/$harness" "${options[@]}" -artifact_prefix="$build/crashes/$harness/" "$corpus" 2>&1 || status=$?
    echo "exit $status"; } > "$log"
  rm -rf "$corpus"
  return $status
}

logs=$build/fuzz-logs
rm -rf "$logs" && mkdir -p "$logs"
pids=() failed=()
for harness in "${harnesses[@]}"; do
  while (( $(jobs -rp | wc -l) >= ${FUSED_FUZZ_JOBS:-2} )); do wait -n || true; done
  run_one "$harness" "$logs/$harness.log" &
  pids+=($!)
done
for i in "${!harnesses[@]}"; do
  wait "${pids[$i]}" || failed+=("${harnesses[$i]}")
done
for harness in "${harnesses[@]}"; do cat "$logs/$harness.log"; done

if (( ${#failed[@]} )); then
  echo "fuzz.sh: FAILED: ${failed[*]} (inputs in $build/crashes/)" >&2
  exit 1
fi
echo "fuzz.sh: all ${#harnesses[@]} harnesses ran ${seconds}s without a finding"
