#!/bin/sh
# usage: gen_c_train.sh FUSED MODEL_DIR NAME WORK_DIR IDS BATCH [GEN_C_AND_TRAIN_STEP_OPTIONS ...]
# `fused gen-c --train`: the train step of BATCH sequences (IDS, cut to a multiple of BATCH, split
# evenly) builds with `cc -std=c11` warning-free, and its main writes the tensors `fused train-step`
# writes for the same batch (loss, loss_after, every grad.* and after.*) byte for byte. The options
# (--betas, --eps, --weight-decay) go to both. Needs python3.
set -eu
fused=$1 model=$2 name=$3 work=$4 ids=$5 batch=$6
shift 6
here=$(dirname "$0")
rm -rf "$work"
mkdir -p "$work"
ids=$(python3 -c "import sys; v = sys.argv[1].split(','); b = int(sys.argv[2]); print(','.join(v[:len(v) // b * b]))" "$ids" "$batch")
seq=$(python3 -c "import sys; print(len(sys.argv[1].split(',')) // int(sys.argv[2]))" "$ids" "$batch")
"$fused" gen-c --model "$model" --train --max-seq "$seq" --batch "$batch" --out "$work/out" --name "$name" "$@"
cc -O2 -march=native -std=c11 -Wall -Wextra -Werror -pedantic "$work"/out/*.c -o "$work/train_step" -lm -fopenmp -lpthread
"$work/train_step" --model "$model" --tokens "$ids" --lr 2e-3 --out "$work/gen_c.safetensors"
"$fused" train-step --model "$model" --tokens "$ids" --batch "$batch" --lr 2e-3 "$@" --out "$work/cpp.safetensors"
python3 "$here/same_tensors.py" "$work/gen_c.safetensors" "$work/cpp.safetensors" "train-step tensors"
# A batch the step was not generated for is refused, naming the count.
if "$work/train_step" --model "$model" --tokens 1,2,3 --out "$work/bad.safetensors" 2>"$work/bad.txt"; then
  echo "the generated train step took 3 tokens"; exit 1
fi
grep -q "takes $((seq * batch)) ids" "$work/bad.txt" || { cat "$work/bad.txt"; exit 1; }
echo "gen-c --train $name: $batch x $seq tokens, compiles with cc -std=c11, every tensor byte-identical to fused train-step's"
