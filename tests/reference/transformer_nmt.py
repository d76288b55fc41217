#!/usr/bin/env python3
"""define's translation Transformer (models/transformer_nmt.h, pre-norm, embedding scaled by
sqrt(d_model) plus sinusoids, tied output) against torch.nn.Transformer as bench/peers/nmt_torch.py
drives it (its Seq2Seq, with its incremental decoder and fairseq-style beam search), in float64, on
define's exported weights.

Usage: transformer_nmt.py DIR. Reads DIR/config.json (vocab, d_model, heads, ffn, layers, beam,
max_len), DIR/weights.safetensors and DIR/inputs.safetensors ("src" [B, S], "tgt_in" [B, T]) and
writes DIR/reference.safetensors: "logits" [B, T, V] (teacher forced) and "beam" [B, max_len + 1]
(each sentence's best hypothesis, padded with -1)."""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_peers  # noqa: E402
import tensor_files  # noqa: E402


def main(folder):
    torch.set_default_dtype(torch.float64)
    c = json.load(open(os.path.join(folder, "config.json")))
    peer = bench_peers.load("nmt_torch")
    model = peer.Seq2Seq(c["vocab"], c["d_model"], c["heads"], c["ffn"], c["layers"]).double().eval()
    w = {k: torch.from_numpy(v) for k, v in tensor_files.read(os.path.join(folder, "weights.safetensors")).items()}
    model.load_state_dict(peer.state_from_define(w, c["layers"]))  # strict: every peer tensor named
    inputs = tensor_files.read(os.path.join(folder, "inputs.safetensors"))
    src, tgt_in = torch.from_numpy(inputs["src"]), torch.from_numpy(inputs["tgt_in"])
    with torch.no_grad():
        logits = model(src, tgt_in).numpy()
        hyps = peer.beam_search(model, src, c["beam"], c["max_len"])
    beam = np.full((len(hyps), c["max_len"] + 1), -1, dtype=np.int64)
    for b, h in enumerate(hyps):
        beam[b, :len(h)] = h
    tensor_files.write(os.path.join(folder, "reference.safetensors"), {"logits": logits, "beam": beam})


if __name__ == "__main__":
    main(sys.argv[1])
