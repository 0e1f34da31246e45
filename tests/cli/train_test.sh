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
# Training over a checkpoint in place, with writes that fail past 20 MB (a full disk): the old files
# stay whole (each new one goes beside its name, renamed over it once all are written), no temporary
# is left, and --resume from them still works.
cp -r "$tmp/b" "$tmp/in_place"
before=$(cat "$tmp/in_place/model.safetensors" "$tmp/in_place/train_state.safetensors" | cksum)
if sh -c 'trap "" XFSZ; ulimit -f 20000; exec "$@"' sh "$fused" train -m "$tmp/in_place" --data "$data" --seq 64 --batch 4 --steps 1 \
     --threads 2 --resume "$tmp/in_place" --out "$tmp/in_place" 2>"$tmp/err"; then
  echo "a write past ulimit -f succeeded"; exit 1
fi
grep -q "cannot write: File too large" "$tmp/err" || { echo "a failed write:"; cat "$tmp/err"; exit 1; }
[ "$(cat "$tmp/in_place/model.safetensors" "$tmp/in_place/train_state.safetensors" | cksum)" = "$before" ] ||
  { echo "a failed write changed the checkpoint it trained over"; exit 1; }
[ -z "$(ls -A "$tmp/in_place" | grep tmp)" ] || { echo "a failed write left a temporary:"; ls -A "$tmp/in_place"; exit 1; }
"$fused" train -m "$tmp/in_place" --data "$data" --seq 64 --batch 4 --steps 1 --log-every 1 --threads 2 --resume "$tmp/in_place" \
  --out "$tmp/in_place" 2>"$tmp/log3"
grep -q "^step     19 " "$tmp/log3" || { echo "resume after a failed write:"; cat "$tmp/log3"; exit 1; }
# Finite weights whose activations overflow (a key bias of 3e38): train and train-step stop at the
# NaN loss with exit 1 and write nothing (train-step wrote NaN gradients and exited 0); the
# directories train made for --out are removed again.
cp -r "$model" "$tmp/big"
set_key_bias() {  # model.safetensors bf16-bits: the first element of layer 0's key bias
  python3 - "$1" "$2" <<'PY'
import json, struct, sys
with open(sys.argv[1], "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    f.seek(8 + n + header["model.layers.0.self_attn.k_proj.bias"]["data_offsets"][0])
    f.write(struct.pack("<H", int(sys.argv[2], 16)))
PY
}
set_key_bias "$tmp/big/model.safetensors" 0x7F7F
if "$fused" train-step -m "$tmp/big" --tokens 1,2,3 --out "$tmp/step.safetensors" 2>"$tmp/err"; then echo "train-step of a NaN loss exited 0"; exit 1; fi
grep -q "so an activation overflowed; nothing written" "$tmp/err" && [ ! -e "$tmp/step.safetensors" ] || { echo "train-step, NaN loss:"; cat "$tmp/err"; exit 1; }
if "$fused" train -m "$tmp/big" --data "$data" --seq 64 --batch 4 --steps 2 --threads 2 --out "$tmp/new/dir" 2>"$tmp/err"; then echo "train of a NaN loss exited 0"; exit 1; fi
grep -q "step 1: the loss is .*so an activation overflowed" "$tmp/err" && [ ! -e "$tmp/new" ] || { echo "train, NaN loss:"; cat "$tmp/err"; ls "$tmp"; exit 1; }
# A float32 checkpoint's trained copy is bf16, and its config.json says so.
sed 's/"dtype": "bfloat16"/"dtype": "float32"/' "$model/config.json" > "$tmp/big/config.json"
cp "$model/model.safetensors" "$tmp/big/model.safetensors"
"$fused" train -m "$tmp/big" --data "$data" --seq 64 --batch 4 --steps 1 --threads 2 --out "$tmp/f" 2>/dev/null
grep -q '"dtype": "bfloat16"' "$tmp/f/config.json" || { echo "the trained copy's config:"; cat "$tmp/f/config.json"; exit 1; }
# Text with bytes that are not UTF-8 trains (they read as U+FFFD), with a warning naming the first.
{ cat "$data"; printf 'caf\351 \377\376\n'; } > "$tmp/latin1.txt"
"$fused" train -m "$model" --data "$tmp/latin1.txt" --seq 64 --batch 4 --steps 1 --threads 2 --out "$tmp/l" 2>"$tmp/err"
grep -q "latin1.txt is not UTF-8 text: 3 byte sequences are not (the first at byte $(($(wc -c < "$data") + 3)))" "$tmp/err" ||
  { echo "train of text that is not UTF-8:"; cat "$tmp/err"; exit 1; }
# A last update past f32's range (lr and weight decay 1000) leaves every loss finite but the
# parameters NaN: train in place stops, exit 1, and the model it was given is left as it was (it had
# written the NaN checkpoint over it, exit 0); train-step refuses the same update.
cp -r "$model" "$tmp/inplace"
sum_before=$(cat "$tmp/inplace"/* | cksum)
if "$fused" train -m "$tmp/inplace" --data "$data" --seq 16 --batch 1 --steps 2 --lr 1000 --weight-decay 1000 --min-lr-ratio 1 --threads 2 \
    --out "$tmp/inplace" 2>"$tmp/err"; then echo "train of an overflowing update exited 0"; exit 1; fi
grep -q "step 2: the update made the model overflow: tensor .* holds NaN at element" "$tmp/err" && [ "$(cat "$tmp/inplace"/* | cksum)" = "$sum_before" ] ||
  { echo "train, an overflowing last update:"; cat "$tmp/err"; ls -la "$tmp/inplace"; exit 1; }
# One step overflows a key bias of 1.7e35 (x (1 - lr x weight decay)) while the loss stays finite.
set_key_bias "$tmp/big/model.safetensors" 0x7A00
"$fused" train-step -m "$tmp/big" --tokens 1,2,3,4,5,6,7,8 --out "$tmp/step.safetensors" 2>/dev/null
rm "$tmp/step.safetensors"
if "$fused" train-step -m "$tmp/big" --tokens 1,2,3,4,5,6,7,8 --lr 1000 --weight-decay 1000 --out "$tmp/step.safetensors" 2>"$tmp/err"; then
  echo "train-step of an overflowing update exited 0"; exit 1; fi
grep -q 'the update made the model overflow: tensor "model.layers.0.self_attn.k_proj.bias" holds an infinity at element 0' "$tmp/err" &&
  [ ! -e "$tmp/step.safetensors" ] || { echo "train-step, an overflowing update:"; cat "$tmp/err"; exit 1; }
# Ctrl-C stops the run after the step in progress, writes what the steps so far made (--resume goes
# on from it) and exits 130 (before: killed, --out left behind empty).
"$fused" train -m "$model" --data "$data" --seq 16 --batch 1 --steps 1000000 --log-every 1 --threads 1 --out "$tmp/int" 2>"$tmp/int_log" &
pid=$!
i=0
while ! grep -q '^step' "$tmp/int_log" && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
kill -INT $pid
wait $pid && rc=0 || rc=$?
steps=$(sed -n 's/^fused train: interrupted after step \([0-9]*\) of 1000000: writing what it made$/\1/p' "$tmp/int_log")
[ "$rc" = 130 ] && [ -n "$steps" ] && [ -s "$tmp/int/train_state.safetensors" ] || { echo "train, interrupted: exit $rc"; cat "$tmp/int_log"; exit 1; }
"$fused" train -m "$tmp/int" --resume "$tmp/int" --data "$data" --seq 16 --batch 1 --steps 1 --threads 1 --out "$tmp/int2" 2>"$tmp/int_log2"
grep -q "^step $(printf '%6d' $((steps + 1))) " "$tmp/int_log2" || { echo "resume after an interrupt at step $steps:"; cat "$tmp/int_log2"; exit 1; }
# SIGTERM in a step of many micro-batches stops before the next one, the step dropped (it had run the
# whole step first: a minute here); the state written is the step before's, so --resume takes step 1 again.
"$fused" train -m "$model" --data "$data" --seq 16 --batch 4096 --micro-batch 1 --steps 2 --threads 1 --out "$tmp/term" 2>"$tmp/term_log" &
pid=$!
i=0
while ! grep -q 'micro-batches' "$tmp/term_log" && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
sleep 0.5
kill -TERM $pid
(sleep 60; kill -KILL $pid 2>/dev/null) &
watchdog=$!
wait $pid && rc=0 || rc=$?
kill $watchdog 2>/dev/null || true
grep -q '^fused train: SIGTERM during step 1 of 2, dropped before its last micro-batches: writing what the steps before it made$' "$tmp/term_log" &&
  [ "$rc" = 143 ] && [ -s "$tmp/term/train_state.safetensors" ] || { echo "train, SIGTERM within a step: exit $rc"; cat "$tmp/term_log"; exit 1; }
"$fused" train -m "$tmp/term" --resume "$tmp/term" --data "$data" --seq 16 --batch 1 --steps 1 --threads 1 --out "$tmp/term2" 2>"$tmp/term_log2"
grep -q "^step      1 " "$tmp/term_log2" || { echo "resume after a dropped step 1:"; cat "$tmp/term_log2"; exit 1; }
echo ok
