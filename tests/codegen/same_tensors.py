"""usage: same_tensors.py A.safetensors B.safetensors WHAT

Exit 0 when the two files hold the same tensors (names, dtypes, shapes) with the same bytes. Not cmp
of the files: the JSON headers' key order is each writer's own (the generated C's as written,
fused's sorted). WHAT names the tensors in the messages ("logits", "train-step tensors")."""
import json
import struct
import sys


def read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    header.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in header.items()}


c, cpp = read(sys.argv[1]), read(sys.argv[2])
what = sys.argv[3]
if sorted(c) != sorted(cpp) or any(c[k][:2] != cpp[k][:2] for k in c):
    sys.exit("the two files hold different tensors: %s / %s" % ({k: v[:2] for k, v in c.items()}, {k: v[:2] for k, v in cpp.items()}))
differ = [k for k in sorted(c) if c[k][2] != cpp[k][2]]
if differ:
    sys.exit("the generated C's %s differ from the C++ model's: %s" % (what, ", ".join(differ[:10])))
print("%s byte-identical: %d tensors (%s)" % (what, len(c), ", ".join("%s %s" % (k, c[k][1]) for k in sorted(c)[:4]) + (", ..." if len(c) > 4 else "")))
