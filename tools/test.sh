#!/usr/bin/env bash
# The README's test command: installs missing packages (Debian), builds the release and asan
# presets, and runs every test in both. Usage: tools/test.sh [release|asan|all] (default all).
set -euo pipefail
cd "$(dirname "$0")/.."
which="${1:-all}"

./tools/install-deps.sh

run_preset() {
  local p="$1"
  echo "== preset $p: configure and build"
  cmake --preset "$p" > /dev/null
  cmake --build --preset "$p" -j "$(nproc)"
  echo "== preset $p: tests"
  ctest --preset "$p"
}

case "$which" in
  release) run_preset release ;;
  asan) run_preset asan ;;
  all) run_preset release; run_preset asan ;;
  *) echo "usage: tools/test.sh [release|asan|all]" >&2; exit 2 ;;
esac
