# Sourced by scripts/experiments/dp_scaling.sh and scripts/experiments/train_speed.sh.
# second_window RUN_DIR COMMAND...: runs a `define train` COMMAND (or mpirun ... define train) that
# logs to RUN_DIR, stops it once metrics.jsonl holds its second training line (the final evaluation
# is not what the benchmarks measure), and prints that line; with none, prints the log's tail to
# stderr and returns 1. The first window warms caches and allocators, so the second is measured.
second_window() {
  local run="$1"
  shift
  "$@" > "$run.log" 2>&1 &
  local pid=$! lines=0
  while kill -0 "$pid" 2> /dev/null; do
    lines=$(grep -c '"event":"train"' "$run/metrics.jsonl" 2> /dev/null) || lines=0
    [ "$lines" -ge 2 ] && break
    sleep 1
  done
  kill "$pid" 2> /dev/null || true
  wait "$pid" 2> /dev/null || true
  if ! grep -s '"event":"train"' "$run/metrics.jsonl" | sed -n 2p | grep .; then
    echo "no measurement from $*:" >&2
    tail -5 "$run.log" >&2
    return 1
  fi
}
