#!/usr/bin/env bash
# The fixed part of a small-M GEMM (NOTES v35): bench_gemm at M = 1 and 16 over K (N = 8192) and
# over N (K = 8192), int4 g128 f16 and W8A8 fp8, default tiles. A time linear in the bytes with a
# large intercept is a fixed cost (launch, ramp, split-K tail); a slope far above bytes /
# bandwidth is the stream itself. Run on the GPU host after gpu_check.sh has built build-gpu.
set -uo pipefail
OUT=${OUT:-/tmp/humming-out}
B="timeout 60 ./build-gpu/benchmarks/bench_gemm"
for fmt in "w=uint4b8 a=f16 c=f16 s=f16:g128" "w=e4m3 a=e4m3 c=bf16 s=f32:channel"; do
  tag=$(echo "$fmt" | cut -d' ' -f1 | tr '=' '_')
  for nk in "8192 2048" "8192 4096" "8192 8192" "8192 16384" "8192 32768" "4096 8192" "16384 8192"; do
    set -- $nk
    $B --format "$fmt n=$1 k=$2" --ms 1,16 --no-cublas --label kscale \
      --json "$OUT/kscale_${tag}_n$1_k$2.json" | grep -E "^ +[0-9]+ " | sed "s/^/$tag n=$1 k=$2 /"
  done
done
