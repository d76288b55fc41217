#!/usr/bin/env bash
# Prints the path of a CUDA 12 ptxas (12.9), fetching it once into build/ptxas12/ from PyPI's
# nvidia-cuda-nvcc-cu12 wheel (only ptxas is unpacked). CUDA 13 dropped sm_61 (GTX 1080 Ti), but
# ptxas 12.9 still assembles for it: scripts/checks/check-ptxas.sh uses it to check every kernel at sm_61.
set -euo pipefail
cd "$(dirname "$0")/.."
version=12.9.86
dir=build/ptxas12
bin="$dir/ptxas-$version"
if [ ! -x "$bin" ]; then
  mkdir -p "$dir"
  if ! python3 -m pip --version > /dev/null 2>&1; then
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    $sudo_cmd apt-get install -y -qq python3-pip > /dev/null
  fi
  python3 -m pip download --quiet --no-deps --dest "$dir/wheel" "nvidia-cuda-nvcc-cu12==$version" >&2
  python3 - "$dir/wheel" "$bin" <<'PY'
import glob, os, sys, zipfile
wheel = glob.glob(os.path.join(sys.argv[1], "nvidia_cuda_nvcc_cu12-*.whl"))[0]
with zipfile.ZipFile(wheel) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("nvidia/cuda_nvcc/bin/ptxas"))
os.chmod(sys.argv[2], 0o755)
PY
  rm -rf "$dir/wheel"
fi
"$bin" --version > /dev/null
echo "$PWD/$bin"
