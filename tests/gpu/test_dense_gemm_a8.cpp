// The dense GEMM with 8-bit activations (e4m3, e5m2, int8: the path of the wgmma and mma.sync
// kernels through gemm/dequant_a8.cuh; mma.sync forced by a tuning override, kForceMma) through
// the public plan API on a real GPU. The reference multiplies the
// activations' exact values (code x per-token scale, in f64) by the host-dequantized weight, so
// the only error left is the kernel's f32 (or f16) accumulation and the output rounding (int8:
// none in the s32 accumulation, one rounding to f32, then the scales' and the output's).
// Skipped (exit 77) without a GPU; formats the device cannot run (no sm_90a) are skipped too.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "humming.h"
#include "gpu/support/dense_layer.hpp"
#include "gpu/support/tunings.hpp"

namespace {

using hm::gpu_test::Activations8;
using hm::gpu_test::Gpu;
using hm::gpu_test::Layer;
using hm::gpu_test::act_groups;
using hm::gpu_test::fill_values;
using hm::gpu_test::quantized_activations;
using hm::gpu_test::device_has_wgmma;
using hm::gpu_test::checkpoint_tensor;
using hm::gpu_test::exact_layer;
using hm::gpu_test::last_error;
using namespace hm::gpu_test::tunings;

// Integers -2..2 with power-of-two scales: every product and sum is exact.
Activations8 exact_activations(const Layer& L, int64_t m, std::mt19937& rng) {
  std::uniform_int_distribution<int> small(-2, 2), pow(-1, 1);
  Activations8 a;
  a.codes.resize(static_cast<size_t>(m * L.k));
  a.scales.resize(static_cast<size_t>(m * act_groups(L)));
  for (auto& c : a.codes) {
    uint32_t code = 0;
    hm_dtype_encode(L.act, small(rng), &code);
    c = static_cast<uint8_t>(code);
  }
  for (auto& s : a.scales) s = std::ldexp(1.0f, pow(rng));
  fill_values(a, L, m);
  return a;
}

struct Result {
  double rel_err, max_abs;
  // max |got - ref rounded once to the output type|: 0 when each output is the exact sum
  // rounded once (RNE), as the kernel's f32 accumulation of exact terms gives it.
  double max_abs_rounded;
  std::vector<double> got, ref;  // [m][n]: the output decoded, and the f64 reference
};

// x rounded once to the layer's output type (RNE), as the kernel's one output rounding gives it.
double rounded_to_output(const Layer& L, double x) {
  uint32_t code = 0;
  double v = 0;
  hm_dtype_encode(L.out, x, &code);
  hm_dtype_decode(L.out, code, &v);
  return v;
}

// Runs the plan (default tiles, or `tuning`) twice for the activations (the second call checks
// the split-K counters were left at zero) against the f64 reference.
// int8 activations take the shared tunings' 40-token tiles as 48 tokens: integer wgmma has no
// N = 40 (gemm/params.h), and plan creation refuses it (tests/api/test_plan_api.cpp).
Result run(Gpu& gpu, Layer& L, const Activations8& a, int64_t m, const char* tuning = nullptr) {
  const std::vector<double> ref = hm::gpu_test::reference(L, a.values, m);
  hm_plan_options_t options;
  hm_plan_options_init(&options);
  std::string tiles = tuning ? tuning : "";
  if (L.act == HM_DTYPE_INT8)
    for (size_t at; (at = tiles.find("\"block_m\": 40,")) != std::string::npos;)
      tiles.replace(at, 15, "\"block_m\": 48,");
  options.tuning_json = tuning ? tiles.c_str() : nullptr;
  hm_plan_t* plan = nullptr;
  EXPECT_EQ(hm_plan_create(gpu.ctx, L.format, &options, &plan), HM_SUCCESS) << last_error();
  if (!plan) return {1e9, 1e9, 1e9, {}, {}};
  EXPECT_EQ(hm_plan_prepare(plan), HM_SUCCESS) << last_error();
  uint64_t ws_bytes = 0;
  EXPECT_EQ(hm_plan_workspace_size(plan, m, &ws_bytes), HM_SUCCESS) << last_error();
  const hm::gpu_test::DeviceWeights weights = hm::gpu_test::upload_weights(gpu, L);
  const uint64_t c = gpu.poisoned(static_cast<size_t>(m * L.n * 2));
  hm_launch_params_t* p = hm::gpu_test::params_for(
      weights, gpu.upload(a.codes.data(), a.codes.size()), c, m, gpu.zeroed(ws_bytes), ws_bytes);
  hm_launch_params_set_pointer(p, HM_ARG_ACT_SCALES,
                               gpu.upload(a.scales.data(), a.scales.size() * 4));
  for (int rep = 0; rep < 2; ++rep) {
    EXPECT_EQ(hm_plan_gemm(plan, p, nullptr), HM_SUCCESS) << last_error();
    EXPECT_EQ(hm_stream_synchronize(gpu.ctx, nullptr), HM_SUCCESS) << last_error();
  }
  const std::vector<uint16_t> out = hm::gpu_test::download(gpu, L, c, m);
  hm_launch_params_destroy(p);
  hm_plan_destroy(plan);
  gpu.free_all();
  Result r{hm::gpu_test::relative_error(L, out, ref), 0, 0, std::vector<double>(ref.size()), ref};
  for (size_t i = 0; i < ref.size(); ++i) {
    double& got = r.got[i];
    hm_dtype_decode(L.out, out[i], &got);
    r.max_abs = std::max(r.max_abs, std::isfinite(got) ? std::fabs(got - ref[i]) : 1e9);
    r.max_abs_rounded = std::max(
        r.max_abs_rounded, std::isfinite(got) ? std::fabs(got - rounded_to_output(L, ref[i])) : 1e9);
  }
  return r;
}

struct FormatCase {
  const char* text;
  double bound;  // relative Frobenius error: f32 accumulation plus the output rounding
};

// K with an odd number of 64-wide chunks (576, 320, 7392 -> 7424) leaves the last 128-wide step
// half empty. Output rounding: bf16 2^-8, f16 2^-11; f16 accumulation rounds every MMA's sum.
const FormatCase kCases[] = {
    {"w=e4m3 a=e4m3 c=bf16 s=f32:channel n=200 k=576", 1e-2},
    {"w=e2m1 a=e4m3 c=bf16 s=bf16:channel bias=1 n=136 k=320", 1e-2},
    {"w=uint4b8 a=e4m3 c=f16 s=f16:channel n=130 k=384", 2e-3},
    {"w=e2m1 a=e5m2 c=f16 s=tensor n=72 k=256", 2e-3},
    {"w=e3m2 a=e4m3 c=f16 s=e4m3:channel n=64 k=1024", 2e-3},
    {"w=e5m2 a=e5m2 c=bf16 s=bf16:channel n=96 k=512", 1e-2},
    {"w=uint4b8 a=e4m3 c=f16 s=f16:channel acc=f16 n=128 k=256", 2e-2},
    // Group scales, folded in f32 per K group (whole 128-wide steps): one step per group; two,
    // with a last group of one step; group x tensor with a bias; and K splits that start in the
    // middle of a group (30 steps, 7 splits of 5 at small M).
    {"w=uint4b8 a=e4m3 c=bf16 s=bf16:g128 n=200 k=640", 1e-2},
    {"w=e2m1 a=e4m3 c=f16 s=f16:g256 n=136 k=896", 2e-3},
    {"w=e4m3 a=e4m3 c=bf16 s=bf16:g128+tensor bias=1 n=96 k=512", 1e-2},
    {"w=uint4b8 a=e4m3 c=bf16 s=bf16:g256 n=128 k=3840", 1e-2},
    // Block scales (bKxN: DeepSeek-style 128 x 128, and 256-k x 64-row blocks of two steps),
    // read per step from global memory; N = 200 ends inside a row block.
    {"w=e4m3 a=e4m3 c=bf16 s=f32:b128x128 n=200 k=640", 1e-2},
    {"w=e2m1 a=e4m3 c=bf16 s=bf16:b256x64 n=136 k=896", 1e-2},
    // ue8m0 group x tensor scales on 4-bit float weights (MXFP4 with FP8 activations): the group
    // exponents go into the weights (no fold); groups of 32 (four per step), 64, 128 and 256,
    // e5m2 activations, another 4-bit float (e1m2), a bias, and K = 320 / 896 with a half step.
    {"w=e2m1 a=e4m3 c=bf16 s=ue8m0:g32+tensor n=200 k=640", 1e-2},
    // Activation scales per token and K group (DeepSeek's 1 x 128 with 128 x 128 weight blocks,
    // alone on channel weights, on MXFP4 weights, on int8 with groups of 256).
    {"w=e4m3 a=e4m3:g128 c=bf16 s=f32:b128x128 n=200 k=640", 1e-2},
    {"w=e2m1 a=e4m3:g128 c=bf16 s=bf16:channel bias=1 n=136 k=384", 1e-2},
    {"w=e2m1 a=e4m3:g128 c=bf16 s=ue8m0:g32+tensor n=136 k=640", 1e-2},
    {"w=uint4b8 a=int8:g256 c=bf16 s=bf16:channel n=200 k=896", 1e-2},
    {"w=e2m1 a=e4m3 c=f16 s=ue8m0:g64+tensor bias=1 n=136 k=896", 2e-3},
    {"w=e2m1 a=e5m2 c=bf16 s=ue8m0:g32+tensor n=72 k=320", 1e-2},
    {"w=e2m1 a=e4m3 c=bf16 s=ue8m0:g128+tensor n=128 k=3840", 1e-2},
    {"w=e1m2 a=e4m3 c=f16 s=ue8m0:g256+tensor n=64 k=1024", 2e-3},
    // A tensor-parallel slice (N = 10944, K = 7392 of a 14B-class MLP).
    {"w=e4m3 a=e4m3 c=bf16 s=bf16:channel n=10944 k=7392", 1e-2},
    // int8 activations (s8 x s8 into s32): 4-, 8- and 2-bit biased weights, channel / tensor
    // scales and a bias; group scales folded per K group (one step per group; two, with K splits
    // in the middle of a group), block scales; the odd chunk counts as above.
    {"w=uint4b8 a=int8 c=bf16 s=bf16:channel n=200 k=576", 1e-2},
    {"w=uint8b128 a=int8 c=f16 s=f32:channel bias=1 n=136 k=320", 2e-3},
    {"w=uint2b2 a=int8 c=bf16 s=tensor n=72 k=256", 1e-2},
    {"w=uint4b8 a=int8 c=bf16 s=bf16:g128 n=200 k=640", 1e-2},
    {"w=uint8b128 a=int8 c=f16 s=f16:g256 n=128 k=3840", 2e-3},
    {"w=uint8b128 a=int8 c=bf16 s=f32:b128x128 n=200 k=640", 1e-2},
    {"w=uint4b8 a=int8 c=bf16 s=bf16:channel n=10944 k=7392", 1e-2},
    // Float weights on int8 activations (rule R11: counts of the weight's least step): the 4-bit
    // byte table with channel scales and a bias, with group scales folded from s32, and shifted
    // by ue8m0 group exponents (MXFP4 -> INT8; with activation groups too); the f16 path of a
    // wider float (e2m3, MXFP6's element) with tensor scales; another 4-bit float (e1m2).
    {"w=e2m1 a=int8 c=bf16 s=bf16:channel bias=1 n=136 k=320", 1e-2},
    {"w=e2m1 a=int8 c=f16 s=f16:g256 n=136 k=896", 2e-3},
    {"w=e2m1 a=int8 c=bf16 s=ue8m0:g32+tensor n=200 k=640", 1e-2},
    {"w=e2m1 a=int8:g128 c=bf16 s=ue8m0:g32+tensor n=136 k=640", 1e-2},
    {"w=e2m3 a=int8 c=f16 s=tensor n=72 k=320", 2e-3},
    {"w=e1m2 a=int8 c=f16 s=ue8m0:g64+tensor bias=1 n=64 k=1024", 2e-3},
    // Integer zero points (AWQ / asymmetric GPTQ, W4A8): q - z per row and K group in the
    // weights' conversion; groups of 128 (one per step) and 256 with e4m3, int8 (7-bit weights,
    // the widest the lanes hold), e5m2 with 3-bit weights, and per-channel zero points.
    {"w=uint4 zp=uint4 a=e4m3 c=bf16 s=bf16:g128 n=200 k=640", 1e-2},
    {"w=uint4 zp=uint4 a=e4m3 c=f16 s=f16:g256 bias=1 n=136 k=896", 2e-3},
    {"w=uint4 zp=uint4 a=int8 c=bf16 s=bf16:g128 n=200 k=576", 1e-2},
    {"w=uint7 zp=uint7 a=int8 c=f16 s=f16:channel n=136 k=320", 2e-3},
    {"w=uint3 zp=uint3 a=e5m2 c=f16 s=f16:channel n=72 k=384", 2e-3},
    // Group scales of 32 and 64 k (GPTQ g32 / g64 W4A8), folded every step (a partial set per
    // group slot): e4m3 and int8, a half step past K, zero points per group,
    // e4m3 group x tensor scales, activation groups on top.
    {"w=uint4b8 a=e4m3 c=bf16 s=bf16:g64 n=200 k=640", 1e-2},
    {"w=uint4b8 a=int8 c=bf16 s=bf16:g32 n=136 k=320", 1e-2},
    {"w=uint4 zp=uint4 a=e4m3 c=f16 s=f16:g64 bias=1 n=136 k=896", 2e-3},
    {"w=e2m1 a=e4m3 c=bf16 s=e4m3:g32+tensor n=200 k=640", 1e-2},
    {"w=uint4b8 a=e4m3:g128 c=bf16 s=bf16:g32 n=136 k=640", 1e-2},
};

// Group scales under a 128-k step fold per group slot, on wgmma in tiles of at most 32 tokens
// (g32) or 64 (g64) (tune::folded_group_token_cap; plan creation refuses wider tiles): such
// formats take kFoldSetTiles in place of the shared wgmma tunings (a block barrier with two
// warpgroups, a copying warp with two stages and cluster split-K, dequantization ahead, TMA),
// then the mma.sync kernel (which keeps one token group's sets at a time, so takes any tile).
bool folds_under_a_step(const std::string& text) {
  return (text.find(":g32") != std::string::npos || text.find(":g64") != std::string::npos) &&
         text.find("ue8m0") == std::string::npos;
}
const char* const kFoldSetTiles =
    R"({"dense": [{"max_m": 8, "kernel": "wgmma", "block_m": 8, "warps": 8, "stages": 3},
                  {"max_m": 16, "kernel": "wgmma", "block_m": 16, "warps": 4, "stages": 2,
                   "pipeline": "mbarrier", "copy": "tma", "producer": true, "split": "cluster"},
                  {"max_m": 24, "kernel": "wgmma", "block_m": 24, "warps": 4, "stages": 3,
                   "pipeline": "mbarrier", "dequant_ahead": true, "split": "cluster"},
                  {"kernel": "wgmma", "block_m": 32, "warps": 8, "stages": 3,
                   "pipeline": "mbarrier", "copy": "tma", "dequant_ahead": true}]})";
// The forced tunings a format runs through (kForceMma last: the mma.sync kernel).
std::vector<const char*> forced_tunings(const std::string& text) {
  if (folds_under_a_step(text)) return {kFoldSetTiles, kForceMma};
  return {kWgmmaWide, kWgmmaAhead, kWgmmaTma, kWgmmaCluster, kWgmmaProducer, kForceMma};
}

class DenseGemmA8 : public testing::TestWithParam<FormatCase> {};

TEST_P(DenseGemmA8, MatchesTheHostReferenceForEveryTileAndRaggedShape) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  if (!device_has_wgmma(gpu)) GTEST_SKIP() << "8-bit activations run on sm_90a only";
  std::mt19937 rng(21);
  Layer L = hm::gpu_test::make_layer(GetParam().text, rng);
  const bool large = L.n * L.k > (int64_t{1} << 24);
  for (int64_t m : large ? std::vector<int64_t>{1, 33} : std::vector<int64_t>{1, 5, 17, 33, 70, 130, 300}) {
    const Activations8 a = quantized_activations(L, m, rng);
    const Result r = run(gpu, L, a, m);
    EXPECT_LE(r.rel_err, GetParam().bound) << GetParam().text << " m=" << m << " max |diff| "
                                           << r.max_abs;
  }
}

// The same through the wgmma tile shapes the defaults do not reach: two warpgroups at N = 8, a
// block barrier at 256 tokens, dequantization ahead at the fewest stages, TMA boxes (the half
// step past an odd chunk count comes from the weight map's zero fill), cluster split-K and a
// copying warp; and through the mma.sync kernel (m16n8k32, the sm_80 / sm_89 path; it
// accumulates in f32 only, so acc=f16 formats skip it).
TEST_P(DenseGemmA8, MatchesTheHostReferenceThroughForcedTiles) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  if (!device_has_wgmma(gpu)) GTEST_SKIP() << "8-bit activations run on sm_90a only";
  std::mt19937 rng(22);
  Layer L = hm::gpu_test::make_layer(GetParam().text, rng);
  if (L.n * L.k > (int64_t{1} << 24)) GTEST_SKIP() << "the default tiles cover the large shape";
  for (const char* tuning : forced_tunings(GetParam().text))
    for (int64_t m : {1, 3, 17, 70, 300}) {
      if (tuning == kForceMma && std::string(GetParam().text).find("acc=f16") != std::string::npos)
        continue;
      const Activations8 a = quantized_activations(L, m, rng);
      const Result r = run(gpu, L, a, m, tuning);
      EXPECT_LE(r.rel_err, GetParam().bound)
          << GetParam().text << " m=" << m << " max |diff| " << r.max_abs << " tuning " << tuning;
    }
}

INSTANTIATE_TEST_SUITE_P(Formats, DenseGemmA8, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<FormatCase>& info) {
                           return "case" + std::to_string(info.index);
                         });

// Small integers and powers of two throughout: every f32 sum is exact (at most 17 bits), so each
// output must be the f64 reference rounded once to f16, and one misplaced element (the 8-bit
// fragment order, the two chunks of a step, the per-token scale's row, split-K, a group's fold)
// fails. (Compared with the rounded reference: activation groups mix 2^-3-grained terms into
// sums past 256, where f16 itself rounds; an H200 run saw 0.125 against the unrounded one.) Weights: every e2m1 code (including
// the subnormal +-0.5), and int4 through the f16 path, with channel and group scales, and
// integer zero points.
TEST(DenseGemmA8Exact, BitExactOnRepresentableInputs) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  if (!device_has_wgmma(gpu)) GTEST_SKIP() << "8-bit activations run on sm_90a only";
  std::mt19937 rng(23);
  struct Exact {
    const char* text;
    int lo, hi;  // canonical codes
  };
  for (const Exact& e : {Exact{"w=e2m1 a=e4m3 c=f16 s=f16:channel n=208 k=704", 0, 15},
                         Exact{"w=uint4b8 a=e4m3 c=f16 s=f16:channel n=200 k=640", 5, 11},
                         Exact{"w=e2m1 a=e5m2 c=f16 s=tensor n=72 k=320", 0, 15},
                         Exact{"w=uint4b8 a=e4m3 c=f16 s=f16:g128 n=200 k=640", 5, 11},
                         Exact{"w=uint4b8 a=e4m3 c=f16 s=f16:g256 n=128 k=3840", 6, 10},
                         Exact{"w=uint4b8 a=e4m3 c=f16 s=f16:b128x64 n=200 k=640", 5, 11},
                         // int8 activations: the int8 lanes of biased and unsigned weights
                         Exact{"w=uint4b8 a=int8 c=f16 s=f16:channel n=200 k=640", 5, 11},
                         Exact{"w=uint8b128 a=int8 c=f16 s=tensor n=72 k=320", 125, 131},
                         Exact{"w=uint4 a=int8 c=f16 s=f16:g128 n=200 k=640", 0, 3},
                         Exact{"w=uint2b2 a=int8 c=f16 s=f32:b128x64 n=200 k=640", 0, 3},
                         // float weights on int8: every e2m1 code through the byte table (-0
                         // included), every e2m3 code through f16, a group fold from s32
                         Exact{"w=e2m1 a=int8 c=f16 s=f16:channel n=208 k=704", 0, 15},
                         Exact{"w=e2m3 a=int8 c=f16 s=tensor n=72 k=320", 0, 63},
                         Exact{"w=e2m1 a=int8 c=f16 s=f16:g128 n=200 k=640", 0, 15},
                         // activation scales per token and K group (a=<dtype>:g<K>), alone, with
                         // block scales, with smaller weight groups, on int8 with larger ones
                         Exact{"w=uint4b8 a=e4m3:g128 c=f16 s=f16:channel n=200 k=640", 5, 11},
                         Exact{"w=uint4b8 a=e4m3:g128 c=f16 s=f16:b128x64 n=200 k=640", 5, 11},
                         Exact{"w=uint4b8 a=e4m3:g256 c=f16 s=f16:g128 n=200 k=640", 5, 11},
                         Exact{"w=uint4b8 a=int8:g128 c=f16 s=f16:g256 n=128 k=1280", 6, 10},
                         // integer zero points (drawn from the codes' range: q - z in -6..6)
                         Exact{"w=uint4 zp=uint4 a=e4m3 c=f16 s=f16:g128 n=200 k=640", 5, 11},
                         Exact{"w=uint4 zp=uint4 a=int8 c=f16 s=f16:channel n=200 k=640", 5, 11},
                         Exact{"w=uint7 zp=uint7 a=int8 c=f16 s=f16:g256 n=128 k=1280", 60, 66},
                         // groups of 32 and 64 k, a partial set per group slot
                         Exact{"w=uint4b8 a=e4m3 c=f16 s=f16:g64 n=200 k=640", 5, 11},
                         Exact{"w=uint4b8 a=int8 c=f16 s=f16:g32 n=200 k=704", 5, 11}}) {
    Layer L = exact_layer(e.text, rng, e.lo, e.hi);
    std::vector<const char*> tunings = forced_tunings(e.text);
    tunings.insert(tunings.begin(), nullptr);  // the defaults first
    for (const char* tuning : tunings)
      for (int64_t m : {1, 3, 16, 17, 40, 97, 129, 260}) {
        const Activations8 a = exact_activations(L, m, rng);
        const Result r = run(gpu, L, a, m, tuning);
        EXPECT_EQ(r.max_abs_rounded, 0.0) << e.text << " m=" << m << " rel err " << r.rel_err
                                  << " tuning " << (tuning ? tuning : "default");
      }
  }
}

// int8 activations over their whole range: every activation code (-128 included) times every
// 8-bit biased weight value (-128..127). The s32 sums are exact and below 2^24 (K * 2^14), so
// their f32 conversion is exact too; the scales are powers of two, so each output must be the
// exact sum rounded once to f16. Tensor scales (the sums converted before the epilogue) and
// group scales of two exponents (converted at each group's fold; K = 384 keeps the f32 sum of
// the three folded groups within 24 bits).
TEST(DenseGemmA8Exact, Int8FullRangeBitExact) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  if (!device_has_wgmma(gpu)) GTEST_SKIP() << "8-bit activations run on sm_90a only";
  std::mt19937 rng(28);
  for (const char* text : {"w=uint8b128 a=int8 c=f16 s=tensor n=136 k=704",
                           "w=uint8b128 a=int8 c=f16 s=f32:g128 n=136 k=384",
                           // activation scales per token and 128-k group, folded from s32
                           "w=uint8b128 a=int8:g128 c=f16 s=tensor n=136 k=384"}) {
    Layer L = hm::gpu_test::parse_layer(text);
    hm_canonical_sizes_t cs;
    hm_canonical_sizes_init(&cs);
    ASSERT_EQ(hm_format_canonical_sizes(L.format, &cs), HM_SUCCESS) << last_error();
    std::vector<uint8_t> codes(cs.codes);
    std::vector<float> scales(cs.scales), global(cs.global_scale, std::ldexp(1.0f, -10));
    for (auto& v : codes) v = static_cast<uint8_t>(rng());
    std::uniform_int_distribution<int> exponent(-9, -8);
    for (auto& v : scales) v = std::ldexp(1.0f, exponent(rng));
    hm_canonical_weight_t q;
    hm_canonical_weight_init(&q);
    q.codes = codes.data();
    q.scales = cs.scales ? scales.data() : nullptr;
    q.global_scale = cs.global_scale ? global.data() : nullptr;
    hm::gpu_test::pack_canonical(L, q);
    for (const char* tuning : {static_cast<const char*>(nullptr), kWgmmaWide, kWgmmaAhead,
                               kWgmmaTma, kWgmmaCluster, kWgmmaProducer, kForceMma})
      for (int64_t m : {1, 17, 129, 260}) {
        Activations8 a;
        a.codes.resize(static_cast<size_t>(m * L.k));
        a.scales.resize(static_cast<size_t>(m * act_groups(L)));
        for (auto& c : a.codes) c = static_cast<uint8_t>(rng());
        std::uniform_int_distribution<int> pow(-1, 1);
        for (auto& s : a.scales) s = std::ldexp(1.0f, pow(rng));
        fill_values(a, L, m);
        const Result r = run(gpu, L, a, m, tuning);
        int64_t wrong = 0;
        std::string first;
        for (int64_t t = 0; t < m; ++t)
          for (int64_t n = 0; n < L.n; ++n) {
            const double got = r.got[t * L.n + n], want = r.ref[t * L.n + n];
            ASSERT_LT(std::fabs(want), 65504.0) << "the test keeps outputs inside f16";
            if (got != rounded_to_output(L, want) && ++wrong <= 4)
              first += " (t " + std::to_string(t) + ", n " + std::to_string(n) + ": " +
                       std::to_string(got) + " vs " + std::to_string(want) + ")";
          }
        EXPECT_EQ(wrong, 0) << text << " m=" << m << " tuning " << (tuning ? tuning : "default")
                            << ": outputs that are not the exact sum rounded once;" << first;
      }
  }
}

// ue8m0 group x tensor scales in the weights' exponents (gemm/dequant_a8.cuh): every 4-bit code
// times every exponent of the window must come out exact. Row r's groups take the exponents b_r
// and b_r + 1 (b_r cycling over the window), so each output sums over a narrow range (exact in
// the f32 accumulator) while every table offset, and two different exponents among a step's
// slots, are used; each output must then be the exact sum rounded once to f16 (the window is
// wider than f16's precision, so the outputs are compared after that one rounding; the global
// scale keeps the largest rows below f16's top and the smallest sums' step at or above its least
// subnormal). Then one group's scale is set outside the window: its row (only that one) is NaN.
TEST(DenseGemmA8Exact, ScaleExponentsBitExactAcrossTheWindow) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  if (!device_has_wgmma(gpu)) GTEST_SKIP() << "8-bit activations run on sm_90a only";
  std::mt19937 rng(26);
  struct Case {
    const char* text;
    int lo, hi;      // the window (core::scale_exponent_window)
    int global_exp;  // the global scale 2^global_exp
  };
  for (const Case& c : {Case{"w=e2m1 a=e4m3 c=f16 s=ue8m0:g32+tensor n=208 k=704", -5, 6, -3},
                        Case{"w=e2m1 a=e5m2 c=f16 s=ue8m0:g64+tensor n=72 k=320", -13, 13, -9},
                        // int8 (MXFP4 -> INT8): step counts shifted by 0..3; outside, the row
                        // is poisoned (int8 has no NaN weights)
                        Case{"w=e2m1 a=int8 c=f16 s=ue8m0:g32+tensor n=208 k=704", 0, 3, -3}}) {
    for (bool poison : {false, true}) {
      Layer L = hm::gpu_test::parse_layer(c.text);
      hm_canonical_sizes_t cs;
      hm_canonical_sizes_init(&cs);
      ASSERT_EQ(hm_format_canonical_sizes(L.format, &cs), HM_SUCCESS) << last_error();
      std::vector<uint8_t> codes(cs.codes);
      std::vector<float> scales(cs.scales), global(cs.global_scale, std::ldexp(1.0f, c.global_exp));
      std::uniform_int_distribution<int> code(0, 15);
      for (auto& v : codes) v = static_cast<uint8_t>(code(rng));
      const int64_t groups = static_cast<int64_t>(scales.size()) / L.n;
      for (int64_t r = 0; r < L.n; ++r)
        for (int64_t g = 0; g < groups; ++g)
          scales[r * groups + g] =
              std::ldexp(1.0f, c.lo + static_cast<int>(r % (c.hi - c.lo)) + static_cast<int>((r + g) % 2));
      const int64_t bad_row = 3;
      if (poison) {
        scales[bad_row * groups + 1] = std::ldexp(1.0f, c.hi + 1);
        codes[bad_row * L.k + L.k / groups + 8] = 7;  // a nonzero code in group 1 (k exact)
      }
      hm_canonical_weight_t q;
      hm_canonical_weight_init(&q);
      q.codes = codes.data();
      q.scales = scales.data();
      q.global_scale = global.data();
      hm::gpu_test::pack_canonical(L, q);
      for (const char* tuning : poison ? std::vector<const char*>{nullptr}
                                       : std::vector<const char*>{nullptr, kWgmmaWide, kWgmmaAhead,
                                                                  kWgmmaTma, kWgmmaCluster,
                                                                  kWgmmaProducer, kForceMma})
        for (int64_t m : {1, 17, 129, 260}) {
          const Activations8 a = exact_activations(L, m, rng);
          const Result r = run(gpu, L, a, m, tuning);
          int64_t wrong = 0, not_nan = 0;
          std::string first;  // the first few wrong outputs, for the message
          for (int64_t t = 0; t < m; ++t)
            for (int64_t n = 0; n < L.n; ++n) {
              const double got = r.got[t * L.n + n], want = r.ref[t * L.n + n];
              if (poison && n == bad_row) {
                not_nan += !std::isnan(got);
                continue;
              }
              ASSERT_LT(std::fabs(want), 60000.0) << "the test keeps outputs inside f16";
              if (got != rounded_to_output(L, want)) {
                if (++wrong <= 4)
                  first += " (t " + std::to_string(t) + ", n " + std::to_string(n) + ": " +
                           std::to_string(got) + " vs " + std::to_string(want) + ")";
              }
            }
          EXPECT_EQ(not_nan, 0) << c.text << " m=" << m << ": the poisoned row must be NaN";
          EXPECT_EQ(wrong, 0) << c.text << " m=" << m << " tuning " << (tuning ? tuning : "default")
                              << (poison ? ", poisoned row " + std::to_string(bad_row) : "")
                              << ": outputs that are not the exact sum rounded once;" << first;
        }
    }
  }
}

// Converts the checkpoint tensors `t` with `scheme` for `act` activations (hm_convert_layer) and
// serves the layer as converted: its format (whose text must contain `expect`) plans and runs
// against the f64 reference on the converted canonical weight, at several M.
void expect_converted_layer_serves(Gpu& gpu, int32_t scheme, const hm_checkpoint_tensor_t* t,
                                   size_t count, hm_dtype_t act, const char* expect,
                                   std::mt19937& rng) {
  hm_convert_options_t options;
  hm_convert_options_init(&options);
  options.activation = act;
  hm_converted_layer_t* converted = nullptr;
  ASSERT_EQ(hm_convert_layer(scheme, t, count, &options, &converted), HM_SUCCESS) << last_error();
  Layer L;
  std::string text;
  ASSERT_NO_FATAL_FAILURE(hm::gpu_test::converted_layer(converted, &L, &text));
  hm_converted_layer_destroy(converted);
  EXPECT_NE(text.find(expect), std::string::npos) << text;
  for (int64_t m : {1, 7, 64, 200}) {
    const Activations8 a = quantized_activations(L, m, rng);
    const Result r = run(gpu, L, a, m);
    EXPECT_LE(r.rel_err, 1e-2) << text << " m=" << m << " max |diff| " << r.max_abs;
  }
}

// A gpt-oss style MXFP4 checkpoint (e2m1 blocks, e8m0 scales spanning more than the window)
// converted for e4m3 and for int8 activations (hm_convert_layer folds the scales into group x
// tensor ones in the exponent window) and served as converted, against the f64 reference on the
// converted canonical weight.
TEST(DenseGemmA8Convert, Mxfp4CheckpointServesWithE4m3AndInt8Activations) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  if (!device_has_wgmma(gpu)) GTEST_SKIP() << "8-bit activations run on sm_90a only";
  const int64_t n = 288, k = 1024, kb = k / 32;
  std::mt19937 rng(27);
  std::vector<uint8_t> blocks(static_cast<size_t>(n * kb * 16)), scales(static_cast<size_t>(n * kb));
  for (auto& b : blocks) b = static_cast<uint8_t>(rng());
  std::uniform_int_distribution<int> exponent(108, 124);  // 2^-19 .. 2^-3: wider than the window
  for (auto& s : scales) s = static_cast<uint8_t>(exponent(rng));
  const hm_checkpoint_tensor_t t[2] = {
      checkpoint_tensor("model.layers.0.mlp.down_proj_blocks", "U8", {n, kb, 16}, blocks),
      checkpoint_tensor("model.layers.0.mlp.down_proj_scales", "U8", {n, kb}, scales)};
  ASSERT_NO_FATAL_FAILURE(expect_converted_layer_serves(gpu, HM_SCHEME_MXFP4, t, 2, HM_DTYPE_E4M3,
                                                        "ue8m0:g32+tensor", rng));
  // The same checkpoint for int8 activations: the window is 2^0 .. 2^3 (core/support.hpp), so
  // more groups are raised to its bottom and re-rounded; the layer serves as converted.
  ASSERT_NO_FATAL_FAILURE(expect_converted_layer_serves(gpu, HM_SCHEME_MXFP4, t, 2, HM_DTYPE_INT8,
                                                        "a=int8", rng));
}

// A ModelOpt NVFP4 checkpoint (e2m1 codes, e4m3 scales per 16 k, an f32 global) converted for
// e4m3 and for int8 activations: its scales have no exact 8-bit path, so the converter writes the
// activation's 8-bit type with f32 channel scales (lossy, noted), which plans and runs against the
// f64 reference on the converted canonical weight.
TEST(DenseGemmA8Convert, Nvfp4CheckpointServesWithE4m3AndInt8Activations) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  if (!device_has_wgmma(gpu)) GTEST_SKIP() << "8-bit activations run on sm_90a only";
  const int64_t n = 200, k = 640;
  std::mt19937 rng(29);
  std::vector<uint8_t> packed(static_cast<size_t>(n * k / 2));
  std::vector<uint8_t> scales(static_cast<size_t>(n * k / 16));
  for (auto& b : packed) b = static_cast<uint8_t>(rng());
  std::uniform_int_distribution<int> scale_code(0x20, 0x5f);  // positive e4m3, 2^-3 .. 2^4
  for (auto& s : scales) s = static_cast<uint8_t>(scale_code(rng));
  const float global = 1.0f / 1024;
  const hm_checkpoint_tensor_t t[3] = {
      checkpoint_tensor("model.layers.0.mlp.down_proj.weight", "U8", {n, k / 2}, packed),
      checkpoint_tensor("model.layers.0.mlp.down_proj.weight_scale", "F8_E4M3", {n, k / 16},
                        scales),
      checkpoint_tensor("model.layers.0.mlp.down_proj.weight_scale_2", "F32", {}, &global,
                        sizeof global)};
  ASSERT_NO_FATAL_FAILURE(expect_converted_layer_serves(gpu, HM_SCHEME_NVFP4, t, 3, HM_DTYPE_E4M3,
                                                        "w=e4m3 a=e4m3", rng));
  ASSERT_NO_FATAL_FAILURE(expect_converted_layer_serves(gpu, HM_SCHEME_NVFP4, t, 3, HM_DTYPE_INT8,
                                                        "w=int8 a=int8", rng));
}

// A DeepSeek-style FP8 checkpoint (e4m3 weight, f32 weight_scale_inv per 128 x 128 block)
// converted for e4m3 activations (hm_convert_layer) and served as converted: the converter's
// output format plans and runs, against the f64 reference on the converted canonical weight.
TEST(DenseGemmA8Convert, Fp8BlockCheckpointServesWithE4m3Activations) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  if (!device_has_wgmma(gpu)) GTEST_SKIP() << "8-bit activations run on sm_90a only";
  const int64_t n = 320, k = 512;
  std::mt19937 rng(25);
  std::vector<uint8_t> w(static_cast<size_t>(n * k));
  for (auto& c : w) {
    do c = static_cast<uint8_t>(rng());
    while ((c & 0x7f) == 0x7f || (c & 0x78) > 0x58);  // finite, |w| < 32
  }
  std::vector<float> inv(static_cast<size_t>(((n + 127) / 128) * ((k + 127) / 128)));
  std::uniform_real_distribution<float> uni(1e-3f, 1e-2f);
  for (auto& v : inv) v = uni(rng);
  const hm_checkpoint_tensor_t t[2] = {
      checkpoint_tensor("model.layers.0.mlp.up_proj.weight", "F8_E4M3", {n, k}, w),
      checkpoint_tensor("model.layers.0.mlp.up_proj.weight_scale_inv", "F32",
                        {(n + 127) / 128, (k + 127) / 128}, inv)};
  ASSERT_NO_FATAL_FAILURE(expect_converted_layer_serves(gpu, HM_SCHEME_FP8, t, 2, HM_DTYPE_E4M3,
                                                        "b128x128", rng));
}

// A compressed-tensors W8A8 checkpoint (int-quantized: I8 weight, f32 channel weight_scale, a
// static input_scale the converter ignores) converted for int8 activations and served as
// converted (issue 17: the converters' --act int8 outputs run end to end), against the f64
// reference on the converted canonical weight.
TEST(DenseGemmA8Convert, CompressedTensorsW8A8ServesWithInt8Activations) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  if (!device_has_wgmma(gpu)) GTEST_SKIP() << "8-bit activations run on sm_90a only";
  const int64_t n = 264, k = 640;
  std::mt19937 rng(26);
  std::vector<int8_t> q(static_cast<size_t>(n * k));
  for (auto& v : q) v = static_cast<int8_t>(std::uniform_int_distribution<int>(-128, 127)(rng));
  std::vector<float> scale(static_cast<size_t>(n));
  std::uniform_real_distribution<float> uni(1e-4f, 1e-2f);
  for (auto& v : scale) v = uni(rng);
  const float input_scale = 0.02f;
  const hm_checkpoint_tensor_t t[3] = {
      checkpoint_tensor("model.layers.0.mlp.down_proj.weight", "I8", {n, k}, q),
      checkpoint_tensor("model.layers.0.mlp.down_proj.weight_scale", "F32", {n, 1}, scale),
      checkpoint_tensor("model.layers.0.mlp.down_proj.input_scale", "F32", {1}, &input_scale, 4)};
  ASSERT_NO_FATAL_FAILURE(expect_converted_layer_serves(gpu, HM_SCHEME_CT_INT8, t, 3, HM_DTYPE_INT8,
                                                        "a=int8", rng));
}

// An AutoAWQ checkpoint (int4 qweight and qzeros packed eight to an int32, f16 scales per
// 128-k group) converted for e4m3 and for int8 activations and served as converted: the integer
// zero points are subtracted in the weights' conversion (w=uint4 zp=uint4), against the f64
// reference on the converted canonical weight. Random words: every nibble is a valid code.
TEST(DenseGemmA8Convert, AwqCheckpointServesWithE4m3AndInt8Activations) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  if (!device_has_wgmma(gpu)) GTEST_SKIP() << "8-bit activations run on sm_90a only";
  const int64_t n = 256, k = 640, groups = k / 128;
  std::mt19937 rng(29);
  std::vector<uint32_t> qweight(static_cast<size_t>(k * n / 8)),
      qzeros(static_cast<size_t>(groups * n / 8));
  for (auto& w : qweight) w = static_cast<uint32_t>(rng());
  for (auto& w : qzeros) w = static_cast<uint32_t>(rng());
  std::vector<uint16_t> scales(static_cast<size_t>(groups * n));
  std::uniform_real_distribution<double> uni(1e-3, 3e-2);
  for (auto& s : scales) {
    uint32_t code = 0;
    hm_dtype_encode(HM_DTYPE_F16, uni(rng), &code);
    s = static_cast<uint16_t>(code);
  }
  const hm_checkpoint_tensor_t t[3] = {
      checkpoint_tensor("model.layers.0.self_attn.o_proj.qweight", "I32", {k, n / 8}, qweight),
      checkpoint_tensor("model.layers.0.self_attn.o_proj.qzeros", "I32", {groups, n / 8}, qzeros),
      checkpoint_tensor("model.layers.0.self_attn.o_proj.scales", "F16", {groups, n}, scales)};
  for (hm_dtype_t act : {HM_DTYPE_E4M3, HM_DTYPE_INT8})
    ASSERT_NO_FATAL_FAILURE(
        expect_converted_layer_serves(gpu, HM_SCHEME_AWQ, t, 3, act, "zp=uint4", rng));
}

// The activation scales are an argument of their own: missing, set for a 16-bit format, or
// misaligned, the call is refused before anything runs.
TEST(DenseGemmA8Arguments, ActivationScalesAreCheckedBeforeTheLaunch) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  if (!device_has_wgmma(gpu)) GTEST_SKIP() << "8-bit activations run on sm_90a only";
  std::mt19937 rng(24);
  Layer L = hm::gpu_test::make_layer("w=e2m1 a=e4m3 c=bf16 s=bf16:channel n=128 k=256", rng);
  hm_plan_t* plan = nullptr;
  ASSERT_EQ(hm_plan_create(gpu.ctx, L.format, nullptr, &plan), HM_SUCCESS) << last_error();
  ASSERT_EQ(hm_plan_prepare(plan), HM_SUCCESS) << last_error();
  const hm::gpu_test::DeviceWeights weights = hm::gpu_test::upload_weights(gpu, L);
  const uint64_t scales = gpu.zeroed(64);
  uint64_t ws_bytes = 0;
  ASSERT_EQ(hm_plan_workspace_size(plan, 4, &ws_bytes), HM_SUCCESS) << last_error();
  hm_launch_params_t* p = hm::gpu_test::params_for(
      weights, gpu.zeroed(4 * 256), gpu.zeroed(4 * 128 * 2), 4, gpu.zeroed(ws_bytes), ws_bytes);
  EXPECT_EQ(hm_plan_gemm(plan, p, nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("HM_ARG_ACT_SCALES is not set"), std::string::npos) << last_error();
  hm_launch_params_set_pointer(p, HM_ARG_ACT_SCALES, scales + 2);
  EXPECT_EQ(hm_plan_gemm(plan, p, nullptr), HM_ERROR_MISALIGNED) << last_error();
  hm_launch_params_set_pointer(p, HM_ARG_ACT_SCALES, scales);
  EXPECT_EQ(hm_plan_gemm(plan, p, nullptr), HM_SUCCESS) << last_error();
  EXPECT_EQ(hm_stream_synchronize(gpu.ctx, nullptr), HM_SUCCESS) << last_error();
  hm_launch_params_destroy(p);
  hm_plan_destroy(plan);

  Layer F = hm::gpu_test::make_layer("w=e2m1 a=bf16 c=bf16 s=bf16:channel n=128 k=256", rng);
  ASSERT_EQ(hm_plan_create(gpu.ctx, F.format, nullptr, &plan), HM_SUCCESS) << last_error();
  ASSERT_EQ(hm_plan_prepare(plan), HM_SUCCESS) << last_error();
  const hm::gpu_test::DeviceWeights fw = hm::gpu_test::upload_weights(gpu, F);
  p = hm::gpu_test::params_for(fw, gpu.zeroed(4 * 256 * 2), gpu.zeroed(4 * 128 * 2), 4, 0, 0);
  hm_launch_params_set_pointer(p, HM_ARG_ACT_SCALES, scales);
  EXPECT_EQ(hm_plan_gemm(plan, p, nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("has no use for it"), std::string::npos) << last_error();
  hm_launch_params_destroy(p);
  hm_plan_destroy(plan);
}

}  // namespace
