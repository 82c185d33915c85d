// Shared converter steps (see common.hpp).
#include "schema/common.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <optional>

#include "core/error.hpp"
#include "core/support.hpp"
#include "quant/quantize.hpp"

namespace hm::schema {

using core::Dtype;

Dtype dtype(hm_dtype_t code) { return Dtype::from_code(code); }

namespace {
bool is_16bit_float(Dtype d) { return d.code() == HM_DTYPE_F16 || d.code() == HM_DTYPE_BF16; }
}  // namespace

Dtype preferred_16bit(std::initializer_list<const io::TensorView*> tensors) {
  for (const io::TensorView* t : tensors)
    if (t && t->dtype == "BF16") return dtype(HM_DTYPE_BF16);
  return dtype(HM_DTYPE_F16);
}

void choose_activation_output(Layer& layer, const Options& options, Dtype preferred) {
  core::Format& f = layer.format;
  f.activation = options.activation.is_none() ? preferred : options.activation;
  if (!options.output.is_none())
    f.output = options.output;
  else
    f.output = is_16bit_float(f.activation) ? f.activation : preferred;
  f.accumulator = dtype(HM_DTYPE_F32);
}

namespace {
// The first value `d` cannot hold: beyond its largest finite value (it would saturate) or nonzero
// and rounding to 0 (it would flush). -1 when every value only rounds.
int64_t first_lost_value(const std::vector<float>& values, Dtype d) {
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    if (std::fabs(v) > d.max_value() || (v != 0 && d.decode(d.encode(v)) == 0))
      return static_cast<int64_t>(i);
  }
  return -1;
}

std::string lost_how(float v, Dtype d) {
  return std::fabs(static_cast<double>(v)) > d.max_value()
             ? "beyond " + d.name() + "'s largest value " + std::to_string(d.max_value()) +
                   " (it would saturate)"
             : "below " + d.name() + "'s smallest nonzero value (it would become 0)";
}

// The shortest text that reads back as v (1e-09, not 9.99999972e-10).
std::string value_text(float v) {
  char buf[32];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(v));
    if (std::strtof(buf, nullptr) == v) break;
  }
  return buf;
}
}  // namespace

void set_scale_dtype(Layer& layer, Dtype stored, const Options& options,
                     const io::TensorView& source) {
  core::Format& f = layer.format;
  f.scale = stored;
  const bool applied_in_activation = is_16bit_float(f.activation) && f.has_group_scales();
  if (!applied_in_activation || core::float_fits_exactly(stored, f.activation)) return;
  for (float s : layer.scales)
    HM_REQUIRE(std::isfinite(s), HM_ERROR_NON_FINITE, "a weight scale is not finite");
  // R19: on 16-bit activations group scales multiply the weight before the MMA, in the
  // activation's type. Rounding into it is documented; losing a value to saturation or
  // flush-to-zero is not, so a default f16 activation takes bf16's range instead.
  int64_t lost = first_lost_value(layer.scales, f.activation);
  const Dtype wide = dtype(HM_DTYPE_BF16);
  if (lost >= 0 && options.activation.is_none() && f.activation.code() == HM_DTYPE_F16 &&
      first_lost_value(layer.scales, wide) < 0) {
    f.activation = wide;
    if (options.output.is_none()) f.output = wide;
    layer.widened_to_bf16.push_back("scales");
    lost = -1;
    if (core::float_fits_exactly(stored, f.activation)) return;
  }
  if (lost >= 0) {
    const int64_t per_row = f.group_k > 0 ? (f.k + f.group_k - 1) / f.group_k : 1;
    const float v = layer.scales[static_cast<size_t>(lost)];
    bad_tensor(source,
               "the scale of row " + std::to_string(lost / per_row) + ", group " +
                   std::to_string(lost % per_row) + " (element " + std::to_string(lost) +
                   " of the layer's [rows][groups] scales) is " + value_text(v) + ", " +
                   lost_how(v, f.activation) + "; on " + f.activation.name() +
                   " activations group and block scales are applied in the activation type "
                   "(rule R19): convert with another activation (--act bf16, or an 8-bit one)",
               HM_ERROR_UNSUPPORTED_FORMAT);
  }
  f.scale = f.activation;
  for (float& s : layer.scales) s = static_cast<float>(f.scale.decode(f.scale.encode(s)));
}

int64_t fold_scale_exponents(Layer& layer) {
  core::Format& f = layer.format;
  if (f.scale_kind != core::ScaleKind::kGroup && f.scale_kind != core::ScaleKind::kGroupTensor)
    return 0;
  core::Format folded = f;
  folded.scale_kind = core::ScaleKind::kGroupTensor;
  const std::optional<core::ScaleExponentWindow> window = core::scale_exponent_window(folded);
  if (!window) return 0;
  const int64_t experts = f.experts, n = f.n, k = f.k, group_k = f.group_k;
  const int64_t groups = (k + group_k - 1) / group_k;
  HM_REQUIRE(static_cast<int64_t>(layer.scales.size()) == experts * n * groups &&
                 static_cast<int64_t>(layer.codes.size()) == experts * n * k,
             HM_ERROR_INTERNAL, "fold_scale_exponents: the layer's buffers do not match its format");
  const bool had_global = f.scale_kind == core::ScaleKind::kGroupTensor;
  const core::Dtype w = f.weight;
  const uint32_t magnitude = (1u << (w.bits() - 1)) - 1;  // a 4-bit float's code without its sign
  std::vector<float> global(static_cast<size_t>(experts), 1.0f);
  int64_t raised = 0;
  for (int64_t x = 0; x < experts; ++x) {
    // The largest exponent of a group with a nonzero code (all-zero groups do not count: any
    // scale serves them).
    std::vector<int> row_top(static_cast<size_t>(n), INT32_MIN);
    parallel_for(n, k, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* codes = layer.codes.data() + (x * n + r) * k;
        for (int64_t g = 0; g < groups; ++g) {
          bool any = false;
          for (int64_t c = g * group_k; c < std::min(k, (g + 1) * group_k) && !any; ++c)
            any = (codes[c] & magnitude) != 0;
          if (any)
            row_top[static_cast<size_t>(r)] =
                std::max(row_top[static_cast<size_t>(r)],
                         std::ilogb(layer.scales[static_cast<size_t>((x * n + r) * groups + g)]));
        }
      }
    });
    const int top = *std::max_element(row_top.begin(), row_top.end());
    const int shift = top == INT32_MIN ? 0 : top - window->hi;  // global = 2^shift
    const double g0 = had_global ? layer.global_scale.at(static_cast<size_t>(x)) : 1.0;
    const auto g = static_cast<float>(std::ldexp(g0, shift));
    HM_REQUIRE(std::isfinite(g) && g > 0.0f, HM_ERROR_NON_FINITE,
               "expert " + std::to_string(x) + ": the global scale 2^" + std::to_string(shift) +
                   " that puts its group scales in the kernel's exponent window is not a finite "
                   "positive f32");
    global[static_cast<size_t>(x)] = g;
    std::vector<int64_t> row_raised(static_cast<size_t>(n), 0);
    parallel_for(n, k, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        uint8_t* codes = layer.codes.data() + (x * n + r) * k;
        for (int64_t gi = 0; gi < groups; ++gi) {
          float& scale = layer.scales[static_cast<size_t>((x * n + r) * groups + gi)];
          const int e = std::ilogb(scale) - shift;
          if (e < window->lo) {
            // Raised to the bottom: each value v becomes v * 2^(e - lo) in the weight's codes,
            // rounded to nearest even; a group counts when a value did not survive exactly.
            bool rounded = false;
            for (int64_t c = gi * group_k; c < std::min(k, (gi + 1) * group_k); ++c) {
              if ((codes[c] & magnitude) == 0) continue;
              const double exact = std::ldexp(w.decode(codes[c]), e - window->lo);
              const auto code = static_cast<uint8_t>(w.encode(exact));
              rounded = rounded || w.decode(code) != exact;
              codes[c] = code;
            }
            row_raised[static_cast<size_t>(r)] += rounded;
          }
          scale = std::ldexp(1.0f, std::min(window->hi, std::max(window->lo, e)));
        }
      }
    });
    for (int64_t v : row_raised) raised += v;
  }
  f.scale_kind = core::ScaleKind::kGroupTensor;
  layer.global_scale = std::move(global);
  return raised;
}

int64_t requantize_per_channel_for_8bit_activations(Layer& layer) {
  core::Format& f = layer.format;
  const hm_dtype_t act = f.activation.code();
  if (act != HM_DTYPE_E4M3 && act != HM_DTYPE_E5M2 && act != HM_DTYPE_INT8) return 0;
  const core::Dtype target = act == HM_DTYPE_INT8 ? dtype(HM_DTYPE_INT8) : f.activation;
  const bool integer = target.is_integer();
  const int64_t experts = f.experts, n = f.n, k = f.k;
  const int64_t groups = f.group_k > 0 ? (k + f.group_k - 1) / f.group_k : 1;
  HM_REQUIRE(static_cast<int64_t>(layer.codes.size()) == experts * n * k &&
                 static_cast<int64_t>(layer.scales.size()) == experts * n * groups,
             HM_ERROR_INTERNAL,
             "requantize_per_channel_for_8bit_activations: the layer's buffers do not match its "
             "format");
  const core::Dtype w = f.weight;
  const bool had_global = f.scale_kind == core::ScaleKind::kGroupTensor;
  std::vector<float> channel(static_cast<size_t>(experts * n));
  std::vector<int64_t> row_changed(static_cast<size_t>(experts * n), 0);
  parallel_for(experts * n, k, [&](int64_t r0, int64_t r1) {
    std::vector<double> v(static_cast<size_t>(k));
    for (int64_t r = r0; r < r1; ++r) {
      const double g = had_global ? layer.global_scale.at(static_cast<size_t>(r / n)) : 1.0;
      uint8_t* codes = layer.codes.data() + r * k;
      double top = 0;
      for (int64_t i = 0; i < k; ++i) {
        const int64_t group = f.group_k > 0 ? i / f.group_k : 0;
        const double s = layer.scales[static_cast<size_t>(r * groups + group)];
        v[static_cast<size_t>(i)] = w.decode(codes[i]) * s * g;  // exact in double
        top = std::max(top, std::fabs(v[static_cast<size_t>(i)]));
      }
      double c = 1.0;  // an all-zero row keeps 1
      if (top > 0 && integer) c = top / 127.0;
      if (top > 0 && !integer)
        c = std::ldexp(1.0, static_cast<int>(std::ceil(std::log2(top / target.max_value()))));
      const auto cf = static_cast<float>(c);
      HM_REQUIRE(std::isfinite(cf) && cf > 0.0f, HM_ERROR_NON_FINITE,
                 "row " + std::to_string(r) + ": the channel scale " + std::to_string(c) +
                     " that holds its weights in " + target.name() + " is not a finite positive f32");
      channel[static_cast<size_t>(r)] = cf;
      int64_t changed = 0;
      for (int64_t i = 0; i < k; ++i) {
        const double want = v[static_cast<size_t>(i)];
        const uint32_t code = target.encode(want / static_cast<double>(cf));
        codes[i] = static_cast<uint8_t>(code);
        changed += target.decode(code) * static_cast<double>(cf) != want;
      }
      row_changed[static_cast<size_t>(r)] = changed;
    }
  });
  f.weight = target;
  f.scale_kind = core::ScaleKind::kChannel;
  f.scale = dtype(HM_DTYPE_F32);
  f.group_k = 0;
  f.group_n = 0;
  layer.scales = std::move(channel);
  layer.global_scale.clear();
  int64_t changed = 0;
  for (int64_t c : row_changed) changed += c;
  return changed;
}

void set_integer_weight(Layer& layer, int bits, std::vector<float> zero_points,
                        const io::TensorView& zero_tensor) {
  core::Format& f = layer.format;
  const float mid = static_cast<float>(1 << (bits - 1));
  const float top = static_cast<float>((1 << bits) - 1);
  const bool symmetric =
      std::all_of(zero_points.begin(), zero_points.end(), [&](float z) { return z == mid; });
  if (symmetric) {
    f.weight = Dtype::biased_integer(bits);
    f.zero_point = Dtype();
    layer.zero_points.clear();
    return;
  }
  f.weight = Dtype::integer(false, bits);
  const bool fits = std::all_of(zero_points.begin(), zero_points.end(),
                                [&](float z) { return z >= 0 && z <= top && z == std::floor(z); });
  if (fits) {
    f.zero_point = Dtype::integer(false, bits);
  } else {
    // GPTQ v1 stores zero - 1 in `bits` bits, so a zero point of 0 comes back as 2^bits: only a
    // float zero point (subtracted in the 16-bit activation type) can hold it.
    if (!is_16bit_float(f.activation))
      bad_tensor(
          zero_tensor,
          "a zero point lies outside 0.." + std::to_string((1 << bits) - 1) +
              " (a GPTQ v1 zero of 0 reads back as " + std::to_string(1 << bits) +
              "); only f16/bf16 activations take such zero points (float zero points, rule R14)",
          HM_ERROR_UNSUPPORTED_FORMAT);
    f.zero_point = f.activation;
  }
  layer.zero_points = std::move(zero_points);
}

std::vector<int32_t> act_order_permutation(const io::TensorView& g_idx, int64_t k, int64_t group_k,
                                           int64_t groups, bool keep_k_order) {
  if (g_idx.numel() != k)
    bad_tensor(g_idx, "expected " + std::to_string(k) + " entries (one per input column)");
  const std::vector<int64_t> gi = read_integers(g_idx);
  bool in_order = true;
  for (int64_t i = 0; i < k; ++i) {
    if (gi[i] < 0 || gi[i] >= groups)
      bad_tensor(g_idx, "entry " + std::to_string(i) + " is " + std::to_string(gi[i]) +
                            ", outside the " + std::to_string(groups) + " scale groups");
    in_order &= gi[i] == i / group_k;
  }
  if (in_order) return {};
  if (keep_k_order)
    bad_tensor(g_idx,
               "is an act-order (desc_act) g_idx and HM_CONVERT_KEEP_K_ORDER forbids permuting K",
               HM_ERROR_UNSUPPORTED);
  std::vector<int64_t> count(static_cast<size_t>(groups), 0);
  for (int64_t g : gi) ++count[g];
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t expected = std::min(group_k, k - g * group_k);
    if (count[g] != expected)
      bad_tensor(g_idx,
                 "group " + std::to_string(g) + " has " + std::to_string(count[g]) +
                     " columns, expected " + std::to_string(expected) +
                     "; act-order is converted by sorting K by group, which needs equal groups",
                 HM_ERROR_UNSUPPORTED);
  }
  std::vector<int32_t> perm(static_cast<size_t>(k));
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](int32_t a, int32_t b) { return gi[a] < gi[b]; });
  return perm;
}

void permute_columns(std::vector<uint8_t>& codes, int64_t rows, int64_t k,
                     const std::vector<int32_t>& perm) {
  parallel_for(rows, k, [&](int64_t r0, int64_t r1) {
    std::vector<uint8_t> row(static_cast<size_t>(k));
    for (int64_t r = r0; r < r1; ++r) {
      uint8_t* p = codes.data() + r * k;
      std::copy(p, p + k, row.begin());
      for (int64_t i = 0; i < k; ++i) p[i] = row[perm[i]];
    }
  });
}

std::vector<int32_t> apply_act_order(const io::TensorView* g_idx, std::vector<uint8_t>& codes,
                                     int64_t rows, int64_t k, int64_t group_k, int64_t groups,
                                     bool keep_k_order) {
  if (g_idx == nullptr) return {};
  expect_dtype(*g_idx, {"I32", "I64"});
  std::vector<int32_t> perm = act_order_permutation(*g_idx, k, group_k, groups, keep_k_order);
  if (!perm.empty()) permute_columns(codes, rows, k, perm);
  return perm;
}

RowScales shard_scales(const std::vector<float>& scalars, int64_t n, const Options& options,
                       const io::TensorView& t) {
  RowScales out;
  if (scalars.empty()) bad_tensor(t, "holds no scale");
  // Only one scalar per shard: a 2-D tensor (block or group scales) read as shard scalars would
  // spread its values over row bands and convert to wrong weights.
  if (t.shape.size() > 2 || (t.shape.size() == 2 && t.shape[1] != 1))
    bad_tensor(t,
               "is not one scale per fused shard ([], [S] or [S, 1]); this scheme takes no other "
               "scale layout under this name",
               HM_ERROR_UNSUPPORTED_FORMAT);
  for (float s : scalars)
    if (!std::isfinite(s)) bad_tensor(t, "holds a scale that is not finite", HM_ERROR_NON_FINITE);
  const int64_t shards = static_cast<int64_t>(scalars.size());
  if (std::all_of(scalars.begin(), scalars.end(), [&](float s) { return s == scalars[0]; })) {
    out.per_row = {scalars[0]};
    return out;
  }
  const std::vector<int64_t>& rows = options.shard_rows;
  // Fused shards are rarely equal (q/k/v under GQA), and guessing their sizes wrong converts to
  // wrong weights without a sign, so unequal shard scales need the caller's sizes.
  if (rows.empty())
    bad_tensor(t, "has " + std::to_string(shards) + " different shard scales for N = " +
                      std::to_string(n) +
                      " rows; pass the rows of each shard (options.shard_rows / --shard-rows "
                      "a,b,c)");
  if (static_cast<int64_t>(rows.size()) != shards)
    bad_tensor(t, "has " + std::to_string(shards) + " shard scales but shard_rows lists " +
                      std::to_string(rows.size()) + " shards");
  int64_t total = 0;
  for (int64_t r : rows) {
    if (r <= 0) bad_tensor(t, "shard_rows holds a count <= 0");
    total += r;
  }
  if (total != n)
    bad_tensor(t, "shard_rows sums to " + std::to_string(total) + " rows, the weight has " +
                      std::to_string(n));
  out.uniform = false;
  out.per_row.reserve(static_cast<size_t>(n));
  for (int64_t s = 0; s < shards; ++s)
    out.per_row.insert(out.per_row.end(), static_cast<size_t>(rows[s]), scalars[s]);
  return out;
}

void set_shard_scales(Layer& layer, const RowScales& scales, Dtype channel_dtype) {
  core::Format& f = layer.format;
  if (scales.uniform) {
    f.scale_kind = core::ScaleKind::kTensor;
    f.scale = Dtype();
    layer.global_scale = scales.per_row;
  } else {
    f.scale_kind = core::ScaleKind::kChannel;
    f.scale = channel_dtype;
    layer.scales = scales.per_row;
  }
}

Layer integer_layer(IntegerParts parts, const Options& options, Dtype preferred,
                    const io::TensorView& zero_tensor) {
  Layer layer;
  core::Format& f = layer.format;
  f.n = parts.n;
  f.k = parts.k;
  f.experts = 1;
  f.has_bias = false;
  choose_activation_output(layer, options, preferred);
  if (parts.group_k >= parts.k) {
    f.scale_kind = core::ScaleKind::kChannel;
    f.group_k = 0;
  } else {
    f.scale_kind = core::ScaleKind::kGroup;
    f.group_k = static_cast<int32_t>(parts.group_k);
  }
  f.group_n = 0;
  layer.codes = std::move(parts.codes);
  layer.scales = std::move(parts.scales);
  HM_REQUIRE(parts.scale_tensor != nullptr, HM_ERROR_INTERNAL,
             "integer_layer: IntegerParts::scale_tensor is not set");
  set_scale_dtype(layer, parts.scale_dtype, options, *parts.scale_tensor);
  if (parts.zero_points.empty()) {
    f.weight = Dtype::biased_integer(parts.bits);
    f.zero_point = Dtype();
  } else {
    set_integer_weight(layer, parts.bits, std::move(parts.zero_points), zero_tensor);
  }
  return layer;
}

void set_bias(Layer& layer, const io::TensorView* bias, int64_t experts, int64_t n) {
  layer.format.has_bias = bias != nullptr;
  layer.bias.clear();
  if (!bias) return;
  if (bias->numel() != experts * n)
    bad_tensor(*bias, "expected " + std::to_string(experts * n) + " values (" +
                          (experts > 1 ? std::to_string(experts) + " experts x " : std::string()) +
                          std::to_string(n) + " outputs)");
  layer.bias = read_floats(*bias);
  for (float b : layer.bias)
    if (!std::isfinite(b))
      bad_tensor(*bias, "holds a value that is not finite", HM_ERROR_NON_FINITE);
}

void fit_bias_to_output(Layer& layer, const io::TensorView* bias, const Options& options) {
  if (!bias || !layer.format.has_bias) return;
  core::Format& f = layer.format;
  const std::vector<float> values = read_floats(*bias);  // the checkpoint's order, for messages
  const int64_t lost = first_lost_value(values, f.output);
  if (lost < 0) return;
  const Dtype wide = dtype(HM_DTYPE_BF16);
  if (options.output.is_none() && f.output.code() == HM_DTYPE_F16 &&
      first_lost_value(values, wide) < 0) {
    f.output = wide;
    layer.widened_to_bf16.push_back("bias");
    return;
  }
  const float v = values[static_cast<size_t>(lost)];
  bad_tensor(*bias,
             element_label(*bias, lost) + " is " + value_text(v) + ", " + lost_how(v, f.output) +
                 "; the bias is stored in the output dtype (f16 or bf16, rule R4): convert with "
                 "another output dtype (--output-dtype bf16)",
             HM_ERROR_UNSUPPORTED_FORMAT);
}

void allocate(Layer& layer) {
  const quant::CanonicalShape sh = quant::canonical_shape(layer.format);
  layer.codes.assign(sh.codes, 0);
  layer.scales.assign(sh.scales, 0.0f);
  layer.zero_points.assign(sh.zero_points, 0.0f);
  layer.global_scale.assign(sh.global_scale, 1.0f);
}

void finish(Layer& layer) {
  core::validate(layer.format, std::nullopt);
  const quant::CanonicalShape sh = quant::canonical_shape(layer.format);
  auto check = [](uint64_t have, uint64_t want, const char* what) {
    HM_REQUIRE(have == want, HM_ERROR_INTERNAL,
               std::string("converter produced ") + std::to_string(have) + " " + what +
                   ", the format needs " + std::to_string(want));
  };
  check(layer.codes.size(), sh.codes, "codes");
  check(layer.scales.size(), sh.scales, "scales");
  check(layer.zero_points.size(), sh.zero_points, "zero points");
  check(layer.global_scale.size(), sh.global_scale, "global scales");
  check(layer.bias.size(), layer.format.has_bias ? static_cast<uint64_t>(sh.experts * sh.n) : 0,
        "bias values");
  check(layer.k_permutation.size(), layer.k_permutation.empty() ? 0 : static_cast<uint64_t>(sh.k),
        "permutation entries");
}

}  // namespace hm::schema
