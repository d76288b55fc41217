#!/usr/bin/env python3
"""define's Transformer-XL (models/transformer_xl.h) against bench/peers/txl_torch.py, the PyTorch
Transformer-XL written after the paper and the reference code's pieces (relative attention with
the two global biases and the relative shift, per-layer memory, post-LayerNorm layers, a tied
projected adaptive softmax with div_val 1), in float64, on define's exported weights.

Usage: transformer_xl.py DIR. Reads DIR/config.json (vocab, d_model, n_head, d_head, d_inner,
n_layer, mem_len, cutoffs), DIR/weights.safetensors and DIR/inputs.safetensors (segments "tokens0",
"targets0", "tokens1", ... [T, B] int64, read in order with the memory carried) and writes
DIR/reference.safetensors: "loss0", "loss1", ... ([1], the mean NLL of each segment) and "mem0",
"mem1", ... (each layer's memory after the last segment)."""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_peers  # noqa: E402
import tensor_files  # noqa: E402



# define's parameter names -> the peer's (the layers and the relative biases are named alike).
def peer_name(name):
    if name == "input.projected.weight":
        return "embed.weight"
    if name.startswith("output.softmax."):
        return "softmax." + name[len("output.softmax."):]
    return name


def main(folder):
    torch.set_default_dtype(torch.float64)  # the peer's sinusoids and masks follow it
    c = json.load(open(os.path.join(folder, "config.json")))
    peer = bench_peers.load("txl_torch")
    model = peer.TransformerXL(c["vocab"], c["d_model"], c["n_head"], c["d_head"], c["d_inner"], c["n_layer"],
                               c["mem_len"], c["cutoffs"], dropout=0.0).double().eval()
    weights = tensor_files.read(os.path.join(folder, "weights.safetensors"))
    state = {peer_name(k): torch.from_numpy(v) for k, v in weights.items()}
    state["softmax.table"] = state["embed.weight"]  # tied
    missing = set(model.state_dict()) - set(state)
    unexpected = set(state) - set(model.state_dict())
    if missing or unexpected:
        sys.exit(f"name map incomplete: missing {sorted(missing)}, unexpected {sorted(unexpected)}")
    model.load_state_dict(state)
    inputs = tensor_files.read(os.path.join(folder, "inputs.safetensors"))
    out, mems = {}, []
    with torch.no_grad():
        for k in range(len(inputs) // 2):
            loss, mems = model(torch.from_numpy(inputs[f"tokens{k}"]), torch.from_numpy(inputs[f"targets{k}"]), mems)
            out[f"loss{k}"] = loss.reshape(1).numpy()
    for layer, m in enumerate(mems):
        out[f"mem{layer}"] = m.numpy()
    tensor_files.write(os.path.join(folder, "reference.safetensors"), out)


if __name__ == "__main__":
    main(sys.argv[1])
