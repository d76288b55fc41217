#!/usr/bin/env python3
"""The GPU check's kernel peer table, made ready without a GPU (a ctest).

  check-kernel-peers.py KERNEL_BENCH

scripts/gpu-check.sh (stage peers) runs kernel_bench --device cuda beside
bench/peers/kernels_torch.py --device cuda and joins the two with bench/peers/join_peers.py. A GPU is
lent only now and then, for minutes, so what can go wrong there is checked here:
  1. kernels_torch.py has every case kernel_bench has, under the same name, at the same GPU size and
     the same small (emulator) size: kernel_bench --list against kernels_torch.py --list.
  2. kernels_torch.py --device cpu --small runs every case it can on this CPU and names the reason for
     each one it does not time (float16 on the CPU, an op this torch lacks, no PyTorch counterpart).
  3. join_peers.py parses a table in kernel_bench's GPU format with every case name and joins each
     timed case with its peer row.
Exit 77 (ctest: skipped, not passed) when no python3 here has torch (scripts/install-deps.sh installs it).
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PEER = os.path.join(ROOT, "bench", "peers", "kernels_torch.py")
JOIN = os.path.join(ROOT, "bench", "peers", "join_peers.py")


def torch_python():
    for candidate in ("/usr/bin/python3", sys.executable, "python3"):
        if subprocess.run([candidate, "-c", "import torch"], capture_output=True).returncode == 0:
            return candidate
    return None


def listing(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows = [line.split("\t") for line in out.splitlines() if line.strip()]
    return {r[0]: tuple(r[1:]) for r in rows}, [r[0] for r in rows]


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    python = torch_python()
    if python is None:
        print("no python3 with torch here (scripts/install-deps.sh installs python3-torch): skipped")
        return 77
    errors = []

    # 1. The same cases at the same sizes.
    bench, bench_order = listing([argv[1], "--list"])
    peer, _ = listing([python, PEER, "--list"])
    for name in bench_order:
        if name not in peer:
            errors.append(f"kernel_bench case {name!r} has no entry in kernels_torch.py")
        elif peer[name] != bench[name]:
            errors.append(f"{name!r}: kernel_bench sizes {bench[name]} (GPU, emulator), kernels_torch.py {peer[name]}")
    errors += [f"kernels_torch.py case {name!r} is not a kernel_bench case" for name in peer if name not in bench]

    # 2. Every case timed or skipped with a reason, at the small sizes on this CPU.
    run = subprocess.run([python, PEER, "--device", "cpu", "--small", "--warmup", "1", "--rounds", "1",
                          "--launches", "1"], capture_output=True, text=True)
    if run.returncode != 0:
        errors.append(f"kernels_torch.py --device cpu --small failed:\n{run.stderr[-2000:]}")
    rows = {}
    for line in run.stdout.splitlines():
        if line.startswith("{"):
            j = json.loads(line)
            rows[j["name"]] = j
    timed = [n for n in bench_order if n in rows and "ms" in rows[n] and rows[n]["ms"] > 0]
    skipped = {n: rows[n]["skipped"] for n in bench_order if n in rows and rows[n].get("skipped")}
    for name in bench_order:
        if name not in timed and name not in skipped:
            errors.append(f"kernels_torch.py --device cpu --small neither timed {name!r} nor said why not")
    for name in timed:
        if rows[name].get("size") != bench[name][1]:
            errors.append(f"{name!r} ran at {rows[name].get('size')}, kernel_bench's small size is {bench[name][1]}")

    # 3. The join on a table in kernel_bench --device cuda's format (the times made up), at the sizes the
    #    peer ran (the small ones here, the GPU ones on a GPU).
    table = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"check-kernel-peers-{os.getpid()}")
    os.makedirs(table, exist_ok=True)
    with open(os.path.join(table, "kernel_bench.log"), "w") as f:
        f.write("device cuda:0: measured copy bandwidth 1000 GB/s, SGEMM 4096^3 10000 GFLOP/s\n\n")
        for name in bench_order:
            f.write(f"{name:<28} {bench[name][1]:>22} {1.0:>8.3f}ms {100:>7.0f} GB/s {10:>8.0f}%\n")
    with open(os.path.join(table, "kernels_torch.log"), "w") as f:
        f.write(run.stdout)
    join = subprocess.run([sys.executable, JOIN, "kernels", os.path.join(table, "kernel_bench.log"),
                           os.path.join(table, "kernels_torch.log")], capture_output=True, text=True)
    if join.returncode != 0:
        errors.append(f"join_peers.py kernels exited {join.returncode}:\n{join.stdout[-2000:]}{join.stderr[-2000:]}")
    for name in bench_order:
        # define ms, torch ms, define/torch, then the two shares
        line = next((l for l in join.stdout.splitlines() if l.startswith(name + " ")), None)
        fields = line[len(name):].split() if line else []
        if line is None:
            errors.append(f"join_peers.py printed no row for {name!r}")
        elif fields[0] != "1.000":
            errors.append(f"join_peers.py's row for {name!r} lacks kernel_bench's time: {line}")
        elif name in timed and not (fields[1] != "-" and fields[2].endswith("x")):
            errors.append(f"join_peers.py's row for {name!r} lacks the peer's time: {line}")
    for f in ("kernel_bench.log", "kernels_torch.log"):
        os.remove(os.path.join(table, f))
    os.rmdir(table)

    for e in errors:
        print("check-kernel-peers:", e)
    print(f"check-kernel-peers: {len(bench_order)} kernel_bench cases; the peer times {len(timed)} on this CPU and "
          f"skips {len(skipped)} with a reason; {len(errors)} problems")
    for name, why in skipped.items():
        print(f"  not timed here: {name}: {why}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
