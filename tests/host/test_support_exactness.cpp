// The dtype rules are short formulas (R8-R11, R19); these tests prove each formula equal to its
// definition, "every weight (scale) value is exactly a value of the activation", by decoding and
// re-encoding every code with Dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "core/support.hpp"

namespace hm::core {
namespace {

bool exact_in(Dtype a, double x) {
  if (a.is_integer()) return x == std::floor(x) && x >= a.min_value() && x <= a.max_value();
  return a.decode(a.encode(x)) == x;
}

bool breaks(const Format& f, const char* id) {
  for (const Violation& v : check(f, std::nullopt))
    if (std::string(v.rule->id) == id) return true;
  return false;
}

Format pair(Dtype w, Dtype a, Dtype zp = Dtype()) {
  Format f = Format::parse("s=f32:channel n=64 k=64");
  f.weight = w;
  f.activation = a;
  f.zero_point = zp;
  return f;
}

// Every finite value of d (codes of at most 16 bits).
std::vector<double> finite_values(Dtype d) {
  std::vector<double> out;
  for (uint32_t c = 0; c < (1u << d.bits()); ++c)
    if (!d.is_nan_code(c) && !d.is_inf_code(c)) out.push_back(d.decode(c));
  return out;
}

double smallest_positive(Dtype d) {
  double best = INFINITY;
  for (double v : finite_values(d))
    if (v > 0 && v < best) best = v;
  return best;
}

std::vector<Dtype> float_activations() {
  std::vector<Dtype> out;
  for (const ActivationSupport& a : supported_activations())
    if (a.dtype.kind() == DtypeKind::kFloat) out.push_back(a.dtype);
  return out;
}

TEST(SupportExactness, IntegerLimitOfEveryFloat) {
  for (Dtype a : all_named_dtypes()) {
    if (a.kind() != DtypeKind::kFloat || a.bits() > 16) continue;
    const int64_t limit = exact_integer_limit(a);
    const double u = smallest_positive(a);
    for (int64_t k = 0; k <= limit; ++k) {
      ASSERT_TRUE(exact_in(a, static_cast<double>(k) * u)) << a.name() << " k=" << k;
      ASSERT_TRUE(exact_in(a, -static_cast<double>(k) * u)) << a.name() << " k=" << k;
    }
    EXPECT_FALSE(exact_in(a, static_cast<double>(limit + 1) * u)) << a.name() << " limit " << limit;
  }
  EXPECT_EQ(exact_integer_limit(Dtype::from_code(HM_DTYPE_F16)), 2048);
  EXPECT_EQ(exact_integer_limit(Dtype::from_code(HM_DTYPE_BF16)), 256);
  EXPECT_EQ(exact_integer_limit(Dtype::from_code(HM_DTYPE_E4M3)), 16);
  EXPECT_EQ(exact_integer_limit(Dtype::from_code(HM_DTYPE_E2M1)), 4);
  EXPECT_EQ(exact_integer_limit(Dtype::floating(0, 3)), 7);
}

TEST(SupportExactness, IntegerWeightRanges) {
  for (Dtype w : all_named_dtypes()) {
    if (!w.is_integer()) continue;
    double lo = INFINITY, hi = -INFINITY;
    for (double v : finite_values(w)) lo = std::min(lo, v), hi = std::max(hi, v);
    const IntegerRange r = weight_integer_range(w, Dtype());
    EXPECT_EQ(r.lo, lo) << w.name();
    EXPECT_EQ(r.hi, hi) << w.name();
    if (w.kind() == DtypeKind::kUnsignedInt) {  // q - zp over every q and zp
      const IntegerRange z = weight_integer_range(w, w);
      EXPECT_EQ(z.lo, -hi) << w.name();
      EXPECT_EQ(z.hi, hi) << w.name();
    }
  }
}

// R8: the formula equals "every integer value times the activation's least step is exact".
TEST(SupportExactness, IntWeightInFloatMatchesBruteForce) {
  int accepted = 0;
  for (Dtype a : float_activations()) {
    const double u = smallest_positive(a);
    for (Dtype w : all_named_dtypes()) {
      if (!w.is_integer()) continue;
      for (Dtype zp : {Dtype(), w}) {
        if (!zp.is_none() && w.kind() != DtypeKind::kUnsignedInt) continue;
        const IntegerRange r = weight_integer_range(w, zp);
        bool exact = true;
        for (int64_t v = r.lo; v <= r.hi && exact; ++v) exact = exact_in(a, static_cast<double>(v) * u);
        EXPECT_EQ(!breaks(pair(w, a, zp), "R8"), exact) << w.name() << " zp=" << zp.name() << " a=" << a.name();
        accepted += exact ? 1 : 0;
      }
    }
  }
  EXPECT_GT(accepted, 50);
}

// R9: the formula equals "the conversion is exact for every finite weight value": the conversion
// keeps a code's exponent field and mantissa bits, so a weight value v becomes
// v * 2^(bias_w - bias_a) in the activation type (the factor goes into the scale).
TEST(SupportExactness, FloatWeightInFloatMatchesTheConversion) {
  int accepted = 0;
  for (Dtype a : float_activations()) {
    for (Dtype w : all_named_dtypes()) {
      if (w.kind() != DtypeKind::kFloat || (w.bits() > 8 && w.bits() != 16)) continue;
      bool exact = true;
      for (double v : finite_values(w)) {
        exact = exact && exact_in(a, std::ldexp(v, w.exponent_bias() - a.exponent_bias()));
        if (!exact) break;
      }
      EXPECT_EQ(!breaks(pair(w, a), "R9"), exact) << w.name() << " on " << a.name();
      accepted += exact ? 1 : 0;
    }
  }
  EXPECT_GT(accepted, 50);
}

// R10: integer weights on integer activations fit the activation's range.
TEST(SupportExactness, IntWeightInIntMatchesBruteForce) {
  for (const ActivationSupport& act : supported_activations()) {
    if (!act.dtype.is_integer()) continue;
    for (Dtype w : all_named_dtypes()) {
      if (!w.is_integer()) continue;
      for (Dtype zp : {Dtype(), w}) {
        if (!zp.is_none() && w.kind() != DtypeKind::kUnsignedInt) continue;
        const IntegerRange r = weight_integer_range(w, zp);
        const bool fits = exact_in(act.dtype, static_cast<double>(r.lo)) && exact_in(act.dtype, static_cast<double>(r.hi));
        EXPECT_EQ(!breaks(pair(w, act.dtype, zp), "R10"), fits) << w.name() << " zp=" << zp.name() << " a=" << act.dtype.name();
      }
    }
  }
}

// R11: float weights on integer activations are integers in units of their least step.
TEST(SupportExactness, FloatWeightInIntMatchesBruteForce) {
  for (const ActivationSupport& act : supported_activations()) {
    if (!act.dtype.is_integer()) continue;
    for (Dtype w : all_named_dtypes()) {
      if (w.kind() != DtypeKind::kFloat || w.bits() > 16) continue;
      const double u = smallest_positive(w);
      bool exact = true;
      for (double v : finite_values(w)) {
        exact = exact && exact_in(act.dtype, v / u);
        if (!exact) break;
      }
      EXPECT_EQ(!breaks(pair(w, act.dtype), "R11"), exact) << w.name() << " on " << act.dtype.name();
    }
  }
}

// R19's helper: a float is exactly inside another, value by value, with no rescaling.
TEST(SupportExactness, FloatFitsExactlyMatchesBruteForce) {
  for (Dtype a : float_activations()) {
    for (Dtype s : all_named_dtypes()) {
      if (!s.is_float() || s.bits() > 16) continue;
      bool exact = true;
      for (double v : finite_values(s)) {
        exact = exact && exact_in(a, v);
        if (!exact) break;
      }
      EXPECT_EQ(float_fits_exactly(s, a), exact) << s.name() << " in " << a.name();
    }
  }
  EXPECT_TRUE(float_fits_exactly(Dtype::from_code(HM_DTYPE_UE8M0), Dtype::from_code(HM_DTYPE_BF16)));
  EXPECT_FALSE(float_fits_exactly(Dtype::from_code(HM_DTYPE_UE8M0), Dtype::from_code(HM_DTYPE_F16)));
  EXPECT_FALSE(float_fits_exactly(Dtype::from_code(HM_DTYPE_F32), Dtype::from_code(HM_DTYPE_BF16)));
}

// The exponent window (core::scale_exponent_window) is exactly the set of group exponents e for
// which every 4-bit float weight value times 2^e is zero or a normal, finite value of the
// activation (what the kernel's byte table and exponent add produce), checked over e in
// [-40, 40] for every 4-bit signed float weight and both 8-bit float activations (int8: every
// value times 2^e a whole count of least steps within a lane); and it exists only for ue8m0
// group x tensor scales.
TEST(SupportExactness, ScaleExponentWindowMatchesBruteForce) {
  for (const char* act : {"e4m3", "e5m2"})
    for (const char* weight : {"e2m1", "e1m2", "e3m0"}) {
      const Dtype a = Dtype::parse(act), w = Dtype::parse(weight);
      Format f = Format::parse(std::string("w=") + weight + " a=" + act +
                               " c=bf16 s=ue8m0:g32+tensor n=64 k=64");
      const std::optional<ScaleExponentWindow> window = scale_exponent_window(f);
      const double least_normal = std::ldexp(1.0, 1 - a.exponent_bias());
      std::vector<int> fits;
      for (int e = -40; e <= 40; ++e) {
        bool all = true;
        for (double v : finite_values(w)) {
          const double x = std::fabs(std::ldexp(v, e));
          all = all && (x == 0.0 || (x >= least_normal && x <= a.max_value() && exact_in(a, x)));
        }
        if (all) fits.push_back(e);
      }
      ASSERT_TRUE(window.has_value()) << weight << " on " << act;
      ASSERT_FALSE(fits.empty()) << weight << " on " << act;
      EXPECT_EQ(window->lo, fits.front()) << weight << " on " << act;
      EXPECT_EQ(window->hi, fits.back()) << weight << " on " << act;
      EXPECT_EQ(static_cast<int>(fits.size()), window->hi - window->lo + 1) << "no gaps";
    }
  // int8 activations (rule R11): every weight value times 2^e is a whole count of the weight's
  // least step that fits a lane (|count| <= 127), which is what the kernel's shifted step table
  // produces.
  for (const char* weight : {"e2m1", "e1m2", "e3m0"}) {
    const Dtype w = Dtype::parse(weight);
    Format f = Format::parse(std::string("w=") + weight + " a=int8 c=bf16 s=ue8m0:g32+tensor n=64 k=64");
    const std::optional<ScaleExponentWindow> window = scale_exponent_window(f);
    double step = 0;
    for (double v : finite_values(w))
      if (v > 0 && (step == 0 || v < step)) step = v;
    std::vector<int> fits;
    for (int e = -40; e <= 40; ++e) {
      bool all = true;
      for (double v : finite_values(w)) {
        const double count = std::ldexp(v, e) / step;
        all = all && count == std::floor(count) && std::fabs(count) <= 127.0;
      }
      if (all) fits.push_back(e);
    }
    ASSERT_TRUE(window.has_value()) << weight << " on int8";
    ASSERT_FALSE(fits.empty()) << weight << " on int8";
    EXPECT_EQ(window->lo, fits.front()) << weight << " on int8";
    EXPECT_EQ(window->hi, fits.back()) << weight << " on int8";
    EXPECT_EQ(static_cast<int>(fits.size()), window->hi - window->lo + 1) << "no gaps";
  }
  const Format int8 = Format::parse("w=e2m1 a=int8 c=bf16 s=ue8m0:g32+tensor n=64 k=64");
  EXPECT_EQ(scale_exponent_window(int8)->lo, 0);
  EXPECT_EQ(scale_exponent_window(int8)->hi, 3);  // 12 steps of 0.5, << 3 = 96
  const Format e4m3 = Format::parse("w=e2m1 a=e4m3 c=bf16 s=ue8m0:g32+tensor n=64 k=64");
  EXPECT_EQ(scale_exponent_window(e4m3)->lo, -5);
  EXPECT_EQ(scale_exponent_window(e4m3)->hi, 6);
  for (const char* text : {"w=e2m1 a=e4m3 c=bf16 s=ue8m0:g32 n=64 k=64",
                           "w=e2m1 a=e4m3 c=bf16 s=e4m3:g16+tensor n=64 k=64",
                           "w=e2m1 a=bf16 c=bf16 s=ue8m0:g32+tensor n=64 k=64",
                           "w=e4m3 a=e4m3 c=bf16 s=ue8m0:g32+tensor n=64 k=64",
                           "w=uint4b8 a=e4m3 c=bf16 s=ue8m0:g32+tensor n=64 k=64"})
    EXPECT_FALSE(scale_exponent_window(Format::parse(text)).has_value()) << text;
}

}  // namespace
}  // namespace hm::core
