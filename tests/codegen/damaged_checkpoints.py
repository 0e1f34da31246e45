#!/usr/bin/env python3
"""usage: damaged_checkpoints.py FUSED SCORER NAME MODEL_DIR WORK_DIR

A generated scorer (SCORER, built from MODEL_DIR's config as NAME) and `fused score` read the same
damaged and unusual checkpoints the same way: each is refused by both with the same sentence, or
read by both with the logits of the intact checkpoint, byte for byte. And a config.json that is not
the one the scorer was generated for (another RoPE) is refused by the scorer, naming the field,
while the same config in the other transformers layout (4's or 5's) is accepted.
"""
import json
import os
import shutil
import struct
import subprocess
import sys

fused, scorer, name, model, work = sys.argv[1:6]
ARGS = ["--input-ids", "1,2,3", "--continue-ids", "4,5"]


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def write_safetensors(path, header, data, pad=b" ", length_mod8=0):
    text = json.dumps(header, separators=(",", ":")).encode()
    while len(text) % 8 != length_mod8:
        text += pad
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


header, data = read_safetensors(os.path.join(model, "model.safetensors"))
names = sorted(k for k in header if k != "__metadata__")


def variant(label):
    d = os.path.join(work, label)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for f in os.listdir(model):
        if f != "model.safetensors" and os.path.isfile(os.path.join(model, f)):
            shutil.copy(os.path.join(model, f), d)
    return d


def shards(d, weight_map_edit=None):
    """Two shards and their index; weight_map_edit(map) may lie in it."""
    halves = [names[:len(names) // 2], names[len(names) // 2:]]
    files = [f"model-0000{i + 1}-of-00002.safetensors" for i in range(2)]
    weight_map = {}
    for keys, file in zip(halves, files):
        part, out = {}, b""
        for k in keys:
            begin, end = header[k]["data_offsets"]
            part[k] = dict(header[k], data_offsets=[len(out), len(out) + end - begin])
            out += data[begin:end]
            weight_map[k] = file
        write_safetensors(os.path.join(d, file), part, out)
    if weight_map_edit:
        weight_map_edit(weight_map)
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)


def run(cmd, out):
    if os.path.exists(out):
        os.remove(out)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return r.returncode, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "", out if r.returncode == 0 else None


def score_both(d):
    cpp = run([fused, "score", "--model", d, *ARGS, "--out", os.path.join(work, "cpp.safetensors")], os.path.join(work, "cpp.safetensors"))
    c = run([scorer, "--model", d, *ARGS, "--out", os.path.join(work, "c.safetensors")], os.path.join(work, "c.safetensors"))
    return cpp, c


failures = []


def check(label, ok, detail):
    print(("ok    " if ok else "FAIL  ") + label + (": " + detail if detail else ""))
    if not ok:
        failures.append(label)


os.makedirs(work, exist_ok=True)
(cpp_rc, _, cpp_out), (c_rc, _, c_out) = score_both(model)
assert cpp_rc == 0 and c_rc == 0, "the intact checkpoint must score"
intact = {"cpp": open(cpp_out, "rb").read(), "c": open(c_out, "rb").read()}


def expect_same_logits(label, d):
    (cpp_rc, cpp_msg, cpp_out), (c_rc, c_msg, c_out) = score_both(d)
    same = cpp_rc == 0 and c_rc == 0 and open(cpp_out, "rb").read() == intact["cpp"] and open(c_out, "rb").read() == intact["c"]
    check(label, same, "" if same else f"fused score rc {cpp_rc} ({cpp_msg}); scorer rc {c_rc} ({c_msg})")


def expect_refused(label, d, words):
    (cpp_rc, cpp_msg, _), (c_rc, c_msg, _) = score_both(d)
    cpp_text = cpp_msg.removeprefix("fused score: error: ")
    c_text = c_msg.removeprefix(name + ": ")
    same = cpp_rc == 1 and c_rc == 1 and cpp_text == c_text and words in c_text
    check(label, same, c_text if same else f"fused score rc {cpp_rc}: {cpp_msg!r}; scorer rc {c_rc}: {c_msg!r}")


# A header padded with NULs (some third-party writers do): not JSON; the reference loader refuses it.
d = variant("nul_padded")
text = json.dumps(header, separators=(",", ":")).encode()
text += b"\0" * (8 - len(text) % 8 or 8)
with open(os.path.join(d, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + data)
expect_refused("a header padded with NULs", d, "NUL byte")

# A header length 2 short, the JSON padded with spaces so that it still parses: every tensor would be
# read 2 bytes early (silent garbage). The data area then outlasts the tensors: refused by both, as
# the reference loader refuses it; so are bytes appended after the last tensor.
d = variant("header_length_short")
text = json.dumps(header, separators=(",", ":")).encode() + b" " * 8
with open(os.path.join(d, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(text) - 2) + text + data)
expect_refused("a header length 2 bytes short", d, "2 bytes past the last tensor")
d = variant("bytes_appended")
write_safetensors(os.path.join(d, "model.safetensors"), header, data + b"\0" * 1000)
expect_refused("1000 bytes appended", d, "1000 bytes past the last tensor")

# A header of odd length: every BF16 tensor at an odd file offset, legal and read as any other.
d = variant("odd_offsets")
write_safetensors(os.path.join(d, "model.safetensors"), header, data, length_mod8=3)
expect_same_logits("tensors at odd offsets", d)

d = variant("sharded")
shards(d)
expect_same_logits("two shards", d)
d = variant("index_omits_a_tensor")
shards(d, lambda m: m.pop(names[1]))  # transformers loads whole shards: the map says which files
expect_same_logits("an index that leaves out a tensor its shard holds", d)
d = variant("index_wrong_shard")
shards(d, lambda m: m.update({names[0]: "model-00002-of-00002.safetensors"}))
expect_refused("an index that puts a tensor in the wrong shard", d, "which does not contain it")
d = variant("index_ghost")
shards(d, lambda m: m.update({"model.layers.99.ghost.weight": "model-00001-of-00002.safetensors"}))
expect_refused("an index that lists a tensor no shard holds", d, "which does not contain it")

# A NaN in a weight: refused with the logits, naming the tensor, not written out.
d = variant("nan_weight")
poisoned = bytearray(data)
begin = header[names[0]]["data_offsets"][0]
assert header[names[0]]["dtype"] == "BF16"
poisoned[begin:begin + 2] = b"\xc0\x7f"
write_safetensors(os.path.join(d, "model.safetensors"), header, bytes(poisoned))
expect_refused("a NaN in a weight", d, f'its tensor "{names[0]}" holds NaN at element 0')

# A weight in a float type neither reads (F64): refused, naming the file and the tensor.
d = variant("f64_weight")
wide, blob = {}, b""
for k in names:
    begin, end = header[k]["data_offsets"]
    chunk = b"\0" * (4 * (end - begin)) if k == names[0] else data[begin:end]
    wide[k] = dict(header[k], dtype="F64" if k == names[0] else header[k]["dtype"], data_offsets=[len(blob), len(blob) + len(chunk)])
    blob += chunk
write_safetensors(os.path.join(d, "model.safetensors"), wide, blob)
expect_refused("a weight stored as F64", d, f'model.safetensors: tensor "{names[0]}" has dtype F64; only BF16, F16 and F32 are read')

# RoPE's inverse frequencies as older conversions stored them: ignored, as transformers ignores them.
d = variant("inv_freq")
blob = struct.pack("<4f", 1.0, 0.5, 0.25, 0.125)
write_safetensors(os.path.join(d, "model.safetensors"),
                  dict(header, **{"model.layers.0.self_attn.rotary_emb.inv_freq": {"dtype": "F32", "shape": [4], "data_offsets": [len(data), len(data) + 16]}}),
                  data + blob)
expect_same_logits("a stored rotary_emb.inv_freq, ignored", d)

# A tied model's stored lm_head.weight: ignored as transformers ignores it, unless its shape is not
# the embedding's (transformers refuses that: a size mismatch).
if json.load(open(os.path.join(model, "config.json"))).get("tie_word_embeddings") and "lm_head.weight" not in header:
    embed = header["model.embed_tokens.weight"]
    for label, shape in (("a tied lm_head.weight, ignored", embed["shape"]), ("a tied lm_head.weight of another shape", [2, embed["shape"][1]])):
        blob = b"\0\0" * (shape[0] * shape[1])
        d = variant("tied_head_%d" % shape[0])
        write_safetensors(os.path.join(d, "model.safetensors"),
                          dict(header, **{"lm_head.weight": {"dtype": "BF16", "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}}), data + blob)
        if shape == embed["shape"]:
            expect_same_logits(label, d)
        else:
            expect_refused(label, d, 'tensor "lm_head.weight" has shape [2, %d], the model needs [%d, %d]' % (shape[1], *embed["shape"]))

# config.json: another RoPE is refused by the scorer (fused score runs whatever config it reads).
config = json.load(open(os.path.join(model, "config.json")))


def with_config(label, edit):
    d = variant(label)
    shutil.copy(os.path.join(model, "model.safetensors"), d)
    c = json.loads(json.dumps(config))
    edit(c)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f)
    return d


def scorer_refuses(label, d, words):
    rc, msg, _ = run([scorer, "--model", d, *ARGS, "--out", os.path.join(work, "c.safetensors")], os.path.join(work, "c.safetensors"))
    check(label, rc == 1 and words in msg, msg)


rope = "rope_parameters" if "rope_parameters" in config else "rope_scaling"  # transformers 5 or 4


def set_rope_theta(c, theta):
    (c["rope_parameters"] if rope == "rope_parameters" else c)["rope_theta"] = theta


def rope_theta(c):
    return (c["rope_parameters"] if rope == "rope_parameters" else c)["rope_theta"]


scorer_refuses("another rope_theta", with_config("rope_theta", lambda c: set_rope_theta(c, rope_theta(c) * 2)),
               'field "%s": this model was generated for' % ("rope_parameters.rope_theta" if rope == "rope_parameters" else "rope_theta"))
scorer_refuses("another head_dim", with_config("head_dim", lambda c: c.update(head_dim=8)), 'field "head_dim"')
scorer_refuses("hidden_size as a string", with_config("hidden_size_string", lambda c: c.update(hidden_size=str(c["hidden_size"]))),
               'field "hidden_size" must be a number, got a string')
llama3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
if (config.get(rope) or {}).get("rope_type", "default") == "llama3":
    scorer_refuses("plain RoPE for a llama3 model", with_config("plain_rope", lambda c: c.update(rope_scaling=None)),
                   "this model was generated for")
    scorer_refuses("other llama3 factors", with_config("factor", lambda c: c[rope].update(factor=4.0)),
                   f'field "{rope}.factor": this model was generated for 8, the file says 4')  # (the key the file uses)
else:
    scorer_refuses("llama3 RoPE for a plain model", with_config("llama3_rope", lambda c: c.setdefault(rope, {}).update(llama3)),
                   'RoPE "rope_type": this model was generated for "default", the file says "llama3"')


def other_layout(c):
    """transformers 4's config.json as transformers 5 writes it, or the reverse."""
    if "rope_parameters" in c:
        params = c.pop("rope_parameters")
        c["rope_theta"] = params.pop("rope_theta")
        c["rope_scaling"] = params if params.get("rope_type", "default") != "default" else None
    else:
        c["rope_parameters"] = dict(c.pop("rope_scaling", None) or {"rope_type": "default"}, rope_theta=c.pop("rope_theta"))


d = with_config("other_layout", other_layout)
rc, msg, out = run([scorer, "--model", d, *ARGS, "--out", os.path.join(work, "c.safetensors")], os.path.join(work, "c.safetensors"))
check("the same config in the other transformers layout", rc == 0 and open(out, "rb").read() == intact["c"], msg)

sys.exit(1 if failures else 0)
