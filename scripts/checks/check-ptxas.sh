#!/usr/bin/env bash
# Compiles every CUDA kernel file with nvcc for each target architecture with `-Xptxas -v` and
# fails when any kernel spills registers to local memory (ptxas "N bytes spill stores/loads" with
# N > 0), or uses more than 64 registers without __launch_bounds__ (a 1,024-thread block of it
# would not fit a multiprocessor's 65,536 registers; with bounds, ptxas fits them to the bound and
# the emulator refuses larger blocks). Prints one table row per kernel and architecture:
# registers, spill stores, spill loads, shared memory. No GPU needed. Usage:
#   scripts/checks/check-ptxas.sh [--build DIR] [file.cu ...]
#       (default files: kernels/cuda/*.cu and tests/cuda_emu/kernels/*.cu)
# --build DIR: the kernels/cuda files are not compiled again; their rows come from the nvcc build in
# DIR (the release preset), whose launcher keeps ptxas's report beside each object
# (scripts/checks/ptxas-log.sh), for the architectures that build targets; only their compute_75
# PTX for the sm_61 rows is compiled here (through ccache where there is one). Other files are
# compiled here for every architecture.
# --registers TABLE: also fails when a kernel's registers at sm_61, sm_75 or sm_90 differ from TABLE
# (kernels/cuda/ptxas-registers.txt, the emulator performance model's input), or a kernel of a
# checked kernels/cuda file is missing from it; scripts/checks/update-ptxas-registers.sh rewrites it.
# Environment: ARCHS (default "75 80 90"; "none" for none), NVCC (default: nvcc on PATH or
# /usr/local/cuda/bin/nvcc), PTXAS12 (a CUDA 12 ptxas, e.g. from scripts/get-ptxas12.sh: adds sm_61).
#
# sm_61 (GTX 1080 Ti), the users' oldest GPU: CUDA 13 cannot target it. With PTXAS12 every file is
# also compiled by this nvcc to PTX for compute_75, its .version / .target lines set to what ptxas
# 12.9 takes (PTX ISA 8.8, sm_61), and assembled for sm_61. This approximates a CUDA 12 build:
# nvcc 12's front end could emit somewhat different PTX. The tensor-core wrappers of
# kernels/cuda/mma.cuh are the one __CUDA_ARCH__ branch: DEFINE_MMA_TARGET_ARCH=610 compiles them as
# sm_61 would (their trap path), so no sm_75-only instruction is assembled by mistake. It catches what sm_61 cannot take: an
# instruction it lacks (ptxas refuses the file), register counts and spills. Spills at sm_61 fail
# the check except for the kernels listed in scripts/checks/ptxas-sm61-known-spills.txt (measured, open).
set -euo pipefail
cd "$(dirname "$0")/../.."
nvcc="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
if [ ! -x "$nvcc" ]; then echo "check-ptxas: nvcc not found (set NVCC)" >&2; exit 2; fi
archs="${ARCHS:-75 80 90}"
[ "$archs" = none ] && archs=""
ptxas12="${PTXAS12:-}"
known_sm61=scripts/checks/ptxas-sm61-known-spills.txt
build=""
registers=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build)
      build="$2"
      shift 2
      [ -d "$build" ] || { echo "check-ptxas: no build folder '$build'" >&2; exit 2; }
      ;;
    --registers)
      registers="$2"
      shift 2
      [ -f "$registers" ] || { echo "check-ptxas: no register table '$registers'" >&2; exit 2; }
      ;;
    *) break ;;
  esac
done
if [ $# -gt 0 ]; then files=("$@"); else files=(kernels/cuda/*.cu tests/cuda_emu/kernels/*.cu); fi
# The PTX compiles of --build go through ccache where there is one (a second run is then quick).
launcher=()
if [ -n "$build" ] && command -v ccache > /dev/null; then launcher=(ccache); fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
flags=(-std=c++20 -DFMT_USE_CONSTEXPR=1 -DFMT_CONSTEVAL= -DDEFINE_HAS_CUDA_KERNELS --expt-relaxed-constexpr -I. -Itests/cuda_emu)
status=0

# Reads ptxas -v output; prints "file arch regs spill_st spill_ld smem kernel" rows, kernel demangled
# and without namespace and parameter list. ptxas prints, per kernel: "Compiling entry function
# '<mangled>' for 'sm_75'", then "... bytes stack frame, N bytes spill stores, M bytes spill
# loads", then "Used R registers, ...". Arch "any": the arch each entry names (a report of several).
table_rows() {
  awk -v file="$1" -v arch="$2" '
    /Compiling entry function/ {
      match($0, /'"'"'[^'"'"']*'"'"'/); name = substr($0, RSTART + 1, RLENGTH - 2); st = 0; ld = 0
      if (arch == "any" || row_arch == "") { match($0, /for '"'"'sm_[0-9]+/); row_arch = substr($0, RSTART + 8, RLENGTH - 8) }
      if (arch != "any") row_arch = arch
      next
    }
    /spill stores/ { for (i = 1; i <= NF; ++i) { if ($(i+1) == "bytes" && $(i+2) == "spill" && $(i+3) ~ /stores/) st = $i; if ($(i+1) == "bytes" && $(i+2) == "spill" && $(i+3) ~ /loads/) ld = $i } next }
    /Used [0-9]+ registers/ {
      regs = 0; smem = 0
      for (i = 1; i <= NF; ++i) { if ($i == "registers,") regs = $(i-1); if ($i ~ /^smem/) smem = $(i-2) }
      printf "%-32s %-5s %5s %8s %8s %6s  %s\n", file, "sm_" row_arch, regs, st, ld, smem, name
    }' "$3" | c++filt | sed -E 's/define::kernels::cuda::\(anonymous namespace\):://; s/\(anonymous namespace\):://g; s/\(.*$//'
}

# Kernels declared with __launch_bounds__: ptxas fits their registers to that many threads, and
# the emulator refuses larger blocks (EMU_CHECK_LAUNCH_BOUNDS).
bounded="$(scripts/checks/check-launch-bounds.sh --names | sort -u)"
# Fails (status 1) on rows with spills, except sm_61 rows of kernels in the known list, and on a
# kernel without __launch_bounds__ using more than 64 registers: a multiprocessor has 65,536, so
# a block of 1,024 threads (which the emulator accepts) would not launch on the GPU.
check_spills() {
  local rows="$1" base
  while IFS= read -r row; do
    read -r file arch regs st ld _ name <<< "$row"
    base="${name#void }"
    base="${base%%<*}"
    if [ "$regs" -gt 64 ] && ! grep -qxF "$base" <<< "$bounded"; then
      echo "check-ptxas: $name in $file uses $regs registers for $arch without __launch_bounds__: a block of" \
        "more than $((65536 / (((regs + 7) / 8) * 8 * 32) * 32)) threads could not launch; give it" \
        "__launch_bounds__(its largest block) and EMU_CHECK_LAUNCH_BOUNDS" >&2
      status=1
    fi
    [ "$st" -gt 0 ] || [ "$ld" -gt 0 ] || continue
    if [ "$arch" = sm_61 ] && grep -qxF "$(basename "$file") $name" "$known_sm61" 2>/dev/null; then continue; fi
    echo "check-ptxas: register spills in $file for $arch: $name" >&2
    status=1
  done < "$rows"
}

# Everything for one file: its table rows on stdout, messages on stderr, a failing exit status
# for spills or a compiler error. Files are checked in parallel (one per core: nvcc's front end
# is single-threaded), each into its own folder, and reported in order.
# sm_61 rows of file $1 from its compute_75 PTX $2 (work folder $3): the PTX retargeted to what
# ptxas 12.9 takes and assembled by it.
sm61_rows() {
  local f="$1" ptx="$2" work="$3" log="$3/61.log"
  sed -i -E 's/^\.version [0-9]+\.[0-9]+$/.version 8.8/; s/^\.target sm_75$/.target sm_61/' "$ptx"
  if ! "$ptxas12" -arch=sm_61 -v "$ptx" -o "$work/out61.o" > "$log" 2>&1; then
    echo "check-ptxas: ptxas 12 cannot assemble $f for sm_61:" >&2
    cat "$log" >&2
    return 1
  fi
  table_rows "$f" 61 "$log" > "$work/rows"
  cat "$work/rows"
  check_spills "$work/rows"
}

# The same from the nvcc build in $build: the report its launcher kept, and sm_61 from the file's
# compute_75 PTX.
check_built_file() {
  local f="$1" work="$2" obj log ptx
  obj="$build/CMakeFiles/define_kernels_cuda.dir/$f.o"
  log="$obj.ptxas.log"
  if [ ! -f "$obj" ] || [ ! -f "$log" ] || [ "$f" -nt "$obj" ]; then
    echo "check-ptxas: no up-to-date nvcc object and ptxas report for $f in $build (build the release preset first)" >&2
    return 1
  fi
  if ! grep -q "Compiling entry function" "$log" && grep -q "__global__" "$f"; then
    echo "check-ptxas: $log holds no ptxas report (was the object built without -Xptxas -v?)" >&2
    return 1
  fi
  table_rows "$f" any "$log" > "$work/rows"
  cat "$work/rows"
  check_spills "$work/rows"
  if [ -n "$ptxas12" ] && grep -q "Compiling entry function" "$log"; then
    ptx="$work/kernels.ptx"
    if ! "${launcher[@]}" "$nvcc" "${flags[@]}" -arch=compute_75 -DDEFINE_MMA_TARGET_ARCH=610 -ptx "$f" -o "$ptx" > "$work/ptx.log" 2>&1; then
      echo "check-ptxas: nvcc failed on $f for compute_75 PTX:" >&2
      cat "$work/ptx.log" >&2
      return 1
    fi
    sm61_rows "$f" "$ptx" "$work" || return 1
  fi
  return $status
}

check_file() {
  local f="$1" work="$2" a log ptx
  status=0
  if [ -n "$build" ] && [[ "$f" == kernels/cuda/*.cu ]]; then
    check_built_file "$f" "$work"
    return
  fi
  for a in $archs; do
    log="$work/$a.log"
    if ! "$nvcc" "${flags[@]}" -arch="sm_$a" -Xptxas -v -c "$f" -o "$work/out.o" > "$log" 2>&1; then
      echo "check-ptxas: nvcc failed on $f for sm_$a:" >&2
      cat "$log" >&2
      return 1
    fi
    table_rows "$f" "$a" "$log" > "$work/rows"
    cat "$work/rows"
    check_spills "$work/rows"
  done
  if [ -n "$ptxas12" ]; then
    ptx="$work/kernels.ptx"
    log="$work/61.log"
    if ! "$nvcc" "${flags[@]}" -arch=compute_75 -DDEFINE_MMA_TARGET_ARCH=610 -ptx "$f" -o "$ptx" > "$log" 2>&1; then
      echo "check-ptxas: nvcc failed on $f for compute_75 PTX:" >&2
      cat "$log" >&2
      return 1
    fi
    sm61_rows "$f" "$ptx" "$work" || return 1
  fi
  return $status
}

jobs_max="$(nproc 2> /dev/null || echo 1)"
i=0
for f in "${files[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  mkdir -p "$tmp/$i"
  ( check_file "$f" "$tmp/$i" > "$tmp/$i/table" 2> "$tmp/$i/messages"; echo $? > "$tmp/$i/status" ) &
  i=$((i + 1))
done
wait

printf '%-32s %-5s %5s %8s %8s %6s  %s\n' file arch regs spill_st spill_ld smem kernel
for ((j = 0; j < i; ++j)); do
  cat "$tmp/$j/table"
  cat "$tmp/$j/messages" >&2
  [ "$(cat "$tmp/$j/status")" = 0 ] || status=1
done

# The register table against this run: "file arch regs kernel" of the kernels/cuda files checked, at
# the table's architectures that this run produced.
if [ -n "$registers" ]; then
  for ((j = 0; j < i; ++j)); do cat "$tmp/$j/table"; done |
    awk '$1 ~ /^kernels\/cuda\// && ($2 == "sm_61" || $2 == "sm_75" || $2 == "sm_90") {
           k = $7; for (f = 8; f <= NF; ++f) k = k " " $f; print $1, $2, $3, k }' | sort -u > "$tmp/now"
  checked_archs="$(awk '{print $2}' "$tmp/now" | sort -u | paste -sd'|')"
  checked_files="$(awk '{print $1}' "$tmp/now" | sort -u | paste -sd'|' | sed 's/[.]/[.]/g')"
  if [ -n "$checked_archs" ]; then
    grep -v '^#' "$registers" |
      awk -v archs="^($checked_archs)\$" -v files="^($checked_files)\$" '$2 ~ archs && $1 ~ files {
           k = $7; for (f = 8; f <= NF; ++f) k = k " " $f; print $1, $2, $3, k }' | sort -u > "$tmp/table"
    if ! diff -q "$tmp/table" "$tmp/now" > /dev/null; then
      echo "check-ptxas: $registers is out of date (< table, > this run):" >&2
      diff "$tmp/table" "$tmp/now" | grep '^[<>]' | head -20 >&2
      echo "check-ptxas: run scripts/checks/update-ptxas-registers.sh $(diff "$tmp/table" "$tmp/now" | grep '^[<>]' | awk '{print $2}' | sort -u | paste -sd' ')" >&2
      status=1
    fi
  fi
fi
exit $status
