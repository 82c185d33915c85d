// The GPU activation quantizer's rule (kernels/humming/quant/activation.h), compiled for the host:
// its integer f32 -> e4m3 / e5m2 / int8 encoders against the library's code table (round to
// nearest even, saturating) over a dense sweep of f32 bit patterns, its f16 widening against the
// dtype decoder for every f16 code, and its scale rule against the host quantizer's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include <humming/quant/activation.h>

#include "core/dtype.hpp"
#include "quant/code_table.hpp"

namespace {

using hm::core::Dtype;
namespace aq = hm::actquant;

float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

template <int Out>
void sweep(const char* name) {
  SCOPED_TRACE(name);
  const hm::quant::CodeTable table(Dtype::parse(name));
  // Every 97th positive pattern below +inf (all exponents, many mantissas) plus every pattern
  // within 4096 ulps of each dtype value's midpoints would be ideal; the stride keeps the test
  // fast while hitting ties: patterns with a 0 low part are added explicitly below.
  int64_t checked = 0;
  for (uint32_t u = 0; u < 0x7F800000u; u += 97) {
    for (uint32_t sign : {0u, 0x80000000u}) {
      const float q = from_bits(u | sign);
      ASSERT_EQ(aq::encode<Out>(q), table.encode(static_cast<double>(q))) << std::hexfloat << q;
      ++checked;
    }
  }
  // Exact ties and their neighbours: every f32 with at most 8 significant bits, +-1 ulp.
  for (uint32_t e = 0; e < 255; ++e) {
    for (uint32_t top = 0; top < 256; ++top) {
      const uint32_t base = (e << 23) | (top << 15);
      for (uint32_t u : {base, base + 1, base - 1}) {
        if (u >= 0x7F800000u) continue;
        const float q = from_bits(u);
        ASSERT_EQ(aq::encode<Out>(q), table.encode(static_cast<double>(q))) << std::hexfloat << q;
        ASSERT_EQ(aq::encode<Out>(-q), table.encode(-static_cast<double>(q)))
            << std::hexfloat << -q;
      }
    }
  }
  // Infinity saturates.
  EXPECT_EQ(aq::encode<Out>(std::numeric_limits<float>::infinity()),
            table.encode(table.max_value()));
  EXPECT_GT(checked, 40000000);
}

TEST(ActivationRule, E4m3EncoderMatchesTheCodeTable) { sweep<aq::kOutE4m3>("e4m3"); }
TEST(ActivationRule, E5m2EncoderMatchesTheCodeTable) { sweep<aq::kOutE5m2>("e5m2"); }
TEST(ActivationRule, Int8EncoderMatchesTheCodeTable) { sweep<aq::kOutInt8>("int8"); }

TEST(ActivationRule, F16AndBf16WidenExactly) {
  const Dtype f16 = Dtype::parse("f16"), bf16 = Dtype::parse("bf16");
  for (uint32_t h = 0; h < 65536; ++h) {
    const float w = aq::widen_f16(static_cast<uint16_t>(h));
    const double want = f16.decode(h);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(w)) << h;
    } else {
      ASSERT_EQ(w, static_cast<float>(want)) << h;
      ASSERT_EQ(std::signbit(w), std::signbit(want)) << h;
    }
    const float b = aq::widen_bf16(static_cast<uint16_t>(h));
    const double want_b = bf16.decode(h);
    if (std::isnan(want_b)) {
      EXPECT_TRUE(std::isnan(b)) << h;
    } else {
      ASSERT_EQ(b, static_cast<float>(want_b)) << h;
    }
  }
}

TEST(ActivationRule, Scales) {
  EXPECT_EQ(aq::group_scale<aq::kOutE4m3>(0), 1.0f);  // zeros
  EXPECT_EQ(aq::group_scale<aq::kOutE4m3>(1), 1.0f);  // the smallest subnormal / 448 underflows
  uint32_t bits;
  const float nan_scale = aq::group_scale<aq::kOutInt8>(0x7F800000u);
  std::memcpy(&bits, &nan_scale, 4);
  EXPECT_EQ(bits, aq::kNanScaleBits);
  EXPECT_EQ(aq::group_scale<aq::kOutInt8>(0x42FE0000u), 1.0f);  // 127 / 127
  EXPECT_EQ(aq::group_scale<aq::kOutE5m2>(0x47600000u), 1.0f);  // 57344 / 57344
  EXPECT_EQ(aq::quantize_element<aq::kOutE4m3>(3.0f, nan_scale), 0u);
  // A subnormal scale (absmax 2^-120 / 448) keeps its bits.
  const float tiny = std::ldexp(1.0f, -120);
  std::memcpy(&bits, &tiny, 4);
  EXPECT_EQ(aq::group_scale<aq::kOutE4m3>(bits), tiny / 448.0f);
  EXPECT_GT(tiny / 448.0f, 0.0f);
}

}  // namespace
