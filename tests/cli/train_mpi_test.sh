#!/bin/sh
# Data-parallel training through the CLI: one process and `mpirun -np 2` take the same steps, bit for
# bit, for the same batch and --micro-batch (train-step's gradients and parameters; fused train's
# whole state after three steps), and a launch the tool cannot serve is refused.
#   train_mpi_test.sh FUSED MPIEXEC|"" TINY_A_DIR
set -eu
fused=$1 mpiexec=$2 tiny=$3
here=$(dirname "$0")
model="$here/../../examples/models/kjv-qwen2-4m"
data="$here/../data/train/genesis_1_3.txt"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ids=553,74,190,342,450,506,76,51,979,337,125,718,323,116,905,25

# One process: four micro-batches of one sequence, the loss of the batch as one program (11.7106 -> 3.26862).
"$fused" train-step -m "$tiny" --tokens $ids --batch 4 --micro-batch 1 --threads 1 --out "$tmp/one.safetensors" 2>"$tmp/log"
grep -q "loss 11.7106 -> 3.2686" "$tmp/log" || { cat "$tmp/log"; echo "unexpected loss"; exit 1; }
"$fused" train-step -m "$tiny" --tokens $ids --batch 4 --micro-batch 3 --out x.safetensors 2>"$tmp/err" && exit 1
grep -q -- "--micro-batch 3 does not divide --batch 4" "$tmp/err" || { cat "$tmp/err"; exit 1; }

if [ -z "$mpiexec" ]; then
  # A multi-rank launch of a tool built without MPI is refused, not run as independent copies.
  OMPI_COMM_WORLD_SIZE=2 "$fused" train-step -m "$tiny" --tokens $ids --batch 4 --out x.safetensors 2>"$tmp/err" && exit 1
  grep -q "built without MPI" "$tmp/err" || { cat "$tmp/err"; exit 1; }
  echo "ok (no MPI: the single-process half)"
  exit 0
fi

# Open MPI refuses root without these, and may see a single slot in a container.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Shared memory without cross-memory attach (which containers often forbid).
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
run2() { "$mpiexec" -np 2 "$@"; }

run2 "$fused" train-step -m "$tiny" --tokens $ids --batch 4 --micro-batch 1 --threads 1 --out "$tmp/two.safetensors" 2>"$tmp/log2"
cmp "$tmp/one.safetensors" "$tmp/two.safetensors" || { cat "$tmp/log2"; echo "2 ranks differ from 1"; exit 1; }
# Each rank one micro-batch of two: the same bits as two micro-batches on one process.
"$fused" train-step -m "$tiny" --tokens $ids --batch 4 --micro-batch 2 --threads 1 --out "$tmp/one_pairs.safetensors" 2>/dev/null
run2 "$fused" train-step -m "$tiny" --tokens $ids --batch 4 --threads 1 --out "$tmp/two_pairs.safetensors" 2>/dev/null
cmp "$tmp/one_pairs.safetensors" "$tmp/two_pairs.safetensors" || { echo "2 ranks x 1 micro-batch differ from 1 x 2"; exit 1; }

# fused train: three steps, the whole optimizer state compared.
train="train -m $model --data $data --seq 32 --batch 4 --micro-batch 1 --steps 3 --lr 3e-3 --log-every 1 --threads 1"
"$fused" $train --out "$tmp/a" 2>"$tmp/train_log"
run2 "$fused" $train --out "$tmp/b" 2>"$tmp/train_log2"
grep -q "micro-batches of 1 sequences over 2 ranks" "$tmp/train_log2" || { cat "$tmp/train_log2"; exit 1; }
[ "$(grep -c '^step' "$tmp/train_log2")" -eq 3 ] || { echo "rank 0 alone reports progress:"; cat "$tmp/train_log2"; exit 1; }
cmp "$tmp/a/train_state.safetensors" "$tmp/b/train_state.safetensors" || { echo "fused train: 2 ranks differ from 1"; exit 1; }
cmp "$tmp/a/model.safetensors" "$tmp/b/model.safetensors"
# An error on the ranks ends the launch with a failure, not a hang.
run2 "$fused" train-step -m "$tiny" --tokens $ids --batch 4 --micro-batch 3 --out x.safetensors 2>"$tmp/err" && exit 1
grep -q -- "--micro-batch 3 does not divide --batch 4" "$tmp/err" || { cat "$tmp/err"; exit 1; }
run2 "$fused" train-step -m "$tiny" --tokens $ids --batch 4 --micro-batch 4 --out x.safetensors 2>"$tmp/err" && exit 1
grep -q "is 1 micro-batches of 4, which do not split evenly over 2 ranks" "$tmp/err" || { cat "$tmp/err"; exit 1; }
echo ok
