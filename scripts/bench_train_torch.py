#!/usr/bin/env python3
"""PyTorch's training throughput for a Qwen2 / Llama-style checkpoint, the yardstick of `fused bench-train`.

usage: bench_train_torch.py MODEL_DIR [--seq 256] [--batch 8] [--steps 5] [--threads 1,2]

The same work as one `fused train` step: fp32 parameters (the checkpoint's bf16 widened), the forward
pass (embedding, per layer RMSNorm, q/k/v projections with the config's biases, RoPE, causal GQA
attention, o projection, residual, RMSNorm, SwiGLU MLP, residual; final norm; the tied or separate
head), mean next-token cross-entropy, backward, torch.optim.AdamW. Prints the median tok/s over
--steps timed steps after one warm-up step, per thread count. Needs python3-torch (Debian), and
libopenblas0-pthread for a fair figure (without it Debian's torch uses the reference BLAS).
"""
import argparse, json, math, os, statistics, struct, time

import torch


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        kind = {"BF16": torch.bfloat16, "F32": torch.float32, "F16": torch.float16}[info["dtype"]]
        raw = torch.frombuffer(bytearray(data[a:b]), dtype=kind) if b > a else torch.zeros(0, dtype=kind)
        out[name] = raw.float().reshape(info["shape"]).clone()
    return out


class Model(torch.nn.Module):
    def __init__(self, cfg, weights):
        super().__init__()
        self.cfg = cfg
        self.p = torch.nn.ParameterDict({k.replace(".", "__"): torch.nn.Parameter(v) for k, v in weights.items()
                                         if not (k == "lm_head.weight" and cfg.get("tie_word_embeddings"))})
        hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
        self.hd = hd
        theta = cfg.get("rope_theta") or (cfg.get("rope_parameters") or {}).get("rope_theta", 10000.0)
        self.inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))

    def w(self, name):
        return self.p[name.replace(".", "__")]

    def forward(self, ids):  # ids [B, S]
        cfg, hd = self.cfg, self.hd
        B, S = ids.shape
        nh, nkv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
        eps = cfg["rms_norm_eps"]
        pos = torch.arange(S, dtype=torch.float32)
        angle = torch.outer(pos, self.inv_freq)
        cos, sin = torch.cat([angle.cos()] * 2, -1), torch.cat([angle.sin()] * 2, -1)

        def norm(x, w):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

        def rope(x):
            h = x.shape[-1] // 2
            return x * cos + torch.cat([-x[..., h:], x[..., :h]], -1) * sin

        def linear(x, prefix):
            b = self.p[(prefix + ".bias").replace(".", "__")] if (prefix + ".bias").replace(".", "__") in self.p else None
            return torch.nn.functional.linear(x, self.w(prefix + ".weight"), b)

        x = self.w("model.embed_tokens.weight")[ids]
        mask = torch.full((S, S), float("-inf")).triu(1)
        for l in range(cfg["num_hidden_layers"]):
            pre = f"model.layers.{l}."
            h = norm(x, self.w(pre + "input_layernorm.weight"))
            q = linear(h, pre + "self_attn.q_proj").view(B, S, nh, hd).transpose(1, 2)
            k = linear(h, pre + "self_attn.k_proj").view(B, S, nkv, hd).transpose(1, 2)
            v = linear(h, pre + "self_attn.v_proj").view(B, S, nkv, hd).transpose(1, 2)
            q, k = rope(q), rope(k)
            k, v = k.repeat_interleave(nh // nkv, 1), v.repeat_interleave(nh // nkv, 1)
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hd) + mask, -1) @ v
            x = x + linear(att.transpose(1, 2).reshape(B, S, nh * hd), pre + "self_attn.o_proj")
            h = norm(x, self.w(pre + "post_attention_layernorm.weight"))
            x = x + linear(torch.nn.functional.silu(linear(h, pre + "mlp.gate_proj")) * linear(h, pre + "mlp.up_proj"), pre + "mlp.down_proj")
        x = norm(x, self.w("model.norm.weight"))
        head = self.w("model.embed_tokens.weight") if cfg.get("tie_word_embeddings") else self.w("lm_head.weight")
        return x @ head.t()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", default="1,2")
    a = ap.parse_args()
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    model = Model(cfg, load_safetensors(os.path.join(a.model, "model.safetensors")))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    g = torch.Generator().manual_seed(12345)
    ids = torch.randint(0, cfg["vocab_size"], (a.batch, a.seq), generator=g)
    print(f"torch {torch.__version__} bench-train: {a.model}, {a.batch} x {a.seq} tokens a step, fp32 AdamW, BLAS: "
          f"{'openblas' if 'openblas' in torch.__config__.show().lower() else 'see torch.__config__.show()'}")
    one = None
    for n in [int(t) for t in a.threads.split(",")]:
        torch.set_num_threads(n)
        rates = []
        for k in range(a.steps + 1):
            t0 = time.perf_counter()
            logits = model(ids)
            loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            if k:
                rates.append(a.batch * a.seq / (time.perf_counter() - t0))
        med = statistics.median(rates)
        one = one or med
        print(f"threads {n:2d}  median {med:8.0f} tok/s  (min {min(rates):.0f}, max {max(rates):.0f}, {a.steps} steps)"
              + (f"  x{med / one:.2f} of 1 thread" if n > 1 else ""))


if __name__ == "__main__":
    main()
