// The dense quantized GEMM through the public plan API on a real GPU, against the f64 host
// reference on the host-dequantized weights. Skipped (exit 77) without a GPU.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "humming.h"
#include "gpu/support/dense_layer.hpp"
#include "gpu/support/tunings.hpp"

namespace {

using hm::gpu_test::Activations;
using hm::gpu_test::Gpu;
using hm::gpu_test::Layer;
using hm::gpu_test::device_has_wgmma;
using hm::gpu_test::encode16;
using hm::gpu_test::last_error;
using namespace hm::gpu_test::tunings;

// A random layer for `text` (dense_layer.hpp), or with `exact`: uint4b8 codes 6..10 (values
// -2..2) and power-of-two scales, bias 1, so every product and sum below is exact.
Layer make_layer(const std::string& text, std::mt19937& rng, bool exact = false) {
  return exact ? hm::gpu_test::exact_layer(text, rng, 6, 10) : hm::gpu_test::make_layer(text, rng);
}

// Runs the plan (default tiles, or the `tuning` JSON) for m tokens, twice (the second call
// checks the split-K counters were left at zero), and returns (relative Frobenius error, max
// abs difference) against the f64 reference. `exact`: activations in {-1, 0, 1}. `misalign`:
// C and the bias start that many elements past an aligned allocation (the API promises only
// element alignment; the epilogue's vector stores must notice).
std::pair<double, double> run(Gpu& gpu, Layer& L, int64_t m, std::mt19937& rng, bool exact = false,
                              const char* tuning = nullptr, int misalign = 0) {
  Activations a;
  if (exact) {
    a.codes.resize(static_cast<size_t>(m * L.k));
    a.values.resize(a.codes.size());
    std::uniform_int_distribution<int> small(-1, 1);
    for (size_t i = 0; i < a.codes.size(); ++i) a.codes[i] = encode16(L.act, small(rng), &a.values[i]);
  } else {
    a = hm::gpu_test::random_activations(L, m, rng);
  }
  const std::vector<double> ref = hm::gpu_test::reference(L, a.values, m);
  hm_plan_t* plan = nullptr;
  hm_plan_options_t options;
  hm_plan_options_init(&options);
  options.tuning_json = tuning;
  EXPECT_EQ(hm_plan_create(gpu.ctx, L.format, &options, &plan), HM_SUCCESS) << last_error();
  if (!plan) return {1e9, 1e9};
  EXPECT_EQ(hm_plan_prepare(plan), HM_SUCCESS) << last_error();
  uint64_t ws_bytes = 0;
  EXPECT_EQ(hm_plan_workspace_size(plan, m, &ws_bytes), HM_SUCCESS) << last_error();
  const uint64_t ws = gpu.zeroed(ws_bytes);
  const uint64_t c = gpu.poisoned(static_cast<size_t>((m * L.n + misalign) * 2)) + misalign * 2;
  hm_launch_params_t* p = nullptr;
  hm_launch_params_create(&p);
  hm::gpu_test::DeviceWeights weights = hm::gpu_test::upload_weights(gpu, L);
  if (misalign != 0 && L.has_bias) {
    std::vector<uint16_t> shifted(static_cast<size_t>(misalign), 0);
    shifted.insert(shifted.end(), L.bias_codes.begin(), L.bias_codes.end());
    weights.bias = gpu.upload(shifted.data(), shifted.size() * 2) + misalign * 2;
  }
  hm::gpu_test::set_weights(p, weights);
  hm_launch_params_set_pointer(p, HM_ARG_A, gpu.upload(a.codes.data(), a.codes.size() * 2));
  hm_launch_params_set_pointer(p, HM_ARG_C, c);
  hm_launch_params_set_pointer(p, HM_ARG_WORKSPACE, ws);
  hm_launch_params_set_int(p, HM_ARG_WORKSPACE_BYTES, static_cast<int64_t>(ws_bytes));
  hm_launch_params_set_int(p, HM_ARG_M, m);
  for (int rep = 0; rep < 2; ++rep) {
    EXPECT_EQ(hm_plan_gemm(plan, p, nullptr), HM_SUCCESS) << last_error();
    EXPECT_EQ(hm_stream_synchronize(gpu.ctx, nullptr), HM_SUCCESS) << last_error();
  }
  const std::vector<uint16_t> out = hm::gpu_test::download(gpu, L, c, m);
  hm_launch_params_destroy(p);
  hm_plan_destroy(plan);
  gpu.free_all();
  const double err = hm::gpu_test::relative_error(L, out, ref);
  double max_abs = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double got = 0;
    hm_dtype_decode(L.out, out[i], &got);
    max_abs = std::max(max_abs, std::fabs(got - ref[i]));
  }
  return {err, std::isfinite(max_abs) ? max_abs : 1e9};
}

struct FormatCase {
  const char* text;
  double bound;  // relative Frobenius error: weights rounded to the activation type after scaling
};

// f16: w*s rounded to f16 (2^-11 relative) plus the output rounding: 2e-3. bf16 (2^-8): 1.5e-2.
const FormatCase kCases[] = {
    {"w=uint4b8 a=f16 c=f16 s=f16:g128 n=200 k=576", 2e-3},
    {"w=uint4b8 a=bf16 c=bf16 s=bf16:g128 n=200 k=576", 1.5e-2},
    {"w=int8 a=f16 c=f16 s=f16:channel bias=1 n=136 k=320", 2e-3},
    {"w=uint8b128 a=bf16 c=bf16 s=bf16:channel n=136 k=320", 1.5e-2},
    {"w=uint3b4 a=f16 c=f16 s=f16:g64 n=100 k=448", 2e-3},
    {"w=uint2b2 a=f16 c=f16 s=f16:g32 n=72 k=256", 2e-3},
    {"w=uint4 a=f16 c=f16 s=f16:g128 zp=uint4 n=200 k=512", 2e-3},
    {"w=uint4 a=bf16 c=bf16 s=bf16:g128 zp=bf16 n=200 k=512", 1.5e-2},
    {"w=e2m1 a=bf16 c=bf16 s=ue8m0:g32 n=130 k=384", 1.5e-2},
    {"w=e2m1 a=f16 c=f16 s=e4m3:g16+tensor n=130 k=384", 2e-3},
    {"w=e4m3 a=bf16 c=bf16 s=bf16:channel n=130 k=384", 1.5e-2},
    {"w=uint7b64 a=f16 c=f16 s=f16:g128 n=64 k=256", 2e-3},
    {"w=uint5b16 a=bf16 c=f16 s=bf16:g128 n=96 k=4100", 1.5e-2},
    {"w=uint6b32 a=f16 c=bf16 s=f16:g64 bias=1 n=80 k=200", 1e-2},
    // Group sizes that do not divide the 64-wide chunk, nor are multiples of it.
    {"w=uint4b8 a=f16 c=f16 s=f16:g48 n=136 k=480", 2e-3},
    {"w=uint4 a=bf16 c=bf16 s=bf16:g96 zp=uint4 n=200 k=576", 1.5e-2},
    // f16 accumulation: each MMA rounds its sum to f16 (2^-11), K = 576 sums of ~0.1: ~1e-2.
    {"w=uint4b8 a=f16 c=f16 s=f16:g128 acc=f16 n=200 k=576", 2e-2},
    // Block scales (the mma.sync kernel on every arch).
    {"w=e4m3 a=bf16 c=bf16 s=bf16:b128x128 n=200 k=384", 1.5e-2},
};

// Whether a plan with `tuning` can be made for the format: HM_ERROR_UNSUPPORTED (checked, with
// its reason) means the format is outside what the tuning's tiles cover.
bool tuning_covers(Gpu& gpu, const Layer& L, const char* tuning, const char* reason) {
  hm_plan_options_t o;
  hm_plan_options_init(&o);
  o.tuning_json = tuning;
  hm_plan_t* plan = nullptr;
  const hm_status_t st = hm_plan_create(gpu.ctx, L.format, &o, &plan);
  hm_plan_destroy(plan);
  if (st == HM_SUCCESS) return true;
  EXPECT_EQ(st, HM_ERROR_UNSUPPORTED) << last_error();
  EXPECT_NE(last_error().find(reason), std::string::npos) << last_error();
  return false;
}

class DenseGemm : public testing::TestWithParam<FormatCase> {};

TEST_P(DenseGemm, MatchesTheHostReferenceForEveryTileAndRaggedShape) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  std::mt19937 rng(11);
  Layer L = make_layer(GetParam().text, rng);
  for (int64_t m : {1, 5, 17, 33, 70, 130}) {  // ragged, across the small- and mid-M tiles
    auto [err, max_abs] = run(gpu, L, m, rng);
    EXPECT_LE(err, GetParam().bound) << GetParam().text << " m=" << m << " max |diff| " << max_abs;
  }
}

// The same formats through the mma.sync kernel (on sm_90a the defaults pick wgmma) and through
// wgmma tiles the defaults do not use (two warpgroups at N = 8, an odd N = 24 with two
// mbarrier-synchronized stages, 256 tokens with a block barrier per chunk), and with the
// dequantization one chunk ahead, with TMA copies, with cluster split-K and with a copying warp.
TEST_P(DenseGemm, MatchesTheHostReferenceThroughForcedTiles) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  std::mt19937 rng(12);
  Layer L = make_layer(GetParam().text, rng);
  std::vector<const char*> tunings = {kForceMma};
  int64_t k = 0, n = 0;
  int32_t e = 0;
  hm_format_get_shape(L.format, &n, &k, &e);
  const bool block = std::string(GetParam().text).find(":b") != std::string::npos;
  if (device_has_wgmma(gpu) && k % 8 == 0 && !block) {
    tunings.push_back(kWgmmaWide);
    tunings.push_back(kWgmmaAhead);
    tunings.push_back(kWgmmaTma);
    tunings.push_back(kWgmmaCluster);
    if (tuning_covers(gpu, L, kWgmmaProducer, "copying warp")) tunings.push_back(kWgmmaProducer);
  }
  for (const char* tuning : tunings)
    for (int64_t m : {1, 3, 17, 70, 300}) {
      auto [err, max_abs] = run(gpu, L, m, rng, false, tuning);
      EXPECT_LE(err, GetParam().bound) << GetParam().text << " m=" << m << " max |diff| " << max_abs
                                       << " tuning " << tuning;
    }
}

INSTANTIATE_TEST_SUITE_P(Formats, DenseGemm, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<FormatCase>& info) {
                           return "case" + std::to_string(info.index);
                         });

// Small integers, power-of-two scales: the GPU result must equal the f64 reference exactly, so a
// single misplaced element (layout, fragment, split-K, epilogue indexing) fails.
TEST(DenseGemmExact, BitExactOnRepresentableInputs) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  std::mt19937 rng(5);
  for (const char* text : {"w=uint4b8 a=f16 c=f16 s=f16:g64 bias=1 n=208 k=1344",
                           "w=uint4b8 a=bf16 c=f16 s=bf16:g64 n=200 k=1000"}) {
    Layer L = make_layer(text, rng, /*exact=*/true);
    for (const char* tuning :
         {static_cast<const char*>(nullptr), kForceMma, kWgmmaWide, kWgmmaAhead, kWgmmaTma,
          kWgmmaCluster, kWgmmaProducer}) {
      if (tuning != nullptr && tuning != kForceMma && !device_has_wgmma(gpu)) continue;
      for (int64_t m : {1, 3, 16, 17, 40, 80, 97, 129, 260}) {
        auto [err, max_abs] = run(gpu, L, m, rng, /*exact=*/true, tuning);
        EXPECT_EQ(max_abs, 0.0) << text << " m=" << m << " rel err " << err << " tuning "
                                << (tuning ? tuning : "default");
      }
    }
    }
}

// C and the bias 2 and 8 bytes past 16-byte alignment: the epilogue's 16- and 8-byte vector
// stores do not fit, so it must take the element path (and still be exact), on every path to the
// output: one split, a global split-K workspace, a cluster split, the mma.sync kernel.
TEST(DenseGemmExact, BitExactWithOutputAndBiasAlignedOnlyToAnElement) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  std::mt19937 rng(6);
  Layer L = make_layer("w=uint4b8 a=f16 c=f16 s=f16:g64 bias=1 n=208 k=1344", rng, /*exact=*/true);
  for (int misalign : {1, 4})
    for (const char* tuning : {static_cast<const char*>(nullptr), kForceMma, kWgmmaCluster}) {
      if (tuning == kWgmmaCluster && !device_has_wgmma(gpu)) continue;
      for (int64_t m : {1, 17, 129, 260}) {
        auto [err, max_abs] = run(gpu, L, m, rng, /*exact=*/true, tuning, misalign);
        EXPECT_EQ(max_abs, 0.0) << "misalign " << misalign << " m=" << m << " rel err " << err
                                << " tuning " << (tuning ? tuning : "default");
      }
    }
}

}  // namespace
