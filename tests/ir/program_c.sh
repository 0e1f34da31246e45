#!/bin/sh
# usage: program_c.sh FUSED GRAPH_DATA_DIR WORK_DIR
# Graph programs as C: `fused gen-c --graph FILE` of the FX design's conditional and loop, a loop
# holding a conditional, nested loops, carries that swap and the relu MLP (parameters), built with cc; each run of <name>_main gives
# the tensors `fused graph run` gives for the same inputs, bit for bit. A graph with a step that has
# no C kernel is refused naming the step.
set -eu
fused=$1 data=$2 work=$3
here=$(dirname "$0")
rm -rf "$work"
mkdir -p "$work"
# gen_c NAME GRAPH [--bind ...]: the C of GRAPH built as $work/NAME/main.
gen_c() {
  name=$1 graph=$2
  shift 2
  "$fused" gen-c --graph "$graph" --out "$work/$name" --name "$name" "$@" 2>/dev/null
  cc -O2 -std=c11 -Wall -Wextra -Werror "$work/$name"/*.c -o "$work/$name/main" -lm -fopenmp
}
# same NAME GRAPH INPUTS [PARAMETERS]: the C and `fused graph run` agree on INPUTS.
same() {
  "$work/$1/main" "$3" "$work/c.safetensors" ${4:-}
  "$fused" graph run "$2" --inputs "$3" --out "$work/cpp.safetensors" ${4:+--weights "$4"} 2>/dev/null
  python3 "$here/tensors.py" same "$work/c.safetensors" "$work/cpp.safetensors" || { echo "$1: the C and graph run differ"; exit 1; }
}

gen_c relu_or_sigmoid "$data/relu_or_sigmoid.json"
grep -q "if (\*U8(RELU_OR_SIGMOID_RUN_POSITIVE)) {" "$work/relu_or_sigmoid/relu_or_sigmoid.c" || { echo "no if in the C"; exit 1; }
for x in 2.5 -1 0; do
  python3 "$here/tensors.py" write "$work/in.safetensors" "x=$x"
  same relu_or_sigmoid "$data/relu_or_sigmoid.json" "$work/in.safetensors"
done
# sigmoid(-1), as C computes it: the value, not only the agreement.
python3 "$here/tensors.py" write "$work/in.safetensors" "x=-1"
"$work/relu_or_sigmoid/main" "$work/in.safetensors" "$work/c.safetensors"
python3 - "$work/c.safetensors" <<'PY'
import math, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
y = struct.unpack("<f", data[8 + n:8 + n + 4])[0]
assert abs(y - 1 / (1 + math.exp(1))) < 1e-6, y
PY

gen_c count "$data/count_to_ten.json"
grep -q "for (size_t trip_0 = 0; trip_0 < 100; ++trip_0) {" "$work/count/count.c" || { echo "no for in the C"; exit 1; }
same count "$data/count_to_ten.json" "$data/count_to_ten_inputs.safetensors"
python3 "$here/tensors.py" same "$work/c.safetensors" "$data/count_to_ten_expected.safetensors"

gen_c stepping "$data/loop_with_conditional.json"
for x in 0 7.5 -20; do
  python3 "$here/tensors.py" write "$work/in.safetensors" "x=$x"
  same stepping "$data/loop_with_conditional.json" "$work/in.safetensors"
done
python3 "$here/tensors.py" write "$work/in.safetensors" "x=0"
"$work/stepping/main" "$work/in.safetensors" "$work/c.safetensors"
python3 "$here/tensors.py" write "$work/want.safetensors" "x=6" "i=10"  # by hand from 0: 3 6 5 8 7 6 5 8 7 6
python3 "$here/tensors.py" same "$work/c.safetensors" "$work/want.safetensors"

gen_c nested "$data/nested_loops.json"
grep -q "    for (size_t trip_1 = 0; trip_1 < 4; ++trip_1) {" "$work/nested/nested.c" || { echo "no inner for in the C"; exit 1; }
python3 "$here/tensors.py" write "$work/in.safetensors" "x=1,-2.5"
same nested "$data/nested_loops.json" "$work/in.safetensors"
python3 "$here/tensors.py" write "$work/want.safetensors" "y=16,12.5"  # 3 x (4 + 1) = 15 added
python3 "$here/tensors.py" same "$work/c.safetensors" "$work/want.safetensors"

gen_c swap "$data/swap_carries.json"
grep -q "SWAP_STAGING_OFFSET" "$work/swap/swap.c" || { echo "the swap is not staged"; exit 1; }
python3 "$here/tensors.py" write "$work/in.safetensors" "a=5,6,7" "b=7,8,9"
same swap "$data/swap_carries.json" "$work/in.safetensors"
python3 "$here/tensors.py" write "$work/want.safetensors" "a=7,8,9" "b=5,6,7" "n=4"  # 3 trips: swapped
python3 "$here/tensors.py" same "$work/c.safetensors" "$work/want.safetensors"

gen_c mlp "$data/relu_mlp.json" --bind batch=2
same mlp "$data/relu_mlp.json" "$data/relu_mlp_inputs.safetensors" "$data/relu_mlp_weights.safetensors"
python3 "$here/tensors.py" same "$work/c.safetensors" "$data/relu_mlp_expected.safetensors"
# Inputs of another shape, and a missing parameter file: refused, naming the tensor.
if "$work/mlp/main" "$data/count_to_ten_inputs.safetensors" "$work/c.safetensors" "$data/relu_mlp_weights.safetensors" 2>"$work/err"; then
  echo "mlp ran on the wrong inputs"; exit 1
fi
grep -q 'tensor "x" is F32 of rank 1; the input is F32 of rank 2' "$work/err" || { echo "wrong inputs:"; cat "$work/err"; exit 1; }
if "$work/mlp/main" "$data/relu_mlp_inputs.safetensors" "$work/c.safetensors" 2>"$work/err"; then echo "mlp ran without parameters"; exit 1; fi
grep -q "parameters: name their .safetensors file" "$work/err" || { cat "$work/err"; exit 1; }
# The parameter files: split in two (each parameter once), widened to F32 (rounded back as graph run
# rounds them), with a tensor that is no parameter, or with one twice.
python3 - "$data/relu_mlp_weights.safetensors" "$work" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head, data = json.loads(raw[8:8 + n]), raw[8 + n:]
tensors = {k: v for k, v in head.items() if k != "__metadata__"}
def write(path, entries):  # entries: name -> (dtype, shape, bytes)
    h, blob = {}, b""
    for name, (dtype, shape, b) in entries.items():
        h[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(b)]}
        blob += b
    text = json.dumps(h).encode()
    text += b" " * (-len(text) % 8)
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + blob)
def entry(name):
    v = tensors[name]
    return (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
names = sorted(tensors)
write(sys.argv[2] + "/part1.safetensors", {k: entry(k) for k in names[:1]})
write(sys.argv[2] + "/part2.safetensors", {k: entry(k) for k in names[1:]})
def widened(name):
    dtype, shape, b = entry(name)
    assert dtype == "BF16"
    halves = struct.unpack("<%dH" % (len(b) // 2), b)
    return ("F32", shape, struct.pack("<%dI" % len(halves), *[h << 16 for h in halves]))
write(sys.argv[2] + "/f32.safetensors", {k: widened(k) for k in names})
write(sys.argv[2] + "/junk.safetensors", {"junk": ("F32", [1], struct.pack("<f", 1.0))})
PY
"$work/mlp/main" "$data/relu_mlp_inputs.safetensors" "$work/c.safetensors" "$work/part1.safetensors" "$work/part2.safetensors"
python3 "$here/tensors.py" same "$work/c.safetensors" "$data/relu_mlp_expected.safetensors"
same mlp "$data/relu_mlp.json" "$data/relu_mlp_inputs.safetensors" "$work/f32.safetensors"
python3 "$here/tensors.py" same "$work/c.safetensors" "$data/relu_mlp_expected.safetensors"
if "$work/mlp/main" "$data/relu_mlp_inputs.safetensors" "$work/c.safetensors" "$data/relu_mlp_weights.safetensors" "$work/junk.safetensors" 2>"$work/err"; then
  echo "mlp took a tensor that is no parameter"; exit 1
fi
grep -q 'junk.safetensors: tensor "junk" is not a parameter of the program' "$work/err" || { cat "$work/err"; exit 1; }
if "$work/mlp/main" "$data/relu_mlp_inputs.safetensors" "$work/c.safetensors" "$data/relu_mlp_weights.safetensors" "$work/part1.safetensors" 2>"$work/err"; then
  echo "mlp took a parameter twice"; exit 1
fi
grep -q 'part1.safetensors: tensor ".*" is in more than one parameter file' "$work/err" || { cat "$work/err"; exit 1; }
if "$work/mlp/main" "$data/relu_mlp_inputs.safetensors" "$work/c.safetensors" "$work/part2.safetensors" 2>"$work/err"; then
  echo "mlp ran with a parameter missing"; exit 1
fi
grep -q 'part2.safetensors: no tensor ".*" (the parameter of that name)' "$work/err" || { cat "$work/err"; exit 1; }

# A step with no C kernel (softmax runs as a host function): refused, naming it.
sed 's/"op": "relu"/"op": "softmax"/' "$data/relu_or_sigmoid.json" >"$work/softmax.json"
if "$fused" gen-c --graph "$work/softmax.json" --out "$work/softmax" 2>"$work/err"; then echo "gen-c took a host step"; exit 1; fi
grep -q "'softmax' (result 'r') has no C kernel here" "$work/err" || { echo "host step:"; cat "$work/err"; exit 1; }
echo "program_c: ok"
