#!/usr/bin/env python3
"""A DeLighT block written from the papers' equations and the released code's description
(../shared/docs' spec: the DExTra unit's schedule, group linear transforms with the transpose
shuffle and per-chunk layer norm, the input mixer, single-head attention over d_m / 2, the light
FFN), in PyTorch float64, run on define's exported weights. It shares nothing with define but the
parameter names, and its own schedule must give the shapes define's weights have.

Usage: delight_block.py DIR. DIR/config.json: d_m, depth, width_mult, max_groups, ffn_reduction,
pre_norm, causal, cross_attention. Reads DIR/weights.safetensors (the block's parameters) and
DIR/inputs.safetensors ("x" [T, B, d_m], and "memory" [S, B, d_m] with cross-attention); writes
DIR/reference.safetensors: "y" [T, B, d_m]."""
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tensor_files  # noqa: E402


def dextra_schedule(d_in, p, d_out, width_mult, depth, max_groups):
    """Groups, output widths and input widths of the unit's N layers (DExTra mode): expansion over
    ceil(N/2) layers with groups 2, 4, ... capped at G and widths linear from p to d_in * w,
    mirrored for the reduction, the last width d_out, widths rounded up to multiples of
    max(g_l, g_{l+1}, 8); layer l > 1 reads [X, Y_{l-1}]."""
    h = math.ceil(depth / 2)
    groups = [min(2 ** l, max_groups) for l in range(1, h + 1)]
    widths = [int(v) for v in np.linspace(p, d_in * width_mult, h)]
    tail = slice(None) if depth % 2 == 0 else slice(1, None)
    groups = groups + groups[::-1][tail]
    widths = widths + widths[::-1][tail]
    widths = widths[:-1] + [d_out]
    for l in range(depth - 1):
        q = max(groups[l], groups[l + 1], 8)
        widths[l] = math.ceil(widths[l] / q) * q
    inputs = [p] + [p + w for w in widths[:-1]]
    return groups, widths, inputs


def swish(x):
    return x * torch.sigmoid(x)


def layer_norm(x, w, prefix):
    return F.layer_norm(x, (x.shape[-1],), w[prefix + ".weight"], w[prefix + ".bias"], 1e-5)


def dense(x, w, prefix):
    """Linear + layer norm + Swish: the unit's input, output and one-group layers."""
    return swish(layer_norm(F.linear(x, w[prefix + ".weight"], w[prefix + ".bias"]), w, prefix + ".norm"))


def glt(x, w, prefix, groups):
    """Group linear transform: g contiguous input chunks, one [in/g, out/g] matrix each, outputs
    interleaved (y_0[0], y_1[0], ..., y_0[1], ...), each run of out/g normalised with one shared
    affine pair, then Swish."""
    if groups == 1:
        return dense(x, w, prefix)
    weight, bias = w[prefix + ".weight"], w[prefix + ".bias"]  # [g, in/g, out/g], [g, out/g]
    chunks = x.reshape(*x.shape[:-1], groups, -1)
    y = torch.einsum("...gi,gio->...go", chunks, weight) + bias  # [..., g, out/g]
    y = y.transpose(-1, -2).reshape(*x.shape[:-1], -1)  # shuffle: position f from group f mod g
    y = layer_norm(y.reshape(*x.shape[:-1], groups, -1), w, prefix + ".norm").reshape(*x.shape[:-1], -1)
    return swish(y)


def mix(x, y, groups):
    """[X^1, Y^1, ..., X^g, Y^g]: chunk c of the projected input beside chunk c of Y."""
    xs, ys = x.chunk(groups, dim=-1), y.chunk(groups, dim=-1)
    return torch.cat([t for pair in zip(xs, ys) for t in pair], dim=-1)


def dextra(x, w, c):
    d_m = c["d_m"]
    groups, _, _ = dextra_schedule(d_m, d_m // 2, d_m // 2, c["width_mult"], c["depth"], c["max_groups"])
    proj = dense(x, w, "dextra.input_layer")
    y = glt(proj, w, "dextra.glts.0", groups[0])
    for l in range(1, len(groups)):
        y = glt(mix(proj, y, groups[l]), w, f"dextra.glts.{l}", groups[l])
    return dense(torch.cat([proj, y], dim=-1), w, "dextra.output_layer")


def attend(q, k, v, causal):
    """Single head: softmax(q d^-1/2 k^T) v over time-first [T, B, d] tensors."""
    scores = torch.einsum("tbd,sbd->bts", q * q.shape[-1] ** -0.5, k)
    if causal:
        scores = scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    return torch.einsum("bts,sbd->tbd", torch.softmax(scores, dim=-1), v)


def block(x, memory, w, c):
    pre = c["pre_norm"]
    sub = lambda r, out, norm: (r + out) if pre else layer_norm(r + out, w, norm)
    norm_in = lambda t, norm: layer_norm(t, w, norm) if pre else t
    h = dextra(norm_in(x, "self_attn_layer_norm"), w, c)
    q, k, v = F.linear(h, w["self_attn.qkv_proj.weight"], w["self_attn.qkv_proj.bias"]).chunk(3, dim=-1)
    a = F.linear(attend(q, k, v, c["causal"]), w["self_attn.out_proj.weight"], w["self_attn.out_proj.bias"])
    x = sub(x, a, "self_attn_layer_norm")
    if c["cross_attention"]:
        h = norm_in(x, "encoder_attn_layer_norm")
        q = F.linear(h, w["encoder_attn.q_proj.weight"], w["encoder_attn.q_proj.bias"])
        k, v = F.linear(memory, w["encoder_attn.kv_proj.weight"], w["encoder_attn.kv_proj.bias"]).chunk(2, dim=-1)
        a = F.linear(attend(q, k, v, False), w["encoder_attn.out_proj.weight"], w["encoder_attn.out_proj.bias"])
        x = sub(x, a, "encoder_attn_layer_norm")
    h = norm_in(x, "final_layer_norm")
    f = F.linear(swish(F.linear(h, w["fc1.weight"], w["fc1.bias"])), w["fc2.weight"], w["fc2.bias"])
    return sub(x, f, "final_layer_norm")


def main(folder):
    c = json.load(open(os.path.join(folder, "config.json")))
    w = {k: torch.from_numpy(v) for k, v in tensor_files.read(os.path.join(folder, "weights.safetensors")).items()}
    groups, widths, inputs = dextra_schedule(c["d_m"], c["d_m"] // 2, c["d_m"] // 2, c["width_mult"], c["depth"],
                                             c["max_groups"])
    for l, (g, o, i) in enumerate(zip(groups, widths, inputs)):  # the schedule gives define's shapes
        want = [g, i // g, o // g] if g > 1 else [o, i]
        got = list(w[f"dextra.glts.{l}.weight"].shape)
        if got != want:
            sys.exit(f"dextra.glts.{l}.weight is {got}, the schedule says {want}")
    if f"dextra.glts.{len(groups)}.weight" in w:
        sys.exit(f"define's unit has more than the schedule's {len(groups)} layers")
    x = tensor_files.read(os.path.join(folder, "inputs.safetensors"))
    memory = torch.from_numpy(x["memory"]) if "memory" in x else None
    with torch.no_grad():
        y = block(torch.from_numpy(x["x"]), memory, w, c)
    tensor_files.write(os.path.join(folder, "reference.safetensors"), {"y": y.numpy()})


if __name__ == "__main__":
    main(sys.argv[1])
