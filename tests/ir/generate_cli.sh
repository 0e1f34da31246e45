#!/bin/sh
# usage: generate_cli.sh FUSED MODEL_DIR WORK_DIR
# Generation as one program: `fused graph export --generate N` of the model, run by `fused graph run`
# (JSON and MessagePack), and `fused gen-c --generate N` built with cc, write the text
# `fused run --temp 0 -n N` writes for the same prompt; the generated main refuses weights that are
# not finite; a context too small for the prompt and N tokens is refused at the step that would pass it.
set -eu
fused=$1 model=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
prompt="In the beginning"
n=12
# The prompt's ids as the graph's Input, in a safetensors file.
ids=$("$fused" tokenize --tokenizer "$model/tokenizer.json" "$prompt")
python3 - "$ids" "$work/in.safetensors" <<'PY'
import json, struct, sys
ids = json.loads(sys.argv[1])
data = struct.pack("<%di" % len(ids), *ids)
head = json.dumps({"input_ids": {"dtype": "I32", "shape": [len(ids)], "data_offsets": [0, len(data)]}}).encode()
head += b" " * (-len(head) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(head)) + head + data)
PY
# The generated ids of an output file, as "1,2,3" (generated_count of them).
read_ids() {
  python3 - "$1" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
head, data = json.loads(b[8:8 + n]), b[8 + n:]
def ints(name):
    s, e = head[name]["data_offsets"]
    return struct.unpack("<%di" % ((e - s) // 4), data[s:e])
print(",".join(map(str, ints("generated")[:ints("generated_count")[0]])))
PY
}
want=$("$fused" run --model "$model" --temp 0 -n $n --prompt "$prompt" 2>/dev/null)
for ext in json msgpack; do
  "$fused" graph export --model "$model" --generate $n --out "$work/gen.$ext" 2>/dev/null
  "$fused" graph check "$work/gen.$ext" | grep -q ": ok: .* 1 conditionals, 1 loops" || { echo "graph check gen.$ext"; exit 1; }
  "$fused" graph run "$work/gen.$ext" --weights "$model" --inputs "$work/in.safetensors" --bind ctx=64 --out "$work/out.safetensors" 2>/dev/null
  got=$("$fused" detokenize --tokenizer "$model/tokenizer.json" "$(read_ids "$work/out.safetensors")")
  [ "$got" = "$want" ] || { echo "generation program ($ext): '$got', fused run: '$want'"; exit 1; }
done
# The same program as C (`fused gen-c --generate`): <name>_generate writes those ids too, in the
# release and the debug (canary) layouts.
"$fused" gen-c --model "$model" --out "$work/c" --name kjv --max-seq 32 --max-ctx 64 --generate $n 2>/dev/null
for layout in -DFUSED_RELEASE_LAYOUT -DFUSED_DEBUG_CANARIES; do
  cc -O2 -march=native -std=c11 -Wall -Wextra -Werror -pedantic $layout "$work/c/kjv.c" "$work/c/kjv_generate_main.c" -o "$work/kjv_generate" \
    -lm -fopenmp
  ids_c=$("$work/kjv_generate" --model "$model" --input-ids "$ids" 2>"$work/err") || { echo "kjv_generate ($layout)"; cat "$work/err"; exit 1; }
  got=$("$fused" detokenize --tokenizer "$model/tokenizer.json" "$ids_c")
  [ "$got" = "$want" ] || { echo "generated C ($layout): '$got', fused run: '$want'"; exit 1; }
done
# Weights that are not finite: the generated main refuses them before generating (the program picks
# its ids inside, so NaN logits would pass as the ids of their argmax), naming the tensor.
mkdir -p "$work/nan"
cp "$model"/*.json "$model"/model.safetensors "$work/nan/"
name=$(python3 - "$work/nan/model.safetensors" <<'PY'
import json, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[:8])[0]
head = json.loads(b[8:8 + n])
name = sorted(k for k, v in head.items() if k != "__metadata__" and v["dtype"] == "BF16")[0]
start = 8 + n + head[name]["data_offsets"][0]
b[start:start + 2] = struct.pack("<H", 0x7FC0)
open(sys.argv[1], "wb").write(b)
print(name)
PY
)
set +e
"$work/kjv_generate" --model "$work/nan" --input-ids "$ids" >"$work/out" 2>"$work/err"
rc=$?
set -e
[ $rc -eq 1 ] && [ ! -s "$work/out" ] && grep -q "kjv: .*: cannot generate from weights that are not finite: tensor \"$name\" holds NaN at element 0 (1 of" "$work/err" ||
  { echo "kjv_generate with a NaN weight: rc $rc"; cat "$work/out" "$work/err"; exit 1; }
# A context of 8 positions cannot hold 4 prompt tokens and 12 more: refused, naming the node.
set +e
"$fused" graph run "$work/gen.json" --weights "$model" --inputs "$work/in.safetensors" --bind ctx=8 --out "$work/x.safetensors" 2>"$work/err"
rc=$?
set -e
[ $rc -eq 1 ] && grep -q "node [0-9]*: positions 8..8 do not fit a KV cache of 8 positions" "$work/err" || { echo "ctx=8: rc $rc"; cat "$work/err"; exit 1; }
# gen-c --graph of the generation program: refused, pointing at --model DIR --generate N.
set +e
"$fused" gen-c --graph "$work/gen.json" --out "$work/c2" 2>"$work/err"
rc=$?
set -e
[ $rc -eq 1 ] && grep -q "a generation program (metadata.options.generate, .*fused gen-c --model DIR --generate N" "$work/err" && [ ! -e "$work/c2" ] ||
  { echo "gen-c --graph of a generation program: rc $rc"; cat "$work/err"; exit 1; }
# A scorer left in the directory by an earlier gen-c does not build against a model that returns
# the last position's logits only; the generate main does not build without --generate.
"$fused" gen-c --model "$model" --out "$work/c" --name kjv --max-seq 32 --max-ctx 64 --logits last 2>/dev/null
"$fused" gen-c --model "$model" --out "$work/c3" --name kjv --max-seq 32 --max-ctx 64 2>/dev/null
cp "$work/c3/kjv_main.c" "$work/c/"
cc -std=c11 -fsyntax-only "$work/c/kjv_main.c" 2>"$work/err" && { echo "a stale scorer built"; exit 1; }
grep -q "kjv_main.c needs kjv.h generated with --logits all" "$work/err" || { echo "stale scorer:"; cat "$work/err"; exit 1; }
cc -std=c11 -fsyntax-only "$work/c/kjv_generate_main.c" 2>"$work/err" && { echo "a stale generate main built"; exit 1; }
grep -q "kjv_generate_main.c needs kjv.h generated with --generate N" "$work/err" || { echo "stale generate main:"; cat "$work/err"; exit 1; }
echo "generate_cli: ok"
