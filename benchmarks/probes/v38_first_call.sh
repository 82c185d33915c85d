# The next session's first GPU call (NOTES v38), one cold start, under 10 minutes on an H200 (run with timeout_s 600):
#  1. the 8-bit activation GPU tests (every A8 case and the exact ones: groups of 32 / 64 k now
#     also through the forced mma.sync kernel) and the MoE GPU tests (cases 8 and 9: g64 / g32
#     experts through moe_wgmma and moe_mma, both grouped modes);
#  2. compute-sanitizer (memcheck, racecheck, synccheck) over the g32 / g64 fold cases, dense
#     and MoE.
# The fold on mma.sync and MoE is parked in probes/small_group_fold_rest.patch: applied here
# first. Each part is time-limited; one tarball comes back (all.tar.gz).
git apply benchmarks/probes/small_group_fold_rest.patch || exit 1
O=$OUT
export BUILD_TARGETS="test_gpu bench_gemm"
OUT=$O/a8 A8_REGEX='A8|DenseGemmExact|MoeGemm' timeout 240 bash benchmarks/gpu_check.sh a8tests
OUT=$O/san SANITIZE_TOOLS="memcheck racecheck synccheck" SANITIZE_WARMUP=0 \
  MEMCHECK_FILTER='Formats/DenseGemmA8.*/case4[1-5]:Formats/MoeGemm*.*/case[89]:DenseGemmA8Exact.BitExactOnRepresentableInputs' MEMCHECK_LIMIT=90 \
  RACECHECK_FILTER='Formats/DenseGemmA8.*/case4[1-5]:Formats/MoeGemm.ForcedTiles*/case[89]' RACECHECK_LIMIT=80 \
  SYNCCHECK_FILTER='Formats/DenseGemmA8.*/case4[1-5]:Formats/MoeGemm.ForcedTiles*/case[89]' SYNCCHECK_LIMIT=50 \
  bash benchmarks/gpu_check.sh sanitize
cd $O && tar czf /tmp/all.tar.gz . && rm -rf $O/* && mv /tmp/all.tar.gz $O/
