# The next session's first GPU call (NOTES v38), one cold start, under 10 minutes on an H200 (run with timeout_s 600):
#  1. the 8-bit activation GPU tests (every A8 case and the exact ones), which now run groups of
#     32 / 64 k through the mma.sync kernel too (forced), and the g128 fold's refactor there;
#  2. compute-sanitizer (memcheck, racecheck, synccheck) over the g32 / g64 fold cases (wgmma
#     fold tiles and the forced mma.sync tiles).
# The mma.sync fold is parked in probes/mma_small_group_fold.patch: applied here first.
# Each part is time-limited; one tarball comes back (all.tar.gz).
git apply benchmarks/probes/mma_small_group_fold.patch || exit 1
O=$OUT
export BUILD_TARGETS="test_gpu bench_gemm"
OUT=$O/a8 timeout 220 bash benchmarks/gpu_check.sh a8tests
OUT=$O/san SANITIZE_TOOLS="memcheck racecheck synccheck" SANITIZE_WARMUP=0 \
  MEMCHECK_FILTER='Formats/DenseGemmA8.*/case4[1-5]:DenseGemmA8Exact.BitExactOnRepresentableInputs' MEMCHECK_LIMIT=80 \
  RACECHECK_FILTER='Formats/DenseGemmA8.*/case4[1-5]' RACECHECK_LIMIT=70 \
  SYNCCHECK_FILTER='Formats/DenseGemmA8.*/case4[1-5]' SYNCCHECK_LIMIT=40 \
  bash benchmarks/gpu_check.sh sanitize
cd $O && tar czf /tmp/all.tar.gz . && rm -rf $O/* && mv /tmp/all.tar.gz $O/
