#!/usr/bin/env bash
# Data-parallel scaling on this machine: one process with 2 threads against 2 MPI processes with 1
# thread each (the same global batch, so the same optimisation), on the main LSTM LM
# (configs/ptb-define-lstm.json) and the Transformer LM (configs/wt2-transformer-xl-define.json).
# Prints training tokens/s of both and their ratio, and for the 2-process run the communication
# per step (first bucket's start to the last one's end), the part of it backward did not hide
# (waited for after backward), and the share of buckets started inside backward.
# Usage: scripts/experiments/dp_scaling.sh [STEPS] (default 120; tokens/s of the second half of the steps: the
# first half warms caches and allocators). Run from the repository root after building the release
# preset; the machine should be otherwise idle.
set -euo pipefail
cd "$(dirname "$0")/../.."
steps="${1:-120}"
half=$(( steps / 2 ))
bin=build/release/tools/define
[ -x "$bin" ] || { echo "build the release preset first (cmake --build --preset release)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=PASSIVE
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
scripts/get-data ptb > /dev/null
scripts/get-data wikitext-2 > /dev/null

source scripts/experiments/second_window.sh
field() { echo "$1" | sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p"; }

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
echo "data-parallel scaling, $steps steps each (tokens/s over the last $half), $cpu, $(nproc) cores, $(git rev-parse --short HEAD)"
printf '%-32s %14s %14s %7s %12s %12s %10s\n' model "1x2 tok/s" "2x1 tok/s" ratio "comm ms" "unhidden ms" "in bwd"
for config in configs/ptb-define-lstm.json configs/wt2-transformer-xl-define.json; do
  name=$(basename "$config" .json)
  common=(--set "train.max_steps=$steps" --set "train.log_interval=$half" --set train.max_minutes=0
          --set train.checkpoint_interval=0)
  # A cosine schedule keeps the length of a full run (its 1,500 steps): max_steps only cuts it short.
  if grep -q '"schedule": "cosine"' "$config"; then common+=(--set train.schedule_steps=1500); fi
  one=$(second_window "$work/$name-1" "$bin" train --config "$config" --run-dir "$work/$name-1" "${common[@]}" \
        --set train.threads=2)
  two=$(second_window "$work/$name-2" mpirun --oversubscribe --allow-run-as-root -np 2 --bind-to core \
        "$bin" train --config "$config" --run-dir "$work/$name-2" "${common[@]}" --set train.threads=1 \
        --set train.distributed='"mpi"')
  t1=$(field "$one" tokens_per_s) t2=$(field "$two" tokens_per_s)
  [ -n "$t1" ] && [ -n "$t2" ] || { echo "$name: a run produced no measurement" >&2; exit 1; }
  printf '%-32s %14.0f %14.0f %6.2fx %12.1f %12.1f %9.0f%%\n' "$name" "$t1" "$t2" "$(echo "$t2 / $t1" | bc -l)" \
    "$(field "$two" comm_ms_per_step)" "$(field "$two" comm_wait_ms_per_step)" \
    "$(echo "100 * $(field "$two" buckets_started_in_backward)" | bc -l)"
done
