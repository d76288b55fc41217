#!/usr/bin/env python3
"""PyTorch peer of kernel_bench (bench/kernels/kernel_bench.cpp): the same cases under the same
names, through PyTorch's own ops, at the same GPU sizes (each case's size_gpu in
bench/kernels/kernel_cases.h) and with the same compulsory bytes (every input read once, every
output written once) or FLOPs, next to the device-to-device copy rate of 512 MiB measured in the
same run. Prints a table like kernel_bench's and one JSON line per case (name, size, ms, bytes,
gbps or flops and gflops, pct_of_copy) for bench/peers/join_peers.py to join with kernel_bench.

  kernels_torch.py [--device cuda|cpu] [--small] [--filter SUBSTRING] [--warmup 20] [--rounds 5]
                   [--launches 50]
  kernels_torch.py --list   (each case's name, GPU size and --small size, tab-separated, as
                             kernel_bench --list prints them; scripts/checks/check-kernel-peers.py)

Timing: `warmup` untimed calls, then `rounds` rounds of `launches` back-to-back calls, each round
timed with CUDA events around the whole round (the host clock on the CPU); a call's time is the
median round's over `launches`. On a GPU: float32 with TF32 off (define's SGEMM is full float32).
--device cpu with --small (kernel_cases.h's emulator sizes, size_emu) runs the same code on the CPU:
it tests the script where there is no GPU; its figures say nothing about a GPU.

Every kernel_bench case has a row: timed, or a JSON line {"name", "size", "skipped": why} where this
device or this torch cannot time it (float16 on the CPU; scaled_dot_product_attention before torch
2.0) or PyTorch has no counterpart (gemm (tiled kernel): define's own GEMM kernel; PyTorch's is the
default path's row). The relative-attention cases (fused and unfused, and the row kernel and the
unshift of the unfused path) stand beside the composition Transformer-XL's reference code runs, the
attention row kernels beside the masked softmax and dropout of an eager attention layer, and the
fused attention cases beside scaled_dot_product_attention. Some
ops do more than the compulsory work by design and are still timed as PyTorch runs them:
dropout also writes its mask (one byte per element); the transposed copy allocates its output
through the caching allocator (x.t().contiguous()).
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

F32 = 4.0


def f32_bytes(elements):
    return F32 * elements


def uniform(shape, dev, dtype=torch.float32):
    return (torch.rand(shape, device=dev) * 2 - 1).to(dtype)


def shifted(bd):
    """Transformer-XL's relative shift of the position scores [B, H, Tq, Tk], as its reference code
    does it: a zero column in front, the rows viewed one longer, the first dropped."""
    b, h, tq, tk = bd.shape
    padded = torch.cat([bd.new_zeros(b, h, tq, 1), bd], dim=-1).view(b, h, tk + 1, tq)
    return padded[:, :, 1:].reshape(b, h, tq, tk)


def cases(dev, gpu):
    """([(name, size shown, bytes, flops, build)], [(name, size shown, why not timed)]) as
    kernel_cases.h has them; build() makes the inputs and returns the call to time."""
    n = (64 << 20) if gpu else (1 << 20)
    size_n = "64M" if gpu else "1M"
    c, skipped = [], []

    def skip(name, size, why):
        skipped.append((name, size, why))

    def transpose():
        m = 8192 if gpu else 1024
        x = uniform((m, m), dev)
        return lambda: x.t().contiguous()
    m = 8192 if gpu else 1024
    c.append(("copy (transpose)", f"{m}x{m}", f32_bytes(2.0 * m * m), 0, transpose))

    def fill():
        y = torch.empty(n, device=dev)
        return lambda: y.fill_(1.5)
    c.append(("fill", size_n, f32_bytes(n), 0, fill))

    def gelu():
        x = uniform((n,), dev)
        return lambda: F.gelu(x)  # the erf form, as define's Gelu
    c.append(("unary gelu", size_n, f32_bytes(2.0 * n), 0, gelu))

    r, k = (16384, 4096) if gpu else (1024, 1024)

    def add():
        a, b, y = uniform((r, k), dev), uniform((k,), dev), torch.empty(r, k, device=dev)
        return lambda: torch.add(a, b, out=y)
    c.append(("binary add (row broadcast)", f"{r}x{k} + {k}", f32_bytes(2.0 * r * k + k), 0, add))

    def half_sum(name, dim, outputs):
        """A float16 r x k tensor summed over dim (float16 on the GPU only)."""
        if not gpu:
            skip(name, f"{r}x{k}", "float16 on the GPU only")
            return

        def make():
            x = uniform((r, k), dev, torch.float16)
            return lambda: x.sum(dim)
        c.append((name, f"{r}x{k}", 2.0 * (1.0 * r * k + outputs), 0, make))

    def sum_last():
        x = uniform((r, k), dev)
        return lambda: x.sum(1)
    c.append(("sum (last dim)", f"{r}x{k}", f32_bytes(1.0 * r * k + r), 0, sum_last))
    half_sum("sum (last dim) float16", 1, r)  # rows of 16-bit activations under mixed precision

    def sum_first():
        x = uniform((r, k), dev)
        return lambda: x.sum(0)
    c.append(("sum (first dim)", f"{r}x{k}", f32_bytes(1.0 * r * k + k), 0, sum_first))

    bh, hh, th = (64, 8, 512) if gpu else (4, 4, 150)

    def sum_batch_time():
        x = uniform((bh, hh, th, 64), dev)
        return lambda: x.sum((0, 2))
    c.append(("sum (batch and time dims)", f"{bh}x{hh}x{th}x64", f32_bytes(1.0 * bh * hh * th * 64 + hh * 64), 0,
              sum_batch_time))
    # define's column_sum (a GEMM-family kernel for bias gradients) is the same reduction in PyTorch.
    c.append(("column_sum", f"{r}x{k}", f32_bytes(1.0 * r * k + k), 0, sum_first))
    half_sum("column_sum float16", 0, k)  # a bias gradient under mixed precision: float16 rows summed

    rv, v = (4096, 32000) if gpu else (256, 10000)

    def log_softmax():
        x = uniform((rv, v), dev)
        return lambda: F.log_softmax(x, 1)
    c.append(("log_softmax", f"{rv}x{v}", f32_bytes(2.0 * rv * v), 0, log_softmax))

    def cross_entropy():
        x, t = uniform((rv, v), dev), torch.randint(0, v, (rv,), device=dev)
        return lambda: F.cross_entropy(x, t, reduction="none")
    c.append(("cross_entropy rows", f"{rv}x{v}", f32_bytes(1.0 * rv * v + 2.0 * rv), 0, cross_entropy))

    rl, kl = (16384 if gpu else 1024), 1024

    def ln_forward():
        x, w, b = uniform((rl, kl), dev), uniform((kl,), dev), uniform((kl,), dev)
        return lambda: torch.native_layer_norm(x, [kl], w, b, 1e-5)  # output, mean and rstd, as define's
    c.append(("layer_norm forward", f"{rl}x{kl}", f32_bytes(2.0 * rl * kl + 2.0 * rl), 0, ln_forward))

    def ln_backward():
        x, w, b, dy = uniform((rl, kl), dev), uniform((kl,), dev), uniform((kl,), dev), uniform((rl, kl), dev)
        _, mean, rstd = torch.native_layer_norm(x, [kl], w, b, 1e-5)
        return lambda: torch.ops.aten.native_layer_norm_backward(dy, x, [kl], mean, rstd, w, b, [True, True, True])
    c.append(("layer_norm backward", f"{rl}x{kl}", f32_bytes(3.0 * rl * kl + 2.0 * rl), 0, ln_backward))

    def adam():
        p = torch.nn.Parameter(uniform((n,), dev))
        p.grad = uniform((n,), dev)
        opt = None
        if dev.type == "cuda":
            try:  # the fused multi-tensor kernel where this torch has it (1.13+)
                opt = torch.optim.Adam([p], lr=1e-3, fused=True)
            except (TypeError, RuntimeError):
                opt = None
        if opt is None:
            opt = torch.optim.Adam([p], lr=1e-3, foreach=dev.type == "cuda")
        opt.step()  # creates the moments: the timed steps read and write them
        with torch.no_grad():
            st = opt.state[p]
            st["exp_avg"].copy_(uniform((n,), dev))
            st["exp_avg_sq"].copy_(torch.rand(n, device=dev))  # a second moment is >= 0
        return opt.step
    c.append(("adam_update", size_n, f32_bytes(7.0 * n), 0, adam))

    def dropout():
        x = uniform((n,), dev)
        return lambda: F.dropout(x, 0.3, training=True)
    c.append(("dropout", size_n, f32_bytes(2.0 * n), 0, dropout))

    t, e, vocab = (65536, 1024, 10000) if gpu else (8192, 400, 10000)

    def emb_forward():
        w, idx = uniform((vocab, e), dev), torch.randint(0, vocab, (t,), device=dev)
        return lambda: F.embedding(idx, w)
    c.append(("embedding forward", f"{t} tok x {e}", f32_bytes(2.0 * t * e) + 8.0 * t, 0, emb_forward))

    def emb_backward():
        g, idx = uniform((t, e), dev), torch.randint(0, vocab, (t,), device=dev)
        return lambda: torch.ops.aten.embedding_dense_backward(g, idx, vocab, -1, False)
    c.append(("embedding backward", f"{t} tok x {e}", f32_bytes(1.0 * t * e + 1.0 * vocab * e) + 8.0 * t, 0,
              emb_backward))

    ti, ri, mi = (65536, 16384, 1024) if gpu else (8192, 4096, 256)

    def index_select():
        x, idx = uniform((ri, mi), dev), torch.randint(0, ri, (ti,), device=dev)
        return lambda: torch.index_select(x, 0, idx)
    c.append(("index_select rows", f"{ti} of {ri}x{mi}", f32_bytes(2.0 * ti * mi) + 8.0 * ti, 0, index_select))

    g = 4096 if gpu else 256
    for name, dtype, elem in (("gemm (default path)", torch.float32, 4.0),
                              ("gemm float16 (GemmEx)", torch.float16, 2.0),
                              ("gemm bfloat16 (GemmEx)", torch.bfloat16, 2.0)):
        if dtype == torch.float16 and not gpu:
            skip(name, f"{g}^3", "float16 on the GPU only")
            continue

        def gemm(dtype=dtype):
            a, b = uniform((g, g), dev, dtype), uniform((g, g), dev, dtype)
            return lambda: torch.matmul(a, b)
        c.append((name, f"{g}^3", elem * 3.0 * g * g, 2.0 * g * g * g, gemm))
    skip("gemm (tiled kernel)", f"{g}^3", "define's own GEMM kernel; PyTorch's GEMM is the gemm (default path) row")

    # The unfused attention's row kernels beside an eager attention layer's masked softmax and
    # dropout (forward), and the gradient of the scores through them and the 0.125 scale (backward).
    ab, ah, aq, ak = (64, 8, 256, 256) if gpu else (8, 8, 64, 128)
    asize = f"{ab}x{ah}x{aq}x{ak}"
    causal = (torch.arange(ak, device=dev).unsqueeze(0) > torch.arange(aq, device=dev).unsqueeze(1) + (ak - aq))

    def attention_rows():
        s = uniform((ab, ah, aq, ak), dev)
        return lambda: F.dropout(torch.softmax(s.masked_fill(causal, float("-inf")), dim=-1), 0.1, training=True)

    def attention_rows_backward():
        s = uniform((ab, ah, aq, ak), dev).requires_grad_(True)
        with torch.enable_grad():
            probs = F.dropout(torch.softmax((s * 0.125).masked_fill(causal, float("-inf")), dim=-1), 0.1,
                              training=True)
        g = uniform(probs.shape, dev)
        return lambda: torch.autograd.grad(probs, s, g, retain_graph=True)
    c.append(("attention rows", asize, f32_bytes(3.0 * ab * ah * aq * ak), 0, attention_rows))
    c.append(("attention rows backward", asize, f32_bytes(4.0 * ab * ah * aq * ak), 0, attention_rows_backward))

    # Fused attention: PyTorch's scaled_dot_product_attention (its fused kernels on a GPU; torch 2.0
    # and newer) at B x H x T x T, d 64 (its default scale is 1 / sqrt(64), define's 0.125), no mask;
    # the backward through autograd on a kept graph.
    fb, fh, ft, hd = (16, 8, 512, 64) if gpu else (1, 2, 128, 64)
    fsize = f"{fb}x{fh}x{ft}x{ft} d{hd}"

    def sdpa(backward):
        def build():
            q, k, v = (uniform((fb, fh, ft, hd), dev).requires_grad_(backward) for _ in range(3))
            if not backward:
                return lambda: F.scaled_dot_product_attention(q, k, v)
            with torch.enable_grad():
                out = F.scaled_dot_product_attention(q, k, v)
            up = uniform(out.shape, dev)
            return lambda: torch.autograd.grad(out, (q, k, v), up, retain_graph=True)
        return build
    c.append(("flash_attention forward", fsize, f32_bytes(4.0 * fb * fh * ft * hd + fb * fh * ft),
              2.0 * fb * fh * ft * ft * (2 * hd), sdpa(False)))
    c.append(("flash_attention backward", fsize, f32_bytes(8.0 * fb * fh * ft * hd + fb * fh * ft),
              2.0 * fb * fh * ft * ft * (7 * hd), sdpa(True)))
    for name, dtype in (("flash_attention forward float16", torch.float16),
                        ("flash_attention forward bfloat16", torch.bfloat16)):
        if dtype == torch.float16 and not gpu:
            skip(name, fsize, "float16 on the GPU only")
            skip(name.replace("forward", "backward"), fsize, "float16 on the GPU only")
            continue

        def sdpa16(dtype=dtype):
            q, k, v = (uniform((fb, fh, ft, hd), dev, dtype) for _ in range(3))
            return lambda: F.scaled_dot_product_attention(q, k, v)

        def sdpa16_backward(dtype=dtype):
            q, k, v = (uniform((fb, fh, ft, hd), dev, dtype).requires_grad_(True) for _ in range(3))
            with torch.enable_grad():
                out = F.scaled_dot_product_attention(q, k, v)
            up = uniform(out.shape, dev, dtype)
            return lambda: torch.autograd.grad(out, (q, k, v), up, retain_graph=True)
        c.append((name, fsize, 2.0 * 4.0 * fb * fh * ft * hd + 4.0 * fb * fh * ft,
                  2.0 * fb * fh * ft * ft * (2 * hd), sdpa16))
        c.append((name.replace("forward", "backward"), fsize, 2.0 * 8.0 * fb * fh * ft * hd + 8.0 * fb * fh * ft,
                  2.0 * fb * fh * ft * ft * (7 * hd), sdpa16_backward))

    # A decoding step: one query row per head against a 1 x H x T cache (kernel_cases.h), float32
    # and (GPU only) float16; bandwidth-bound, the cache read once.
    dh, dt = (8, 4096) if gpu else (2, 1024)
    dsize = f"1x{dh}x1x{dt} d{hd}"
    for name, dtype, width in (("flash_attention decode", torch.float32, 4.0),
                               ("flash_attention decode float16", torch.float16, 2.0)):
        if dtype == torch.float16 and not gpu:
            skip(name, dsize, "float16 on the GPU only")
            continue

        def decode(dtype=dtype):
            q = uniform((1, dh, 1, hd), dev, dtype)
            k, v = (uniform((1, dh, dt, hd), dev, dtype) for _ in range(2))
            return lambda: F.scaled_dot_product_attention(q, k, v)
        c.append((name, dsize, width * 2.0 * dh * dt * hd, 0.0, decode))

    # A step of beam search: 128 sentences x 5 beams against a 32-token cache.
    bb, bh = (640, 8) if gpu else (40, 2)

    def beam_decode():
        q = uniform((bb, bh, 1, hd), dev)
        k, v = (uniform((bb, bh, 32, hd), dev) for _ in range(2))
        return lambda: F.scaled_dot_product_attention(q, k, v)
    c.append(("flash_attention decode (beam search)", f"{bb}x{bh}x1x32 d{hd}",
              f32_bytes(2.0 * bb * bh * 32 * hd + 2.0 * bb * bh * hd), 0.0, beam_decode))

    # Transformer-XL's relative attention as its reference code composes it (PyTorch has no op of its
    # own): AC = (q + u) k^T, BD = (q + w) r^T shifted by the pad-and-view trick, the causal mask over
    # the memory, softmax, times V. Tk = 2 Tq, d 64, at the sizes of kernel_cases.h's fused cases; the
    # same composition stands beside define's fused and unfused forms.
    rb, rh, rq, rd = (16, 8, 150, 64) if gpu else (1, 2, 64, 64)
    rk = 2 * rq
    rsize = f"{rb}x{rh}x{rq}x{rk} d{rd}"
    rel_pairs = rb * rh * rq * (rq + (rq + 1) / 2)

    def rel_attention(backward, dtype=torch.float32):
        def build():
            q = uniform((rb, rh, rq, rd), dev, dtype).requires_grad_(backward)
            k, v = (uniform((rb, rh, rk, rd), dev, dtype).requires_grad_(backward) for _ in range(2))
            r = uniform((rh, rk, rd), dev, dtype).requires_grad_(backward)
            u, w = (uniform((rh, 1, rd), dev, dtype).requires_grad_(backward) for _ in range(2))
            i = torch.arange(rq, device=dev).unsqueeze(1)
            j = torch.arange(rk, device=dev).unsqueeze(0)
            hidden = j > i + (rk - rq)

            def forward():
                ac = torch.matmul(q + u, k.transpose(-1, -2))
                bd = torch.matmul(q + w, r.transpose(-1, -2))
                scores = ((ac + shifted(bd)) * 0.125).masked_fill(hidden, float("-inf"))
                return torch.matmul(torch.softmax(scores, dim=-1), v)
            if not backward:
                return forward
            with torch.enable_grad():
                out = forward()
            up = uniform(out.shape, dev, dtype)
            return lambda: torch.autograd.grad(out, (q, k, v, r, u, w), up, retain_graph=True)
        return build
    # A step of generation against the evaluation memory: one query row, position p = j (no shift).
    gb, gh, gk = (4, 8, 1600) if gpu else (1, 2, 512)

    def rel_decode(dtype=torch.float32):
        def build():
            q = uniform((gb, gh, 1, rd), dev, dtype)
            k, v = (uniform((gb, gh, gk, rd), dev, dtype) for _ in range(2))
            r = uniform((gh, gk, rd), dev, dtype)
            u, w = (uniform((gh, 1, rd), dev, dtype) for _ in range(2))
            return lambda: torch.matmul(torch.softmax((torch.matmul(q + u, k.transpose(-1, -2)) +
                                                       torch.matmul(q + w, r.transpose(-1, -2))) * 0.125, dim=-1), v)
        return build
    rel_decode_elements = 2.0 * gb * gh * gk * rd + gh * gk * rd
    c.append(("flash_rel_attention decode", f"{gb}x{gh}x1x{gk} d{rd}", f32_bytes(rel_decode_elements), 0.0,
              rel_decode()))
    if gpu:  # float16 on the GPU only, as the other 16-bit cases
        c.append(("flash_rel_attention decode float16", f"{gb}x{gh}x1x{gk} d{rd}", 2.0 * rel_decode_elements, 0.0,
                  rel_decode(torch.float16)))
    else:
        skip("flash_rel_attention decode float16", f"{gb}x{gh}x1x{gk} d{rd}", "float16 on the GPU only")
    rel_fw_bytes = f32_bytes(rb * rh * (2.0 * rq * rd + 2.0 * rk * rd + rq) + rh * rk * rd)
    rel_bw_bytes = f32_bytes(rb * rh * (6.0 * rq * rd + 4.0 * rk * rd + 2.0 * rq) + (rb + 1) * rh * rk * rd)
    for name in ("flash_rel_attention forward", "rel_attention forward (unfused)"):
        c.append((name, rsize, rel_fw_bytes, 2.0 * rel_pairs * (3 * rd), rel_attention(False)))
    for name in ("flash_rel_attention backward", "rel_attention backward (unfused)"):
        c.append((name, rsize, rel_bw_bytes, 2.0 * rel_pairs * (14 * rd), rel_attention(True)))
    if gpu:  # the same composition in float16 beside define's tensor-core kernels (bytes as kernel_cases.h's)
        c.append(("flash_rel_attention forward float16", rsize,
                  2.0 * (rb * rh * (2.0 * rq * rd + 2.0 * rk * rd) + rh * rk * rd) + 4.0 * rb * rh * rq,
                  2.0 * rel_pairs * (3 * rd), rel_attention(False, torch.float16)))
        c.append(("flash_rel_attention backward float16", rsize,
                  2.0 * (rb * rh * (6.0 * rq * rd + 4.0 * rk * rd) + 2.0 * rh * rk * rd) +
                  4.0 * (2.0 * rb * rh * rq + rb * rh * rk * rd),
                  2.0 * rel_pairs * (14 * rd), rel_attention(True, torch.float16)))
    else:
        for name in ("flash_rel_attention forward float16", "flash_rel_attention backward float16"):
            skip(name, rsize, "float16 on the GPU only")

    # The unfused relative path's row kernel (scores from AC and the shifted BD, mask, softmax, dropout)
    # and its backward's unshift, beside the same steps of the reference composition (the unshift: the
    # gradient through the pad-and-view shift), at B x H x Tq x 2 Tq.
    ub, uh, uq = (64, 8, 150) if gpu else (8, 8, 64)
    uk = 2 * uq
    usize = f"{ub}x{uh}x{uq}x{uk}"
    later = torch.arange(uk, device=dev).unsqueeze(0) > torch.arange(uq, device=dev).unsqueeze(1) + (uk - uq)

    def rel_rows():
        ac, bd = uniform((ub, uh, uq, uk), dev), uniform((ub, uh, uq, uk), dev)
        return lambda: F.dropout(torch.softmax(((ac + shifted(bd)) * 0.15).masked_fill(later, float("-inf")), dim=-1),
                                 0.1, training=True)

    def rel_unshift():
        bd = uniform((ub, uh, uq, uk), dev).requires_grad_(True)
        with torch.enable_grad():
            out = shifted(bd)
        g = uniform(out.shape, dev)
        return lambda: torch.autograd.grad(out, bd, g, retain_graph=True)
    c.append(("rel_attention rows", usize, f32_bytes(4.0 * ub * uh * uq * uk), 0, rel_rows))
    c.append(("rel_attention unshift", usize, f32_bytes(2.0 * ub * uh * uq * uk), 0, rel_unshift))

    batch, nb = (64 if gpu else 8), 128

    def bmm():
        a, b = uniform((batch, nb, nb), dev), uniform((batch, nb, nb), dev)
        return lambda: torch.bmm(a, b)
    c.append(("bmm 64 x 128^3", f"{batch}x{nb}^3", f32_bytes(3.0 * batch * nb * nb), 2.0 * batch * nb ** 3, bmm))
    if not hasattr(F, "scaled_dot_product_attention"):
        why = f"torch {torch.__version__} has no scaled_dot_product_attention (2.0 and newer)"
        skipped += [(name, size, why) for name, size, *_ in c if name.startswith("flash_attention")]
        c = [case for case in c if not case[0].startswith("flash_attention")]
    return c, skipped


def time_call(fn, dev, warmup, rounds, launches):
    """Seconds per call: the median round of `launches` back-to-back calls."""
    for _ in range(warmup):
        fn()
    per_round = []
    if dev.type == "cuda":
        torch.cuda.synchronize()
        for _ in range(rounds):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(launches):
                fn()
            end.record()
            end.synchronize()
            per_round.append(start.elapsed_time(end) / 1e3 / launches)
    else:
        for _ in range(rounds):
            t0 = time.perf_counter()
            for _ in range(launches):
                fn()
            per_round.append((time.perf_counter() - t0) / launches)
    return statistics.median(per_round)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--small", action="store_true", help="kernel_cases.h's emulator sizes (size_emu)")
    ap.add_argument("--filter", default="")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--launches", type=int, default=50)
    ap.add_argument("--list", action="store_true", help="the cases and their sizes; times nothing")
    a = ap.parse_args()
    if a.list:  # sizes only: build() is never called, so this runs anywhere
        small = {name: size for name, size, *_ in sum(cases(torch.device("cpu"), False), [])}
        for name, size, *_ in sum(cases(torch.device("cpu"), True), []):
            print(f"{name}\t{size}\t{small.get(name, '-')}")
        return
    dev = torch.device(a.device)
    if a.device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("kernels_torch.py: no CUDA device in this torch (%s); --device cpu --small tests the "
                             "script without one" % torch.__version__)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    gpu = not a.small
    torch.manual_seed(0)
    with torch.no_grad():
        copy_n = (128 << 20) if gpu else (4 << 20)  # floats: 512 MiB (16 MiB at --small)
        x, y = torch.zeros(copy_n, device=dev), torch.empty(copy_n, device=dev)
        copy_s = time_call(lambda: y.copy_(x), dev, min(a.warmup, 5), a.rounds, min(a.launches, 10))
        copy_gbps = 2.0 * F32 * copy_n / copy_s / 1e9
        del x, y
        name = torch.cuda.get_device_name() if a.device == "cuda" else "CPU"
        print(f"device {a.device} ({name}, torch {torch.__version__}): measured copy bandwidth {copy_gbps:.0f} GB/s"
              f" ({copy_n * F32 / 2**20:.0f} MiB)\n")
        rows = [{"name": "copy rate", "device": a.device, "gpu": name, "torch": torch.__version__,
                 "small": a.small, "gbps": copy_gbps, "bytes": 2.0 * F32 * copy_n, "ms": copy_s * 1e3}]
        print(f"{'kernel':<28} {'size':>22} {'time':>10} {'achieved':>12} {'of limit':>9}")
        timed, skipped = cases(dev, gpu)
        for case, size, why in skipped:
            if not a.filter or a.filter in case:
                print(f"{case:<28} {size:>22} (not timed: {why})")
                rows.append({"name": case, "size": size, "skipped": why})
        for case, size, nbytes, flops, build in timed:
            if a.filter and a.filter not in case:
                continue
            s = time_call(build(), dev, a.warmup, a.rounds, a.launches)
            row = {"name": case, "size": size, "ms": s * 1e3, "bytes": nbytes}
            if flops:
                row.update(flops=flops, gflops=flops / s / 1e9)
                print(f"{case:<28} {size:>22} {s * 1e3:>8.3f}ms {flops / s / 1e9:>7.0f} GF/s {'':>9}")
            else:
                gbps = nbytes / s / 1e9
                row.update(gbps=gbps, pct_of_copy=100 * gbps / copy_gbps)
                print(f"{case:<28} {size:>22} {s * 1e3:>8.3f}ms {gbps:>7.0f} GB/s {100 * gbps / copy_gbps:>8.0f}%")
            rows.append(row)
            if a.device == "cuda":
                torch.cuda.empty_cache()  # the next case's inputs get the memory back
    print()
    for row in rows:
        print(json.dumps(row))


if __name__ == "__main__":
    main()
