#!/usr/bin/env bash
# Compiles every CUDA kernel file with nvcc for each target architecture with `-Xptxas -v` and
# fails when any kernel spills registers to local memory (ptxas "N bytes spill stores/loads" with
# N > 0). Prints one table row per kernel and architecture: registers, spill stores, spill loads,
# shared memory. No GPU needed. Usage:
#   tools/check-ptxas.sh [file.cu ...]      (default: kernels/cuda/*.cu and tests/emu/kernels/*.cu)
# Environment: ARCHS (default "75 80 90"), NVCC (default: nvcc on PATH or /usr/local/cuda/bin/nvcc).
set -euo pipefail
cd "$(dirname "$0")/.."
nvcc="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
if [ ! -x "$nvcc" ]; then echo "check-ptxas: nvcc not found (set NVCC)" >&2; exit 2; fi
archs="${ARCHS:-75 80 90}"
if [ $# -gt 0 ]; then files=("$@"); else files=(kernels/cuda/*.cu tests/emu/kernels/*.cu); fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
status=0
printf '%-32s %-5s %5s %8s %8s %6s  %s\n' file arch regs spill_st spill_ld smem kernel
for f in "${files[@]}"; do
  for a in $archs; do
    log="$tmp/$(basename "$f").$a.log"
    if ! "$nvcc" -std=c++20 -DFMT_USE_CONSTEXPR=1 -DFMT_CONSTEVAL= -DDEFINE_HAS_CUDA_KERNELS --expt-relaxed-constexpr -I. -Itests/emu \
         -arch="sm_$a" -Xptxas -v -c "$f" -o "$tmp/out.o" > "$log" 2>&1; then
      echo "check-ptxas: nvcc failed on $f for sm_$a:" >&2
      cat "$log" >&2
      exit 1
    fi
    # ptxas prints, per kernel: "Compiling entry function '<mangled>' for 'sm_75'", then
    # "... bytes stack frame, N bytes spill stores, M bytes spill loads", then "Used R registers, ...".
    awk -v file="$f" -v arch="$a" '
      /Compiling entry function/ { match($0, /'"'"'[^'"'"']*'"'"'/); name = substr($0, RSTART + 1, RLENGTH - 2); st = 0; ld = 0; next }
      /spill stores/ { for (i = 1; i <= NF; ++i) { if ($(i+1) == "bytes" && $(i+2) == "spill" && $(i+3) ~ /stores/) st = $i; if ($(i+1) == "bytes" && $(i+2) == "spill" && $(i+3) ~ /loads/) ld = $i } next }
      /Used [0-9]+ registers/ {
        regs = 0; smem = 0
        for (i = 1; i <= NF; ++i) { if ($i == "registers,") regs = $(i-1); if ($i ~ /^smem/) smem = $(i-2) }
        printf "%-32s %-5s %5s %8s %8s %6s  %s\n", file, "sm_" arch, regs, st, ld, smem, name
        if (st + 0 > 0 || ld + 0 > 0) bad = 1
      }
      END { exit bad }' "$log" > "$tmp/rows" || { echo "check-ptxas: register spills in $f for sm_$a" >&2; status=1; }
    # Readable kernel names: demangled, without the namespace and parameter list.
    c++filt < "$tmp/rows" | sed -E 's/define::kernels::cuda::\(anonymous namespace\):://; s/\(anonymous namespace\):://g; s/\(.*$//'
  done
done
exit $status
