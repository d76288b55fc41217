#!/usr/bin/env python3
"""PyTorch peer of bench/txl_train_bench.cpp: trains the same Transformer-XL language model as
define's models/transformer_xl (relative-position attention with the two shared global biases and
the relative shift, per-layer memory of mem_len positions, post-LayerNorm layers, an embedding
table scaled by sqrt(d_model) tied to a projected adaptive softmax with div_val 1) on random (Zipf-distributed) tokens
and prints one JSON line with tokens/s, the process's peak resident memory and its peak above the
resident memory just before training (peak_memory.py), the first step's loss and the parameter count
(--params-only: the count alone, nothing trained).

  txl_torch.py [--vocab 33278] [--d-model 256] [--heads 4] [--d-head 64] [--inner 1024] [--layers 4]
               [--batch 16] [--tgt-len 64] [--mem-len 64] [--cutoffs 2000,10000|none] [--steps 60]
               [--warmup 5] [--threads 2] [--params-only] [--device cpu|cuda] [--amp none|fp16|bf16]

--device cuda trains on the GPU (float32 with TF32 off; --amp: autocast, fp16 with a GradScaler) and
adds the peak tensor memory on the device to the JSON line (torch_device.py).

Written after the Transformer-XL paper and its reference pieces (RelPartialLearnableMultiHeadAttn,
PositionalEmbedding, AdaptiveEmbedding / ProjectedAdaptiveLogSoftmax); with d_embed == d_model
there are no projections. Same math in a different layout: the attention works on [B, H, T, d]
tensors with batched matmuls (the reference's einsums over [T, B, H, d] map to the same GEMMs but
leave the softmax on a strided dimension), and the relative shift is applied to the last two dims.

Configured at its best on a small CPU: torch.set_num_threads(threads) for intra-op parallelism, one
inter-op thread, and the caller should run it with OMP_WAIT_POLICY=PASSIVE (Debian's torch uses
OpenMP; spinning idle workers and a pthread OpenBLAS oversubscribe 2 cores otherwise). No-op
dropouts (dropatt 0) are skipped, not applied with p = 0.
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import peak_memory
import torch_device

INIT_STD = 0.02  # the reference train.py's init_std (tables, linear weights, biases of attention)


def sinusoids(klen, dim, device):
    """Rows for the distances klen-1 .. 0: [sin(d f), cos(d f)], f_i = 10000^(-2i/dim)."""
    dist = torch.arange(klen - 1, -1, -1.0, device=device)
    freq = 1.0 / (10000 ** (torch.arange(0.0, dim, 2.0, device=device) / dim))
    angles = torch.outer(dist, freq)
    return torch.cat([angles.sin(), angles.cos()], dim=-1)


def rel_shift(x):
    """[..., Tq, Tk] scores indexed by (query i, position p) -> row i moved right by Tq-1-i, so
    that column j holds the score of distance i + (Tk - Tq) - j. A zero column prepended and the
    buffer re-read with rows of Tq (the reference trick; entries above the causal diagonal are
    garbage and masked afterwards)."""
    *lead, tq, tk = x.shape
    padded = F.pad(x, (1, 0))  # [..., Tq, Tk + 1]
    return padded.view(*lead, tk + 1, tq)[..., 1:, :].reshape(*lead, tq, tk)


class RelAttention(nn.Module):
    def __init__(self, d_model, heads, d_head, dropout):
        super().__init__()
        self.heads, self.d_head, self.scale = heads, d_head, 1.0 / math.sqrt(d_head)
        self.qkv = nn.Linear(d_model, 3 * heads * d_head, bias=False)
        self.r_net = nn.Linear(d_model, heads * d_head, bias=False)
        self.o_net = nn.Linear(heads * d_head, d_model, bias=False)
        self.drop = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x, mem, r, u, w, mask):
        tq, b = x.shape[:2]
        h = torch.cat([mem, x], 0) if mem is not None else x
        tk = h.shape[0]
        heads = self.qkv(h).view(tk, b, 3, self.heads, self.d_head).permute(2, 1, 3, 0, 4)  # [3, B, H, Tk, d]
        q, k, v = heads[0, :, :, tk - tq:], heads[1], heads[2]
        rk = self.r_net(r).view(tk, self.heads, self.d_head).permute(1, 2, 0)  # [H, d, Tk]
        content = torch.matmul(q + u[:, None], k.transpose(-1, -2))  # AC [B, H, Tq, Tk]
        position = rel_shift(torch.matmul(q + w[:, None], rk))  # BD, shifted
        score = (content + position).mul_(self.scale).masked_fill_(mask, float("-inf"))
        prob = torch.softmax(score, dim=-1)
        out = torch.matmul(prob, v).permute(2, 0, 1, 3).reshape(tq, b, self.heads * self.d_head)
        return self.norm(x + self.drop(self.o_net(out)))


class FeedForward(nn.Module):
    def __init__(self, d_model, inner, dropout):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d_model, inner), nn.Linear(inner, d_model)
        self.drop = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x):
        return self.norm(x + self.drop(self.fc2(self.drop(F.relu(self.fc1(x))))))


class Layer(nn.Module):
    def __init__(self, d_model, heads, d_head, inner, dropout):
        super().__init__()
        self.attn = RelAttention(d_model, heads, d_head, dropout)
        self.ff = FeedForward(d_model, inner, dropout)

    def forward(self, x, mem, r, u, w, mask):
        return self.ff(self.attn(x, mem, r, u, w, mask))


class TiedAdaptiveLogSoftmax(nn.Module):
    """Projected adaptive log-softmax with div_val 1 and d_embed == d_model (no projections): one
    word table (the input's), a bias per word, and per tail cluster a weight row and a bias that
    extend the head's logits. NLL of a tail word = -log p(cluster | head) - log p(word | tail);
    only the rows whose target is in a tail go through that tail's GEMM."""

    def __init__(self, table, cutoffs):
        super().__init__()
        vocab, dim = table.shape
        self.table = table  # tied: the embedding's Parameter, registered here too (counted once)
        self.bounds = [0] + list(cutoffs) + [vocab]
        self.bias = nn.Parameter(torch.zeros(vocab))
        tails = len(cutoffs)
        self.cluster_weight = nn.Parameter(torch.randn(tails, dim) * INIT_STD) if tails else None
        self.cluster_bias = nn.Parameter(torch.zeros(tails)) if tails else None

    def forward(self, h, target):
        if self.cluster_weight is None:
            return F.cross_entropy(F.linear(h, self.table, self.bias), target)
        c0 = self.bounds[1]
        head_w = torch.cat([self.table[:c0], self.cluster_weight])
        head_b = torch.cat([self.bias[:c0], self.cluster_bias])
        head = F.log_softmax(F.linear(h, head_w, head_b), dim=-1)  # [N, c0 + tails]
        # At least float32 (autocast makes h 16-bit; log_softmax comes back float32), float64 in the
        # reference-equality tests.
        nll = h.new_zeros(target.shape[0], dtype=torch.promote_types(h.dtype, torch.float32))
        for c, (lo, hi) in enumerate(zip(self.bounds[:-1], self.bounds[1:])):
            rows = ((target >= lo) & (target < hi)).nonzero().squeeze(1)
            if rows.numel() == 0:
                continue
            t = target.index_select(0, rows)
            if c == 0:
                logp = head.index_select(0, rows).gather(1, t[:, None]).squeeze(1)
            else:
                tail = F.log_softmax(F.linear(h.index_select(0, rows), self.table[lo:hi], self.bias[lo:hi]), dim=-1)
                logp = head[rows, c0 + c - 1] + tail.gather(1, (t - lo)[:, None]).squeeze(1)
            nll = nll.index_copy(0, rows, -logp)
        return nll.mean()


class TransformerXL(nn.Module):
    def __init__(self, vocab, d_model, heads, d_head, inner, layers, mem_len, cutoffs, dropout=0.1):
        super().__init__()
        self.d_model, self.mem_len = d_model, mem_len
        self.embed = nn.Embedding(vocab, d_model)
        self.drop = nn.Dropout(dropout)
        self.layers = nn.ModuleList(Layer(d_model, heads, d_head, inner, dropout) for _ in range(layers))
        self.r_w_bias = nn.Parameter(torch.randn(heads, d_head) * INIT_STD)  # shared by every layer
        self.r_r_bias = nn.Parameter(torch.randn(heads, d_head) * INIT_STD)
        self.softmax = TiedAdaptiveLogSoftmax(self.embed.weight, cutoffs)
        for m in self.modules():  # the reference init: N(0, init_std) weights, zero biases
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, INIT_STD)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)
        self._masks = {}

    def causal_mask(self, tq, mlen, device):
        # query i sees keys j <= i + mlen (the whole memory and the segment up to itself)
        key = (tq, mlen)
        if key not in self._masks:
            self._masks[key] = torch.ones(tq, tq + mlen, dtype=torch.bool, device=device).triu(1 + mlen)
        return self._masks[key]

    def forward(self, tokens, targets, mems):
        tq = tokens.shape[0]
        mlen = mems[0].shape[0] if mems else 0
        x = self.drop(self.embed(tokens) * math.sqrt(self.d_model))
        r = self.drop(sinusoids(tq + mlen, self.d_model, tokens.device))
        mask = self.causal_mask(tq, mlen, tokens.device)
        new_mems = []
        for l, layer in enumerate(self.layers):
            mem = mems[l] if mems else None
            # layer l's memory for the next segment: its own input, the last mem_len positions
            with torch.no_grad():
                new_mems.append((torch.cat([mem, x], 0) if mem is not None else x)[-self.mem_len:].detach())
            x = layer(x, mem, r, self.r_w_bias, self.r_r_bias, mask)
        loss = self.softmax(self.drop(x).reshape(-1, self.d_model), targets.reshape(-1))
        return loss, (new_mems if self.mem_len > 0 else [])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=33278)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--d-head", type=int, default=64)
    ap.add_argument("--inner", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--tgt-len", type=int, default=64)
    ap.add_argument("--mem-len", type=int, default=64)
    ap.add_argument("--cutoffs", default="2000,10000", help="comma-separated, or 'none' for a full softmax")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--params-only", action="store_true")
    torch_device.add_arguments(ap)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.set_flush_denormal(True)  # as define does (kernels/cpu/denormals.h: flush_denormals)
    torch.manual_seed(0)
    cutoffs = [] if a.cutoffs == "none" else [int(c) for c in a.cutoffs.split(",")]
    model = TransformerXL(a.vocab, a.d_model, a.heads, a.d_head, a.inner, a.layers, a.mem_len, cutoffs)
    params = sum(p.numel() for p in model.parameters())  # parameters() yields the tied table once
    if a.params_only:
        print(json.dumps({"params": params, "torch": torch.__version__}))
        return
    device = torch_device.setup(a)
    model.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    # Zipf-distributed ids, as the C++ side draws them (id = floor(V^u) - 1): words by frequency rank.
    u = torch.rand((a.tgt_len * (a.steps + a.warmup) + 1, a.batch), generator=g, dtype=torch.float64)
    data = (float(a.vocab) ** u).floor().long().sub(1).clamp(0, a.vocab - 1).to(device)
    scaler = torch_device.grad_scaler(a)
    mems, start, first_loss = [], None, None
    window = peak_memory.TrainingWindow()  # right before the first step
    for step in range(a.steps + a.warmup):
        if step == a.warmup:
            torch_device.synchronize(a)
            start = time.perf_counter()
        x = data[step * a.tgt_len:(step + 1) * a.tgt_len]
        y = data[step * a.tgt_len + 1:(step + 1) * a.tgt_len + 1]
        opt.zero_grad()
        with torch_device.autocast(a):
            loss, mems = model(x, y, mems)
        torch_device.step(loss, opt, model.parameters(), 0.25, scaler)
        if step == 0:
            first_loss = float(loss)  # warm-up: not timed
    torch_device.synchronize(a)
    seconds = time.perf_counter() - start
    print(json.dumps({"tokens_per_s": a.steps * a.tgt_len * a.batch / seconds, **window.fields(),
                      "first_loss": first_loss, "loss": float(loss), "params": params, "torch": torch.__version__,
                      **torch_device.report_fields(a)}))


if __name__ == "__main__":
    main()
