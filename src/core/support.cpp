// The support rules and the activation table (see support.hpp). Each rule is a sentence that says
// why, and a check that names the offending values; docs/support.md is rendered from this file.
#include "core/support.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "core/error.hpp"
#include "core/quote.hpp"

namespace hm::core {
namespace {

Dtype dt(hm_dtype_t code) { return Dtype::from_code(code); }
bool is(Dtype d, hm_dtype_t code) { return d.code() == code; }
bool is_signed_float(Dtype d) { return d.kind() == DtypeKind::kFloat; }
bool is_16bit_float(Dtype d) { return is(d, HM_DTYPE_F16) || is(d, HM_DTYPE_BF16); }
std::string str(int64_t v) { return std::to_string(v); }

// Smallest positive value: the least subnormal of a signed float, 2^-bias for ue8m0 (no zero).
double smallest_positive(Dtype d) {
  if (d.kind() == DtypeKind::kUnsignedFloat) return std::ldexp(1.0, -d.exponent_bias());
  return std::ldexp(1.0, 1 - d.exponent_bias() - d.mantissa_bits());
}

}  // namespace

std::optional<ScaleExponentWindow> scale_exponent_window(const Format& f) {
  const Dtype w = f.weight, a = f.activation;
  if (f.scale_kind != ScaleKind::kGroupTensor || !is(f.scale, HM_DTYPE_UE8M0)) return std::nullopt;
  if (!is(a, HM_DTYPE_E4M3) && !is(a, HM_DTYPE_E5M2) && !is(a, HM_DTYPE_INT8)) return std::nullopt;
  if (!is_signed_float(w) || w.bits() != 4) return std::nullopt;
  if (is(a, HM_DTYPE_INT8)) {
    // The largest magnitude's count of least steps, shifted left by the window's width, stays
    // within 127 (rule R11 keeps the count itself there).
    const double steps = w.max_value() / smallest_positive(w);
    if (steps > 127.0) return std::nullopt;
    return ScaleExponentWindow{0, static_cast<int>(std::floor(std::log2(127.0 / steps)))};
  }
  // 4-bit signed floats whose mantissa the activation keeps whole (rule R9): the kernel looks
  // their 8 magnitudes up in a byte table.
  if (w.mantissa_bits() > a.mantissa_bits() ||
      w.exponent_bits() > a.exponent_bits())
    return std::nullopt;
  const double least_normal = std::ldexp(1.0, 1 - a.exponent_bias());
  const int lo = static_cast<int>(std::ceil(std::log2(least_normal / smallest_positive(w))));
  const int hi = static_cast<int>(std::floor(std::log2(a.max_value() / w.max_value())));
  if (lo > hi) return std::nullopt;
  return ScaleExponentWindow{lo, hi};
}

bool folds_weight_groups_in_f32(const Format& f) {
  return f.activation.bits() == 8 && f.has_group_scales() && !scale_exponent_window(f);
}

bool folds_weight_groups_per_slot(const Format& f) {
  return folds_weight_groups_in_f32(f) && f.scale_kind != ScaleKind::kBlock && f.group_k > 0 &&
         f.group_k % 128 != 0 && 128 % f.group_k == 0;
}

namespace {

// ---------------------------------------------------------------------------------------------
// The rules. A check returns true when the format breaks the rule and then fills `d`, the
// offending values. `arch` is null for the format rules.

using CheckFn = bool (*)(const Format& f, const Arch* arch, std::string& d);

struct Entry {
  Rule rule;
  CheckFn check;
};

bool shape_positive(const Format& f, const Arch*, std::string& d) {
  if (f.n > 0 && f.k > 0 && f.experts >= 1) return false;
  d = "n=" + str(f.n) + " k=" + str(f.k) + " e=" + str(f.experts);
  return true;
}

bool shape_limits(const Format& f, const Arch*, std::string& d) {
  d = shape_limit_problem(f);
  return !d.empty();
}

// The rule's sentence quotes the limits from humming.h, their one definition.
#define HM_STRINGIFY_(x) #x
#define HM_STRINGIFY(x) HM_STRINGIFY_(x)

bool activation_dtype(const Format& f, const Arch*, std::string& d) {
  if (find_activation(f.activation)) return false;
  d = "a=" + f.activation.name() + "; the activation dtypes are";
  for (const ActivationSupport& a : supported_activations()) d += " " + a.dtype.name();
  return true;
}

bool output_dtype(const Format& f, const Arch*, std::string& d) {
  if (is_16bit_float(f.output)) return false;
  d = "c=" + f.output.name();
  return true;
}

bool accumulator_dtype(const Format& f, const Arch*, std::string& d) {
  if (is(f.accumulator, HM_DTYPE_F32)) return false;
  if (!is(f.accumulator, HM_DTYPE_F16)) {
    d = "acc=" + f.accumulator.name() + " (use f32 or f16)";
    return true;
  }
  if (is(f.activation, HM_DTYPE_F16) || is(f.activation, HM_DTYPE_E4M3) || is(f.activation, HM_DTYPE_E5M2))
    return false;
  d = "acc=f16 with a=" + f.activation.name();
  return true;
}

bool is_weight_type(Dtype w) {
  return w.is_integer() || (is_signed_float(w) && w.bits() <= 8) || is_16bit_float(w);
}

bool weight_dtype(const Format& f, const Arch*, std::string& d) {
  if (!is_weight_type(f.weight)) {
    d = "w=" + f.weight.name();
    return true;
  }
  // int1 holds -1 and 0: no scale maps a positive weight onto it (the quantizer's own check).
  if (!f.weight.is_integer() || f.weight.max_value() > 0.0 || f.scale_kind == ScaleKind::kNone)
    return false;
  d = "w=" + f.weight.name() + " (values " + str(static_cast<int64_t>(f.weight.min_value())) +
      ".." + str(static_cast<int64_t>(f.weight.max_value())) + ") with s=" + scale_to_string(f);
  return true;
}

// The weight-in-activation rules only speak when both dtypes passed their own rules.
bool pair_known(const Format& f) { return is_weight_type(f.weight) && find_activation(f.activation); }

std::string weight_text(const Format& f) {
  return "w=" + f.weight.name() + (f.zero_point.is_integer() ? " with zp=" + f.zero_point.name() : "");
}

bool weight_width(const Format& f, const Arch*, std::string& d) {
  if (!pair_known(f) || f.weight.bits() <= f.activation.bits()) return false;
  d = "w=" + f.weight.name() + " has " + str(f.weight.bits()) + " bits, a=" + f.activation.name() +
      " has " + str(f.activation.bits());
  return true;
}

bool int_weight_in_float(const Format& f, const Arch*, std::string& d) {
  if (!pair_known(f) || !f.weight.is_integer() || !is_signed_float(f.activation)) return false;
  const IntegerRange r = weight_integer_range(f.weight, f.zero_point);
  const int64_t limit = exact_integer_limit(f.activation);
  if (std::max(-r.lo, r.hi) <= limit) return false;
  d = weight_text(f) + " takes values " + str(r.lo) + ".." + str(r.hi) + "; a=" + f.activation.name() +
      " holds integers up to magnitude " + str(limit);
  return true;
}

bool float_weight_in_float(const Format& f, const Arch*, std::string& d) {
  if (!pair_known(f) || !is_signed_float(f.weight) || !is_signed_float(f.activation)) return false;
  const Dtype w = f.weight, a = f.activation;
  if (w.exponent_bits() > a.exponent_bits() || w.mantissa_bits() > a.mantissa_bits()) {
    d = "w=" + w.name() + " is e" + str(w.exponent_bits()) + "m" + str(w.mantissa_bits()) +
        ", a=" + a.name() + " is e" + str(a.exponent_bits()) + "m" + str(a.mantissa_bits());
    return true;
  }
  if (w.exponent_bits() != a.exponent_bits() || w.exponent_bits() == 0) return false;
  // Equal exponent widths: the weight's all-ones exponent lands on the activation's, which holds
  // Inf/NaN (IEEE) or, with all mantissa bits set, NaN (fn).
  bool clash = false;
  if (a.variant() == FloatVariant::kIeee) clash = w.variant() != FloatVariant::kIeee;
  if (a.variant() == FloatVariant::kFn)
    clash = w.variant() == FloatVariant::kFinite && w.mantissa_bits() == a.mantissa_bits();
  if (!clash) return false;
  d = "w=" + w.name() + " uses codes that are Inf/NaN in a=" + a.name();
  return true;
}

bool int_weight_in_int(const Format& f, const Arch*, std::string& d) {
  if (!pair_known(f) || !f.weight.is_integer() || !f.activation.is_integer()) return false;
  const IntegerRange r = weight_integer_range(f.weight, f.zero_point);
  const int64_t half = int64_t{1} << (f.activation.bits() - 1);
  if (r.lo >= -half && r.hi <= half - 1) return false;
  d = weight_text(f) + " takes values " + str(r.lo) + ".." + str(r.hi) + "; a=" + f.activation.name() +
      " holds " + str(-half) + ".." + str(half - 1);
  return true;
}

bool float_weight_in_int(const Format& f, const Arch*, std::string& d) {
  if (!pair_known(f) || !is_signed_float(f.weight) || !f.activation.is_integer()) return false;
  const double steps = f.weight.max_value() / smallest_positive(f.weight);
  const int64_t limit = (int64_t{1} << (f.activation.bits() - 1)) - 1;
  if (steps <= static_cast<double>(limit)) return false;
  const std::string magnitude = steps < 1e15 ? str(static_cast<int64_t>(steps)) : "over 10^15";
  d = "w=" + f.weight.name() + " spans -" + magnitude + "..+" + magnitude + " steps of " +
      std::to_string(smallest_positive(f.weight)) + "; a=" + f.activation.name() + " holds up to " + str(limit);
  return true;
}

bool zero_point_weight(const Format& f, const Arch*, std::string& d) {
  if (!f.has_zero_point() || f.weight.kind() == DtypeKind::kUnsignedInt) return false;
  d = "zp=" + f.zero_point.name() + " with w=" + f.weight.name();
  return true;
}

bool zero_point_integer(const Format& f, const Arch*, std::string& d) {
  if (!f.zero_point.is_integer()) return false;
  if (f.zero_point.kind() == DtypeKind::kUnsignedInt && f.zero_point.bits() == f.weight.bits()) return false;
  d = "zp=" + f.zero_point.name() + " with w=" + f.weight.name();
  return true;
}

bool zero_point_float(const Format& f, const Arch*, std::string& d) {
  if (!f.has_zero_point() || f.zero_point.is_integer()) return false;
  if (is_16bit_float(f.zero_point) && f.zero_point == f.activation) return false;
  d = "zp=" + f.zero_point.name() + " with a=" + f.activation.name();
  return true;
}

bool zero_point_scales(const Format& f, const Arch*, std::string& d) {
  if (!f.has_zero_point() ||
      ((f.scale_kind == ScaleKind::kChannel || f.scale_kind == ScaleKind::kGroup) &&
       !is(f.scale, HM_DTYPE_UE8M0)))
    return false;
  d = "zp=" + f.zero_point.name() + " with s=" + scale_to_string(f);
  return true;
}

bool scale_dtype(const Format& f, const Arch*, std::string& d) {
  if (f.scale_kind == ScaleKind::kNone || f.scale_kind == ScaleKind::kTensor) return false;
  for (hm_dtype_t ok : {HM_DTYPE_F16, HM_DTYPE_BF16, HM_DTYPE_F32, HM_DTYPE_E4M3, HM_DTYPE_E5M2, HM_DTYPE_UE8M0})
    if (is(f.scale, ok)) return false;
  d = "s=" + scale_to_string(f) + " has the scale dtype " + f.scale.name();
  if (f.scale.is_none()) d += " (set one with hm_format_set_dtype(HM_ROLE_SCALE) or s=<dtype>:...)";
  return true;
}

bool group_size(const Format& f, const Arch*, std::string& d) {
  auto bad = [](int32_t g) { return g < 16 || g % 16 != 0; };
  if (!f.has_group_scales() || !(bad(f.group_k) || (f.scale_kind == ScaleKind::kBlock && bad(f.group_n))))
    return false;
  d = "s=" + scale_to_string(f);
  return true;
}

bool group_mma_step(const Format& f, const Arch*, std::string& d) {
  const ActivationSupport* a = find_activation(f.activation);
  if (!a || !f.has_group_scales() || f.group_k <= 0 || is(f.activation, HM_DTYPE_E2M1)) return false;
  if (f.group_k % a->mma_k == 0) return false;
  d = "group_k " + str(f.group_k) + " with a=" + f.activation.name() + ", whose MMA K is " + str(a->mma_k);
  return true;
}

bool activation_groups(const Format& f, const Arch*, std::string& d) {
  if (f.act_group_k <= 0) return false;
  const ActivationSupport* a = find_activation(f.activation);
  if (f.activation.bits() > 8 || !a) {
    d = "a=" + f.activation.name() + ":g" + str(f.act_group_k) + " (16-bit activations are not quantized)";
    return true;
  }
  // e2m1 activations take their scales in the block-scaled MMA, per 16 (NVFP4) or 32 (MX)
  // elements, as R20 says for the weights: whole 16-element blocks.
  if (is(f.activation, HM_DTYPE_E2M1)) {
    if (f.act_group_k % 16 == 0) return false;
    d = "a=" + f.activation.name() + ":g" + str(f.act_group_k) +
        ", not whole 16-element blocks of the block-scaled MMA";
    return true;
  }
  if (f.act_group_k % a->mma_k == 0) return false;
  d = "a=" + f.activation.name() + ":g" + str(f.act_group_k) + ", whose MMA K is " + str(a->mma_k);
  return true;
}

bool scale_in_activation(const Format& f, const Arch*, std::string& d) {
  if (!is_16bit_float(f.activation) || !f.has_group_scales() || !f.scale.is_float()) return false;
  if (float_fits_exactly(f.scale, f.activation)) return false;
  d = "s=" + scale_to_string(f) + " with a=" + f.activation.name();
  return true;
}

bool e2m1_scales(const Format& f, const Arch*, std::string& d) {
  if (!is(f.activation, HM_DTYPE_E2M1) || !f.has_group_scales()) return false;
  if (is(f.scale, HM_DTYPE_E4M3) && f.group_k % 16 == 0) return false;
  if (is(f.scale, HM_DTYPE_UE8M0) && f.group_k % 32 == 0) return false;
  d = "s=" + scale_to_string(f) + " with a=e2m1";
  return true;
}

bool ue8m0_group(const Format& f, const Arch*, std::string& d) {
  if (!is(f.scale, HM_DTYPE_UE8M0) || !f.has_group_scales() || f.group_k % 32 == 0) return false;
  d = "s=" + scale_to_string(f);
  return true;
}

bool arch_minimum(const Format&, const Arch* arch, std::string& d) {
  if (arch->compute_capability() >= 75) return false;
  d = "the target is " + arch->name();
  return true;
}

bool activation_arch(const Format& f, const Arch* arch, std::string& d) {
  const ActivationSupport* a = find_activation(f.activation);
  if (!a || a->runs_on(*arch)) return false;
  d = "a=" + f.activation.name() + " needs " + a->arch_text() + " (" + a->why + "), the target is " + arch->name();
  return true;
}

bool bf16_output_arch(const Format& f, const Arch* arch, std::string& d) {
  if (!is(f.output, HM_DTYPE_BF16) || arch->compute_capability() >= 80) return false;
  d = "c=bf16 on " + arch->name();
  return true;
}

constexpr hm_status_t kFmt = HM_ERROR_UNSUPPORTED_FORMAT;
constexpr hm_status_t kArch = HM_ERROR_UNSUPPORTED_ARCH;

// clang-format off
const Entry kEntries[] = {
  {{"R1", "shape-positive", "n, k and the number of experts are positive: a layer has at least one output, one input and one expert (set them with n=, k=, e= or hm_format_set_shape).", kFmt}, shape_positive},
  {{"R2", "shape-limits", "n and group_n are at most HM_MAX_N = " HM_STRINGIFY(HM_MAX_N) ", k and group_k at most HM_MAX_K = " HM_STRINGIFY(HM_MAX_K) ", e at most HM_MAX_EXPERTS = " HM_STRINGIFY(HM_MAX_EXPERTS) " (humming.h): the kernels index rows and columns with 32-bit integers, and within these limits every buffer size fits 64 bits.", kFmt}, shape_limits},
  {{"R3", "activation-dtype", "The activation dtype is one the tensor cores multiply, a row of the support matrix (other inputs are quantized to one of them first).", kFmt}, activation_dtype},
  {{"R4", "output-dtype", "The output dtype is f16 or bf16: the epilogue converts the f32 results to a 16-bit float.", kFmt}, output_dtype},
  {{"R5", "accumulator-dtype", "The accumulator is f32, or f16 with f16, e4m3 or e5m2 activations: only those MMA forms accumulate in f16 (bf16 and fp4 accumulate in f32, integers in s32).", kFmt}, accumulator_dtype},
  {{"R6", "weight-dtype", "The weight is an integer of 1..8 bits, a signed float of at most 8 bits, or f16/bf16 for an unquantized layer; ue8m0 and f32 are not weight types. int1 (-1 and 0) takes no scales: it has no positive value for a scale to map weights onto.", kFmt}, weight_dtype},
  {{"R7", "weight-width", "The weight is not wider than the activation: weights are converted into the activation's type before the MMA, and a wider type cannot fit.", kFmt}, weight_width},
  {{"R8", "int-weight-in-float", "Integer weights on float activations are exact: every weight value after the zero point, times one power of two, is a value of the activation type, i.e. its magnitude is at most 2^(m+1) for m mantissa bits (signed and biased N-bit weights need N <= m+2, unsigned ones and those with a zero point N <= m+1).", kFmt}, int_weight_in_float},
  {{"R9", "float-weight-in-float", "Float weights on float activations have no more exponent and no more mantissa bits than the activation: the conversion moves the exponent field into the activation's and keeps every mantissa bit (the bias difference goes into the scale); with equal exponent widths the weight's top codes must not be Inf/NaN codes of the activation.", kFmt}, float_weight_in_float},
  {{"R10", "int-weight-in-int", "Integer weights on integer activations fit the activation's signed range after the zero point: signed and biased N-bit weights need N <= the activation's bits, unsigned ones and those with a zero point N < the activation's bits.", kFmt}, int_weight_in_int},
  {{"R11", "float-weight-in-int", "Float weights on integer activations are integers in units of the weight's smallest step (e2m1: -12..12 halves), and the largest fits the activation (e2m1 on int8, not on int4); the step goes into the scale.", kFmt}, float_weight_in_int},
  {{"R12", "zero-point-weight", "Zero points go with plain unsigned integer weights (uintN): signed and biased integers are already centred, floats are symmetric.", kFmt}, zero_point_weight},
  {{"R13", "zero-point-integer", "An integer zero point is unsigned with the weight's width (uint4 for uint4 weights): it is packed and subtracted like a weight code.", kFmt}, zero_point_integer},
  {{"R14", "zero-point-float", "A float zero point is f16 or bf16 and equal to the activation dtype: it is subtracted in the activation type before the MMA, which only 16-bit activations do.", kFmt}, zero_point_float},
  {{"R15", "zero-point-scales", "Zero points need channel or group scales other than ue8m0: they have the scales' shape [E][N][G] and are applied with them, and MX power-of-two scales are symmetric (no checkpoint pairs them with zero points).", kFmt}, zero_point_scales},
  {{"R16", "scale-dtype", "Channel, group and block scales are f16, bf16, f32, e4m3, e5m2 or ue8m0 (s=none and s=tensor have no scale dtype; global scales are f32).", kFmt}, scale_dtype},
  {{"R17", "group-size", "Group sizes (group_k, and group_n of block scales) are positive multiples of 16: checkpoints use 16..256 and the kernels step K and N by 16; the last group may be partial.", kFmt}, group_size},
  {{"R18", "group-mma-step", "On 8- and 4-bit activations group scales are applied in f32 between MMA steps, so group_k is a multiple of the activation's MMA K (32 for 8-bit, 64 for 4-bit; e2m1 follows R20).", kFmt}, group_mma_step},
  {{"R19", "scale-in-activation", "On 16-bit activations group and block scales multiply the dequantized weight in the activation type before the MMA, so every scale value is exactly a value of the activation dtype.", kFmt}, scale_in_activation},
  {{"R20", "e2m1-scales", "On e2m1 activations group scales are applied by the block-scaled MMA, which takes e4m3 scales per 16 elements (NVFP4) or ue8m0 scales per 32 (MXFP4): the scale dtype is one of those and group_k a multiple of its block.", kFmt}, e2m1_scales},
  {{"R21", "ue8m0-group", "ue8m0 group scales have group_k a multiple of 32, the OCP MX block: scales are read per 32-element block.", kFmt}, ue8m0_group},
  {{"R22", "activation-groups", "Per-token x K-group activation scales (a=<dtype>:g<K>) belong to quantized activations (8 bits or fewer) and group_k is a multiple of the activation's MMA K (32 for 8-bit, 64 for 4-bit integers): each group's sums are scaled in f32 between MMA steps (e2m1 activations take theirs in the block-scaled MMA, per whole 16-element blocks).", kFmt}, activation_groups},
  {{"R23", "arch-minimum", "The target is sm_75 or newer: every kernel uses mma.sync and ldmatrix as Turing introduced them.", kArch}, arch_minimum},
  {{"R24", "activation-arch", "The activation's MMA exists on the target (the arch column of the support matrix).", kArch}, activation_arch},
  {{"R25", "bf16-output-arch", "bf16 output needs sm_80 or newer: the f32 -> bf16 conversion (cvt.rn.bf16x2.f32) starts there.", kArch}, bf16_output_arch},
};
// clang-format on

std::vector<Violation> run(const Format& f, const Arch* arch) {
  std::vector<Violation> out;
  const std::vector<Rule>& rules = support_rules();  // parallel to kEntries
  for (size_t i = 0; i < rules.size(); ++i) {
    if ((rules[i].status == kArch) != (arch != nullptr)) continue;
    std::string detail;
    if (kEntries[i].check(f, arch, detail)) out.push_back({&rules[i], detail});
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The activation table

const std::vector<ActivationSupport>& supported_activations() {
  // NOTE: int4 is checked with ptxas 13.0: mma.sync.m16n8k64.s4 assembles for sm_80..sm_89 to the
  // same short code as .s8, but for sm_90a, sm_100a and sm_120a to a ~200-instruction emulation;
  // Hopper and Blackwell have no 4-bit integer tensor cores. e2m1 mma.sync (kind::f8f6f4) is
  // rejected by ptxas for sm_120 without the 'a'/'f' suffix and for every target before 12.x;
  // sm_100-class parts reach fp4 through tcgen05.mma (arch-specific as well). Turing has an s4
  // mma (m8n8k32), but the kernels use the m16n8k64 shape that sm_80 introduced. e3m4 and e0m3
  // are tensor-core modes outside PTX's type system that the Humming announcement reports on
  // every Blackwell part and not on Rubin; ptxas cannot confirm them, so the list is explicit.
  static const std::vector<ActivationSupport> table = {
      {dt(HM_DTYPE_F16), 16, "mma.sync m16n8k8 (sm_75), m16n8k16; wgmma (sm_90a)", 75, 0, {}, false,
       "f16 tensor cores exist from Turing on"},
      {dt(HM_DTYPE_BF16), 16, "mma.sync m16n8k16; wgmma (sm_90a)", 80, 0, {}, false,
       "bf16 MMA starts with Ampere"},
      {dt(HM_DTYPE_E4M3), 32, "mma.sync m16n8k32; wgmma (sm_90a)", 89, 0, {}, false,
       "fp8 MMA starts with Ada"},
      {dt(HM_DTYPE_E5M2), 32, "mma.sync m16n8k32; wgmma (sm_90a)", 89, 0, {}, false,
       "fp8 MMA starts with Ada"},
      {dt(HM_DTYPE_INT8), 32, "mma.sync m8n8k16 (sm_75), m16n8k32; wgmma (sm_90a)", 75, 0, {}, false,
       "int8 tensor cores exist from Turing on"},
      {dt(HM_DTYPE_INT4), 64, "mma.sync m16n8k64", 80, 89, {}, false,
       "int4 MMA is native only on 8.x; Hopper and Blackwell emulate it"},
      {dt(HM_DTYPE_E2M1), 64, "block-scaled mma.sync kind::mxf4nvf4 (12.x), tcgen05.mma (10.x, 11.x)",
       100, 121, {}, true, "fp4 MMA exists only on Blackwell, with arch-specific targets"},
      {Dtype::floating(3, 4), 32, "tcgen05.mma / mma.sync e3m4 mode", 0, 0, {100, 101, 103, 110, 120, 121},
       true, "a Blackwell tensor-core mode outside PTX's type system, absent on Rubin"},
      {Dtype::floating(0, 3), 64, "tcgen05.mma / mma.sync e0m3 mode", 0, 0, {100, 101, 103, 110, 120, 121},
       true, "a Blackwell tensor-core mode outside PTX's type system, absent on Rubin"},
  };
  return table;
}

const ActivationSupport* find_activation(Dtype activation) {
  for (const ActivationSupport& a : supported_activations())
    if (a.dtype == activation) return &a;
  return nullptr;
}

bool ActivationSupport::runs_on(const Arch& arch) const {
  if (needs_specific && !arch.has_specific_features()) return false;
  const int cc = arch.compute_capability();
  if (!only_cc.empty()) {
    for (int c : only_cc)
      if (c == cc) return true;
    return false;
  }
  return cc >= min_cc && (max_cc == 0 || cc <= max_cc);
}

std::string ActivationSupport::arch_text() const {
  const std::string suffix = needs_specific ? "a/f" : "";
  auto sm = [&](int cc) { return "sm_" + std::to_string(cc) + suffix; };
  if (!only_cc.empty()) {  // "sm_{100,103,120}a/f"
    std::string out;
    for (int cc : only_cc) out += (out.empty() ? "" : ",") + std::to_string(cc);
    return "sm_{" + out + "}" + suffix;
  }
  if (max_cc == 0) return sm(min_cc) + "+";
  return sm(min_cc) + ".." + sm(max_cc);
}

// ---------------------------------------------------------------------------------------------
// Exactness facts

int64_t exact_integer_limit(Dtype a) {
  HM_REQUIRE(a.is_float(), HM_ERROR_INVALID_ARGUMENT, "exact_integer_limit needs a float dtype, got " + a.name());
  // Integers k < 2^(m+1) sit in the subnormal and first normal binade, so k * smallest is exact;
  // 2^(m+1) is the next power of two; past it odd integers need m+2 bits. Tiny floats (e0m3)
  // run out of codes first.
  const double by_precision = std::ldexp(1.0, a.mantissa_bits() + 1);
  const double by_range = std::floor(a.max_value() / smallest_positive(a));
  return static_cast<int64_t>(std::min(by_precision, by_range));
}

IntegerRange weight_integer_range(Dtype w, Dtype zp) {
  HM_REQUIRE(w.is_integer(), HM_ERROR_INVALID_ARGUMENT, "weight_integer_range needs an integer dtype, got " + w.name());
  const int64_t top = (int64_t{1} << w.bits()) - 1, half = int64_t{1} << (w.bits() - 1);
  if (w.kind() != DtypeKind::kUnsignedInt) return {-half, half - 1};
  if (zp.is_integer()) return {-top, top};  // q - zp with both in [0, 2^N - 1]
  return {0, top};
}

bool float_fits_exactly(Dtype s, Dtype a) {
  if (!s.is_float() || !a.is_float()) return false;
  if (s.kind() == DtypeKind::kFloat && a.kind() != DtypeKind::kFloat) return false;  // sign
  // Values in a's normal range need at most a's significant bits (mantissa + the implicit one;
  // exponent-less e0m3 has no implicit bit); smaller ones must be multiples of a's least
  // subnormal (both smallest values are powers of two); nothing may exceed a's maximum.
  const int s_bits = s.mantissa_bits() + (s.exponent_bits() > 0 ? 1 : 0);
  return s_bits <= a.mantissa_bits() + 1 && s.max_value() <= a.max_value() &&
         smallest_positive(s) >= smallest_positive(a);
}

// ---------------------------------------------------------------------------------------------
// Checking

std::string Violation::message() const {
  return "rule " + std::string(rule->id) + " " + rule->name + ": " + rule->sentence + " Here: " + detail + ".";
}

const std::vector<Rule>& support_rules() {
  static const std::vector<Rule> rules = [] {
    std::vector<Rule> out;
    for (const Entry& e : kEntries) out.push_back(e.rule);
    return out;
  }();
  return rules;
}

const Rule& support_rule(const std::string& id) {
  for (const Rule& r : support_rules())
    if (id == r.id) return r;
  fail(HM_ERROR_INVALID_ARGUMENT, "no support rule has the id " + core::quoted(id));
}

std::vector<Violation> check(const Format& format, const std::optional<Arch>& arch) {
  std::vector<Violation> out = run(format, nullptr);
  if (arch) {
    for (Violation& v : run(format, &*arch)) out.push_back(std::move(v));
    return out;
  }
  std::vector<Violation> closest;
  const Arch* closest_arch = nullptr;
  for (const Arch& a : known_archs()) {
    std::vector<Violation> v = run(format, &a);
    if (v.empty()) return out;
    if (!closest_arch || v.size() < closest.size()) {
      closest = std::move(v);
      closest_arch = &a;
    }
  }
  for (Violation& v : closest) {
    v.detail += " (no known target supports the format; the closest is " + closest_arch->name() + ")";
    out.push_back(std::move(v));
  }
  return out;
}

void validate(const Format& format, const std::optional<Arch>& arch) {
  const std::vector<Violation> violations = check(format, arch);
  if (violations.empty()) return;
  std::string message = "the format '" + format.to_string() + "' is not supported" +
                        (arch ? " on " + arch->name() : std::string()) + ": " + violations[0].message();
  if (violations.size() > 1) {
    message += " Also broken:";
    for (size_t i = 1; i < violations.size(); ++i) message += std::string(" ") + violations[i].rule->id;
    message += " (see docs/support.md or `humming support`).";
  }
  fail(violations[0].rule->status, message);
}

}  // namespace hm::core
