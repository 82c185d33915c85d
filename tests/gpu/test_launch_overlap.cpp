// Programmatic dependent launch of the sm_90a GEMM (runtime/launch.hpp, ptx/griddep.cuh): the
// activation quantizer and the GEMM on one stream, the GEMM's blocks started while the quantizer
// runs (the quantizer lets them; the GEMM waits for it before it touches memory).
// Rounds reuse one codes / scales buffer with new activations each time, so a GEMM that read its
// activations before its quantizer finished would compute with the previous round's codes. Every
// round must equal, bit for bit, the same kernel run after a host synchronization. On a plain
// stream and replayed from a captured graph. Skipped (exit 77) without a GPU.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/support/cuda_driver.hpp"
#include "gpu/support/dense_layer.hpp"
#include "humming.h"

namespace {

using namespace hm::gpu_test;
using namespace gpu_driver;

constexpr int kRounds = 6;

struct Chain {
  std::vector<uint64_t> inputs;  // f16 [m][k] per round
  uint64_t codes = 0, scales = 0;
  std::vector<uint64_t> outputs;  // [m][n] per round
};

hm_plan_t* make_plan(Gpu& gpu, const Layer& L) {
  hm_plan_t* plan = nullptr;
  EXPECT_EQ(hm_plan_create(gpu.ctx, L.format, nullptr, &plan), HM_SUCCESS) << last_error();
  if (plan) {
    EXPECT_EQ(hm_plan_prepare(plan), HM_SUCCESS) << last_error();
  }
  return plan;
}

// Enqueues every round (quantize into the shared buffers, then the GEMM into the round's output)
// on `stream`; with `sync`, the host waits after each call (the reference order).
void enqueue(Gpu& gpu, const Layer& L, hm_plan_t* plan, const DeviceWeights& w, const Chain& c,
             int64_t m, uint64_t ws, uint64_t ws_bytes, void* stream, bool sync) {
  for (int r = 0; r < kRounds; ++r) {
    hm_activation_quant_args_t q;
    hm_activation_quant_args_init(&q);
    q.in_dtype = HM_DTYPE_F16;
    q.out_dtype = L.act;
    q.m = m;
    q.k = L.k;
    q.a = c.inputs[r];
    q.codes = c.codes;
    q.scales = c.scales;
    ASSERT_EQ(hm_quantize_activation_device(gpu.ctx, &q, stream), HM_SUCCESS) << last_error();
    if (sync) {
      ASSERT_EQ(hm_stream_synchronize(gpu.ctx, stream), HM_SUCCESS);
    }
    hm_launch_params_t* p = params_for(w, c.codes, c.outputs[r], m, ws, ws_bytes);
    hm_launch_params_set_pointer(p, HM_ARG_ACT_SCALES, c.scales);
    EXPECT_EQ(hm_plan_gemm(plan, p, stream), HM_SUCCESS) << last_error();
    hm_launch_params_destroy(p);
    if (sync) {
      ASSERT_EQ(hm_stream_synchronize(gpu.ctx, stream), HM_SUCCESS);
    }
  }
}

TEST(LaunchOverlap, QuantizerThenGemmOnOneStreamMatchesTheSynchronizedOrder) {
  ASSERT_TRUE(cuda_driver_loaded());
  const Driver& cu = *cuda_driver();
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  if (!device_has_wgmma(gpu)) GTEST_SKIP() << "programmatic launches are sm_90+ (wgmma kernels)";
  CUcontext primary = nullptr;
  ASSERT_CU(cu, cuDevicePrimaryCtxRetain(&primary, 0));
  ASSERT_CU(cu, cuCtxPushCurrent(primary));
  CUstream stream = nullptr;
  ASSERT_CU(cu, cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  std::mt19937 rng(91);
  std::normal_distribution<double> normal;
  // Channel scales, and group scales on int8 (the fold), each with its default tiles at these M
  // (copying-warp and all-threads-copy tiles, a global split-K workspace and cluster splits).
  for (const char* text : {"w=uint4b8 a=e4m3 c=bf16 s=bf16:channel n=4096 k=4096",
                           "w=uint4b8 a=int8 c=bf16 s=bf16:g128 n=1024 k=8192"}) {
    const Layer L = make_layer(text, rng);
    for (const int64_t m : {1, 16, 100}) {
      const DeviceWeights w = upload_weights(gpu, L);
      Chain c;
      for (int r = 0; r < kRounds; ++r) {
        std::vector<uint16_t> bits(static_cast<size_t>(m * L.k));
        double back = 0;
        for (auto& b : bits) b = encode16(HM_DTYPE_F16, 4 * normal(rng), &back);
        c.inputs.push_back(gpu.upload(bits.data(), bits.size() * 2));
        c.outputs.push_back(gpu.poisoned(static_cast<size_t>(m * L.n * 2)));
      }
      c.codes = gpu.poisoned(static_cast<size_t>(m * L.k));
      c.scales = gpu.poisoned(static_cast<size_t>(m * 4));
      // The reference: the plain plan, the host waiting after every call.
      hm_plan_t* plain = make_plan(gpu, L);
      ASSERT_NE(plain, nullptr);
      uint64_t ws_bytes = 0;
      ASSERT_EQ(hm_plan_workspace_size(plain, m, &ws_bytes), HM_SUCCESS);
      const uint64_t ws = gpu.zeroed(ws_bytes + 16);
      ASSERT_NO_FATAL_FAILURE(enqueue(gpu, L, plain, w, c, m, ws, ws_bytes, stream, true));
      std::vector<std::vector<uint16_t>> want;
      for (int r = 0; r < kRounds; ++r) want.push_back(download(gpu, L, c.outputs[r], m));
      hm_plan_destroy(plain);
      {
        // The plan's launches are programmatic on sm_90+ (the wgmma kernels wait themselves).
        hm_plan_t* plan = make_plan(gpu, L);
        ASSERT_NE(plan, nullptr);
        for (const bool graph : {false, true}) {
          for (const uint64_t out : c.outputs)
            ASSERT_CU(cu, cuMemsetD8Async(out, 0xFF, static_cast<size_t>(m * L.n * 2), stream));
          if (graph) {
            CUgraph g = nullptr;
            CUgraphExec exec = nullptr;
            ASSERT_CU(cu, cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
            enqueue(gpu, L, plan, w, c, m, ws, ws_bytes, stream, false);
            ASSERT_CU(cu, cuStreamEndCapture(stream, &g));
            ASSERT_CU(cu, cuGraphInstantiateWithFlags(&exec, g, 0));
            for (int replay = 0; replay < 2; ++replay) ASSERT_CU(cu, cuGraphLaunch(exec, stream));
            ASSERT_CU(cu, cuStreamSynchronize(stream));
            EXPECT_CU(cu, cuGraphExecDestroy(exec));
            EXPECT_CU(cu, cuGraphDestroy(g));
          } else {
            ASSERT_NO_FATAL_FAILURE(enqueue(gpu, L, plan, w, c, m, ws, ws_bytes, stream, false));
            ASSERT_CU(cu, cuStreamSynchronize(stream));
          }
          for (int r = 0; r < kRounds; ++r) {
            const std::vector<uint16_t> got = download(gpu, L, c.outputs[r], m);
            int wrong = 0;
            for (size_t i = 0; i < got.size(); ++i) wrong += got[i] != want[r][i];
            EXPECT_EQ(wrong, 0) << text << " m=" << m << " round " << r
                                << (graph ? " (graph)" : " (stream)");
          }
        }
        hm_plan_destroy(plan);
      }
      gpu.free_all();
    }
  }
  EXPECT_CU(cu, cuStreamDestroy(stream));
  CUcontext popped = nullptr;
  EXPECT_CU(cu, cuCtxPopCurrent(&popped));
  EXPECT_CU(cu, cuDevicePrimaryCtxRelease(0));
}

}  // namespace
