#!/usr/bin/env bash
# One row of the Multi30k translation table: trains a config (the release build), averages the last
# 5 epochs' weights, translates test2016 with beam 5 and scores it with `define bleu`; prints the
# parameters, the training speed, the validation perplexity and BLEU.
# Usage: scripts/experiments/multi30k_translate.sh CONFIG SRC TGT [STEPS] [THREADS] [RUN_DIR]
#   STEPS    a step budget (train.max_steps; default: the config's time budget instead)
#   THREADS  train.threads (default the config's)
#   RUN_DIR  default runs/multi30k-<config name>-<src><tgt>
# A step budget makes rows comparable when the machine is shared: what a model learns depends on
# its steps, not on how long they took. Run from the repository root.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 3 ] || { sed -n '5,8p' "$0" >&2; exit 2; }
config="$1" src="$2" tgt="$3" steps="${4:-}" threads="${5:-}"
run="${6:-runs/multi30k-$(basename "$config" .json)-$src$tgt}"
bin=build/release/tools/define
[ -x "$bin" ] || { echo "build the release preset first (cmake --build --preset release)" >&2; exit 2; }
data=$(scripts/get-data multi30k)
sets=(--set "data.source=$src" --set "data.target=$tgt")
[ -z "$steps" ] || sets+=(--set "train.max_steps=$steps" --set train.max_minutes=0)
[ -z "$threads" ] || sets+=(--set "train.threads=$threads")
start=$(date +%s)
"$bin" train --config "$config" --run-dir "$run" "${sets[@]}" > "$run.train.log" 2>&1
trained=$(date +%s)
"$bin" average --run "$run" --last 5 > "$run.average.log"
"$bin" translate --run "$run" --checkpoint "$run/averaged.ckpt" --beam 5 --max-len-a 1.2 --max-len-b 10 \
  --input "$data/test.$src" --output "$run/test.hyp" > "$run.translate.log" 2>&1
translated=$(date +%s)
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
echo "$config $src->$tgt, $cpu"
"$bin" params --config "$run/config.json" | tail -n 4
grep '"event":"valid"' "$run/metrics.jsonl" | tail -n 1
grep '"event":"final"' "$run/metrics.jsonl"
echo "training $((trained - start)) s, averaging + translating test ($(wc -l < "$data/test.$src") sentences) $((translated - trained)) s"
"$bin" bleu --ref "$data/test.$tgt" --hyp "$run/test.hyp"
