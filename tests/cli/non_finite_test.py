#!/usr/bin/env python3
"""A checkpoint whose weights hold NaN or an infinity: `fused run` stops with one error line that
names the tensor (chat and serve share its sampler), and generates nothing (the logits would be
NaN, and sampling them picks the same token every time: text that looks like output); `fused
score` stops the same way and writes no logits file; `fused train-step` and `fused train` refuse to
train from them (every loss, gradient and parameter would be NaN) and write nothing.

usage: non_finite_test.py FUSED MODEL_DIR WORK_DIR
Copies MODEL_DIR (bf16 safetensors) to WORK_DIR: once with 100 NaNs in a layer's down projection,
once with one +inf in the final norm's weight, and once as F32 with a finite value bf16 cannot hold
(named as such: the file holds no infinity)."""
import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

fused, model, work = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])


def damaged(name, tensor, values):
    d = work / name
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(model, d)
    path = d / "model.safetensors"
    b = bytearray(path.read_bytes())
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    start = 8 + n + header[tensor]["data_offsets"][0]
    for i, v in enumerate(values):
        b[start + 2 * i:start + 2 * i + 2] = struct.pack("<H", v)
    path.write_bytes(bytes(b))
    return d


def expect_error(args, pattern_parts):
    p = subprocess.run([fused] + args, capture_output=True, text=True, timeout=120)
    lines = [l for l in p.stderr.strip().splitlines() if not l.startswith("[fused] seed ")]  # a sampled run's seed
    if p.returncode != 1 or len(lines) != 1 or not all(part in lines[0] for part in pattern_parts):
        sys.exit(f"{' '.join(args)}: rc {p.returncode}, stdout {p.stdout!r}, stderr {p.stderr!r}; wanted {pattern_parts}")
    # nothing sampled from the NaN logits reached stdout (run prints the prompt's continuation only)
    if p.stdout.strip():
        sys.exit(f"{' '.join(args)}: wrote {p.stdout!r} before the error")
    print(lines[0])


nan = damaged("nan", "model.layers.1.mlp.down_proj.weight", [0x7FC0] * 100)
expect_error(["run", "-m", str(nan), "-p", "In the beginning", "-n", "8", "--temp", "0"],
             ["fused run: error: the model's logits are not finite (",
              "its tensor \"model.layers.1.mlp.down_proj.weight\" holds NaN at element 0 (100 of 196608 values are not finite)"])
inf = damaged("inf", "model.norm.weight", [0x3F80] * 7 + [0x7F80])
expect_error(["run", "-m", str(inf), "-p", "In the beginning", "-n", "8", "--seed", "1"],
             ["fused run: error: the model's logits are not finite (",
              "its tensor \"model.norm.weight\" holds an infinity at element 7 (1 of 256 values are not finite)"])
scored = work / "scored.safetensors"
scored.unlink(missing_ok=True)
expect_error(["score", "-m", str(nan), "--input-ids", "1,2,3", "--continue-ids", "4,5", "--out", str(scored)],
             ["fused score: error: the model's logits are not finite (",
              "its tensor \"model.layers.1.mlp.down_proj.weight\" holds NaN at element 0 (100 of 196608 values are not finite)"])
if scored.exists():
    sys.exit(f"score wrote {scored} from NaN logits")
stepped = work / "stepped.safetensors"
stepped.unlink(missing_ok=True)
expect_error(["train-step", "-m", str(inf), "--tokens", "1,2,3,4", "--out", str(stepped)],
             ["fused train-step: error: ", "cannot train from weights that are not finite: tensor \"model.norm.weight\" holds an infinity at element 7"])
if stepped.exists():
    sys.exit(f"train-step wrote {stepped} from an infinite weight")
text = work / "text.txt"
text.write_text("In the beginning God created the heaven and the earth. " * 20)
expect_error(["train", "-m", str(nan), "--data", str(text), "--seq", "16", "--batch", "2", "--steps", "2", "--out", str(work / "trained")],
             ["fused train: error: ", "cannot train from weights that are not finite: tensor \"model.layers.1.mlp.down_proj.weight\""])

# F32: 3.4e38 is finite as stored, and an infinity once rounded to the bf16 the model reads.
d = work / "f32_beyond_bf16"
shutil.rmtree(d, ignore_errors=True)
shutil.copytree(model, d)
raw = (d / "model.safetensors").read_bytes()
n = struct.unpack("<Q", raw[:8])[0]
header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
out_header, out_data = {}, bytearray()
for name in sorted(k for k in header if k != "__metadata__"):
    begin, end = header[name]["data_offsets"]
    values = [v << 16 for v in struct.unpack(f"<{(end - begin) // 2}H", data[begin:end])]
    chunk = bytearray(struct.pack(f"<{len(values)}I", *values))
    if name == "model.norm.weight":
        chunk[12:16] = struct.pack("<f", 3.4e38)
    out_header[name] = {"dtype": "F32", "shape": header[name]["shape"], "data_offsets": [len(out_data), len(out_data) + len(chunk)]}
    out_data += chunk
text_header = json.dumps(out_header).encode()
text_header += b" " * (-len(text_header) % 8)
(d / "model.safetensors").write_bytes(struct.pack("<Q", len(text_header)) + text_header + bytes(out_data))
expect_error(["score", "-m", str(d), "--input-ids", "1,2,3", "--out", str(scored)],
             ["fused score: error: the model's logits are not finite (",
              "its tensor \"model.norm.weight\" holds 3.4e+38 at element 3, beyond bf16's range (1 of 256 values are not finite in bf16)"])
