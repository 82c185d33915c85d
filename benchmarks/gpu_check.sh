#!/usr/bin/env bash
# One call on the GPU host: build, run the GPU tests and the benchmarks, collect results in $OUT.
#   (device tool) run: bash benchmarks/gpu_check.sh [MODE]
# MODE: all (default: tests + every benchmark + profile), tests (tests and the demo), gpu (the demo
# and the GPU tests only), quick (tests
# + the default-tuning benchmarks), sweep (the tuning sweep of benchmarks/tuning/), defaults (the
# default-tuning benchmarks only), formats (other weight formats and bf16), bench (every
# benchmark, no tests), profile (ncu of the dense GEMM at a few M), sanitize (compute-sanitizer:
# memcheck over the whole GPU test binary, racecheck and synccheck over the dense-GEMM and plan
# tests, which run every default tile; each tool's report in $OUT/sanitize_<tool>.txt), actquant
# (the activation quantizer's benchmark), moe (the MoE GEMM benchmark), a8 (8-bit activation
# GEMM benchmarks), a8tests (only the 8-bit activation GPU tests, through ctest), a8mma (8-bit activations on
# the mma.sync kernel, forced), moemma (the MoE benchmark's Qwen3 shapes on the mma.sync MoE
# family, forced), moesweep (the MoE tiles of benchmarks/tuning/moe_sweep/ forced on the Qwen3
# shapes at MOE_SWEEP_MS), moetests (only the MoE GPU tests), moeprofile (ncu of the MoE
# gate_up kernel at MOE_PROFILE_MS), pdlprobe (benchmarks/probes/pdl_probe.cu: does programmatic
# dependent launch overlap kernels here), actprofile (the quantizer at small M: e2e timings and
# ncu at ACTPROFILE_MS), actquant_pdl (quantizer / PDL GPU tests, the quantizer benchmark, e2e in
# three launch orders), actquant_variants (the quantizer benchmark over patched launch plans,
# benchmarks/probes/actquant_*.patch), kernel_variants (quantize + GEMM, or with
# KERNEL_VARIANT_BENCH=gemm bench_gemm alone, over patched copies of kernels/,
# benchmarks/probes/kernels_*.patch).
# Environment: SWEEP_LIST (the sweep's list, default benchmarks/tuning/sweep.txt), SWEEP_FORMAT
# (the sweep's format, default the benchmark's int4 g128 f16 8192 x 8192), PROFILE_MS
# (the M values profiled, default "1 128 2048"), PROFILE_TUNING (a tuning JSON for the profile),
# BUILD_TARGETS (build only these targets, e.g. "test_gpu bench_gemm humming_cli"), MOE_ITERS
# (bench_moe's --iters), MOE_SWEEP_LIST (the MoE sweep's list in benchmarks/tuning/moe_sweep/,
# default list.txt; tma.txt: the copying-warp tiles against the defaults), SANITIZE_WARMUP (0: no
# warm-up run before the sanitizers).
# Writes $OUT/log.txt (everything), $OUT/ctest.txt, $OUT/*.json (benchmark results), $OUT/report/.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/humming-out}
MODE=${1:-all}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
# MODE may list several, comma-separated (e.g. quick,profile).
want() { local m; for m in ${MODE//,/ }; do case " $* " in *" $m "*) return 0 ;; esac; done; return 1; }
# ncu of one launch of the kernels matching REGEX (the third, after two warm-up launches) in the
# command after OUTFILE: speed of light, memory, warp states, occupancy, launch, compute and
# scheduler sections, and the stall reasons; ncu_summary prints what is worth reading of it.
ncu_profile() {
  local regex=$1 out=$2; shift 2
  ncu --kernel-name "regex:$regex" --launch-skip 2 --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
      --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
      --section SchedulerStats \
      --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
      "$@" > "$out" 2>&1
}
# compute-sanitizer TOOL over the tests of BINARY that FILTER matches, within LIMIT seconds: the
# report in OUTFILE, its exit code and the kinds of report found (counted) here. A filter that
# matches no test is exit 87 and said so: "0 errors" over no test is no result (gtest filters know
# only * and ?, not [1-5]; NOTES v39).
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
sanitize_tests() {
  local tool=$1 limit=$2 out=$3 binary=$4 filter=$5 rc ran
  timeout "$limit" "$CS" --tool "$tool" --error-exitcode 86 --print-limit 40 \
    "$binary" --gtest_filter="$filter" > "$out" 2>&1
  rc=$?
  ran=$(grep -m1 -oE "Running [0-9]+ tests?" "$out" | grep -oE "[0-9]+")
  if [ "${ran:-0}" = 0 ]; then
    echo "-- $tool: NO TEST MATCHED the filter $filter: nothing was checked"
    rc=87
  fi
  echo "-- $tool (filter $filter, ${ran:-0} tests): exit $rc $( [ $rc = 124 ] && echo '(time limit: partial)')"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Invalid|hazard|Warpgroup|incomplete|Barrier|\[  FAILED|tests ran" \
    "$out" | sort | uniq -c | sort -rn | head -12
}
# A bench_gemm format as a file name: "w=e2m1 a=e4m3" -> w_e2m1_a_e4m3.
file_tag() { echo "$1" | sed 's/[ =:]/_/g'; }
# Applies (or with -R reverts) the unified diff PATCHFILE to this tree: patch(1), else git apply.
apply_patch() {
  if command -v patch >/dev/null; then patch -p1 --quiet ${2:-} < "$1"; else git apply ${2:-} "$1"; fi
}
ncu_summary() {
  grep -E "Duration|DRAM Throughput|Memory Throughput|L2 Hit|Compute \(SM\)|Issue Slots Busy|Registers Per|Achieved Occupancy|Grid Size|Warp Cycles Per Issued" "$1" | head -12
  # The stall reasons (warps per issued instruction), largest first.
  grep -E "issue_stalled_.*ratio" "$1" | awk '$NF > 0.05 {print $1, $NF}' | sort -k2 -gr | head -8
}

echo "== machine"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv || true
nproc; nvcc --version | tail -1

echo "== build"
t0=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DHUMMING_BUILD_TESTS=ON \
      -DPython3_EXECUTABLE="$(command -v python3)" >/dev/null || exit 1
# The whole build log goes to $OUT/build.txt; a failure prints its errors here.
# BUILD_TARGETS (space-separated) builds only those targets (default: everything).
if ! cmake --build build-gpu -j "$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS} >"$OUT/build.txt" 2>&1; then
  grep -E -B2 -A8 "error|FAILED" "$OUT/build.txt" | head -80
  exit 1
fi
tail -1 "$OUT/build.txt"
echo "build took $(( $(date +%s) - t0 )) s"
echo "== humming info"; ./build-gpu/humming info
# Every benchmark run is bounded, so a hang cannot eat the session's device time.
B="timeout 90 ./build-gpu/benchmarks/bench_gemm"

if want all tests quick gpu; then
  # The demo first: one kernel, a quick sign of a hang before the long suites start.
  echo "== demo"; timeout 120 ./build-gpu/humming demo
  if [ $? -eq 124 ]; then echo "demo timed out: stopping"; exit 1; fi
  # A converted layer as stored (humming convert of the GPTQ fuzz seed, n = 16, k = 64).
  ./build-gpu/humming convert --scheme gptq --in tests/fuzz/corpus/safetensors/gptq.safetensors \
    --out /tmp/demo_converted.safetensors >/dev/null &&
    timeout 120 ./build-gpu/humming demo --converted /tmp/demo_converted.safetensors --layer l |
    grep -E "layer:|check:"
  echo "== gpu tests"
  ctest --test-dir build-gpu -L gpu --output-on-failure -j 8 --timeout 240 > "$OUT/ctest.txt" 2>&1
  grep -E "tests passed|tests failed|\*\*\*Failed|Not Run|\*\*\*Skipped|Failure|Expected|Which is|rel err|tuning" "$OUT/ctest.txt" | head -60
  # The GPU host's image has no SWIG: with a SWIG carried in .swig/ (the PyPI wheel's data
  # directory: cp -r <venv>/site-packages/swig/data .swig/, then run with carry [".swig"]), the
  # Python module is built and its GPU tests (torch Linear and MoE) run too.
  if [ -x .swig/data/bin/swig ]; then
    echo "== python binding GPU tests (carried SWIG)"
    export SWIG_LIB=$PWD/$(ls -d .swig/data/share/swig/* | head -1)
    cmake -S . -B build-gpu -DSWIG_EXECUTABLE="$PWD/.swig/data/bin/swig" -DHUMMING_BUILD_PYTHON=ON >/dev/null
    cmake --build build-gpu -j "$(nproc)" 2>&1 | tail -1
    # The whole pytest output in $OUT/python_gpu.txt; failures (names and assertion lines) here.
    ctest --test-dir build-gpu -R bindings_python_gpu -V > "$OUT/python_gpu.txt" 2>&1
    grep -E "passed|failed|skipped|FAILED|^[0-9]+: E |Error" "$OUT/python_gpu.txt" | tail -30
  fi
  if want all tests; then
    echo "== api + jit tests (on the GPU host too)"
    ctest --test-dir build-gpu -L 'api|jit' -j 8 --output-on-failure > "$OUT/ctest_host.txt" 2>&1
    grep -E "tests passed|tests failed|\*\*\*Failed|Failure|spill|error" "$OUT/ctest_host.txt" | head -40
  fi
fi

if want all quick bench defaults; then
  echo "== bench: jit"
  ./build-gpu/benchmarks/bench_jit --repeat 5 --json "$OUT/jit.json"
  echo "== bench: cublas selftest"
  $B --selftest || true
  echo "== bench: dense gemm (defaults)"
  $B --label default --json "$OUT/gemm_int4_g128_f16.json"
  $B --format "w=uint4b8 a=f16 c=f16 s=f16:g128 n=28672 k=4096" --ms 1,16,128,2048,16384 --label default --json "$OUT/gemm_int4_g128_f16_n28672_k4096.json"
  $B --format "w=uint4b8 a=f16 c=f16 s=f16:g128 n=4096 k=14336" --ms 1,16,128,2048,16384 --label default --json "$OUT/gemm_int4_g128_f16_n4096_k14336.json"
fi

if want all bench sweep; then
  echo "== bench: tile sweep (${SWEEP_FORMAT:-int4 g128 f16 8192^2})"
  while read -r name ms; do
    [ -n "$name" ] || continue
    $B ${SWEEP_FORMAT:+--format "$SWEEP_FORMAT"} --ms "$ms" --tuning "benchmarks/tuning/$name.json" \
       --label "$name" --no-cublas --iters 100 \
       --json "$OUT/sweep_$name.json" | grep -E "^ +[0-9]+ " | sed "s/^/$name /"
  done < "${SWEEP_LIST:-benchmarks/tuning/sweep.txt}"
fi

if want all bench actquant; then
  echo "== bench: activation quantization (hm_quantize_activation_device)"
  timeout 120 ./build-gpu/benchmarks/bench_activation_quant | tee "$OUT/activation_quant.txt"
fi

if want all bench moe; then
  echo "== bench: MoE (indexed, Qwen3-30B-A3B / DeepSeek-V3 / gpt-oss shapes, 16- and 8-bit activations; Qwen3 also grouped contiguous / masked)"
  timeout 480 ./build-gpu/benchmarks/bench_moe ${MOE_ITERS:+--iters $MOE_ITERS} --json "$OUT/moe.json"
  echo "== bench: MoE routing (hm_moe_align, hm_moe_reduce)"
  timeout 120 ./build-gpu/benchmarks/bench_moe_routing --json "$OUT/moe_routing.json"
fi

if want all bench a8; then
  # 8-bit activations (issue 17): W4A8 (e2m1 x e4m3), W8A8 fp8, int4 x e4m3 with channel and
  # g128 scales, MXFP4 (e2m1 x ue8m0 g32 x tensor) x e4m3, and the INT8 cells (W4A8-INT8,
  # W8A8-INT8, int4 g128 x int8: NOTES "INT8 activations"); cuBLAS f16 in the same run through
  # bench_gemm, and the vendor's 8-bit GEMMs through torch after it (cublas_baseline.py:
  # cuBLASLt FP8 row-wise, torch._scaled_mm; cuBLASLt INT8, torch._int_mm); e2m1 on int8 with
  # channel and MXFP4 scales (rule R11: counts of half steps, the step-table path).
  # A8_FORMATS (';'-separated) replaces the 8192^2 list, A8_MS its M values; A8_EXTRAS=0 skips
  # the other shapes and the vendor baselines after it.
  echo "== bench: 8-bit activations"
  a8_default="w=e2m1 a=e4m3 c=bf16 s=bf16:channel;w=e4m3 a=e4m3 c=bf16 s=f32:channel;\
w=uint4b8 a=e4m3 c=bf16 s=bf16:channel;w=uint4b8 a=e4m3 c=bf16 s=bf16:g128;\
w=e2m1 a=e4m3 c=bf16 s=ue8m0:g32+tensor;w=uint4b8 a=int8 c=bf16 s=bf16:channel;\
w=uint8b128 a=int8 c=bf16 s=f32:channel;w=uint4b8 a=int8 c=bf16 s=bf16:g128;\
w=e2m1 a=int8 c=bf16 s=bf16:channel;w=e2m1 a=int8 c=bf16 s=ue8m0:g32+tensor"
  IFS=';' read -r -a a8_list <<< "${A8_FORMATS:-$a8_default}"
  for f in "${a8_list[@]}"; do
    name=$(file_tag "$f")
    $B --format "$f n=8192 k=8192" --ms "${A8_MS:-1,16,128,2048,16384}" --label default --json "$OUT/gemm_a8_$name.json"
  done
fi
if want all bench a8 && [ "${A8_EXTRAS:-1}" != 0 ]; then
  $B --format "w=e2m1 a=e4m3 c=bf16 s=bf16:channel n=28672 k=4096" --ms 1,128,2048 --no-cublas --label default --json "$OUT/gemm_a8_w4a8_n28672_k4096.json"
  # DeepSeek's FP8 recipe: 128 x 128 weight blocks with per-token (NOTES v21) and with 1 x 128
  # activation scales (a=e4m3:g128, NOTES v23 "Activation scales per token and K group").
  for f in "w=e4m3 a=e4m3 c=bf16 s=f32:b128x128" "w=e4m3 a=e4m3:g128 c=bf16 s=f32:b128x128"; do
    name=$(file_tag "$f")
    $B --format "$f n=7168 k=7168" --ms 1,16,128,2048,16384 --no-cublas --label default --json "$OUT/gemm_a8_$name.json"
  done
  for d in fp8 int8; do
    timeout 300 python3 benchmarks/cublas_baseline.py --dtype $d --ms 1,16,128,2048,16384 \
      --json "$OUT/vendor_${d}_8192.json" || echo "vendor $d baseline failed"
  done
fi

if want moetests; then
  # Only the MoE GEMM and routing GPU tests (a MoE kernel change checked in a short call).
  echo "== MoE GPU tests"
  timeout 200 ./build-gpu/tests/test_gpu --gtest_filter='*Moe*' > "$OUT/moetests.txt" 2>&1
  echo "exit $?"
  grep -E "PASSED|FAILED|Failure|Expected|actual" "$OUT/moetests.txt" | head -30
fi

if want pdlprobe; then
  # Whether programmatic dependent launch overlaps two kernels here, on a stream and in a graph
  # (benchmarks/probes/pdl_probe.cu; NOTES v30).
  echo "== probe: programmatic dependent launch"
  nvcc -arch=sm_90a -O2 -std=c++17 -o /tmp/pdl_probe benchmarks/probes/pdl_probe.cu &&
    timeout 60 /tmp/pdl_probe | tee "$OUT/pdl_probe.txt"
fi

if want actprofile; then
  # The activation quantizer at small M (issue 17's <= 3 us added): the e2e cells in graph
  # replay, then ncu of one per-token e4m3 launch at each M of ACTPROFILE_MS and of the empty
  # kernel (the floor).
  echo "== bench: quantize + GEMM at small M"
  timeout 120 ./build-gpu/benchmarks/bench_activation_quant --e2e-only --ms 1,16,128 | tee "$OUT/actquant_e2e.txt"
  HUMMING_DISABLE_PROGRAMMATIC_LAUNCH=1 timeout 120 ./build-gpu/benchmarks/bench_activation_quant --e2e-only \
    --ms 1,16,128 | sed 's/^/stream-order /' | tee "$OUT/actquant_e2e_stream_order.txt"
  timeout 120 ./build-gpu/benchmarks/bench_activation_quant --no-e2e --ms 1,16,128 | tee "$OUT/actquant_small.txt"
  if command -v ncu >/dev/null; then
    for m in ${ACTPROFILE_MS:-1 16 128}; do
      ncu_profile hm_quantize "$OUT/ncu_quant_m$m.txt" timeout 120 ./build-gpu/benchmarks/bench_activation_quant \
        --no-e2e --no-graph --ms $m --iters 3 --warmup 1
      echo "-- quantizer M = $m"
      ncu_summary "$OUT/ncu_quant_m$m.txt"
    done
    ncu_profile hm_bench_empty "$OUT/ncu_empty.txt" timeout 120 ./build-gpu/benchmarks/bench_activation_quant \
      --no-e2e --no-graph --ms 1 --iters 3 --warmup 1
    echo "-- empty kernel"
    ncu_summary "$OUT/ncu_empty.txt"
  fi
fi

if want actquant_pdl; then
  # Issue 17's quantize + GEMM bound: the quantizer and PDL GPU tests, the quantizer benchmark at
  # every M, the e2e cells with programmatic launches, in stream order, and with the quantizer
  # triggering its dependents first thing (a patched copy of kernels/: the variant v30 measured).
  # ACTQUANT_FILTER replaces the tests' gtest filter.
  echo "== quantizer and programmatic-launch GPU tests"
  timeout 200 ./build-gpu/tests/test_gpu --gtest_filter="${ACTQUANT_FILTER:-ActivationQuantGpu.*:LaunchOverlap.*:PlanGpu.*}" \
    > "$OUT/actquant_tests.txt" 2>&1
  echo "exit $?"; grep -E "PASSED|FAILED|Failure|Expected" "$OUT/actquant_tests.txt" | head -20
  echo "== bench: activation quantization"
  # ACTQUANT_MS (comma-separated) replaces the benchmark's M values.
  timeout 150 ./build-gpu/benchmarks/bench_activation_quant ${ACTQUANT_MS:+--ms $ACTQUANT_MS} \
    --json "$OUT/actquant.json" | tee "$OUT/actquant.txt"
  HUMMING_DISABLE_PROGRAMMATIC_LAUNCH=1 timeout 120 ./build-gpu/benchmarks/bench_activation_quant --e2e-only \
    ${ACTQUANT_MS:+--ms $ACTQUANT_MS} \
    | sed 's/^/stream-order /' | tee "$OUT/actquant_e2e_stream_order.txt"
  # ACTQUANT_TRIGGER=0 skips the early-trigger variant.
  if [ "${ACTQUANT_TRIGGER:-1}" != 0 ]; then
    rm -rf /tmp/ktrigger && cp -r kernels /tmp/ktrigger
    sed -i 's|^    ::hm::actquant::quantize<In, Out>(p);|    asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); ::hm::actquant::quantize<In, Out>(p);|' \
      /tmp/ktrigger/humming/quant/activation_kernel.cuh
    grep -c "launch_dependents" /tmp/ktrigger/humming/quant/activation_kernel.cuh
    HUMMING_KERNEL_DIR=/tmp/ktrigger HUMMING_CACHE_DIR=/tmp/cache_ktrigger timeout 120 \
      ./build-gpu/benchmarks/bench_activation_quant --e2e-only | sed 's/^/early-trigger /' | tee "$OUT/actquant_e2e_trigger.txt"
  fi
fi

if want moesweep; then
  # MoE tile sweep (issue 18): each benchmarks/tuning/moe_sweep/ tile forced on the Qwen3-30B-A3B
  # 16-bit shapes at MOE_SWEEP_MS (default 16,128), indexed only; the defaults are in the list
  # (bm8_w4_st8_b4 serves M <= 64, bm16_w4_st8_b3 M <= 256). One line per shape, M and tile.
  echo "== bench: MoE tile sweep"
  while read -r name; do
    [ -n "$name" ] || continue
    timeout 60 ./build-gpu/benchmarks/bench_moe --only qwen3_30b_ --ms "${MOE_SWEEP_MS:-16,128}" \
      --indexed-only 1 --iters "${MOE_ITERS:-50}" --tuning "benchmarks/tuning/moe_sweep/$name.json" \
      --json "$OUT/moesweep_$name.json" 2>&1 | grep -E "indexed|failed|rror" |
      awk -v n="$name" '{printf "%-28s %-20s %6s %10s %8s\n", n, $1, $3, $5, $7}'
  done < "benchmarks/tuning/moe_sweep/${MOE_SWEEP_LIST:-list.txt}"
fi

if want moeprofile; then
  # ncu of the MoE GEMM (issue 18): Qwen3-30B-A3B gate_up, int4 g128 f16, indexed, default
  # tiles, at MOE_PROFILE_MS (default "1 16 128"): speed of light, memory, stall reasons.
  echo "== profile (ncu): MoE gate_up"
  if command -v ncu >/dev/null; then
    for m in ${MOE_PROFILE_MS:-1 16 128}; do
      ncu_profile hm_moe_wgmma "$OUT/ncu_moe_m$m.txt" timeout 120 ./build-gpu/benchmarks/bench_moe \
        --only qwen3_30b_gate_up --ms $m --indexed-only 1 --iters 3
      echo "-- M = $m"
      ncu_summary "$OUT/ncu_moe_m$m.txt"
    done
  else
    echo "ncu not found"
  fi
fi

if want moemma; then
  # The mma.sync MoE family (moe_mma: the sm_75-sm_89 / Blackwell path), forced on the H200 with
  # its default ranges for E = 128 (benchmarks/tuning/moe_mma.json), on the Qwen3-30B-A3B shapes
  # (16-bit and int8 activations), beside the default (moe_wgmma) run of the moe mode.
  echo "== bench: MoE on mma.sync (forced)"
  timeout 300 ./build-gpu/benchmarks/bench_moe --only qwen3 --tuning benchmarks/tuning/moe_mma.json \
    ${MOE_ITERS:+--iters $MOE_ITERS} --json "$OUT/moe_mma.json"
fi

if want a8mma; then
  # The mma.sync kernel's 8-bit path (m16n8k32: the sm_80 int8 / sm_89 fp8 kernel), forced on the
  # H200 with the mma.sync default table, beside the same table's 16-bit kernel (NOTES v24).
  echo "== bench: 8-bit activations on mma.sync (forced)"
  for f in "w=uint4b8 a=f16 c=f16 s=f16:channel" "w=uint4b8 a=e4m3 c=f16 s=f16:channel" \
           "w=uint4b8 a=int8 c=f16 s=f16:channel" "w=e4m3 a=e4m3 c=bf16 s=f32:channel"; do
    name=$(file_tag "$f")
    $B --format "$f n=8192 k=8192" --ms 1,16,128,2048 --no-cublas --tuning benchmarks/tuning/mma_v4.json \
      --label mma --json "$OUT/gemm_mma_$name.json"
  done
fi

if want a8tests; then
  echo "== 8-bit activation GPU tests"
  # Through ctest, 8 processes at a time: in one process the exact A8 tests alone took 143 s and
  # the rest did not finish in 300 (v34). A8_REGEX (a ctest regex over the GPU tests' names)
  # replaces the selection.
  ctest --test-dir build-gpu -L gpu -R "${A8_REGEX:-A8|DenseGemmExact}" -j 8 --timeout 240 \
    --output-on-failure > "$OUT/a8tests.txt" 2>&1
  grep -E "tests passed|tests failed|\*\*\*Failed|\*\*\*Skipped|Failure|Expected" "$OUT/a8tests.txt" | head -40
fi

if want all bench formats; then
  echo "== bench: other formats"
  $B --format "w=uint8b128 a=f16 c=f16 s=f16:channel n=8192 k=8192" --ms 1,16,128,2048 --label default --json "$OUT/gemm_int8_channel_f16.json"
  $B --format "w=uint3b4 a=f16 c=f16 s=f16:g128 n=8192 k=8192" --ms 1,16,128,2048 --no-cublas --label default --json "$OUT/gemm_int3_g128_f16.json"
  $B --format "w=uint2b2 a=f16 c=f16 s=f16:g128 n=8192 k=8192" --ms 1,16,128,2048 --no-cublas --label default --json "$OUT/gemm_int2_g128_f16.json"
  $B --format "w=e2m1 a=f16 c=f16 s=f16:g32 n=8192 k=8192" --ms 1,16,128,2048 --no-cublas --label default --json "$OUT/gemm_e2m1_g32_f16.json"
  $B --format "w=uint4b8 a=bf16 c=bf16 s=bf16:g128 n=8192 k=8192" --ms 1,16,128,2048,16384 --label default --json "$OUT/gemm_int4_g128_bf16.json"
  $B --format "w=uint4 a=f16 c=f16 s=f16:g128 zp=uint4 n=8192 k=8192" --ms 1,16,128,2048,16384 --no-cublas --label default --json "$OUT/gemm_uint4_zp_g128_f16.json"
fi

if want sanitize; then
  echo "== compute-sanitizer"
  T=./build-gpu/tests/test_gpu
  # The kernels are compiled once, outside the sanitizer (the cache is warm for the runs below).
  # SANITIZE_WARMUP=0 skips this (when the GPU tests have just run and filled the cache).
  [ "${SANITIZE_WARMUP:-1}" = 0 ] ||
    timeout 120 $T --gtest_filter='DenseGemm*:PlanGpu.*:*MoeGemm*:ActivationQuantGpu.*:MoeRoutingGpu.*' >/dev/null 2>&1
  # memcheck over everything; racecheck / synccheck slow kernels down by orders of magnitude, so
  # they take the tests that run each default tile once (DenseGemm*) and the workspace test.
  # SANITIZE_TOOLS picks some of the three (default all, and the cluster racecheck below);
  # MEMCHECK_FILTER, RACECHECK_FILTER, SYNCCHECK_FILTER replace a tool's gtest filter, and
  # MEMCHECK_LIMIT, RACECHECK_LIMIT, SYNCCHECK_LIMIT its time limit in seconds.
  for spec in "memcheck:${MEMCHECK_FILTER:-*}:${MEMCHECK_LIMIT:-150}" \
              "racecheck:${RACECHECK_FILTER:-Formats/DenseGemm.MatchesTheHostReferenceForEveryTileAndRaggedShape/*:DenseGemmExact.*:PlanGpu.OneWorkspace*:Formats/MoeGemm.ForcedTiles*:MoeGemmHostile.*:ActivationQuantGpu.PerToken*:MoeRoutingGpu.Align*:MoeRoutingGpu.Reduce*}:${RACECHECK_LIMIT:-170}" \
              "synccheck:${SYNCCHECK_FILTER:-Formats/DenseGemm.MatchesTheHostReferenceForEveryTileAndRaggedShape/*:DenseGemmExact.*:PlanGpu.OneWorkspace*:Formats/MoeGemm.ForcedTiles*:MoeGemmHostile.*:ActivationQuantGpu.PerToken*:MoeRoutingGpu.Align*:MoeRoutingGpu.Reduce*}:${SYNCCHECK_LIMIT:-130}"; do
    tool=${spec%%:*}; rest=${spec#*:}; limit=${rest##*:}; filter=${rest%:*}
    case " ${SANITIZE_TOOLS:-memcheck racecheck synccheck} " in *" $tool "*) ;; *) continue ;; esac
    sanitize_tests "$tool" "$limit" "$OUT/sanitize_$tool.txt" $T "$filter"
  done
fi

if want racecheck_cluster || { want sanitize && [ -z "${SANITIZE_TOOLS:-}" ]; }; then
  # racecheck flags the cp.async refill of a stage against the dequantization's reads of it in
  # cluster split-K tiles only. The same tile (same mainloop code, same M, same K splits) run with
  # split "global" and "cluster": if only the cluster launch is flagged, the mainloop's ordering
  # (the stage's `empty` mbarrier) is what racecheck does not follow there (benchmarks/NOTES.md).
  echo "== racecheck: one tile, global vs cluster split-K"
  for v in global cluster; do
    timeout 120 "$CS" --tool racecheck --print-limit 4 ./build-gpu/benchmarks/bench_gemm \
      --format "w=uint4b8 a=f16 c=f16 s=f16:g64 bias=1 n=208 k=1344" --ms 40 --iters 1 --warmup 0 \
      --no-graph --no-flush --no-cublas --tuning "benchmarks/tuning/racecheck/bm40_$v.json" \
      > "$OUT/sanitize_race_$v.txt" 2>&1
    echo "-- split $v: exit $?"
    grep -E "split|grid|RACECHECK SUMMARY|ERROR SUMMARY|Race reported" "$OUT/sanitize_race_$v.txt" | head -6
  done
fi

if want convert; then
  # Model-folder conversion throughput on this host's cores (issue 19): 1 thread and every core.
  echo "== bench: convert model folder"
  timeout 240 ./build-gpu/benchmarks/bench_convert_model --layers 32 --shards 4 --repeat 2 \
    --dir /tmp/convert-bench --json "$OUT/convert_model.json"
fi

if want racecheck_lanes; then
  # The experiment behind NOTES v18's racecheck reports: the same tile with every lane, not only
  # lane 0 after __syncwarp, arriving on a stage's `empty` mbarrier (headers patched in a copy,
  # read through HUMMING_KERNEL_DIR). If racecheck is then quiet, its reports stem from not
  # following __syncwarp's ordering between a warp's lanes, which the PTX memory model gives.
  echo "== racecheck: empty-barrier arrivals by lane 0 vs by every lane (global split)"
  rm -rf /tmp/kexp && cp -r kernels /tmp/kexp
  sed -i 's/ptx::mbarrier_init(empty0 + 8 \* s, kWarps);/ptx::mbarrier_init(empty0 + 8 * s, kWarps * 32);/; s/if (lane == 0) ptx::mbarrier_arrive(empty0 + 8 \* s);/ptx::mbarrier_arrive(empty0 + 8 * s);/' \
    /tmp/kexp/humming/gemm/dense_wgmma.cuh
  grep -c "kWarps \* 32" /tmp/kexp/humming/gemm/dense_wgmma.cuh
  for v in lane0 lanes; do
    kdir=""; [ $v = lanes ] && kdir=/tmp/kexp
    HUMMING_KERNEL_DIR=$kdir HUMMING_CACHE_DIR=/tmp/cache_$v timeout 150 "$CS" --tool racecheck \
      --racecheck-report all --print-limit 6 ./build-gpu/benchmarks/bench_gemm \
      --format "w=uint4b8 a=f16 c=f16 s=f16:g64 bias=1 n=208 k=1344" --ms 40 --iters 1 --warmup 0 \
      --no-graph --no-flush --no-cublas --tuning benchmarks/tuning/racecheck/bm40_global.json \
      > "$OUT/sanitize_lanes_$v.txt" 2>&1
    echo "-- arrivals by $v: exit $?"
    grep -E "RACECHECK SUMMARY|ERROR SUMMARY|Race reported|hazard" "$OUT/sanitize_lanes_$v.txt" | head -8
  done
fi

if want arrive_lanes_bench; then
  # The cost of every lane arriving on the `empty` barriers (the racecheck_lanes variant), 8192²
  # at the M whose default tiles use the mbarrier pipeline, against the embedded kernels.
  echo "== bench: empty-barrier arrivals by lane 0 (embedded) vs every lane (patched)"
  rm -rf /tmp/kexp && cp -r kernels /tmp/kexp
  sed -i 's/ptx::mbarrier_init(empty0 + 8 \* s, kWarps);/ptx::mbarrier_init(empty0 + 8 * s, kWarps * 32);/; s/if (lane == 0) ptx::mbarrier_arrive(empty0 + 8 \* s);/ptx::mbarrier_arrive(empty0 + 8 * s);/' \
    /tmp/kexp/humming/gemm/dense_wgmma.cuh
  for v in lane0 lanes; do
    kdir=""; [ $v = lanes ] && kdir=/tmp/kexp
    HUMMING_KERNEL_DIR=$kdir HUMMING_CACHE_DIR=/tmp/cache_$v timeout 100 ./build-gpu/benchmarks/bench_gemm \
      --ms 1,16,64,128,512,2048,16384 --no-cublas --label "arrive_$v" --json "$OUT/arrive_$v.json" |
      grep -E "^ +[0-9]+ " | sed "s/^/$v /"
  done
fi

if want kernel_variants; then
  # Kernel-side variants of quantize + GEMM (issue 17's bound): each entry of KERNEL_VARIANTS is
  # one or more patches of benchmarks/probes/ joined by '+', applied to a copy of kernels/ that
  # HUMMING_KERNEL_DIR points the library at (no rebuild); bench_activation_quant's e2e cells at
  # ACTQUANT_MS (default 1,16,32,64,128), lines prefixed with the entry; with
  # KERNEL_VARIANT_BENCH=gemm, bench_gemm's cells instead (below). The entry "none" is the tree's
  # own kernels through the same path.
  R=$PWD
  [ -n "${KERNEL_VARIANTS:-}" ] || echo "kernel_variants: set KERNEL_VARIANTS (patch names of benchmarks/probes/)"
  for spec in ${KERNEL_VARIANTS:-}; do
    echo "== bench: ${KERNEL_VARIANT_BENCH:-e2e}, kernel variant $spec"
    rm -rf /tmp/kv && mkdir -p /tmp/kv && cp -r kernels /tmp/kv/
    ok=1
    for patchname in ${spec//+/ }; do
      [ "$patchname" = none ] && continue  # the tree's own kernels, read from the copy
      (cd /tmp/kv && apply_patch "$R/benchmarks/probes/$patchname.patch") || { echo "patch $patchname failed"; ok=0; }
    done
    [ $ok = 1 ] || continue
    tag=${spec//+/_}  # the entry as a file name
    (  # the variant's kernels and its own cache, for this entry only
      export HUMMING_KERNEL_DIR=/tmp/kv/kernels HUMMING_CACHE_DIR="/tmp/cache_kv_$tag"
      # KERNEL_VARIANT_TESTS: a gtest filter of test_gpu run on the variant first.
      if [ -n "${KERNEL_VARIANT_TESTS:-}" ]; then
        timeout 200 ./build-gpu/tests/test_gpu --gtest_filter="$KERNEL_VARIANT_TESTS" > "$OUT/tests_$tag.txt" 2>&1
        echo "tests: exit $?"; grep -E "PASSED|FAILED|Failure" "$OUT/tests_$tag.txt" | head -8
      fi
      if [ "${KERNEL_VARIANT_BENCH:-e2e}" = gemm ]; then
        # KERNEL_VARIANT_FORMATS: bench_gemm formats separated by ';' (default the int4 g128 f16
        # 8192^2 layer), at KERNEL_VARIANT_MS (default 1,8,16,64,128).
        IFS=';' read -ra formats <<< "${KERNEL_VARIANT_FORMATS:-w=uint4b8 a=f16 c=f16 s=f16:g128 n=8192 k=8192}"
        for f in "${formats[@]}"; do
          name=$(file_tag "$f")
          $B --format "$f" --ms "${KERNEL_VARIANT_MS:-1,8,16,64,128}" --no-cublas --label "$tag" \
            --json "$OUT/gemm_${tag}_$name.json" | grep -E "^ +[0-9]+ " | sed "s/^/$tag $name /"
        done
      else
        timeout 150 ./build-gpu/benchmarks/bench_activation_quant --e2e-only --ms "${ACTQUANT_MS:-1,16,32,64,128}" \
          | sed "s/^/$spec /" | tee "$OUT/e2e_$tag.txt"
      fi
    )
  done
fi

if want actquant_variants; then
  # Host-side variants of the quantizer's launch plan: each patch of ACTQUANT_VARIANTS (file names
  # in benchmarks/probes/, default the cluster regime's block widths and its former rule) applied
  # in turn to this tree, bench_activation_quant rebuilt (one object and the link) and run at
  # ACTQUANT_MS (default 16,32,64,128), then reverted; the tree's own build last, so modes after
  # this one see it. Lines prefixed with the patch's name.
  for v in ${ACTQUANT_VARIANTS:-actquant_block_threads_1024 actquant_block_threads_128 actquant_cluster_only_by_length}; do
    echo "== bench: activation quantization, variant $v"
    apply_patch "benchmarks/probes/$v.patch" || { echo "patch $v failed"; continue; }
    if cmake --build build-gpu -j "$(nproc)" --target bench_activation_quant > "$OUT/build_$v.txt" 2>&1; then
      timeout 120 ./build-gpu/benchmarks/bench_activation_quant --ms "${ACTQUANT_MS:-16,32,64,128}" \
        --json "$OUT/actquant_$v.json" | sed "s/^/$v /" | tee "$OUT/actquant_$v.txt"
    else
      grep -E -A5 "error" "$OUT/build_$v.txt" | head -20
    fi
    apply_patch "benchmarks/probes/$v.patch" -R
  done
  cmake --build build-gpu -j "$(nproc)" --target bench_activation_quant > /dev/null 2>&1
fi

if want all profile; then
  echo "== profile (ncu)"
  if command -v ncu >/dev/null; then
    for m in ${PROFILE_MS:-1 128 2048}; do
      ncu_profile hm_dense "$OUT/ncu_m$m.txt" $B --ms $m --iters 3 --warmup 1 --no-graph \
        --no-flush --no-cublas ${PROFILE_TUNING:+--tuning "$PROFILE_TUNING"}
      echo "-- M = $m"
      ncu_summary "$OUT/ncu_m$m.txt"
    done
  else
    echo "ncu not found"
  fi
fi

ls "$OUT"/*.json >/dev/null 2>&1 && { python3 benchmarks/report.py "$OUT"/*.json --out "$OUT/report" || true; }
# The device tool returns at most 8 files: everything goes into one archive, and only the
# archive, the log and the test log stay beside it.
tar -czf "/tmp/results.tar.gz" -C "$OUT" . 2>/dev/null && mv /tmp/results.tar.gz "$OUT/results.tar.gz" &&
  find "$OUT" -mindepth 1 -maxdepth 1 ! -name results.tar.gz ! -name log.txt ! -name ctest.txt \
    ! -name 'sanitize_*.txt' ! -name ctest_host.txt ! -name python_gpu.txt \
    -exec rm -rf {} +
echo "== done"
