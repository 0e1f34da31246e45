#!/usr/bin/env python3
"""Small .safetensors files for the shell tests (python3's standard library only).

  tensors.py write FILE NAME=V[,V...] ...   f32 tensors of shape [count]
  tensors.py same A B                       the same tensors by name: dtype, shape and bytes
"""
import json
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    body = data[8 + n:]
    return {k: (v["dtype"], v["shape"], body[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in header.items()}


def write(path, items):
    header, body = {}, b""
    for item in items:
        name, values = item.split("=", 1)
        floats = [float(v) for v in values.split(",")]
        blob = struct.pack("<%df" % len(floats), *floats)
        header[name] = {"dtype": "F32", "shape": [len(floats)], "data_offsets": [len(body), len(body) + len(blob)]}
        body += blob
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + body)


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3:])
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == "same":
        a, b = read(sys.argv[2]), read(sys.argv[3])
        if a != b:
            print("%s and %s differ: %s vs %s" % (sys.argv[2], sys.argv[3], sorted(a.items()), sorted(b.items())))
            return 1
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
