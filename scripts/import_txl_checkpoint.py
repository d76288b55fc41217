#!/usr/bin/env python3
"""Converts a Transformer-XL checkpoint in the reference code's layout (the state dict of
kimiyoung/transformer-xl's MemTransformerLM, whose names NVIDIA's DeepLearningExamples
Transformer-XL keeps) into a safetensors file under define's parameter names, which
`define import --run RUN --weights OUT.safetensors` loads into a run built for the same shape
(model.type transformer_xl, input type projected: div_val 1, one table).

Usage: import_txl_checkpoint.py CHECKPOINT.pt OUT.safetensors

CHECKPOINT.pt holds a state dict, a dict with one under "model_state" or "state_dict", or a pickled
model (whose classes Python must then be able to import). Tensors keep their dtype (float32).

Name map (reference -> define):
  word_emb.emb_layers.0.weight          input.projected.weight, and output.softmax.weight when the
                                        checkpoint has no crit.out_layers.0.weight (tied)
  word_emb.emb_projs.0                  input.projected.projection (d_proj != d_embed only)
  crit.out_layers.0.weight              output.softmax.weight (define ties it to the table: import
                                        refuses a checkpoint where the two differ)
  crit.out_layers.0.bias                output.softmax.bias
  crit.cluster_weight, crit.cluster_bias  output.softmax.cluster_weight, output.softmax.cluster_bias
  crit.out_projs.<c>                    output.softmax.projections.<c> (the reference ties the tails'
                                        to the input's: set model.input.tie_projections to "tails")
  r_w_bias, r_r_bias                    r_w_bias, r_r_bias (untie_r: layers.<l>.attn.r_w_bias, ...)
  layers.<l>.dec_attn.qkv_net.weight    layers.<l>.attn.qkv.weight
  layers.<l>.dec_attn.r_net.weight      layers.<l>.attn.r_net.weight
  layers.<l>.dec_attn.o_net.weight      layers.<l>.attn.o_net.weight
  layers.<l>.dec_attn.layer_norm.*      layers.<l>.attn.norm.*
  layers.<l>.dec_attn.r_w_bias, r_r_bias  layers.<l>.attn.r_w_bias, r_r_bias
  layers.<l>.pos_ff.CoreNet.0.*         layers.<l>.ff.fc1.*
  layers.<l>.pos_ff.CoreNet.3.*         layers.<l>.ff.fc2.*
  layers.<l>.pos_ff.layer_norm.*        layers.<l>.ff.norm.*
  pos_emb.inv_freq                      dropped (define computes the sinusoids)
Any other name (div_val > 1's further bands, the other attention types' r_emb / r_bias) is refused,
naming it: define's Transformer-XL has no place for it.
"""
import json
import re
import struct
import sys

import numpy as np
import torch

RULES = [
    (r"word_emb\.emb_layers\.0\.weight", "input.projected.weight"),
    (r"word_emb\.emb_projs\.0", "input.projected.projection"),
    (r"crit\.out_layers\.0\.weight", "output.softmax.weight"),
    (r"crit\.out_layers\.0\.bias", "output.softmax.bias"),
    (r"crit\.cluster_(weight|bias)", r"output.softmax.cluster_\1"),
    (r"crit\.out_projs\.(\d+)", r"output.softmax.projections.\1"),
    (r"(r_w_bias|r_r_bias)", r"\1"),
    (r"layers\.(\d+)\.dec_attn\.(qkv|r|o)_net\.weight", lambda m: f"layers.{m[1]}.attn.{'qkv' if m[2] == 'qkv' else m[2] + '_net'}.weight"),
    (r"layers\.(\d+)\.dec_attn\.layer_norm\.(weight|bias)", r"layers.\1.attn.norm.\2"),
    (r"layers\.(\d+)\.dec_attn\.(r_w_bias|r_r_bias)", r"layers.\1.attn.\2"),
    (r"layers\.(\d+)\.pos_ff\.CoreNet\.0\.(weight|bias)", r"layers.\1.ff.fc1.\2"),
    (r"layers\.(\d+)\.pos_ff\.CoreNet\.3\.(weight|bias)", r"layers.\1.ff.fc2.\2"),
    (r"layers\.(\d+)\.pos_ff\.layer_norm\.(weight|bias)", r"layers.\1.ff.norm.\2"),
]
DROPPED = {"pos_emb.inv_freq"}
DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64", np.dtype(np.float16): "F16"}


def state_dict_of(obj):
    if isinstance(obj, dict):
        for key in ("model_state", "state_dict"):
            if key in obj and isinstance(obj[key], dict):
                return obj[key]
        return obj
    if hasattr(obj, "state_dict"):
        return obj.state_dict()
    sys.exit(f"import_txl_checkpoint: {type(obj).__name__} is neither a state dict nor a model")


def define_name(name):
    for pattern, target in RULES:
        m = re.fullmatch(pattern, name)
        if m:
            return target(m) if callable(target) else m.expand(target)
    return None


def convert(state):
    out, unknown = {}, []
    for name, tensor in state.items():
        if name in DROPPED:
            continue
        target = define_name(name)
        if target is None:
            unknown.append(name)
            continue
        out[target] = tensor.detach().cpu().numpy()
    if unknown:
        sys.exit("import_txl_checkpoint: no define parameter for " + ", ".join(sorted(unknown)) +
                 " (define's Transformer-XL takes div_val 1 and the relative attention of the paper)")
    if "output.softmax.weight" not in out and "input.projected.weight" in out:
        out["output.softmax.weight"] = out["input.projected.weight"]  # tied
    return out


def write_safetensors(path, tensors):
    header, chunks, offset = {"__metadata__": {"define.source": "import_txl_checkpoint.py"}}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        raw = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": DTYPES[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: import_txl_checkpoint.py CHECKPOINT.pt OUT.safetensors")
    state = state_dict_of(torch.load(sys.argv[1], map_location="cpu"))
    tensors = convert(state)
    write_safetensors(sys.argv[2], tensors)
    print(f"{len(tensors)} tensors written to {sys.argv[2]}")


if __name__ == "__main__":
    main()
