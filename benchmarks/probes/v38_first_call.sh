# The next session's first GPU call (NOTES v38), one cold start, under 10 minutes on an H200.
# Run it with timeout_s 600 and carry [".swig"] (a SWIG for the Python module: mkdir -p .swig &&
# cp -r ~/.cache/humming-tools/swig-4.5.1/lib/python3*/site-packages/swig/data .swig/):
#  1. the whole GPU suite with probes/small_group_fold_rest.patch applied (groups of 32 / 64 k
#     on 8-bit activations through dense mma.sync, moe_mma and moe_wgmma: A8 cases 41-45 and the
#     exact cases through the forced mma.sync tiles, MoE cases 8 / 9 through every forced tile),
#     the demo, and the Python GPU tests (humming.torch's per-stream workspace and dtype-keeping
#     casts of stop 37 have not run on a GPU);
#  2. compute-sanitizer (memcheck, racecheck, synccheck) over the g32 / g64 fold cases, dense
#     and MoE (v37's landed wgmma fold has never been under the sanitizers).
# Each part is time-limited; one tarball comes back (all.tar.gz).
git apply benchmarks/probes/small_group_fold_rest.patch || exit 1
O=$OUT
OUT=$O/gpu timeout 330 bash benchmarks/gpu_check.sh gpu
OUT=$O/san SANITIZE_TOOLS="memcheck racecheck synccheck" SANITIZE_WARMUP=0 BUILD_TARGETS="test_gpu" \
  MEMCHECK_FILTER='Formats/DenseGemmA8.*/case4[1-5]:Formats/MoeGemm*.*/case[89]:DenseGemmA8Exact.BitExactOnRepresentableInputs' MEMCHECK_LIMIT=80 \
  RACECHECK_FILTER='Formats/DenseGemmA8.*/case4[1-5]:Formats/MoeGemm.ForcedTiles*/case[89]' RACECHECK_LIMIT=70 \
  SYNCCHECK_FILTER='Formats/DenseGemmA8.*/case4[1-5]:Formats/MoeGemm.ForcedTiles*/case[89]' SYNCCHECK_LIMIT=40 \
  bash benchmarks/gpu_check.sh sanitize
cd $O && tar czf /tmp/all.tar.gz . && rm -rf $O/* && mv /tmp/all.tar.gz $O/
