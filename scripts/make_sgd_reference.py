#!/usr/bin/env python3
"""torch.optim.SGD's steps on a Qwen2 / Llama-style checkpoint: the reference of fused's SGD with momentum.

usage: make_sgd_reference.py MODEL_DIR OUT.json [--steps 3] [--lr 0.003]

The model is scripts/bench_train_torch.py's (fp32 parameters widened from the checkpoint, the same
forward pass); the tokens are the ones of MODEL_DIR/train_reference.json. For each optimizer case
(momentum, dampening, weight decay, nesterov) it records the mean next-token cross-entropy before
each of --steps steps and after the last, and a few parameter values after the last step. Needs
python3-torch (Debian); tests/data/reference/tiny_a/train_sgd_reference.json was made by it.
"""
import argparse, json, os, sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_train_torch import Model, load_safetensors  # noqa: E402

CASES = [
    {"momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0, "nesterov": False},
    {"momentum": 0.9, "dampening": 0.0, "weight_decay": 0.01, "nesterov": False},
    {"momentum": 0.8, "dampening": 0.25, "weight_decay": 0.05, "nesterov": False},
    {"momentum": 0.9, "dampening": 0.0, "weight_decay": 0.01, "nesterov": True},
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.003)
    a = ap.parse_args()
    torch.set_num_threads(1)
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    tokens = json.load(open(os.path.join(a.model, "train_reference.json")))["tokens"]
    ids = torch.tensor([tokens])
    cases = []
    for case in CASES:
        model = Model(cfg, load_safetensors(os.path.join(a.model, "model.safetensors")))
        opt = torch.optim.SGD(model.parameters(), lr=a.lr, **case)

        def loss_of():
            logits = model(ids)
            return torch.nn.functional.cross_entropy(logits[0, :-1], ids[0, 1:])

        losses = []
        for _ in range(a.steps):
            loss = loss_of()
            losses.append(loss.item())
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            losses.append(loss_of().item())
        samples = {}
        for name, p in model.p.items():
            flat = p.detach().reshape(-1)
            picks = sorted({0, flat.numel() // 2, flat.numel() - 1})
            samples[name.replace("__", ".")] = {str(i): flat[i].item() for i in picks}
        cases.append({**case, "losses": losses, "parameters_after": samples})
    json.dump({"model": os.path.basename(os.path.normpath(a.model)), "made_by": "scripts/make_sgd_reference.py (torch %s, fp32, CPU)" % torch.__version__,
               "tokens": tokens, "lr": a.lr, "steps": a.steps,
               "definition": "losses[k]: mean next-token cross-entropy before step k+1 (losses[steps]: after the last step); "
                             "parameters_after: elements (flat index) of each parameter after the last step; torch.optim.SGD",
               "cases": cases}, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
