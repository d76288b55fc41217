#!/usr/bin/env python3
"""Step-time model of data-parallel Transformer-XL training on 4 and 8 GeForce GPUs over PCIe
(docs/data-parallel.md explains each term). Prints one table row per GPU, GPU count and model.

step = compute / N + exposed communication
compute: FLOP per token x tokens per global batch / (N x peak x efficiency)
communication: ring all-reduce of every gradient byte, 2 (N - 1) / N x bytes / bus bandwidth,
  plus a latency term per bucket; the token representation's gradients (input table, tied
  softmax, DeFINE unit) are final only at the end of backward, so their share is never hidden;
  the rest hides behind the remaining backward (2/3 of compute) as far as it fits.
"""

FLOP_PER_TOKEN = 300e6        # context 36.25 M params x 6, attention over 300 keys, softmax head
TOKENS = 60 * 150             # the reference recipe's global batch (60 streams x tgt_len 150)
EFFICIENCY = 0.40             # share of FP32 peak a cuBLAS-bound step reaches on these shapes
GPUS = {"GTX 1080 Ti": 11.3e12, "RTX 2080 Ti": 13.4e12}   # FP32 peak FLOP/s
BUS_BW = {4: 6e9, 8: 4e9}     # NCCL ring bus bandwidth, bytes/s, GeForce (no P2P) on PCIe 3.0 x16
LATENCY = 30e-6               # per ring hop
BUCKETS = 4
# (name, parameters, of which token representation: input-output + DeFINE unit), define params
MODELS = [("standard, n = 384", 139.33e6, 103.08e6),
          ("DeFINE, n = 256", 107.55e6, 69.20e6 + 2.10e6),
          ("DeFINE, n = 64", 55.85e6, 17.50e6 + 2.10e6)]

print("| GPU | N | Transformer-XL | compute ms | all-reduce ms | exposed ms | step ms | speed-up | efficiency |")
print("|---|---|---|---|---|---|---|---|---|")
for gpu, peak in GPUS.items():
    single = FLOP_PER_TOKEN * TOKENS / (peak * EFFICIENCY)
    for n in (4, 8):
        compute = single / n
        backward = compute * 2 / 3
        for name, params, late_params in MODELS:
            comm = 2 * (n - 1) / n * 4 * params / BUS_BW[n] + 2 * (n - 1) * LATENCY * BUCKETS
            late = comm * late_params / params
            exposed = late + max(0.0, comm - late - backward)
            step = compute + exposed
            print(f"| {gpu} | {n} | {name} | {compute * 1e3:.0f} | {comm * 1e3:.0f} | {exposed * 1e3:.0f} | "
                  f"{step * 1e3:.0f} | {single / step:.2f}x | {100 * single / step / n:.0f}% |")
