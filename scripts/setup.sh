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
# Pinned: versions this suite last passed with (a newer wheel may change under a fresh machine).
python3 -m pip install -q --disable-pip-version-check pytest==9.2.0 numpy==2.4.6 ml_dtypes==0.7.0 \
  scikit-build-core==1.1.2
# The SASS check of the wgmma kernels (tests/jit) needs cuobjdump, and cuobjdump -sass needs
# nvdisasm beside it (wheels from 13.5 on ship them apart). Pinned as a pair that was tried
# together: an unpinned newest wheel changed under us once (issue 14).
python3 -m pip install -q --disable-pip-version-check \
  nvidia-cuda-cuobjdump==13.5.37 nvidia-cuda-nvdisasm==13.5.37

# The Python binding is also built with the oldest and the newest SWIG 4 (tests/bindings), each
# pinned in a virtual environment of its own so neither shadows the system SWIG.
tools="${HUMMING_TOOLS_DIR:-$HOME/.cache/humming-tools}"
for v in 4.0.2 4.5.1; do
  if ! "$tools/swig-$v/bin/swig" -version 2>/dev/null | grep -q "Version $v"; then
    rm -rf "$tools/swig-$v"
    python3 -m venv "$tools/swig-$v"
    "$tools/swig-$v/bin/python" -m pip install -q --disable-pip-version-check "swig==$v"
  fi
done
