#!/bin/sh
# usage: gen_c_cli.sh FUSED MODEL_DIR CMAKE_GENERATED_DIR CMAKE_SCORER WORK_DIR INPUT_IDS CONTINUE_IDS
# `fused gen-c` for tiny_a with the limits tests/codegen/CMakeLists.txt gives fused_generate_c():
# the same files; `cc ... OUTDIR/*.c` builds them; the scorer's logits equal the CMake scorer's, byte for byte;
# arguments `fused score` refuses, the scorer refuses with the same status and sentence.
set -eu
fused=$1 model=$2 cmake_dir=$3 cmake_scorer=$4 work=$5 in=$6 cont=$7
rm -rf "$work"
mkdir -p "$work"
"$fused" gen-c --model "$model" --out "$work/out" --name tiny_a --max-seq 16 --max-ctx 128
for f in tiny_a.h tiny_a.c tiny_a_main.c memory_layout.json graph.json; do
  cmp "$work/out/$f" "$cmake_dir/$f" || { echo "gen-c and fused_generate_c differ in $f"; exit 1; }
done
cc -O2 -march=native -std=c11 "$work"/out/*.c -o "$work/scorer" -lm -fopenmp -lpthread
"$work/scorer" --model "$model" --input-ids "$in" --continue-ids "$cont" --out "$work/gen_c.safetensors"
"$cmake_scorer" --model "$model" --input-ids "$in" --continue-ids "$cont" --out "$work/cmake.safetensors"
cmp "$work/gen_c.safetensors" "$work/cmake.safetensors" || { echo "the two scorers' logits differ"; exit 1; }
# refused ARGS...: the scorer and `fused score` both refuse ARGS, with one status and (unless the first
# word is --status-only) one sentence after their names.
refused() {
  same_words=1
  if [ "$1" = --status-only ]; then same_words=0; shift; fi
  set +e
  gen=$("$work/scorer" --model "$model" --out "$work/refused.safetensors" "$@" 2>&1 >/dev/null)
  gen_rc=$?
  cpp=$("$fused" score --model "$model" --out "$work/refused.safetensors" "$@" 2>&1 >/dev/null)
  cpp_rc=$?
  set -e
  if [ "$gen_rc" -eq 0 ] || [ "$gen_rc" != "$cpp_rc" ]; then echo "$*: the scorer exits $gen_rc, fused score $cpp_rc ($gen)"; exit 1; fi
  words=${cpp#fused score: }
  words=${words#error: }  # fused marks a failed run's message (status 1); the scorer's status says it
  if [ $same_words = 1 ] && [ "${gen#tiny_a: }" != "$words" ]; then echo "$*: the scorer says '$gen', fused score '$cpp'"; exit 1; fi
}
for ids in '1,,2' ',1' '1,' '[1,2' '1,2]' '[1],2' '1 [2]' 'x' '1;2' '-1' '99999999999'; do refused --input-ids "$ids"; done
refused --input-ids 1 --continue-ids 5,1000
refused --input-ids 1,1000
refused --status-only --input-ids 1 --threads abc
refused --status-only --input-ids 1 --threads -5
# --name: a C identifier of at most 64 characters (it names every file), refused as a usage error
# before anything is written.
name_refused() {
  set +e
  err=$("$fused" gen-c --model "$model" --out "$work/named" --name "$1" 2>&1 >/dev/null)
  rc=$?
  set -e
  [ "$rc" -eq 2 ] && [ ! -e "$work/named" ] && echo "$err" | grep -qF "$2" || { echo "gen-c --name $1: exit $rc: $err"; exit 1; }
}
name_refused 9abc "the name '9abc' is not a C identifier"
long=$(printf 'a%.0s' $(seq 1 300))
name_refused "$long" "is longer than 64 characters"
echo "gen-c: same files as fused_generate_c, same logits, the same refusals"
