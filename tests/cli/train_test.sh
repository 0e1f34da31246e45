#!/bin/sh
# fused train end to end: fine-tune the default model on Genesis 1-3 for a few steps, check that the
# written directory runs with fused run, resume from it (the step count goes on), and that the loss
# of the last steps is below the first's.
#   train_test.sh FUSED
set -eu
fused=$1
here=$(dirname "$0")
model="$here/../../examples/models/kjv-qwen2-4m"
data="$here/../data/train/genesis_1_3.txt"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$fused" train -m "$model" --data "$data" --seq 64 --batch 4 --steps 16 --lr 3e-3 --log-every 8 --threads 2 --out "$tmp/a" 2>"$tmp/log"
cat "$tmp/log"
for f in config.json tokenizer.json model.safetensors train_state.safetensors; do
  [ -s "$tmp/a/$f" ] || { echo "fused train did not write $f"; exit 1; }
done
first=$(grep '^step' "$tmp/log" | head -n 1 | awk '{print $4}')
last=$(grep '^step' "$tmp/log" | tail -n 1 | awk '{print $4}')
awk -v a="$first" -v b="$last" 'BEGIN { if (!(b < a)) { print "the loss did not fall: " a " -> " b; exit 1 } }'
"$fused" run -m "$tmp/a" -p "In the beginning" -n 8 --temp 0 >"$tmp/text" 2>"$tmp/run_log"
grep -q "generated 8 tokens" "$tmp/run_log" && grep -q "[a-z]" "$tmp/text" || { echo "fused run on the trained model:"; cat "$tmp/text" "$tmp/run_log"; exit 1; }
"$fused" train -m "$tmp/a" --data "$data" --seq 64 --batch 4 --steps 2 --log-every 1 --threads 2 --resume "$tmp/a" --out "$tmp/b" 2>"$tmp/log2"
grep -q "^step     18 " "$tmp/log2" || { echo "resume did not continue at step 17:"; cat "$tmp/log2"; exit 1; }
echo ok
