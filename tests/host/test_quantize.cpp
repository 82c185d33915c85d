// quant::quantize / dequantize for every scale kind, symmetric and with zero points.
//
// Bounds checked for every element (x = w / s_eff + zp, s_eff = scale * global):
//   - nearest: deq is a nearest point of the element's grid {(v - zp) * s_eff : v a value of the
//     weight dtype} (so clamping at the ends is the only loss besides rounding);
//   - integers, x inside [lo - 1/2, hi + 1/2]: |w - deq| <= s_eff / 2;
//   - floats, |x| <= max: |w - deq| <= s_eff * max(2^-(m+1) |x|, 2^(-bias-m)) (half an ulp of
//     the weight dtype at x, or half the subnormal spacing).
// Plus: scales exactly representable in their dtype, integer zero points in range, the stored
// scale within one rounding of the ideal one, and exact round trips for representable weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/format.hpp"
#include "quant/quantize.hpp"

namespace hm::quant {
namespace {

using core::Dtype;
using core::Format;
using core::ScaleKind;

struct Buffers {
  std::vector<uint8_t> codes;
  std::vector<float> scales, zero_points, global_scale;
  CanonicalWeight view() {
    CanonicalWeight w;
    w.codes = codes.data();
    w.scales = scales.empty() ? nullptr : scales.data();
    w.zero_points = zero_points.empty() ? nullptr : zero_points.data();
    w.global_scale = global_scale.empty() ? nullptr : global_scale.data();
    return w;
  }
};

Buffers allocate(const CanonicalShape& sh) {
  Buffers b;
  b.codes.assign(sh.codes, 0xEE);
  b.scales.assign(sh.scales, -1.0f);
  b.zero_points.assign(sh.zero_points, -1.0f);
  b.global_scale.assign(sh.global_scale, -1.0f);
  return b;
}

Format make_format(const char* w, const char* s, ScaleKind kind, int group_k, int group_n,
                   const char* zp, int64_t n, int64_t k, int experts) {
  Format f;
  f.weight = Dtype::parse(w);
  f.scale = Dtype::parse(s);
  f.scale_kind = kind;
  f.group_k = group_k;
  f.group_n = group_n;
  f.zero_point = Dtype::parse(zp);
  f.n = n;
  f.k = k;
  f.experts = experts;
  return f;
}

std::string describe(const Format& f) {
  return "w=" + f.weight.name() + " s=" + f.scale.name() + " kind=" +
         std::to_string(static_cast<int>(f.scale_kind)) + " g=" + std::to_string(f.group_k) +
         "x" + std::to_string(f.group_n) + " zp=" + f.zero_point.name() +
         " n=" + std::to_string(f.n) + " k=" + std::to_string(f.k) +
         " e=" + std::to_string(f.experts);
}

// Random weights with groups of very different magnitudes, some all-zero rows and a column of
// zeros, so scales vary and zero groups occur.
std::vector<float> random_weight(const CanonicalShape& sh, uint64_t seed, bool nonnegative = false) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 6);
  std::vector<float> w(sh.codes);
  for (int64_t e = 0; e < sh.experts; ++e) {
    for (int64_t n = 0; n < sh.n; ++n) {
      const float row_scale = std::ldexp(1.0f, exponent(rng));
      for (int64_t k = 0; k < sh.k; ++k) {
        float v = normal(rng) * row_scale;
        if (nonnegative) v = std::fabs(v);
        if (n % 7 == 3 || k == 5) v = 0.0f;
        w[(e * sh.n + n) * sh.k + k] = v;
      }
    }
  }
  return w;
}

// Checks every property listed at the top of the file.
void check_quantization(const Format& f, const std::vector<float>& w) {
  SCOPED_TRACE(describe(f));
  const CanonicalShape sh = canonical_shape(f);
  Buffers b = allocate(sh);
  quantize(f, w.data(), b.view());
  std::vector<float> deq(sh.codes);
  dequantize(f, b.view(), deq.data());

  for (float s : b.scales) {
    ASSERT_TRUE(std::isfinite(s) && s > 0) << s;
    ASSERT_EQ(f.scale.decode(f.scale.encode(s)), s) << "scale not representable in " << f.scale.name();
  }
  for (float g : b.global_scale) ASSERT_TRUE(std::isfinite(g) && g > 0) << g;
  for (float z : b.zero_points) {
    ASSERT_TRUE(std::isfinite(z));
    if (f.zero_point.is_integer()) {
      ASSERT_EQ(z, std::nearbyint(z));
      ASSERT_GE(z, std::max(f.zero_point.min_value(), f.weight.min_value()));
      ASSERT_LE(z, std::min(f.zero_point.max_value(), f.weight.max_value()));
    } else {
      ASSERT_EQ(f.zero_point.decode(f.zero_point.encode(z)), z);
    }
  }

  const Dtype wd = f.weight;
  std::vector<double> values;
  for (uint32_t c = 0; c < (1u << wd.bits()); ++c) {
    const double v = wd.decode(c);
    if (std::isfinite(v)) values.push_back(v);
  }
  const double lo = wd.min_value(), hi = wd.max_value();
  for (int64_t e = 0; e < sh.experts; ++e) {
    for (int64_t n = 0; n < sh.n; ++n) {
      for (int64_t k = 0; k < sh.k; ++k) {
        const int64_t i = (e * sh.n + n) * sh.k + k;
        ASSERT_LT(b.codes[i], 1u << wd.bits());
        ASSERT_FALSE(wd.is_nan_code(b.codes[i]));
        const ElementScale s = element_scale(sh, b.view(), e, n, k);
        const double x = w[i] / s.scale + s.zero_point;
        const double err = std::fabs(w[i] - static_cast<double>(deq[i]));
        const double tol = std::fabs(static_cast<double>(deq[i])) * 1e-7 + 1e-300;
        double nearest = std::numeric_limits<double>::infinity();
        for (double v : values) nearest = std::min(nearest, std::fabs(w[i] - (v - s.zero_point) * s.scale));
        ASSERT_LE(err, nearest + tol) << "not the nearest grid point at (" << e << "," << n << "," << k
                                      << ") w=" << w[i] << " deq=" << deq[i];
        if (wd.is_integer()) {
          if (x >= lo - 0.5 && x <= hi + 0.5) {
            ASSERT_LE(err, s.scale / 2 + tol);
          }
        } else if (std::fabs(x) <= wd.max_value()) {
          const double half_ulp =
              std::max(std::ldexp(std::fabs(x), -(wd.mantissa_bits() + 1)),
                       std::ldexp(1.0, -wd.exponent_bias() - wd.mantissa_bits()));
          ASSERT_LE(err, s.scale * half_ulp + tol) << "w=" << w[i] << " x=" << x;
        }
      }
    }
  }
}

TEST(Quantize, EveryScaleKindSymmetricAndAsymmetric) {
  const struct {
    const char *w, *s;
    ScaleKind kind;
    int gk, gn;
    const char* zp;
  } cases[] = {
      {"uint4b8", "f16", ScaleKind::kGroup, 64, 0, "none"},
      {"uint4b8", "bf16", ScaleKind::kChannel, 0, 0, "none"},
      {"int4", "f16", ScaleKind::kGroup, 32, 0, "none"},
      {"int8", "f32", ScaleKind::kBlock, 64, 16, "none"},
      {"int8", "bf16", ScaleKind::kChannel, 0, 0, "none"},
      {"uint8b128", "f16", ScaleKind::kGroup, 128, 0, "none"},
      {"uint3b4", "f16", ScaleKind::kGroup, 48, 0, "none"},
      {"int2", "f16", ScaleKind::kGroup, 16, 0, "none"},
      {"uint4", "f16", ScaleKind::kGroup, 64, 0, "uint4"},
      {"uint4", "bf16", ScaleKind::kChannel, 0, 0, "uint4"},
      {"uint2", "f16", ScaleKind::kGroup, 32, 0, "uint2"},
      {"uint8", "f16", ScaleKind::kGroup, 64, 0, "uint8"},
      {"uint4", "f16", ScaleKind::kGroup, 64, 0, "f16"},
      {"uint8", "bf16", ScaleKind::kGroup, 32, 0, "bf16"},
      {"uint3", "f16", ScaleKind::kBlock, 64, 8, "uint3"},
      {"int4", "f16", ScaleKind::kGroup, 64, 0, "int4"},
      {"int8", "f32", ScaleKind::kTensor, 0, 0, "none"},
      {"uint4", "f16", ScaleKind::kGroupTensor, 32, 0, "uint4"},
      {"int4", "e4m3", ScaleKind::kGroupTensor, 32, 0, "none"},
      {"e2m1", "e4m3", ScaleKind::kGroupTensor, 16, 0, "none"},
      {"e2m1", "ue8m0", ScaleKind::kGroup, 32, 0, "none"},
      {"e4m3", "ue8m0", ScaleKind::kGroup, 32, 0, "none"},
      {"e4m3", "f32", ScaleKind::kChannel, 0, 0, "none"},
      {"e4m3", "f32", ScaleKind::kBlock, 128, 16, "none"},
      {"e4m3", "f32", ScaleKind::kTensor, 0, 0, "none"},
      {"e5m2", "bf16", ScaleKind::kGroup, 64, 0, "none"},
      {"e3m2", "e5m2", ScaleKind::kGroup, 32, 0, "none"},
      {"e2m3", "e4m3", ScaleKind::kGroup, 16, 0, "none"},
      {"e3m4", "f16", ScaleKind::kChannel, 0, 0, "none"},
      {"e0m3", "f16", ScaleKind::kGroup, 32, 0, "none"},
      {"e2m1", "ue8m0", ScaleKind::kGroupTensor, 32, 0, "none"},
      {"e4m3", "f16", ScaleKind::kNone, 0, 0, "none"},
      {"int8", "f16", ScaleKind::kNone, 0, 0, "none"},
  };
  uint64_t seed = 1;
  for (const auto& c : cases) {
    // k = 200 leaves a partial last group for every group size above; n = 40 a partial block.
    const Format f = make_format(c.w, c.s, c.kind, c.gk, c.gn, c.zp, 40, 200, 2);
    const CanonicalShape sh = canonical_shape(f);
    const bool scaled = c.kind != ScaleKind::kNone;
    std::vector<float> w = random_weight(sh, seed++);
    if (!scaled)  // unscaled weights must sit in the dtype's range to be meaningful
      for (float& v : w) v = std::max<float>(-f.weight.max_value(), std::min<float>(f.weight.max_value(), v * 8));
    check_quantization(f, w);
  }
}

TEST(Quantize, UnsignedWithoutZeroPointsClampsNegativesToZero) {
  const Format f = make_format("uint4", "f16", ScaleKind::kGroup, 32, 0, "none", 8, 64, 1);
  const CanonicalShape sh = canonical_shape(f);
  check_quantization(f, random_weight(sh, 5, /*nonnegative=*/true));
  std::vector<float> w = random_weight(sh, 6);
  Buffers b = allocate(sh);
  quantize(f, w.data(), b.view());
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] < 0) {
      ASSERT_EQ(b.codes[i], 0u);
    }
  }
}

TEST(Quantize, CanonicalShapes) {
  const Format g = make_format("uint4b8", "f16", ScaleKind::kGroup, 128, 0, "uint4", 10, 300, 3);
  CanonicalShape sh = canonical_shape(g);
  EXPECT_EQ(sh.groups_k, 3);
  EXPECT_EQ(sh.codes, 3u * 10 * 300);
  EXPECT_EQ(sh.scales, 3u * 10 * 3);
  EXPECT_EQ(sh.zero_points, sh.scales);
  EXPECT_EQ(sh.global_scale, 0u);
  const Format b = make_format("int8", "f32", ScaleKind::kBlock, 128, 128, "none", 300, 256, 1);
  sh = canonical_shape(b);
  EXPECT_EQ(sh.scale_rows, 3);
  EXPECT_EQ(sh.scales, 3u * 2);
  EXPECT_EQ(sh.zero_points, 0u);
  const Format t = make_format("e4m3", "none", ScaleKind::kTensor, 0, 0, "none", 4, 4, 5);
  sh = canonical_shape(t);
  EXPECT_EQ(sh.scales, 0u);
  EXPECT_EQ(sh.global_scale, 5u);
  const Format gt = make_format("e2m1", "e4m3", ScaleKind::kGroupTensor, 16, 0, "none", 4, 40, 2);
  sh = canonical_shape(gt);
  EXPECT_EQ(sh.scales, 2u * 4 * 3);
  EXPECT_EQ(sh.global_scale, 2u);
  const Format c = make_format("int4", "f16", ScaleKind::kChannel, 0, 0, "none", 4, 40, 1);
  sh = canonical_shape(c);
  EXPECT_EQ(sh.groups_k, 1);
  EXPECT_EQ(sh.scales, 4u);
}

// Symmetric int: the ideal scale is absmax / qmax; the stored one is its rounding.
TEST(Quantize, ScaleRules) {
  {
    const Format f = make_format("int4", "f16", ScaleKind::kGroup, 32, 0, "none", 1, 64, 1);
    std::vector<float> w(64, 0.0f);
    w[3] = -1.4f;  // group 0: absmax 1.4 -> 0.2 (rounded to f16)
    w[40] = 0.7f;  // group 1: absmax 0.7 -> 0.1
    Buffers b = allocate(canonical_shape(f));
    quantize(f, w.data(), b.view());
    EXPECT_EQ(b.scales[0], static_cast<float>(f.scale.decode(f.scale.encode(1.4f / 7.0))));
    EXPECT_EQ(b.scales[1], static_cast<float>(f.scale.decode(f.scale.encode(0.7f / 7.0))));
    EXPECT_EQ(b.codes[3], Dtype::parse("int4").encode(-7));
    EXPECT_EQ(b.codes[40], 7u);
  }
  {
    // Zero points: s = (max(max,0) - min(min,0)) / 15, zp = rne(-min / s).
    const Format f = make_format("uint4", "f16", ScaleKind::kChannel, 0, 0, "uint4", 1, 4, 1);
    std::vector<float> w = {-1.0f, 0.5f, 2.0f, 0.0f};
    Buffers b = allocate(canonical_shape(f));
    quantize(f, w.data(), b.view());
    EXPECT_EQ(b.scales[0], static_cast<float>(f.scale.decode(f.scale.encode(3.0 / 15))));
    EXPECT_EQ(b.zero_points[0], 5.0f);
    EXPECT_EQ(b.codes[0], 0u);
    EXPECT_EQ(b.codes[2], 15u);
    EXPECT_EQ(b.codes[3], 5u) << "0 is exact with integer zero points";
  }
  {
    // MX (OCP): scale = 2^(floor(log2(amax)) - emax(e2m1) = 2); elements saturate.
    const Format f = make_format("e2m1", "ue8m0", ScaleKind::kGroup, 32, 0, "none", 1, 96, 1);
    std::vector<float> w(96, 0.0f);
    w[0] = 7.9f;   // floor(log2) = 2 -> scale 1: 7.9 saturates to 6
    w[32] = 0.3f;  // floor(log2) = -2 -> scale 2^-4: 0.3 / 2^-4 = 4.8 -> 4 (code 6)
    Buffers b = allocate(canonical_shape(f));
    quantize(f, w.data(), b.view());
    EXPECT_EQ(b.scales[0], 1.0f);
    EXPECT_EQ(b.codes[0], 7u);
    EXPECT_EQ(b.scales[1], 0.0625f);
    EXPECT_EQ(b.codes[32], 6u);
    EXPECT_EQ(b.scales[2], 1.0f) << "an all-zero group gets scale 1";
  }
  {
    // NVFP4: the largest group scale maps to e4m3's 448 through the f32 global scale.
    const Format f = make_format("e2m1", "e4m3", ScaleKind::kGroupTensor, 16, 0, "none", 4, 64, 2);
    const CanonicalShape sh = canonical_shape(f);
    std::vector<float> w = random_weight(sh, 77);
    Buffers b = allocate(sh);
    quantize(f, w.data(), b.view());
    for (int e = 0; e < 2; ++e) {
      float absmax = 0, scale_max = 0;
      for (int64_t i = 0; i < 4 * 64; ++i) absmax = std::max(absmax, std::fabs(w[e * 256 + i]));
      for (int64_t i = 0; i < 16; ++i) scale_max = std::max(scale_max, b.scales[e * 16 + i]);
      EXPECT_EQ(b.global_scale[e], static_cast<float>(absmax / 6.0 / 448.0));
      EXPECT_EQ(scale_max, 448.0f);
    }
  }
  {
    // ue8m0 group x tensor on e4m3 activations: the group scales go into the weights' exponents,
    // within [2^-5, 2^6] (core::scale_exponent_window). The expert's largest group exponent sits
    // at 2^6, the global scale is the power of two left over, and a group far below is raised to
    // 2^-5 (its codes then round on that coarser grid). An all-zero expert keeps global 1.
    Format f = make_format("e2m1", "ue8m0", ScaleKind::kGroupTensor, 32, 0, "none", 1, 96, 2);
    f.activation = Dtype::parse("e4m3");
    std::vector<float> w(2 * 96, 0.0f);
    w[0] = 7.9f;    // group 0: OCP exponent floor(log2 7.9) - 2 = 0, the expert's top -> 2^6
    w[32] = 0.3f;   // group 1: exponent -4 -> 2^(-4 - 0 + 6) = 2^2
    w[64] = 1e-6f;  // group 2: exponent -22 -> 2^-16, below the window: raised to 2^-5
    Buffers b = allocate(canonical_shape(f));
    quantize(f, w.data(), b.view());
    EXPECT_EQ(b.global_scale[0], std::ldexp(1.0f, -6));
    EXPECT_EQ(b.scales[0], 64.0f);
    EXPECT_EQ(b.codes[0], 7u) << "7.9 saturates to 6 as in plain MX";
    EXPECT_EQ(b.scales[1], 4.0f);
    EXPECT_EQ(b.codes[32], 6u) << "0.3 / 2^-4 = 4.8 -> 4";
    EXPECT_EQ(b.scales[2], std::ldexp(1.0f, -5));
    EXPECT_EQ(b.codes[64], 0u) << "1e-6 / 2^-11 rounds to 0 on the raised grid";
    EXPECT_EQ(b.global_scale[1], 1.0f);
    for (int g = 3; g < 6; ++g) EXPECT_EQ(b.scales[g], 1.0f) << "all-zero groups: scale 1";
  }
  {
    // Wide float group scales: the largest becomes 1.0, so weight x scale cannot overflow.
    for (const char* sd : {"bf16", "f16", "f32"}) {
      const Format f = make_format("uint4b8", sd, ScaleKind::kGroupTensor, 32, 0, "none", 4, 64, 2);
      const CanonicalShape sh = canonical_shape(f);
      std::vector<float> w = random_weight(sh, 78);
      Buffers b = allocate(sh);
      quantize(f, w.data(), b.view());
      for (int e = 0; e < 2; ++e) {
        float scale_max = 0;
        for (int64_t i = 0; i < 4 * 2; ++i) scale_max = std::max(scale_max, b.scales[e * 8 + i]);
        EXPECT_EQ(scale_max, 1.0f) << sd;
        EXPECT_GT(b.global_scale[e], 0.0f) << sd;
      }
    }
  }
}

// Weights already on the grid come back bit for bit, with the expected codes.
TEST(Quantize, RepresentableWeightsRoundTripExactly) {
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> pick(0, 255);
  std::uniform_int_distribution<int> pow2(-8, 4);
  const struct {
    const char *w, *s;
    ScaleKind kind;
    int gk, gn;
    const char* zp;
  } cases[] = {
      {"int4", "f16", ScaleKind::kGroup, 32, 0, "none"},
      {"uint4b8", "bf16", ScaleKind::kChannel, 0, 0, "none"},
      {"int8", "f32", ScaleKind::kBlock, 32, 4, "none"},
      {"uint4", "f16", ScaleKind::kGroup, 32, 0, "uint4"},
      {"uint8", "f16", ScaleKind::kGroup, 32, 0, "uint8"},
      {"e4m3", "f32", ScaleKind::kChannel, 0, 0, "none"},
      {"e2m1", "ue8m0", ScaleKind::kGroup, 32, 0, "none"},
      {"e5m2", "f16", ScaleKind::kGroup, 32, 0, "none"},
      {"e2m1", "e4m3", ScaleKind::kGroupTensor, 16, 0, "none"},
      {"int8", "f32", ScaleKind::kTensor, 0, 0, "none"},
  };
  for (const auto& c : cases) {
    const Format f = make_format(c.w, c.s, c.kind, c.gk, c.gn, c.zp, 8, 96, 2);
    SCOPED_TRACE(describe(f));
    const CanonicalShape sh = canonical_shape(f);
    const Dtype wd = f.weight;
    const uint32_t max_code = wd.encode(wd.max_value()), min_code = wd.encode(wd.min_value());
    std::vector<float> w(sh.codes);
    std::vector<uint8_t> expected(sh.codes);
    const double global = c.kind == ScaleKind::kGroupTensor ? std::ldexp(1.0, -10) : 1.0;
    for (int64_t e = 0; e < sh.experts; ++e) {
      for (int64_t sr = 0; sr < sh.scale_rows; ++sr) {
        for (int64_t g = 0; g < sh.groups_k; ++g) {
          // A scale exact in the scale dtype; NVFP4's largest group scale must be 448.
          double s = std::ldexp(1.0, pow2(rng));
          if (c.kind == ScaleKind::kGroupTensor) s = (sr == 0 && g == 0) ? 448.0 : f.scale.decode(pick(rng) % 0x7E + 1);
          const double zp = f.has_zero_point() ? pick(rng) % static_cast<int>(wd.max_value() + 1) : 0.0;
          for (int64_t r = sr * sh.group_n; r < std::min(sh.n, (sr + 1) * sh.group_n); ++r) {
            for (int64_t k = g * sh.group_k; k < std::min(sh.k, (g + 1) * sh.group_k); ++k) {
              uint32_t code = pick(rng) & ((1u << wd.bits()) - 1);
              while (wd.is_nan_code(code) || std::isinf(wd.decode(code)) ||
                     (f.has_zero_point() ? false : std::fabs(wd.decode(code)) > wd.max_value()))
                code = pick(rng) & ((1u << wd.bits()) - 1);
              // Pin the extremes so the group's statistics give back exactly s (and zp).
              if (r == sr * sh.group_n && k == g * sh.group_k) code = max_code;
              if (f.has_zero_point() && r == sr * sh.group_n && k == g * sh.group_k + 1) code = min_code;
              if (wd.is_integer() && !f.has_zero_point() && wd.decode(code) == wd.min_value())
                code = max_code;  // symmetric ints use [-qmax, qmax]
              if (wd.is_float() && wd.decode(code) == 0.0) code = 0;  // -0 dequantizes to +0
              const int64_t i = (e * sh.n + r) * sh.k + k;
              expected[i] = static_cast<uint8_t>(code);
              const double scale = c.kind == ScaleKind::kTensor ? std::ldexp(1.0, -3) : s;
              w[i] = static_cast<float>((wd.decode(code) - zp) * scale * global);
            }
          }
        }
      }
    }
    Buffers b = allocate(sh);
    quantize(f, w.data(), b.view());
    std::vector<float> deq(sh.codes);
    dequantize(f, b.view(), deq.data());
    for (size_t i = 0; i < w.size(); ++i) {
      ASSERT_EQ(deq[i], w[i]) << i;
      ASSERT_EQ(b.codes[i], expected[i]) << i;
    }
  }
}

TEST(Quantize, ZeroTinyAndHugeGroupsStayFinite) {
  for (const char* s : {"f16", "bf16", "e4m3", "e5m2", "ue8m0", "f32"}) {
    for (const char* wt : {"int4", "e2m1", "e4m3"}) {
      const Format f = make_format(wt, s, ScaleKind::kGroup, 16, 0, "none", 3, 48, 1);
      SCOPED_TRACE(describe(f));
      std::vector<float> w(3 * 48, 0.0f);
      for (int k = 16; k < 32; ++k) w[k] = 1e-30f * static_cast<float>(k - 20);
      for (int k = 32; k < 48; ++k) w[k] = 1e30f * static_cast<float>(k - 40);
      for (int k = 48 + 16; k < 48 + 32; ++k) w[k] = 3.0f;  // a constant group
      const CanonicalShape sh = canonical_shape(f);
      Buffers b = allocate(sh);
      quantize(f, w.data(), b.view());
      std::vector<float> deq(sh.codes);
      dequantize(f, b.view(), deq.data());
      for (float v : b.scales) ASSERT_TRUE(std::isfinite(v) && v > 0) << v;
      for (float v : deq) ASSERT_TRUE(std::isfinite(v)) << v;
      for (int k = 0; k < 16; ++k) ASSERT_EQ(deq[k], 0.0f);
      check_quantization(f, w);
    }
  }
  // Zero groups with zero points, and an all-zero expert with global scales.
  for (const char* zp : {"uint4", "f16"}) {
    const Format f = make_format("uint4", "f16", ScaleKind::kGroup, 16, 0, zp, 2, 32, 1);
    std::vector<float> w(64, 0.0f);
    check_quantization(f, w);
  }
  const Format gt = make_format("e2m1", "e4m3", ScaleKind::kGroupTensor, 16, 0, "none", 2, 32, 2);
  std::vector<float> w(128, 0.0f);
  for (int i = 64; i < 128; ++i) w[i] = static_cast<float>(i % 9) - 4.0f;
  check_quantization(gt, w);
}

TEST(Quantize, NonFiniteWeightsAreRejectedByPosition) {
  const Format f = make_format("int4", "f16", ScaleKind::kGroup, 16, 0, "none", 4, 32, 2);
  const CanonicalShape sh = canonical_shape(f);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    std::vector<float> w(sh.codes, 1.0f);
    w[(1 * 4 + 2) * 32 + 3] = bad;
    w[(1 * 4 + 3) * 32 + 0] = bad;  // only the first is named
    Buffers b = allocate(sh);
    try {
      quantize(f, w.data(), b.view());
      ADD_FAILURE();
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), HM_ERROR_NON_FINITE);
      EXPECT_NE(e.message().find("weight[1][2][3] (expert 1, row 2, column 3)"), std::string::npos)
          << e.message();
      EXPECT_NE(e.message().find(std::isnan(bad) ? "NaN" : "Inf"), std::string::npos);
    }
  }
}

TEST(Quantize, FormatsItCannotQuantizeAreRejected) {
  const struct {
    Format f;
    hm_status_t status;
    const char* fragment;
  } cases[] = {
      {make_format("f16", "f16", ScaleKind::kGroup, 64, 0, "none", 4, 64, 1),
       HM_ERROR_UNSUPPORTED_FORMAT, "one byte per element"},
      {make_format("ue8m0", "f16", ScaleKind::kGroup, 64, 0, "none", 4, 64, 1),
       HM_ERROR_UNSUPPORTED_FORMAT, "not a quantized type"},
      {make_format("int4", "f16", ScaleKind::kGroup, 0, 0, "none", 4, 64, 1),
       HM_ERROR_INVALID_ARGUMENT, "group_k"},
      {make_format("int4", "f16", ScaleKind::kBlock, 64, 0, "none", 4, 64, 1),
       HM_ERROR_INVALID_ARGUMENT, "group_n"},
      {make_format("int4", "f16", ScaleKind::kGroup, 64, 0, "none", 0, 64, 1),
       HM_ERROR_INVALID_ARGUMENT, "shape"},
      {make_format("int4", "none", ScaleKind::kGroup, 64, 0, "none", 4, 64, 1),
       HM_ERROR_UNSUPPORTED_FORMAT, "scale dtype"},
      {make_format("int4", "int8", ScaleKind::kGroup, 64, 0, "none", 4, 64, 1),
       HM_ERROR_UNSUPPORTED_FORMAT, "scale dtype"},
      {make_format("e4m3", "f16", ScaleKind::kGroup, 64, 0, "uint4", 4, 64, 1),
       HM_ERROR_UNSUPPORTED_FORMAT, "integer weight"},
      {make_format("uint4", "f16", ScaleKind::kGroup, 64, 0, "e4m3", 4, 64, 1),
       HM_ERROR_UNSUPPORTED_FORMAT, "zero-point dtype"},
      {make_format("uint4", "ue8m0", ScaleKind::kGroup, 32, 0, "uint4", 4, 64, 1),
       HM_ERROR_UNSUPPORTED_FORMAT, "symmetric"},
      {make_format("int8", "none", ScaleKind::kTensor, 0, 0, "uint8", 4, 64, 1),
       HM_ERROR_UNSUPPORTED_FORMAT, "zero points need"},
      {make_format("int1", "f16", ScaleKind::kGroup, 32, 0, "none", 4, 64, 1),
       HM_ERROR_UNSUPPORTED_FORMAT, "no positive value"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(describe(c.f));
    try {
      canonical_shape(c.f);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), c.status) << e.message();
      EXPECT_NE(e.message().find(c.fragment), std::string::npos) << e.message();
    }
  }
  // Missing buffers.
  const Format f = make_format("uint4", "f16", ScaleKind::kGroupTensor, 32, 0, "uint4", 2, 64, 1);
  Buffers b = allocate(canonical_shape(f));
  std::vector<float> w(128, 1.0f);
  for (int missing = 0; missing < 5; ++missing) {
    CanonicalWeight v = b.view();
    const float* weight = w.data();
    if (missing == 0) v.codes = nullptr;
    if (missing == 1) v.scales = nullptr;
    if (missing == 2) v.zero_points = nullptr;
    if (missing == 3) v.global_scale = nullptr;
    if (missing == 4) weight = nullptr;
    try {
      quantize(f, weight, v);
      ADD_FAILURE() << missing;
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), HM_ERROR_INVALID_ARGUMENT);
      EXPECT_NE(e.message().find("NULL"), std::string::npos);
    }
  }
}

TEST(Quantize, BothDirectionsNameTheMissingBuffer) {
  // quantize writes and dequantize reads the same canonical buffers: each refuses a missing one
  // by name, and neither asks for a buffer the format does not have.
  const Format f = make_format("uint4", "f16", ScaleKind::kGroupTensor, 32, 0, "uint4", 2, 64, 1);
  Buffers b = allocate(canonical_shape(f));
  std::vector<float> w(128, 1.0f);
  quantize(f, w.data(), b.view());
  const char* const buffers[] = {"the codes buffer", "the scales buffer", "the zero_points buffer",
                                 "the global_scale buffer"};
  for (int missing = 0; missing < 4; ++missing) {
    CanonicalWeight v = b.view();
    if (missing == 0) v.codes = nullptr;
    if (missing == 1) v.scales = nullptr;
    if (missing == 2) v.zero_points = nullptr;
    if (missing == 3) v.global_scale = nullptr;
    for (const bool forward : {true, false}) {
      SCOPED_TRACE(std::string(forward ? "quantize " : "dequantize ") + buffers[missing]);
      try {
        if (forward)
          quantize(f, w.data(), v);
        else
          dequantize(f, v, w.data());
        ADD_FAILURE() << "accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.status(), HM_ERROR_INVALID_ARGUMENT);
        EXPECT_NE(e.message().find(std::string(buffers[missing]) + " is NULL"), std::string::npos)
            << e.message();
      }
    }
  }
  // Channel scales without zero points: only codes and scales are needed, both ways.
  const Format channel = make_format("int4", "f16", ScaleKind::kChannel, 0, 0, "none", 2, 64, 1);
  Buffers c = allocate(canonical_shape(channel));
  CanonicalWeight v;
  v.codes = c.codes.data();
  v.scales = c.scales.data();
  quantize(channel, w.data(), v);
  dequantize(channel, v, w.data());
}

TEST(Quantize, DequantizeRejectsCodesWiderThanTheDtype) {
  const Format f = make_format("int4", "f16", ScaleKind::kChannel, 0, 0, "none", 2, 8, 1);
  Buffers b = allocate(canonical_shape(f));
  std::fill(b.codes.begin(), b.codes.end(), 0);
  std::fill(b.scales.begin(), b.scales.end(), 1.0f);
  b.codes[9] = 0x10;
  std::vector<float> out(16);
  try {
    dequantize(f, b.view(), out.data());
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(e.message().find("codes[0][1][1]"), std::string::npos) << e.message();
  }
}

// Big enough to take the threaded path: the result equals quantizing row blocks one at a time.
TEST(Quantize, ThreadedResultIsDeterministic) {
  const Format f = make_format("uint4b8", "f16", ScaleKind::kGroup, 128, 0, "none", 512, 1024, 1);
  const CanonicalShape sh = canonical_shape(f);
  const std::vector<float> w = random_weight(sh, 11);
  Buffers all = allocate(sh);
  quantize(f, w.data(), all.view());
  Format slice = f;
  slice.n = 8;
  const CanonicalShape ssh = canonical_shape(slice);
  for (int64_t r = 0; r < sh.n; r += 8) {
    Buffers part = allocate(ssh);
    quantize(slice, w.data() + r * sh.k, part.view());
    ASSERT_TRUE(std::equal(part.codes.begin(), part.codes.end(), all.codes.begin() + r * sh.k));
    ASSERT_TRUE(std::equal(part.scales.begin(), part.scales.end(), all.scales.begin() + r * 8));
  }
}

}  // namespace
}  // namespace hm::quant
