#!/usr/bin/env bash
# Rewrites the rows of kernels/cuda/ptxas-registers.txt for the given kernel files (default: every
# kernels/cuda/*.cu): the registers ptxas gives each kernel at sm_61, sm_75 and sm_90, as
# scripts/checks/check-ptxas.sh reports them (sm_61 through CUDA 12's ptxas, scripts/get-ptxas12.sh).
# The emulator's performance model reads the table for occupancy (bench/kernels/kernel_profile.h);
# check-ptxas.sh --registers fails when a kernel's count no longer matches it. Run it after changing a
# kernel file; about 30 seconds a file. No GPU needed.
#   scripts/checks/update-ptxas-registers.sh [kernels/cuda/file.cu ...]
set -euo pipefail
cd "$(dirname "$0")/../.."
table=kernels/cuda/ptxas-registers.txt
if [ $# -gt 0 ]; then files=("$@"); else files=(kernels/cuda/*.cu); fi
export PATH="/usr/local/cuda/bin:$PATH"
ptxas12="$(scripts/get-ptxas12.sh)"
fresh="$(mktemp)"
trap 'rm -f "$fresh" "$fresh.keep"' EXIT
# Spills fail check-ptxas, but the counts are still right: the table records what ptxas says.
PTXAS12="$ptxas12" ARCHS="75 90" scripts/checks/check-ptxas.sh "${files[@]}" > "$fresh" || true
# A file that did not compile gives no rows: stop before its rows leave the table.
for f in "${files[@]}"; do
  if ! grep -q "^$f " "$fresh" && grep -q '__global__' "$f"; then
    echo "update-ptxas-registers: no ptxas rows for $f (does it compile? scripts/checks/check-ptxas.sh $f)" >&2
    exit 1
  fi
done
keep_re="$(printf '%s\n' "${files[@]}" | sed 's/[.]/[.]/g; s/^/^/; s/$/ /' | paste -sd'|')"
{
  echo "# Registers per kernel (scripts/checks/check-ptxas.sh rows, sm_61 / sm_75 / sm_90), written by"
  echo "# scripts/checks/update-ptxas-registers.sh; read by bench/kernels/kernel_profile.h. Do not edit."
  [ -f "$table" ] && grep -v '^#' "$table" | grep -Ev "$keep_re" || true
  awk '$2 == "sm_61" || $2 == "sm_75" || $2 == "sm_90"' "$fresh"
} > "$fresh.keep"
{ head -2 "$fresh.keep"; tail -n +3 "$fresh.keep" | sort -k1,1 -k2,2 -k7; } > "$table"
echo "update-ptxas-registers: $(grep -vc '^#' "$table") rows in $table"
