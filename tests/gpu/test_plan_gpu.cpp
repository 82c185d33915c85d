// The plan API on a real GPU, beyond one call on the default stream: CUDA graph capture and replay
// with new activations, several streams and host threads at once (one plan, separate
// workspaces), tensor-parallel shapes, and the per-call argument checks against the real driver
// (host, managed and registered memory, misalignment, streams of another context). Outputs are
// checked against the f64 host reference. Skipped (exit 77) without a GPU.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/support/cuda_driver.hpp"
#include "gpu/support/dense_layer.hpp"
#include "humming.h"

namespace {

using namespace hm::gpu_test;
using namespace gpu_driver;  // the driver's types and constants, in cuda.h's spelling

constexpr const char* kInt4 = "w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=1024";

// Device 0's primary context (the one hm contexts use) current on this thread for the scope:
// pushed, so whatever was current before is current again afterwards.
class Current {
 public:
  explicit Current(const Driver& cu) : cu_(cu) {
    EXPECT_CU(cu_, cuDevicePrimaryCtxRetain(&ctx_, 0));
    EXPECT_CU(cu_, cuCtxPushCurrent(ctx_));
  }
  ~Current() {
    CUcontext popped = nullptr;
    EXPECT_CU(cu_, cuCtxPopCurrent(&popped));
    EXPECT_CU(cu_, cuDevicePrimaryCtxRelease(0));
  }

 private:
  const Driver& cu_;
  CUcontext ctx_ = nullptr;
};

// A prepared plan for `format` on gpu's context, destroyed with the fixture that owns it.
struct Plan {
  hm_plan_t* plan = nullptr;
  explicit Plan(Gpu& gpu, const Layer& L) {
    EXPECT_EQ(hm_plan_create(gpu.ctx, L.format, nullptr, &plan), HM_SUCCESS) << last_error();
    if (plan) {
      EXPECT_EQ(hm_plan_prepare(plan), HM_SUCCESS) << last_error();
    }
  }
  ~Plan() { hm_plan_destroy(plan); }
  uint64_t workspace(int64_t max_m) const {
    uint64_t bytes = 0;
    EXPECT_EQ(hm_plan_workspace_size(plan, max_m, &bytes), HM_SUCCESS) << last_error();
    return bytes;
  }
};

// The first m rows of a reference computed for more rows.
std::vector<double> rows(const std::vector<double>& ref, const Layer& L, int64_t m) {
  return std::vector<double>(ref.begin(), ref.begin() + m * L.n);
}

// One call on the default stream with activations at `a` (any memory the device can read);
// returns the relative error against the reference for `acts`.
double run_checked(Gpu& gpu, const Plan& plan, const Layer& L, const DeviceWeights& w, uint64_t a,
                   const Activations& acts, int64_t m) {
  const uint64_t ws_bytes = plan.workspace(m);
  const uint64_t ws = ws_bytes ? gpu.zeroed(ws_bytes) : 0;
  const uint64_t c = gpu.poisoned(static_cast<size_t>(m * L.n * 2));
  hm_launch_params_t* p = params_for(w, a, c, m, ws, ws_bytes);
  EXPECT_EQ(hm_plan_gemm(plan.plan, p, nullptr), HM_SUCCESS) << last_error();
  EXPECT_EQ(hm_stream_synchronize(gpu.ctx, nullptr), HM_SUCCESS) << last_error();
  hm_launch_params_destroy(p);
  return relative_error(L, download(gpu, L, c, m), reference(L, acts.values, m));
}

class PlanGpu : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cuda_driver_loaded());
    ASSERT_NE(gpu_.ctx, nullptr);
  }
  // The driver calls beyond the C API (streams, capture, graphs, memory); loaded, as SetUp checked.
  const Driver& cu() const { return *cuda_driver(); }
  Gpu gpu_;
  std::mt19937 rng_{2024};
};

// Captured once (a split-K M and a large M, each with its own A and C), replayed three times with
// new activations copied in between, outside the graph: the graph reads its buffers at replay
// time, and the split-K workspace is left zeroed for the next replay.
TEST_F(PlanGpu, GraphCaptureReplaysWithNewActivations) {
  Current current(cu());
  Layer L = make_layer(kInt4, rng_);
  Plan plan(gpu_, L);
  ASSERT_NE(plan.plan, nullptr);
  ASSERT_GT(plan.workspace(1), 0u) << "M = 1 should split K for this shape";
  const DeviceWeights w = upload_weights(gpu_, L);
  const int64_t ms[] = {1, 300};
  const uint64_t ws_bytes = plan.workspace(300);
  const uint64_t ws = gpu_.zeroed(ws_bytes);  // one workspace: the two calls run in stream order
  uint64_t a[2], c[2];
  hm_launch_params_t* p[2];
  for (int i = 0; i < 2; ++i) {
    a[i] = gpu_.zeroed(static_cast<size_t>(ms[i] * L.k * 2));
    c[i] = gpu_.poisoned(static_cast<size_t>(ms[i] * L.n * 2));
    p[i] = params_for(w, a[i], c[i], ms[i], ws, ws_bytes);
  }
  CUstream stream = nullptr;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  ASSERT_CU(cu(), cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

  ASSERT_CU(cu(), cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  const hm_status_t s0 = hm_plan_gemm(plan.plan, p[0], stream);
  const std::string e0 = last_error();
  const hm_status_t s1 = hm_plan_gemm(plan.plan, p[1], stream);
  const std::string e1 = last_error();
  const CUresult ended = cu().cuStreamEndCapture(stream, &graph);  // always end the capture
  EXPECT_EQ(s0, HM_SUCCESS) << "captured M = 1: " << e0;
  EXPECT_EQ(s1, HM_SUCCESS) << "captured M = 300: " << e1;
  ASSERT_EQ(ended, CUDA_SUCCESS) << cu().failure(ended, "cuStreamEndCapture")
                                 << ": the capture was invalidated";
  ASSERT_CU(cu(), cuGraphInstantiateWithFlags(&exec, graph, 0));

  for (int replay = 0; replay < 3; ++replay) {
    Activations acts[2] = {random_activations(L, ms[0], rng_), random_activations(L, ms[1], rng_)};
    for (int i = 0; i < 2; ++i) {
      ASSERT_CU(cu(), cuMemcpyHtoDAsync(a[i], acts[i].codes.data(), acts[i].codes.size() * 2,
                                        stream));
      ASSERT_CU(cu(), cuMemsetD8Async(c[i], 0xFF, static_cast<size_t>(ms[i] * L.n * 2), stream));
    }
    ASSERT_CU(cu(), cuGraphLaunch(exec, stream));
    ASSERT_CU(cu(), cuStreamSynchronize(stream));  // the host activations live until here
    for (int i = 0; i < 2; ++i) {
      const double err =
          relative_error(L, download(gpu_, L, c[i], ms[i]), reference(L, acts[i].values, ms[i]));
      EXPECT_LE(err, kF16Bound) << "replay " << replay << " m=" << ms[i];
    }
  }
  EXPECT_CU(cu(), cuGraphExecDestroy(exec));
  EXPECT_CU(cu(), cuGraphDestroy(graph));
  EXPECT_CU(cu(), cuStreamDestroy(stream));
  for (auto* q : p) hm_launch_params_destroy(q);
}

// humming.h promises a workspace left all zero by every call, so that one buffer can serve
// several plans. Three plans whose split-K tiles lay the workspace out differently (other n_pad,
// other split counts, the wgmma and the mma.sync kernel) take turns on one workspace, each call's
// output checked and the whole workspace read back after it: a partial or a counter left behind
// by one plan would be read as another's (issue 14: the global split-K partials stayed).
TEST_F(PlanGpu, OneWorkspaceServesPlansWithDifferentLayoutsAndIsLeftZero) {
  Current current(cu());
  const char* kForceMma = R"({"dense": [{"kernel": "mma", "block_m": 16, "warps": 4}]})";
  struct Case {
    const char* format;
    const char* tuning;
  } cases[] = {{kInt4, nullptr},
               {"w=uint4b8 a=f16 c=f16 s=f16:g128 n=1344 k=2048", nullptr},
               {"w=uint4b8 a=f16 c=f16 s=f16:g128 n=8192 k=8192", nullptr},  // the issue's shape
               {"w=uint8b128 a=bf16 c=bf16 s=bf16:channel n=576 k=3072", kForceMma}};
  constexpr int kPlans = sizeof cases / sizeof cases[0];
  std::vector<Layer> layers;
  std::vector<hm_plan_t*> plans(kPlans, nullptr);
  std::vector<DeviceWeights> weights;
  const int64_t ms[] = {1, 3};
  uint64_t ws_bytes = 0;
  for (int i = 0; i < kPlans; ++i) {
    layers.push_back(make_layer(cases[i].format, rng_));
    hm_plan_options_t o;
    hm_plan_options_init(&o);
    o.tuning_json = cases[i].tuning;
    ASSERT_EQ(hm_plan_create(gpu_.ctx, layers[i].format, &o, &plans[i]), HM_SUCCESS) << last_error();
    ASSERT_EQ(hm_plan_prepare(plans[i]), HM_SUCCESS) << last_error();
    for (int64_t m : ms) {
      uint64_t bytes = 0;
      ASSERT_EQ(hm_plan_workspace_size(plans[i], m, &bytes), HM_SUCCESS) << last_error();
      ASSERT_GT(bytes, 0u) << cases[i].format << " M = " << m << " should split K through the "
                           << "workspace, or this test does not test it";
      ws_bytes = std::max(ws_bytes, bytes);
    }
  }
  for (int i = 0; i < kPlans; ++i) weights.push_back(upload_weights(gpu_, layers[i]));
  const uint64_t ws = gpu_.zeroed(ws_bytes);
  std::vector<uint8_t> back(ws_bytes);
  for (int round = 0; round < 6; ++round) {
    for (int i = 0; i < kPlans; ++i) {
      const Layer& L = layers[i];
      const int64_t m = ms[round % 2];
      const Activations acts = random_activations(L, m, rng_);
      const uint64_t a = gpu_.upload(acts.codes.data(), acts.codes.size() * 2);
      const uint64_t c = gpu_.poisoned(static_cast<size_t>(m * L.n * 2));
      hm_launch_params_t* p = params_for(weights[i], a, c, m, ws, ws_bytes);
      ASSERT_EQ(hm_plan_gemm(plans[i], p, nullptr), HM_SUCCESS) << last_error();
      ASSERT_EQ(hm_stream_synchronize(gpu_.ctx, nullptr), HM_SUCCESS) << last_error();
      hm_launch_params_destroy(p);
      const bool bf16 = std::string(cases[i].format).find("a=bf16") != std::string::npos;
      EXPECT_LE(relative_error(L, download(gpu_, L, c, m), reference(L, acts.values, m)),
                bf16 ? kBf16Bound : kF16Bound)
          << "round " << round << " " << cases[i].format << " M = " << m;
      ASSERT_EQ(hm_copy_to_host(gpu_.ctx, back.data(), ws, ws_bytes), HM_SUCCESS) << last_error();
      size_t nonzero = 0, first = 0;
      for (size_t b = 0; b < back.size(); ++b)
        if (back[b] != 0 && nonzero++ == 0) first = b;
      EXPECT_EQ(nonzero, 0u) << "round " << round << " " << cases[i].format << " M = " << m
                             << " left " << nonzero << " non-zero workspace bytes, the first at "
                             << first << " of " << ws_bytes;
    }
  }
  for (hm_plan_t* plan : plans) hm_plan_destroy(plan);
}

// One stream's share of the concurrent tests: a plan, a workspace of its own, activation sets
// with their references, and one output buffer per iteration (so no output is overwritten
// before it is checked).
struct Lane {
  const Layer* layer = nullptr;
  const Plan* plan = nullptr;
  DeviceWeights weights;
  double bound = 0;
  CUstream stream = nullptr;
  uint64_t ws = 0, ws_bytes = 0;
  std::vector<uint64_t> a;                // device activation sets, kMaxM rows each
  std::vector<std::vector<double>> refs;  // their references, kMaxM rows
  std::vector<uint64_t> c;                // per iteration
  std::vector<int64_t> m;                 // per iteration
  hm_launch_params_t* params = nullptr;
};

constexpr int64_t kMaxM = 33;
constexpr int kSets = 3;

void setup_lane(Lane& lane, Gpu& gpu, const Driver& cu, const Layer& L, const Plan& plan,
                const DeviceWeights& w, double bound, int iterations, std::mt19937& rng) {
  lane.layer = &L;
  lane.plan = &plan;
  lane.weights = w;
  lane.bound = bound;
  EXPECT_CU(cu, cuStreamCreate(&lane.stream, CU_STREAM_NON_BLOCKING));
  lane.ws_bytes = plan.workspace(kMaxM);
  lane.ws = gpu.zeroed(lane.ws_bytes);
  for (int s = 0; s < kSets; ++s) {
    Activations acts = random_activations(L, kMaxM, rng);
    lane.a.push_back(gpu.upload(acts.codes.data(), acts.codes.size() * 2));
    lane.refs.push_back(reference(L, acts.values, kMaxM));
  }
  const int64_t ms[] = {1, 7, kMaxM, 2, 16};  // split-K and not, on one workspace
  for (int it = 0; it < iterations; ++it) {
    lane.m.push_back(ms[it % 5]);
    lane.c.push_back(gpu.poisoned(static_cast<size_t>(lane.m.back() * L.n * 2)));
  }
  lane.params = params_for(w, lane.a[0], lane.c[0], 1, lane.ws, lane.ws_bytes);
}

// Launches iteration `it` of the lane (asynchronously); returns the status.
hm_status_t launch_lane(Lane& lane, int it) {
  hm_launch_params_set_pointer(lane.params, HM_ARG_A, lane.a[it % kSets]);
  hm_launch_params_set_pointer(lane.params, HM_ARG_C, lane.c[it]);
  hm_launch_params_set_int(lane.params, HM_ARG_M, lane.m[it]);
  return hm_plan_gemm(lane.plan->plan, lane.params, lane.stream);
}

void check_lane(Lane& lane, Gpu& gpu, const Driver& cu, const char* name) {
  EXPECT_CU(cu, cuStreamSynchronize(lane.stream)) << name;
  const Layer& L = *lane.layer;
  for (size_t it = 0; it < lane.c.size(); ++it) {
    const double err = relative_error(L, download(gpu, L, lane.c[it], lane.m[it]),
                                      rows(lane.refs[it % kSets], L, lane.m[it]));
    EXPECT_LE(err, lane.bound) << name << " iteration " << it << " m=" << lane.m[it];
  }
  EXPECT_CU(cu, cuStreamDestroy(lane.stream));
  hm_launch_params_destroy(lane.params);
}

// Two formats, and one plan on two streams, all in flight at once: launches interleave across
// the three streams with no host synchronization until the end.
TEST_F(PlanGpu, ConcurrentStreamsWithSeparateWorkspaces) {
  Current current(cu());
  Layer L1 = make_layer(kInt4, rng_);
  Layer L2 = make_layer("w=uint8b128 a=bf16 c=bf16 s=bf16:channel n=192 k=512", rng_);
  Plan plan1(gpu_, L1), plan2(gpu_, L2);
  ASSERT_TRUE(plan1.plan && plan2.plan);
  const DeviceWeights w1 = upload_weights(gpu_, L1), w2 = upload_weights(gpu_, L2);
  constexpr int kIterations = 40;
  Lane lanes[3];
  setup_lane(lanes[0], gpu_, cu(), L1, plan1, w1, kF16Bound, kIterations, rng_);
  setup_lane(lanes[1], gpu_, cu(), L1, plan1, w1, kF16Bound, kIterations, rng_);
  setup_lane(lanes[2], gpu_, cu(), L2, plan2, w2, kBf16Bound, kIterations, rng_);
  for (int it = 0; it < kIterations; ++it)
    for (int l = 0; l < 3; ++l)
      ASSERT_EQ(launch_lane(lanes[l], it), HM_SUCCESS) << "lane " << l << ": " << last_error();
  const char* names[] = {"plan 1, stream 1", "plan 1, stream 2", "plan 2, stream 3"};
  for (int l = 0; l < 3; ++l) check_lane(lanes[l], gpu_, cu(), names[l]);
}

// Two host threads, each with its own stream, workspace and launch params, against one plan.
TEST_F(PlanGpu, TwoHostThreadsShareOnePlan) {
  Current current(cu());
  Layer L = make_layer(kInt4, rng_);
  Plan plan(gpu_, L);
  ASSERT_NE(plan.plan, nullptr);
  const DeviceWeights w = upload_weights(gpu_, L);
  constexpr int kIterations = 60;
  Lane lanes[2];
  for (Lane& lane : lanes) setup_lane(lane, gpu_, cu(), L, plan, w, kF16Bound, kIterations, rng_);
  std::string failures[2];
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      for (int it = 0; it < kIterations; ++it)
        if (launch_lane(lanes[t], it) != HM_SUCCESS) {
          failures[t] = "iteration " + std::to_string(it) + ": " + last_error();  // thread's own
          return;
        }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 2; ++t) EXPECT_TRUE(failures[t].empty()) << "thread " << t << " " << failures[t];
  check_lane(lanes[0], gpu_, cu(), "thread 1");
  check_lane(lanes[1], gpu_, cu(), "thread 2");
}

// Tensor-parallel shapes (int4 g128, f16): a wide layer at small M, and a narrow one at a large,
// ragged M (4097 = one token past a power of two), where the host reference stays cheap.
TEST_F(PlanGpu, TensorParallelShapes) {
  {
    Layer L = make_layer("w=uint4b8 a=f16 c=f16 s=f16:g128 n=10944 k=7392", rng_);
    Plan plan(gpu_, L);
    ASSERT_NE(plan.plan, nullptr);
    const DeviceWeights w = upload_weights(gpu_, L);
    for (int64_t m : {1, 3, 17}) {
      const Activations acts = random_activations(L, m, rng_);
      const uint64_t a = gpu_.upload(acts.codes.data(), acts.codes.size() * 2);
      EXPECT_LE(run_checked(gpu_, plan, L, w, a, acts, m), kF16Bound) << "n=10944 k=7392 m=" << m;
    }
    gpu_.free_all();
  }
  Layer L = make_layer("w=uint4b8 a=f16 c=f16 s=f16:g128 n=96 k=7392", rng_);
  Plan plan(gpu_, L);
  ASSERT_NE(plan.plan, nullptr);
  const DeviceWeights w = upload_weights(gpu_, L);
  const Activations acts = random_activations(L, 4097, rng_);
  const uint64_t a = gpu_.upload(acts.codes.data(), acts.codes.size() * 2);
  EXPECT_LE(run_checked(gpu_, plan, L, w, a, acts, 4097), kF16Bound) << "n=96 k=7392 m=4097";
}

// The per-call checks against the real driver: what the device cannot use is an error status
// (never a fault), and what it can use (managed memory, registered host memory) runs correctly.
TEST_F(PlanGpu, ArgumentChecksOnTheDevice) {
  Current current(cu());
  Layer L = make_layer(kInt4, rng_);
  Plan plan(gpu_, L);
  ASSERT_NE(plan.plan, nullptr);
  const DeviceWeights w = upload_weights(gpu_, L);
  const int64_t m = 5;
  const Activations acts = random_activations(L, m, rng_);
  const size_t a_bytes = acts.codes.size() * 2;
  const uint64_t a = gpu_.upload(acts.codes.data(), a_bytes);
  EXPECT_LE(run_checked(gpu_, plan, L, w, a, acts, m), kF16Bound) << "device memory";

  const uint64_t ws_bytes = plan.workspace(m);
  const uint64_t ws = ws_bytes ? gpu_.zeroed(ws_bytes) : 0;
  const uint64_t c = gpu_.poisoned(static_cast<size_t>(m * L.n * 2));
  hm_launch_params_t* p = params_for(w, a, c, m, ws, ws_bytes);

  // Plain host memory: refused, unless the device reads pageable memory (HMM / ATS).
  int pageable = 0;
  {
    CUdevice device = 0;
    ASSERT_CU(cu(), cuDeviceGet(&device, 0));
    if (cu().cuDeviceGetAttribute(&pageable, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, device) !=
        CUDA_SUCCESS)
      pageable = 0;
  }
  void* host = std::aligned_alloc(4096, (a_bytes + 4095) / 4096 * 4096);
  ASSERT_NE(host, nullptr);
  std::memcpy(host, acts.codes.data(), a_bytes);
  hm_launch_params_set_pointer(p, HM_ARG_A, reinterpret_cast<uintptr_t>(host));
  const hm_status_t status = hm_plan_gemm(plan.plan, p, nullptr);
  if (pageable) {
    EXPECT_EQ(status, HM_SUCCESS) << "the device reads pageable memory: " << last_error();
  } else {
    EXPECT_EQ(status, HM_ERROR_INVALID_ARGUMENT) << last_error();
    EXPECT_NE(last_error().find("HM_ARG_A"), std::string::npos) << last_error();
  }
  EXPECT_EQ(hm_stream_synchronize(gpu_.ctx, nullptr), HM_SUCCESS) << last_error();

  // Misaligned weights.
  hm_launch_params_set_pointer(p, HM_ARG_A, a);
  hm_launch_params_set_pointer(p, HM_ARG_B, w.w + 8);
  EXPECT_EQ(hm_plan_gemm(plan.plan, p, nullptr), HM_ERROR_MISALIGNED) << last_error();
  EXPECT_NE(last_error().find("HM_ARG_B"), std::string::npos) << last_error();
  hm_launch_params_set_pointer(p, HM_ARG_B, w.w);
  hm_launch_params_destroy(p);

  // Registered (pinned, mapped) host memory and managed memory are usable, with correct results.
  ASSERT_CU(cu(), cuMemHostRegister(host, (a_bytes + 4095) / 4096 * 4096,
                                     CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP));
  EXPECT_LE(run_checked(gpu_, plan, L, w, reinterpret_cast<uintptr_t>(host), acts, m), kF16Bound)
      << "registered host memory: " << last_error();
  ASSERT_CU(cu(), cuMemHostUnregister(host));
  std::free(host);
  CUdeviceptr managed = 0;
  ASSERT_CU(cu(), cuMemAllocManaged(&managed, a_bytes, CU_MEM_ATTACH_GLOBAL));
  std::memcpy(reinterpret_cast<void*>(managed), acts.codes.data(), a_bytes);  // host writes it
  EXPECT_LE(run_checked(gpu_, plan, L, w, managed, acts, m), kF16Bound)
      << "managed memory: " << last_error();
  ASSERT_CU(cu(), cuMemFree(managed));

  // A stream of another context of the same device: the plan's kernels live in the primary one.
  CUcontext own = nullptr;
  if (cu().cuCtxCreate && cu().cuCtxCreate(&own, 0, 0) == CUDA_SUCCESS) {  // also makes it current
    CUstream stream = nullptr;
    CUcontext popped = nullptr;
    ASSERT_CU(cu(), cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    ASSERT_CU(cu(), cuCtxPopCurrent(&popped));
    hm_launch_params_t* q = params_for(w, a, c, m, ws, ws_bytes);
    EXPECT_EQ(hm_plan_gemm(plan.plan, q, stream), HM_ERROR_WRONG_DEVICE) << last_error();
    EXPECT_NE(last_error().find("stream"), std::string::npos) << last_error();
    hm_launch_params_destroy(q);
    EXPECT_CU(cu(), cuStreamDestroy(stream));
    EXPECT_CU(cu(), cuCtxDestroy(own));
  } else {
    std::fprintf(stderr, "note: cuCtxCreate_v2 unavailable; a foreign-context stream is not tested\n");
  }

  // Memory of another device, where there is one.
  hm_runtime_info_t info;
  hm_runtime_info_init(&info);
  ASSERT_EQ(hm_runtime_info(&info), HM_SUCCESS);
  if (info.device_count >= 2) {
    hm_context_options_t o;
    hm_context_options_init(&o);
    o.device = 1;
    hm_context_t* other = nullptr;
    ASSERT_EQ(hm_context_create(&o, &other), HM_SUCCESS) << last_error();
    uint64_t foreign = 0;
    ASSERT_EQ(hm_device_alloc(other, a_bytes, &foreign), HM_SUCCESS) << last_error();
    hm_launch_params_t* q = params_for(w, foreign, c, m, ws, ws_bytes);
    EXPECT_EQ(hm_plan_gemm(plan.plan, q, nullptr), HM_ERROR_WRONG_DEVICE) << last_error();
    EXPECT_NE(last_error().find("HM_ARG_A"), std::string::npos) << last_error();
    hm_launch_params_destroy(q);
    hm_device_free(other, foreign);
    hm_context_destroy(other);
  }
  EXPECT_EQ(hm_stream_synchronize(gpu_.ctx, nullptr), HM_SUCCESS) << "the context must be intact";
}

}  // namespace
