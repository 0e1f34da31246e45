#!/bin/sh
# usage: graph_cli.sh FUSED CONFIG_DIR WORK_DIR GRAPH_DATA_DIR
# `fused graph export` of every family as JSON and MessagePack, `fused graph check` of each, and
# `fused plan --graph` byte for byte `fused plan --config`, `fused gen-c --graph` file for file
# `fused gen-c --model`; a damaged file: exit 1, each violation a line; graphs with control flow run.
set -eu
fused=$1 configs=$2 work=$3 data=$4
rm -rf "$work"
mkdir -p "$work"
# fails ARGS...: runs fused, which must exit 1; its stdout and stderr are left in $work/out and $work/err.
fails() {
  set +e
  "$fused" "$@" >"$work/out" 2>"$work/err"
  rc=$?
  set -e
  [ $rc -eq 1 ] || { echo "fused $* exited $rc, expected 1"; cat "$work/err"; exit 1; }
}
# damaged FILE SED PATTERN: FILE edited by SED must fail `fused graph check` with a line matching PATTERN.
damaged() {
  sed "$2" "$1" >"$work/damaged.json"
  fails graph check "$work/damaged.json"
  grep -q "$3" "$work/out" || { echo "graph check of $1 edited by '$2': no line matching '$3'"; cat "$work/out"; exit 1; }
}
for c in qwen2-0.5b qwen3-0.6b llama-3.2-1b mistral-7b-v0.3; do
  for ext in json msgpack; do
    g="$work/$c.$ext"
    "$fused" graph export --config "$configs/$c.json" --out "$g" 2>/dev/null
    "$fused" graph check "$g" | grep -q ": ok: " || { echo "graph check $g failed"; exit 1; }
    for mode in "prefill --seq 100" "decode --ctx 300"; do
      "$fused" plan --config "$configs/$c.json" --mode $mode --format json >"$work/a"
      "$fused" plan --graph "$g" --mode $mode --format json >"$work/b"
      cmp -s "$work/a" "$work/b" || { echo "plan --graph $g --mode $mode differs from plan --config"; exit 1; }
    done
  done
done
# gen-c --graph: the C a decoder's graph file gives is the C its config gives, file for file.
for c in qwen3-0.6b llama-3.2-1b; do
  "$fused" gen-c --graph "$work/$c.msgpack" --out "$work/c_graph" --name m 2>/dev/null
  "$fused" gen-c --model "$configs/$c.json" --logits last --out "$work/c_model" --name m 2>/dev/null
  diff -r "$work/c_graph" "$work/c_model" >/dev/null || { echo "gen-c --graph $c differs from gen-c --model"; exit 1; }
  rm -rf "$work/c_graph" "$work/c_model"
done
# A damaged file: every violation on stdout, a summary on stderr, exit 1.
damaged "$work/qwen2-0.5b.json" 's/"op":"embed"/"op":"embedd"/; s/"target":"model.norm.weight"/"target":"model.norm.weight","bogus":1/' \
  'unknown field "bogus" in the data of a GetAttr node'
damaged "$work/qwen2-0.5b.json" 's/"op":"embed"/"op":"embedd"/' "^error: node 2: unknown-op: no op is registered as 'embedd' (closest: embed)\$"
# Valid node by node, but layer 0's attention reads its value cache as its key cache too: the check
# lowers what validates, and names the nodes.
damaged "$work/qwen2-0.5b.json" 's/{"source":18,"target":20,"name":"cache.layers.0.key.next","slot":1}/{"source":19,"target":20,"name":"cache.layers.0.value.next","slot":1}/' \
  "^error: graph: lowering: .*: node 20 'attention' reads 'cache.layers.0.value.next' as a value cache, but node 20 'attention' reads the same bytes as a key cache, and one set of bytes holds one layout\$"
# A Range wider than a dim may be: refused, not clamped (a plan could bind the symbol past 2^31).
damaged "$data/relu_mlp.json" 's/"max": 1024/"max": 1099511627776/' \
  '^error: constraints\[0\]: constraint: Range of "batch" has max 1099511627776; a dim is at most 2^31 = 2147483648$'
sed 's/"op":"embed"/"op":"embedd"/' "$work/qwen2-0.5b.json" >"$work/bad2.json"
fails plan --graph "$work/bad2.json" --mode prefill
[ ! -s "$work/out" ] && grep -q "unknown-op" "$work/err" || { echo "plan --graph of a damaged file"; cat "$work/err"; exit 1; }
# A hand-written graph (the FX relu MLP) runs to the values worked out by hand: y = [1.5, 9.5].
"$fused" graph run "$data/relu_mlp.json" --weights "$data/relu_mlp_weights.safetensors" --inputs "$data/relu_mlp_inputs.safetensors" \
  --out "$work/mlp.safetensors" 2>/dev/null
cmp "$work/mlp.safetensors" "$data/relu_mlp_expected.safetensors" || { echo "graph run of relu_mlp.json: unexpected output"; exit 1; }
# Weights that lack a parameter, or hold it in another shape: the file and the GetAttr's target named.
fails graph run "$data/relu_mlp.json" --weights "$data/relu_mlp_inputs.safetensors" --inputs "$data/relu_mlp_inputs.safetensors" \
  --out "$work/x.safetensors"
[ ! -s "$work/out" ] && grep -q 'relu_mlp_inputs.safetensors: no tensor "mlp.0.weight" (the graph.s GetAttr of that name)' "$work/err" ||
  { echo "graph run with weights that lack one"; cat "$work/err"; exit 1; }
python3 -c '
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
header["mlp.0.weight"]["shape"] = header["mlp.0.weight"]["shape"][::-1]
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + raw[8 + n:])' "$data/relu_mlp_weights.safetensors" "$work/transposed.safetensors"
fails graph run "$data/relu_mlp.json" --weights "$work/transposed.safetensors" --inputs "$data/relu_mlp_inputs.safetensors" \
  --out "$work/x.safetensors"
grep -q 'transposed.safetensors: tensor "mlp.0.weight" has shape \[2, 3\]; the graph.s GetAttr is \[3, 2\]' "$work/err" ||
  { echo "graph run with a weight of another shape"; cat "$work/err"; exit 1; }
# Inputs of another shape: the file's fault, named, whether a fixed dim differs or one gives its symbol
# a value outside the graph's Range (exit 1, not a usage error).
python3 -c '
import json, struct, sys
def write(path, rows, cols):
    header = json.dumps({"x": {"dtype": "F32", "shape": [rows, cols], "data_offsets": [0, 4 * rows * cols]}}).encode()
    header += b" " * (-len(header) % 8)
    open(path, "wb").write(struct.pack("<Q", len(header)) + header + bytes(4 * rows * cols))
write(sys.argv[1], 2, 3)
write(sys.argv[2], 2000, 2)' "$work/wrong_cols.safetensors" "$work/too_many_rows.safetensors"
fails graph run "$data/relu_mlp.json" --weights "$data/relu_mlp_weights.safetensors" --inputs "$work/wrong_cols.safetensors" --out "$work/x.safetensors"
grep -q 'wrong_cols.safetensors: tensor "x" has shape \[2, 3\]; the graph.s Input is \[batch, 2\] = \[2, 2\]' "$work/err" ||
  { echo "graph run with an input of another shape"; cat "$work/err"; exit 1; }
fails graph run "$data/relu_mlp.json" --weights "$data/relu_mlp_weights.safetensors" --inputs "$work/too_many_rows.safetensors" --out "$work/x.safetensors"
grep -q 'too_many_rows.safetensors: tensor "x" dim 0 gives symbol "batch" a value the graph refuses: .*2000' "$work/err" ||
  { echo "graph run with an input outside the Range"; cat "$work/err"; exit 1; }
# Control flow (the FX design's loop: x = x + 1, i = i + 1 while i < 10): from x = -3, x = 7 and i = 10.
"$fused" graph run "$data/count_to_ten.json" --inputs "$data/count_to_ten_inputs.safetensors" --out "$work/count.safetensors" 2>/dev/null
cmp "$work/count.safetensors" "$data/count_to_ten_expected.safetensors" || { echo "graph run of count_to_ten.json: unexpected output"; exit 1; }
# An Input the inputs file lacks (one with no symbol to bind): named with the file, not a cut-wire dump.
python3 -c 'import struct, sys; h = b"{}      "; open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h)' "$work/empty.safetensors"
fails graph run "$data/count_to_ten.json" --inputs "$work/empty.safetensors" --out "$work/x.safetensors"
grep -q "^fused graph run: error: $work/empty.safetensors: no tensor \"x\" (the graph's Input of that name)\$" "$work/err" ||
  { echo "graph run without its Input:"; cat "$work/err"; exit 1; }
# A state's next value (an Output that carries it) is not written by one run, and the summary says so.
"$fused" graph run "$data/state_add.json" --inputs "$data/state_add_inputs.safetensors" --out "$work/state.safetensors" 2>"$work/err"
grep -q '(1 outputs; not written: the state Output "s")' "$work/err" || { echo "graph run of state_add.json:"; cat "$work/err"; exit 1; }
"$fused" plan --graph "$data/count_to_ten.json" --mode prefill >"$work/plan.txt"
grep -q "region 0 loop at 5..7 (header 1 step) while 'running', at most 100 trips; 'x_now' <- 'x_next'; 'i_now' <- 'i_next'" "$work/plan.txt" ||
  { echo "plan --graph count_to_ten.json shows no loop"; cat "$work/plan.txt"; exit 1; }
"$fused" plan --graph "$data/count_to_ten.json" --mode prefill --format json | grep -q '"control":' || { echo "plan json has no control"; exit 1; }
# --seq / --ctx bind a decoder's symbols: on a graph without them they are refused, not ignored; a
# symbol bound twice is refused (exit 2, a usage error).
usage() {  # expected message, then the command's arguments
  local want=$1
  shift
  set +e
  "$fused" "$@" >"$work/out" 2>"$work/err"
  rc=$?
  set -e
  [ $rc -eq 2 ] && grep -q -- "$want" "$work/err" || { echo "fused $*: exit $rc, expected 2 and: $want"; cat "$work/err"; exit 1; }
}
usage '--seq binds the symbol "tokens", which .*relu_mlp.json does not declare' plan --graph "$data/relu_mlp.json" --mode prefill --bind batch=2 --seq 8
usage '--ctx binds the symbol "ctx", which .*relu_mlp.json does not declare' plan --graph "$data/relu_mlp.json" --mode prefill --bind batch=2 --ctx 8
usage '--bind binds batch twice (batch=2 and batch=3)' plan --graph "$data/relu_mlp.json" --mode prefill --bind batch=2 --bind batch=3
# --stop-ids end a generation: without --generate they are refused, not ignored. The extension picks
# the encoding whatever its case.
usage '--stop-ids end a generation: they need --generate' graph export --config "$configs/qwen2-0.5b.json" --stop-ids 1 --out "$work/x.json"
"$fused" graph export --config "$configs/qwen2-0.5b.json" --out "$work/upper.MSGPACK" 2>/dev/null
[ "$(head -c 1 "$work/upper.MSGPACK")" != "{" ] || { echo "graph export --out upper.MSGPACK wrote JSON"; exit 1; }
# A decoder's "tokens" is the mode's (decode: 1), and --ctx and --bind ctx are one setting.
g="$work/qwen2-0.5b.json"
usage '--bind tokens=5: --mode sets "tokens" (decode: 1; prefill: --seq)' plan --graph "$g" --mode decode --bind tokens=5
usage '--bind tokens=5: --mode sets "tokens"' plan --graph "$g" --mode prefill --bind tokens=5
usage '--bind ctx=5 and --ctx both set "ctx"' plan --graph "$g" --mode decode --bind ctx=5 --ctx 6
usage '--bind ctx=5 cannot hold the prefill of --seq 8 tokens' plan --graph "$g" --mode prefill --seq 8 --bind ctx=5
"$fused" plan --graph "$g" --mode decode --bind ctx=300 --format json >"$work/a"
"$fused" plan --graph "$g" --mode decode --ctx 300 --format json >"$work/b"
cmp -s "$work/a" "$work/b" || { echo "plan --graph: --bind ctx=300 differs from --ctx 300"; exit 1; }
# Without its weights: said so, naming the first parameter the graph reads.
usage 'the graph reads the parameter "mlp.0.weight" (a GetAttr node): give --weights' graph run "$data/relu_mlp.json" \
  --inputs "$data/relu_mlp_inputs.safetensors" --out "$work/x.safetensors"
usage '--bind binds batch twice (batch=2 and batch=3)' graph run "$data/relu_mlp.json" --weights "$data/relu_mlp_weights.safetensors" \
  --inputs "$data/relu_mlp_inputs.safetensors" --out "$work/x.safetensors" --bind batch=2 --bind batch=3
# A Loop without its bound, and a Merge of a node that is not a Conditional or Loop: refused by node and rule.
damaged "$data/count_to_ten.json" 's/"max_trips": 100/"max_tripz": 100/' '^error: node 4: format: a Loop states its bound, "max_trips"'
damaged "$data/count_to_ten.json" 's/"of": 4/"of": 0/' '^error: node 5: merge: "of" names node 0, which is not a Conditional or a Loop'
damaged "$data/count_to_ten.json" 's/"of": 4/"of": 99/' '^error: node 5: merge: "of" names node 99, which the graph does not have'
damaged "$data/count_to_ten.json" 's/"of": 4/"of": 18446744073709551615/' '"of" must be a non-negative integer up to 2^63 - 1, got 18446744073709551615'
damaged "$data/count_to_ten.json" 's/"body": \[/"body": [10, /' '^error: node 4: region: "body" lists Output node 10'
damaged "$data/count_to_ten.json" 's/"source": 7,/"source": 8,/' '^error: node 4: condition: the condition must be one bool'
damaged "$data/count_to_ten.json" 's/"source": 8,/"source": 4,/' '^error: node 4: control-edges: a Loop node has no value'
damaged "$data/count_to_ten.json" 's/"max_trips": 100/"max_trips": -1/' '^error: node 4: format: "max_trips" must be an integer in 0 .. 2^31'
damaged "$data/count_to_ten.json" 's/"Merge"/"Mergee"/' '^error: node 5: node-type: unknown node type "Mergee"'
damaged "$data/count_to_ten.json" 's/"target": 5/"target": 6/' '^error: node 6: one-producer: slot 0 has two producers'

# gen-c --graph of a graph whose metadata.model names no family's program: refused, saying why.
# (Without metadata.model a graph is printed as a program: tests/ir/program_c.sh.)
sed 's/"version": "1.0",/"version": "1.0", "model": {"model_type": "nosuch"},/' "$data/count_to_ten.json" >"$work/nosuch.json"
fails gen-c --graph "$work/nosuch.json" --out "$work/none"
grep -q 'metadata.model.model_type "nosuch" is not a family this build knows' "$work/err" || { echo "gen-c --graph of a non-decoder graph"; cat "$work/err"; exit 1; }
# metadata.options.logits is "last" or "all": anything else is named (plan printed it as given).
sed 's/"logits":"last"/"logits":"bogus"/' "$work/qwen2-0.5b.json" >"$work/bogus.json"
grep -q '"logits":"bogus"' "$work/bogus.json" || { echo "graph export wrote no options.logits"; exit 1; }
fails plan --graph "$work/bogus.json" --mode decode --ctx 64
grep -q 'metadata.options.logits must be "last" or "all", got "bogus"' "$work/err" || { echo "plan --graph of options.logits bogus"; cat "$work/err"; exit 1; }
echo "graph files: export, check, plan and gen-c agree for every family; relu_mlp.json and count_to_ten.json run"
