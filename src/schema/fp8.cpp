// FP8 weights (e4m3 [N, K]) with their scales, shared by three schemes:
//   fp8     HF quant_method "fp8": weight_scale_inv f32 [ceil(N/bn), ceil(K/bk)] (bn = bk = 128
//           unless options.group_size says otherwise), multiplied in despite its name; or a
//           per-tensor weight_scale (ModelOpt FP8), one scalar per fused shard ([], [S] or
//           [S, 1]); a weight_scale of another shape is read like the ct-fp8 ones below.
//   ct-fp8  compressed-tensors float-quantized: weight_scale scalar (tensor), [N, 1] (channel),
//           [N, K/g] (group) or [ceil(N/128), ceil(K/128)] (block).
//   ct-int8 compressed-tensors int-quantized: int8 weight [N, K], weight_scale as above (tensor,
//           channel or group), optional int8 weight_zero_point.
// w[n][k] = value(q[n][k]) * scale; input_scale tensors are accepted and ignored (activations are
// quantized dynamically).
#include <cmath>

#include "core/error.hpp"
#include "schema/common.hpp"

namespace hm::schema {

namespace {

enum class Kind { kTensor, kChannel, kGroup, kBlock };

struct ScaleLayout {
  Kind kind = Kind::kTensor;
  int64_t group_k = 0, group_n = 0, groups = 1, rows = 1;
};

// Recognizes the scale tensor's layout from its shape.
ScaleLayout scale_layout(const io::TensorView& scale, int64_t n, int64_t k, const Options& options,
                         bool allow_block) {
  ScaleLayout l;
  const int64_t count = scale.numel();
  const auto& s = scale.shape;
  if (count == 1) return l;
  if ((s.size() == 2 && s[0] == n && s[1] == 1) || (s.size() == 1 && s[0] == n)) {
    l.kind = Kind::kChannel;
    l.rows = n;
    return l;
  }
  const int64_t b = options.group_size > 0 ? options.group_size : 128;
  if (allow_block && s.size() == 2 && s[0] == (n + b - 1) / b && s[1] == (k + b - 1) / b &&
      s[0] != n) {
    l.kind = Kind::kBlock;
    l.group_k = l.group_n = b;
    l.rows = s[0];
    l.groups = s[1];
    return l;
  }
  if (s.size() == 2 && s[0] == n && s[1] > 1) {
    l.kind = Kind::kGroup;
    l.groups = s[1];
    l.group_k = derive_group(options, k, s[1], scale);
    l.rows = n;
    return l;
  }
  bad_tensor(scale,
             "is neither one scale, [N, 1] channel scales, [N, groups] group scales" +
                 std::string(allow_block ? " nor [ceil(N/128), ceil(K/128)] block scales" : "") +
                 " for N = " + std::to_string(n) + ", K = " + std::to_string(k));
}

// Fills scale kind, scale values and global scale of an FP8/int8 layer.
void apply_scales(Layer& layer, const io::TensorView& scale, const ScaleLayout& l,
                  const Options& options) {
  core::Format& f = layer.format;
  const std::vector<float> values = read_scales(scale);
  switch (l.kind) {
    case Kind::kTensor:
      f.scale_kind = core::ScaleKind::kTensor;
      f.scale = core::Dtype();
      layer.global_scale = {values[0]};
      return;
    case Kind::kChannel:
      f.scale_kind = core::ScaleKind::kChannel;
      break;
    case Kind::kGroup:
      f.scale_kind = core::ScaleKind::kGroup;
      f.group_k = static_cast<int32_t>(l.group_k);
      break;
    case Kind::kBlock:
      f.scale_kind = core::ScaleKind::kBlock;
      f.group_k = static_cast<int32_t>(l.group_k);
      f.group_n = static_cast<int32_t>(l.group_n);
      break;
  }
  layer.scales = values;  // [rows][groups] is already the canonical order
  set_scale_dtype(layer, float_dtype_of(scale), options, scale);
}

// A fused layer's per-shard scalar scales (one per q/k/v shard): equal -> tensor, else channel.
void apply_shard_scales(Layer& layer, const io::TensorView& scale, int64_t n,
                        const Options& options) {
  set_shard_scales(layer, shard_scales(read_scales(scale), n, options, scale),
                   float_dtype_of(scale));
}

// HF fp8's `weight_scale`: shard scalars are one value, [S] or [S, 1]. Anything else (a 2-D
// [ceil(N/128), ceil(K/128)] block tensor, which compressed-tensors block FP8 stores under this
// name, or [N, groups]) is read by its shape like weight_scale_inv; spreading such a tensor over
// row bands as shard scales would silently give wrong weights. [S, 1] that is also the block shape
// (K <= block) is a block tensor unless shard_rows says it holds shards.
void apply_weight_scale(Layer& layer, const io::TensorView& scale, const Options& options) {
  const int64_t n = layer.format.n, k = layer.format.k;
  const auto& s = scale.shape;
  const bool shard_shaped = s.empty() || s.size() == 1 || (s.size() == 2 && s[1] == 1);
  const int64_t b = options.group_size > 0 ? options.group_size : 128;
  const bool block_shaped = s.size() == 2 && s[0] == (n + b - 1) / b && s[1] == (k + b - 1) / b;
  if (shard_shaped && scale.numel() != n && !(block_shaped && options.shard_rows.empty())) {
    apply_shard_scales(layer, scale, n, options);
    return;
  }
  apply_scales(layer, scale, scale_layout(scale, n, k, options, true), options);
}

Layer start_layer(const io::TensorView& weight, const Options& options, core::Dtype preferred) {
  Layer layer;
  core::Format& f = layer.format;
  f.n = weight.shape[0];
  f.k = weight.shape[1];
  f.experts = 1;
  f.zero_point = core::Dtype();
  f.group_n = 0;
  choose_activation_output(layer, options, preferred);
  return layer;
}

// e4m3 codes as they are; the NaN codes (0x7f, 0xff) cannot come from a quantizer.
std::vector<uint8_t> e4m3_codes(const io::TensorView& weight) {
  std::vector<uint8_t> codes(weight.data, weight.data + weight.bytes);
  for (size_t i = 0; i < codes.size(); ++i)
    if ((codes[i] & 0x7f) == 0x7f)
      bad_tensor(weight, "element " + std::to_string(i) + " is an e4m3 NaN code",
                 HM_ERROR_NON_FINITE);
  return codes;
}

// f32 block / group scales want range: the 16-bit default is bf16 unless the scales are f16.
core::Dtype fp8_preferred(const io::TensorView& scale, const io::TensorView* bias) {
  if (scale.dtype == "F16") return preferred_16bit({bias});
  return dtype(HM_DTYPE_BF16);
}

}  // namespace

Layer convert_fp8(const LayerTensors& t, const Options& options) {
  const io::TensorView& weight = t.require("weight");
  expect_dtype(weight, {"F8_E4M3"});
  expect_ndim(weight, 2);
  const io::TensorView* inv = t.find("weight_scale_inv");
  const io::TensorView* per_tensor = t.find("weight_scale");
  if ((inv != nullptr) == (per_tensor != nullptr))
    fail(HM_ERROR_INVALID_ARGUMENT,
         std::string("an fp8 layer needs exactly one of 'weight_scale_inv' (block scales) "
                     "and 'weight_scale' (per-tensor scales)") +
             (inv ? "; both were given" : "; neither was given"));
  const io::TensorView& scale = inv ? *inv : *per_tensor;
  expect_dtype(scale, {"F32", "BF16", "F16"});
  Layer layer = start_layer(weight, options, fp8_preferred(scale, t.find("bias")));
  layer.format.weight = dtype(HM_DTYPE_E4M3);
  if (inv) {
    const ScaleLayout l = scale_layout(scale, layer.format.n, layer.format.k, options, true);
    if (l.kind != Kind::kBlock && l.kind != Kind::kTensor)
      bad_tensor(scale, "weight_scale_inv must hold [ceil(N/128), ceil(K/128)] block scales");
    apply_scales(layer, scale, l, options);
  } else {
    apply_weight_scale(layer, scale, options);
  }
  layer.codes = e4m3_codes(weight);
  set_bias(layer, t.find("bias"), 1, layer.format.n);
  return layer;
}

Layer convert_ct_fp8(const LayerTensors& t, const Options& options) {
  const io::TensorView& weight = t.require("weight");
  const io::TensorView& scale = t.require("weight_scale");
  expect_dtype(weight, {"F8_E4M3"});
  expect_ndim(weight, 2);
  expect_dtype(scale, {"F32", "BF16", "F16"});
  Layer layer = start_layer(weight, options, fp8_preferred(scale, t.find("bias")));
  layer.format.weight = dtype(HM_DTYPE_E4M3);
  apply_scales(layer, scale, scale_layout(scale, layer.format.n, layer.format.k, options, true),
               options);
  layer.codes = e4m3_codes(weight);
  set_bias(layer, t.find("bias"), 1, layer.format.n);
  return layer;
}

Layer convert_ct_int8(const LayerTensors& t, const Options& options) {
  const io::TensorView& weight = t.require("weight");
  const io::TensorView& scale = t.require("weight_scale");
  expect_dtype(weight, {"I8"});
  expect_ndim(weight, 2);
  expect_dtype(scale, {"F32", "BF16", "F16"});
  Layer layer = start_layer(weight, options, preferred_16bit({&scale, t.find("bias")}));
  const ScaleLayout l = scale_layout(scale, layer.format.n, layer.format.k, options, false);
  apply_scales(layer, scale, l, options);
  layer.codes.assign(weight.data, weight.data + weight.bytes);  // two's complement = int8 codes
  layer.format.weight = dtype(HM_DTYPE_INT8);

  // An asymmetric W8A8 checkpoint: q - zp with both int8 equals (q + 128) - (zp + 128) in uint8.
  if (const io::TensorView* zp = t.find("weight_zero_point")) {
    expect_dtype(*zp, {"I8", "I32"});
    const std::vector<int64_t> z = read_integers(*zp);
    const bool all_zero = std::all_of(z.begin(), z.end(), [](int64_t v) { return v == 0; });
    if (!all_zero) {
      const int64_t n = layer.format.n;
      const int64_t groups = l.kind == Kind::kGroup ? l.groups : 1;
      if (l.kind == Kind::kTensor || static_cast<int64_t>(z.size()) != n * groups)
        bad_tensor(*zp,
                   "expected one zero point per scale ([N, groups]) for an asymmetric int8 layer");
      for (uint8_t& c : layer.codes) c ^= 0x80;
      std::vector<float> zf(z.size());
      for (size_t i = 0; i < z.size(); ++i) {
        if (z[i] < -128 || z[i] > 127) bad_tensor(*zp, "holds a zero point outside -128..127");
        zf[i] = static_cast<float>(z[i] + 128);
      }
      set_integer_weight(layer, 8, std::move(zf), *zp);
    }
  }
  set_bias(layer, t.find("bias"), 1, layer.format.n);
  return layer;
}

}  // namespace hm::schema
