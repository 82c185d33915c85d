#!/usr/bin/env bash
# Installs what Humming needs to build and test on a fresh Debian machine (run as root, or with
# sudo available). Safe to run again: it only installs what is missing.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
# clang-14 and libclang-rt-14-dev: libFuzzer for the fuzz targets (tests/fuzz/README.md); without
# them the targets run their replay driver and the libFuzzer entry reports a skip.
packages="cmake ninja-build g++ binutils nlohmann-json3-dev libgtest-dev swig golang-go bindgen
  clang-14 libclang-rt-14-dev"
missing=""
for p in $packages; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
python3 -m pip install -q --disable-pip-version-check pytest numpy ml_dtypes scikit-build-core \
  nvidia-cuda-cuobjdump  # the SASS check of the wgmma kernels (tests/jit)
