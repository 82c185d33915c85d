# NOTES v37, call 2: few-split small-M tiles on W8A8 / W4A8 / int4 g128, and the sanitizers over
# the small-group-fold cases (the patch applied to the tree).
O=$OUT
export BUILD_TARGETS="test_gpu bench_gemm" SWEEP_LIST=benchmarks/tuning/sweep_v37_few_splits.txt
OUT=$O/w8 SWEEP_FORMAT="w=e4m3 a=e4m3 c=bf16 s=f32:channel n=8192 k=8192" bash benchmarks/gpu_check.sh sweep
OUT=$O/w4a8 SWEEP_FORMAT="w=e2m1 a=e4m3 c=bf16 s=bf16:channel n=8192 k=8192" bash benchmarks/gpu_check.sh sweep
OUT=$O/int4 SWEEP_FORMAT="w=uint4b8 a=f16 c=f16 s=f16:g128 n=8192 k=8192" bash benchmarks/gpu_check.sh sweep
timeout 100 ./build-gpu/tests/test_gpu --gtest_filter='Formats/DenseGemmA8.*/case4[1-5]:DenseGemmA8Exact.*' > $O/warm.txt 2>&1; tail -3 $O/warm.txt
OUT=$O/san SANITIZE_TOOLS="memcheck racecheck synccheck" SANITIZE_WARMUP=0 MEMCHECK_FILTER='Formats/DenseGemmA8.*/case4[1-5]:DenseGemmA8Exact.*' MEMCHECK_LIMIT=100 RACECHECK_FILTER='Formats/DenseGemmA8.*/case4[1-5]' RACECHECK_LIMIT=130 SYNCCHECK_FILTER='Formats/DenseGemmA8.*/case4[1-5]' SYNCCHECK_LIMIT=70 bash benchmarks/gpu_check.sh sanitize
cd $O && tar czf /tmp/results.tar.gz . && mv /tmp/results.tar.gz $O/
