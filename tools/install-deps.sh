#!/usr/bin/env bash
# Installs the Debian packages the build needs, only those that are missing.
set -euo pipefail
pkgs=(build-essential cmake ninja-build ccache libeigen3-dev libfmt-dev catch2 libboost-context-dev
      libopenblas-openmp-dev nlohmann-json3-dev zlib1g-dev libpng-dev
      libsentencepiece-dev pkg-config  # data/subword.h (SentencePiece subword models)
      clang-14 libclang-rt-14-dev libomp-14-dev)  # the fuzz preset: clang, libFuzzer, clang's OpenMP
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
