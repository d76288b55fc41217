#!/usr/bin/env python3
"""define's LSTM language model (models/lstm_lm.h: embedding, stacked LSTM, classifier tied to the
embedding with its own bias) written with PyTorch's own layers, torch.nn.Embedding and one
torch.nn.LSTM per layer (their widths differ), in float64, on define's exported weights.

Usage: lstm_lm.py DIR. Reads DIR/weights.safetensors and DIR/inputs.safetensors (windows "tokens0",
"tokens1", ... [T, B] int64, read in order with the LSTM state carried from one to the next) and
writes DIR/reference.safetensors: "log_probs0", "log_probs1", ... [T, B, V]."""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tensor_files  # noqa: E402


def main(folder):
    w = {k: torch.from_numpy(v) for k, v in tensor_files.read(os.path.join(folder, "weights.safetensors")).items()}
    inputs = tensor_files.read(os.path.join(folder, "inputs.safetensors"))
    table = w["input.map.weight"]
    embed = nn.Embedding.from_pretrained(table)
    rnns = []
    layer = 0
    while f"rnn.weight_ih_l{layer}" in w:
        w_ih, w_hh = w[f"rnn.weight_ih_l{layer}"], w[f"rnn.weight_hh_l{layer}"]
        rnn = nn.LSTM(w_ih.shape[1], w_hh.shape[1]).double()  # gate order i, f, g, o in both
        with torch.no_grad():
            rnn.weight_ih_l0.copy_(w_ih)
            rnn.weight_hh_l0.copy_(w_hh)
            rnn.bias_ih_l0.copy_(w[f"rnn.bias_ih_l{layer}"])
            rnn.bias_hh_l0.copy_(w[f"rnn.bias_hh_l{layer}"])
        rnns.append(rnn)
        layer += 1
    bias = w["output.bias"]
    state = [None] * len(rnns)
    out = {}
    with torch.no_grad():
        for k in range(len(inputs)):
            h = embed(torch.from_numpy(inputs[f"tokens{k}"]))
            for i, rnn in enumerate(rnns):
                h, state[i] = rnn(h, state[i])
            out[f"log_probs{k}"] = torch.log_softmax(h @ table.T + bias, dim=-1).numpy()
    tensor_files.write(os.path.join(folder, "reference.safetensors"), out)


if __name__ == "__main__":
    main(sys.argv[1])
