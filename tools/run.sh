#!/usr/bin/env bash
# The README's main command: installs missing packages, builds the release preset and runs the
# main job. Extra arguments go to the job.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/install-deps.sh
cmake --preset release > /dev/null
cmake --build --preset release -j "$(nproc)" --target define
./build/release/tools/define --help
./build/release/tools/define demo "$@"
