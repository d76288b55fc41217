#!/usr/bin/env bash
# Training tokens/s of one config on this machine: `define train` for STEPS steps (default 160),
# tokens/s over the second half (the first warms caches and allocators), then the run is stopped
# before its final evaluation. Extra arguments go to `define train` (e.g. --set train.threads=1).
# Usage: scripts/experiments/train_speed.sh CONFIG [STEPS] [define train options...]. Run from the repository root
# after building the release preset, on an otherwise idle machine. DEFINE_BIN=PATH times another
# build's define instead (for A/B pairs of two builds).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { sed -n '2,7p' "$0" >&2; exit 2; }
config="$1" steps="${2:-160}"
shift $(( $# >= 2 ? 2 : 1 ))
bin=${DEFINE_BIN:-build/release/tools/define}
[ -x "$bin" ] || { echo "build the release preset first (cmake --build --preset release)" >&2; exit 2; }
# OpenMP settings: the program's own defaults (core/omp_wait.h), as a user gets them.
run="$(mktemp -d)/run"
trap 'rm -rf "$(dirname "$run")"' EXIT
extra=()
grep -q '"schedule": "cosine"' "$config" && extra+=(--set train.schedule_steps=100000)
source scripts/experiments/second_window.sh
line=$(second_window "$run" "$bin" train --config "$config" --run-dir "$run" --set "train.max_steps=$steps" \
  --set "train.log_interval=$(( steps / 2 ))" --set train.max_minutes=0 --set train.checkpoint_interval=0 \
  "${extra[@]}" "$@")
tok=$(echo "$line" | sed -n 's/.*"tokens_per_s":\([^,}]*\).*/\1/p')
printf '%s %s: %.0f tokens/s (steps %d-%d, %s)\n' "$config" "$*" "$tok" $(( steps / 2 + 1 )) "$steps" \
  "$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
