#!/usr/bin/env bash
# Usage: scripts/fuzz.sh [seconds-per-harness]      (default 60)
#
# Builds every libFuzzer harness in tests/fuzz (tests/fuzz/fuzz_*.cpp) with clang-16 under
# ASan + UBSan in build-fuzz/, then runs each for the given time. Each run starts from a fresh
# temporary corpus seeded with real files from tests/data (see seeds_for below) plus
# tests/fuzz/corpus/<name>/ when present, and uses tests/fuzz/<name>.dict when present, where
# <name> is the harness without its fuzz_ prefix (fuzz_safetensors -> corpus/safetensors/).
# A crashing input is kept as build-fuzz/crashes/<harness>/crash-*; reproduce it with
#   build-fuzz/tests/fuzz/<harness> build-fuzz/crashes/<harness>/crash-...
# Exits non-zero if any harness found a problem. CXX / CC override the compilers,
# FUSED_FUZZ_JOBS the build parallelism (default 2).
set -euo pipefail

seconds=${1:-60}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build-fuzz
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
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFUSED_FUZZ=ON \
      -DFUSED_BUILD_TOOLS=OFF -DFUSED_BUILD_EXAMPLES=OFF >/dev/null

harnesses=()
for src in "$root"/tests/fuzz/fuzz_*.cpp; do
  harnesses+=("$(basename "$src" .cpp)")
done
cmake --build "$build" -j "${FUSED_FUZZ_JOBS:-2}" --target "${harnesses[@]}"

failed=()
for harness in "${harnesses[@]}"; do
  corpus=$(mktemp -d)
  trap 'rm -rf "$corpus"' EXIT
  i=0
  for seed in $(seeds_for "$harness"); do  # numbered: several seeds are called config.json
    cp "$seed" "$corpus/$((i++))-$(basename "$seed")"
  done
  name=${harness#fuzz_}
  if [[ -d $root/tests/fuzz/corpus/$name ]]; then cp -r "$root/tests/fuzz/corpus/$name"/. "$corpus/"; fi
  options=(-max_total_time="$seconds" -timeout=10 -print_final_stats=1 $(options_for "$harness"))
  if [[ -f $root/tests/fuzz/$name.dict ]]; then options+=(-dict="$root/tests/fuzz/$name.dict"); fi
  mkdir -p "$build/crashes/$harness"
  echo "== $harness: ${seconds}s, $(ls "$corpus" | wc -l) seeds"
  if ! "$build/tests/fuzz/$harness" "${options[@]}" -artifact_prefix="$build/crashes/$harness/" "$corpus"; then
    failed+=("$harness")
  fi
  rm -rf "$corpus"
done

if (( ${#failed[@]} )); then
  echo "fuzz.sh: FAILED: ${failed[*]} (inputs in $build/crashes/)" >&2
  exit 1
fi
echo "fuzz.sh: all ${#harnesses[@]} harnesses ran ${seconds}s without a finding"
