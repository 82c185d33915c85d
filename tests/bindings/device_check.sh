#!/bin/bash
# Runs the three bindings' GPU tests on a machine that has a GPU but none of the build tools
# (no SWIG, cargo or go): the binaries are built here, carried there, and the Python module is
# compiled there from SWIG's C output against that machine's Python.
#
#   tests/bindings/device_check.sh prepare BUILD_DIR   here: fills BUILD_DIR/bindings-device
#   tests/bindings/device_check.sh run BUILD_DIR       there (carry BUILD_DIR/bindings-device)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:?usage: device_check.sh prepare|run BUILD_DIR}
build=$(cd "${2:?usage: device_check.sh prepare|run BUILD_DIR}" && pwd)
out=$build/bindings-device

case "$mode" in
  prepare)
    rm -rf "$out" && mkdir -p "$out/pkg/humming"
    cp "$(readlink -f "$build/libhumming.so")" "$out/libhumming.so.0"
    strip --strip-debug "$out/libhumming.so.0"
    cp "$build/bindings/python/swig/rawPYTHON_wrap.c" "$build/bindings/python/package/humming/raw.py" "$out/"
    (cd "$root/bindings/go" && CGO_LDFLAGS="-L$build" GOCACHE="$build/bindings-work/go-cache" \
       GOPROXY=off go test -c -o "$out/go_gpu.test" .)
    rust_test=$(cd "$root/bindings/rust" && CARGO_TARGET_DIR="$build/bindings-work/cargo" \
       HUMMING_LIB_DIR="$build" cargo test --offline --locked --no-run --test gpu 2>&1 |
       sed -n 's/.*(\(.*\/gpu-[0-9a-f]*\)).*/\1/p' | head -1)
    cp "$rust_test" "$out/rust_gpu" && strip --strip-debug "$out/rust_gpu"
    du -sh "$out"
    ;;
  run)
    cd "$out"
    export LD_LIBRARY_PATH=$out HUMMING_CACHE_DIR=/tmp/humming-cache PYTHONDONTWRITEBYTECODE=1
    status=0
    cp "$root"/bindings/python/humming/*.py raw.py pkg/humming/
    include=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])")
    suffix=$(python3 -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
    cc -shared -fPIC -O1 -w -I"$root/include" -I"$include" rawPYTHON_wrap.c \
       -o "pkg/humming/_raw$suffix" -L"$out" -l:libhumming.so.0 -Wl,-rpath,"$out"
    echo "=== python"
    HUMMING_PYTHON_PACKAGE=$out/pkg python3 -m pytest -q -p no:cacheprovider -rs \
      "$root/tests/bindings/python/test_gpu_plan.py" "$root/tests/bindings/python/test_gpu_torch.py" || status=1
    echo "=== go"
    ./go_gpu.test -test.run GPU -test.v || status=1
    echo "=== rust"
    ./rust_gpu --ignored || status=1
    exit $status
    ;;
  *)
    echo "usage: device_check.sh prepare|run BUILD_DIR" >&2
    exit 2
    ;;
esac
