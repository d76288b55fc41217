#!/usr/bin/env python3
"""scripts/checks/check-tensorboard.py   (run by ctest)

Checks scripts/metrics_to_tensorboard.py with TensorBoard's own reader: converts two hand-written
metrics.jsonl logs (as `define train` writes them: training and validation records, per-part
gradient norms, an overflow and a final record, a non-finite loss logged as "nan", a run whose last
line is still being written), reads the event files back with
tensorboard.backend.event_processing.event_accumulator.EventAccumulator and compares every scalar
(tag, step, wall time, value at float32) with the log, read here independently; then the errors
(a damaged line named by file:line, a missing run folder) and that converting again replaces the
event files. Exits 77 (ctest: skipped, not passed) where the tensorboard package is not installed
(scripts/install-deps.sh installs it).
"""
import json
import math
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from tensorboard.backend.event_processing import event_accumulator as ea
except ImportError as e:
    print(f"check-tensorboard: skipped: {sys.executable} cannot import tensorboard ({e}); "
          "scripts/install-deps.sh installs it")
    sys.exit(77)

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "metrics_to_tensorboard.py")

ALPHA = """\
{"elapsed_s":30.0,"epoch":1.0,"event":"train","grad_norm":2.5,"grad_norm DeFINE":0.31,"grad_norm context model":1.7,"loss":6.5,"lr":0.001,"perplexity":665.14,"step":10.0,"tokens_per_s":12000.0}
{"elapsed_s":61.5,"epoch":1.0,"event":"train","grad_norm":1.9,"grad_norm DeFINE":0.22,"grad_norm context model":1.1,"loss":5.9,"lr":0.0005,"perplexity":365.04,"step":20.0,"tokens_per_s":12500.0}
{"event":"overflow","loss_scale":32768.0,"overflows":1.0,"reason":"the loss itself was inf","step":20.0}

{"elapsed_s":70.0,"epoch":1.0,"event":"valid","loss":5.7,"perplexity":298.87,"step":20.0}
{"elapsed_s":101.0,"epoch":2.0,"event":"train","grad_norm":"inf","grad_norm DeFINE":0.15,"grad_norm context model":0.9,"loss":"nan","lr":0.0002,"perplexity":"nan","step":30.0,"tokens_per_s":11800.0}
{"elapsed_s":140.0,"epoch":2.0,"event":"train","grad_norm":0.8,"grad_norm DeFINE":0.12,"grad_norm context model":0.6,"loss":4.8,"lr":1e-05,"perplexity":121.51,"step":40.0,"tokens_per_s":12100.0}
{"elapsed_s":150.0,"end_of_budget":1.0,"epoch":2.0,"event":"valid","loss":5.1,"perplexity":164.02,"step":40.0}
{"event":"final","peak_rss_bytes":143654912.0,"seconds":150.0,"steps":40.0,"test_loss":5.14,"test_perplexity":170.7,"valid_loss":5.1,"valid_perplexity":164.02}
"""
BETA_COMPLETE = """\
{"elapsed_s":200.0,"epoch":1.0,"event":"train","grad_norm":4.0,"grad_norm embedding":0.05,"loss":7.0,"lr":20.0,"step":15.0,"tokens_per_s":3000.0}
{"elapsed_s":480.0,"epoch":1.0,"event":"valid","loss":6.6,"perplexity":735.1,"step":15.0}
"""
BETA = BETA_COMPLETE + '{"elapsed_s":700.0,"epoch":2.0,"event":"tra'  # a line still being written


def expected(log_text, mtime):
    """{tag: [(step, wall_time, value)]} as the script's header promises, from the log alone."""
    records = [json.loads(line) for line in log_text.split("\n")[:-1] if line.strip()]
    start = mtime - max(r["elapsed_s"] for r in records if "elapsed_s" in r)
    want, step = {}, 0
    for r in records:
        step = int(r.get("step", r.get("steps", step)))
        wall = start + r["elapsed_s"] if "elapsed_s" in r else mtime
        for field, value in r.items():
            if field in ("event", "step") or isinstance(value, str) and value not in ("nan", "inf"):
                continue
            tag = f"{r['event']}/" + (f"grad_norm/{field[10:]}" if field.startswith("grad_norm ") else field)
            want.setdefault(tag, []).append((step, wall, float(value)))
    return want


def same_float32(got, value):
    want = float(np.float32(value))
    return (math.isnan(got) and math.isnan(want)) or got == want


def convert(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        logs = {"alpha": ALPHA, "beta": BETA}
        for name, text in logs.items():
            os.makedirs(f"{tmp}/{name}")
            with open(f"{tmp}/{name}/metrics.jsonl", "w") as f:
                f.write(text)
        for attempt in (1, 2):  # the second conversion must replace the first's event files
            r = convert(f"{tmp}/alpha", f"{tmp}/beta", "--logdir", f"{tmp}/tb")
            if r.returncode != 0:
                sys.exit(f"check-tensorboard: the conversion failed:\n{r.stdout}{r.stderr}")
        if "beta/metrics.jsonl:3: the last line is incomplete" not in r.stderr:
            failures.append(f"no warning about beta's unterminated last line: {r.stderr!r}")

        compared = 0
        for name, text in logs.items():
            run_dir = f"{tmp}/tb/{name}"
            files = [f for f in os.listdir(run_dir) if f.startswith("events.out.tfevents.")]
            if len(files) != 1:
                failures.append(f"{name}: {len(files)} event files after converting twice, expected 1")
            acc = ea.EventAccumulator(run_dir, size_guidance={ea.SCALARS: 0})
            acc.Reload()
            want = expected(text, os.path.getmtime(f"{tmp}/{name}/metrics.jsonl"))
            got_tags = sorted(acc.Tags()["scalars"])
            if got_tags != sorted(want):
                failures.append(f"{name}: tags {got_tags}, expected {sorted(want)}")
                continue
            for tag, points in want.items():
                events = acc.Scalars(tag)
                if len(events) != len(points):
                    failures.append(f"{name} {tag}: {len(events)} scalars, expected {len(points)}")
                    continue
                for ev, (step, wall, value) in zip(events, points):
                    compared += 1
                    if ev.step != step or abs(ev.wall_time - wall) > 1e-6 or not same_float32(ev.value, value):
                        failures.append(f"{name} {tag}: read (step {ev.step}, wall {ev.wall_time}, {ev.value}), "
                                        f"expected (step {step}, wall {wall}, {value})")

        # Errors: a damaged line by file:line, a missing folder, and nothing written for either.
        os.makedirs(f"{tmp}/damaged")
        with open(f"{tmp}/damaged/metrics.jsonl", "w") as f:
            f.write(BETA_COMPLETE.split("\n")[0] + '\n{"event": "train", "loss": 5.\n' + BETA_COMPLETE)
        for args, message in (((f"{tmp}/alpha", f"{tmp}/damaged"), "damaged/metrics.jsonl:2: damaged line"),
                              ((f"{tmp}/nowhere",), "nowhere' does not exist")):
            r = convert(*args, "--logdir", f"{tmp}/tb-errors")
            if r.returncode == 0 or message not in r.stderr or os.path.exists(f"{tmp}/tb-errors"):
                failures.append(f"{args}: exit {r.returncode}, stderr {r.stderr!r}; expected an error with {message!r}, "
                                "nothing written")

    if failures:
        print("\n".join(failures))
        sys.exit(f"check-tensorboard: {len(failures)} failures")
    print(f"check-tensorboard: {compared} scalars read back by TensorBoard's EventAccumulator, all equal to the logs")


if __name__ == "__main__":
    main()
