# The second GPU call of NOTES v38 (run with timeout_s 600):
#  1. the queued-wgmma variant (probes/kernels_v37_one_wgmma_queued.patch) against the tree's
#     kernels: the 8-bit and A8 exact tests on it, then bench_gemm at M = 128 / 2048 / 16384 on
#     W4A8, MXFP4 x e4m3, W8A8 FP8 and int4 g128 f16 (8192²);
#  2. the few-split small-M sweep (sweep_v37_few_splits.txt) on W8A8 FP8 and W4A8.
O=$OUT
export BUILD_TARGETS="test_gpu bench_gemm"
OUT=$O/queued KERNEL_VARIANTS="none kernels_v37_one_wgmma_queued" KERNEL_VARIANT_BENCH=gemm \
  KERNEL_VARIANT_TESTS='Formats/DenseGemmA8.MatchesTheHostReferenceForEveryTileAndRaggedShape/case[0-9]:DenseGemmA8Exact.*:DenseGemmExact.*' \
  KERNEL_VARIANT_FORMATS="w=e2m1 a=e4m3 c=bf16 s=bf16:channel n=8192 k=8192;w=e2m1 a=e4m3 c=bf16 s=ue8m0:g32+tensor n=8192 k=8192;w=e4m3 a=e4m3 c=bf16 s=f32:channel n=8192 k=8192;w=uint4b8 a=f16 c=f16 s=f16:g128 n=8192 k=8192" \
  KERNEL_VARIANT_MS=128,2048,16384 timeout 300 bash benchmarks/gpu_check.sh kernel_variants
export SWEEP_LIST=benchmarks/tuning/sweep_v37_few_splits.txt
OUT=$O/w8 SWEEP_FORMAT="w=e4m3 a=e4m3 c=bf16 s=f32:channel n=8192 k=8192" timeout 90 bash benchmarks/gpu_check.sh sweep
OUT=$O/w4a8 SWEEP_FORMAT="w=e2m1 a=e4m3 c=bf16 s=bf16:channel n=8192 k=8192" timeout 90 bash benchmarks/gpu_check.sh sweep
cd $O && tar czf /tmp/all.tar.gz . && rm -rf $O/* && mv /tmp/all.tar.gz $O/
