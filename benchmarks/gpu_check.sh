#!/usr/bin/env bash
# One call on the GPU host: build, run the GPU tests and the benchmarks, collect results in $OUT.
#   (device tool) run: bash benchmarks/gpu_check.sh
# Writes $OUT/log.txt (everything), $OUT/ctest.txt, $OUT/*.json (benchmark results).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/humming-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1

echo "== machine"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv || true
nproc; nvcc --version | tail -1

echo "== build"
t0=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DHUMMING_BUILD_TESTS=ON \
      -DPython3_EXECUTABLE="$(command -v python3)" >/dev/null || exit 1
cmake --build build-gpu -j "$(nproc)" 2>&1 | tail -5 || exit 1
echo "build took $(( $(date +%s) - t0 )) s"

echo "== humming info"; ./build-gpu/humming info
if [ "${1:-all}" = bench ]; then SKIP_TESTS=1; fi
if [ -z "${SKIP_TESTS:-}" ]; then
echo "== gpu tests"
ctest --test-dir build-gpu -L gpu --output-on-failure -j 1 2>&1 | tee "$OUT/ctest.txt" | tail -40
echo "== api + jit tests (on the GPU host too)"
ctest --test-dir build-gpu -L 'api|jit' -j 8 2>&1 | tail -5
echo "== demo"; ./build-gpu/humming demo
fi
echo "== bench: jit"
./build-gpu/benchmarks/bench_jit --repeat 5 --json "$OUT/jit.json"
echo "== bench: dense gemm"
./build-gpu/benchmarks/bench_gemm --json "$OUT/gemm_int4_g128_f16.json"
./build-gpu/benchmarks/bench_gemm --format "w=uint4b8 a=f16 c=f16 s=f16:g128 n=28672 k=4096" --ms 1,16,128,2048 --json "$OUT/gemm_int4_g128_f16_n28672_k4096.json"
./build-gpu/benchmarks/bench_gemm --format "w=uint8b128 a=f16 c=f16 s=f16:channel n=8192 k=8192" --ms 1,128,2048 --json "$OUT/gemm_int8_channel_f16.json"
if [ -z "${SKIP_TESTS:-}" ]; then
echo "== bench: cublas baseline"
python3 benchmarks/cublas_baseline.py --json "$OUT/cublas_f16.json" || true
fi
echo "== done"
