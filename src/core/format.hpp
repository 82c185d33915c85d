// The layer format: everything that describes one linear / MoE layer, independent of the device.
// C[M,N] = A[M,K] * dequant(W)[N,K]^T (+ bias). Parsed from and printed to the canonical string
// (docs/format.md); validated by the rules in support.hpp.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.hpp"

namespace hm::core {

enum class ScaleKind : int32_t {
  kNone = HM_SCALE_NONE,
  kChannel = HM_SCALE_CHANNEL,
  kGroup = HM_SCALE_GROUP,
  kBlock = HM_SCALE_BLOCK,
  kTensor = HM_SCALE_TENSOR,
  kGroupTensor = HM_SCALE_GROUP_TENSOR,
};

struct Format {
  Dtype weight = Dtype::from_code(HM_DTYPE_UINT4B8);
  Dtype activation = Dtype::from_code(HM_DTYPE_F16);
  // Activation scales: 0, one per token (row of A); else one per token and group of
  // act_group_k along K (DeepSeek's 1 x 128), written "a=e4m3:g128" (rule R22).
  int32_t act_group_k = 0;
  Dtype output = Dtype::from_code(HM_DTYPE_F16);
  Dtype scale = Dtype::from_code(HM_DTYPE_F16);  // none when scale_kind is kNone / kTensor
  Dtype zero_point;                              // none: symmetric
  Dtype accumulator = Dtype::from_code(HM_DTYPE_F32);
  ScaleKind scale_kind = ScaleKind::kGroup;
  int32_t group_k = 128;  // kGroup, kBlock, kGroupTensor
  int32_t group_n = 0;    // kBlock
  bool has_bias = false;
  int64_t n = 0;
  int64_t k = 0;
  int32_t experts = 1;

  // Canonical string, e.g. "w=uint4b8 a=f16 c=f16 s=f16:g128 zp=none bias=0 acc=f32 n=4096 k=4096 e=1".
  std::string to_string() const;
  // Throws hm::Error(HM_ERROR_PARSE) naming the bad field.
  static Format parse(const std::string& text);

  bool has_zero_point() const { return !zero_point.is_none(); }
  bool has_group_scales() const {
    return scale_kind == ScaleKind::kGroup || scale_kind == ScaleKind::kGroupTensor ||
           scale_kind == ScaleKind::kBlock;
  }
  bool has_global_scale() const {
    return scale_kind == ScaleKind::kTensor || scale_kind == ScaleKind::kGroupTensor;
  }
  // K after padding to the group size (the quantizer's and layout's view); equals k otherwise.
  int64_t k_grouped() const;
  // Number of scale groups along K: ceil(k / group_k) for grouped scales (the last group may be
  // partial); 1 otherwise (channel scales, and formats without per-group scales).
  int64_t groups_k() const;
  // Number of scale rows along N: ceil(n / group_n) for block scales; n otherwise.
  int64_t groups_n() const;
  // Activation scales per token: ceil(k / act_group_k), or 1 (per token).
  int64_t activation_groups() const;

  // Same layer: the canonical strings match (fields a scale kind does not use are ignored).
  friend bool operator==(const Format& a, const Format& b) { return a.to_string() == b.to_string(); }
  friend bool operator!=(const Format& a, const Format& b) { return !(a == b); }
};

// Element counts of the canonical (unpacked) buffers, as include/humming.h describes them:
// codes E*N*K; scales E*N*G (block: E*ceil(N/group_n)*G; none/tensor: 0); zero points as many as
// scales when the format has them; global scales E for tensor and group-tensor scales.
struct CanonicalCounts {
  uint64_t codes = 0;
  uint64_t scales = 0;
  uint64_t zero_points = 0;
  uint64_t global_scale = 0;
};
// Throws HM_ERROR_INVALID_ARGUMENT for a negative shape, experts < 1, a group size <= 0 where the
// scale kind uses one, or a shape beyond the size limits (shape_limit_problem). Does not apply
// the support rules.
CanonicalCounts canonical_counts(const Format& format);

// The size limits of humming.h (HM_MAX_N, HM_MAX_K, HM_MAX_EXPERTS, and group sizes within
// them), the one check of them: "" when `format` is within them, else the offending values
// ("n=33554432 (limit 16777216)"). Rule R2 and every size function apply it.
std::string shape_limit_problem(const Format& format);

// The scale field of the canonical string: "none", "f16:channel", "f16:g128", "f32:b128x128",
// "tensor", "e4m3:g16+tensor".
std::string scale_to_string(const Format& format);

}  // namespace hm::core
