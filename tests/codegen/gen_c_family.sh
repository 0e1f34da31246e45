#!/bin/sh
# usage: gen_c_family.sh FUSED MODEL_DIR NAME WORK_DIR INPUT_IDS CONTINUE_IDS [CMAKE_GENERATED_DIR CMAKE_SCORER]
# `fused gen-c` for a model of any family (prefill up to 16 tokens, KV cache 128: the reference
# prompts fit one prefill call, as in `fused score`): `cc -std=c11` builds it warning-free, and its
# scorer's logits are byte for byte those of the C++ run-time model (`fused score`). With a
# fused_generate_c() directory and scorer: the same files, and the same output file. Needs python3.
set -eu
fused=$1 model=$2 name=$3 work=$4 in=$5 cont=$6
cmake_dir=${7:-} cmake_scorer=${8:-}
rm -rf "$work"
mkdir -p "$work"
"$fused" gen-c --model "$model" --out "$work/out" --name "$name" --max-seq 16 --max-ctx 128
if [ -n "$cmake_dir" ]; then
  for f in "$name.h" "$name.c" "${name}_main.c" memory_layout.json graph.json; do
    cmp "$work/out/$f" "$cmake_dir/$f" || { echo "gen-c and fused_generate_c differ in $f"; exit 1; }
  done
fi
cc -O2 -march=native -std=c11 -Wall -Wextra -Werror -pedantic "$work"/out/*.c -o "$work/scorer" -lm -fopenmp -lpthread
"$work/scorer" --model "$model" --input-ids "$in" --continue-ids "$cont" --out "$work/gen_c.safetensors"
"$fused" score --model "$model" --input-ids "$in" --continue-ids "$cont" --out "$work/cpp.safetensors"

python3 "$(dirname "$0")/same_tensors.py" "$work/gen_c.safetensors" "$work/cpp.safetensors" logits
if [ -n "$cmake_scorer" ]; then
  "$cmake_scorer" --model "$model" --input-ids "$in" --continue-ids "$cont" --out "$work/cmake.safetensors"
  cmp "$work/gen_c.safetensors" "$work/cmake.safetensors" || { echo "the gen-c and fused_generate_c scorers' outputs differ"; exit 1; }
fi
echo "gen-c $name: compiles with cc -std=c11, logits byte-identical to the C++ model's"
