// hm_quantize_activation_device on a real GPU against hm_quantize_activation on the host, codes and
// scales bit for bit: f16 / bf16 into e4m3, e5m2 and int8, per token and per 128-column group,
// with and without a K permutation (one with an out-of-range entry), ragged K, M = 1, 7 and 4097,
// rows of zeros, huge and tiny values, NaN and infinity, per-token rows longer than one pass
// (read twice), unaligned inputs and outputs (the scalar paths), two streams at once and CUDA graph
// capture; and the shapes of each launch regime (few rows / many rows, team and lane groups, teams
// per block that do not divide M, more units of work than blocks). Skipped (exit 77,
// tests/support/gpu_main.cpp) without a GPU.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
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
using namespace gpu_driver;

float bits_to_float(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// Host activations of one case: the 16-bit codes, their exact f32 values and the permutation.
struct Input {
  hm_dtype_t dtype = HM_DTYPE_F16;
  int64_t m = 0, k = 0;
  std::vector<uint16_t> bits;
  std::vector<float> values;
  std::vector<int32_t> perm;  // empty: none
};

uint16_t encode16(hm_dtype_t dtype, float v, float* back) {
  uint32_t code = 0;
  double value = 0;
  EXPECT_EQ(hm_dtype_encode(dtype, v, &code), HM_SUCCESS) << last_error();
  EXPECT_EQ(hm_dtype_decode(dtype, code, &value), HM_SUCCESS) << last_error();
  *back = static_cast<float>(value);
  return static_cast<uint16_t>(code);
}

// Random normal rows with special rows mixed in by row index: 0 zeros, 1 huge values (near the
// input dtype's maximum), 2 tiny values (subnormal inputs), 3 a NaN and an infinity; and, with
// `permuted`, a permutation (out of range at one column when `bad_perm`).
Input make_input(hm_dtype_t dtype, int64_t m, int64_t k, bool permuted, bool bad_perm,
                 std::mt19937& rng) {
  Input in;
  in.dtype = dtype;
  in.m = m;
  in.k = k;
  in.bits.resize(m * k);
  in.values.resize(m * k);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float huge = dtype == HM_DTYPE_F16 ? 60000.0f : 3e38f;
  const float tiny = dtype == HM_DTYPE_F16 ? 3e-6f : 1e-39f;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      float v = normal(rng);
      if (i == 0) v = 0.0f;
      if (i == 1) v = std::fmax(-huge, std::fmin(huge, v * huge / 3));
      if (i == 2) v *= tiny;
      if (i == 3 && j == k / 2) v = std::numeric_limits<float>::quiet_NaN();
      if (i == 3 && j == k - 1) v = -std::numeric_limits<float>::infinity();
      if (!std::isfinite(v)) {  // NaN / -inf bit patterns, set directly
        const bool f16 = dtype == HM_DTYPE_F16;
        in.bits[i * k + j] = std::isnan(v) ? (f16 ? 0x7E00 : 0x7FC0) : (f16 ? 0xFC00 : 0xFF80);
        in.values[i * k + j] = v;
      } else if (dtype == HM_DTYPE_BF16) {
        uint32_t u;  // truncate to bf16: exact for the check, the input is whatever it is
        std::memcpy(&u, &v, 4);
        in.bits[i * k + j] = static_cast<uint16_t>(u >> 16);
        in.values[i * k + j] = bits_to_float(uint32_t{in.bits[i * k + j]} << 16);
      } else {
        in.bits[i * k + j] = encode16(dtype, v, &in.values[i * k + j]);
      }
    }
  }
  if (permuted) {
    in.perm.resize(k);
    for (int64_t j = 0; j < k; ++j) in.perm[j] = static_cast<int32_t>(j);
    std::shuffle(in.perm.begin(), in.perm.end(), rng);
    if (bad_perm) in.perm[k / 3] = static_cast<int32_t>(k + 5);
  }
  return in;
}

struct Expected {
  std::vector<uint8_t> codes;
  std::vector<uint32_t> scales;
  int64_t groups = 0;
};

Expected host_reference(const Input& in, hm_dtype_t out, int32_t group_k) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a(in.m * in.k);
  for (int64_t i = 0; i < in.m; ++i)
    for (int64_t j = 0; j < in.k; ++j) {
      const int64_t src = in.perm.empty() ? j : in.perm[j];
      a[i * in.k + j] = src < 0 || src >= in.k ? nan : in.values[i * in.k + src];
    }
  Expected e;
  EXPECT_EQ(hm_activation_scale_groups(in.k, group_k, &e.groups), HM_SUCCESS);
  e.codes.resize(in.m * in.k);
  std::vector<float> scales(in.m * e.groups);
  EXPECT_EQ(hm_quantize_activation(out, a.data(), in.m, in.k, group_k, e.codes.data(),
                                   scales.data()),
            HM_SUCCESS)
      << last_error();
  e.scales.resize(scales.size());
  std::memcpy(e.scales.data(), scales.data(), scales.size() * 4);
  return e;
}

// Device buffers of one case; `offset` bytes added to a (2: unaligned for vector loads) and codes.
struct DeviceCase {
  uint64_t a = 0, perm = 0, codes = 0, scales = 0;
  hm_activation_quant_args_t args{};
};

DeviceCase upload(Buffers& buf, const Input& in, hm_dtype_t out, int32_t group_k,
                  int64_t groups, int offset) {
  DeviceCase d;
  d.a = buf.alloc(in.bits.size() * 2 + 16) + offset;
  EXPECT_EQ(hm_copy_to_device(buf.ctx, d.a, in.bits.data(), in.bits.size() * 2), HM_SUCCESS);
  if (!in.perm.empty()) d.perm = buf.upload(in.perm.data(), in.perm.size() * 4);
  d.codes = buf.poisoned(in.m * in.k + 16) + offset;
  d.scales = buf.poisoned(in.m * groups * 4);
  hm_activation_quant_args_init(&d.args);
  d.args.in_dtype = in.dtype;
  d.args.out_dtype = out;
  d.args.group_k = group_k;
  d.args.m = in.m;
  d.args.k = in.k;
  d.args.a = d.a;
  d.args.perm = d.perm;
  d.args.codes = d.codes;
  d.args.scales = d.scales;
  return d;
}

// Downloads and compares; reports the first mismatch of each kind.
void expect_matches(hm_context_t* ctx, const DeviceCase& d, const Input& in, const Expected& e) {
  std::vector<uint8_t> codes(in.m * in.k);
  std::vector<uint32_t> scales(in.m * e.groups);
  ASSERT_EQ(hm_copy_to_host(ctx, codes.data(), d.codes, codes.size()), HM_SUCCESS);
  ASSERT_EQ(hm_copy_to_host(ctx, scales.data(), d.scales, scales.size() * 4), HM_SUCCESS);
  for (size_t i = 0; i < scales.size(); ++i)
    ASSERT_EQ(scales[i], e.scales[i]) << "scale [" << i / e.groups << "][" << i % e.groups << "]";
  for (size_t i = 0; i < codes.size(); ++i)
    ASSERT_EQ(int(codes[i]), int(e.codes[i])) << "code [" << i / in.k << "][" << i % in.k << "]";
}

void run_case(Gpu& gpu, hm_dtype_t in_dtype, hm_dtype_t out, int64_t m, int64_t k,
              int32_t group_k, bool permuted, int offset, uint32_t seed) {
  SCOPED_TRACE("in=" + std::to_string(in_dtype) + " out=" + std::to_string(out) + " m=" +
               std::to_string(m) + " k=" + std::to_string(k) + " group_k=" +
               std::to_string(group_k) + " perm=" + std::to_string(permuted) +
               " offset=" + std::to_string(offset));
  std::mt19937 rng(seed);
  const Input in = make_input(in_dtype, m, k, permuted, permuted && (seed % 2 == 0), rng);
  const Expected e = host_reference(in, out, group_k);
  Buffers buf(gpu.ctx);
  const DeviceCase d = upload(buf, in, out, group_k, e.groups, offset);
  ASSERT_EQ(hm_quantize_activation_device(gpu.ctx, &d.args, nullptr), HM_SUCCESS) << last_error();
  ASSERT_EQ(hm_stream_synchronize(gpu.ctx, nullptr), HM_SUCCESS) << last_error();
  expect_matches(gpu.ctx, d, in, e);
}

const hm_dtype_t kIns[] = {HM_DTYPE_F16, HM_DTYPE_BF16};
const hm_dtype_t kOuts[] = {HM_DTYPE_E4M3, HM_DTYPE_E5M2, HM_DTYPE_INT8};

TEST(ActivationQuantGpu, PerTokenAndPerGroupMatchTheHost) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  uint32_t seed = 1;
  for (hm_dtype_t in : kIns)
    for (hm_dtype_t out : kOuts)
      for (int32_t group_k : {0, 128})
        for (bool permuted : {false, true}) {
          run_case(gpu, in, out, 7, 8192, group_k, permuted, 0, seed++);  // vector paths
          run_case(gpu, in, out, 7, 7173, group_k, permuted, 0, seed++);  // ragged K
        }
}

TEST(ActivationQuantGpu, DecodeAndLargeM) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  for (hm_dtype_t out : kOuts) {
    run_case(gpu, HM_DTYPE_BF16, out, 1, 8192, 0, false, 0, 100);
    run_case(gpu, HM_DTYPE_F16, out, 1, 7168, 128, true, 0, 101);
    run_case(gpu, HM_DTYPE_F16, out, 4097, 264, 0, false, 0, 102);
    run_case(gpu, HM_DTYPE_BF16, out, 4097, 264, 128, true, 0, 103);
  }
}

TEST(ActivationQuantGpu, LongRowsSmallGroupsAndUnalignedBuffers) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  for (hm_dtype_t out : kOuts) {
    // Per-token rows longer than a pass (16384): absmax over the passes, then a second read.
    run_case(gpu, HM_DTYPE_F16, out, 5, 40003, 0, false, 0, 200);
    run_case(gpu, HM_DTYPE_BF16, out, 5, 40000, 0, true, 0, 201);
    // Groups larger than a pass, and groups that do not divide a pass.
    run_case(gpu, HM_DTYPE_F16, out, 4, 50000, 20000, false, 0, 202);
    run_case(gpu, HM_DTYPE_F16, out, 4, 40000, 24, false, 0, 203);
    run_case(gpu, HM_DTYPE_BF16, out, 6, 3000, 8, true, 0, 204);
    run_case(gpu, HM_DTYPE_BF16, out, 6, 3000, 1000, false, 0, 205);
    // Unaligned a and codes with K % 8 == 0: the scalar load and store paths.
    run_case(gpu, HM_DTYPE_F16, out, 9, 4096, 128, false, 2, 206);
    run_case(gpu, HM_DTYPE_BF16, out, 9, 4096, 0, false, 2, 207);
  }
}

// The regimes of the launch (src/api/quant_device.cpp, plan_geometry and plan_cluster_rows): rows
// <= SMs spread each unit over one vector per lane, more rows take four; per-token rows and
// other group sizes are reduced over a team, power-of-two groups <= 256 over lanes; per-token
// rows <= SMs with vector loads on sm_90+ over a cluster of blocks.
TEST(ActivationQuantGpu, LaunchRegimesAtOddShapes) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  for (hm_dtype_t out : kOuts) {
    // Per token, K % 8 != 0 (gathered through shared memory), M just above an H200's 132 SMs.
    run_case(gpu, HM_DTYPE_F16, out, 133, 8190, 0, false, 0, 500);
    // Per token, one-warp teams with 8 teams per block and M not a multiple of 8.
    run_case(gpu, HM_DTYPE_BF16, out, 2051, 1024, 0, false, 0, 501);
    // 1x128 lane groups with a ragged last group, many rows.
    run_case(gpu, HM_DTYPE_F16, out, 2051, 1000, 128, false, 0, 502);
    // Few rows: 64-column lane groups, a row spread over 33 one-warp passes.
    run_case(gpu, HM_DTYPE_BF16, out, 5, 8200, 64, false, 0, 503);
    // A row shorter than one warp's vectors, with a permutation.
    run_case(gpu, HM_DTYPE_F16, out, 6, 100, 0, true, 0, 504);
    // More units of work than the grid's blocks (16 per SM): teams stride over rows.
    run_case(gpu, HM_DTYPE_F16, out, 40000, 264, 128, false, 0, 505);
    // Per token, 65 warp-rows: a 17-warp team (544 threads) with 4 vectors per lane.
    run_case(gpu, HM_DTYPE_BF16, out, 300, 16392, 0, false, 0, 506);
    // 512-column groups (team groups, not lane groups), few rows.
    run_case(gpu, HM_DTYPE_F16, out, 4, 40960, 512, false, 0, 507);
    // Per token beyond 32768 columns with a permutation: gathered, read twice.
    run_case(gpu, HM_DTYPE_BF16, out, 200, 40000, 0, true, 0, 508);
    // Per token, at most one row per SM, vector loads on sm_90+: a row over one cluster of
    // blocks (at most 8 and at most SMs / m; 128 vectors per block up to K = 8192, then up to 4
    // per thread). One vector (one block), a partly filled last block (1032: 2 blocks of 96
    // threads), 7 blocks (7168), 8 blocks of 224 threads (14336), 4 vectors per thread (65536:
    // 8 x 256 threads; 65544: 8 x 288, the last thread's vectors partly past k), the longest
    // (262144: 8 x 1024 x 4) and one vector longer (the team path, read twice), 32 rows of 4
    // blocks, 64 rows of 2 blocks with 4 vectors per thread and a ragged end (8200), 100 rows of
    // one block with 2 vectors per thread (3000), and 128 rows of one block of 4 vectors per
    // thread (on an H100 or H200: every block on an SM of its own).
    run_case(gpu, HM_DTYPE_F16, out, 3, 8, 0, false, 0, 509);
    run_case(gpu, HM_DTYPE_BF16, out, 5, 1032, 0, false, 0, 510);
    run_case(gpu, HM_DTYPE_F16, out, 4, 7168, 0, false, 0, 511);
    run_case(gpu, HM_DTYPE_BF16, out, 6, 14336, 0, false, 0, 512);
    run_case(gpu, HM_DTYPE_F16, out, 4, 65536, 0, false, 0, 513);
    run_case(gpu, HM_DTYPE_F16, out, 4, 65544, 0, false, 0, 514);
    run_case(gpu, HM_DTYPE_BF16, out, 1, 262144, 0, false, 0, 516);
    run_case(gpu, HM_DTYPE_F16, out, 1, 262152, 0, false, 0, 517);
    run_case(gpu, HM_DTYPE_BF16, out, 32, 4096, 0, false, 0, 515);
    run_case(gpu, HM_DTYPE_BF16, out, 64, 8200, 0, false, 0, 518);
    run_case(gpu, HM_DTYPE_F16, out, 100, 3000, 0, false, 0, 519);
    run_case(gpu, HM_DTYPE_F16, out, 128, 8192, 0, false, 0, 520);
  }
}

// Two threads, each with its own stream, quantizing different activations at once on one context.
TEST(ActivationQuantGpu, TwoStreamsAtOnce) {
  ASSERT_TRUE(cuda_driver_loaded());
  const Driver& cu = *cuda_driver();
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      CUcontext primary = nullptr;
      EXPECT_CU(cu, cuDevicePrimaryCtxRetain(&primary, 0));
      EXPECT_CU(cu, cuCtxSetCurrent(primary));
      CUstream stream = nullptr;
      EXPECT_CU(cu, cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
      std::mt19937 rng(300 + t);
      const hm_dtype_t out = t == 0 ? HM_DTYPE_E4M3 : HM_DTYPE_INT8;
      const Input in = make_input(HM_DTYPE_BF16, 257, 7168, t == 1, false, rng);
      const Expected e = host_reference(in, out, 128);
      Buffers buf(gpu.ctx);
      const DeviceCase d = upload(buf, in, out, 128, e.groups, 0);
      for (int round = 0; round < 20; ++round)
        EXPECT_EQ(hm_quantize_activation_device(gpu.ctx, &d.args, stream), HM_SUCCESS)
            << last_error();
      EXPECT_CU(cu, cuStreamSynchronize(stream));
      expect_matches(gpu.ctx, d, in, e);
      EXPECT_CU(cu, cuStreamDestroy(stream));
      EXPECT_CU(cu, cuDevicePrimaryCtxRelease(0));
    });
  }
  for (auto& th : threads) th.join();
}

// Captured once, replayed with new activations copied in between: the graph reads its buffers at
// replay time. The first call (which compiles) runs before the capture.
TEST(ActivationQuantGpu, GraphCaptureReplaysWithNewActivations) {
  ASSERT_TRUE(cuda_driver_loaded());
  const Driver& cu = *cuda_driver();
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  CUcontext primary = nullptr;
  ASSERT_CU(cu, cuDevicePrimaryCtxRetain(&primary, 0));
  ASSERT_CU(cu, cuCtxPushCurrent(primary));
  std::mt19937 rng(400);
  Input in = make_input(HM_DTYPE_F16, 33, 8192, true, false, rng);
  const Expected first = host_reference(in, HM_DTYPE_E4M3, 128);
  Buffers buf(gpu.ctx);
  const DeviceCase d = upload(buf, in, HM_DTYPE_E4M3, 128, first.groups, 0);
  ASSERT_EQ(hm_quantize_activation_device(gpu.ctx, &d.args, nullptr), HM_SUCCESS) << last_error();
  ASSERT_EQ(hm_stream_synchronize(gpu.ctx, nullptr), HM_SUCCESS);
  expect_matches(gpu.ctx, d, in, first);

  CUstream stream = nullptr;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  ASSERT_CU(cu, cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cu, cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  const hm_status_t s = hm_quantize_activation_device(gpu.ctx, &d.args, stream);
  const std::string message = last_error();
  const CUresult ended = cu.cuStreamEndCapture(stream, &graph);
  EXPECT_EQ(s, HM_SUCCESS) << message;
  ASSERT_EQ(ended, CUDA_SUCCESS) << cu.failure(ended, "cuStreamEndCapture");
  ASSERT_CU(cu, cuGraphInstantiateWithFlags(&exec, graph, 0));
  for (int replay = 0; replay < 3; ++replay) {
    Input next = make_input(HM_DTYPE_F16, 33, 8192, false, false, rng);
    next.perm = in.perm;  // the captured call keeps its perm buffer
    const Expected e = host_reference(next, HM_DTYPE_E4M3, 128);
    ASSERT_CU(cu, cuMemcpyHtoDAsync(d.a, next.bits.data(), next.bits.size() * 2, stream));
    ASSERT_CU(cu, cuMemsetD8Async(d.codes, 0xFF, next.bits.size(), stream));
    ASSERT_CU(cu, cuGraphLaunch(exec, stream));
    ASSERT_CU(cu, cuStreamSynchronize(stream));
    expect_matches(gpu.ctx, d, next, e);
  }
  EXPECT_CU(cu, cuGraphExecDestroy(exec));
  EXPECT_CU(cu, cuGraphDestroy(graph));
  EXPECT_CU(cu, cuStreamDestroy(stream));
  CUcontext popped = nullptr;
  EXPECT_CU(cu, cuCtxPopCurrent(&popped));
  EXPECT_CU(cu, cuDevicePrimaryCtxRelease(0));
}

}  // namespace
