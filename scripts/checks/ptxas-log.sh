#!/usr/bin/env bash
# The CUDA compiler launcher of the nvcc build (kernels/cuda/sources.cmake): runs the compile
# command it is given (ccache first, where configured) and moves the ptxas report that
# `-Xptxas -v` writes to stderr into <object>.ptxas.log beside the object, where
# scripts/checks/check-ptxas.sh --build reads it instead of compiling every kernel again. The rest
# of stderr (warnings, errors) passes through. ccache replays stderr on a hit, so a cached object
# gets its report too.
set -uo pipefail
out=""
prev=""
for a in "$@"; do
  [ "$prev" = "-o" ] && out="$a"
  prev="$a"
done
[ -n "$out" ] || exec "$@"
err="$(mktemp)"
"$@" 2> "$err"
rc=$?
# ptxas -v lines: "ptxas info    : ..." and the indented "N bytes stack frame, ..." under each.
grep -E '^ptxas info|^ +[0-9]+ bytes stack frame' "$err" > "$out.ptxas.log"
grep -vE '^ptxas info|^ +[0-9]+ bytes stack frame' "$err" >&2
rm -f "$err"
exit $rc
