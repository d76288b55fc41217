#!/usr/bin/env bash
# Installs the Debian packages the build needs, only those that are missing, the sacrebleu
# Python package the BLEU check compares with, and TensorBoard (scripts/metrics_to_tensorboard.py).
set -euo pipefail
pkgs=(build-essential cmake ninja-build ccache libeigen3-dev libfmt-dev catch2 libboost-context-dev
      libopenblas-openmp-dev libdnnl-dev nlohmann-json3-dev zlib1g-dev libpng-dev
      libsentencepiece-dev pkg-config  # data/subword.h (SentencePiece subword models)
      libopenmpi-dev openmpi-bin  # data-parallel training over processes (distributed/, mpirun)
      clang-14 libclang-rt-14-dev libomp-14-dev  # the fuzz preset: clang, libFuzzer, clang's OpenMP
      python3-torch)  # tests/reference/: each model family against PyTorch's own layers (/usr/bin/python3)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" > /dev/null
fi

# pip_install MODULE PACKAGE==VERSION: installs the PyPI package unless python3 imports MODULE already.
pip_install() {
  python3 -c "import $1" 2> /dev/null && return 0
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  if ! python3 -m pip --version > /dev/null 2>&1; then
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq python3-pip > /dev/null
  fi
  echo "installing: $2 (PyPI)"
  user_flag=""
  [ "$(id -u)" -eq 0 ] || user_flag="--user"
  python3 -m pip install --quiet $user_flag --break-system-packages "$2"
}
# The sacrebleu Python package, for scripts/checks/check-bleu.sh (a ctest): `define bleu` checked against it.
pip_install sacrebleu sacrebleu==2.6.0
# TensorBoard, for scripts/metrics_to_tensorboard.py and its ctest (scripts/checks/check-tensorboard.py).
pip_install tensorboard tensorboard==2.21.0
