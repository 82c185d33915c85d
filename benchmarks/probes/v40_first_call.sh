# The next session's first GPU call (NOTES v39), timeout_s 600, carry [".swig"] (see
# v38_first_call.sh for making .swig):
#  1. the whole GPU suite, the demo and the Python GPU tests on the tree as it is: v39 landed the
#     buffer-size checks (every hm_plan_gemm / utility call of the suite now goes through them on a
#     real driver) and the fixed order of PlanGpu.ArgumentChecksOnTheDevice, neither yet run on a
#     GPU in full;
#  2. racecheck over one g32 / g64 case per kernel family with a longer limit (v39's racecheck did
#     not finish its first test in 120 s; memcheck and synccheck were clean).
# Filters use only * and ? (gtest); gpu_check.sh now reports a filter that matches nothing.
O=$OUT
OUT=$O/gpu timeout 330 bash benchmarks/gpu_check.sh gpu
OUT=$O/race SANITIZE_TOOLS="racecheck" SANITIZE_WARMUP=0 BUILD_TARGETS="test_gpu" \
  RACECHECK_FILTER='Formats/DenseGemmA8.MatchesTheHostReferenceThroughForcedTiles/case41:Formats/DenseGemmA8.MatchesTheHostReferenceThroughForcedTiles/case42:Formats/MoeGemm.ForcedTilesWithAndWithoutClusterSplits/case8' \
  RACECHECK_LIMIT=220 bash benchmarks/gpu_check.sh sanitize
cd $O && tar czf /tmp/all.tar.gz . && rm -rf $O/* && mv /tmp/all.tar.gz $O/
