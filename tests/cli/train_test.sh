#!/bin/sh
# fused train end to end: fine-tune the default model on Genesis 1-3 for a few steps, check that the
# written directory runs with fused run, resume from it (the step count goes on), and that the loss
# of the last steps is below the first's; a damaged train state is refused, naming the tensor.
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
# A train state no step could have written: refused naming the tensor (it would make every later step NaN).
damage() {  # tensor-name-suffix format value expected-message
  cp -r "$tmp/a" "$tmp/d"
  python3 - "$tmp/d/train_state.safetensors" "$1" "$2" "$3" <<'PY'
import json, struct, sys
path, suffix, fmt, value = sys.argv[1:]
b = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
head = json.loads(b[8:8 + n])
name = sorted(k for k in head if k.endswith(suffix))[0]
at = 8 + n + head[name]["data_offsets"][0]
b[at:at + 4] = struct.pack("<" + fmt, float(value) if fmt == "f" else int(value))
open(path, "wb").write(b)
PY
  if "$fused" train -m "$tmp/a" --data "$data" --seq 64 --batch 4 --steps 1 --threads 2 --resume "$tmp/d" --out "$tmp/e" 2>"$tmp/err"; then
    echo "resume from a train state with $1 = $3 was accepted"; exit 1
  fi
  grep -q "$4" "$tmp/err" || { echo "resume from a train state with $1 = $3:"; cat "$tmp/err"; exit 1; }
  [ ! -e "$tmp/e" ] || { echo "resume from a damaged state wrote $tmp/e"; exit 1; }
  rm -rf "$tmp/d"
}
damage .adam_v f -1 'adam_v" holds -1 at element 0; AdamW.s second moment is a mean of squares, never negative'
damage .adam_m f nan 'adam_m" holds NaN at element 0; a train state must be finite'
damage optimizer.step i -5 'tensor "optimizer.step" holds -5; a step count is 0 .. 2^31 - 2'
# AdamW's state resumed by SGD without momentum, whose state has no moments: refused, not dropped.
if "$fused" train -m "$tmp/a" --data "$data" --seq 64 --batch 4 --steps 1 --threads 2 --optimizer sgd --resume "$tmp/a" --out "$tmp/e" 2>"$tmp/err"; then
  echo "AdamW's state resumed by SGD was accepted"; exit 1
fi
grep -q 'adam_[mv]" is not part of this train step.s state' "$tmp/err" || { echo "AdamW's state resumed by SGD:"; cat "$tmp/err"; exit 1; }
[ ! -e "$tmp/e" ] || { echo "AdamW's state resumed by SGD wrote $tmp/e"; exit 1; }
echo ok
