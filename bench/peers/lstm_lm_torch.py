#!/usr/bin/env python3
"""PyTorch peer of bench/lm_train_bench.cpp: trains the same LSTM language model (tied embedding,
stacked nn.LSTM, softmax over the vocabulary) on the same token stream shape and prints one JSON
line with tokens/s and the process's peak resident memory.

Configured at its best on a small CPU: torch.set_num_threads(threads) for intra-op parallelism, one
inter-op thread, and the caller should run it with OMP_WAIT_POLICY=PASSIVE (Debian's torch uses
OpenMP; spinning idle workers and a pthread OpenBLAS oversubscribe 2 cores otherwise).
"""
import argparse
import json
import resource
import time

import torch
import torch.nn as nn


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
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.set_flush_denormal(True)  # as define does (kernels/cpu/denormals.h: flush_denormals)
    torch.manual_seed(0)
    model = LstmLm(a.vocab, a.emb, a.hidden, a.layers)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(1)
    data = torch.randint(0, a.vocab, (a.bptt * (a.steps + a.warmup) + 1, a.batch), generator=g)
    sizes = [a.hidden] * (a.layers - 1) + [a.emb]
    state = [(torch.zeros(1, a.batch, h), torch.zeros(1, a.batch, h)) for h in sizes]
    start = None
    for step in range(a.steps + a.warmup):
        if step == a.warmup:
            start = time.perf_counter()
        x = data[step * a.bptt:(step + 1) * a.bptt]
        y = data[step * a.bptt + 1:(step + 1) * a.bptt + 1]
        state = [(h.detach(), c.detach()) for h, c in state]
        opt.zero_grad()
        logits, state = model(x, state)
        loss = loss_fn(logits.view(-1, a.vocab), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"tokens_per_s": a.steps * a.bptt * a.batch / seconds, "peak_rss_bytes": peak,
                      "loss": float(loss), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
