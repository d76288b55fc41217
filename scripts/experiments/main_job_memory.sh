#!/usr/bin/env bash
# Peak resident memory of the main job (configs/ptb-define-lstm.json, the release build), against the
# limit the README states. Trains STEPS steps (default 800: longer than the first epoch's warm-up of
# the allocator's caches, shorter than an epoch), then evaluates validation and test as the main job
# does at its end, and reads the process's high-water mark (VmHWM) from metrics.jsonl's final line.
# Usage: scripts/experiments/main_job_memory.sh [steps] [limit MiB]   (run from the repository root)
set -euo pipefail
cd "$(dirname "$0")/../.."
steps="${1:-800}"
limit_mib="${2:-500}"  # the README's figure (Results): the main job stays within it
bin=build/release/tools/define
[ -x "$bin" ] || { echo "build the release preset first (cmake --build --preset release)" >&2; exit 2; }
run_dir=$(mktemp -d /tmp/define-main-job-memory.XXXXXX)
trap 'rm -rf "$run_dir"' EXIT
scripts/get-data ptb > /dev/null
"$bin" train --config configs/ptb-define-lstm.json --run-dir "$run_dir/run" \
  --set train.max_steps="$steps" --set train.max_minutes=0 > "$run_dir/out.log" 2>&1
peak=$(grep '"event":"final"' "$run_dir/run/metrics.jsonl" | sed 's/.*"peak_rss_bytes":\([0-9.e+]*\).*/\1/')
peak_mib=$(awk -v b="$peak" 'BEGIN { printf "%.1f", b / 1048576 }')
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
echo "main job, $steps steps + final evaluation, $cpu"
echo "peak resident memory: $peak_mib MiB (limit $limit_mib MiB: $(awk -v p="$peak_mib" -v l="$limit_mib" 'BEGIN { printf "%.2f", p / l }')x)"
awk -v p="$peak_mib" -v l="$limit_mib" 'BEGIN { exit !(p <= l) }' || { echo "over the limit" >&2; exit 1; }
