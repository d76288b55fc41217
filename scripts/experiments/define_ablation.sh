#!/usr/bin/env bash
# The DeFINE unit's ablations (the paper's Tables 6 and 8) on WikiText-2: the LSTM LM of
# configs/wt2-lstm-define.json with each unit variant of nn/define_unit.h in its place, every row
# the same command with one setting changed, trained for the same number of steps (default 1,000),
# then evaluated on the validation and test splits. Prints one table row a variant: DeFINE
# parameters, total parameters, validation and test perplexity.
# A step budget rather than a time budget: what a variant learns depends on its steps, not on how
# busy the machine was, so the rows compare even when something else runs beside them.
# Usage: scripts/experiments/define_ablation.sh [STEPS] [RUN_ROOT] [VARIANT...]
#   STEPS     train.max_steps of every row (default 1000)
#   RUN_ROOT  where the runs go (default runs/ablation); one folder a variant
#   VARIANT   which rows (default all: define define-nomix hgt linear glt define-residual no-reduce glt-shuffle)
# Run from the repository root after building the release preset.
set -euo pipefail
cd "$(dirname "$0")/../.."
steps="${1:-1000}" root="${2:-runs/ablation}"
shift $(( $# >= 2 ? 2 : $# ))
variants=("$@")
[ ${#variants[@]} -gt 0 ] ||
  variants=(define define-nomix hgt linear glt define-residual no-reduce glt-shuffle)
bin=build/release/tools/define
[ -x "$bin" ] || { echo "build the release preset first (cmake --build --preset release)" >&2; exit 2; }
mkdir -p "$root"
echo "wt2-lstm-define.json, $steps steps a row, $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
printf '| %-16s | %10s | %10s | %8s | %8s |\n' variant "DeFINE" total valid test
for v in "${variants[@]}"; do
  sets=(--set "model.input.variant=\"$v\"")
  # Without a reduce the unit's output is its last layer (k wide), and there is nothing for the
  # reduce skip to feed.
  if [ "$v" = no-reduce ]; then
    k=$(python3 -c 'import json; print(json.load(open("configs/wt2-lstm-define.json"))["model"]["input"]["k"])')
    sets+=(--set model.input.reduce_skip=false --set "model.input.out_dim=$k")
  fi
  run="$root/$v"
  rm -rf "$run"
  "$bin" train --config configs/wt2-lstm-define.json --run-dir "$run" "${sets[@]}" \
    --set "train.max_steps=$steps" --set train.max_minutes=0 > "$run.log" 2>&1
  params=$("$bin" params --config "$run/config.json")
  unit=$(echo "$params" | awk '$1 == "DeFINE" {print $2}')
  total=$(echo "$params" | awk '$1 == "total" {print $2}')
  python3 - "$run/metrics.jsonl" "$v" "$unit" "$total" <<'PY'
import json, sys
final = [json.loads(l) for l in open(sys.argv[1]) if '"final"' in l][-1]
print(f"| {sys.argv[2]:<16} | {sys.argv[3]:>10} | {sys.argv[4]:>10} | "
      f"{final['valid_perplexity']:8.2f} | {final['test_perplexity']:8.2f} |")
PY
done
