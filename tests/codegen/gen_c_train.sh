#!/bin/sh
# usage: gen_c_train.sh FUSED MODEL_DIR NAME WORK_DIR IDS BATCH [--f32-checkpoint | --attention-dropout P] [GEN_C_AND_TRAIN_STEP_OPTIONS ...]
# `fused gen-c --train`: the train step of BATCH sequences (IDS, cut to a multiple of BATCH, split
# evenly) builds with `cc -std=c11` warning-free, and its main writes the tensors `fused train-step`
# writes for the same batch (loss, loss_after, every grad.* and after.*) byte for byte. The options
# (--optimizer, --betas, --momentum, ...) go to both. --f32-checkpoint: both train from an F32 copy of
# the checkpoint whose values have low bits no bf16 holds (master weights taken exactly).
# --attention-dropout P: both train a copy of the model whose config.json asks for that attention
# dropout (the masks must agree bit for bit). Needs python3.
set -eu
fused=$1 model=$2 name=$3 work=$4 ids=$5 batch=$6
shift 6
here=$(dirname "$0")
rm -rf "$work"
mkdir -p "$work"
if [ "${1:-}" = "--f32-checkpoint" ]; then
  shift
  mkdir -p "$work/model_f32"
  cp "$model/config.json" "$work/model_f32/"
  python3 - "$model/model.safetensors" "$work/model_f32/model.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
header = json.loads(b[8:8 + n])
header.pop("__metadata__", None)
out_header, blobs, at = {}, [], 0
for name, t in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
    assert t["dtype"] == "BF16", name
    raw = b[8 + n + t["data_offsets"][0]:8 + n + t["data_offsets"][1]]
    f32 = bytearray()
    for i in range(len(raw) // 2):
        f32 += struct.pack("<H", ((i * 2654435761) & 0xFFFFFFFF) >> 17) + raw[2 * i:2 * i + 2]
    out_header[name] = {"dtype": "F32", "shape": t["shape"], "data_offsets": [at, at + len(f32)]}
    blobs.append(bytes(f32))
    at += len(f32)
text = json.dumps(out_header).encode()
text += b" " * (-len(text) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
PY
  model="$work/model_f32"
elif [ "${1:-}" = "--attention-dropout" ]; then
  mkdir -p "$work/model_dropout"
  cp "$model/model.safetensors" "$work/model_dropout/"
  python3 - "$model/config.json" "$work/model_dropout/config.json" "$2" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["attention_dropout"] = float(sys.argv[3])
json.dump(c, open(sys.argv[2], "w"), indent=2)
PY
  shift 2
  model="$work/model_dropout"
fi
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
# A learning rate fused train-step refuses (hex, a space, inf) is refused here too, exit 2.
for lr in 0x10 " 1" inf; do
  "$work/train_step" --model "$model" --tokens "$ids" --lr "$lr" --out "$work/bad.safetensors" 2>"$work/bad.txt" && rc=0 || rc=$?
  [ "$rc" = 2 ] && [ ! -e "$work/bad.safetensors" ] || { echo "the generated train step with --lr '$lr': exit $rc"; cat "$work/bad.txt"; exit 1; }
done
# A NaN in the checkpoint is refused by both before any step, with the same sentence.
mkdir -p "$work/model_nan"
cp "$model/config.json" "$work/model_nan/"
python3 - "$model/model.safetensors" "$work/model_nan/model.safetensors" <<'PY'
import json, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[:8])[0]
header = json.loads(b[8:8 + n])
name = sorted(k for k in header if k != "__metadata__")[-1]
at = 8 + n + header[name]["data_offsets"][0] + 4 * (2 if header[name]["dtype"] == "BF16" else 4)
b[at - 4:at] = b"\x00\x00\xc0\x7f" if header[name]["dtype"] == "F32" else b"\xc0\x7f\xc0\x7f"
open(sys.argv[2], "wb").write(bytes(b))
PY
for run in c cpp; do
  if [ $run = c ]; then
    "$work/train_step" --model "$work/model_nan" --tokens "$ids" --lr 2e-3 --out "$work/nan.safetensors" 2>"$work/nan_$run.txt" && rc=0 || rc=$?
  else
    "$fused" train-step --model "$work/model_nan" --tokens "$ids" --batch "$batch" --lr 2e-3 "$@" --out "$work/nan.safetensors" 2>"$work/nan_$run.txt" && rc=0 || rc=$?
  fi
  [ "$rc" = 1 ] && [ ! -e "$work/nan.safetensors" ] || { echo "$run: exit $rc from a NaN checkpoint"; cat "$work/nan_$run.txt"; exit 1; }
  sed -n 's/.*\(cannot train from weights that are not finite: .*\)/\1/p' "$work/nan_$run.txt" >"$work/nan_$run.msg"
done
[ -s "$work/nan_c.msg" ] && cmp "$work/nan_c.msg" "$work/nan_cpp.msg" || { cat "$work/nan_c.txt" "$work/nan_cpp.txt"; exit 1; }
# An update past f32's range with a finite loss (a key bias of 1e38, which shifts every score of a
# query alike, times 1 - lr x weight decay) is refused by both with the same sentence, nothing written.
if python3 - "$model/model.safetensors" "$work/model_big" <<'PY'
import json, os, shutil, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[:8])[0]
header = json.loads(b[8:8 + n])
t = header.get("model.layers.0.self_attn.k_proj.bias")
if t is None or t["dtype"] not in ("BF16", "F32"):
    sys.exit(1)  # no key bias to overflow: the case does not apply
at = 8 + n + t["data_offsets"][0]
b[at:at + (2 if t["dtype"] == "BF16" else 4)] = struct.pack("<H", 0x7E96) if t["dtype"] == "BF16" else struct.pack("<f", 1e38)
os.makedirs(sys.argv[2], exist_ok=True)
shutil.copy(os.path.join(os.path.dirname(sys.argv[1]), "config.json"), sys.argv[2])
open(os.path.join(sys.argv[2], "model.safetensors"), "wb").write(bytes(b))
PY
then
  for run in c cpp; do
    if [ $run = c ]; then
      "$work/train_step" --model "$work/model_big" --tokens "$ids" --lr 1000 --out "$work/big.safetensors" 2>"$work/big_$run.txt" && rc=0 || rc=$?
    else
      "$fused" train-step --model "$work/model_big" --tokens "$ids" --batch "$batch" --lr 1000 "$@" --out "$work/big.safetensors" 2>"$work/big_$run.txt" && rc=0 || rc=$?
    fi
    [ "$rc" = 1 ] && [ ! -e "$work/big.safetensors" ] || { echo "$run: exit $rc from an overflowing update"; cat "$work/big_$run.txt"; exit 1; }
    sed -n 's/.*\(the update made the model overflow: .*\)/\1/p' "$work/big_$run.txt" >"$work/big_$run.msg"
  done
  [ -s "$work/big_c.msg" ] && cmp "$work/big_c.msg" "$work/big_cpp.msg" || { cat "$work/big_c.txt" "$work/big_cpp.txt"; exit 1; }
fi
echo "gen-c --train $name: $batch x $seq tokens, compiles with cc -std=c11, every tensor byte-identical to fused train-step's"
