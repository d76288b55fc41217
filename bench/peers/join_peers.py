#!/usr/bin/env python3
"""Joins define's GPU benchmark output with its PyTorch peers' into one table (scripts/gpu-check.sh,
stage peers). Python 3 standard library only.

  join_peers.py kernels KERNEL_BENCH_LOG KERNELS_TORCH_LOG
      kernel_bench --device cuda's table beside kernels_torch.py --device cuda's JSON lines, case by
      case under kernel_bench's names: each side's time, define's time over PyTorch's, and each
      side's bandwidth as a share of the copy rate that side measured in its own run (GEMMs: each
      side's GFLOP/s). Cases only one side has show "-" for the other; below the table, the reason
      kernels_torch.py gave for each case it did not time.
  join_peers.py models LOG...
      the `json   : {...}` summary lines of lm_train_bench / txl_train_bench / nmt_train_bench runs
      with --device cuda: tokens/s of both, their ratio, and both sides' peak device memory.
"""
import json
import re
import sys

ROW = re.compile(r"^(?P<rest>.*?)\s+(?P<ms>[0-9.]+)ms\s+(?P<rate>[0-9.]+) (?P<unit>GB/s|GF/s)\s+(?P<pct>[0-9.]+)%\s*$")
COPY = re.compile(r"measured copy bandwidth ([0-9.]+) GB/s")


def read_lines(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()
    except OSError as e:
        print(f"(cannot read {path}: {e.strerror})")
        return []


def parse_kernel_bench(lines, known):
    """kernel_bench's GPU table -> (copy GB/s or None, {name: row}). A row's name is the one of
    `known` ({name: size}) whose name and size make up the row's text before its time (a name may
    begin another: "attention rows" and "attention rows backward"), else the text before the first
    run of two or more spaces."""
    copy, rows, order = None, {}, []
    for line in lines:
        m = COPY.search(line)
        if m:
            copy = float(m.group(1))
            continue
        m = ROW.match(line)
        if not m:
            continue
        rest = m.group("rest")
        name = next((k for k, size in known.items() if re.fullmatch(re.escape(k) + r"\s+" + re.escape(size), rest)),
                    None)
        if name is None:
            name = re.split(r"\s{2,}", rest.strip())[0]
        rows[name] = {"ms": float(m.group("ms")), "rate": float(m.group("rate")), "unit": m.group("unit"),
                      "pct": float(m.group("pct"))}
        order.append(name)
    return copy, rows, order


def parse_torch(lines):
    """kernels_torch.py's JSON lines -> (copy GB/s, the copy-rate row, {name: row}, order,
    {name: why not timed}, {name: size} of those not timed)."""
    copy, info, rows, order, skipped, sizes = None, {}, {}, [], {}, {}
    for line in lines:
        if not line.startswith("{"):
            continue
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if j.get("name") == "copy rate":
            copy, info = j.get("gbps"), j
        elif "skipped" in j:
            skipped[j["name"]] = j["skipped"]
            sizes[j["name"]] = j.get("size", "")
        elif "name" in j:
            rows[j["name"]] = j
            order.append(j["name"])
    return copy, info, rows, order, skipped, sizes


def kernels(kernel_bench_log, torch_log):
    t_copy, t_info, t_rows, t_order, t_skipped, t_sizes = parse_torch(read_lines(torch_log))
    known = {name: row.get("size", "") for name, row in t_rows.items()}
    known.update(t_sizes)
    d_copy, d_rows, d_order = parse_kernel_bench(read_lines(kernel_bench_log), known)
    print(f"define (kernel_bench): copy rate {d_copy or 0:.0f} GB/s; pytorch (kernels_torch.py, torch "
          f"{t_info.get('torch', '?')} on {t_info.get('gpu', '?')}): copy rate {t_copy or 0:.0f} GB/s")
    print(f"{'case':<28} {'define ms':>10} {'torch ms':>10} {'define/torch':>13} {'define':>11} {'torch':>11}")
    names = d_order + [n for n in t_order if n not in d_rows]
    for name in names:
        d, t = d_rows.get(name), t_rows.get(name)
        d_ms = f"{d['ms']:.3f}" if d else "-"
        t_ms = f"{t['ms']:.3f}" if t else "-"
        ratio = f"{d['ms'] / t['ms']:.2f}x" if d and t and t["ms"] > 0 else "-"
        if (d and d["unit"] == "GF/s") or (t and "gflops" in t):
            d_share = f"{d['rate']:.0f} GF/s" if d else "-"
            t_share = f"{t['gflops']:.0f} GF/s" if t else "-"
        else:
            # each side against its own copy rate: the share of what that run could move
            d_share = f"{100 * d['rate'] / d_copy:.0f}% copy" if d and d_copy else "-"
            t_share = f"{t['pct_of_copy']:.0f}% copy" if t and "pct_of_copy" in t else "-"
        print(f"{name:<28} {d_ms:>10} {t_ms:>10} {ratio:>13} {d_share:>11} {t_share:>11}")
    for name, why in t_skipped.items():
        print(f"{name}: no torch time ({why})")
    print("define/torch > 1: define is slower. define's times are kernel_bench's as it takes them (its header says"
          " how); torch's are CUDA events around rounds of back-to-back launches, the median round's per call.")
    if not d_rows or not t_rows:
        print("(incomplete: %s)" % ", ".join(w for w, rows in (("no kernel_bench rows", d_rows),
                                                                 ("no kernels_torch rows", t_rows)) if not rows))
        return 1
    return 0


def mib(x):
    return f"{x / 2**20:.1f}" if isinstance(x, (int, float)) else "-"


def models(logs):
    print(f"{'bench':<6} {'precision':<9} {'define tok/s':>12} {'torch tok/s':>12} {'define/torch':>12} "
          f"{'define MiB':>11} {'torch MiB':>10} {'memory':>7}")
    missing = 0
    for path in logs:
        lines = read_lines(path)
        summary = next((l for l in reversed(lines) if l.startswith("json   : ")), None)
        if summary is None:
            missing += 1
            last = next((l.strip() for l in reversed(lines) if l.strip()), "empty log")
            print(f"{path.rsplit('/', 1)[-1]}: no result ({last[:120]})")
            continue
        j = json.loads(summary[len("json   : "):])

        def num(key, fmt, suffix=""):
            return format(j[key], fmt) + suffix if key in j else "-"
        print(f"{j.get('bench', '?'):<6} {j.get('precision', '?'):<9} {num('define_tokens_per_s', '.0f'):>12} "
              f"{num('torch_tokens_per_s', '.0f'):>12} {num('ratio', '.2f', 'x'):>12} "
              f"{mib(j.get('define_peak_device_bytes')):>11} {mib(j.get('torch_peak_device_bytes')):>10} "
              f"{num('memory_ratio', '.2f', 'x'):>7}")
    print("define/torch > 1: define trains faster. Memory: peak live tensor bytes on the device (define's caching"
          " allocator; torch.cuda.max_memory_allocated).")
    return 1 if missing else 0


def main(argv):
    if len(argv) == 4 and argv[1] == "kernels":
        return kernels(argv[2], argv[3])
    if len(argv) >= 3 and argv[1] == "models":
        return models(argv[2:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
