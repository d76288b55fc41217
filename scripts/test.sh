#!/usr/bin/env bash
# The README's test command: installs missing packages (Debian), builds the release and asan
# presets and runs every test in both, then builds the fuzz preset and runs every fuzz target
# briefly. Usage: scripts/test.sh [release|asan|fuzz|all] (default all).
#   release  -O3 build; with the CUDA toolkit present it also compiles every kernel with nvcc
#            (sm_75/80/90; sm_75/90 in CI, below) and runs scripts/checks/check-ptxas.sh on that
#            build's ptxas reports (no register spills; sm_61 too, from the objects' PTX with CUDA
#            12's ptxas fetched from PyPI by scripts/get-ptxas12.sh) and
#            scripts/checks/check-symbols.sh (the nvcc and emulator builds share no symbol).
#   asan     AddressSanitizer + UndefinedBehaviorSanitizer, emulated CUDA kernels included.
#   fuzz     scripts/fuzz.sh: every seed and regression input of tests/fuzz/, then 20 s of fuzzing per
#            target (clang, libFuzzer, ASan + UBSan); fails on any finding.
# No GPU is needed: the CUDA kernels are tested on the CPU through the emulated device (test mode
# emu); test mode cuda runs only where a GPU exists.
set -euo pipefail
cd "$(dirname "$0")/.."
which="${1:-all}"
# The CUDA toolkit's usual home, for machines where nvcc is not on PATH.
if ! command -v nvcc > /dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi

# Each phase says how long it took, so a slow CI run shows where its time went.
phase_start=$(date +%s)
phase_done() {
  local now
  now=$(date +%s)
  echo "== $1 took $((now - phase_start)) s"
  phase_start=$now
}

./scripts/install-deps.sh
phase_done "install-deps"

# ccache keys on paths relative to the checkout, so a fresh clone elsewhere (CI) reuses what an
# earlier build of the same sources compiled.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-true}"
# The test files compile with a precompiled header (tests/CMakeLists.txt), which ccache caches only
# with these two sloppiness settings (otherwise it compiles them every time).
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:+$CCACHE_SLOPPINESS,}pch_defines,time_macros"

# CI (CI set, as .ci/run's machines do) compiles the nvcc build for sm_75 and sm_90 only, where a
# build without a GPU gives users sm_75, sm_80 and sm_90: sm_80 takes the same code paths as sm_90
# (__CUDA_ARCH__ >= 800), and leaving it out saves a third of nvcc's time in a cold CI run, which
# must stay within its hour on 2 cores.
cuda_archs=()
if [ -n "${CI:-}" ]; then
  cuda_archs=(-DCMAKE_CUDA_ARCHITECTURES="75;90")
  export ARCHS="75 90"
fi

run_preset() {
  local p="$1"
  echo "== preset $p: configure and build"
  if [ "$p" = release ]; then
    cmake --preset "$p" "${cuda_archs[@]}" > /dev/null
  else
    cmake --preset "$p" > /dev/null
  fi
  cmake --build --preset "$p" -j "$(nproc)"
  phase_done "preset $p: build"
  echo "== preset $p: tests"
  ctest --preset "$p"
  phase_done "preset $p: tests"
  if [ "$p" = release ] && command -v nvcc > /dev/null; then
    echo "== ptxas report: registers and spills of every kernel (sm_75, sm_80 outside CI, sm_90; sm_61 by CUDA 12)"
    PTXAS12="$(./scripts/get-ptxas12.sh)" ./scripts/checks/check-ptxas.sh --build build/release \
      --registers kernels/cuda/ptxas-registers.txt
    echo "== link safety: no symbol defined by both the nvcc and the emulator build"
    ./scripts/checks/check-symbols.sh build/release
    phase_done "ptxas report and link safety"
  fi
}

case "$which" in
  release) run_preset release ;;
  asan) run_preset asan ;;
  fuzz) ./scripts/fuzz.sh ;;
  all) run_preset release; run_preset asan; ./scripts/fuzz.sh; phase_done "fuzz" ;;
  *) echo "usage: scripts/test.sh [release|asan|fuzz|all]" >&2; exit 2 ;;
esac
