// Dtypes: every code of every <= 8-bit dtype, checked against an independent brute-force oracle
// (nearest finite value, ties to the even code); names, aliases, rejections; f16 / bf16 / f32 bit
// patterns against the hardware's own conversions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"

namespace hm::core {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<Dtype> small_dtypes() {
  std::vector<Dtype> out;
  for (Dtype d : all_named_dtypes())
    if (d.bits() <= 8) out.push_back(d);
  return out;
}

bool has_sign_bit(Dtype d) { return d.kind() == DtypeKind::kFloat; }

// The oracle: the code of the nearest finite value, by brute force over all codes. For signed
// floats the magnitude is searched and the sign of x is kept (so -tiny -> -0).
uint32_t oracle_encode(Dtype d, double x) {
  const int bits = d.bits();
  const bool sign_magnitude = has_sign_bit(d);
  const uint32_t limit = sign_magnitude ? (1u << (bits - 1)) : (1u << bits);
  // Beyond twice the range every distance is the same once rounded; clamp so they differ.
  const double limit_value = 2 * std::max(std::fabs(d.min_value()), d.max_value()) + 1;
  double target = sign_magnitude ? std::fabs(x) : x;
  target = std::min(limit_value, std::max(-limit_value, target));
  uint32_t best = 0;
  double best_distance = kInf;
  for (uint32_t c = 0; c < limit; ++c) {
    const double v = d.decode(c);
    if (std::isnan(v) || std::isinf(v)) continue;
    const double distance = std::fabs(target - v);
    // Ties: the even code for floats, the even value for integers (the same, except for
    // uint1b1, whose value 0 has code 1).
    const bool even = d.is_integer() ? std::fmod(v, 2.0) == 0.0 : (c & 1u) == 0;
    if (distance < best_distance || (distance == best_distance && even)) {
      best = c;
      best_distance = distance;
    }
  }
  if (sign_magnitude && std::signbit(x)) best |= 1u << (bits - 1);
  return best;
}

std::string label(Dtype d) { return d.name(); }

TEST(Dtype, EveryNamedDtypeRoundTripsItsNameAndCode) {
  const std::vector<Dtype> all = all_named_dtypes();
  EXPECT_GE(all.size(), 60u);
  for (Dtype d : all) {
    SCOPED_TRACE(label(d));
    EXPECT_EQ(Dtype::parse(d.name()), d);
    EXPECT_EQ(Dtype::from_code(d.code()), d);
    std::string upper = d.name();
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_EQ(Dtype::parse(upper), d) << "names are case-insensitive";
  }
  // Names are unique.
  for (size_t i = 0; i < all.size(); ++i)
    for (size_t j = i + 1; j < all.size(); ++j) EXPECT_NE(all[i].name(), all[j].name());
}

TEST(Dtype, EveryCodeDecodesAndEncodesBack) {
  for (Dtype d : small_dtypes()) {
    SCOPED_TRACE(label(d));
    for (uint32_t c = 0; c < (1u << d.bits()); ++c) {
      const double v = d.decode(c);
      if (d.is_nan_code(c)) {
        EXPECT_TRUE(std::isnan(v));
        const uint32_t nan_code = d.encode(v);
        EXPECT_TRUE(d.is_nan_code(nan_code)) << "NaN encodes to a NaN code";
        continue;
      }
      EXPECT_FALSE(std::isnan(v)) << c;
      EXPECT_EQ(d.encode(v), c) << "code " << c << " value " << v;
      EXPECT_EQ(d.is_inf_code(c), std::isinf(v)) << c;
    }
  }
}

TEST(Dtype, FiniteMagnitudesIncreaseWithTheCode) {
  for (Dtype d : small_dtypes()) {
    if (!d.is_float()) continue;
    SCOPED_TRACE(label(d));
    const uint32_t max_code = d.encode(d.max_value());
    EXPECT_EQ(d.decode(max_code), d.max_value());
    for (uint32_t c = 0; c < max_code; ++c) EXPECT_LT(d.decode(c), d.decode(c + 1)) << c;
  }
}

// Ties go to the even code (floats) or the even value (integers; the same except for uint1b1).
TEST(Dtype, MidpointsRoundToEvenAndNeighboursToTheNearest) {
  for (Dtype d : small_dtypes()) {
    SCOPED_TRACE(label(d));
    // Adjacent finite values in increasing order.
    std::vector<uint32_t> order;
    if (d.is_integer()) {
      for (double v = d.min_value(); v <= d.max_value(); v += 1) order.push_back(d.encode(v));
    } else {
      for (uint32_t c = 0; c <= d.encode(d.max_value()); ++c) order.push_back(c);
    }
    for (size_t i = 0; i + 1 < order.size(); ++i) {
      const uint32_t lo = order[i], hi = order[i + 1];
      const double a = d.decode(lo), b = d.decode(hi);
      const double mid = 0.5 * (a + b);
      const bool lo_even = d.is_integer() ? std::fmod(a, 2.0) == 0.0 : (lo & 1u) == 0;
      const uint32_t even = lo_even ? lo : hi;
      EXPECT_EQ(d.encode(mid), even) << a << " .. " << b;
      EXPECT_EQ(d.encode(std::nextafter(mid, -kInf)), lo);
      EXPECT_EQ(d.encode(std::nextafter(mid, kInf)), hi);
      if (has_sign_bit(d)) {
        const uint32_t sign = 1u << (d.bits() - 1);
        EXPECT_EQ(d.encode(-mid), even | sign);
        EXPECT_EQ(d.encode(-std::nextafter(mid, kInf)), hi | sign);
      }
    }
  }
}

TEST(Dtype, EncodeMatchesTheBruteForceOracleOnADenseSweep) {
  std::mt19937_64 rng(1234);
  for (Dtype d : small_dtypes()) {
    SCOPED_TRACE(label(d));
    std::vector<double> xs = {0.0, -0.0, d.max_value() * 1.5, -d.max_value() * 1.5, 1e300, -1e300};
    const double lo = d.is_signed() ? -d.max_value() * 1.25 : 0.0;
    const double span = d.max_value() * 1.25 - lo;
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    for (int i = 0; i < 400; ++i) xs.push_back(lo + span * uniform(rng));
    // Log-uniform magnitudes reach the subnormals.
    for (int i = 0; i < 200; ++i) {
      const double mag = std::ldexp(1.0 + uniform(rng), static_cast<int>(uniform(rng) * 60) - 40);
      xs.push_back(mag);
      if (d.is_signed()) xs.push_back(-mag);
    }
    for (double x : xs) {
      if (d.code() == HM_DTYPE_UE8M0 && !(x > 0)) continue;
      EXPECT_EQ(d.encode(x), oracle_encode(d, x)) << "x = " << x;
    }
  }
}

TEST(Dtype, SaturationInfinityAndNaN) {
  for (Dtype d : small_dtypes()) {
    SCOPED_TRACE(label(d));
    const uint32_t max_code = d.encode(d.max_value());
    EXPECT_EQ(d.encode(d.max_value() * 4), max_code);
    EXPECT_EQ(d.encode(std::nextafter(d.max_value(), kInf)), max_code);
    const bool ieee = d.is_float() && d.variant() == FloatVariant::kIeee;
    if (d.code() != HM_DTYPE_UE8M0) {
      const uint32_t min_code = d.encode(d.min_value());
      EXPECT_EQ(d.decode(min_code), d.min_value());
      EXPECT_EQ(d.encode(d.min_value() * 4 - 1), min_code);
      EXPECT_EQ(d.encode(-kInf), ieee ? d.encode(-kInf) : min_code);
    }
    if (ieee) {
      EXPECT_TRUE(d.is_inf_code(d.encode(kInf)));
      EXPECT_EQ(d.decode(d.encode(kInf)), kInf);
      EXPECT_EQ(d.decode(d.encode(-kInf)), -kInf);
    } else {
      EXPECT_EQ(d.encode(kInf), max_code) << "no Inf: +Inf saturates";
    }
    const bool has_nan = d.is_float() && d.variant() != FloatVariant::kFinite;
    if (has_nan) {
      EXPECT_TRUE(d.is_nan_code(d.encode(kNaN)));
    } else {
      try {
        d.encode(kNaN);
        ADD_FAILURE() << "NaN must be rejected";
      } catch (const Error& e) {
        EXPECT_EQ(e.status(), HM_ERROR_NON_FINITE);
        EXPECT_NE(e.message().find(d.name()), std::string::npos);
      }
    }
  }
}

TEST(Dtype, KnownValues) {
  const Dtype e4m3 = Dtype::from_code(HM_DTYPE_E4M3), e5m2 = Dtype::from_code(HM_DTYPE_E5M2);
  const Dtype e2m1 = Dtype::from_code(HM_DTYPE_E2M1), ue8m0 = Dtype::from_code(HM_DTYPE_UE8M0);
  EXPECT_EQ(e4m3.max_value(), 448.0);
  EXPECT_EQ(e4m3.decode(0x01), std::ldexp(1.0, -9));
  EXPECT_TRUE(e4m3.is_nan_code(0x7F));
  EXPECT_TRUE(e4m3.is_nan_code(0xFF));
  EXPECT_EQ(e4m3.encode(kNaN), 0x7Fu);
  EXPECT_EQ(e4m3.encode(1e6), 0x7Eu);
  EXPECT_EQ(e4m3.encode(-0.0), 0x80u);
  EXPECT_EQ(e4m3.encode(-1e-9), 0x80u) << "a tiny negative rounds to -0";
  EXPECT_TRUE(std::signbit(e4m3.decode(0x80)));
  EXPECT_EQ(e5m2.max_value(), 57344.0);
  EXPECT_EQ(e5m2.decode(0x7C), kInf);
  EXPECT_EQ(e5m2.encode(kNaN), 0x7Eu);
  EXPECT_EQ(e5m2.encode(1e9), 0x7Bu) << "finite overflow saturates even where Inf exists";
  const double fp4[] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (uint32_t c = 0; c < 8; ++c) {
    EXPECT_EQ(e2m1.decode(c), fp4[c]);
    EXPECT_EQ(e2m1.decode(c | 8), -fp4[c]);
  }
  EXPECT_EQ(e2m1.encode(5.0), 6u) << "5 is the midpoint of 4 (code 6) and 6 (code 7)";
  EXPECT_EQ(Dtype::parse("e3m2").max_value(), 28.0);
  EXPECT_EQ(Dtype::parse("e2m3").max_value(), 7.5);
  EXPECT_EQ(Dtype::parse("e3m4").max_value(), 31.0);
  EXPECT_EQ(Dtype::parse("e3m4ieee").max_value(), 15.5);
  EXPECT_EQ(Dtype::parse("e4m3ieee").max_value(), 240.0);
  const Dtype e0m3 = Dtype::parse("e0m3");
  for (uint32_t c = 0; c < 8; ++c) {
    EXPECT_EQ(e0m3.decode(c), c / 8.0);
    EXPECT_EQ(e0m3.decode(c | 8), -(c / 8.0));
  }
  EXPECT_EQ(ue8m0.decode(127), 1.0);
  EXPECT_EQ(ue8m0.decode(0), std::ldexp(1.0, -127));
  EXPECT_EQ(ue8m0.decode(254), std::ldexp(1.0, 127));
  EXPECT_TRUE(std::isnan(ue8m0.decode(255)));
  EXPECT_EQ(ue8m0.encode(1.5), 128u) << "tie between 1 (127) and 2 (128): even code";
  EXPECT_EQ(ue8m0.encode(3.0), 128u) << "tie between 2 (128) and 4 (129): even code";
  EXPECT_EQ(ue8m0.encode(std::ldexp(1.0, -140)), 0u);
  EXPECT_EQ(ue8m0.encode(kNaN), 255u);
  for (double bad : {0.0, -0.0, -1.0}) {
    try {
      ue8m0.encode(bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), HM_ERROR_INVALID_ARGUMENT);
    }
  }
  // Integers.
  const Dtype int4 = Dtype::parse("int4"), uint4b8 = Dtype::parse("uint4b8");
  EXPECT_EQ(int4.decode(0x8), -8.0);
  EXPECT_EQ(int4.decode(0xF), -1.0);
  EXPECT_EQ(int4.encode(-1.0), 0xFu);
  EXPECT_EQ(int4.encode(2.5), 2u);
  EXPECT_EQ(int4.encode(3.5), 4u);
  EXPECT_EQ(int4.encode(-2.5), 0xEu);
  EXPECT_EQ(int4.encode(100), 7u);
  EXPECT_EQ(uint4b8.decode(0), -8.0);
  EXPECT_EQ(uint4b8.decode(8), 0.0);
  EXPECT_EQ(uint4b8.encode(7.4), 15u);
  EXPECT_EQ(uint4b8.implicit_zero_point(), 8);
  EXPECT_EQ(Dtype::parse("uint8b128").decode(0), -128.0);
  EXPECT_EQ(Dtype::parse("int1").decode(1), -1.0);
  EXPECT_EQ(Dtype::parse("int1").max_value(), 0.0);
  EXPECT_EQ(Dtype::parse("uint1b1").decode(0), -1.0);
  EXPECT_EQ(Dtype::parse("uint8").encode(-3), 0u);
  EXPECT_EQ(Dtype::parse("uint8").encode(kInf), 255u);
  EXPECT_EQ(int4.encode(-0.0), 0u);
  try {
    int4.encode(kNaN);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_NON_FINITE);
  }
}

TEST(Dtype, FieldsAndBiases) {
  const Dtype f32 = Dtype::from_code(HM_DTYPE_F32);
  EXPECT_EQ(f32.kind(), DtypeKind::kFloat);
  EXPECT_EQ(f32.bits(), 32);
  EXPECT_EQ(f32.exponent_bits(), 8);
  EXPECT_EQ(f32.mantissa_bits(), 23);
  EXPECT_EQ(f32.variant(), FloatVariant::kIeee);
  EXPECT_EQ(f32.exponent_bias(), 127);
  EXPECT_EQ(Dtype::from_code(HM_DTYPE_F16).exponent_bias(), 15);
  EXPECT_EQ(Dtype::from_code(HM_DTYPE_E4M3).exponent_bias(), 7);
  EXPECT_EQ(Dtype::from_code(HM_DTYPE_E2M1).exponent_bias(), 1);
  EXPECT_EQ(Dtype::parse("e0m3").exponent_bias(), 1);
  EXPECT_TRUE(Dtype::parse("uint4b8").is_signed());
  EXPECT_FALSE(Dtype::parse("uint4").is_signed());
  EXPECT_FALSE(Dtype::parse("ue8m0").is_signed());
  EXPECT_TRUE(Dtype::parse("ue8m0").is_float());
  EXPECT_TRUE(Dtype::parse("int3").is_integer());
  EXPECT_TRUE(Dtype().is_none());
  EXPECT_EQ(Dtype::from_code(0), Dtype());
  EXPECT_EQ(Dtype().name(), "none");
  EXPECT_EQ(Dtype::parse("none"), Dtype());
  // The header's constants are the canonical codes.
  EXPECT_EQ(Dtype::integer(true, 8).code(), HM_DTYPE_INT8);
  EXPECT_EQ(Dtype::integer(true, 4).code(), HM_DTYPE_INT4);
  EXPECT_EQ(Dtype::integer(false, 4).code(), HM_DTYPE_UINT4);
  EXPECT_EQ(Dtype::integer(false, 8).code(), HM_DTYPE_UINT8);
  EXPECT_EQ(Dtype::biased_integer(4).code(), HM_DTYPE_UINT4B8);
  EXPECT_EQ(Dtype::floating(4, 3).code(), HM_DTYPE_E4M3);
  EXPECT_EQ(Dtype::floating(5, 2).code(), HM_DTYPE_E5M2);
  EXPECT_EQ(Dtype::floating(2, 1).code(), HM_DTYPE_E2M1);
  EXPECT_EQ(Dtype::floating(5, 10).code(), HM_DTYPE_F16);
  EXPECT_EQ(Dtype::floating(8, 7).code(), HM_DTYPE_BF16);
  EXPECT_EQ(Dtype::floating(8, 23).code(), HM_DTYPE_F32);
  EXPECT_EQ(Dtype::unsigned_floating(8, 0).code(), HM_DTYPE_UE8M0);
}

// f16 / bf16 / f32 against the hardware conversions (RNE) and known bit patterns.
TEST(Dtype, SixteenAndThirtyTwoBitFloats) {
  const Dtype f16 = Dtype::from_code(HM_DTYPE_F16), bf16 = Dtype::from_code(HM_DTYPE_BF16);
  const Dtype f32 = Dtype::from_code(HM_DTYPE_F32);
  EXPECT_EQ(f16.decode(0x3C00), 1.0);
  EXPECT_EQ(f16.decode(0x7BFF), 65504.0);
  EXPECT_EQ(f16.decode(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(f16.decode(0x0400), std::ldexp(1.0, -14));
  EXPECT_EQ(f16.decode(0xC000), -2.0);
  EXPECT_EQ(f16.decode(0x7C00), kInf);
  EXPECT_EQ(f16.decode(0xFC00), -kInf);
  EXPECT_TRUE(std::isnan(f16.decode(0x7E00)));
  EXPECT_EQ(f16.encode(1.0 / 3.0), 0x3555u);
  EXPECT_EQ(f16.encode(kNaN), 0x7E00u);
  EXPECT_EQ(f16.encode(65520.0), 0x7BFFu) << "saturates instead of rounding to Inf";
  EXPECT_EQ(f16.encode(std::ldexp(1.0, -25)), 0x0000u) << "tie with 0: even";
  EXPECT_EQ(f16.encode(std::ldexp(3.0, -25)), 0x0002u) << "tie between codes 1 and 2: even";
  EXPECT_EQ(bf16.decode(0x3F80), 1.0);
  EXPECT_EQ(bf16.encode(1.0 / 3.0), 0x3EABu);
  EXPECT_EQ(bf16.encode(kNaN), 0x7FC0u);
  EXPECT_EQ(bf16.decode(0x7F7F), std::ldexp(255.0, 120));
  EXPECT_EQ(f32.encode(0.1), 0x3DCCCCCDu);
  EXPECT_EQ(f32.encode(kNaN), 0x7FC00000u);
  // Every f16 and bf16 code round-trips.
  for (uint32_t c = 0; c < 65536; ++c) {
    if (!f16.is_nan_code(c)) {
      ASSERT_EQ(f16.encode(f16.decode(c)), c) << c;
    }
    if (!bf16.is_nan_code(c)) {
      ASSERT_EQ(bf16.encode(bf16.decode(c)), c) << c;
    }
  }
  // f32 encode equals the hardware's double -> float conversion (RNE) wherever it is finite;
  // bf16 encode of an f32 equals rounding the f32's top 16 bits to nearest even.
  std::mt19937_64 rng(99);
  std::uniform_int_distribution<uint64_t> bits64;
  std::uniform_int_distribution<uint32_t> bits32;
  for (int i = 0; i < 20000; ++i) {
    double x;
    uint64_t b = bits64(rng);
    // Exponents near f32's range (normals and subnormals).
    b = (b & 0x800FFFFFFFFFFFFFull) | (static_cast<uint64_t>(1023 - 155 + (bits32(rng) % 290)) << 52);
    std::memcpy(&x, &b, sizeof x);
    const float hw = static_cast<float>(x);
    if (std::isinf(hw)) continue;
    uint32_t hw_bits;
    std::memcpy(&hw_bits, &hw, sizeof hw_bits);
    ASSERT_EQ(f32.encode(x), hw_bits) << x;

    uint32_t f = bits32(rng);
    float xf;
    std::memcpy(&xf, &f, sizeof xf);
    if (std::isnan(xf) || std::isinf(xf)) continue;
    const uint32_t rounded = (f + 0x7FFFu + ((f >> 16) & 1u)) >> 16;
    if (((rounded >> 7) & 0xFFu) == 0xFFu) continue;  // overflow: we saturate instead
    ASSERT_EQ(bf16.encode(xf), rounded) << xf;
  }
}

TEST(DtypeParse, Aliases) {
  const struct {
    const char* text;
    const char* canonical;
  } cases[] = {
      {"fp16", "f16"}, {"HALF", "f16"}, {"float16", "f16"}, {"e5m10", "f16"},
      {"float16e5m10", "f16"}, {"bfloat16", "bf16"}, {"e8m7", "bf16"}, {"fp32", "f32"},
      {"float", "f32"}, {"Float32", "f32"}, {"e8m23", "f32"}, {"fp8", "e4m3"},
      {"float8_e4m3fn", "e4m3"}, {"e4m3fn", "e4m3"}, {"fp8_e4m3", "e4m3"}, {"float8e4m3", "e4m3"},
      {"float8_e5m2", "e5m2"}, {"fp8_e5m2", "e5m2"}, {"float8_e4m3", "e4m3ieee"},
      {"float8_e3m4", "e3m4ieee"}, {"float8e3m4", "e3m4"}, {"fp4", "e2m1"},
      {"float4_e2m1fn", "e2m1"}, {"mxfp4", "e2m1"}, {"NVFP4", "e2m1"}, {"float4e2m1", "e2m1"},
      {"e2m1fn", "e2m1"}, {"e2m1finite", "e2m1"}, {"fp6", "e2m3"}, {"float6_e2m3fn", "e2m3"},
      {"float6_e3m2fn", "e3m2"}, {"float8_e8m0fnu", "ue8m0"}, {"e8m0", "ue8m0"},
      {"float8e8m0", "ue8m0"}, {"float4e0m3", "e0m3"}, {"e5m2ieee", "e5m2"},
      {"e5m2fn", "e5m2fn"}, {"e4m3finite", "e4m3finite"}, {"uint4b8", "uint4b8"},
      {"UINT8B128", "uint8b128"}, {"int1", "int1"}, {"uint2b2", "uint2b2"},
      {"float8e5m2", "e5m2"}, {"float6e3m2", "e3m2"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    const Dtype d = Dtype::parse(c.text);
    EXPECT_EQ(d.name(), c.canonical);
    EXPECT_EQ(Dtype::parse(c.canonical), d);
  }
}

TEST(DtypeParse, RejectionsNameTheTextAndSayWhy) {
  const struct {
    const char* text;
    const char* why;  // a fragment of the message
  } cases[] = {
      {"", "empty"},
      {"int9", "1..8 bits"},
      {"int0", "1..8 bits"},
      {"int16", "int16/int32"},
      {"uint4b7", "uint4b8"},
      {"int4b8", "uint4b8"},
      {"e4m4", "X + Y <= 7"},
      {"e0m2", "e0m3"},
      {"e2m1ieee", "only the finite variant"},
      {"e3m2fn", ""},  // accepted, see below
      {"e1m6ieee", "IEEE variant needs"},
      {"e7m0ieee", "IEEE variant needs"},
      {"e5m10fn", "only as the IEEE variant"},
      {"e4m3xyz", "unknown float suffix"},
      {"float8_e4m3fnuz", "fnuz"},
      {"float8_e5m2fnuz", "fnuz"},
      {"float8_e4m3b11fnuz", "fnuz"},
      {"float8_e5m3fnu", "ue8m0"},
      {"ue5m2", "ue8m0"},
      {"float9e4m3", "width 9"},
      // A width with a leading zero missed the float8_e4m3 alias (IEEE variant) and parsed as
      // the finite e4m3; float0 read as no width at all.
      {"float08_e4m3", "without leading zeros"},
      {"float0e4m3", "without leading zeros"},
      {"float00e2m1", "without leading zeros"},
      {"fp12", ""},
      {"banana", ""},
      {"int", ""},
      {" int4", ""},
      {"e99999m1", "too long"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    if (std::string(c.text) == "e3m2fn") {
      EXPECT_EQ(Dtype::parse(c.text).name(), "e3m2");
      continue;
    }
    try {
      Dtype::parse(c.text);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), HM_ERROR_PARSE);
      EXPECT_NE(e.message().find(std::string("'") + c.text + "'"), std::string::npos) << e.message();
      EXPECT_NE(e.message().find(c.why), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("Accepted:"), std::string::npos) << e.message();
    }
  }
}

TEST(DtypeCode, InvalidCodesAreRejected) {
  const hm_dtype_t bad[] = {
      HM_DTYPE_MAKE(HM_DTYPE_KIND_SINT, 9, 0, 9, 0),
      HM_DTYPE_MAKE(HM_DTYPE_KIND_SINT, 4, 0, 3, 0),
      HM_DTYPE_MAKE(HM_DTYPE_KIND_SINT, 4, 0, 4, 1),
      HM_DTYPE_MAKE(HM_DTYPE_KIND_UINT, 0, 0, 0, 0),
      HM_DTYPE_MAKE(HM_DTYPE_KIND_FLOAT, 8, 4, 4, HM_FLOAT_VARIANT_FN),
      HM_DTYPE_MAKE(HM_DTYPE_KIND_FLOAT, 9, 4, 4, HM_FLOAT_VARIANT_FN),
      HM_DTYPE_MAKE(HM_DTYPE_KIND_FLOAT, 4, 2, 1, HM_FLOAT_VARIANT_IEEE),
      HM_DTYPE_MAKE(HM_DTYPE_KIND_FLOAT, 8, 4, 3, 3),
      HM_DTYPE_MAKE(HM_DTYPE_KIND_FLOAT, 16, 5, 10, HM_FLOAT_VARIANT_FN),
      HM_DTYPE_MAKE(HM_DTYPE_KIND_UFLOAT, 8, 5, 2, HM_FLOAT_VARIANT_FN),
      HM_DTYPE_MAKE(6, 8, 0, 8, 0),
      HM_DTYPE_INT4 | 0x00000100u,  // an integer with an exponent bit
      HM_DTYPE_MAKE(HM_DTYPE_KIND_FLOAT, 32, 8, 23, HM_FLOAT_VARIANT_FN),
  };
  for (hm_dtype_t code : bad) {
    try {
      Dtype::from_code(code);
      ADD_FAILURE() << std::hex << code;
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), HM_ERROR_INVALID_ARGUMENT);
      EXPECT_NE(e.message().find("not a valid dtype"), std::string::npos);
    }
  }
  // Codes that do not fit the dtype.
  try {
    Dtype::from_code(HM_DTYPE_E2M1).decode(16);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_INVALID_ARGUMENT);
  }
  try {
    Dtype().decode(0);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_INVALID_ARGUMENT);
  }
}

}  // namespace
}  // namespace hm::core
