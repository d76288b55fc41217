#!/usr/bin/env python3
"""A Transformer-XL checkpoint in the reference code's layout, made by the PyTorch peer
(bench/peers/txl_torch.py) loaded with define's weights: the peer's state dict under
kimiyoung/transformer-xl's MemTransformerLM names (with its pos_emb.inv_freq buffer), saved by
torch.save as a plain state dict, for scripts/import_txl_checkpoint.py to convert back.

Usage: reference_layout.py DIR. Reads DIR/config.json and DIR/weights.safetensors as
transformer_xl.py does; writes DIR/reference.pt and DIR/reference.safetensors ("loss0" of the
segment in DIR/inputs.safetensors, as the peer computes it)."""
import json
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_peers  # noqa: E402
import tensor_files  # noqa: E402
import transformer_xl  # noqa: E402

PEER_TO_REFERENCE = [
    (r"embed\.weight", "word_emb.emb_layers.0.weight"),
    (r"softmax\.table", "crit.out_layers.0.weight"),
    (r"softmax\.bias", "crit.out_layers.0.bias"),
    (r"softmax\.cluster_(weight|bias)", r"crit.cluster_\1"),
    (r"(r_w_bias|r_r_bias)", r"\1"),
    (r"layers\.(\d+)\.attn\.qkv\.weight", r"layers.\1.dec_attn.qkv_net.weight"),
    (r"layers\.(\d+)\.attn\.(r|o)_net\.weight", r"layers.\1.dec_attn.\2_net.weight"),
    (r"layers\.(\d+)\.attn\.norm\.(weight|bias)", r"layers.\1.dec_attn.layer_norm.\2"),
    (r"layers\.(\d+)\.ff\.fc1\.(weight|bias)", r"layers.\1.pos_ff.CoreNet.0.\2"),
    (r"layers\.(\d+)\.ff\.fc2\.(weight|bias)", r"layers.\1.pos_ff.CoreNet.3.\2"),
    (r"layers\.(\d+)\.ff\.norm\.(weight|bias)", r"layers.\1.pos_ff.layer_norm.\2"),
]


def reference_name(name):
    for pattern, target in PEER_TO_REFERENCE:
        m = re.fullmatch(pattern, name)
        if m:
            return m.expand(target)
    sys.exit(f"no reference name for the peer's {name}")


def main(folder):
    torch.set_default_dtype(torch.float32)  # checkpoints of the reference code are float32
    c = json.load(open(os.path.join(folder, "config.json")))
    peer = bench_peers.load("txl_torch")
    model = peer.TransformerXL(c["vocab"], c["d_model"], c["n_head"], c["d_head"], c["d_inner"], c["n_layer"],
                               c["mem_len"], c["cutoffs"], dropout=0.0).eval()
    weights = tensor_files.read(os.path.join(folder, "weights.safetensors"))
    state = {transformer_xl.peer_name(k): torch.from_numpy(v).float() for k, v in weights.items()}
    state["softmax.table"] = state["embed.weight"]
    model.load_state_dict(state)
    reference = {reference_name(k): v for k, v in model.state_dict().items()}
    d = c["d_model"]
    reference["pos_emb.inv_freq"] = 1 / (10000 ** (torch.arange(0.0, d, 2.0) / d))
    torch.save(reference, os.path.join(folder, "reference.pt"))
    inputs = tensor_files.read(os.path.join(folder, "inputs.safetensors"))
    with torch.no_grad():
        loss, _ = model(torch.from_numpy(inputs["tokens0"]), torch.from_numpy(inputs["targets0"]), [])
    tensor_files.write(os.path.join(folder, "reference.safetensors"), {"loss0": loss.double().reshape(1).numpy()})


if __name__ == "__main__":
    main(sys.argv[1])
