# NOTES v37, call 2: the sanitizers over the small-group-fold cases (Formats/DenseGemmA8 cases 41-45,
# DenseGemmA8Exact), then few-split small-M tiles on W8A8 and W4A8 (sweep_v37_few_splits.txt),
# each step time-limited so the call ends inside the device budget; one tarball comes back.
O=$OUT
export BUILD_TARGETS="test_gpu bench_gemm" SWEEP_LIST=benchmarks/tuning/sweep_v37_few_splits.txt
OUT=$O/san SANITIZE_TOOLS="memcheck racecheck synccheck" SANITIZE_WARMUP=0 \
  MEMCHECK_FILTER='Formats/DenseGemmA8.*/case4[1-5]:DenseGemmA8Exact.*' MEMCHECK_LIMIT=80 \
  RACECHECK_FILTER='Formats/DenseGemmA8.*/case4[1-5]' RACECHECK_LIMIT=100 \
  SYNCCHECK_FILTER='Formats/DenseGemmA8.*/case4[1-5]' SYNCCHECK_LIMIT=60 \
  bash benchmarks/gpu_check.sh sanitize
OUT=$O/w8 SWEEP_FORMAT="w=e4m3 a=e4m3 c=bf16 s=f32:channel n=8192 k=8192" timeout 90 bash benchmarks/gpu_check.sh sweep
OUT=$O/w4a8 SWEEP_FORMAT="w=e2m1 a=e4m3 c=bf16 s=bf16:channel n=8192 k=8192" timeout 90 bash benchmarks/gpu_check.sh sweep
cd $O && tar czf /tmp/all.tar.gz . && rm -rf $O/* && mv /tmp/all.tar.gz $O/ && grep -h "exit\|SUMMARY" /dev/null
