// Stacking converted layers (docs/convert.md "Stacking experts"): checkpoints that store a MoE
// layer's experts as separate quantized layers (GPTQ, AWQ, compressed-tensors: experts.<i>.
// gate_proj / up_proj / down_proj) convert expert by expert; the MoE kernels read one layer of
// E experts, with gate and up as one N = 2 * I layer. Both joins work on the canonical buffers,
// which hold every tensor expert-major and row-major ([E][N][...]), so they are copies of whole
// rows: nothing is re-quantized, and what cannot be joined exactly is refused.
#include <algorithm>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "quant/quantize.hpp"
#include "schema/common.hpp"
#include "schema/convert.hpp"

namespace hm::schema {
namespace {

// The format every part must share, with the joined dimension (E or N) set to the part's own.
core::Format without(const core::Format& f, StackAxis axis) {
  core::Format g = f;
  if (axis == StackAxis::kExperts)
    g.experts = 1;
  else
    g.n = 1;
  return g;
}

// Appends rows [e * rows, (e + 1) * rows) of `from` (rows of `width` elements) to `to`.
template <class T>
void append_rows(std::vector<T>& to, const std::vector<T>& from, int64_t e, int64_t rows,
                 int64_t width) {
  const auto first = from.begin() + e * rows * width;
  to.insert(to.end(), first, first + rows * width);
}

}  // namespace

Layer stack_layers(const std::vector<const Layer*>& parts, StackAxis axis) {
  const char* what = axis == StackAxis::kExperts ? "experts" : "rows";
  if (parts.size() < 2)
    fail(HM_ERROR_INVALID_ARGUMENT, std::string("stacking ") + what + " needs at least two " +
                                        "layers, got " + std::to_string(parts.size()));
  for (size_t i = 0; i < parts.size(); ++i)
    if (parts[i] == nullptr)
      fail(HM_ERROR_INVALID_ARGUMENT, "layer " + std::to_string(i) + " is NULL");
  const Layer& first = *parts[0];
  const core::Format& f0 = first.format;
  const core::Format shared = without(f0, axis);
  for (size_t i = 1; i < parts.size(); ++i) {
    const Layer& p = *parts[i];
    if (!(without(p.format, axis) == shared))
      fail(HM_ERROR_INVALID_ARGUMENT,
           "layer " + std::to_string(i) + " has the format " + p.format.to_string() +
               ", which differs from layer 0's " + f0.to_string() + " in more than " +
               (axis == StackAxis::kExperts ? "e" : "n") + "; stacked layers share one format");
    // One permutation of K serves every expert (the kernels gather A once per call).
    if (p.k_permutation != first.k_permutation)
      fail(HM_ERROR_UNSUPPORTED,
           "layer " + std::to_string(i) + " reorders K differently from layer 0 (act-order "
           "checkpoints: each layer has its own g_idx); a stacked layer gathers A with one "
           "permutation, so these layers are served as separate layers");
  }

  Layer out;
  out.format = f0;
  out.k_permutation = first.k_permutation;
  for (const Layer* p : parts) out.rerounded_groups += p->rerounded_groups;
  for (const Layer* p : parts) out.rerounded_weights += p->rerounded_weights;
  for (const Layer* p : parts)
    for (const std::string& what : p->widened_to_bf16)
      if (std::find(out.widened_to_bf16.begin(), out.widened_to_bf16.end(), what) ==
          out.widened_to_bf16.end())
        out.widened_to_bf16.push_back(what);
  const quant::CanonicalShape s0 = quant::canonical_shape(f0);
  // Each buffer sized once: a joined MoE layer can take gigabytes, and growing it by doubling
  // would copy it again and hold up to twice its size for a moment.
  size_t codes = 0, scales = 0, zeros = 0, bias = 0;
  for (const Layer* p : parts) {
    codes += p->codes.size();
    scales += p->scales.size();
    zeros += p->zero_points.size();
    bias += p->bias.size();
  }
  out.codes.reserve(codes);
  out.scales.reserve(scales);
  out.zero_points.reserve(zeros);
  out.bias.reserve(bias);
  if (axis == StackAxis::kExperts) {
    int64_t experts = 0;
    for (const Layer* p : parts) {
      experts += p->format.experts;
      out.codes.insert(out.codes.end(), p->codes.begin(), p->codes.end());
      out.scales.insert(out.scales.end(), p->scales.begin(), p->scales.end());
      out.zero_points.insert(out.zero_points.end(), p->zero_points.begin(), p->zero_points.end());
      out.global_scale.insert(out.global_scale.end(), p->global_scale.begin(),
                              p->global_scale.end());
      out.bias.insert(out.bias.end(), p->bias.begin(), p->bias.end());
    }
    if (experts > HM_MAX_EXPERTS)
      fail(HM_ERROR_INVALID_ARGUMENT, "stacking gives " + std::to_string(experts) +
                                          " experts, more than HM_MAX_EXPERTS = " +
                                          std::to_string(HM_MAX_EXPERTS));
    out.format.experts = static_cast<int32_t>(experts);
  } else {
    // Expert by expert, the rows of each part in turn. Block scales hold one row per group_n
    // rows of N, so each part but the last must end on a block boundary; a global scale is one
    // per expert, so the parts must agree on it.
    int64_t n = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      const core::Format& f = parts[i]->format;
      if (i + 1 < parts.size() && f.n % s0.group_n != 0)
        fail(HM_ERROR_UNSUPPORTED,
             "layer " + std::to_string(i) + " has n = " + std::to_string(f.n) + ", not a multiple "
             "of its scale blocks' " + std::to_string(s0.group_n) + " rows; stacked rows would "
             "share a block scale");
      n += f.n;
    }
    if (n > HM_MAX_N)
      fail(HM_ERROR_INVALID_ARGUMENT, "stacking gives n = " + std::to_string(n) +
                                          ", more than HM_MAX_N = " + std::to_string(HM_MAX_N));
    for (size_t i = 1; i < parts.size(); ++i)
      for (size_t e = 0; e < first.global_scale.size(); ++e)
        if (parts[i]->global_scale[e] != first.global_scale[e])
          fail(HM_ERROR_UNSUPPORTED,
               "layer " + std::to_string(i) + "'s global scale of expert " + std::to_string(e) +
                   " is " + std::to_string(parts[i]->global_scale[e]) + ", layer 0's " +
                   std::to_string(first.global_scale[e]) + "; a layer of stacked rows holds one "
                   "global scale per expert (fold them into the group scales first)");
    out.global_scale = first.global_scale;
    for (int64_t e = 0; e < f0.experts; ++e)
      for (const Layer* p : parts) {
        const quant::CanonicalShape s = quant::canonical_shape(p->format);
        append_rows(out.codes, p->codes, e, s.n, s.k);
        if (!p->scales.empty()) append_rows(out.scales, p->scales, e, s.scale_rows, s.groups_k);
        if (!p->zero_points.empty())
          append_rows(out.zero_points, p->zero_points, e, s.scale_rows, s.groups_k);
        if (!p->bias.empty()) append_rows(out.bias, p->bias, e, s.n, 1);
      }
    out.format.n = n;
  }
  finish(out);  // validates the joined format and checks every buffer against its shape
  return out;
}

}  // namespace hm::schema
