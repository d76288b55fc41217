#!/usr/bin/env bash
# Every kernel declared with __launch_bounds__(X) must begin its body with EMU_CHECK_LAUNCH_BOUNDS(X);
# (same X): the emulator cannot read the attribute, so that statement is how it refuses a block larger
# than the bound, as a GPU does (cuda_emu/emu_device.hpp). Fails, naming file:line, when a bounded
# kernel lacks it or repeats a different bound.
#
#   scripts/checks/check-launch-bounds.sh [--names] [file.cu|file.cuh ...]   (default: kernels/cuda and tests/cuda_emu/kernels)
#
# --names prints the bounded kernels' names instead, one a line (scripts/checks/check-ptxas.sh uses them).
set -euo pipefail
cd "$(dirname "$0")/../.."
names=0
if [ "${1:-}" = --names ]; then
  names=1
  shift
fi
if [ $# -eq 0 ]; then
  set -- kernels/cuda/*.cu kernels/cuda/*.cuh tests/cuda_emu/kernels/*.cu
fi
awk -v names="$names" '
  FNR == 1 { pending = ""; unnamed = 0 }
  # The bound, from the declaration (comments and #define lines are not declarations).
  pending == "" && /__launch_bounds__\(/ && $0 !~ /^[ \t]*(#|\/\/)/ {
    s = $0
    sub(/.*__launch_bounds__\(/, "", s)
    sub(/\).*/, "", s)
    pending = s; where = FILENAME ":" FNR; kernels++; unnamed = 1
    rest = $0
    sub(/.*__launch_bounds__\([^)]*\)/, "", rest)
  }
  # The kernel name: the first identifier followed by "(" after the bound (on its line or a later one).
  unnamed {
    text = (where == FILENAME ":" FNR) ? rest : $0
    if (match(text, /[A-Za-z_][A-Za-z0-9_]*[ \t]*\(/)) {
      name = substr(text, RSTART, RLENGTH)
      sub(/[ \t]*\($/, "", name)
      if (names) print name
      unnamed = 0
    }
  }
  # The first line after the body opens must repeat it.
  pending != "" && opened {
    line = $0
    gsub(/^[ \t]+|[ \t]+$/, "", line)
    if (!names && line != "EMU_CHECK_LAUNCH_BOUNDS(" pending ");") {
      printf "%s: __launch_bounds__(%s): the body must begin with EMU_CHECK_LAUNCH_BOUNDS(%s);\n", where, pending,
        pending
      bad++
    }
    pending = ""; opened = 0
    next
  }
  pending != "" && /\{[ \t]*$/ { opened = 1 }
  END {
    if (bad) exit 1
    if (!names) printf "check-launch-bounds: %d bounded kernels, each checked by the emulator\n", kernels
  }
' "$@"
