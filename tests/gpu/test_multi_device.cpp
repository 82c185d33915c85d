// Several contexts and devices in one process (issue #7): contexts created, used and destroyed
// from different threads, the kernel cache shared between contexts (and between devices of one
// arch), tensor-parallel shards (column and row splits, ragged groups, GPTQ act-order) against
// the unsharded layer, and two GPUs driven by two threads each. Every output is checked against
// the f64 host reference. Skipped (exit 77) without a GPU; the TwoGpus tests skip with one.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/support/cuda_driver.hpp"
#include "gpu/support/dense_layer.hpp"
#include "humming.h"
#include "start_line.hpp"

namespace {

using namespace hm::gpu_test;
using gpu_driver::CUcontext;
using gpu_driver::CUstream;
using gpu_timing::StartLine;
namespace fs = std::filesystem;

constexpr const char* kInt4 = "w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=1024";
constexpr const char* kInt8 = "w=uint8b128 a=bf16 c=bf16 s=bf16:channel n=192 k=512";
constexpr const char* kInt4Bf16 = "w=uint4b8 a=bf16 c=bf16 s=bf16:g64 n=320 k=768";

// ---------------------------------------------------------------------------------------------
// Streams on a given device, beyond the C API, through the shared driver loader
// (gpu/support/cuda_driver.hpp). A test that uses them asserts cuda_driver_loaded() first.

const gpu_driver::Driver& driver() { return *cuda_driver(); }

// A non-blocking stream in `device`'s primary context (the one hm contexts use). The context is
// pushed around the creation only, so the calling thread's current context is unchanged, and it
// stays retained until destroy_stream.
CUstream create_stream(int device) {
  CUcontext ctx = nullptr, popped = nullptr;
  CUstream stream = nullptr;
  EXPECT_CU(driver(), cuDevicePrimaryCtxRetain(&ctx, device)) << "device " << device;
  EXPECT_CU(driver(), cuCtxPushCurrent(ctx));
  EXPECT_CU(driver(), cuStreamCreate(&stream, gpu_driver::CU_STREAM_NON_BLOCKING));
  EXPECT_CU(driver(), cuCtxPopCurrent(&popped));
  return stream;
}

void destroy_stream(int device, CUstream stream) {
  EXPECT_CU(driver(), cuStreamDestroy(stream));
  EXPECT_CU(driver(), cuDevicePrimaryCtxRelease(device)) << "device " << device;
}

int device_count() {
  hm_runtime_info_t info;
  hm_runtime_info_init(&info);
  return hm_runtime_info(&info) == HM_SUCCESS ? info.device_count : 0;
}

std::string arch_of(hm_context_t* ctx) {
  hm_device_info_t info;
  hm_device_info_init(&info);
  EXPECT_EQ(hm_context_device_info(ctx, &info), HM_SUCCESS) << last_error();
  return info.arch;
}

// A fresh kernel cache directory, removed with the object; entries() counts published kernels
// (v1/<arch>/<xx>/<key>/meta.json, docs/jit.md).
class TempCache {
 public:
  TempCache() {
    std::string pattern = (fs::temp_directory_path() / "hm-multi-device-XXXXXX").string();
    if (mkdtemp(pattern.data())) path_ = pattern;
    EXPECT_FALSE(path_.empty()) << "mkdtemp failed";
  }
  ~TempCache() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const char* path() const { return path_.c_str(); }
  int entries() const {
    int count = 0;
    std::error_code ec;
    const fs::path root = fs::path(path_) / "v1";
    if (!fs::exists(root, ec)) return 0;
    for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::end(it); it.increment(ec))
      if (it->path().filename() == "meta.json") ++count;
    return count;
  }

 private:
  std::string path_;
};

// ---------------------------------------------------------------------------------------------
// One plan's work on one stream: activation sets with their references, one output per
// iteration (none is overwritten before it is checked), a workspace of its own.

constexpr int64_t kMaxM = 33;
constexpr int kSets = 3;
const int64_t kMs[] = {1, 7, kMaxM, 2, 16};  // split-K and not, on one workspace

// Activation sets and their references for a layer, computed once and shared (read-only) by
// every thread that runs the layer.
struct Inputs {
  std::vector<Activations> acts;
  std::vector<std::vector<double>> refs;
};

Inputs make_inputs(const Layer& L, std::mt19937& rng) {
  Inputs in;
  for (int s = 0; s < kSets; ++s) {
    in.acts.push_back(random_activations(L, kMaxM, rng));
    in.refs.push_back(reference(L, in.acts.back().values, kMaxM));
  }
  return in;
}

struct Job {
  const Layer* layer = nullptr;
  const Inputs* inputs = nullptr;
  double bound = 0;
  int device = 0;
  hm_plan_t* plan = nullptr;
  hm_status_t prepared = -1;
  std::string prepare_error;
  double prepare_ms = 0;
  DeviceWeights weights;
  CUstream stream = nullptr;
  uint64_t ws = 0, ws_bytes = 0;
  std::vector<uint64_t> a;  // device activation sets
  std::vector<uint64_t> c;  // per iteration
  std::vector<int64_t> m;   // per iteration
  hm_launch_params_t* params = nullptr;
};

// Creates and prepares the plan in `ctx`, uploads everything through `buf` (the calling
// thread's buffers) and creates the stream. Records the prepare status instead of asserting, so
// the caller can report which context missed the cache.
void setup_job(Job& job, hm_context_t* ctx, Buffers& buf, int iterations) {
  const Layer& L = *job.layer;
  EXPECT_EQ(hm_plan_create(ctx, L.format, nullptr, &job.plan), HM_SUCCESS) << last_error();
  const auto t0 = std::chrono::steady_clock::now();
  job.prepared = job.plan ? hm_plan_prepare(job.plan) : HM_ERROR_INVALID_STATE;
  job.prepare_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (job.prepared != HM_SUCCESS) {
    job.prepare_error = last_error();
    return;
  }
  job.weights = upload_weights(buf, L);
  EXPECT_EQ(hm_plan_workspace_size(job.plan, kMaxM, &job.ws_bytes), HM_SUCCESS) << last_error();
  job.ws = buf.zeroed(job.ws_bytes);
  for (const Activations& acts : job.inputs->acts)
    job.a.push_back(buf.upload(acts.codes.data(), acts.codes.size() * 2));
  for (int it = 0; it < iterations; ++it) {
    job.m.push_back(kMs[it % 5]);
    job.c.push_back(buf.poisoned(static_cast<size_t>(job.m.back() * L.n * 2)));
  }
  job.stream = create_stream(job.device);
  EXPECT_EQ(hm_launch_params_create(&job.params), HM_SUCCESS);
  set_weights(job.params, job.weights);
  hm_launch_params_set_pointer(job.params, HM_ARG_WORKSPACE, job.ws);
  hm_launch_params_set_int(job.params, HM_ARG_WORKSPACE_BYTES, static_cast<int64_t>(job.ws_bytes));
}

bool ready(const Job& job) { return job.prepared == HM_SUCCESS && job.params && job.stream; }

hm_status_t launch(Job& job, int it) {
  hm_launch_params_set_pointer(job.params, HM_ARG_A, job.a[it % kSets]);
  hm_launch_params_set_pointer(job.params, HM_ARG_C, job.c[it]);
  hm_launch_params_set_int(job.params, HM_ARG_M, job.m[it]);
  return hm_plan_gemm(job.plan, job.params, job.stream);
}

// Waits for the stream, checks every iteration's output, and releases the stream and params
// (the plan stays: its owner destroys it, possibly from another thread).
void check_job(Job& job, Buffers& buf, const std::string& name) {
  if (!ready(job)) return;
  EXPECT_CU(driver(), cuStreamSynchronize(job.stream)) << name;
  const Layer& L = *job.layer;
  for (size_t it = 0; it < job.c.size(); ++it) {
    const std::vector<double>& ref = job.inputs->refs[it % kSets];
    const std::vector<double> rows(ref.begin(), ref.begin() + job.m[it] * L.n);
    const double err = relative_error(L, download(buf, L, job.c[it], job.m[it]), rows);
    EXPECT_LE(err, job.bound) << name << " iteration " << it << " m=" << job.m[it];
  }
  destroy_stream(job.device, job.stream);
  job.stream = nullptr;
  hm_launch_params_destroy(job.params);
  job.params = nullptr;
}

// One host thread's share: its jobs (one per layer, each on its own stream), launched in turn
// for `iterations` once every thread is ready.
void run_jobs(std::vector<Job>& jobs, hm_context_t* ctx, Buffers& buf, int iterations,
              StartLine& start, const std::string& name) {
  for (Job& job : jobs) setup_job(job, ctx, buf, iterations);
  start.arrive_and_wait();  // always reached, so a failed setup cannot hang the others
  bool all_ready = true;
  for (Job& job : jobs) all_ready &= ready(job);
  if (all_ready)
    for (int it = 0; it < iterations; ++it)
      for (size_t j = 0; j < jobs.size(); ++j) {
        const hm_status_t s = launch(jobs[j], it);
        if (s != HM_SUCCESS) {
          ADD_FAILURE() << name << " job " << j << " iteration " << it << ": " << last_error();
          return;
        }
      }
  for (size_t j = 0; j < jobs.size(); ++j)
    check_job(jobs[j], buf, name + " job " + std::to_string(j));
}

// Compiles both layers' kernels into `cache` from a context of its own (the first context), and
// returns how many entries that published.
int warm_cache(const TempCache& cache, int device, const std::vector<const Layer*>& layers) {
  Gpu warm(device, cache.path());
  for (const Layer* L : layers) {
    hm_plan_t* plan = nullptr;
    EXPECT_EQ(hm_plan_create(warm.ctx, L->format, nullptr, &plan), HM_SUCCESS) << last_error();
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(hm_plan_prepare(plan), HM_SUCCESS) << last_error();
    std::fprintf(stderr, "note: first context (device %d) prepared a plan in %.1f ms (compiling)\n",
                 device,
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                     .count());
    hm_plan_destroy(plan);
  }
  return cache.entries();
}

// ---------------------------------------------------------------------------------------------
// a. One GPU, four threads, four contexts.

// Each thread creates its own context on device 0 (load-only, on a cache another context filled:
// a prepare that missed would fail with HM_ERROR_JIT_DISABLED), its own plans for two formats on
// two streams, and runs them concurrently with the others; then every context and plan is
// destroyed by a thread other than the one that created it (half of them context first, which
// the plans' shared ownership of the context state allows).
TEST(MultiDevice, FourThreadsOwnContextsOnOneGpu) {
  ASSERT_TRUE(cuda_driver_loaded());
  std::mt19937 rng(7001);
  const Layer L1 = make_layer(kInt4, rng);
  const Layer L2 = make_layer(kInt8, rng);
  const Inputs in1 = make_inputs(L1, rng), in2 = make_inputs(L2, rng);
  TempCache cache;
  const int entries = warm_cache(cache, 0, {&L1, &L2});
  ASSERT_GT(entries, 0) << "the first context published nothing into " << cache.path();

  constexpr int kThreads = 4, kIterations = 30;
  std::vector<std::unique_ptr<Gpu>> gpus(kThreads);
  std::vector<std::vector<Job>> jobs(kThreads);
  StartLine start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      gpus[t] = std::make_unique<Gpu>(0, cache.path(), HM_CONTEXT_DISABLE_JIT);
      jobs[t].resize(2);
      jobs[t][0].layer = &L1, jobs[t][0].inputs = &in1, jobs[t][0].bound = kF16Bound;
      jobs[t][1].layer = &L2, jobs[t][1].inputs = &in2, jobs[t][1].bound = kBf16Bound;
      run_jobs(jobs[t], gpus[t]->ctx, *gpus[t], kIterations, start, "thread " + std::to_string(t));
      gpus[t]->free_all();  // this thread's buffers, while the context is alive
    });
  for (auto& th : threads) th.join();

  for (int t = 0; t < kThreads; ++t)
    for (const Job& job : jobs[t]) {
      EXPECT_EQ(job.prepared, HM_SUCCESS)
          << "thread " << t << ": a load-only context missed the cache another context filled: "
          << job.prepare_error;
      std::fprintf(stderr, "note: thread %d prepared a plan in %.1f ms (from the cache)\n", t,
                   job.prepare_ms);
    }
  EXPECT_EQ(cache.entries(), entries) << "the other contexts added entries instead of reusing them";

  threads.clear();
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      const int owner = (t + 1) % kThreads;
      if (owner % 2) gpus[owner].reset();
      for (Job& job : jobs[owner]) hm_plan_destroy(job.plan);
      gpus[owner].reset();
    });
  for (auto& th : threads) th.join();
}

// ---------------------------------------------------------------------------------------------
// b. Tensor-parallel shards on one GPU.

// A prepared plan for a layer in one context, with its weights uploaded, run on demand.
struct Runner {
  Gpu& gpu;
  const Layer& L;
  hm_plan_t* plan = nullptr;
  DeviceWeights w;
  Runner(Gpu& g, const Layer& layer) : gpu(g), L(layer) {
    EXPECT_EQ(hm_plan_create(gpu.ctx, L.format, nullptr, &plan), HM_SUCCESS) << last_error();
    if (plan) {
      EXPECT_EQ(hm_plan_prepare(plan), HM_SUCCESS) << last_error();
    }
    w = upload_weights(gpu, L);
  }
  ~Runner() { hm_plan_destroy(plan); }
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;
  // Launches C = A W^T for m rows of `codes` (f16/bf16 codes, L.k per row) on `stream`;
  // returns the output buffer (read after the stream is synchronized).
  uint64_t launch(const std::vector<uint16_t>& codes, int64_t m, CUstream stream) {
    uint64_t ws_bytes = 0;
    EXPECT_EQ(hm_plan_workspace_size(plan, m, &ws_bytes), HM_SUCCESS) << last_error();
    const uint64_t ws = gpu.zeroed(ws_bytes);
    const uint64_t a = gpu.upload(codes.data(), codes.size() * 2);
    const uint64_t c = gpu.poisoned(static_cast<size_t>(m * L.n * 2));
    hm_launch_params_t* p = params_for(w, a, c, m, ws, ws_bytes);
    EXPECT_EQ(hm_plan_gemm(plan, p, stream), HM_SUCCESS) << last_error();
    hm_launch_params_destroy(p);
    return c;
  }
  // One call on the default stream, alone.
  std::vector<uint16_t> run_alone(const std::vector<uint16_t>& codes, int64_t m) {
    const uint64_t c = launch(codes, m, nullptr);
    EXPECT_EQ(hm_stream_synchronize(gpu.ctx, nullptr), HM_SUCCESS) << last_error();
    return download(gpu, L, c, m);
  }
};

std::string with_shape(const std::string& base, int64_t n, int64_t k) {
  return base + " n=" + std::to_string(n) + " k=" + std::to_string(k);
}

std::vector<float> random_weight(int64_t n, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> w(static_cast<size_t>(n * k));
  for (auto& x : w) x = normal(rng);
  return w;
}

// Rows [r0, r1) and columns [c0, c1) of a row-major [.][k] matrix.
template <typename T>
std::vector<T> slice(const std::vector<T>& m, int64_t k, int64_t r0, int64_t r1, int64_t c0,
                     int64_t c1) {
  std::vector<T> out;
  out.reserve(static_cast<size_t>((r1 - r0) * (c1 - c0)));
  for (int64_t r = r0; r < r1; ++r)
    out.insert(out.end(), m.begin() + r * k + c0, m.begin() + r * k + c1);
  return out;
}

// f64 reference of A[m][k] times an f32 weight [n][k] (the float weights, unquantized).
std::vector<double> float_reference(const std::vector<double>& a, const std::vector<float>& w,
                                    int64_t m, int64_t n, int64_t k) {
  Layer plain;  // reference() reads only n, k, has_bias and deq
  plain.n = n, plain.k = k, plain.deq = w;
  return reference(plain, a, m);
}

// Relative Frobenius error of decoded outputs against the reference; 1e9 if any is not finite.
double decoded_error(const std::vector<double>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return 1e9;
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

std::vector<double> decode_all(hm_dtype_t dtype, const std::vector<uint16_t>& codes) {
  std::vector<double> v(codes.size());
  for (size_t i = 0; i < codes.size(); ++i) hm_dtype_decode(dtype, codes[i], &v[i]);
  return v;
}

// The bound for a sharded result against the float weights: the unsharded quantized layer's own
// error against them (the format's quantization error for these weights) with 5% slack, plus
// the extra output rounding of the partial sums.
constexpr double kShardSlack = 1.05, kShardEpsilon = 1e-3;

struct ShardCase {
  const char* name;
  const char* base;  // the format without its shape
  int64_t n, k;
  bool aligned;      // K / 2 is a multiple of the group size (shard groups = unsharded groups)
};

void PrintTo(const ShardCase& c, std::ostream* os) {
  *os << c.base << " n=" << c.n << " k=" << c.k;
}

// Splits W[N][K] by columns of the output (N / 2 rows of W per shard) and by K (K / 2 columns of W
// per shard, partial sums added on the host). Each shard is quantized on its own from its float
// slice, as a checkpoint converter does for each rank. The two shards of a split run at the same
// time on two streams; each shard's output must equal, bit for bit, its plan run alone, and the
// concatenated / summed result must be as close to the float layer as the unsharded quantized
// layer is.
class TensorParallel : public testing::TestWithParam<ShardCase> {};

TEST_P(TensorParallel, ShardsMatchTheUnshardedLayer) {
  ASSERT_TRUE(cuda_driver_loaded());
  const ShardCase c = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(c.n * 31 + c.k));
  const std::vector<float> w = random_weight(c.n, c.k, rng);
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  const Layer full = quantize_layer(with_shape(c.base, c.n, c.k), w);
  Runner run_full(gpu, full);
  ASSERT_NE(run_full.plan, nullptr);
  const int64_t n2 = c.n / 2, k2 = c.k / 2;
  const std::string col_format = with_shape(c.base, n2, c.k);
  const std::string row_format = with_shape(c.base, c.n, k2);
  const Layer col[2] = {quantize_layer(col_format, slice(w, c.k, 0, n2, 0, c.k)),
                        quantize_layer(col_format, slice(w, c.k, n2, c.n, 0, c.k))};
  const Layer row[2] = {quantize_layer(row_format, slice(w, c.k, 0, c.n, 0, k2)),
                        quantize_layer(row_format, slice(w, c.k, 0, c.n, k2, c.k))};
  // Group scales see the same elements when the split keeps groups whole: the shards'
  // dequantized weights are then exactly the unsharded layer's.
  EXPECT_EQ(slice(full.deq, c.k, 0, n2, 0, c.k), col[0].deq) << "column shard 0";
  EXPECT_EQ(slice(full.deq, c.k, n2, c.n, 0, c.k), col[1].deq) << "column shard 1";
  if (c.aligned) {
    EXPECT_EQ(slice(full.deq, c.k, 0, c.n, 0, k2), row[0].deq) << "row shard 0";
    EXPECT_EQ(slice(full.deq, c.k, 0, c.n, k2, c.k), row[1].deq) << "row shard 1";
  }
  Runner run_col[2] = {{gpu, col[0]}, {gpu, col[1]}};
  Runner run_row[2] = {{gpu, row[0]}, {gpu, row[1]}};
  CUstream streams[2] = {create_stream(0), create_stream(0)};

  for (int64_t m : {1, 37}) {
    SCOPED_TRACE("m=" + std::to_string(m));
    const Activations acts = random_activations(full, m, rng);
    const std::vector<double> ref = float_reference(acts.values, w, m, c.n, c.k);
    const std::vector<uint16_t> got_full = run_full.run_alone(acts.codes, m);
    const double full_err = relative_error(full, got_full, ref);
    // The unsharded layer itself: its GEMM against its own dequantized weight.
    EXPECT_LE(relative_error(full, got_full, reference(full, acts.values, m)), kF16Bound);
    const double bound = kShardSlack * full_err + kShardEpsilon;

    // Column split: both ranks take all of A; outputs are concatenated along N.
    uint64_t out[2];
    for (int r = 0; r < 2; ++r) out[r] = run_col[r].launch(acts.codes, m, streams[r]);
    std::vector<double> concat(static_cast<size_t>(m * c.n));
    for (int r = 0; r < 2; ++r) {
      ASSERT_CU(driver(), cuStreamSynchronize(streams[r]));
      const std::vector<uint16_t> got = download(gpu, col[r], out[r], m);
      EXPECT_EQ(got, run_col[r].run_alone(acts.codes, m)) << "column shard " << r << " vs alone";
      EXPECT_LE(relative_error(col[r], got, reference(col[r], acts.values, m)), kF16Bound)
          << "column shard " << r << " vs its own weights";
      const std::vector<double> v = decode_all(full.out, got);
      for (int64_t i = 0; i < m; ++i)
        std::copy(v.begin() + i * n2, v.begin() + (i + 1) * n2, concat.begin() + i * c.n + r * n2);
    }
    const double col_err = decoded_error(concat, ref);
    EXPECT_LE(col_err, bound) << "column split; unsharded error " << full_err;

    // Row split: rank r takes columns [r K/2, (r+1) K/2) of A; partial sums are added.
    std::vector<uint16_t> a_part[2];
    for (int r = 0; r < 2; ++r) {
      a_part[r] = slice(acts.codes, c.k, 0, m, r * k2, (r + 1) * k2);
      out[r] = run_row[r].launch(a_part[r], m, streams[r]);
    }
    std::vector<double> sum(static_cast<size_t>(m * c.n), 0.0);
    for (int r = 0; r < 2; ++r) {
      ASSERT_CU(driver(), cuStreamSynchronize(streams[r]));
      const std::vector<uint16_t> got = download(gpu, row[r], out[r], m);
      EXPECT_EQ(got, run_row[r].run_alone(a_part[r], m)) << "row shard " << r << " vs alone";
      std::vector<double> a_vals = slice(acts.values, c.k, 0, m, r * k2, (r + 1) * k2);
      EXPECT_LE(relative_error(row[r], got, reference(row[r], a_vals, m)), kF16Bound)
          << "row shard " << r << " vs its own weights";
      const std::vector<double> v = decode_all(full.out, got);
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += v[i];
    }
    const double row_err = decoded_error(sum, ref);
    EXPECT_LE(row_err, bound) << "row split; unsharded error " << full_err;
    std::fprintf(stderr, "note: %s n=%lld k=%lld m=%lld: error vs float weights: unsharded %.4f, "
                 "column split %.4f, row split %.4f\n", c.base, static_cast<long long>(c.n),
                 static_cast<long long>(c.k), static_cast<long long>(m), full_err, col_err,
                 row_err);
    gpu.free_all();
    run_full.w = upload_weights(gpu, full);
    for (int r = 0; r < 2; ++r) {
      run_col[r].w = upload_weights(gpu, col[r]);
      run_row[r].w = upload_weights(gpu, row[r]);
    }
  }
  for (CUstream s : streams) destroy_stream(0, s);
}

// 1344 / 2 = 672 = 5.25 groups of 128 (10.5 groups of 64): each row shard ends in a partial
// group, and the second shard's groups start off the unsharded layer's. Channel scales differ
// per row shard too (each takes the maximum over its own half of K).
INSTANTIATE_TEST_SUITE_P(
    Shards, TensorParallel,
    testing::Values(
        ShardCase{"Int4G128", "w=uint4b8 a=f16 c=f16 s=f16:g128", 512, 2048, true},
        ShardCase{"Int4G128HalfKPartialGroup", "w=uint4b8 a=f16 c=f16 s=f16:g128", 384, 1344,
                  false},
        ShardCase{"Uint4ZeroPointsG64HalfKPartialGroup", "w=uint4 a=f16 c=f16 s=f16:g64 zp=uint4",
                  256, 1344, false},
        ShardCase{"Int8Channel", "w=uint8b128 a=f16 c=f16 s=f16:channel", 256, 1024, false}),
    [](const testing::TestParamInfo<ShardCase>& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------------------------------------
// Act-order (GPTQ desc_act) shards, through the checkpoint converter.

// A symmetric 4-bit GPTQ layer quantized from an f32 weight the way GPTQ lays it out: input
// columns are taken in a random order P, column P[i] goes to group i / g (g_idx), each (group,
// output) has an f16 scale max|w| / 7 and codes are round(w / scale) + 8, stored v1 (zero - 1).
struct GptqCheckpoint {
  int64_t n = 0, k = 0, g = 0;
  std::vector<int32_t> qweight;  // [K / 8][N]: code of input k at bits 4 (k % 8) of row k / 8
  std::vector<int32_t> qzeros;   // [G][N / 8]
  std::vector<uint16_t> scales;  // [G][N] f16
  std::vector<int32_t> g_idx;    // [K]
};

GptqCheckpoint make_gptq(const std::vector<float>& w, int64_t n, int64_t k, int64_t g,
                         std::mt19937& rng) {
  GptqCheckpoint c;
  c.n = n, c.k = k, c.g = g;
  const int64_t groups = k / g;
  std::vector<int32_t> order(static_cast<size_t>(k));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  c.g_idx.resize(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) c.g_idx[order[i]] = static_cast<int32_t>(i / g);
  std::vector<double> amax(static_cast<size_t>(groups * n), 0.0);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < k; ++i) {
      double& a = amax[c.g_idx[i] * n + j];
      a = std::max(a, std::fabs(static_cast<double>(w[j * k + i])));
    }
  c.scales.resize(amax.size());
  std::vector<double> scale(amax.size());
  for (size_t i = 0; i < amax.size(); ++i)
    c.scales[i] = encode16(HM_DTYPE_F16, std::max(amax[i], 1e-4) / 7, &scale[i]);
  c.qweight.assign(static_cast<size_t>(k / 8 * n), 0);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < k; ++i) {
      const double q = std::nearbyint(w[j * k + i] / scale[c.g_idx[i] * n + j]) + 8;
      const uint32_t code = static_cast<uint32_t>(std::clamp(q, 0.0, 15.0));
      c.qweight[(i / 8) * n + j] |= static_cast<int32_t>(code << (4 * (i % 8)));
    }
  c.qzeros.assign(static_cast<size_t>(groups * n / 8), 0);
  for (int64_t gi = 0; gi < groups; ++gi)
    for (int64_t j = 0; j < n; ++j)
      c.qzeros[gi * (n / 8) + j / 8] |= static_cast<int32_t>(7u << (4 * (j % 8)));
  return c;
}

// Output columns [j0, j1) (rank r of a column split: its N / 2 outputs, all of K and g_idx).
GptqCheckpoint gptq_columns(const GptqCheckpoint& c, int64_t j0, int64_t j1) {
  GptqCheckpoint s = c;
  s.n = j1 - j0;
  s.qweight = slice(c.qweight, c.n, 0, c.k / 8, j0, j1);
  s.qzeros = slice(c.qzeros, c.n / 8, 0, c.k / c.g, j0 / 8, j1 / 8);
  s.scales = slice(c.scales, c.n, 0, c.k / c.g, j0, j1);
  return s;
}

// Input columns [i0, i1) (rank r of a row split, as engines shard GPTQ act-order: the K slice of
// qweight and g_idx, with every group's scales and zeros kept, since any group may occur).
GptqCheckpoint gptq_rows(const GptqCheckpoint& c, int64_t i0, int64_t i1) {
  GptqCheckpoint s = c;
  s.k = i1 - i0;
  s.qweight = slice(c.qweight, c.n, i0 / 8, i1 / 8, 0, c.n);
  s.g_idx.assign(c.g_idx.begin() + i0, c.g_idx.begin() + i1);
  return s;
}

// The converter's result as a runnable layer plus its K permutation.
struct Converted {
  hm_status_t status = HM_SUCCESS;
  std::string error;
  Layer layer;
  std::vector<int32_t> permutation;
};

Converted convert_gptq(const GptqCheckpoint& c) {
  const int64_t groups = static_cast<int64_t>(c.scales.size()) / c.n;
  const hm_checkpoint_tensor_t tensors[] = {
      hm::gpu_test::checkpoint_tensor("qweight", "I32", {c.k / 8, c.n}, c.qweight),
      hm::gpu_test::checkpoint_tensor("qzeros", "I32", {groups, c.n / 8}, c.qzeros),
      hm::gpu_test::checkpoint_tensor("scales", "F16", {groups, c.n}, c.scales),
      hm::gpu_test::checkpoint_tensor("g_idx", "I32", {c.k}, c.g_idx)};
  Converted out;
  hm_converted_layer_t* converted = nullptr;
  out.status = hm_convert_layer(HM_SCHEME_GPTQ, tensors, 4, nullptr, &converted);
  if (out.status != HM_SUCCESS) {
    out.error = last_error();
    return out;
  }
  hm_format_t* format = nullptr;
  EXPECT_EQ(hm_converted_layer_format(converted, &format), HM_SUCCESS) << last_error();
  char text[512] = "";
  hm_format_to_string(format, text, sizeof text, nullptr);
  hm_format_destroy(format);
  out.layer = parse_layer(text);
  hm_converted_layer_info_t info;
  hm_converted_layer_info_init(&info);
  EXPECT_EQ(hm_converted_layer_info(converted, &info), HM_SUCCESS) << last_error();
  pack_canonical(out.layer, info.weight);
  if (info.k_permutation)
    out.permutation.assign(info.k_permutation, info.k_permutation + out.layer.k);
  hm_converted_layer_destroy(converted);
  return out;
}

// A'[:, k'] = A[:, perm[k']]: the gather the engine applies before an act-order layer.
template <typename T>
std::vector<T> gather_columns(const std::vector<T>& a, int64_t m, int64_t k,
                              const std::vector<int32_t>& perm) {
  std::vector<T> out(a.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < k; ++j) out[i * k + j] = a[i * k + perm[j]];
  return out;
}

// Column split of an act-order layer: each rank converts its N / 2 outputs (all of K, the same
// g_idx), gets the same K permutation as the unsharded layer, exactly the unsharded layer's
// dequantized rows, and after concatenation the unsharded layer's accuracy against the float
// weights.
TEST(MultiDevice, ActOrderColumnShards) {
  constexpr int64_t kN = 512, kK = 2048, kG = 128;
  std::mt19937 rng(9090);
  const std::vector<float> w = random_weight(kN, kK, rng);
  const GptqCheckpoint ckpt = make_gptq(w, kN, kK, kG, rng);
  Converted full = convert_gptq(ckpt);
  ASSERT_EQ(full.status, HM_SUCCESS) << full.error;
  ASSERT_EQ(full.permutation.size(), static_cast<size_t>(kK)) << "expected an act-order layer";
  Converted col[2] = {convert_gptq(gptq_columns(ckpt, 0, kN / 2)),
                      convert_gptq(gptq_columns(ckpt, kN / 2, kN))};
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(col[r].status, HM_SUCCESS) << "rank " << r << ": " << col[r].error;
    EXPECT_EQ(col[r].permutation, full.permutation) << "rank " << r;
    EXPECT_EQ(col[r].layer.deq, slice(full.layer.deq, kK, r * kN / 2, (r + 1) * kN / 2, 0, kK))
        << "rank " << r;
  }
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  Runner run_full(gpu, full.layer), run0(gpu, col[0].layer), run1(gpu, col[1].layer);
  Runner* runs[2] = {&run0, &run1};
  for (int64_t m : {1, 37}) {
    SCOPED_TRACE("m=" + std::to_string(m));
    const Activations acts = random_activations(full.layer, m, rng);
    const std::vector<double> ref = float_reference(acts.values, w, m, kN, kK);
    const std::vector<uint16_t> a = gather_columns(acts.codes, m, kK, full.permutation);
    const std::vector<double> a_vals = gather_columns(acts.values, m, kK, full.permutation);
    const std::vector<uint16_t> got_full = run_full.run_alone(a, m);
    EXPECT_LE(relative_error(full.layer, got_full, reference(full.layer, a_vals, m)), kF16Bound);
    const double full_err = relative_error(full.layer, got_full, ref);
    std::vector<double> concat(static_cast<size_t>(m * kN));
    for (int r = 0; r < 2; ++r) {
      const std::vector<double> v = decode_all(HM_DTYPE_F16, runs[r]->run_alone(a, m));
      for (int64_t i = 0; i < m; ++i)
        std::copy(v.begin() + i * kN / 2, v.begin() + (i + 1) * kN / 2,
                  concat.begin() + i * kN + r * kN / 2);
    }
    const double col_err = decoded_error(concat, ref);
    EXPECT_LE(col_err, kShardSlack * full_err + kShardEpsilon) << "unsharded " << full_err;
    std::fprintf(stderr, "note: act-order m=%lld: error vs float weights: unsharded %.4f, "
                 "column split %.4f\n", static_cast<long long>(m), full_err, col_err);
  }
}

// A row split of an act-order layer gives each rank a K slice whose groups are scattered and
// uneven (a group's columns fall on both ranks). The converter sorts K by group and needs whole
// groups of g columns, and the format has one group size, so such a shard is refused with an
// error rather than converted into something wrong. Serving a row-split act-order layer needs
// either per-rank uneven groups (a g_idx-aware kernel) or an all-gather of the activations; the
// library has neither (README, issue #7).
TEST(MultiDevice, ActOrderRowShardIsRefused) {
  constexpr int64_t kN = 256, kK = 1024, kG = 128;
  std::mt19937 rng(4242);
  const GptqCheckpoint ckpt = make_gptq(random_weight(kN, kK, rng), kN, kK, kG, rng);
  for (int r = 0; r < 2; ++r) {
    const Converted shard = convert_gptq(gptq_rows(ckpt, r * kK / 2, (r + 1) * kK / 2));
    EXPECT_NE(shard.status, HM_SUCCESS) << "rank " << r << " converted: " << shard.layer.k;
    std::fprintf(stderr, "note: act-order row shard %d: %s: %s\n", r, hm_status_name(shard.status),
                 shard.error.c_str());
  }
}

// ---------------------------------------------------------------------------------------------
// c. Two GPUs.

#define REQUIRE_TWO_GPUS()                                                \
  do {                                                                    \
    if (const int count_ = device_count(); count_ < 2) {                  \
      GTEST_SKIP() << "needs 2 CUDA devices, found " << count_;           \
    }                                                                     \
  } while (0)

// One context per device, each created on a thread of its own; two threads per device, each with
// its own plans (three formats) and streams, all launching at once for a fixed number of
// iterations; every output checked. The contexts are load-only on a cache that a device-0 context
// filled (a miss fails the prepare), so device 1's prepares reuse device 0's kernels (when both
// devices have one arch).
TEST(MultiDevice, TwoGpusTwoThreadsEach) {
  REQUIRE_TWO_GPUS();
  ASSERT_TRUE(cuda_driver_loaded());
  std::mt19937 rng(2222);
  const Layer L1 = make_layer(kInt4, rng), L2 = make_layer(kInt8, rng);
  const Layer L3 = make_layer(kInt4Bf16, rng);
  const Inputs in1 = make_inputs(L1, rng), in2 = make_inputs(L2, rng), in3 = make_inputs(L3, rng);
  TempCache cache;
  const int entries = warm_cache(cache, 0, {&L1, &L2, &L3});
  ASSERT_GT(entries, 0);

  constexpr int kDevices = 2, kThreadsPerDevice = 2, kIterations = 30;
  std::unique_ptr<Gpu> contexts[kDevices];
  {
    std::vector<std::thread> creators;
    for (int d = 0; d < kDevices; ++d)
      creators.emplace_back([&, d] {
        contexts[d] = std::make_unique<Gpu>(d, cache.path(), HM_CONTEXT_DISABLE_JIT);
      });
    for (auto& th : creators) th.join();
  }
  for (int d = 0; d < kDevices; ++d) ASSERT_NE(contexts[d]->ctx, nullptr) << "device " << d;
  const bool same_arch = arch_of(contexts[0]->ctx) == arch_of(contexts[1]->ctx);
  if (!same_arch) {  // nothing to share: device 1 compiles its own kernels
    std::fprintf(stderr, "note: devices 0 and 1 have different archs (%s, %s): device 1 compiles\n",
                 arch_of(contexts[0]->ctx).c_str(), arch_of(contexts[1]->ctx).c_str());
    contexts[1] = std::make_unique<Gpu>(1, cache.path());
  }

  std::unique_ptr<Buffers> buffers[kDevices * kThreadsPerDevice];
  std::vector<Job> jobs[kDevices * kThreadsPerDevice];
  StartLine start(kDevices * kThreadsPerDevice);
  std::vector<std::thread> threads;
  for (int t = 0; t < kDevices * kThreadsPerDevice; ++t)
    threads.emplace_back([&, t] {
      const int d = t / kThreadsPerDevice;
      buffers[t] = std::make_unique<Buffers>(contexts[d]->ctx);
      jobs[t].resize(3);
      const Layer* layers[] = {&L1, &L2, &L3};
      const Inputs* inputs[] = {&in1, &in2, &in3};
      const double bounds[] = {kF16Bound, kBf16Bound, kBf16Bound};
      for (int j = 0; j < 3; ++j) {
        jobs[t][j].layer = layers[j], jobs[t][j].inputs = inputs[j];
        jobs[t][j].bound = bounds[j], jobs[t][j].device = d;
      }
      run_jobs(jobs[t], contexts[d]->ctx, *buffers[t], kIterations, start,
               "device " + std::to_string(d) + " thread " + std::to_string(t % kThreadsPerDevice));
      for (Job& job : jobs[t]) hm_plan_destroy(job.plan);
      buffers[t].reset();
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kDevices * kThreadsPerDevice; ++t)
    for (const Job& job : jobs[t])
      EXPECT_EQ(job.prepared, HM_SUCCESS)
          << "device " << t / kThreadsPerDevice << ": " << job.prepare_error;
  if (same_arch) {
    EXPECT_EQ(cache.entries(), entries)
        << "device 1 compiled instead of reusing device 0's kernels";
  }
}

// A device-0 kernel cache entry loads on device 1: a load-only device-1 context prepares from a
// cache only a device-0 context wrote, and runs correctly.
TEST(MultiDevice, TwoGpusShareTheKernelCache) {
  REQUIRE_TWO_GPUS();
  std::mt19937 rng(3333);
  const Layer L = make_layer(kInt4, rng);
  TempCache cache;
  const int entries = warm_cache(cache, 0, {&L});
  ASSERT_GT(entries, 0);
  Gpu gpu1(1, cache.path(), HM_CONTEXT_DISABLE_JIT);
  ASSERT_NE(gpu1.ctx, nullptr);
  {
    Gpu gpu0(0, cache.path());
    if (arch_of(gpu0.ctx) != arch_of(gpu1.ctx))
      GTEST_SKIP() << "devices 0 and 1 have different archs; their kernels are not shared";
  }
  Runner run(gpu1, L);
  ASSERT_NE(run.plan, nullptr);
  EXPECT_EQ(cache.entries(), entries);
  const Activations acts = random_activations(L, 9, rng);
  EXPECT_LE(relative_error(L, run.run_alone(acts.codes, 9), reference(L, acts.values, 9)),
            kF16Bound);
}

// Memory and streams of device 1 passed to a plan of device 0 are HM_ERROR_WRONG_DEVICE naming
// the slot (or the stream), for every pointer slot; device 0 then still runs correctly.
TEST(MultiDevice, TwoGpusForeignPointersAndStreamsAreRefused) {
  REQUIRE_TWO_GPUS();
  ASSERT_TRUE(cuda_driver_loaded());
  std::mt19937 rng(4444);
  const Layer L = make_layer(kInt4, rng);
  Gpu gpu0(0), gpu1(1);
  ASSERT_TRUE(gpu0.ctx && gpu1.ctx);
  Runner run(gpu0, L);
  ASSERT_NE(run.plan, nullptr);
  const int64_t m = 5;
  const Activations acts = random_activations(L, m, rng);
  uint64_t ws_bytes = 0;
  ASSERT_EQ(hm_plan_workspace_size(run.plan, m, &ws_bytes), HM_SUCCESS);
  const uint64_t a = gpu0.upload(acts.codes.data(), acts.codes.size() * 2);
  const uint64_t c = gpu0.poisoned(static_cast<size_t>(m * L.n * 2));
  const uint64_t ws = gpu0.zeroed(std::max<uint64_t>(ws_bytes, 16));
  const uint64_t foreign = gpu1.zeroed(std::max<size_t>(L.w.size(), 1 << 20));
  hm_launch_params_t* p = nullptr;
  ASSERT_EQ(hm_launch_params_create(&p), HM_SUCCESS);
  auto reset = [&] {
    set_weights(p, run.w);
    hm_launch_params_set_pointer(p, HM_ARG_A, a);
    hm_launch_params_set_pointer(p, HM_ARG_C, c);
    hm_launch_params_set_pointer(p, HM_ARG_WORKSPACE, ws);
    hm_launch_params_set_int(p, HM_ARG_WORKSPACE_BYTES, static_cast<int64_t>(ws_bytes));
    hm_launch_params_set_int(p, HM_ARG_M, m);
  };
  const std::pair<int32_t, const char*> slots[] = {{HM_ARG_A, "HM_ARG_A"},
                                                   {HM_ARG_B, "HM_ARG_B"},
                                                   {HM_ARG_C, "HM_ARG_C"},
                                                   {HM_ARG_SCALES, "HM_ARG_SCALES"},
                                                   {HM_ARG_WORKSPACE, "HM_ARG_WORKSPACE"}};
  for (const auto& [slot, name] : slots) {
    reset();
    hm_launch_params_set_pointer(p, slot, foreign);
    EXPECT_EQ(hm_plan_gemm(run.plan, p, nullptr), HM_ERROR_WRONG_DEVICE)
        << name << ": " << last_error();
    EXPECT_NE(last_error().find(name), std::string::npos) << last_error();
  }
  reset();
  CUstream stream1 = create_stream(1);
  EXPECT_EQ(hm_plan_gemm(run.plan, p, stream1), HM_ERROR_WRONG_DEVICE) << last_error();
  EXPECT_NE(last_error().find("stream"), std::string::npos) << last_error();
  destroy_stream(1, stream1);
  hm_launch_params_destroy(p);
  EXPECT_LE(relative_error(L, run.run_alone(acts.codes, m), reference(L, acts.values, m)),
            kF16Bound)
      << "device 0 after the refusals";
}

}  // namespace
