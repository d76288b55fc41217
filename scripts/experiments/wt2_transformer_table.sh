#!/usr/bin/env bash
# Issue 13's WikiText-2 table: the Transformer language models (Transformer-XL with standard,
# projective, adaptive and DeFINE inputs, and the DeLighT LM), each trained by the same command
# for the same wall-clock budget on this machine, then evaluated on the test split (the
# Transformer-XL rows with the training memory and with a memory four times longer).
# Every row runs its config's recipe with train.schedule_over = time: the cosine is sized by the
# budget, so a faster model takes more steps and still ends its schedule when the budget ends.
# Run it on an otherwise idle machine: what a row learns depends on its speed.
# Usage: scripts/experiments/wt2_transformer_table.sh [MINUTES] [RUN_ROOT] [ROW...]
#   MINUTES   train.max_minutes of every row (default 30)
#   RUN_ROOT  where the runs go (default runs/wt2-time); one folder a row
#   ROW       which rows (default all: standard projective adaptive define delight)
# Run from the repository root after building the release preset.
set -euo pipefail
cd "$(dirname "$0")/../.."
minutes="${1:-30}" root="${2:-runs/wt2-time}"
shift $(( $# >= 2 ? 2 : $# ))
rows=("$@")
[ ${#rows[@]} -gt 0 ] || rows=(standard projective adaptive define delight)
bin=build/release/tools/define
[ -x "$bin" ] || { echo "build the release preset first (cmake --build --preset release)" >&2; exit 2; }
mkdir -p "$root"
echo "WikiText-2, $minutes minutes a row, $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
printf '| %-34s | %6s | %7s | %7s | %7s | %6s | %8s | %7s | %7s | %7s |\n' config DeFINE context in-out total \
  steps tokens/s valid "test" "test x4"
for row in "${rows[@]}"; do
  case "$row" in
    delight) config=configs/wt2-delight-lm.json ;;
    *) config="configs/wt2-transformer-xl-$row.json" ;;
  esac
  [ -f "$config" ] || { echo "no config for row '$row' ($config)" >&2; exit 2; }
  run="$root/$row"
  rm -rf "$run"
  "$bin" train --config "$config" --run-dir "$run" --set 'train.schedule_over="time"' \
    --set "train.max_minutes=$minutes" --set train.max_steps=0 > "$run.log" 2>&1
  long=""
  if [ "$row" != delight ]; then
    mem=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["model"]["mem_len"])' "$config")
    long=$("$bin" eval --run "$run" --split test --mem-len $((4 * mem)) --json)
  fi
  params=$("$bin" params --config "$run/config.json")
  part() { echo "$params" | awk -v p="$1" '$0 ~ "^"p {print $NF}'; }
  python3 - "$run/metrics.jsonl" "$config" "$(part DeFINE)" "$(part context)" "$(part input-output)" \
    "$(part total)" "$long" <<'PY'
import json, statistics, sys
events = [json.loads(l) for l in open(sys.argv[1])]
final = [e for e in events if e.get("event") == "final"][-1]
train = [e for e in events if e.get("event") == "train"]
speed = statistics.median(e["tokens_per_s"] for e in train[1:] or train)
long = f"{json.loads(sys.argv[7])['perplexity']:7.2f}" if sys.argv[7] else "-"
unit = sys.argv[3] or "-"
print(f"| {sys.argv[2]:<34} | {unit:>6} | {sys.argv[4]:>7} | {sys.argv[5]:>7} | {sys.argv[6]:>7} | "
      f"{int(final['steps']):6d} | {speed:8,.0f} | {final['valid_perplexity']:7.2f} | "
      f"{final['test_perplexity']:7.2f} | {long:>7} |")
PY
done
