#!/usr/bin/env python3
"""PyTorch peer of bench/nmt_train_bench.cpp: trains the same translation Transformer as define's
models/transformer_nmt (pre-norm encoder-decoder, one token table shared by source, target and the
tied output, scaled by sqrt(d_model), sinusoidal positions) built on torch.nn.Transformer, then runs
batched beam search with cached keys and values, and prints one JSON line with training tokens/s,
beam-search sentences/s, the mean output length, the process's peak resident memory and its peak
above the resident memory just before training (peak_memory.py), the first step's loss and the
parameter count (--params-only: the count alone, nothing run).

  nmt_torch.py [--vocab 8000] [--d-model 256] [--heads 4] [--ffn 1024] [--layers 3] [--batch 256]
               [--src-len 16] [--tgt-len 16] [--steps 20] [--warmup 3] [--beam 5] [--beam-batch 64]
               [--max-len-a 1.2] [--max-len-b 10] [--threads 2] [--params-only] [--beam-from DIR]
               [--device cpu|cuda] [--amp none|fp16|bf16]

--beam-from DIR: beam search decodes define's model instead of a fresh one of its own: the weights
DIR/weights.safetensors (define's parameter names, float32) and the sources DIR/inputs.safetensors
("src" [beam-batch, src-len]), as nmt_train_bench writes them; the JSON line then holds every
sentence's best hypothesis ("beam_hyps"), which the bench compares with define's own.

--device cuda trains and decodes on the GPU (float32 with TF32 off; --amp: autocast around the
training step's forward and loss, fp16 with a GradScaler; beam search stays float32, as define's
does) and adds the peak tensor memory on the device to the JSON line (torch_device.py).

nn.Transformer(norm_first=True) has the same parameters as define's model: per attention one
in-projection for q, k, v with biases and an out-projection, LayerNorms before each sublayer and
after each stack. Its single `dropout` is set per place to define's values: residual branches 0.3,
attention probabilities and the FFN activation 0.1.

nn.Transformer has no incremental decoder, so decoding drives its decoder layers' weights one
position at a time, caching each layer's self-attention keys and values and the projected encoder
output (what fairseq's incremental state does); the beam search is fairseq's default (2 x beam
candidates a step, a candidate ending in eos among the first beam finishes, score = log-probability
/ length, no eos first, at the length limit only eos).

Configured at its best on a small CPU: torch.set_num_threads(threads), one inter-op thread, and the
caller runs it with OMP_WAIT_POLICY=PASSIVE.
"""
import argparse
import json
import math
import struct
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import peak_memory
import torch_device

PAD, BOS, EOS, FIRST_WORD = 0, 2, 3, 4  # define's subword ids


def sinusoids(length, dim, offset=0, device=None):
    """Rows for positions offset .. offset + length - 1: [sin(p f_i), cos(p f_i)], f_i =
    10000^(-i / (dim/2 - 1)) (fairseq's and define's layout)."""
    half = dim // 2
    freq = torch.exp(torch.arange(half, dtype=torch.get_default_dtype(), device=device) *
                     -(math.log(10000.0) / (half - 1)))
    angles = torch.arange(offset, offset + length, dtype=torch.get_default_dtype(), device=device)[:, None] * freq[None]
    return torch.cat([angles.sin(), angles.cos()], dim=1)


class Seq2Seq(nn.Module):
    def __init__(self, vocab, d_model, heads, ffn, layers):
        super().__init__()
        self.d_model, self.heads = d_model, heads
        self.embed = nn.Embedding(vocab, d_model, padding_idx=PAD)
        nn.init.normal_(self.embed.weight, 0.0, d_model ** -0.5)
        self.transformer = nn.Transformer(d_model, heads, layers, layers, ffn, dropout=0.3, norm_first=True,
                                          batch_first=True)
        for layer in list(self.transformer.encoder.layers) + list(self.transformer.decoder.layers):
            layer.dropout.p = 0.1  # after the FFN activation
            for attn in (layer.self_attn, getattr(layer, "multihead_attn", None)):
                if attn is not None:
                    attn.dropout = 0.1  # on the attention probabilities
        self.embed_drop = nn.Dropout(0.3)
        self._masks = {}

    def embed_tokens(self, tokens, offset=0):
        x = self.embed(tokens) * math.sqrt(self.d_model) + sinusoids(tokens.shape[1], self.d_model, offset,
                                                                      tokens.device)
        return self.embed_drop(x)

    def causal(self, t, device):
        if t not in self._masks:
            self._masks[t] = torch.full((t, t), float("-inf"), device=device).triu(1)
        return self._masks[t]

    def forward(self, src, tgt_in):
        """src [B, S], tgt_in [B, T] -> logits [B, T, V] (no padding: no padding masks)."""
        h = self.transformer(self.embed_tokens(src), self.embed_tokens(tgt_in), tgt_mask=self.causal(tgt_in.shape[1], tgt_in.device))
        return F.linear(h, self.embed.weight)

    # ---- incremental decoding over the decoder layers' weights ----
    def _heads(self, x):  # [N, t, E] -> [N, H, t, E/H]
        n, t, e = x.shape
        return x.view(n, t, self.heads, e // self.heads).transpose(1, 2)

    def _attend(self, q, k, v, out_proj):
        p = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1]), dim=-1)
        o = torch.matmul(p, v).transpose(1, 2).reshape(q.shape[0], 1, self.d_model)
        return out_proj(o)

    def begin_decoding(self, src):
        memory = self.transformer.encoder(self.embed_tokens(src))
        caches = []
        for layer in self.transformer.decoder.layers:
            w, b = layer.multihead_attn.in_proj_weight, layer.multihead_attn.in_proj_bias
            e = self.d_model
            k = self._heads(F.linear(memory, w[e:2 * e], b[e:2 * e]))
            v = self._heads(F.linear(memory, w[2 * e:], b[2 * e:]))
            caches.append({"enc_k": k, "enc_v": v, "k": None, "v": None})
        return caches

    def decode_step(self, caches, prev, step):
        """prev [N] -> log-probabilities [N, V] of the next position."""
        x = self.embed_tokens(prev[:, None], offset=step)
        e = self.d_model
        for layer, c in zip(self.transformer.decoder.layers, caches):
            h = layer.norm1(x)
            q, k, v = F.linear(h, layer.self_attn.in_proj_weight, layer.self_attn.in_proj_bias).split(e, dim=-1)
            k, v = self._heads(k), self._heads(v)
            c["k"] = k if c["k"] is None else torch.cat([c["k"], k], 2)
            c["v"] = v if c["v"] is None else torch.cat([c["v"], v], 2)
            x = x + self._attend(self._heads(q), c["k"], c["v"], layer.self_attn.out_proj)
            h = layer.norm2(x)
            w, b = layer.multihead_attn.in_proj_weight, layer.multihead_attn.in_proj_bias
            q = self._heads(F.linear(h, w[:e], b[:e]))
            x = x + self._attend(q, c["enc_k"], c["enc_v"], layer.multihead_attn.out_proj)
            x = x + layer.linear2(F.relu(layer.linear1(layer.norm3(x))))
        x = self.transformer.decoder.norm(x)
        return F.log_softmax(F.linear(x[:, 0], self.embed.weight), dim=-1)


def beam_search(model, src, beam, max_len, min_len=1):
    """src [B, S] -> per sentence the best finished hypothesis (tokens without bos / eos): at most
    max_len tokens before eos and at least min_len, as fairseq's SequenceGenerator counts them."""
    b_count, vocab, dev = src.shape[0], model.embed.weight.shape[0], src.device
    caches = model.begin_decoding(src.repeat_interleave(beam, 0))
    scores = torch.zeros(b_count, beam, device=dev)
    scores[:, 1:] = float("-inf")  # at the first step every beam holds the same prefix
    tokens = torch.full((b_count * beam, 1), BOS, dtype=torch.long, device=dev)
    finished = [[] for _ in range(b_count)]
    done = torch.zeros(b_count, dtype=torch.bool, device=dev)
    for step in range(max_len + 1):
        lprobs = model.decode_step(caches, tokens[:, -1], step)
        lprobs[:, PAD] = float("-inf")
        lprobs[:, BOS] = float("-inf")
        if step < min_len:  # no hypothesis ends before min_len tokens
            lprobs[:, EOS] = float("-inf")
        if step == max_len:  # at the length limit only eos may follow
            keep = lprobs[:, EOS].clone()
            lprobs.fill_(float("-inf"))
            lprobs[:, EOS] = keep
        cand = (scores.view(-1, 1) + lprobs).view(b_count, beam * vocab)
        top_s, top_i = cand.topk(2 * beam, dim=1)
        top_beam, top_tok = top_i // vocab, top_i % vocab
        is_eos = top_tok == EOS
        ends = (is_eos[:, :beam] & ~done[:, None]).nonzero().tolist()
        for b, k in ends:
            if len(finished[b]) < beam and top_s[b, k] > float("-inf"):
                row = b * beam + int(top_beam[b, k])
                finished[b].append((float(top_s[b, k]) / (step + 1), tokens[row, 1:].tolist()))
        done |= torch.tensor([len(f) >= beam for f in finished], device=dev)
        if bool(done.all()):
            break
        next_s, pos = top_s.masked_fill(is_eos, float("-inf")).topk(beam, dim=1)
        rows = (torch.arange(b_count, device=dev)[:, None] * beam + top_beam.gather(1, pos)).view(-1)
        tokens = torch.cat([tokens[rows], top_tok.gather(1, pos).view(-1, 1)], 1)
        scores = next_s.masked_fill(done[:, None], float("-inf"))
        for c in caches:
            for key in ("k", "v", "enc_k", "enc_v"):
                c[key] = c[key].index_select(0, rows)
    return [max(f)[1] if f else [] for f in finished]


SAFETENSORS_DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "I32": torch.int32}


def read_safetensors(path):
    """{name: tensor} of a safetensors file as define writes it (nn/safetensors.h; metadata ignored)."""
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = SAFETENSORS_DTYPES[info["dtype"]]
        flat = torch.frombuffer(bytearray(data[begin:end]), dtype=dtype) if end > begin else torch.empty(0, dtype=dtype)
        out[name] = flat.reshape(info["shape"])
    return out


def _attention_state(w, prefix):
    """define's q/k/v/out projections -> nn.MultiheadAttention's packed in_proj and out_proj."""
    return {
        "in_proj_weight": torch.cat([w[f"{prefix}.{p}_proj.weight"] for p in "qkv"]),
        "in_proj_bias": torch.cat([w[f"{prefix}.{p}_proj.bias"] for p in "qkv"]),
        "out_proj.weight": w[f"{prefix}.out_proj.weight"],
        "out_proj.bias": w[f"{prefix}.out_proj.bias"],
    }


def state_from_define(w, layers):
    """Seq2Seq's state dict from define's parameters (models/transformer_nmt's names), for
    load_state_dict(strict=True): the same mapping tests/reference/transformer_nmt.py checks."""
    s = {"embed.weight": w["embed.map.weight"]}

    def norm(dst, src):
        s.update({f"{dst}.weight": w[f"{src}.weight"], f"{dst}.bias": w[f"{src}.bias"]})

    for side in ("encoder", "decoder"):
        for i in range(layers):
            d, e = f"transformer.{side}.layers.{i}", f"{side}.layers.{i}"
            s.update({f"{d}.self_attn.{k}": v for k, v in _attention_state(w, f"{e}.self_attn").items()})
            norm(f"{d}.linear1", f"{e}.fc1")
            norm(f"{d}.linear2", f"{e}.fc2")
            norm(f"{d}.norm1", f"{e}.self_attn_layer_norm")
            if side == "encoder":
                norm(f"{d}.norm2", f"{e}.final_layer_norm")
            else:
                s.update({f"{d}.multihead_attn.{k}": v for k, v in _attention_state(w, f"{e}.encoder_attn").items()})
                norm(f"{d}.norm2", f"{e}.encoder_attn_layer_norm")
                norm(f"{d}.norm3", f"{e}.final_layer_norm")
        norm(f"transformer.{side}.norm", f"{side}.layer_norm")
    return s


def zipf(rows, cols, count, first, g):
    """[rows, cols] ids with Zipf's law over [first, first + count), as bench::zipf_tokens."""
    u = torch.rand((rows, cols), generator=g, dtype=torch.float64)
    return (float(count) ** u).floor().long().sub(1).clamp(0, count - 1).add(first)


def sentences(count, length, vocab, g):
    """[count, length]: Zipf-distributed words, then eos."""
    words = zipf(count, length - 1, vocab - FIRST_WORD, FIRST_WORD, g)
    return torch.cat([words, torch.full((count, 1), EOS, dtype=torch.long)], 1)


def main():
    ap = argparse.ArgumentParser()
    for name, default in (("vocab", 8000), ("d-model", 256), ("heads", 4), ("ffn", 1024), ("layers", 3),
                          ("batch", 256), ("src-len", 16), ("tgt-len", 16), ("steps", 20), ("warmup", 3),
                          ("beam", 5), ("beam-batch", 64), ("max-len-b", 10), ("threads", 2)):
        ap.add_argument("--" + name, type=int, default=default)
    ap.add_argument("--max-len-a", type=float, default=1.2)
    ap.add_argument("--params-only", action="store_true")
    ap.add_argument("--beam-from", metavar="DIR", help="decode define's weights and sources written here")
    torch_device.add_arguments(ap)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.set_flush_denormal(True)  # as define does (kernels/cpu/denormals.h: flush_denormals)
    torch.manual_seed(0)
    model = Seq2Seq(a.vocab, a.d_model, a.heads, a.ffn, a.layers)
    params = sum(p.numel() for p in model.parameters())
    if a.params_only:
        print(json.dumps({"params": params, "torch": torch.__version__}))
        return
    device = torch_device.setup(a)
    model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.98), weight_decay=1e-4)
    g = torch.Generator().manual_seed(1)
    src = sentences(a.batch, a.src_len, a.vocab, g)
    tgt_out = sentences(a.batch, a.tgt_len, a.vocab, g)
    tgt_in = torch.cat([torch.full((a.batch, 1), BOS, dtype=torch.long), tgt_out[:, :-1]], 1)
    src, tgt_in, tgt_out = src.to(device), tgt_in.to(device), tgt_out.to(device)
    tokens = a.batch * a.tgt_len
    scaler = torch_device.grad_scaler(a)
    start, first_loss = None, None
    window = peak_memory.TrainingWindow()  # right before the first step
    for step in range(a.steps + a.warmup):
        if step == a.warmup:
            torch_device.synchronize(a)
            start = time.perf_counter()
        opt.zero_grad()
        with torch_device.autocast(a):
            logits = model(src, tgt_in)
            loss = F.cross_entropy(logits.reshape(tokens, -1), tgt_out.reshape(-1), ignore_index=PAD,
                                   label_smoothing=0.1, reduction="sum") / tokens
        if step == 0:
            with torch.no_grad():  # read before the step updates nothing it depends on
                first_loss = float(F.cross_entropy(logits.float().reshape(tokens, -1), tgt_out.reshape(-1)))
        torch_device.step(loss, opt, model.parameters(), 0, scaler)
    torch_device.synchronize(a)
    train_s = time.perf_counter() - start

    torch.manual_seed(1)
    model = Seq2Seq(a.vocab, a.d_model, a.heads, a.ffn, a.layers).eval()  # fresh: hypotheses run to the limit
    if a.beam_from:
        model.load_state_dict(state_from_define(read_safetensors(f"{a.beam_from}/weights.safetensors"), a.layers))
        beam_src = read_safetensors(f"{a.beam_from}/inputs.safetensors")["src"]
    else:
        beam_src = sentences(a.beam_batch, a.src_len, a.vocab, g)
    model.to(device)
    with torch.no_grad():
        beam_src = beam_src.to(device)
        max_len = int(a.max_len_a * (a.src_len - 1) + a.max_len_b)  # subwords before eos; the source's eos not counted
        torch_device.synchronize(a)
        t0 = time.perf_counter()
        hyps = beam_search(model, beam_src, a.beam, max_len)
        torch_device.synchronize(a)
        beam_s = time.perf_counter() - t0
    extra = {"beam_hyps": hyps} if a.beam_from else {}
    print(json.dumps({"tokens_per_s": a.steps * tokens / train_s, "sentences_per_s": len(hyps) / beam_s,
                      "mean_output_len": sum(len(h) for h in hyps) / len(hyps), **window.fields(),
                      "first_loss": first_loss, "params": params, "torch": torch.__version__,
                      **torch_device.report_fields(a), **extra}))


if __name__ == "__main__":
    main()
