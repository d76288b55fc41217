#!/usr/bin/env python3
"""PyTorch peer of bench/lm_train_bench.cpp: trains the same LSTM language model (tied embedding,
stacked nn.LSTM, softmax over the vocabulary) on the same token stream shape and prints one JSON
line with tokens/s, the process's peak resident memory and its peak above the resident memory just
before training (peak_memory.py), and the parameter count (--params-only: the count alone, nothing
trained).

  lstm_lm_torch.py [--vocab 10000] [--emb 200] [--hidden 200] [--layers 2] [--batch 20] [--bptt 35]
                   [--steps 60] [--warmup 5] [--threads 2] [--params-only] [--device cpu|cuda]
                   [--amp none|fp16|bf16]

--device cuda trains on the GPU (float32 with TF32 off; --amp: autocast, fp16 with a GradScaler) and
adds the peak tensor memory on the device to the JSON line (torch_device.py).

Configured at its best on a small CPU: torch.set_num_threads(threads) for intra-op parallelism, one
inter-op thread, and the caller should run it with OMP_WAIT_POLICY=PASSIVE (Debian's torch uses
OpenMP; spinning idle workers and a pthread OpenBLAS oversubscribe 2 cores otherwise).
"""
import argparse
import json
import time

import torch
import torch.nn as nn

import peak_memory
import torch_device


class LstmLm(nn.Module):
    def __init__(self, vocab, emb, hidden, layers):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb)
        sizes = [hidden] * (layers - 1) + [emb]
        ins = [emb] + sizes[:-1]
        self.rnns = nn.ModuleList(nn.LSTM(i, h) for i, h in zip(ins, sizes))
        self.decoder = nn.Linear(emb, vocab)
        self.decoder.weight = self.embed.weight  # tied

    def forward(self, x, state):
        h = self.embed(x)
        new_state = []
        for rnn, s in zip(self.rnns, state):
            h, s = rnn(h, s)
            new_state.append(s)
        return self.decoder(h), new_state


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=10000)
    ap.add_argument("--emb", type=int, default=200)
    ap.add_argument("--hidden", type=int, default=200)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--bptt", type=int, default=35)
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
    model = LstmLm(a.vocab, a.emb, a.hidden, a.layers)
    params = sum(p.numel() for p in model.parameters())  # the tied table counted once
    if a.params_only:
        print(json.dumps({"params": params, "torch": torch.__version__}))
        return
    device = torch_device.setup(a)
    model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(1)
    data = torch.randint(0, a.vocab, (a.bptt * (a.steps + a.warmup) + 1, a.batch), generator=g).to(device)
    sizes = [a.hidden] * (a.layers - 1) + [a.emb]
    state = [(torch.zeros(1, a.batch, h, device=device), torch.zeros(1, a.batch, h, device=device)) for h in sizes]
    scaler = torch_device.grad_scaler(a)
    start = None
    window = peak_memory.TrainingWindow()  # right before the first step
    for step in range(a.steps + a.warmup):
        if step == a.warmup:
            torch_device.synchronize(a)
            start = time.perf_counter()
        x = data[step * a.bptt:(step + 1) * a.bptt]
        y = data[step * a.bptt + 1:(step + 1) * a.bptt + 1]
        state = [(h.detach(), c.detach()) for h, c in state]
        opt.zero_grad()
        with torch_device.autocast(a):
            logits, state = model(x, state)
            loss = loss_fn(logits.view(-1, a.vocab), y.reshape(-1))
        torch_device.step(loss, opt, model.parameters(), 0.25, scaler)
    torch_device.synchronize(a)
    seconds = time.perf_counter() - start
    print(json.dumps({"tokens_per_s": a.steps * a.bptt * a.batch / seconds, **window.fields(), "loss": float(loss),
                      "params": params, "torch": torch.__version__, **torch_device.report_fields(a)}))


if __name__ == "__main__":
    main()
