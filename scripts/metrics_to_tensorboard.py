#!/usr/bin/env python3
"""Writes TensorBoard event files from the metrics.jsonl of define runs.

usage: scripts/metrics_to_tensorboard.py RUN [RUN ...] --logdir DIR

    scripts/metrics_to_tensorboard.py runs/define-lstm runs/lstm-small --logdir tb
    tensorboard --logdir tb          # then open http://localhost:6006, Scalars tab

Each RUN folder's metrics.jsonl (one JSON object a line, written by `define train`) becomes one
TensorBoard run, DIR/<run folder name>/ (the path as given, '/' turned into '_', when two folders
share a name); event files an earlier conversion left there are replaced, so running it again on a
run that trained on shows the whole run once. Every numeric field of every record is a scalar,
tagged "<event>/<field>" (train/loss, train/lr, train/tokens_per_s, train/grad_norm,
valid/perplexity, final/test_perplexity, ...; a parameter part's gradient norm "grad_norm <part>"
as train/grad_norm/<part>), at the record's "step" ("steps" for the final record, else the last
step before it). Wall time: the run's start plus the record's "elapsed_s" (seconds since the run
started), the start taken as the log's modification time less the largest elapsed_s, so
TensorBoard's "relative" axis is the run's own clock; records without elapsed_s get the log's
modification time. Non-finite values (logged as "nan", "inf") are written as such.

A last line without its newline (a live run, or one cut by a kill) is left out with a warning;
any other line that is not a JSON object with a string "event" is an error naming file:line.

Needs the `tensorboard` package from PyPI (scripts/install-deps.sh installs it); it writes with
TensorBoard's own event file writer (the classic simple_value scalar summaries that PyTorch's
SummaryWriter.add_scalar writes too). Checked by scripts/checks/check-tensorboard.py (a ctest).
"""
import argparse
import json
import math
import os
import sys


def fail(message):
    sys.exit(f"metrics_to_tensorboard: error: {message}")


def number(value):
    """A field's number: JSON numbers, and the strings define logs for non-finite ones."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value in ("nan", "-nan", "inf", "-inf"):
        return float(value.replace("-nan", "nan"))
    return None


def read_records(run_dir):
    """The run's records as dicts, in file order."""
    if not os.path.isdir(run_dir):
        fail(f"run folder '{run_dir}' does not exist (or is not a folder)")
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.isfile(path):
        fail(f"'{run_dir}' has no metrics.jsonl: not a run folder of `define train`, or it has not logged yet")
    with open(path, encoding="utf-8", newline="\n") as f:
        text = f.read()
    lines = text.split("\n")
    records = []
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        last_unterminated = i == len(lines)  # text.split leaves "" after a final newline
        try:
            r = json.loads(line)
        except ValueError as e:
            if last_unterminated:
                print(f"warning: {path}:{i}: the last line is incomplete (still being written, or cut by a kill); "
                      "left out", file=sys.stderr)
                break
            fail(f"{path}:{i}: damaged line, not JSON ({e})")
        if not isinstance(r, dict) or not isinstance(r.get("event"), str):
            fail(f"{path}:{i}: damaged line, not a JSON object with a string \"event\"")
        records.append(r)
    return path, records


def tag_of(event, field):
    if field.startswith("grad_norm "):
        return f"{event}/grad_norm/{field[len('grad_norm '):]}"
    return f"{event}/{field}"


def scalars(path, records):
    """(tag, step, wall_time, value) for every numeric field, step and wall time excepted."""
    elapsed = [number(r["elapsed_s"]) for r in records if number(r.get("elapsed_s")) is not None]
    finite = [e for e in elapsed if math.isfinite(e)]
    mtime = os.path.getmtime(path)
    start = mtime - (max(finite) if finite else 0.0)
    out, step = [], 0
    for r in records:
        s = number(r.get("step", r.get("steps")))
        if s is not None and math.isfinite(s):
            step = int(s)
        e = number(r.get("elapsed_s"))
        wall = start + e if e is not None and math.isfinite(e) else mtime
        for field, value in r.items():
            v = number(value)
            if field in ("event", "step") or v is None:
                continue
            out.append((tag_of(r["event"], field), step, wall, v))
    return out


def write_run(out_dir, items):
    # Imported here so that --help and the input errors need no TensorBoard.
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    os.makedirs(out_dir, exist_ok=True)
    for name in os.listdir(out_dir):
        if name.startswith("events.out.tfevents."):
            os.remove(os.path.join(out_dir, name))
    writer = EventFileWriter(out_dir)
    for tag, step, wall, value in items:
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
        writer.add_event(event_pb2.Event(wall_time=wall, step=step, summary=summary))
    writer.close()


def main():
    parser = argparse.ArgumentParser(
        description="Write TensorBoard event files from define runs' metrics.jsonl (see the header of this script).")
    parser.add_argument("runs", nargs="+", metavar="RUN", help="a run folder of `define train`")
    parser.add_argument("--logdir", required=True, help="TensorBoard's log folder: one subfolder per run")
    args = parser.parse_args()
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        fail("needs the tensorboard package (pip install tensorboard; scripts/install-deps.sh installs it)")

    names = [os.path.basename(os.path.normpath(r)) for r in args.runs]
    read = [read_records(r) for r in args.runs]  # every input checked before anything is written
    for run, name, (path, records) in zip(args.runs, names, read):
        if names.count(name) > 1:
            name = os.path.normpath(run).strip("/").replace("/", "_")
        items = scalars(path, records)
        write_run(os.path.join(args.logdir, name), items)
        print(f"{run}: {len(items)} scalars in {len({t for t, *_ in items})} tags -> {os.path.join(args.logdir, name)}")


if __name__ == "__main__":
    main()
