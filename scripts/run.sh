#!/usr/bin/env bash
# The README's main command: installs missing packages, builds the release preset and runs the
# main job. Extra arguments go to the job.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake --preset release > /dev/null
cmake --build --preset release -j "$(nproc)" --target define
./build/release/tools/define --help
scripts/get-data ptb > /dev/null  # the PTB splits: ../shared/data, else downloaded and checked
./build/release/tools/define train --config configs/ptb-define-lstm.json --run-dir "runs/ptb-define-lstm-$(date +%Y%m%d-%H%M%S)" "$@"
