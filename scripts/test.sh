#!/usr/bin/env bash
# Builds Humming and runs every test: the whole CTest suite (GPU tests report "skipped" with no
# GPU), then the host, API and fuzz suites again under AddressSanitizer + UndefinedBehaviorSanitizer.
#   scripts/test.sh            everything
#   HM_SKIP_SANITIZERS=1 ...   skip the sanitizer build (quicker local loop)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${HM_JOBS:-$(nproc)}
python=$(command -v python3)

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython3_EXECUTABLE="$python"
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"

if [ "${HM_SKIP_SANITIZERS:-0}" != 1 ]; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DHUMMING_SANITIZE=ON \
        -DPython3_EXECUTABLE="$python"
  cmake --build build-asan -j "$jobs"
  # The mock driver and fork-based tests run fine under ASan; the python tests load the library
  # into an uninstrumented interpreter, so they run only in the plain build above.
  # The runtime options compiled into every sanitizer executable are in
  # cmake/sanitizer_options.cpp (why LeakSanitizer must not track dynamic TLS); these add to them.
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs" -L 'host|api|fuzz' -LE python
fi
