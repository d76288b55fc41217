#!/usr/bin/env bash
# Issue 17's WikiText-2 table: the LSTM language model of equal total size with three token
# representations (the DeFINE unit, a standard tied table, adaptive input), each trained by the
# same command for the same wall-clock budget, then evaluated on the validation and test splits
# with its best validated weights. Prints a table row a config (parameters per part, median
# tokens/s of the logged windows, steps, validation and test perplexity, peak memory), then the
# validation perplexity at each epoch's end and at the end of the budget.
# Run it on an otherwise idle machine: what a row learns depends on its speed.
# Usage: scripts/experiments/wt2_lstm_table.sh [MINUTES] [RUN_ROOT] [ROW...]
#   MINUTES   train.max_minutes of every row (default 30, the configs' own)
#   RUN_ROOT  where the runs go (default runs/wt2-lstm); one folder a row
#   ROW       which rows, in this order (default: define standard adaptive)
# SEED=N trains every row from seed N instead of the configs' 1111; DEFINE_BIN=PATH runs another
# build's define. Run from the repository root after building the release preset.
set -euo pipefail
cd "$(dirname "$0")/../.."
minutes="${1:-30}" root="${2:-runs/wt2-lstm}"
shift $(( $# >= 2 ? 2 : $# ))
rows=("$@")
[ ${#rows[@]} -gt 0 ] || rows=(define standard adaptive)
bin=${DEFINE_BIN:-build/release/tools/define}
[ -x "$bin" ] || { echo "build the release preset first (cmake --build --preset release)" >&2; exit 2; }
sets=(--set "train.max_minutes=$minutes")
[ -z "${SEED:-}" ] || sets+=(--set "train.seed=$SEED")
for row in "${rows[@]}"; do  # before the first row starts: a typo in the last would cost the hours before it
  [ -f "configs/wt2-lstm-$row.json" ] || { echo "no config for row '$row' (configs/wt2-lstm-$row.json)" >&2; exit 2; }
done
mkdir -p "$root"
echo "WikiText-2 LSTM LMs, $minutes minutes a row${SEED:+, seed $SEED}, parameters in millions," \
  "$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
printf '| %-24s | %7s | %7s | %7s | %7s | %8s | %6s | %7s | %7s | %8s |\n' config DeFINE context in-out total \
  tokens/s steps valid "test" "peak RSS"
for row in "${rows[@]}"; do
  config="configs/wt2-lstm-$row.json"
  run="$root/$row"
  rm -rf "$run"
  "$bin" train --config "$config" --run-dir "$run" "${sets[@]}" > "$run.log" 2>&1 ||
    { echo "row '$row' failed; its output is in $run.log" >&2; exit 1; }
  params=$("$bin" params --config "$run/config.json")
  part() { echo "$params" | awk -v p="$1" '$0 ~ "^"p {print $NF}'; }
  python3 - "$run/metrics.jsonl" "$(basename "$config")" "$(part DeFINE)" "$(part context)" \
    "$(part input-output)" "$(part total)" <<'PY'
import json, statistics, sys
events = [json.loads(l) for l in open(sys.argv[1])]
final = [e for e in events if e.get("event") == "final"][-1]
train = [e for e in events if e.get("event") == "train"]
# The first window warms up; a budget shorter than one logging interval logs none.
speed = f"{statistics.median(e['tokens_per_s'] for e in train[1:] or train):8,.0f}" if train else "-"
unit = sys.argv[3] or "-"
print(f"| {sys.argv[2]:<24} | {unit:>7} | {sys.argv[4]:>7} | {sys.argv[5]:>7} | {sys.argv[6]:>7} | "
      f"{speed:>8} | {int(final['steps']):6,d} | {final['valid_perplexity']:7.2f} | "
      f"{final['test_perplexity']:7.2f} | {final['peak_rss_bytes'] / 2**20:4.0f} MiB |")
PY
done
echo
echo "validation perplexity by epoch (the last value: at the end of the budget, inside the next epoch)"
for row in "${rows[@]}"; do
  python3 - "$root/$row/metrics.jsonl" "$row" <<'PY'
import json, sys
valid = [e for e in map(json.loads, open(sys.argv[1])) if e.get("event") == "valid"]
print(f"{sys.argv[2]:<10}", " ".join(f"{e['perplexity']:.2f}" + (f" (step {int(e['step'])})"
      if e.get("end_of_budget") else "") for e in valid))
PY
done
