// The MoE routing kernels on a real GPU against the host reference (src/quant/moe_routing.cpp),
// bit for bit: the alignment over random routings (T = 1 .. 8192, top_k 1/2/4/8, 8 .. 1024 local
// experts, every block size), empty experts, one expert taking every token, expert maps with -1
// and out-of-range ids; the top-k reduction in f16 and bf16 (vectorized and scalar kernels, dropped
// rows poisoned with NaN to prove they are not read); two streams at once; CUDA graph capture and
// replay with new routings. Outputs start poisoned, so an element the kernels never write shows.
// Skipped (exit 77, tests/support/gpu_main.cpp) without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gpu/support/cuda_driver.hpp"
#include "gpu/support/dense_layer.hpp"
#include "humming.h"
#include "quant/moe_routing.hpp"

namespace {

using hm::gpu_test::Gpu;
using hm::test::last_error;
using namespace hm::gpu_test;
using namespace gpu_driver;

// The primary context current on this thread, for the driver calls beyond the C API.
class MoeCurrent {
 public:
  explicit MoeCurrent(const Driver& cu) : cu_(cu) {
    EXPECT_CU(cu_, cuDevicePrimaryCtxRetain(&ctx_, 0));
    EXPECT_CU(cu_, cuCtxPushCurrent(ctx_));
  }
  ~MoeCurrent() {
    CUcontext popped = nullptr;
    EXPECT_CU(cu_, cuCtxPopCurrent(&popped));
    EXPECT_CU(cu_, cuDevicePrimaryCtxRelease(0));
  }

 private:
  const Driver& cu_;
  CUcontext ctx_ = nullptr;
};

struct Routing {
  int64_t tokens = 0;
  int32_t top_k = 0, experts = 0, local = 0, block = 0;
  std::vector<int32_t> ids, map;  // map empty: none
};

std::vector<int32_t> random_ids(std::mt19937& rng, size_t count, int32_t lo, int32_t hi) {
  std::vector<int32_t> ids(count);
  for (auto& id : ids) id = lo + int32_t(rng() % uint32_t(hi - lo));
  return ids;
}

hm::quant::MoeAlignOutput reference(const Routing& R) {
  hm::quant::MoeAlignInput in;
  in.topk_ids = R.ids.data();
  in.tokens = R.tokens;
  in.top_k = R.top_k;
  in.num_experts = R.experts;
  in.local_experts = R.local;
  in.block_size = R.block;
  in.expert_map = R.map.empty() ? nullptr : R.map.data();
  return hm::quant::moe_align(in);
}

// The device buffers of one alignment, poisoned (0x7B7B7B7B) before the call.
struct AlignBuffers {
  hm_moe_routing_t routing;
  hm_moe_align_sizes_t sizes;
  hm_moe_align_out_t out;
};

AlignBuffers prepare(Gpu& gpu, const Routing& R) {
  AlignBuffers b;
  hm_moe_routing_init(&b.routing);
  b.routing.topk_ids = R.ids.empty() ? gpu.alloc(4) : gpu.upload(R.ids.data(), R.ids.size() * 4);
  b.routing.num_tokens = R.tokens;
  b.routing.top_k = R.top_k;
  b.routing.num_experts = R.experts;
  b.routing.num_local_experts = R.local;
  if (!R.map.empty()) b.routing.expert_map = gpu.upload(R.map.data(), R.map.size() * 4);
  hm_moe_align_sizes_init(&b.sizes);
  EXPECT_EQ(hm_moe_align_sizes(&b.routing, R.block, &b.sizes), HM_SUCCESS) << last_error();
  auto poisoned = [&](int64_t count) {
    const size_t bytes = size_t(std::max<int64_t>(count, 1)) * 4;
    return gpu.upload(std::vector<uint8_t>(bytes, 0x7B).data(), bytes);
  };
  hm_moe_align_out_init(&b.out);
  b.out.sorted_ids = poisoned(b.sizes.sorted_ids);
  b.out.expert_ids = poisoned(b.sizes.expert_ids);
  b.out.num_tokens_padded = poisoned(1);
  b.out.expert_offsets = poisoned(b.sizes.expert_offsets);
  b.out.expert_counts = poisoned(b.sizes.expert_counts);
  return b;
}

std::vector<int32_t> download(Gpu& gpu, uint64_t p, int64_t count) {
  std::vector<int32_t> v(size_t(std::max<int64_t>(count, 0)));
  if (!v.empty()) {
    EXPECT_EQ(hm_copy_to_host(gpu.ctx, v.data(), p, v.size() * 4), HM_SUCCESS) << last_error();
  }
  return v;
}

// The first differing index of two vectors, for messages.
std::string first_difference(const std::vector<int32_t>& got, const std::vector<int32_t>& want) {
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    if (got[i] != want[i])
      return "index " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", want " +
             std::to_string(want[i]);
  return got.size() == want.size() ? "" : "sizes differ";
}

void expect_matches(Gpu& gpu, const AlignBuffers& b, const Routing& R, const std::string& what) {
  const hm::quant::MoeAlignOutput want = reference(R);
  const auto sorted = download(gpu, b.out.sorted_ids, b.sizes.sorted_ids);
  EXPECT_TRUE(sorted == want.sorted_ids)
      << what << " sorted_ids " << first_difference(sorted, want.sorted_ids);
  const auto experts = download(gpu, b.out.expert_ids, b.sizes.expert_ids);
  EXPECT_TRUE(experts == want.expert_ids)
      << what << " expert_ids " << first_difference(experts, want.expert_ids);
  EXPECT_EQ(download(gpu, b.out.num_tokens_padded, 1)[0], want.num_tokens_padded) << what;
  const auto offsets = download(gpu, b.out.expert_offsets, b.sizes.expert_offsets);
  EXPECT_TRUE(offsets == want.expert_offsets)
      << what << " expert_offsets " << first_difference(offsets, want.expert_offsets);
  const auto counts = download(gpu, b.out.expert_counts, b.sizes.expert_counts);
  EXPECT_TRUE(counts == want.expert_counts)
      << what << " expert_counts " << first_difference(counts, want.expert_counts);
}

void check_align(Gpu& gpu, const Routing& R, const std::string& what) {
  AlignBuffers b = prepare(gpu, R);
  ASSERT_EQ(hm_moe_align(gpu.ctx, &b.routing, R.block, &b.out, nullptr), HM_SUCCESS)
      << what << ": " << last_error();
  ASSERT_EQ(hm_stream_synchronize(gpu.ctx, nullptr), HM_SUCCESS) << what << ": " << last_error();
  expect_matches(gpu, b, R, what);
}

TEST(MoeRoutingGpu, AlignRandomRoutingsMatchTheReference) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  std::mt19937 rng(1);
  int cases = 0;
  for (int64_t tokens : {1, 2, 16, 127, 128, 1000, 1024, 4096, 8192}) {
    for (int32_t top_k : {1, 2, 4, 8}) {
      for (int32_t experts : {8, 128, 256}) {
        Routing R;
        R.tokens = tokens;
        R.top_k = top_k;
        R.experts = experts;
        R.block = 8 << (cases++ % 6);  // 8 .. 256 in turn
        R.ids = random_ids(rng, size_t(tokens * top_k), 0, experts);
        check_align(gpu, R,
                    std::to_string(tokens) + "x" + std::to_string(top_k) +
                        " E=" + std::to_string(experts) + " block " + std::to_string(R.block));
      }
    }
  }
}

TEST(MoeRoutingGpu, AlignEdgeCases) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  std::mt19937 rng(2);
  for (int32_t block = 8; block <= 256; block *= 2) {
    Routing all;  // every assignment on one expert (several blocks' chunks, one expert)
    all.tokens = 3000;
    all.top_k = 8;
    all.experts = 256;
    all.block = block;
    all.ids.assign(size_t(all.tokens * all.top_k), 77);
    check_align(gpu, all, "one expert, block " + std::to_string(block));
  }
  Routing skewed;  // most experts empty, a few hot ones
  skewed.tokens = 5000;
  skewed.top_k = 4;
  skewed.experts = 128;
  skewed.block = 64;
  skewed.ids = random_ids(rng, size_t(skewed.tokens * skewed.top_k), 0, 3);
  for (auto& id : skewed.ids) id *= 40;
  check_align(gpu, skewed, "three hot experts of 128");

  Routing ep;  // expert parallel: 256 global experts, 32 here, -1 elsewhere, out-of-range ids
  ep.tokens = 4096;
  ep.top_k = 8;
  ep.experts = 256;
  ep.local = 32;
  ep.block = 16;
  ep.map.assign(256, -1);
  for (int32_t i = 0; i < 32; ++i) ep.map[64 + i] = 31 - i;
  ep.ids = random_ids(rng, size_t(ep.tokens * ep.top_k), -3, 260);
  check_align(gpu, ep, "expert map, 32 of 256 local");
  ep.ids.assign(ep.ids.size(), 3);  // every expert on another rank
  check_align(gpu, ep, "nothing local");

  Routing wide;  // the most local experts
  wide.tokens = 2048;
  wide.top_k = 8;
  wide.experts = HM_MOE_MAX_LOCAL_EXPERTS;
  wide.block = 8;
  wide.ids = random_ids(rng, size_t(wide.tokens * wide.top_k), 0, wide.experts);
  check_align(gpu, wide, "1024 experts");

  Routing none;  // no tokens: zero padded length, every slot the sentinel 0
  none.tokens = 0;
  none.top_k = 8;
  none.experts = 64;
  none.block = 32;
  check_align(gpu, none, "no tokens");
}

// One reduction against the reference; dropped rows hold NaN.
void check_reduce(Gpu& gpu, hm_dtype_t dtype, int64_t tokens, int32_t top_k, int64_t n,
                  bool misaligned, std::mt19937& rng) {
  const bool bf16 = dtype == HM_DTYPE_BF16;
  const int32_t experts = 64;
  std::vector<int32_t> ids = random_ids(rng, size_t(tokens * top_k), -2, experts + 2);
  std::vector<float> weights(ids.size());
  for (auto& w : weights) w = float(rng() % 1000) / 1000.0f;
  std::vector<uint16_t> in(size_t(tokens * top_k * n) + (misaligned ? 1 : 0));
  for (auto& x : in) {
    const float v = float(int(rng() % 2001) - 1000) / 256.0f;
    x = bf16 ? hm::quant::bf16_from_float_rn(v) : hm::quant::f16_from_float_rn(v);
  }
  uint16_t* rows = in.data() + (misaligned ? 1 : 0);
  for (size_t f = 0; f < ids.size(); ++f)
    if (ids[f] < 0 || ids[f] >= experts)
      std::fill(rows + f * n, rows + (f + 1) * n, uint16_t(bf16 ? 0x7fc0 : 0x7e00));
  std::vector<uint16_t> want(size_t(tokens * n));
  hm::quant::moe_reduce(rows, weights.data(), ids.data(), nullptr, tokens, top_k, experts, experts,
                        n, bf16, want.data());
  hm_moe_routing_t r;
  hm_moe_routing_init(&r);
  r.topk_ids = gpu.upload(ids.data(), ids.size() * 4);
  r.num_tokens = tokens;
  r.top_k = top_k;
  r.num_experts = experts;
  hm_moe_reduce_args_t a;
  hm_moe_reduce_args_init(&a);
  a.dtype = dtype;
  a.n = n;
  a.input = gpu.upload(in.data(), in.size() * 2) + (misaligned ? 2 : 0);
  a.topk_weights = gpu.upload(weights.data(), weights.size() * 4);
  a.out = gpu.poisoned(want.size() * 2);
  ASSERT_EQ(hm_moe_reduce(gpu.ctx, &r, &a, nullptr), HM_SUCCESS) << last_error();
  ASSERT_EQ(hm_stream_synchronize(gpu.ctx, nullptr), HM_SUCCESS) << last_error();
  std::vector<uint16_t> got(want.size());
  ASSERT_EQ(hm_copy_to_host(gpu.ctx, got.data(), a.out, got.size() * 2), HM_SUCCESS);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], want[i]) << (bf16 ? "bf16" : "f16") << " T=" << tokens << " top-" << top_k
                               << " n=" << n << (misaligned ? " misaligned" : "") << ": token "
                               << i / n << " column " << i % n;
}

TEST(MoeRoutingGpu, ReduceMatchesTheReferenceBitForBit) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  std::mt19937 rng(3);
  for (hm_dtype_t dtype : {HM_DTYPE_F16, HM_DTYPE_BF16}) {
    check_reduce(gpu, dtype, 1, 8, 2048, false, rng);
    check_reduce(gpu, dtype, 37, 8, 4096, false, rng);
    check_reduce(gpu, dtype, 300, 2, 2048, false, rng);
    check_reduce(gpu, dtype, 64, 1, 8, false, rng);
    check_reduce(gpu, dtype, 50, 4, 13, false, rng);  // scalar kernel: n % 8 != 0
    check_reduce(gpu, dtype, 20, 8, 256, true, rng);  // scalar kernel: in not 16-byte aligned
  }
}

// Two routings aligned on two streams at once, each equal to its reference.
TEST(MoeRoutingGpu, TwoStreamsAtOnce) {
  ASSERT_TRUE(cuda_driver_loaded());
  const Driver& cu = *cuda_driver();
  MoeCurrent current(cu);
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  std::mt19937 rng(4);
  Routing R[2];
  AlignBuffers b[2];
  CUstream streams[2] = {};
  for (int i = 0; i < 2; ++i) {
    R[i].tokens = i ? 4096 : 777;
    R[i].top_k = 8;
    R[i].experts = i ? 256 : 128;
    R[i].block = i ? 64 : 16;
    R[i].ids = random_ids(rng, size_t(R[i].tokens * R[i].top_k), 0, R[i].experts);
    b[i] = prepare(gpu, R[i]);
    ASSERT_CU(cu, cuStreamCreate(&streams[i], CU_STREAM_NON_BLOCKING));
  }
  for (int rep = 0; rep < 3; ++rep)
    for (int i = 0; i < 2; ++i)
      EXPECT_EQ(hm_moe_align(gpu.ctx, &b[i].routing, R[i].block, &b[i].out, streams[i]), HM_SUCCESS)
          << last_error();
  for (int i = 0; i < 2; ++i) {
    EXPECT_CU(cu, cuStreamSynchronize(streams[i]));
    expect_matches(gpu, b[i], R[i], "stream " + std::to_string(i));
    EXPECT_CU(cu, cuStreamDestroy(streams[i]));
  }
}

// Alignment then reduction captured once, replayed with new routings of the same shapes copied
// in between: the graph reads the routing at replay time, and no call synchronized or allocated.
TEST(MoeRoutingGpu, GraphCaptureReplaysWithNewRoutings) {
  ASSERT_TRUE(cuda_driver_loaded());
  const Driver& cu = *cuda_driver();
  MoeCurrent current(cu);
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  std::mt19937 rng(5);
  Routing R;
  R.tokens = 512;
  R.top_k = 8;
  R.experts = 128;
  R.block = 32;
  R.ids = random_ids(rng, size_t(R.tokens * R.top_k), 0, R.experts);
  AlignBuffers b = prepare(gpu, R);
  const int64_t n = 1024;
  std::vector<float> weights(R.ids.size(), 0.125f);
  std::vector<uint16_t> in(size_t(R.tokens * R.top_k * n));
  for (auto& x : in) x = hm::quant::bf16_from_float_rn(float(int(rng() % 64) - 32));
  hm_moe_reduce_args_t a;
  hm_moe_reduce_args_init(&a);
  a.dtype = HM_DTYPE_BF16;
  a.n = n;
  a.input = gpu.upload(in.data(), in.size() * 2);
  a.topk_weights = gpu.upload(weights.data(), weights.size() * 4);
  a.out = gpu.poisoned(size_t(R.tokens * n * 2));
  // Compile both kernels before the capture (the first call builds them).
  ASSERT_EQ(hm_moe_align(gpu.ctx, &b.routing, R.block, &b.out, nullptr), HM_SUCCESS)
      << last_error();
  ASSERT_EQ(hm_moe_reduce(gpu.ctx, &b.routing, &a, nullptr), HM_SUCCESS) << last_error();
  ASSERT_EQ(hm_stream_synchronize(gpu.ctx, nullptr), HM_SUCCESS);

  CUstream stream = nullptr;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  ASSERT_CU(cu, cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cu, cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  const hm_status_t s0 = hm_moe_align(gpu.ctx, &b.routing, R.block, &b.out, stream);
  const std::string e0 = last_error();
  const hm_status_t s1 = hm_moe_reduce(gpu.ctx, &b.routing, &a, stream);
  const std::string e1 = last_error();
  const CUresult ended = cu.cuStreamEndCapture(stream, &graph);
  EXPECT_EQ(s0, HM_SUCCESS) << e0;
  EXPECT_EQ(s1, HM_SUCCESS) << e1;
  ASSERT_EQ(ended, CUDA_SUCCESS) << cu.failure(ended, "cuStreamEndCapture");
  ASSERT_CU(cu, cuGraphInstantiateWithFlags(&exec, graph, 0));
  for (int replay = 0; replay < 3; ++replay) {
    R.ids = random_ids(rng, R.ids.size(), -1, R.experts);
    ASSERT_EQ(hm_copy_to_device(gpu.ctx, b.routing.topk_ids, R.ids.data(), R.ids.size() * 4),
              HM_SUCCESS);
    ASSERT_CU(cu, cuGraphLaunch(exec, stream));
    ASSERT_CU(cu, cuStreamSynchronize(stream));
    expect_matches(gpu, b, R, "replay " + std::to_string(replay));
    std::vector<uint16_t> want(size_t(R.tokens * n)), got(want.size());
    hm::quant::moe_reduce(in.data(), weights.data(), R.ids.data(), nullptr, R.tokens, R.top_k,
                          R.experts, R.experts, n, true, want.data());
    ASSERT_EQ(hm_copy_to_host(gpu.ctx, got.data(), a.out, got.size() * 2), HM_SUCCESS);
    EXPECT_TRUE(got == want) << "reduce, replay " << replay;
  }
  EXPECT_CU(cu, cuGraphExecDestroy(exec));
  EXPECT_CU(cu, cuGraphDestroy(graph));
  EXPECT_CU(cu, cuStreamDestroy(stream));
}

}  // namespace
