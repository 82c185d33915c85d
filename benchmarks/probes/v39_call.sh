# NOTES v39's GPU call (timeout_s 600; about 7 minutes of command): the groups of 32 / 64 k on
# 8-bit activations (landed after v38's call passed the GPU suite on an H100) under the three
# sanitizers, with filters that match (v38's call used gtest filters with [1-5], which gtest does
# not know: its sanitizers ran no test), and the plan tests with the buffer size checks.
O=$OUT
export BUILD_TARGETS="test_gpu"
CASES='Formats/DenseGemmA8.*/case4?:Formats/MoeGemm.*/case8:Formats/MoeGemm.*/case9:Formats/MoeGemmGrouped.*/case8:Formats/MoeGemmGrouped.*/case9:DenseGemmA8Exact.*'
FORCED='Formats/DenseGemmA8.MatchesTheHostReferenceThroughForcedTiles/case4?:Formats/MoeGemm.ForcedTiles*/case8:Formats/MoeGemm.ForcedTiles*/case9:DenseGemmA8Exact.*'
# The build, then the cases and the plan tests without a sanitizer (this fills the kernel cache).
OUT=$O/san SANITIZE_TOOLS=none SANITIZE_WARMUP=0 bash benchmarks/gpu_check.sh sanitize
T=./build-gpu/tests/test_gpu
timeout 200 $T --gtest_filter="$CASES:PlanGpu.*:ActivationQuantGpu.*:PackDeviceGpu.*:MoeRoutingGpu.*:MoeGemmHostile.*:MoeGemmGroupedHostile.*:*ReferenceGemm*" > $O/san/plain.txt 2>&1
echo "plain run: exit $?"; grep -E "^\[  (PASSED|FAILED|SKIPPED)|tests ran" $O/san/plain.txt | head -20
OUT=$O/san2 SANITIZE_TOOLS="memcheck racecheck synccheck" SANITIZE_WARMUP=0 \
  MEMCHECK_FILTER="$CASES" MEMCHECK_LIMIT=150 \
  RACECHECK_FILTER="$FORCED" RACECHECK_LIMIT=120 \
  SYNCCHECK_FILTER="$FORCED" SYNCCHECK_LIMIT=70 \
  bash benchmarks/gpu_check.sh sanitize
cp $O/san/plain.txt $O/san2/ 2>/dev/null
cd $O && tar czf /tmp/all.tar.gz . && rm -rf $O/* && mv /tmp/all.tar.gz $O/
