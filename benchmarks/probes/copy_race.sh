#!/usr/bin/env bash
# Does a copy by hm_copy_to_device race a graph replayed on a non-blocking stream (NOTES v36)?
# Builds the GPU tests twice, as the tree has them and with
# benchmarks/probes/copy_without_dma_wait.patch (the copy before its DMA wait), then runs
# MoeRoutingGpu.GraphCaptureReplaysWithNewRoutings in 8 processes at once, REPEAT times each, and
# counts the failed repetitions of each build. Results in $OUT/race_<build>_<process>.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/copy-race}
REPEAT=${REPEAT:-40}
mkdir -p "$OUT"
patch_tree() {  # [-R]: applies (reverts) the probe patch, with patch(1) or git
  if command -v patch >/dev/null; then patch -p1 --quiet ${1:-} < benchmarks/probes/copy_without_dma_wait.patch
  else git apply ${1:-} benchmarks/probes/copy_without_dma_wait.patch; fi
}
build() {
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHUMMING_BUILD_TESTS=ON >/dev/null &&
    cmake --build "$1" -j "$(nproc)" --target test_gpu > "$OUT/build_$1.txt" 2>&1
}
build build-race-new || { echo "build failed"; exit 1; }
patch_tree || exit 1
build build-race-old; rc=$?
patch_tree -R
[ "$rc" = 0 ] || { echo "build of the unpatched copy failed"; exit 1; }
for b in build-race-old build-race-new; do
  for i in 1 2 3 4 5 6 7 8; do
    timeout 240 "./$b/tests/test_gpu" --gtest_filter='MoeRoutingGpu.GraphCapture*' \
      --gtest_repeat="$REPEAT" > "$OUT/race_${b}_$i.txt" 2>&1 &
  done
  wait
  # (gtest prints a failure twice per repetition: with its time, then in the summary)
  failed=$(cat "$OUT"/race_"$b"_*.txt | grep -c '^\[  FAILED  \] MoeRoutingGpu.* ms)$')
  passed=$(cat "$OUT"/race_"$b"_*.txt | grep -c '^\[       OK \] MoeRoutingGpu')
  echo "$b: $failed failed, $passed passed of $((8 * REPEAT)) repetitions"
done
