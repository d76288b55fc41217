#!/usr/bin/env python3
"""PyTorch peer of kernel_bench's GEMM rows on a GPU: n x n x n matmuls in float32 (TF32 off, as define's
SGEMM), float16 and bfloat16 (float accumulation, tensor cores), timed with CUDA events over back-to-back
launches after a warm-up; one JSON line per dtype with TFLOP/s. Needs a CUDA build of torch and a GPU.
"""
import argparse
import json

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gemm_torch.py: no CUDA device (this peer measures the GPU)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for name, dtype in (("float32", torch.float32), ("float16", torch.float16), ("bfloat16", torch.bfloat16)):
        x = torch.rand(a.n, a.n, device="cuda", dtype=dtype) * 2 - 1
        y = torch.rand(a.n, a.n, device="cuda", dtype=dtype) * 2 - 1
        for _ in range(3):
            torch.matmul(x, y)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(a.reps):
            torch.matmul(x, y)
        end.record()
        torch.cuda.synchronize()
        seconds = start.elapsed_time(end) / 1e3 / a.reps
        print(json.dumps({"peer": "torch", "dtype": name, "n": a.n, "tflops": 2 * a.n ** 3 / seconds / 1e12,
                          "device": torch.cuda.get_device_name(), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
