// The MoE GEMM (family moe_wgmma: indexed, grouped contiguous and grouped masked) through the
// public plan API on an sm_90a GPU, against an f64 per-expert reference on the host-dequantized
// weights. The indexed routing (sort by expert, pad to the plan's block size) and the grouped
// layouts are made here on the host, as an engine would. Skipped (exit 77) without a GPU; on a
// GPU other than sm_90 the plan must be refused, naming why.
#include <cmath>
#include <cstdint>
#include <algorithm>
#include <climits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/support/cuda_driver.hpp"
#include "gpu/support/dense_layer.hpp"
#include "humming.h"

namespace {

using hm::gpu_test::Gpu;
using hm::gpu_test::Layer;
using hm::gpu_test::last_error;

struct Routing {
  std::vector<int32_t> sorted_ids, expert_ids;
  int32_t num_padded = 0;
};

// Each expert's assignments (flat ids t * top_k + j with route[id] == e) in increasing order,
// padded with the sentinel m * top_k to a multiple of `block`; -1 routes are dropped.
Routing align(const std::vector<int32_t>& route, int64_t m, int top_k, int experts, int block,
              int64_t capacity) {
  Routing r;
  const int32_t sentinel = static_cast<int32_t>(m * top_k);
  r.sorted_ids.assign(static_cast<size_t>(capacity), sentinel);
  r.expert_ids.assign(static_cast<size_t>(capacity / block), -1);
  int64_t pos = 0;
  for (int e = 0; e < experts; ++e) {
    int64_t count = 0;
    for (int64_t id = 0; id < m * top_k; ++id)
      if (route[id] == e) r.sorted_ids[pos + count++] = static_cast<int32_t>(id);
    const int64_t blocks = (count + block - 1) / block;
    for (int64_t b = 0; b < blocks; ++b) r.expert_ids[pos / block + b] = e;
    pos += blocks * block;
  }
  EXPECT_LE(pos, capacity);
  r.num_padded = static_cast<int32_t>(pos);
  return r;
}

enum class Spread { kRandom, kOneExpert, kSomeDropped };

// Random routing of m tokens to top_k distinct experts each.
std::vector<int32_t> route(int64_t m, int top_k, int experts, Spread spread, std::mt19937& rng) {
  std::vector<int32_t> r(static_cast<size_t>(m * top_k));
  std::vector<int32_t> order(experts);
  for (int64_t t = 0; t < m; ++t) {
    for (int e = 0; e < experts; ++e) order[e] = e;
    std::shuffle(order.begin(), order.end(), rng);
    for (int j = 0; j < top_k; ++j) {
      int32_t e = order[j];
      if (spread == Spread::kOneExpert) e = j == 0 ? 3 % experts : order[j];
      if (spread == Spread::kSomeDropped && e % 3 == 1) e = -1;  // experts on another rank
      r[t * top_k + j] = e;
    }
  }
  return r;
}

// A call's activations on the device: f16 / bf16 codes, or 8-bit codes quantized per token (and
// K group) by the host quantizer with their f32 scales; `values` are the exact values (f64).
struct Input {
  uint64_t codes = 0, scales = 0;
  std::vector<double> values;
};

Input upload_activations(Gpu& gpu, const Layer& L, int64_t rows, std::mt19937& rng) {
  Input in;
  if ((L.act & 0xFFu) == 8) {  // bits 0..7 of a dtype: its width (humming.h)
    hm::gpu_test::Activations8 a = hm::gpu_test::quantized_activations(L, rows, rng);
    in.codes = gpu.upload(a.codes.data(), a.codes.size());
    in.scales = gpu.upload(a.scales.data(), a.scales.size() * 4);
    in.values = std::move(a.values);
  } else {
    hm::gpu_test::Activations a = hm::gpu_test::random_activations(L, rows, rng);
    in.codes = gpu.upload(a.codes.data(), a.codes.size() * 2);
    in.values = std::move(a.values);
  }
  return in;
}

hm_launch_params_t* params_for(const hm::gpu_test::DeviceWeights& w, const Input& a, uint64_t c,
                               int64_t m) {
  hm_launch_params_t* p = hm::gpu_test::params_for(w, a.codes, c, m, 0, 0);
  if (a.scales != 0) hm_launch_params_set_pointer(p, HM_ARG_ACT_SCALES, a.scales);
  return p;
}

struct Result {
  double error = 1e9;     // relative Frobenius error over the routed rows
  int64_t wrong_rows = 0; // rows of dropped assignments that were written
};

Result run(Gpu& gpu, Layer& L, int64_t m, int top_k, Spread spread, std::mt19937& rng,
           const char* tuning = nullptr) {
  Result result;
  hm_plan_options_t options;
  hm_plan_options_init(&options);
  options.tuning_json = tuning;
  hm_plan_t* plan = nullptr;
  EXPECT_EQ(hm_plan_create(gpu.ctx, L.format, &options, &plan), HM_SUCCESS) << last_error();
  if (!plan) return result;
  EXPECT_EQ(hm_plan_prepare(plan), HM_SUCCESS) << last_error();
  int32_t block = 0;
  int64_t capacity = 0;
  EXPECT_EQ(hm_plan_moe_block_size(plan, m, &block), HM_SUCCESS) << last_error();
  EXPECT_EQ(hm_plan_moe_rows(plan, m, top_k, &capacity), HM_SUCCESS) << last_error();
  const std::vector<int32_t> routes = route(m, top_k, L.experts, spread, rng);
  const Routing r = align(routes, m, top_k, L.experts, block, capacity);

  const Input a = upload_activations(gpu, L, m, rng);
  const int64_t rows = m * top_k;
  const uint64_t c = gpu.poisoned(static_cast<size_t>(rows * L.n * 2));
  hm::gpu_test::DeviceWeights w = hm::gpu_test::upload_weights(gpu, L);
  hm_launch_params_t* p = params_for(w, a, c, m);
  hm_launch_params_set_pointer(p, HM_ARG_SORTED_IDS,
                               gpu.upload(r.sorted_ids.data(), r.sorted_ids.size() * 4));
  hm_launch_params_set_pointer(p, HM_ARG_EXPERT_IDS,
                               gpu.upload(r.expert_ids.data(), r.expert_ids.size() * 4));
  hm_launch_params_set_pointer(p, HM_ARG_NUM_TOKENS_PADDED, gpu.upload(&r.num_padded, 4));
  hm_launch_params_set_int(p, HM_ARG_TOP_K, top_k);
  EXPECT_EQ(hm_plan_gemm(plan, p, nullptr), HM_SUCCESS) << last_error();
  EXPECT_EQ(hm_stream_synchronize(gpu.ctx, nullptr), HM_SUCCESS) << last_error();
  std::vector<uint16_t> out(static_cast<size_t>(rows * L.n));
  EXPECT_EQ(hm_copy_to_host(gpu.ctx, out.data(), c, out.size() * 2), HM_SUCCESS) << last_error();
  hm_launch_params_destroy(p);
  hm_plan_destroy(plan);
  gpu.free_all();

  double num = 0, den = 0;
  for (int64_t id = 0; id < rows; ++id) {
    const int32_t e = routes[id];
    const uint16_t* got_row = &out[static_cast<size_t>(id * L.n)];
    if (e < 0) {
      for (int64_t j = 0; j < L.n; ++j)
        if (got_row[j] != 0xFFFF) {
          ++result.wrong_rows;
          break;
        }
      continue;
    }
    const double* x = &a.values[static_cast<size_t>((id / top_k) * L.k)];
    for (int64_t j = 0; j < L.n; ++j) {
      const float* wrow = &L.deq[static_cast<size_t>((e * L.n + j) * L.k)];
      double s = L.has_bias ? L.bias[static_cast<size_t>(e * L.n + j)] : 0.0;
      for (int64_t l = 0; l < L.k; ++l) s += x[l] * wrow[l];
      double got = 0;
      hm_dtype_decode(L.out, got_row[j], &got);
      if (!std::isfinite(got)) return result;
      num += (got - s) * (got - s);
      den += s * s;
    }
  }
  result.error = std::sqrt(num / std::max(den, 1e-30));
  return result;
}

bool on_sm90(Gpu& gpu) {
  hm_device_info_t info;
  hm_device_info_init(&info);
  EXPECT_EQ(hm_context_device_info(gpu.ctx, &info), HM_SUCCESS) << last_error();
  return std::string(info.arch) == "sm_90a";
}

struct MoeCase {
  const char* text;
  double bound;
};
const MoeCase kCases[] = {
    {"w=uint4b8 a=f16 c=f16 s=f16:g128 n=192 k=512 e=8", hm::gpu_test::kF16Bound},
    {"w=uint4 a=bf16 c=bf16 s=bf16:g64 zp=uint4 bias=1 n=136 k=320 e=5",
     hm::gpu_test::kBf16Bound},
    {"w=int8 a=f16 c=f16 s=f16:channel n=256 k=256 e=16", hm::gpu_test::kF16Bound},
    // 8-bit activations (quantized per token by the host quantizer; the bound is the kernel's
    // f32 accumulation and the output rounding, as in test_dense_gemm_a8.cpp): gpt-oss-style
    // MXFP4 experts with e4m3 and a bias, DeepSeek-style FP8 experts (1 x 128 activation
    // groups, 128 x 128 weight blocks, N ending inside a block), GPTQ int4 g128 with int8, and
    // K = 320 (an odd number of 64-wide chunks: the last 128-k step is half full); the same
    // MXFP4 experts with int8 (rule R11, the group exponents shifted into half-step counts).
    {"w=e2m1 a=e4m3 c=bf16 s=ue8m0:g32+tensor bias=1 n=136 k=640 e=6", 1e-2},
    {"w=e4m3 a=e4m3:g128 c=bf16 s=f32:b128x128 n=200 k=512 e=8", 1e-2},
    {"w=uint4b8 a=int8 c=f16 s=f16:g128 n=192 k=384 e=8", 2e-3},
    {"w=uint4b8 a=e4m3 c=f16 s=f16:channel n=64 k=320 e=4", 2e-3},
    {"w=e2m1 a=int8 c=bf16 s=ue8m0:g32+tensor bias=1 n=136 k=640 e=6", 1e-2},
    // GPTQ g64 / g32 experts on 8-bit activations: a partial set per group slot, tiles of at
    // most 64 / 32 rows (cases 8 and 9).
    {"w=uint4b8 a=e4m3 c=bf16 s=bf16:g64 n=136 k=640 e=6", 1e-2},
    {"w=uint4 zp=uint4 a=int8 c=f16 s=f16:g32 bias=1 n=72 k=320 e=4", 2e-3},
};

// Group scales under a 128-k step on 8-bit activations: moe_wgmma tiles of at most 32 (g32)
// or 64 (g64) rows (wider ones are refused at plan creation); moe_mma takes any tile.
bool folds_under_a_step(const std::string& text) {
  return (text.find(":g32") != std::string::npos || text.find(":g64") != std::string::npos) &&
         text.find("ue8m0") == std::string::npos &&
         (text.find("a=e4m3") != std::string::npos || text.find("a=e5m2") != std::string::npos ||
          text.find("a=int8") != std::string::npos);
}

class MoeGemm : public testing::TestWithParam<MoeCase> {};

TEST_P(MoeGemm, MatchesThePerExpertReferenceAtEveryRange) {
  Gpu gpu;
  if (!on_sm90(gpu)) GTEST_SKIP() << "the MoE kernel is sm_90a only";
  std::mt19937 rng(7);
  Layer L = hm::gpu_test::make_layer(GetParam().text, rng);
  // M through every default range (E / 2, 2E, 4E and beyond), top_k 1 to 4.
  const std::pair<int64_t, int> calls[] = {{1, 1}, {1, 4},  {3, 2},   {7, 3},    {12, 2},
                                           {20, 3}, {37, 4}, {100, 2}, {300, 2}, {1100, 4}};
  for (const auto& [m, top_k] : calls) {
    const int k = std::min(top_k, L.experts);
    const Result r = run(gpu, L, m, k, Spread::kRandom, rng);
    EXPECT_LE(r.error, GetParam().bound) << GetParam().text << " M=" << m << " top_k=" << k;
  }
}

TEST_P(MoeGemm, OneExpertTakesEveryTokenAndDroppedRowsAreNotWritten) {
  Gpu gpu;
  if (!on_sm90(gpu)) GTEST_SKIP() << "the MoE kernel is sm_90a only";
  std::mt19937 rng(11);
  Layer L = hm::gpu_test::make_layer(GetParam().text, rng);
  for (int64_t m : {5, 130}) {
    const Result one = run(gpu, L, m, 2, Spread::kOneExpert, rng);
    EXPECT_LE(one.error, GetParam().bound) << "all on one expert, M=" << m;
    const Result dropped = run(gpu, L, m, 3, Spread::kSomeDropped, rng);
    EXPECT_LE(dropped.error, GetParam().bound) << "some experts on another rank, M=" << m;
    EXPECT_EQ(dropped.wrong_rows, 0) << "rows of experts on another rank were written";
  }
}

TEST_P(MoeGemm, ForcedTilesWithAndWithoutClusterSplits) {
  Gpu gpu;
  if (!on_sm90(gpu)) GTEST_SKIP() << "the MoE kernel is sm_90a only";
  std::mt19937 rng(13);
  Layer L = hm::gpu_test::make_layer(GetParam().text, rng);
  for (const char* tuning :
       {R"({"dense": [{"kernel": "moe_wgmma", "block_m": 8, "stages": 4}]})",
        R"({"dense": [{"kernel": "moe_wgmma", "block_m": 24, "warps": 8, "stages": 3,
                       "pipeline": "mbarrier", "dequant_ahead": true, "split": "cluster",
                       "blocks_per_sm": 4}]})",
        R"({"dense": [{"kernel": "moe_wgmma", "block_m": 128, "warps": 4, "stages": 4,
                       "split": "cluster"}]})",
        // TMA weights and codes over every expert, the copying warp gathering the rows of A.
        R"({"dense": [{"kernel": "moe_wgmma", "block_m": 8, "stages": 8, "blocks_per_sm": 4,
                       "pipeline": "mbarrier", "copy": "tma", "producer": true,
                       "split": "cluster"}]})",
        R"({"dense": [{"kernel": "moe_wgmma", "block_m": 32, "warps": 8, "stages": 6,
                       "pipeline": "mbarrier", "copy": "tma", "producer": true,
                       "dequant_ahead": true, "blocks_per_sm": 1}]})",
        // The mma.sync family (moe_mma: sm_75 on), forced on the sm_90a GPU: 8 rows, one strip
        // per warp, and 64 rows, two strips per warp.
        R"({"dense": [{"kernel": "moe_mma", "block_m": 8, "warps": 4, "warp_strips": 1}]})",
        R"({"dense": [{"kernel": "moe_mma", "block_m": 64, "warps": 4, "warp_strips": 2}]})"}) {
    const std::string t = tuning;
    if (folds_under_a_step(GetParam().text) && t.find("\"block_m\": 128") != std::string::npos)
      continue;  // refused at plan creation (the API tests check the refusals)
    for (int64_t m : {2, 77}) {
      const Result r = run(gpu, L, m, std::min(3, L.experts), Spread::kRandom, rng, tuning);
      EXPECT_LE(r.error, GetParam().bound) << tuning << " M=" << m;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, MoeGemm, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<MoeCase>& info) {
                           return "case" + std::to_string(info.index);
                         });

// A gpt-oss MXFP4 expert set (e2m1 blocks [E][N][K/32][16], e8m0 scales, a bf16 bias)
// converted by hm_convert_layer for bf16 and for e4m3 activations and served by the MoE GEMM as
// converted (issue 18: the converters' MoE outputs run end to end), against the f64 per-expert
// reference on the converted canonical weight.
TEST(MoeGemmConvert, GptOssMxfp4ExpertsServeAsConverted) {
  Gpu gpu;
  if (!on_sm90(gpu)) GTEST_SKIP() << "the MoE kernel is sm_90a only";
  const int64_t e = 4, n = 192, k = 512, kb = k / 32;
  std::mt19937 rng(43);
  std::vector<uint8_t> blocks(static_cast<size_t>(e * n * kb * 16)),
      scales(static_cast<size_t>(e * n * kb));
  for (auto& b : blocks) b = static_cast<uint8_t>(rng());
  std::uniform_int_distribution<int> exponent(118, 124);  // 2^-9 .. 2^-3
  for (auto& s : scales) s = static_cast<uint8_t>(exponent(rng));
  std::vector<uint16_t> bias(static_cast<size_t>(e * n));
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  for (auto& b : bias) {
    uint32_t code = 0;
    hm_dtype_encode(HM_DTYPE_BF16, uni(rng), &code);
    b = static_cast<uint16_t>(code);
  }
  using hm::gpu_test::checkpoint_tensor;
  const hm_checkpoint_tensor_t t[3] = {
      checkpoint_tensor("model.layers.0.mlp.experts.down_proj_blocks", "U8", {e, n, kb, 16},
                        blocks),
      checkpoint_tensor("model.layers.0.mlp.experts.down_proj_scales", "U8", {e, n, kb}, scales),
      checkpoint_tensor("model.layers.0.mlp.experts.down_proj_bias", "BF16", {e, n}, bias)};
  for (hm_dtype_t act : {HM_DTYPE_BF16, HM_DTYPE_E4M3}) {
    hm_convert_options_t options;
    hm_convert_options_init(&options);
    options.activation = act;
    hm_converted_layer_t* converted = nullptr;
    ASSERT_EQ(hm_convert_layer(HM_SCHEME_MXFP4, t, 3, &options, &converted), HM_SUCCESS)
        << last_error();
    Layer L;
    std::string text;
    ASSERT_NO_FATAL_FAILURE(hm::gpu_test::converted_layer(converted, &L, &text));
    hm_converted_layer_destroy(converted);
    EXPECT_NE(text.find("e=4"), std::string::npos) << text;
    ASSERT_TRUE(L.has_bias) << text;  // the checkpoint's bias, converted
    for (const auto& [m, top_k] : {std::pair<int64_t, int>{1, 2}, {33, 4}, {200, 2}}) {
      const Result r = run(gpu, L, m, top_k, Spread::kRandom, rng);
      EXPECT_LE(r.error, 1e-2) << text << " M=" << m << " top_k=" << top_k;
    }
  }
}

// GPTQ experts stored one layer per expert (Qwen3-MoE GPTQ checkpoints: experts.<i>.down_proj),
// converted one by one, joined with hm_converted_layer_stack (HM_STACK_EXPERTS) and served by
// the MoE GEMM as one layer, against the f64 per-expert reference on the stacked canonical
// weight. Random words: every nibble is a valid code.
TEST(MoeGemmConvert, GptqExpertsStackedServeAsOneLayer) {
  Gpu gpu;
  if (!on_sm90(gpu)) GTEST_SKIP() << "the MoE kernel is sm_90a only";
  const int64_t e = 4, n = 128, k = 384, groups = k / 128;
  std::mt19937 rng(47);
  std::vector<hm_converted_layer_t*> experts;
  for (int64_t x = 0; x < e; ++x) {
    std::vector<uint32_t> qweight(static_cast<size_t>(k / 8 * n)),
        qzeros(static_cast<size_t>(groups * n / 8));
    for (auto& w : qweight) w = static_cast<uint32_t>(rng());
    for (auto& w : qzeros) w = 0x77777777u;  // symmetric v1 zeros (8 - 1)
    std::vector<uint16_t> scales(static_cast<size_t>(groups * n));
    std::uniform_real_distribution<double> uni(1e-3, 3e-2);
    for (auto& v : scales) {
      uint32_t code = 0;
      hm_dtype_encode(HM_DTYPE_F16, uni(rng), &code);
      v = static_cast<uint16_t>(code);
    }
    using hm::gpu_test::checkpoint_tensor;
    const hm_checkpoint_tensor_t t[3] = {
        checkpoint_tensor("qweight", "I32", {k / 8, n}, qweight),
        checkpoint_tensor("qzeros", "I32", {groups, n / 8}, qzeros),
        checkpoint_tensor("scales", "F16", {groups, n}, scales)};
    hm_converted_layer_t* layer = nullptr;
    ASSERT_EQ(hm_convert_layer(HM_SCHEME_GPTQ, t, 3, nullptr, &layer), HM_SUCCESS) << last_error();
    experts.push_back(layer);
  }
  hm_converted_layer_t* moe = nullptr;
  ASSERT_EQ(hm_converted_layer_stack(experts.data(), experts.size(), HM_STACK_EXPERTS, &moe),
            HM_SUCCESS)
      << last_error();
  for (hm_converted_layer_t* x : experts) hm_converted_layer_destroy(x);
  Layer L;
  std::string text;
  ASSERT_NO_FATAL_FAILURE(hm::gpu_test::converted_layer(moe, &L, &text));
  hm_converted_layer_destroy(moe);
  EXPECT_NE(text.find("e=4"), std::string::npos) << text;
  for (const auto& [m, top_k] : {std::pair<int64_t, int>{1, 2}, {50, 3}, {300, 2}}) {
    const Result r = run(gpu, L, m, top_k, Spread::kRandom, rng);
    EXPECT_LE(r.error, hm::gpu_test::kF16Bound) << text << " M=" << m << " top_k=" << top_k;
  }
}

// Routing data is device data: out-of-range experts, hostile ids and a count past the buffer
// are skipped, never followed out of bounds (compute-sanitizer memcheck runs this too).
TEST(MoeGemmHostile, RoutingOutOfRangeIsSkipped) {
  Gpu gpu;
  if (!on_sm90(gpu)) GTEST_SKIP() << "the MoE kernel is sm_90a only";
  std::mt19937 rng(17);
  Layer L = hm::gpu_test::make_layer("w=uint4b8 a=f16 c=f16 s=f16:g128 n=128 k=256 e=4", rng);
  hm_plan_t* plan = nullptr;
  ASSERT_EQ(hm_plan_create(gpu.ctx, L.format, nullptr, &plan), HM_SUCCESS) << last_error();
  ASSERT_EQ(hm_plan_prepare(plan), HM_SUCCESS) << last_error();
  const int64_t m = 4;
  const int top_k = 2;
  int64_t capacity = 0;
  ASSERT_EQ(hm_plan_moe_rows(plan, m, top_k, &capacity), HM_SUCCESS) << last_error();
  int32_t block = 0;
  ASSERT_EQ(hm_plan_moe_block_size(plan, m, &block), HM_SUCCESS) << last_error();
  std::vector<int32_t> sorted(static_cast<size_t>(capacity), -5);  // negative: padding
  sorted[0] = 0;
  sorted[1] = 1 << 30;  // past M * top_k: padding
  std::vector<int32_t> experts(static_cast<size_t>(capacity / block), 1 << 20);  // out of range
  experts[0] = 2;
  const int32_t num_padded = 1 << 30;  // past the buffer: the grid is the bound
  const auto a = hm::gpu_test::random_activations(L, m, rng);
  const uint64_t c = gpu.poisoned(static_cast<size_t>(m * top_k * L.n * 2));
  hm::gpu_test::DeviceWeights w = hm::gpu_test::upload_weights(gpu, L);
  hm_launch_params_t* p = hm::gpu_test::params_for(
      w, gpu.upload(a.codes.data(), a.codes.size() * 2), c, m, 0, 0);
  hm_launch_params_set_pointer(p, HM_ARG_SORTED_IDS, gpu.upload(sorted.data(), sorted.size() * 4));
  hm_launch_params_set_pointer(p, HM_ARG_EXPERT_IDS,
                               gpu.upload(experts.data(), experts.size() * 4));
  hm_launch_params_set_pointer(p, HM_ARG_NUM_TOKENS_PADDED, gpu.upload(&num_padded, 4));
  hm_launch_params_set_int(p, HM_ARG_TOP_K, top_k);
  EXPECT_EQ(hm_plan_gemm(plan, p, nullptr), HM_SUCCESS) << last_error();
  EXPECT_EQ(hm_stream_synchronize(gpu.ctx, nullptr), HM_SUCCESS) << last_error();
  std::vector<uint16_t> out(static_cast<size_t>(m * top_k * L.n));
  ASSERT_EQ(hm_copy_to_host(gpu.ctx, out.data(), c, out.size() * 2), HM_SUCCESS);
  // Row 0 (token 0 through expert 2) is written; every other row is untouched.
  double row0 = 0;
  for (int64_t j = 0; j < L.n; ++j) {
    double s = 0;
    for (int64_t l = 0; l < L.k; ++l) s += a.values[l] * L.deq[(2 * L.n + j) * L.k + l];
    double got = 0;
    hm_dtype_decode(L.out, out[j], &got);
    row0 = std::max(row0, std::fabs(got - s) / (std::fabs(s) + 1.0));
  }
  EXPECT_LT(row0, 1e-2);
  for (size_t i = L.n; i < out.size(); ++i) ASSERT_EQ(out[i], 0xFFFF) << "element " << i;
  hm_launch_params_destroy(p);
  hm_plan_destroy(plan);
}

// The whole MoE step on the device, captured once in a CUDA graph: hm_moe_align (routing ->
// indexed layout), the MoE GEMM, hm_moe_reduce (top-k weighted sum). Replayed three times with
// new routings and router weights copied in between, outside the graph: no count is read on the
// host, so one graph serves every routing of the shape.
TEST(MoeGemmGraph, AlignGemmReduceCapturedOnceReplayedWithNewRoutings) {
  using namespace gpu_driver;
  Gpu gpu;
  if (!on_sm90(gpu)) GTEST_SKIP() << "the MoE kernel is sm_90a only";
  ASSERT_TRUE(hm::gpu_test::cuda_driver_loaded());
  const Driver& cu = *hm::gpu_test::cuda_driver();
  CUcontext primary = nullptr;
  ASSERT_CU(cu, cuDevicePrimaryCtxRetain(&primary, 0));
  ASSERT_CU(cu, cuCtxPushCurrent(primary));
  std::mt19937 rng(23);
  Layer L = hm::gpu_test::make_layer("w=uint4b8 a=f16 c=f16 s=f16:g128 n=192 k=512 e=8", rng);
  const int64_t m = 37;
  const int top_k = 2;
  hm_plan_t* plan = nullptr;
  ASSERT_EQ(hm_plan_create(gpu.ctx, L.format, nullptr, &plan), HM_SUCCESS) << last_error();
  ASSERT_EQ(hm_plan_prepare(plan), HM_SUCCESS) << last_error();
  int32_t block = 0;
  ASSERT_EQ(hm_plan_moe_block_size(plan, m, &block), HM_SUCCESS) << last_error();
  hm_moe_routing_t routing;
  hm_moe_routing_init(&routing);
  routing.num_tokens = m;
  routing.top_k = top_k;
  routing.num_experts = L.experts;
  hm_moe_align_sizes_t sizes;
  hm_moe_align_sizes_init(&sizes);
  ASSERT_EQ(hm_moe_align_sizes(&routing, block, &sizes), HM_SUCCESS) << last_error();
  int64_t rows = 0;
  ASSERT_EQ(hm_plan_moe_rows(plan, m, top_k, &rows), HM_SUCCESS) << last_error();
  EXPECT_EQ(rows, sizes.sorted_ids) << "the plan and the routing agree on the capacity";

  const uint64_t topk_ids = gpu.alloc(static_cast<size_t>(m * top_k * 4));
  const uint64_t weights = gpu.alloc(static_cast<size_t>(m * top_k * 4));
  routing.topk_ids = topk_ids;
  hm_moe_align_out_t out;
  hm_moe_align_out_init(&out);
  out.sorted_ids = gpu.alloc(static_cast<size_t>(sizes.sorted_ids * 4));
  out.expert_ids = gpu.alloc(static_cast<size_t>(sizes.expert_ids * 4));
  out.num_tokens_padded = gpu.alloc(4);
  out.expert_offsets = gpu.alloc(static_cast<size_t>(sizes.expert_offsets * 4));
  const uint64_t a = gpu.alloc(static_cast<size_t>(m * L.k * 2));
  const uint64_t c = gpu.alloc(static_cast<size_t>(m * top_k * L.n * 2));
  const uint64_t y = gpu.alloc(static_cast<size_t>(m * L.n * 2));
  hm::gpu_test::DeviceWeights w = hm::gpu_test::upload_weights(gpu, L);
  hm_launch_params_t* p = hm::gpu_test::params_for(w, a, c, m, 0, 0);
  hm_launch_params_set_pointer(p, HM_ARG_SORTED_IDS, out.sorted_ids);
  hm_launch_params_set_pointer(p, HM_ARG_EXPERT_IDS, out.expert_ids);
  hm_launch_params_set_pointer(p, HM_ARG_NUM_TOKENS_PADDED, out.num_tokens_padded);
  hm_launch_params_set_int(p, HM_ARG_TOP_K, top_k);
  hm_moe_reduce_args_t reduce;
  hm_moe_reduce_args_init(&reduce);
  reduce.dtype = HM_DTYPE_F16;
  reduce.n = L.n;
  reduce.input = c;
  reduce.topk_weights = weights;
  reduce.out = y;

  CUstream stream = nullptr;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  ASSERT_CU(cu, cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cu, cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  const hm_status_t s0 = hm_moe_align(gpu.ctx, &routing, block, &out, stream);
  const std::string e0 = last_error();
  const hm_status_t s1 = hm_plan_gemm(plan, p, stream);
  const std::string e1 = last_error();
  const hm_status_t s2 = hm_moe_reduce(gpu.ctx, &routing, &reduce, stream);
  const std::string e2 = last_error();
  const CUresult ended = cu.cuStreamEndCapture(stream, &graph);  // always end the capture
  EXPECT_EQ(s0, HM_SUCCESS) << "align: " << e0;
  EXPECT_EQ(s1, HM_SUCCESS) << "gemm: " << e1;
  EXPECT_EQ(s2, HM_SUCCESS) << "reduce: " << e2;
  ASSERT_EQ(ended, CUDA_SUCCESS) << "the capture was invalidated";
  ASSERT_CU(cu, cuGraphInstantiateWithFlags(&exec, graph, 0));

  for (int replay = 0; replay < 3; ++replay) {
    const std::vector<int32_t> routes = route(m, top_k, L.experts, Spread::kRandom, rng);
    std::vector<float> router(static_cast<size_t>(m * top_k));
    std::uniform_real_distribution<float> unit(0.f, 1.f);
    for (auto& v : router) v = unit(rng);
    const auto acts = hm::gpu_test::random_activations(L, m, rng);
    ASSERT_CU(cu, cuMemcpyHtoDAsync(topk_ids, routes.data(), routes.size() * 4, stream));
    ASSERT_CU(cu, cuMemcpyHtoDAsync(weights, router.data(), router.size() * 4, stream));
    ASSERT_CU(cu, cuMemcpyHtoDAsync(a, acts.codes.data(), acts.codes.size() * 2, stream));
    ASSERT_CU(cu, cuGraphLaunch(exec, stream));
    ASSERT_CU(cu, cuStreamSynchronize(stream));  // the host buffers live until here
    std::vector<uint16_t> got(static_cast<size_t>(m * L.n));
    ASSERT_EQ(hm_copy_to_host(gpu.ctx, got.data(), y, got.size() * 2), HM_SUCCESS);
    double num = 0, den = 0;
    for (int64_t t = 0; t < m; ++t)
      for (int64_t j = 0; j < L.n; ++j) {
        double want = 0;
        for (int r = 0; r < top_k; ++r) {
          const int32_t e = routes[t * top_k + r];
          const float* wrow = &L.deq[static_cast<size_t>((e * L.n + j) * L.k)];
          double s = 0;
          for (int64_t l = 0; l < L.k; ++l) s += acts.values[t * L.k + l] * wrow[l];
          want += router[t * top_k + r] * s;
        }
        double v = 0;
        hm_dtype_decode(L.out, got[t * L.n + j], &v);
        ASSERT_TRUE(std::isfinite(v)) << "replay " << replay << " token " << t;
        num += (v - want) * (v - want);
        den += want * want;
      }
    // The GEMM's bound plus one more f16 rounding (its output, then the reduction's).
    EXPECT_LE(std::sqrt(num / den), 2 * hm::gpu_test::kF16Bound) << "replay " << replay;
  }
  EXPECT_CU(cu, cuGraphExecDestroy(exec));
  EXPECT_CU(cu, cuGraphDestroy(graph));
  EXPECT_CU(cu, cuStreamDestroy(stream));
  hm_launch_params_destroy(p);
  hm_plan_destroy(plan);
  CUcontext popped = nullptr;
  EXPECT_CU(cu, cuCtxPopCurrent(&popped));
  EXPECT_CU(cu, cuDevicePrimaryCtxRelease(0));
}

// One plan, two host threads, each on its own stream with its own routing, activations and
// output, launching the MoE GEMM repeatedly at once: results as on one stream (the MoE family
// needs no workspace, so nothing is shared but the plan and the weights).
TEST(MoeGemmStreams, TwoThreadsTwoStreamsOnePlan) {
  using namespace gpu_driver;
  Gpu gpu;
  if (!on_sm90(gpu)) GTEST_SKIP() << "the MoE kernel is sm_90a only";
  ASSERT_TRUE(hm::gpu_test::cuda_driver_loaded());
  const Driver& cu = *hm::gpu_test::cuda_driver();
  CUcontext primary = nullptr;
  ASSERT_CU(cu, cuDevicePrimaryCtxRetain(&primary, 0));
  ASSERT_CU(cu, cuCtxPushCurrent(primary));
  std::mt19937 rng(29);
  Layer L = hm::gpu_test::make_layer("w=uint4 a=bf16 c=bf16 s=bf16:g64 zp=uint4 bias=1 n=136 k=320 e=5", rng);
  hm_plan_t* plan = nullptr;
  ASSERT_EQ(hm_plan_create(gpu.ctx, L.format, nullptr, &plan), HM_SUCCESS) << last_error();
  ASSERT_EQ(hm_plan_prepare(plan), HM_SUCCESS) << last_error();
  const hm::gpu_test::DeviceWeights w = hm::gpu_test::upload_weights(gpu, L);
  struct Lane {
    int64_t m;
    int top_k;
    std::vector<int32_t> routes;
    hm::gpu_test::Activations acts;
    uint64_t c = 0;
    hm_launch_params_t* p = nullptr;
    CUstream stream = nullptr;
    std::string failure;
  };
  Lane lanes[2];
  lanes[0].m = 29, lanes[0].top_k = 2;
  lanes[1].m = 300, lanes[1].top_k = 3;
  for (Lane& lane : lanes) {
    int32_t block = 0;
    int64_t capacity = 0;
    ASSERT_EQ(hm_plan_moe_block_size(plan, lane.m, &block), HM_SUCCESS) << last_error();
    ASSERT_EQ(hm_plan_moe_rows(plan, lane.m, lane.top_k, &capacity), HM_SUCCESS) << last_error();
    lane.routes = route(lane.m, lane.top_k, L.experts, Spread::kRandom, rng);
    const Routing r = align(lane.routes, lane.m, lane.top_k, L.experts, block, capacity);
    lane.acts = hm::gpu_test::random_activations(L, lane.m, rng);
    lane.c = gpu.poisoned(static_cast<size_t>(lane.m * lane.top_k * L.n * 2));
    lane.p = hm::gpu_test::params_for(w, gpu.upload(lane.acts.codes.data(), lane.acts.codes.size() * 2),
                                      lane.c, lane.m, 0, 0);
    hm_launch_params_set_pointer(lane.p, HM_ARG_SORTED_IDS,
                                 gpu.upload(r.sorted_ids.data(), r.sorted_ids.size() * 4));
    hm_launch_params_set_pointer(lane.p, HM_ARG_EXPERT_IDS,
                                 gpu.upload(r.expert_ids.data(), r.expert_ids.size() * 4));
    hm_launch_params_set_pointer(lane.p, HM_ARG_NUM_TOKENS_PADDED, gpu.upload(&r.num_padded, 4));
    hm_launch_params_set_int(lane.p, HM_ARG_TOP_K, lane.top_k);
    ASSERT_CU(cu, cuStreamCreate(&lane.stream, CU_STREAM_NON_BLOCKING));
  }
  std::vector<std::thread> threads;
  for (Lane& lane : lanes)
    threads.emplace_back([&lane, plan] {
      for (int it = 0; it < 30; ++it)
        if (hm_plan_gemm(plan, lane.p, lane.stream) != HM_SUCCESS) {
          lane.failure = "iteration " + std::to_string(it) + ": " + last_error();
          return;
        }
    });
  for (auto& th : threads) th.join();
  for (Lane& lane : lanes) {
    EXPECT_TRUE(lane.failure.empty()) << lane.failure;
    ASSERT_CU(cu, cuStreamSynchronize(lane.stream));
    std::vector<uint16_t> out(static_cast<size_t>(lane.m * lane.top_k * L.n));
    ASSERT_EQ(hm_copy_to_host(gpu.ctx, out.data(), lane.c, out.size() * 2), HM_SUCCESS);
    double num = 0, den = 0;
    for (int64_t id = 0; id < lane.m * lane.top_k; ++id) {
      const int32_t e = lane.routes[id];
      for (int64_t j = 0; j < L.n; ++j) {
        const float* wrow = &L.deq[static_cast<size_t>((e * L.n + j) * L.k)];
        double want = L.bias[static_cast<size_t>(e * L.n + j)];
        for (int64_t l = 0; l < L.k; ++l)
          want += lane.acts.values[(id / lane.top_k) * L.k + l] * wrow[l];
        double got = 0;
        hm_dtype_decode(L.out, out[id * L.n + j], &got);
        ASSERT_TRUE(std::isfinite(got)) << "M=" << lane.m << " row " << id;
        num += (got - want) * (got - want);
        den += want * want;
      }
    }
    EXPECT_LE(std::sqrt(num / den), hm::gpu_test::kBf16Bound) << "M=" << lane.m;
    EXPECT_CU(cu, cuStreamDestroy(lane.stream));
    hm_launch_params_destroy(lane.p);
  }
  hm_plan_destroy(plan);
  CUcontext popped = nullptr;
  EXPECT_CU(cu, cuCtxPopCurrent(&popped));
  EXPECT_CU(cu, cuDevicePrimaryCtxRelease(0));
}

// ---- The grouped modes (HM_ARG_MOE_MODE, docs/moe.md) ----

// Which expert owns each row of a grouped call's A and C (-1: none; the row of C must stay
// poisoned), by the kernel's rules: contiguous, each expert's two offsets clamped to [0, rows)
// on their own (gemm/sched.cuh, contiguous_rows); masked, the first clamp(count, 0, T_max) rows
// of each slab.
std::vector<int32_t> grouped_owners(int mode, int64_t m, int experts,
                                    const std::vector<int32_t>& routing) {
  if (mode == HM_MOE_MODE_MASKED) {
    std::vector<int32_t> owner(static_cast<size_t>(experts * m), -1);
    for (int e = 0; e < experts; ++e)
      for (int64_t t = 0; t < std::clamp<int64_t>(routing[e], 0, m); ++t) owner[e * m + t] = e;
    return owner;
  }
  std::vector<int32_t> owner(static_cast<size_t>(m), -1);
  for (int e = 0; e < experts; ++e) {
    const int64_t lo = std::clamp<int64_t>(routing[e], 0, m);
    const int64_t hi = std::clamp<int64_t>(routing[e + 1], lo, m);
    for (int64_t r = lo; r < hi; ++r) {
      EXPECT_EQ(owner[r], -1) << "the test's offsets must give disjoint runs";
      owner[r] = e;
    }
  }
  return owner;
}

// One grouped call of `plan` (mode, M = rows or T_max, the offsets [E + 1] or counts [E]) on
// random activations, checked against the f64 reference of each row's expert.
Result run_grouped(Gpu& gpu, Layer& L, hm_plan_t* plan, int mode, int64_t m,
                   const std::vector<int32_t>& routing, std::mt19937& rng) {
  Result result;
  const std::vector<int32_t> owner = grouped_owners(mode, m, L.experts, routing);
  const int64_t rows = static_cast<int64_t>(owner.size());
  const Input a = upload_activations(gpu, L, rows, rng);
  const uint64_t c = gpu.poisoned(static_cast<size_t>(rows * L.n * 2));
  hm::gpu_test::DeviceWeights w = hm::gpu_test::upload_weights(gpu, L);
  hm_launch_params_t* p = params_for(w, a, c, m);
  hm_launch_params_set_int(p, HM_ARG_MOE_MODE, mode);
  hm_launch_params_set_pointer(p, mode == HM_MOE_MODE_MASKED ? HM_ARG_MASKED_M : HM_ARG_EXPERT_OFFSETS,
                               gpu.upload(routing.data(), routing.size() * 4));
  EXPECT_EQ(hm_plan_gemm(plan, p, nullptr), HM_SUCCESS) << last_error();
  EXPECT_EQ(hm_stream_synchronize(gpu.ctx, nullptr), HM_SUCCESS) << last_error();
  std::vector<uint16_t> out(static_cast<size_t>(rows * L.n));
  EXPECT_EQ(hm_copy_to_host(gpu.ctx, out.data(), c, out.size() * 2), HM_SUCCESS) << last_error();
  hm_launch_params_destroy(p);
  gpu.free_all();

  double num = 0, den = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t e = owner[r];
    const uint16_t* got_row = &out[static_cast<size_t>(r * L.n)];
    if (e < 0) {
      for (int64_t j = 0; j < L.n; ++j)
        if (got_row[j] != 0xFFFF) {
          ++result.wrong_rows;
          break;
        }
      continue;
    }
    const double* x = &a.values[static_cast<size_t>(r * L.k)];
    for (int64_t j = 0; j < L.n; ++j) {
      const float* wrow = &L.deq[static_cast<size_t>((e * L.n + j) * L.k)];
      double s = L.has_bias ? L.bias[static_cast<size_t>(e * L.n + j)] : 0.0;
      for (int64_t l = 0; l < L.k; ++l) s += x[l] * wrow[l];
      double got = 0;
      hm_dtype_decode(L.out, got_row[j], &got);
      if (!std::isfinite(got)) return result;
      num += (got - s) * (got - s);
      den += s * s;
    }
  }
  result.error = std::sqrt(num / std::max(den, 1e-30));
  return result;
}

// Offsets [E + 1] of `rows` rows grouped by expert, starting at `first` (rows before it and past
// offsets[E] = rows - `last_gap` belong to no expert): each row draws an expert, every fourth
// expert (1, 5, ...) gets none; kOneExpert puts every row on expert 3 % E.
std::vector<int32_t> random_offsets(int64_t rows, int experts, Spread spread, int64_t first,
                                    int64_t last_gap, std::mt19937& rng) {
  std::vector<int64_t> counts(experts, 0);
  std::uniform_int_distribution<int> pick(0, experts - 1);
  for (int64_t r = first; r < rows - last_gap; ++r) {
    int e = spread == Spread::kOneExpert ? 3 % experts : pick(rng);
    if (spread != Spread::kOneExpert && experts > 2 && e % 4 == 1) e = (e + 1) % experts;
    ++counts[e];
  }
  std::vector<int32_t> offsets(experts + 1);
  offsets[0] = static_cast<int32_t>(first);
  for (int e = 0; e < experts; ++e) offsets[e + 1] = offsets[e] + static_cast<int32_t>(counts[e]);
  return offsets;
}

// The plan of L with its default tiles, or those of `tuning`.
hm_plan_t* prepared_plan(Gpu& gpu, const Layer& L, const char* tuning = nullptr) {
  hm_plan_options_t options;
  hm_plan_options_init(&options);
  options.tuning_json = tuning;
  hm_plan_t* plan = nullptr;
  EXPECT_EQ(hm_plan_create(gpu.ctx, L.format, &options, &plan), HM_SUCCESS) << last_error();
  if (plan) {
    EXPECT_EQ(hm_plan_prepare(plan), HM_SUCCESS) << last_error();
  }
  return plan;
}

class MoeGemmGrouped : public testing::TestWithParam<MoeCase> {};

// Contiguous: random groupings through every default range, experts with no rows, every row on
// one expert, and rows before the first run and after the last that no expert owns.
TEST_P(MoeGemmGrouped, ContiguousMatchesThePerExpertReference) {
  Gpu gpu;
  if (!on_sm90(gpu)) GTEST_SKIP() << "the MoE kernel is sm_90a only";
  std::mt19937 rng(31);
  Layer L = hm::gpu_test::make_layer(GetParam().text, rng);
  hm_plan_t* plan = prepared_plan(gpu, L);
  ASSERT_NE(plan, nullptr);
  for (int64_t rows : {1, 7, 40, 300, 1100}) {
    const Result r = run_grouped(gpu, L, plan, HM_MOE_MODE_CONTIGUOUS, rows,
                                 random_offsets(rows, L.experts, Spread::kRandom, 0, 0, rng), rng);
    EXPECT_LE(r.error, GetParam().bound) << GetParam().text << " rows=" << rows;
    EXPECT_EQ(r.wrong_rows, 0) << "rows=" << rows;
  }
  for (int64_t rows : {5, 130}) {
    const Result one = run_grouped(gpu, L, plan, HM_MOE_MODE_CONTIGUOUS, rows,
                                   random_offsets(rows, L.experts, Spread::kOneExpert, 0, 0, rng),
                                   rng);
    EXPECT_LE(one.error, GetParam().bound) << "all on one expert, rows=" << rows;
    const Result gaps = run_grouped(gpu, L, plan, HM_MOE_MODE_CONTIGUOUS, rows,
                                    random_offsets(rows, L.experts, Spread::kRandom, 3, 2, rng),
                                    rng);
    EXPECT_LE(gaps.error, GetParam().bound) << "padding rows around the runs, rows=" << rows;
    EXPECT_EQ(gaps.wrong_rows, 0) << "a row outside every run was written, rows=" << rows;
  }
  hm_plan_destroy(plan);
}

// Masked: counts of 0, T_max, in between, past T_max (clamped) and negative (no rows).
TEST_P(MoeGemmGrouped, MaskedMatchesThePerExpertReference) {
  Gpu gpu;
  if (!on_sm90(gpu)) GTEST_SKIP() << "the MoE kernel is sm_90a only";
  std::mt19937 rng(37);
  Layer L = hm::gpu_test::make_layer(GetParam().text, rng);
  hm_plan_t* plan = prepared_plan(gpu, L);
  ASSERT_NE(plan, nullptr);
  for (int64_t t_max : {1, 16, 100, 300}) {
    std::vector<int32_t> counts(L.experts);
    std::uniform_int_distribution<int64_t> any(0, t_max);
    for (int e = 0; e < L.experts; ++e)
      counts[e] = static_cast<int32_t>(e % 5 == 0   ? 0
                                       : e % 5 == 1 ? t_max
                                       : e % 5 == 2 ? t_max + 1000
                                       : e % 5 == 3 ? -7
                                                    : any(rng));
    const Result r = run_grouped(gpu, L, plan, HM_MOE_MODE_MASKED, t_max, counts, rng);
    EXPECT_LE(r.error, GetParam().bound) << GetParam().text << " T_max=" << t_max;
    EXPECT_EQ(r.wrong_rows, 0) << "a row past its expert's count was written, T_max=" << t_max;
  }
  hm_plan_destroy(plan);
}

// Both grouped modes through the mma.sync family (moe_mma), forced on the sm_90a GPU: the
// contiguous schedule's block search and the masked slabs feed gemm/dense_mma.cuh's gathered
// rows the same way.
TEST_P(MoeGemmGrouped, BothModesThroughTheMmaSyncFamily) {
  Gpu gpu;
  if (!on_sm90(gpu)) GTEST_SKIP() << "forced on the sm_90a GPU the other MoE tests run on";
  std::mt19937 rng(39);
  Layer L = hm::gpu_test::make_layer(GetParam().text, rng);
  hm_plan_t* plan = prepared_plan(
      gpu, L, R"({"dense": [{"kernel": "moe_mma", "block_m": 16, "warps": 4, "warp_strips": 2}]})");
  ASSERT_NE(plan, nullptr);
  for (int64_t rows : {7, 300}) {
    const Result r = run_grouped(gpu, L, plan, HM_MOE_MODE_CONTIGUOUS, rows,
                                 random_offsets(rows, L.experts, Spread::kRandom, 3, 2, rng), rng);
    EXPECT_LE(r.error, GetParam().bound) << GetParam().text << " contiguous rows=" << rows;
    EXPECT_EQ(r.wrong_rows, 0) << "rows=" << rows;
  }
  for (int64_t t_max : {16, 100}) {
    std::vector<int32_t> counts(L.experts);
    std::uniform_int_distribution<int64_t> any(0, t_max);
    for (int e = 0; e < L.experts; ++e)
      counts[e] = static_cast<int32_t>(e % 3 == 0 ? 0 : e % 3 == 1 ? t_max + 5 : any(rng));
    const Result r = run_grouped(gpu, L, plan, HM_MOE_MODE_MASKED, t_max, counts, rng);
    EXPECT_LE(r.error, GetParam().bound) << GetParam().text << " masked T_max=" << t_max;
    EXPECT_EQ(r.wrong_rows, 0) << "T_max=" << t_max;
  }
  hm_plan_destroy(plan);
}

INSTANTIATE_TEST_SUITE_P(Formats, MoeGemmGrouped, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<MoeCase>& info) {
                           return "case" + std::to_string(info.index);
                         });

// Hostile offsets: below 0, past the rows (the grid and the buffers are the bound, not the
// offsets) and decreasing; each expert's run is clamped on its own and nothing outside [0, M) is
// read or written (compute-sanitizer memcheck runs this too).
TEST(MoeGemmGroupedHostile, OffsetsOutOfRangeAreClamped) {
  Gpu gpu;
  if (!on_sm90(gpu)) GTEST_SKIP() << "the MoE kernel is sm_90a only";
  std::mt19937 rng(41);
  Layer L = hm::gpu_test::make_layer("w=uint4b8 a=f16 c=f16 s=f16:g128 n=128 k=256 e=4", rng);
  hm_plan_t* plan = prepared_plan(gpu, L);
  ASSERT_NE(plan, nullptr);
  const std::vector<int32_t> offsets = {-50, 3, 7, 1 << 30, 2};
  const Result r = run_grouped(gpu, L, plan, HM_MOE_MODE_CONTIGUOUS, 12, offsets, rng);
  EXPECT_LE(r.error, hm::gpu_test::kF16Bound);
  EXPECT_EQ(r.wrong_rows, 0);
  // Masked counts far past T_max and INT32_MIN.
  const std::vector<int32_t> counts = {INT32_MAX, INT32_MIN, 3, 1 << 30};
  const Result m = run_grouped(gpu, L, plan, HM_MOE_MODE_MASKED, 9, counts, rng);
  EXPECT_LE(m.error, hm::gpu_test::kF16Bound);
  EXPECT_EQ(m.wrong_rows, 0);
  hm_plan_destroy(plan);
}

// Both grouped modes captured once in a CUDA graph and replayed with new groupings and counts
// copied in between: the counts are read on the device only.
TEST(MoeGemmGroupedGraph, CapturedOnceReplayedWithNewGroupings) {
  using namespace gpu_driver;
  Gpu gpu;
  if (!on_sm90(gpu)) GTEST_SKIP() << "the MoE kernel is sm_90a only";
  ASSERT_TRUE(hm::gpu_test::cuda_driver_loaded());
  const Driver& cu = *hm::gpu_test::cuda_driver();
  CUcontext primary = nullptr;
  ASSERT_CU(cu, cuDevicePrimaryCtxRetain(&primary, 0));
  ASSERT_CU(cu, cuCtxPushCurrent(primary));
  std::mt19937 rng(43);
  Layer L = hm::gpu_test::make_layer("w=uint4b8 a=f16 c=f16 s=f16:g128 n=192 k=512 e=8", rng);
  hm_plan_t* plan = prepared_plan(gpu, L);
  ASSERT_NE(plan, nullptr);
  const int64_t rows = 150, t_max = 24;
  const int64_t masked_rows = L.experts * t_max;
  hm::gpu_test::DeviceWeights w = hm::gpu_test::upload_weights(gpu, L);
  const uint64_t a1 = gpu.alloc(static_cast<size_t>(rows * L.k * 2));
  const uint64_t c1 = gpu.alloc(static_cast<size_t>(rows * L.n * 2));
  const uint64_t offsets = gpu.alloc(static_cast<size_t>((L.experts + 1) * 4));
  const uint64_t a2 = gpu.alloc(static_cast<size_t>(masked_rows * L.k * 2));
  const uint64_t c2 = gpu.alloc(static_cast<size_t>(masked_rows * L.n * 2));
  const uint64_t counts = gpu.alloc(static_cast<size_t>(L.experts * 4));
  hm_launch_params_t* p1 = hm::gpu_test::params_for(w, a1, c1, rows, 0, 0);
  hm_launch_params_set_int(p1, HM_ARG_MOE_MODE, HM_MOE_MODE_CONTIGUOUS);
  hm_launch_params_set_pointer(p1, HM_ARG_EXPERT_OFFSETS, offsets);
  hm_launch_params_t* p2 = hm::gpu_test::params_for(w, a2, c2, t_max, 0, 0);
  hm_launch_params_set_int(p2, HM_ARG_MOE_MODE, HM_MOE_MODE_MASKED);
  hm_launch_params_set_pointer(p2, HM_ARG_MASKED_M, counts);

  CUstream stream = nullptr;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  ASSERT_CU(cu, cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cu, cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  const hm_status_t s1 = hm_plan_gemm(plan, p1, stream);
  const std::string e1 = last_error();
  const hm_status_t s2 = hm_plan_gemm(plan, p2, stream);
  const std::string e2 = last_error();
  const CUresult ended = cu.cuStreamEndCapture(stream, &graph);  // always end the capture
  EXPECT_EQ(s1, HM_SUCCESS) << "contiguous: " << e1;
  EXPECT_EQ(s2, HM_SUCCESS) << "masked: " << e2;
  ASSERT_EQ(ended, CUDA_SUCCESS) << "the capture was invalidated";
  ASSERT_CU(cu, cuGraphInstantiateWithFlags(&exec, graph, 0));

  // The f64 reference of row r of A (values x) through expert e.
  auto expect_rows = [&](const std::vector<int32_t>& owner, const std::vector<double>& x,
                         uint64_t c, const char* what, int replay) {
    std::vector<uint16_t> got(owner.size() * static_cast<size_t>(L.n));
    ASSERT_EQ(hm_copy_to_host(gpu.ctx, got.data(), c, got.size() * 2), HM_SUCCESS);
    double num = 0, den = 0;
    for (size_t r = 0; r < owner.size(); ++r) {
      if (owner[r] < 0) continue;  // stale rows of an earlier replay may be anywhere here
      for (int64_t j = 0; j < L.n; ++j) {
        const float* wrow = &L.deq[static_cast<size_t>((owner[r] * L.n + j) * L.k)];
        double want = 0;
        for (int64_t l = 0; l < L.k; ++l) want += x[r * L.k + l] * wrow[l];
        double v = 0;
        hm_dtype_decode(L.out, got[r * L.n + j], &v);
        ASSERT_TRUE(std::isfinite(v)) << what << " replay " << replay << " row " << r;
        num += (v - want) * (v - want);
        den += want * want;
      }
    }
    EXPECT_LE(std::sqrt(num / std::max(den, 1e-30)), hm::gpu_test::kF16Bound)
        << what << " replay " << replay;
  };
  for (int replay = 0; replay < 3; ++replay) {
    const std::vector<int32_t> off = random_offsets(rows, L.experts, Spread::kRandom, 0, 0, rng);
    std::vector<int32_t> cnt(L.experts);
    std::uniform_int_distribution<int32_t> any(0, static_cast<int32_t>(t_max));
    for (auto& v : cnt) v = any(rng);
    const auto x1 = hm::gpu_test::random_activations(L, rows, rng);
    const auto x2 = hm::gpu_test::random_activations(L, masked_rows, rng);
    ASSERT_CU(cu, cuMemcpyHtoDAsync(offsets, off.data(), off.size() * 4, stream));
    ASSERT_CU(cu, cuMemcpyHtoDAsync(counts, cnt.data(), cnt.size() * 4, stream));
    ASSERT_CU(cu, cuMemcpyHtoDAsync(a1, x1.codes.data(), x1.codes.size() * 2, stream));
    ASSERT_CU(cu, cuMemcpyHtoDAsync(a2, x2.codes.data(), x2.codes.size() * 2, stream));
    ASSERT_CU(cu, cuGraphLaunch(exec, stream));
    ASSERT_CU(cu, cuStreamSynchronize(stream));  // the host buffers live until here
    expect_rows(grouped_owners(HM_MOE_MODE_CONTIGUOUS, rows, L.experts, off), x1.values, c1,
                "contiguous", replay);
    expect_rows(grouped_owners(HM_MOE_MODE_MASKED, t_max, L.experts, cnt), x2.values, c2,
                "masked", replay);
  }
  EXPECT_CU(cu, cuGraphExecDestroy(exec));
  EXPECT_CU(cu, cuGraphDestroy(graph));
  EXPECT_CU(cu, cuStreamDestroy(stream));
  hm_launch_params_destroy(p1);
  hm_launch_params_destroy(p2);
  hm_plan_destroy(plan);
  CUcontext popped = nullptr;
  EXPECT_CU(cu, cuCtxPopCurrent(&popped));
  EXPECT_CU(cu, cuDevicePrimaryCtxRelease(0));
}

}  // namespace
