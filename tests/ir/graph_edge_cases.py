#!/usr/bin/env python3
"""usage: graph_edge_cases.py FUSED WORK_DIR

Graph files at the edges a probe found, each through `fused graph run` and through `fused gen-c
--graph` built with cc (the two must agree, or refuse with the same sentence):
  - a symbolic last dim (["b"], ["2*b"]): every element computed, not the symbol's coefficient;
  - relu of NaN is NaN (as in PyTorch);
  - a Conditional whose branches are both empty, its condition computed by a Call: runs (no crash);
  - an Output of an Input, of a GetAttr, of a state Input whose next value is computed in place:
    each a copy (the feed keeps its bytes and role; the output holds the value the file had);
  - a state Input read after its next value is computed on its bytes: refused, naming both nodes;
  - a Loop carrying a state, its Merge also an Output: runs (a copy, as for feeds); its body reading
    the state Input the carry wrote over, or the carry after its next value was written over it, or
    a next value not on the state's bytes: refused;
  - names holding quotes, newlines and "*/": the C compiles, runs nothing a name holds, and writes
    the names back exactly;
  - an embed id outside the table: refused by both, naming the step, the id and its row;
  - a state Input given in the inputs file: the C reads it as graph run does; a tensor no Input
    names: refused by both;
  - an Input or Output named "__metadata__": refused by `graph check` (reserved-name).
"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tensors  # noqa: E402  (tests/ir/tensors.py)

fused, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
failures = []


def check(label, ok, detail=""):
    print(("ok    " if ok else "FAIL  ") + label + (": " + detail if detail and not ok else ""))
    if not ok:
        failures.append(label)


def graph(name, nodes, edges, symbols=()):
    path = os.path.join(work, name + ".json")
    ids = lambda kind: [n["id"] for n in nodes if n["type"] == kind]
    doc = {"metadata": {"version": "1.0"}, "symbols": [{"name": s} for s in symbols], "constraints": [], "nodes": nodes,
           "edges": [{"source": a, "target": b, "name": "v", "slot": s} for a, b, s in edges], "inputs": ids("Input"), "outputs": ids("Output")}
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def inp(i, name, shape, dtype="f32", state=False):
    data = {"name": name, "dtype": dtype, "shape": shape}
    if state:
        data["state"] = True
    return {"id": i, "type": "Input", "data": data}


def call(i, op, name, **attributes):
    return {"id": i, "type": "Call", "data": {"op": op, "attributes": attributes, "name": name}}


def out(i, name, carries=None):
    data = {"name": name}
    if carries is not None:
        data["carries"] = carries
    return {"id": i, "type": "Output", "data": data}


def write_tensors(path, tensors):
    """tensors: name -> (dtype, shape, values)"""
    header, body = {}, b""
    fmt = {"F32": "f", "I32": "i", "BF16": "H"}
    for name, (dtype, shape, values) in tensors.items():
        blob = struct.pack("<%d%s" % (len(values), fmt[dtype]), *values)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(body), len(body) + len(blob)]}
        body += blob
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + body)
    return path


def read_tensors(path):
    """name -> the values (tensors.py reads the bytes)"""
    fmt = {"F32": "f", "I32": "i", "BF16": "H", "BOOL": "?"}
    return {k: list(struct.unpack("<%d%s" % (len(raw) // struct.calcsize(fmt[dtype]), fmt[dtype]), raw)) for k, (dtype, _, raw) in tensors.read(path).items()}


def run(args):
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, (r.stderr.strip().splitlines() or [""])[-1]


def both(label, path, inputs, weights=None, binds=()):
    """Runs PATH through graph run and its generated C; returns (rc, outputs or message) of each."""
    results = []
    o = os.path.join(work, "cpp.safetensors")
    args = [fused, "graph", "run", path, "--inputs", inputs, "--out", o] + (["--weights", weights] if weights else [])
    for b in binds:
        args += ["--bind", b]
    rc, _, msg = run(args)
    results.append((rc, read_tensors(o) if rc == 0 else msg.removeprefix("fused graph run: error: ")))
    name = "prog_" + label
    gen = os.path.join(work, name)
    rc, _, msg = run([fused, "gen-c", "--graph", path, "--out", gen, "--name", name] + [a for b in binds for a in ("--bind", b)])
    if rc != 0:
        results.append((rc, "gen-c: " + msg))
        return results
    rc, _, msg = run(["cc", "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror"] + [os.path.join(gen, f) for f in os.listdir(gen) if f.endswith(".c")] +
                     ["-o", os.path.join(gen, "main"), "-lm", "-fopenmp"])
    if rc != 0:
        results.append((rc, "cc: " + msg))
        return results
    o = os.path.join(work, "c.safetensors")
    rc, stdout, msg = run([os.path.join(gen, "main"), inputs, o] + ([weights] if weights else []))
    results.append((rc, read_tensors(o) if rc == 0 else msg.removeprefix(name + ": "), stdout))
    return results


# A symbolic last dim.
g = graph("symbolic_last_dim", [inp(0, "x", ["b"]), inp(1, "y", ["2*b"]), call(2, "relu", "r"), call(4, "add", "s"), out(5, "r"), out(6, "s")],
          [(0, 2, 0), (2, 5, 0), (1, 4, 0), (1, 4, 1), (4, 6, 0)], symbols=["b"])
inputs = write_tensors(os.path.join(work, "sym_in.safetensors"), {"x": ("F32", [4], [1, -2, 3, 4]), "y": ("F32", [8], list(range(8)))})
cpp, c = both("sym", g, inputs, binds=["b=4"])
want = {"r": [1, 0, 3, 4], "s": [2 * v for v in range(8)]}
check("a symbolic last dim: graph run computes every element", cpp[0] == 0 and cpp[1] == want, str(cpp))
check("a symbolic last dim: the C computes every element", c[0] == 0 and c[1] == want, str(c))

# relu keeps a NaN, as PyTorch's does (x > 0 is false for NaN: it was 0).
inputs = write_tensors(os.path.join(work, "nan_in.safetensors"), {"x": ("F32", [4], [float("nan"), -1, 2, -0.0]), "y": ("F32", [8], [0] * 8)})
for label, result in zip(("graph run", "the C"), both("nan", g, inputs, binds=["b=4"])):
    r = result[1].get("r", []) if result[0] == 0 else []
    check(f"relu of NaN: {label} keeps it", len(r) == 4 and math.isnan(r[0]) and r[1:] == [0, 2, 0], str(result))

# A Conditional with two empty branches, its condition computed by a Call.
g = graph("empty_branches", [inp(0, "x", [1]), call(1, "zeros", "z", shape=[1]), call(2, "gt", "pos"),
                             {"id": 3, "type": "Conditional", "data": {"name": "pick", "then": [], "else": []}},
                             {"id": 5, "type": "Merge", "data": {"name": "y", "of": 3}}, out(6, "y")],
          [(0, 2, 0), (1, 2, 1), (2, 3, 0), (0, 5, 0), (0, 5, 1), (5, 6, 0)])
rc, _, msg = run([fused, "graph", "check", g])
check("empty branches: graph check", rc == 0, msg)
inputs = write_tensors(os.path.join(work, "x_in.safetensors"), {"x": ("F32", [1], [2.5])})
cpp, c = both("empty", g, inputs)
check("empty branches: both run, y = x", cpp[1] == {"y": [2.5]} and c[1] == {"y": [2.5]}, f"{cpp} {c}")

# Outputs of feeds: an Input, a GetAttr, a state Input whose next value is computed in place.
g = graph("feed_outputs", [inp(0, "x", [2]), {"id": 1, "type": "GetAttr", "data": {"target": "w", "dtype": "bf16", "shape": [2]}},
                           inp(2, "s", [2], state=True), call(3, "add", "s_next"), out(4, "x_out"), out(5, "w_out"),
                           out(6, "s_before"), out(7, "s", carries=2), out(8, "s_after")],
          [(0, 4, 0), (1, 5, 0), (2, 6, 0), (2, 3, 0), (0, 3, 1), (3, 7, 0), (3, 8, 0)])
inputs = write_tensors(os.path.join(work, "feeds_in.safetensors"), {"x": ("F32", [2], [1, -1]), "s": ("F32", [2], [10, 20])})
weights = write_tensors(os.path.join(work, "feeds_w.safetensors"), {"w": ("BF16", [2], [0x3F80, 0x4000])})
cpp, c = both("feeds", g, inputs, weights)
want = {"x_out": [1, -1], "w_out": [0x3F80, 0x4000], "s_before": [10, 20], "s_after": [11, 19]}
check("outputs of feeds: graph run", cpp[0] == 0 and cpp[1] == want, str(cpp))
check("outputs of feeds: the C", c[0] == 0 and c[1] == want, str(c))

# A state read after its next value is computed on its bytes.
g = graph("state_read_after", [inp(0, "x", [1]), inp(1, "s", [1], state=True), call(2, "add", "s_next"), call(5, "mul", "w"),
                               out(3, "s", carries=1), out(4, "w")],
          [(1, 2, 0), (0, 2, 1), (2, 3, 0), (1, 5, 0), (2, 5, 1), (5, 4, 0)])
rc, stdout, _ = run([fused, "graph", "check", g])
check("a state read after its in-place update: graph check names both nodes", rc == 1 and "node 5 reads state Input 's' after node 2 writes over" in stdout,
      stdout)

# A Loop carrying a state: x = x + 1 while i < 10, x a state Input whose Merge (the carry, on the
# state's bytes) an Output also reads (a copy: the plan verified, and held 7 from -3).
loop = lambda i, body: {"id": i, "type": "Loop", "data": {"name": "count", "body": body, "max_trips": 100}}
merge = lambda i, name, of: {"id": i, "type": "Merge", "data": {"name": name, "of": of}}
nodes = [inp(0, "x", [1], state=True), call(1, "zeros", "i0", shape=[1]), call(2, "full", "one", value=1.0, shape=[1]),
         call(3, "full", "ten", value=10.0, shape=[1]), loop(4, [5, 6, 7, 8, 9]), merge(5, "x_now", 4), merge(6, "i_now", 4),
         call(7, "lt", "running"), call(8, "add", "x_next"), call(9, "add", "i_next"), out(10, "x", carries=0), out(11, "i"),
         out(12, "x_seen")]
edges = [(0, 5, 0), (8, 5, 1), (1, 6, 0), (9, 6, 1), (6, 7, 0), (3, 7, 1), (7, 4, 0), (5, 8, 0), (2, 8, 1), (6, 9, 0), (2, 9, 1),
         (5, 10, 0), (6, 11, 0), (5, 12, 0)]
g = graph("state_loop", nodes, edges)
cpp, c = both("state_loop", g, write_tensors(os.path.join(work, "state_loop_in.safetensors"), {"x": ("F32", [1], [-3])}))
check("a loop carrying a state, its Merge an Output too: graph run", cpp[0] == 0 and cpp[1] == {"i": [10], "x_seen": [7]}, str(cpp))
check("a loop carrying a state, its Merge an Output too: the C", c[0] == 0 and c[1] == {"i": [10], "x_seen": [7]}, str(c))
# The body reading the state Input itself, whose bytes the carry took: refused, naming both nodes.
g = graph("state_loop_reads_state", nodes, [e if e != (2, 8, 1) else (0, 8, 1) for e in edges])
rc, stdout, _ = run([fused, "graph", "check", g])
check("a loop body reading a state its carry took: refused", rc == 1 and "node 8 reads state Input 'x' after node 5 writes over" in stdout, stdout)
# A body node reading the carry after the step that wrote the next value over it: refused.
late = [n if n["id"] != 4 else loop(4, [5, 6, 7, 8, 9, 13]) for n in nodes] + [call(13, "mul", "z")]
g = graph("state_loop_reads_carry_late", late, [e for e in edges if e != (2, 9, 1)] + [(5, 13, 0), (2, 13, 1), (13, 9, 1)])
rc, stdout, _ = run([fused, "graph", "check", g])
check("a loop body reading a state's carry after its update: refused",
      rc == 1 and "node 13 reads 'x_now' (on a state's bytes) after node 8 writes over" in stdout, stdout)
# A next value not computed on the state's bytes (add's second operand): refused, naming the Output.
g = graph("state_not_in_place", [inp(0, "x", [1], state=True), call(1, "full", "one", value=1.0, shape=[1]), call(2, "add", "y"),
                                 out(3, "x", carries=0)], [(1, 2, 0), (0, 2, 1), (2, 3, 0)])
rc, stdout, _ = run([fused, "graph", "check", g])
check("a state's next value off its bytes: refused", rc == 1 and "node 3 carries state Input 'x', but its value, 'y' (node 2), is not computed on" in stdout,
      stdout)

# Names that would break C (or run in it): quotes, a newline, a comment's end.
evil = 'r */ puts("INJECTED"); /* \n "q" \\'
g = graph("names", [inp(0, "x", [2]), call(1, "relu", evil), out(2, evil)], [(0, 1, 0), (1, 2, 0)])
cpp, c = both("names", g, write_tensors(os.path.join(work, "names_in.safetensors"), {"x": ("F32", [2], [1, -1])}))
check("names: graph run", cpp[0] == 0 and cpp[1] == {evil: [1, 0]}, str(cpp))
check("names: the C compiles, runs nothing a name holds, writes the name back", c[0] == 0 and c[1] == {evil: [1, 0]} and "INJECTED" not in c[2], str(c))

# An embed id outside the table.
g = graph("embed", [inp(0, "ids", [3], "i32"), {"id": 1, "type": "GetAttr", "data": {"target": "emb", "dtype": "bf16", "shape": [4, 2]}},
                    call(2, "embed", "e"), out(3, "e")], [(0, 2, 0), (1, 2, 1), (2, 3, 0)])
weights = write_tensors(os.path.join(work, "emb.safetensors"), {"emb": ("BF16", [4, 2], [0x3F80] * 8)})
for ids in ([0, 4, 1], [0, 100000000, -100000000]):
    cpp, c = both("embed", g, write_tensors(os.path.join(work, "ids.safetensors"), {"ids": ("I32", [3], ids)}), weights)
    message = f"node 2: token id {ids[1]} (row 1) is outside the embedding table [0, 4)"
    check(f"an embed id {ids[1]}: refused by both", cpp == (1, message) and c[:2] == (1, message), f"{cpp} {c}")

# An arena larger than any machine's memory (4 TiB of zeros): named before it is allocated.
g = graph("huge", [call(1, "zeros", "z", shape=[1048576, 1048576]), out(2, "z")], [(1, 2, 0)])
rc, _, msg = run([fused, "graph", "run", g, "--inputs", write_tensors(os.path.join(work, "none.safetensors"), {}),
                  "--out", os.path.join(work, "huge_out.safetensors")])
check("a 4 TiB arena: refused before allocating", rc == 1 and "its state and activation arena under this binding take 4096.0 GiB; this machine has" in msg and
      not os.path.exists(os.path.join(work, "huge_out.safetensors")), msg)

# 12,000 Inputs, each live from the call's start to the add that reads it: 72 million pairs of
# overlapping lifetimes, past the planner's limit (2^26); refused with a sentence, not ~0.6 GB of lists.
n = 12000
wide = [inp(i, f"x{i}", [4]) for i in range(n)] + [call(n + i, "add", f"a{i}") for i in range(1, n)] + [out(2 * n, "sum")]
wide_edges = [(0 if i == 1 else n + i - 1, n + i, 0) for i in range(1, n)] + [(i, n + i, 1) for i in range(1, n)] + [(2 * n - 1, 2 * n, 0)]
g = graph("many_live", wide, wide_edges)
rc, _, msg = run([fused, "plan", "--graph", g, "--mode", "prefill"])
check("12,000 values live at once: refused by the planner, naming one", rc == 1 and "too many values live at once to plan: " in msg and
      "'x0' alone overlaps" in msg, msg)

# State given in the inputs file; a tensor no Input names.
g = graph("state", [inp(0, "x", [1]), inp(1, "s", [1], state=True), call(2, "add", "s_next"), out(3, "s", carries=1), out(4, "total")],
          [(1, 2, 0), (0, 2, 1), (2, 3, 0), (2, 4, 0)])
cpp, c = both("state", g, write_tensors(os.path.join(work, "state_in.safetensors"), {"x": ("F32", [1], [3]), "s": ("F32", [1], [10])}))
check("a state Input given: both start from it", cpp[1] == {"total": [13]} and c[1] == {"total": [13]}, f"{cpp} {c}")
cpp, c = both("state", g, write_tensors(os.path.join(work, "typo_in.safetensors"), {"x": ("F32", [1], [3]), "S": ("F32", [1], [10])}))
check("a tensor no Input names: refused by both", cpp[0] == 1 and 'tensor "S" is not an Input of the graph' in cpp[1] and c[0] == 1 and
      'tensor "S" is not an input of the program' in c[1], f"{cpp} {c}")

# Reserved names.
g = graph("reserved", [inp(0, "__metadata__", [1]), call(1, "relu", "r"), out(2, "__metadata__")], [(0, 1, 0), (1, 2, 0)])
rc, stdout, _ = run([fused, "graph", "check", g])
check("__metadata__ as an Input and an Output name: both refused", rc == 1 and stdout.count("reserved-name") == 2, stdout)

# A name holding NUL: every C string it travels as would cut it short (an Output "y\0z" was written as "y").
g = graph("nul_name", [inp(0, "a\u0000b", [1]), call(1, "relu", "r"), out(2, "y\u0000z")], [(0, 1, 0), (1, 2, 0)])
rc, stdout, _ = run([fused, "graph", "check", g])
check("names holding NUL: refused", rc == 1 and stdout.count("name holds a NUL character") == 2, stdout)

# RoPE and attention take a head_dim up to the kernels' 128 (they keep a head's row on the stack): more
# is refused by graph check, naming the node, not left to corrupt the stack at run time.
for hd in (130, 256):
    g = graph(f"rope_hd{hd}", [inp(0, "x", [3, 2 * hd]), call(1, "rope", "r", heads=2, head_dim=hd, theta=10000.0), out(2, "y")], [(0, 1, 0), (1, 2, 0)])
    rc, stdout, _ = run([fused, "graph", "check", g])
    check(f"rope with head_dim {hd}: refused by graph check", rc == 1 and f"head_dim {hd} is more than the kernels take (128)" in stdout and "node 1" in stdout, stdout)

# An Input dim that gives its symbol no value is the inputs file's fault (exit 1), named.
g = graph("two_n", [inp(0, "y", ["2*n"]), call(1, "relu", "r"), out(2, "z")], [(0, 1, 0), (1, 2, 0)], symbols=["n"])
for size in (3, 0):
    rc, _, msg = run([fused, "graph", "run", g, "--inputs", write_tensors(os.path.join(work, "two_n.safetensors"), {"y": ("F32", [size], [1.0] * size)}),
                      "--out", os.path.join(work, "two_n_out.safetensors")])
    check(f"an Input [2*n] fed {size} values: the file's fault", rc == 1 and f'tensor "y" dim 0 is {size}; the graph\'s Input is [2*n], which needs a positive multiple of 2' in msg, f"{rc} {msg}")

sys.exit(1 if failures else 0)
