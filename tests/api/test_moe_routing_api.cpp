// hm_moe_align_sizes / hm_moe_align / hm_moe_reduce on the mock driver: every argument check, and
// whole calls compared with the host reference (src/quant/moe_routing.cpp). The mock runs the
// kernels as serial host loops over the launched parameter struct (tests/mock_driver), so this
// checks the launcher and the argument marshalling; the kernels' thread mapping is checked on a
// GPU (tests/gpu/test_moe_routing_gpu.cpp).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "api/support/mock_driver_test.hpp"
#include "humming.h"
#include "mock_driver/mock_loader.hpp"
#include "quant/moe_routing.hpp"

namespace {

using hm::test::last_error;
using hm::test::TemporaryDirectory;

class MoeRoutingApi : public hm::test::MockDriverTest {
 protected:
  static void SetUpTestSuite() { cache_ = new TemporaryDirectory("humming-moe-api-test"); }
  static void TearDownTestSuite() {
    delete cache_;
    cache_ = nullptr;
  }
  void SetUp() override {
    ctx_ = hm::test::create_context(cache_->path(), 0);
    ASSERT_NE(ctx_, nullptr);
  }
  void TearDown() override {
    for (uint64_t p : allocations_) hm_device_free(ctx_, p);
    hm_context_destroy(ctx_);
  }
  uint64_t alloc(size_t bytes) {
    uint64_t p = 0;
    EXPECT_EQ(hm_device_alloc(ctx_, bytes ? bytes : 4, &p), HM_SUCCESS) << last_error();
    allocations_.push_back(p);
    return p;
  }
  template <typename T>
  uint64_t upload(const std::vector<T>& v) {
    const uint64_t p = alloc(v.size() * sizeof(T));
    EXPECT_EQ(hm_copy_to_device(ctx_, p, v.data(), v.size() * sizeof(T)), HM_SUCCESS);
    return p;
  }
  template <typename T>
  std::vector<T> download(uint64_t p, size_t count) {
    std::vector<T> v(count);
    EXPECT_EQ(hm_copy_to_host(ctx_, v.data(), p, count * sizeof(T)), HM_SUCCESS) << last_error();
    return v;
  }
  static TemporaryDirectory* cache_;
  hm_context_t* ctx_ = nullptr;
  std::vector<uint64_t> allocations_;
};
TemporaryDirectory* MoeRoutingApi::cache_ = nullptr;

#define EXPECT_FAILS(call, status, needle)                                   \
  do {                                                                       \
    EXPECT_EQ((call), (status)) << #call;                                    \
    EXPECT_NE(last_error().find(needle), std::string::npos) << last_error(); \
  } while (0)

TEST_F(MoeRoutingApi, InitHelpersSetStructSize) {
  hm_moe_routing_t r;
  std::memset(&r, 0xFF, sizeof r);
  hm_moe_routing_init(&r);
  EXPECT_EQ(r.struct_size, sizeof r);
  EXPECT_EQ(r.topk_ids | r.expert_map, 0u);
  EXPECT_EQ(r.num_tokens + r.top_k + r.num_experts + r.num_local_experts, 0);
  hm_moe_align_sizes_t s;
  hm_moe_align_sizes_init(&s);
  EXPECT_EQ(s.struct_size, sizeof s);
  hm_moe_align_out_t o;
  std::memset(&o, 0xFF, sizeof o);
  hm_moe_align_out_init(&o);
  EXPECT_EQ(o.struct_size, sizeof o);
  EXPECT_EQ(o.sorted_ids | o.expert_ids | o.num_tokens_padded | o.expert_offsets | o.expert_counts,
            0u);
  hm_moe_reduce_args_t a;
  hm_moe_reduce_args_init(&a);
  EXPECT_EQ(a.struct_size, sizeof a);
  hm_moe_routing_init(nullptr);  // no-ops
  hm_moe_align_sizes_init(nullptr);
  hm_moe_align_out_init(nullptr);
  hm_moe_reduce_args_init(nullptr);
}

TEST_F(MoeRoutingApi, SizesAreTheReferenceSizes) {
  hm_moe_routing_t r;
  hm_moe_routing_init(&r);
  r.num_tokens = 1000;
  r.top_k = 8;
  r.num_experts = 256;
  hm_moe_align_sizes_t s;
  hm_moe_align_sizes_init(&s);
  ASSERT_EQ(hm_moe_align_sizes(&r, 64, &s), HM_SUCCESS) << last_error();
  const auto want = hm::quant::moe_align_sizes(1000, 8, 256, 0, 64, false);
  EXPECT_EQ(s.sorted_ids, want.sorted_ids);
  EXPECT_EQ(s.expert_ids, want.expert_ids);
  EXPECT_EQ(s.expert_offsets, 257);
  EXPECT_EQ(s.expert_counts, 256);
  EXPECT_FAILS(hm_moe_align_sizes(nullptr, 64, &s), HM_ERROR_INVALID_ARGUMENT, "routing");
  EXPECT_FAILS(hm_moe_align_sizes(&r, 64, nullptr), HM_ERROR_INVALID_ARGUMENT, "out");
  EXPECT_FAILS(hm_moe_align_sizes(&r, 100, &s), HM_ERROR_INVALID_ARGUMENT, "block_size");
  hm_moe_routing_t bad = r;
  bad.struct_size = 4;
  EXPECT_FAILS(hm_moe_align_sizes(&bad, 64, &s), HM_ERROR_INVALID_STRUCT_SIZE, "routing");
  bad = r;
  bad.num_local_experts = 32;
  EXPECT_FAILS(hm_moe_align_sizes(&bad, 64, &s), HM_ERROR_INVALID_ARGUMENT, "expert_map");
  bad = r;
  bad.num_tokens = HM_MAX_M;
  EXPECT_FAILS(hm_moe_align_sizes(&bad, 64, &s), HM_ERROR_INVALID_ARGUMENT, "int32");
}

TEST_F(MoeRoutingApi, AlignChecksEveryArgument) {
  const std::vector<int32_t> ids(64, 1);
  hm_moe_routing_t r;
  hm_moe_routing_init(&r);
  r.topk_ids = upload(ids);
  r.num_tokens = 16;
  r.top_k = 4;
  r.num_experts = 8;
  hm_moe_align_out_t o;
  hm_moe_align_out_init(&o);
  const uint64_t buf = alloc(1 << 16);
  o.sorted_ids = buf;
  o.expert_ids = buf + 16384;
  o.num_tokens_padded = buf + 32768;
  o.expert_offsets = buf + 32772;
  EXPECT_FAILS(hm_moe_align(nullptr, &r, 16, &o, nullptr), HM_ERROR_INVALID_ARGUMENT, "context");
  EXPECT_FAILS(hm_moe_align(ctx_, nullptr, 16, &o, nullptr), HM_ERROR_INVALID_ARGUMENT, "routing");
  EXPECT_FAILS(hm_moe_align(ctx_, &r, 16, nullptr, nullptr), HM_ERROR_INVALID_ARGUMENT, "out");
  EXPECT_FAILS(hm_moe_align(ctx_, &r, 12, &o, nullptr), HM_ERROR_INVALID_ARGUMENT, "block_size");
  auto refused = [&](hm_status_t status, const char* needle, auto&& edit) {
    hm_moe_routing_t r2 = r;
    hm_moe_align_out_t o2 = o;
    edit(r2, o2);
    EXPECT_FAILS(hm_moe_align(ctx_, &r2, 16, &o2, nullptr), status, needle);
  };
  using R = hm_moe_routing_t;
  using O = hm_moe_align_out_t;
  refused(HM_ERROR_INVALID_ARGUMENT, "topk_ids", [](R& x, O&) { x.topk_ids = 0; });
  refused(HM_ERROR_MISALIGNED, "topk_ids", [](R& x, O&) { x.topk_ids += 2; });
  refused(HM_ERROR_MISALIGNED, "expert_map", [&](R& x, O&) { x.expert_map = buf + 1; });
  refused(HM_ERROR_INVALID_ARGUMENT, "sorted_ids", [](R&, O& x) { x.sorted_ids = 0; });
  refused(HM_ERROR_INVALID_ARGUMENT, "expert_ids", [](R&, O& x) { x.expert_ids = 0; });
  refused(HM_ERROR_INVALID_ARGUMENT, "num_tokens_padded",
          [](R&, O& x) { x.num_tokens_padded = 0; });
  refused(HM_ERROR_INVALID_ARGUMENT, "expert_offsets", [](R&, O& x) { x.expert_offsets = 0; });
  refused(HM_ERROR_MISALIGNED, "expert_counts", [&](R&, O& x) { x.expert_counts = buf + 40002; });
  refused(HM_ERROR_INVALID_STRUCT_SIZE, "out", [](R&, O& x) { x.struct_size = 8; });
  refused(HM_ERROR_INVALID_ARGUMENT, "top_k", [](R& x, O&) { x.top_k = HM_MAX_TOP_K + 1; });
  refused(HM_ERROR_INVALID_ARGUMENT, "num_local_experts",
          [](R& x, O&) { x.num_local_experts = HM_MOE_MAX_LOCAL_EXPERTS + 1; });
  // Buffers whose allocation ends before their size (hm_moe_align_sizes' counts of int32; the
  // routing's [num_tokens][top_k] ids and [num_experts] map): refused before any launch.
  const uint64_t end = buf + (1 << 16);
  refused(HM_ERROR_INVALID_ARGUMENT, "out->sorted_ids (0x",
          [&](R&, O& x) { x.sorted_ids = end - 64; });
  refused(HM_ERROR_INVALID_ARGUMENT, "out->expert_offsets (0x",
          [&](R&, O& x) { x.expert_offsets = end - 4 * 8; });  // 8 experts: 9 offsets
  refused(HM_ERROR_INVALID_ARGUMENT, "routing->topk_ids (0x",
          [&](R& x, O&) { x.topk_ids = end - 64 * 4 + 4; });
  refused(HM_ERROR_INVALID_ARGUMENT, "bytes from the end of its allocation",
          [&](R& x, O&) { x.expert_map = end - 4 * 7; });

  hm_context_t* other = hm::test::create_context(cache_->path(), 1);
  ASSERT_NE(other, nullptr);
  uint64_t foreign = 0;
  ASSERT_EQ(hm_device_alloc(other, 4096, &foreign), HM_SUCCESS);
  refused(HM_ERROR_WRONG_DEVICE, "sorted_ids", [&](R&, O& x) { x.sorted_ids = foreign; });
  refused(HM_ERROR_WRONG_DEVICE, "topk_ids", [&](R& x, O&) { x.topk_ids = foreign; });
  hm_device_free(other, foreign);
  hm_context_destroy(other);

  hm_context_t* aot = hm::test::create_context(cache_->path(), HM_NO_DEVICE, "sm_80");
  ASSERT_NE(aot, nullptr);
  EXPECT_FAILS(hm_moe_align(aot, &r, 16, &o, nullptr), HM_ERROR_NO_DEVICE, "device");
  hm_context_destroy(aot);
}

// Whole alignments through the mock, equal to the reference element for element, with and
// without an expert map and the optional counts; the launch shape is the documented one.
TEST_F(MoeRoutingApi, AlignMatchesTheReference) {
  std::mt19937 rng(3);
  hm::test::MockControl mock;
  for (int use_map = 0; use_map < 2; ++use_map) {
    for (int64_t tokens : {0, 1, 37, 700}) {
      const int32_t top_k = 4, experts = 32, block = 16;
      std::vector<int32_t> ids(size_t(tokens * top_k));
      for (auto& id : ids) id = int32_t(rng() % 40) - 4;  // some out of range
      std::vector<int32_t> map(experts, -1);
      for (int32_t g = 0; g < experts; g += 2) map[g] = g / 2;  // 16 local experts
      hm_moe_routing_t r;
      hm_moe_routing_init(&r);
      r.topk_ids = upload(ids.empty() ? std::vector<int32_t>{0} : ids);
      r.num_tokens = tokens;
      r.top_k = top_k;
      r.num_experts = experts;
      if (use_map) {
        r.expert_map = upload(map);
        r.num_local_experts = 16;
      }
      hm_moe_align_sizes_t s;
      hm_moe_align_sizes_init(&s);
      ASSERT_EQ(hm_moe_align_sizes(&r, block, &s), HM_SUCCESS) << last_error();
      hm_moe_align_out_t o;
      hm_moe_align_out_init(&o);
      o.sorted_ids = alloc(size_t(s.sorted_ids) * 4);
      o.expert_ids = alloc(size_t(s.expert_ids) * 4);
      o.num_tokens_padded = alloc(4);
      o.expert_offsets = alloc(size_t(s.expert_offsets) * 4);
      o.expert_counts = alloc(size_t(s.expert_counts) * 4);
      mock.reset();
      ASSERT_EQ(hm_moe_align(ctx_, &r, block, &o, nullptr), HM_SUCCESS) << last_error();
      auto launch = mock.last_launch();
      ASSERT_TRUE(launch.has_value());
      EXPECT_EQ(std::string(launch->function), "hm_moe_align");
      EXPECT_EQ(launch->block[0], 1024u);
      EXPECT_EQ(launch->grid[0], uint32_t(std::max<int64_t>(1, (tokens * top_k + 4095) / 4096)));
      EXPECT_GT(launch->shared_memory_bytes, 0u);
      EXPECT_EQ(launch->executed, 1);

      hm::quant::MoeAlignInput in;
      in.topk_ids = ids.data();
      in.tokens = tokens;
      in.top_k = top_k;
      in.num_experts = experts;
      in.local_experts = use_map ? 16 : 0;
      in.block_size = block;
      in.expert_map = use_map ? map.data() : nullptr;
      const hm::quant::MoeAlignOutput want = hm::quant::moe_align(in);
      EXPECT_EQ(download<int32_t>(o.sorted_ids, size_t(s.sorted_ids)), want.sorted_ids);
      EXPECT_EQ(download<int32_t>(o.expert_ids, size_t(s.expert_ids)), want.expert_ids);
      EXPECT_EQ(download<int32_t>(o.num_tokens_padded, 1)[0], want.num_tokens_padded);
      EXPECT_EQ(download<int32_t>(o.expert_offsets, size_t(s.expert_offsets)), want.expert_offsets);
      EXPECT_EQ(download<int32_t>(o.expert_counts, size_t(s.expert_counts)), want.expert_counts);
    }
  }
}

TEST_F(MoeRoutingApi, ReduceChecksArgumentsAndMatchesTheReference) {
  std::mt19937 rng(5);
  const int64_t tokens = 9;
  const int32_t top_k = 3, experts = 6;
  std::vector<int32_t> ids(size_t(tokens * top_k));
  for (auto& id : ids) id = int32_t(rng() % 8) - 1;  // -1 and 6 are dropped
  std::vector<float> weights(ids.size());
  for (auto& w : weights) w = float(rng() % 64) / 64.0f;
  hm_moe_routing_t r;
  hm_moe_routing_init(&r);
  r.topk_ids = upload(ids);
  r.num_tokens = tokens;
  r.top_k = top_k;
  r.num_experts = experts;
  hm::test::MockControl mock;
  for (hm_dtype_t dtype : {HM_DTYPE_F16, HM_DTYPE_BF16}) {
    for (int64_t n : {16, 13}) {
      std::vector<uint16_t> in(size_t(tokens * top_k * n));
      for (auto& x : in)
        x = dtype == HM_DTYPE_BF16
                ? hm::quant::bf16_from_float_rn(float(int(rng() % 200) - 100) / 8)
                : hm::quant::f16_from_float_rn(float(int(rng() % 200) - 100) / 8);
      hm_moe_reduce_args_t a;
      hm_moe_reduce_args_init(&a);
      a.dtype = dtype;
      a.n = n;
      a.input = upload(in);
      a.topk_weights = upload(weights);
      a.out = alloc(size_t(tokens * n * 2));
      mock.reset();
      ASSERT_EQ(hm_moe_reduce(ctx_, &r, &a, nullptr), HM_SUCCESS) << last_error();
      auto launch = mock.last_launch();
      ASSERT_TRUE(launch.has_value());
      const std::string dt = dtype == HM_DTYPE_BF16 ? "bf16" : "f16";
      EXPECT_EQ(std::string(launch->function), "hm_moe_reduce_" + dt + (n % 8 ? "_v1" : "_v8"));
      EXPECT_EQ(launch->executed, 1);
      std::vector<uint16_t> want(size_t(tokens * n));
      hm::quant::moe_reduce(in.data(), weights.data(), ids.data(), nullptr, tokens, top_k, experts,
                            experts, n, dtype == HM_DTYPE_BF16, want.data());
      EXPECT_EQ(download<uint16_t>(a.out, want.size()), want) << dt << " n=" << n;

      auto refused = [&](hm_status_t status, const char* needle, auto&& edit) {
        hm_moe_reduce_args_t b = a;
        edit(b);
        EXPECT_FAILS(hm_moe_reduce(ctx_, &r, &b, nullptr), status, needle);
      };
      using A = hm_moe_reduce_args_t;
      refused(HM_ERROR_UNSUPPORTED, "dtype", [](A& b) { b.dtype = HM_DTYPE_F32; });
      refused(HM_ERROR_INVALID_ARGUMENT, "args->n", [](A& b) { b.n = 0; });
      refused(HM_ERROR_INVALID_ARGUMENT, "args->input", [](A& b) { b.input = 0; });
      refused(HM_ERROR_INVALID_ARGUMENT, "topk_weights", [](A& b) { b.topk_weights = 0; });
      refused(HM_ERROR_MISALIGNED, "args->out", [](A& b) { b.out += 1; });
      refused(HM_ERROR_MISALIGNED, "topk_weights", [](A& b) { b.topk_weights += 2; });
      refused(HM_ERROR_INVALID_ARGUMENT, "overlap", [](A& b) { b.out = b.input + 2; });
      refused(HM_ERROR_INVALID_STRUCT_SIZE, "args", [](A& b) { b.struct_size = 4; });
      // Allocations shorter than [tokens * top_k][n] in, [tokens][n] out, [tokens][top_k] weights.
      refused(HM_ERROR_INVALID_ARGUMENT, "args->input (0x", [](A& b) { b.input += 16; });
      refused(HM_ERROR_INVALID_ARGUMENT, "args->out (0x", [](A& b) { b.out += 16; });
      refused(HM_ERROR_INVALID_ARGUMENT, "args->topk_weights (0x",
              [](A& b) { b.topk_weights += 16; });
    }
  }
  EXPECT_FAILS(hm_moe_reduce(ctx_, &r, nullptr, nullptr), HM_ERROR_INVALID_ARGUMENT, "args");
}

}  // namespace
