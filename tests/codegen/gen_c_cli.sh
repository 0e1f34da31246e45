#!/bin/sh
# usage: gen_c_cli.sh FUSED MODEL_DIR CMAKE_GENERATED_DIR CMAKE_SCORER WORK_DIR INPUT_IDS CONTINUE_IDS
# `fused gen-c` for tiny_a with the limits tests/codegen/CMakeLists.txt gives fused_generate_c():
# the same files; `cc ... OUTDIR/*.c` builds them; the scorer's logits equal the CMake scorer's, byte for byte.
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
echo "gen-c: same files as fused_generate_c, same logits"
