// Quantize / dequantize: the host reference for every scale kind. One scale group at a time:
// statistics -> ideal scale -> scale rounded into its dtype (so dequantization uses exactly the
// stored value) -> zero point from the rounded scale -> codes. docs/dtypes.md states every rule.
#include "quant/quantize.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "core/support.hpp"
#include "quant/code_table.hpp"

namespace hm::quant {

using core::Dtype;
using core::DtypeKind;
using core::Format;
using core::ScaleKind;

namespace {

bool kind_has_scales(ScaleKind kind) {
  return kind == ScaleKind::kChannel || kind == ScaleKind::kGroup || kind == ScaleKind::kBlock ||
         kind == ScaleKind::kGroupTensor;
}

// "[e][n][k] (expert e, row n, column k)", to follow a buffer's name in messages.
std::string position(int64_t e, int64_t n, int64_t k) {
  return "[" + std::to_string(e) + "][" + std::to_string(n) + "][" + std::to_string(k) +
         "] (expert " + std::to_string(e) + ", row " + std::to_string(n) + ", column " +
         std::to_string(k) + ")";
}

// Round half to even for |x| < 2^51 without a libm call (vectorizes; needs the default rounding
// mode and no -ffast-math): adding 1.5 * 2^52 leaves no fraction bits, so the FPU rounds.
inline double round_half_even(double x) {
  constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
  return (x + kMagic) - kMagic;
}

// A value rounded into a dtype (RNE, saturating), as the stored scale / zero point.
double round_to(Dtype dtype, double x) { return dtype.decode(dtype.encode(x)); }

// Runs fn(begin, end) over [0, count) on the usable cores, when the work is big enough to pay
// for threads (core::parallel_ranges: every range runs; the first exception is rethrown).
template <typename Fn>
void parallel_for(int64_t count, int64_t work_per_item, Fn fn) {
  constexpr int64_t kMinWorkPerThread = int64_t{1} << 18;
  const int64_t by_work = std::max<int64_t>(1, count * work_per_item / kMinWorkPerThread);
  core::parallel_ranges(count,
                        std::min({int64_t{core::usable_cpus()}, by_work, count, int64_t{64}}), fn);
}

// Everything constant across the groups of one format.
struct Plan {
  explicit Plan(const Format& f, const CanonicalShape& sh)
      : format(f), shape(sh), weight(f.weight) {
    is_float_weight = f.weight.is_float();
    has_scales = kind_has_scales(f.scale_kind);
    has_zp = f.has_zero_point();
    float_zp = has_zp && f.zero_point.is_float();
    mx = has_scales && f.scale.kind() == DtypeKind::kUnsignedFloat;
    q_lo = weight.min_value();
    q_hi = weight.max_value();
    if (has_zp && !float_zp) {
      z_lo = std::max(q_lo, f.zero_point.min_value());
      z_hi = std::min(q_hi, f.zero_point.max_value());
    }
    if (mx) emax_elem = std::ilogb(q_hi);
    window = core::scale_exponent_window(f);
    if (has_scales) {
      scale_for_zero = round_to(f.scale, 1.0);
      scale_min_positive = f.scale.decode(f.scale.kind() == DtypeKind::kUnsignedFloat ? 0 : 1);
    }
  }

  const Format& format;
  const CanonicalShape& shape;
  CodeTable weight;
  bool is_float_weight = false, has_scales = false, has_zp = false, float_zp = false, mx = false;
  double q_lo = 0, q_hi = 0;  // the weight dtype's value range
  double z_lo = 0, z_hi = 0;  // integer zero points: the weight's and zero-point dtype's ranges
  int emax_elem = 0;
  // ue8m0 group x tensor scales that the kernel writes into the weights' exponents: every group
  // exponent within [lo, hi] (core/support.hpp), the global scale carrying the rest.
  std::optional<core::ScaleExponentWindow> window;
  double scale_for_zero = 1.0, scale_min_positive = 0.0;
};

struct Stats {
  double min = 0, max = 0, absmax = 0;
};

Stats block_stats(const float* w, const CanonicalShape& sh, int64_t e, int64_t r0, int64_t r1,
                  int64_t c0, int64_t c1) {
  float mn = 0.0f, mx = 0.0f;  // 0 included: padding columns are zeros, and zero-point
                               // quantization keeps 0 exactly representable
  for (int64_t r = r0; r < r1; ++r) {
    const float* row = w + (e * sh.n + r) * sh.k;
    for (int64_t c = c0; c < c1; ++c) {
      mn = std::min(mn, row[c]);
      mx = std::max(mx, row[c]);
    }
  }
  Stats s;
  s.min = mn;
  s.max = mx;
  s.absmax = std::max(-s.min, s.max);
  return s;
}

// The scale before rounding into the scale dtype (and before dividing by the global scale).
double ideal_scale(const Plan& p, const Stats& s) {
  if (p.has_zp) return (s.max - s.min) / (p.q_hi - p.q_lo);
  // Symmetric: the largest magnitude maps to the dtype's largest value (int4 and uint4b8: 7,
  // uint4: 15 with negatives clamped to 0, e2m1: 6, e4m3: 448).
  return s.absmax / p.q_hi;
}

struct GroupScale {
  double stored = 1.0;      // the value written to scales[] (exact in the scale dtype)
  double effective = 1.0;   // stored * global: what codes are computed and dequantized with
  double zero_point = 0.0;  // the value written to zero_points[]
};

GroupScale choose_group_scale(const Plan& p, const Stats& s, double global) {
  GroupScale g;
  const double ideal = ideal_scale(p, s);
  if (ideal == 0.0) {
    g.stored = p.scale_for_zero;  // an all-zero group: any valid scale; codes are all zero
  } else if (p.mx) {
    // OCP MX: shared exponent = floor(log2(amax)) - emax of the element type; elements then
    // saturate. The exponent is clamped to ue8m0's range [-127, 127].
    // With an exponent window (group x tensor on 8-bit activations), the clamp is the window's:
    // the largest group sits at hi (choose_global), groups below lo are raised to lo and their
    // weights round to the coarser step.
    const int exponent = std::ilogb(s.absmax / global) - p.emax_elem;
    const int lo = p.window ? p.window->lo : -127, hi = p.window ? p.window->hi : 127;
    g.stored = std::ldexp(1.0, std::min(hi, std::max(lo, exponent)));
  } else {
    g.stored = round_to(p.format.scale, ideal / global);
    if (g.stored == 0.0) g.stored = p.scale_min_positive;  // underflow: keep dequant finite
  }
  g.effective = g.stored * global;
  if (p.has_zp) {
    const double z = p.q_lo - s.min / g.effective;  // maps the group minimum to the lowest code
    if (p.float_zp) {
      g.zero_point = round_to(p.format.zero_point, z);
    } else {
      const double z_clamped = std::min(p.z_hi + 1.0, std::max(p.z_lo - 1.0, z));
      g.zero_point = std::min(p.z_hi, std::max(p.z_lo, round_half_even(z_clamped)));
    }
  }
  return g;
}

// Codes of rows [r0, r1) x columns [c0, c1) with one scale / zero point.
void encode_block(const Plan& p, const float* w, uint8_t* codes, int64_t e, int64_t r0,
                  int64_t r1, int64_t c0, int64_t c1, const GroupScale& g) {
  const CanonicalShape& sh = p.shape;
  const double s = g.effective;
  if (p.is_float_weight) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t base = (e * sh.n + r) * sh.k;
      for (int64_t c = c0; c < c1; ++c)
        codes[base + c] = static_cast<uint8_t>(p.weight.encode(static_cast<double>(w[base + c]) / s));
    }
    return;
  }
  // value = clamp(rne(w / s + zf) + zi): an integer zero point is added after rounding (exact),
  // a float zero point before (it has a fraction). The code is (value + implicit zp) & mask.
  const double zf = p.float_zp ? g.zero_point : 0.0;
  const double zi = p.has_zp && !p.float_zp ? g.zero_point : 0.0;
  const double lo = p.q_lo - zi, hi = p.q_hi - zi;
  const double lo_guard = lo - 1.0, hi_guard = hi + 1.0;  // keeps |x| small for the rounding
  const double offset = zi + p.weight.implicit_zero_point();
  const int32_t mask = static_cast<int32_t>(p.weight.code_mask());
  for (int64_t r = r0; r < r1; ++r) {
    const float* in = w + (e * sh.n + r) * sh.k;
    uint8_t* out = codes + (e * sh.n + r) * sh.k;
    for (int64_t c = c0; c < c1; ++c) {
      const double x = std::min(hi_guard, std::max(lo_guard, static_cast<double>(in[c]) / s + zf));
      const double v = std::min(hi, std::max(lo, round_half_even(x)));
      out[c] = static_cast<uint8_t>(static_cast<int32_t>(v + offset) & mask);
    }
  }
}

void check_finite(const float* w, const CanonicalShape& sh) {
  constexpr int64_t kChunk = 4096;
  const int64_t total = sh.experts * sh.n * sh.k;
  const int64_t chunks = (total + kChunk - 1) / kChunk;
  std::vector<char> bad(static_cast<size_t>(chunks), 0);
  parallel_for(chunks, kChunk, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      uint32_t any = 0;
      for (int64_t i = c * kChunk; i < std::min(total, (c + 1) * kChunk); ++i) {
        uint32_t bits;
        std::memcpy(&bits, &w[i], sizeof bits);
        any |= static_cast<uint32_t>((bits & 0x7F800000u) == 0x7F800000u);
      }
      bad[static_cast<size_t>(c)] = any != 0;
    }
  });
  for (int64_t c = 0; c < chunks; ++c) {
    if (!bad[static_cast<size_t>(c)]) continue;
    for (int64_t i = c * kChunk;; ++i) {
      if (std::isfinite(w[i])) continue;
      const int64_t k = i % sh.k, n = (i / sh.k) % sh.n, e = i / (sh.k * sh.n);
      fail(HM_ERROR_NON_FINITE, "weight" + position(e, n, k) + " is " + (std::isnan(w[i]) ? "NaN" : "Inf") +
                                    "; quantization needs finite weights");
    }
  }
}

double expert_absmax(const float* w, const CanonicalShape& sh, int64_t e) {
  return block_stats(w, sh, e, 0, sh.n, 0, sh.k).absmax;
}

// The f32 global scale of one expert. kTensor: the expert's ideal scale. kGroupTensor: the largest
// ideal group scale maps to the scale dtype's largest value when the dtype is narrow (NVFP4:
// e4m3's 448), so group scales use its whole range; to 1.0 for 16- and 32-bit float scales, whose
// relative precision is the same across their range and whose largest value would make the
// dequantized weight overflow (a bf16 group scale near 3e38 times a weight of 6); ue8m0 group
// scales have range enough and take 1, unless the kernel writes them into the weights'
// exponents (an exponent window): then the expert's largest group exponent maps to the window's
// top, global = 2^(that exponent - hi).
double choose_global(const Plan& p, const float* w, int64_t e) {
  const CanonicalShape& sh = p.shape;
  double ideal_max = 0.0, absmax = 0.0;
  if (p.format.scale_kind == ScaleKind::kTensor || !p.has_zp) {
    Stats s;
    s.absmax = absmax = expert_absmax(w, sh, e);
    ideal_max = ideal_scale(p, s);
  } else {
    for (int64_t r = 0; r < sh.scale_rows; ++r) {
      const int64_t r0 = r * sh.group_n, r1 = std::min(sh.n, r0 + sh.group_n);
      for (int64_t gk = 0; gk < sh.groups_k; ++gk) {
        const int64_t c0 = gk * sh.group_k, c1 = std::min(sh.k, c0 + sh.group_k);
        ideal_max = std::max(ideal_max, ideal_scale(p, block_stats(w, sh, e, r0, r1, c0, c1)));
      }
    }
  }
  double global = ideal_max;
  if (p.format.scale_kind == ScaleKind::kGroupTensor && p.window) {
    global = absmax > 0.0 ? std::ldexp(1.0, std::ilogb(absmax) - p.emax_elem - p.window->hi) : 1.0;
  } else if (p.format.scale_kind == ScaleKind::kGroupTensor)
    global = p.mx                       ? 1.0
             : p.format.scale.bits() >= 16 ? ideal_max
                                           : ideal_max / p.format.scale.max_value();
  auto g = static_cast<float>(global);
  if (!(g > 0.0f) || !std::isfinite(g)) g = 1.0f;  // an all-zero expert, or f32 underflow
  return g;
}

// The canonical buffers the format needs are all there: quantize writes, and dequantize reads,
// the same set (a CanonicalWeight or a ConstCanonicalWeight).
template <typename Weight>
void require_canonical_buffers(const CanonicalShape& sh, const Weight& w) {
  HM_REQUIRE(w.codes != nullptr, HM_ERROR_INVALID_ARGUMENT, "the codes buffer is NULL");
  HM_REQUIRE(sh.scales == 0 || w.scales != nullptr, HM_ERROR_INVALID_ARGUMENT,
             "the format has scales but the scales buffer is NULL");
  HM_REQUIRE(sh.zero_points == 0 || w.zero_points != nullptr, HM_ERROR_INVALID_ARGUMENT,
             "the format has zero points but the zero_points buffer is NULL");
  HM_REQUIRE(sh.global_scale == 0 || w.global_scale != nullptr, HM_ERROR_INVALID_ARGUMENT,
             "the format has a global scale but the global_scale buffer is NULL");
}

}  // namespace

// ---------------------------------------------------------------------------------------------

CanonicalShape canonical_shape(const Format& f) {
  HM_REQUIRE(f.experts >= 1 && f.n >= 1 && f.k >= 1, HM_ERROR_INVALID_ARGUMENT,
             "the format's shape is n=" + std::to_string(f.n) + " k=" + std::to_string(f.k) +
                 " e=" + std::to_string(f.experts) +
                 "; set n, k and experts >= 1 (hm_format_set_shape)");
  HM_REQUIRE(!f.weight.is_none() && f.weight.bits() <= 8 &&
                 f.weight.kind() != DtypeKind::kUnsignedFloat,
             HM_ERROR_UNSUPPORTED_FORMAT,
             "weight dtype " + f.weight.name() +
                 " is not a quantized type: canonical codes are one byte per element (use an "
                 "integer or signed float of at most 8 bits)");
  CanonicalShape sh;
  sh.experts = f.experts;
  sh.n = f.n;
  sh.k = f.k;
  sh.group_k = f.k;
  sh.groups_k = 1;
  sh.group_n = 1;
  sh.scale_rows = f.n;
  const ScaleKind kind = f.scale_kind;
  if (kind == ScaleKind::kGroup || kind == ScaleKind::kBlock || kind == ScaleKind::kGroupTensor) {
    HM_REQUIRE(f.group_k >= 1, HM_ERROR_INVALID_ARGUMENT,
               "group_k is " + std::to_string(f.group_k) + "; grouped scales need group_k >= 1");
    sh.group_k = f.group_k;
    sh.groups_k = f.groups_k();  // the grouped K is k rounded up to group_k: a partial last group
  }
  if (kind == ScaleKind::kBlock) {
    HM_REQUIRE(f.group_n >= 1, HM_ERROR_INVALID_ARGUMENT,
               "group_n is " + std::to_string(f.group_n) + "; block scales need group_n >= 1");
    sh.group_n = f.group_n;
    sh.scale_rows = f.groups_n();
  }
  const bool has_scales = kind_has_scales(kind);
  if (has_scales) {
    const Dtype s = f.scale;
    HM_REQUIRE(!s.is_none() && (s.kind() == DtypeKind::kFloat || s.code() == HM_DTYPE_UE8M0),
               HM_ERROR_UNSUPPORTED_FORMAT,
               "scale dtype " + s.name() + " cannot hold weight scales (use f16, bf16, f32, e4m3, "
               "e5m2, ue8m0 or another signed float)");
  }
  if (f.has_zero_point()) {
    const Dtype z = f.zero_point;
    HM_REQUIRE(has_scales, HM_ERROR_UNSUPPORTED_FORMAT,
               "zero points need per-channel, group or block scales");
    HM_REQUIRE(f.weight.is_integer(), HM_ERROR_UNSUPPORTED_FORMAT,
               "zero points need an integer weight dtype, not " + f.weight.name());
    HM_REQUIRE(z.is_integer() || z.code() == HM_DTYPE_F16 || z.code() == HM_DTYPE_BF16,
               HM_ERROR_UNSUPPORTED_FORMAT,
               "zero-point dtype " + z.name() + " is neither an integer nor f16 / bf16");
    HM_REQUIRE(f.scale.code() != HM_DTYPE_UE8M0, HM_ERROR_UNSUPPORTED_FORMAT,
               "ue8m0 (MX) scales are symmetric: remove the zero points");
    HM_REQUIRE(!z.is_integer() || (std::max(z.min_value(), f.weight.min_value()) <=
                                   std::min(z.max_value(), f.weight.max_value())),
               HM_ERROR_UNSUPPORTED_FORMAT,
               "zero-point dtype " + z.name() + " shares no value with weight dtype " +
                   f.weight.name());
  } else if (kind != ScaleKind::kNone) {
    HM_REQUIRE(f.weight.max_value() > 0.0, HM_ERROR_UNSUPPORTED_FORMAT,
               "weight dtype " + f.weight.name() +
                   " has no positive value, so symmetric scales cannot map weights onto it; use "
                   "zero points or a wider type");
  }
  const core::CanonicalCounts counts = core::canonical_counts(f);
  sh.codes = counts.codes;
  sh.scales = counts.scales;
  sh.zero_points = counts.zero_points;
  sh.global_scale = counts.global_scale;
  return sh;
}

void quantize(const Format& format, const float* weight, const CanonicalWeight& out) {
  const CanonicalShape sh = canonical_shape(format);
  HM_REQUIRE(weight != nullptr, HM_ERROR_INVALID_ARGUMENT, "the weight pointer is NULL");
  require_canonical_buffers(sh, out);
  check_finite(weight, sh);
  const Plan plan(format, sh);

  for (int64_t e = 0; e < sh.experts; ++e) {
    double global = 1.0;
    if (sh.global_scale != 0) {
      global = choose_global(plan, weight, e);
      out.global_scale[e] = static_cast<float>(global);
    }
    if (!plan.has_scales) {
      // kNone codes the weight itself; kTensor divides by the global scale.
      GroupScale g;
      g.effective = global;
      parallel_for(sh.n, sh.k, [&](int64_t r0, int64_t r1) {
        encode_block(plan, weight, out.codes, e, r0, r1, 0, sh.k, g);
      });
      continue;
    }
    parallel_for(sh.scale_rows, sh.group_n * sh.k, [&](int64_t sr0, int64_t sr1) {
      for (int64_t sr = sr0; sr < sr1; ++sr) {
        const int64_t r0 = sr * sh.group_n, r1 = std::min(sh.n, r0 + sh.group_n);
        for (int64_t gk = 0; gk < sh.groups_k; ++gk) {
          const int64_t c0 = gk * sh.group_k, c1 = std::min(sh.k, c0 + sh.group_k);
          const GroupScale g =
              choose_group_scale(plan, block_stats(weight, sh, e, r0, r1, c0, c1), global);
          const int64_t index = (e * sh.scale_rows + sr) * sh.groups_k + gk;
          out.scales[index] = static_cast<float>(g.stored);
          if (plan.has_zp) out.zero_points[index] = static_cast<float>(g.zero_point);
          encode_block(plan, weight, out.codes, e, r0, r1, c0, c1, g);
        }
      }
    });
  }
}

ElementScale element_scale(const CanonicalShape& sh, const ConstCanonicalWeight& in, int64_t e,
                           int64_t n, int64_t k) {
  ElementScale out;
  const double global = sh.global_scale != 0 ? static_cast<double>(in.global_scale[e]) : 1.0;
  if (sh.scales == 0) {
    out.scale = global;
    return out;
  }
  const int64_t index = (e * sh.scale_rows + n / sh.group_n) * sh.groups_k + k / sh.group_k;
  out.scale = static_cast<double>(in.scales[index]) * global;
  if (sh.zero_points != 0) out.zero_point = in.zero_points[index];
  return out;
}

void dequantize(const Format& format, const ConstCanonicalWeight& in, float* weight) {
  const CanonicalShape sh = canonical_shape(format);
  HM_REQUIRE(weight != nullptr, HM_ERROR_INVALID_ARGUMENT, "the output weight pointer is NULL");
  require_canonical_buffers(sh, in);
  const CodeTable table(format.weight);
  const uint32_t mask = (1u << format.weight.bits()) - 1u;
  const int64_t rows = sh.experts * sh.n;
  parallel_for(rows, sh.k, [&](int64_t row0, int64_t row1) {
    for (int64_t row = row0; row < row1; ++row) {
      const int64_t e = row / sh.n, n = row % sh.n;
      for (int64_t gk = 0; gk < sh.groups_k; ++gk) {
        const int64_t c0 = gk * sh.group_k, c1 = std::min(sh.k, c0 + sh.group_k);
        const ElementScale s = element_scale(sh, in, e, n, c0);
        for (int64_t c = c0; c < c1; ++c) {
          const uint8_t code = in.codes[row * sh.k + c];
          HM_REQUIRE((code & ~mask) == 0, HM_ERROR_INVALID_ARGUMENT,
                     "codes" + position(e, n, c) + " is " + std::to_string(code) +
                         ", which does not fit the " + std::to_string(format.weight.bits()) +
                         " bits of " + format.weight.name());
          const double v = (static_cast<double>(table.decode(code)) - s.zero_point) * s.scale;
          weight[row * sh.k + c] = static_cast<float>(v);
        }
      }
    }
  });
}

}  // namespace hm::quant
