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

# The same tensors with the same bytes. Not cmp of the files: the JSON headers' key order is each
# writer's own (the C scorer's as written, `fused score`'s sorted).
python3 - "$work/gen_c.safetensors" "$work/cpp.safetensors" <<'PY'
import json, struct, sys
def read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    header.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in header.items()}
c, cpp = read(sys.argv[1]), read(sys.argv[2])
if sorted(c) != sorted(cpp) or any(c[k][:2] != cpp[k][:2] for k in c):
    sys.exit("the two files hold different tensors: %s / %s" % ({k: v[:2] for k, v in c.items()}, {k: v[:2] for k, v in cpp.items()}))
for k in sorted(c):
    if c[k][2] != cpp[k][2]:
        sys.exit("the generated C's %s differ from the C++ model's" % k)
print("logits byte-identical: " + ", ".join("%s %s" % (k, c[k][1]) for k in sorted(c)))
PY
if [ -n "$cmake_scorer" ]; then
  "$cmake_scorer" --model "$model" --input-ids "$in" --continue-ids "$cont" --out "$work/cmake.safetensors"
  cmp "$work/gen_c.safetensors" "$work/cmake.safetensors" || { echo "the gen-c and fused_generate_c scorers' outputs differ"; exit 1; }
fi
echo "gen-c $name: compiles with cc -std=c11, logits byte-identical to the C++ model's"
