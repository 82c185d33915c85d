// FP4 (e2m1) weights, two codes per byte with the even k in the low nibble:
//   nvfp4     ModelOpt: weight uint8 [N, K/2], weight_scale e4m3 [N, K/16], weight_scale_2 f32
//             (one, or one per fused shard when they are all equal); w = e2m1 * scale * global
//   ct-nvfp4  compressed-tensors nvfp4-pack-quantized: weight_packed uint8 [N, K/2], weight_scale
//             e4m3 [N, K/16], weight_global_scale f32; w = e2m1 * scale / global (the inverse)
//   mxfp4     gpt-oss experts: <proj>_blocks uint8 [E, N, K/32, 16], <proj>_scales uint8 e8m0
//             [E, N, K/32], <proj>_bias [E, N]; w = e2m1 * 2^(s - 127). Gate/up projections
//             interleave their rows (even = gate, odd = up); options.split_gate_up reorders them
//             into [gate rows, up rows]. With 8-bit activations (--act e4m3 / e5m2) the e8m0
//             scales become group x tensor scales in the kernel's exponent window
//             (fold_scale_exponents).
//             With 8-bit activations NVFP4 becomes 8-bit weights of the activation's type with
//             f32 channel scales (requantize_per_channel_for_8bit_activations: lossy, noted).
// input_scale / input_global_scale tensors are accepted and ignored.
#include <cmath>
#include <cstring>

#include "core/error.hpp"
#include "schema/common.hpp"

namespace hm::schema {

namespace {

// uint8 [rows, K/2] -> codes [rows][K], low nibble first.
void unpack_nibbles(const io::TensorView& packed, int64_t rows, int64_t k, uint8_t* codes) {
  parallel_for(rows, k, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* src = packed.data + r * (k / 2);
      uint8_t* dst = codes + r * k;
      for (int64_t i = 0; i < k / 2; ++i) {
        dst[2 * i] = src[i] & 15u;
        dst[2 * i + 1] = src[i] >> 4;
      }
    }
  });
}

Layer nvfp4(const io::TensorView& weight, const io::TensorView& scale, const io::TensorView& global,
            bool divide, const Options& options) {
  expect_dtype(weight, {"U8", "I8"});
  expect_ndim(weight, 2);
  expect_dtype(scale, {"F8_E4M3"});
  expect_dtype(global, {"F32", "BF16", "F16"});
  const int64_t n = weight.shape[0], k = weight.shape[1] * 2;
  if (n <= 0 || k <= 0) bad_tensor(weight, "is empty");
  if (k % 16 != 0)
    bad_tensor(weight, "K = " + std::to_string(k) + " is not a multiple of the NVFP4 block of 16");
  expect_shape(scale, {n, k / 16});

  Layer layer;
  core::Format& f = layer.format;
  f.n = n;
  f.k = k;
  f.experts = 1;
  f.weight = dtype(HM_DTYPE_E2M1);
  f.zero_point = core::Dtype();
  f.scale_kind = core::ScaleKind::kGroupTensor;
  f.group_k = 16;
  f.group_n = 0;
  choose_activation_output(layer, options, dtype(HM_DTYPE_F16));

  const std::vector<float> g = read_floats(global);
  if (g.empty()) bad_tensor(global, "holds no value");
  for (float v : g) {
    if (v != g[0])
      bad_tensor(
          global,
          "holds different global scales for fused shards; fold them into the block scales first",
          HM_ERROR_UNSUPPORTED);
    if (!std::isfinite(v) || v <= 0)
      bad_tensor(global, "holds a global scale that is not finite and positive");
  }
  // The divide convention's 1/g is rounded to f32 once (docs/convert.md: at most 1 ulp apart).
  layer.global_scale = {divide ? static_cast<float>(1.0 / static_cast<double>(g[0])) : g[0]};
  // A global scale below 2^-128 has no finite f32 inverse: refused rather than stored as inf.
  if (!std::isfinite(layer.global_scale[0]))
    bad_tensor(global,
               "holds " + std::to_string(g[0]) +
                   ", whose inverse (the multiplying global scale) is not finite in f32",
               HM_ERROR_NON_FINITE);

  layer.codes.resize(static_cast<size_t>(n * k));
  unpack_nibbles(weight, n, k, layer.codes.data());
  layer.scales = read_scales(scale);
  set_scale_dtype(layer, dtype(HM_DTYPE_E4M3), options, scale);
  // 8-bit activations: e4m3 scales per 16 k have no exact 8-bit path; the weights become the
  // activation's 8-bit type with channel scales (lossy, counted in the layer's note).
  layer.rerounded_weights = requantize_per_channel_for_8bit_activations(layer);
  return layer;
}

bool divides(const Options& options, bool scheme_default) {
  if (options.global_scale == GlobalScaleConvention::kDefault) return scheme_default;
  return options.global_scale == GlobalScaleConvention::kDivide;
}

}  // namespace

Layer convert_nvfp4(const LayerTensors& t, const Options& options) {
  Layer layer = nvfp4(t.require("weight"), t.require("weight_scale"), t.require("weight_scale_2"),
                      divides(options, false), options);
  set_bias(layer, t.find("bias"), 1, layer.format.n);
  return layer;
}

Layer convert_ct_nvfp4(const LayerTensors& t, const Options& options) {
  Layer layer = nvfp4(t.require("weight_packed"), t.require("weight_scale"),
                      t.require("weight_global_scale"), divides(options, true), options);
  set_bias(layer, t.find("bias"), 1, layer.format.n);
  return layer;
}

Layer convert_mxfp4(const LayerTensors& t, const Options& options) {
  const io::TensorView& blocks = t.require("blocks");
  const io::TensorView& scales = t.require("scales");
  const io::TensorView* bias = t.find("bias");
  expect_dtype(blocks, {"U8", "I8"});
  expect_dtype(scales, {"U8", "F8_E8M0"});
  const bool dense = blocks.shape.size() == 3;
  if (!dense) expect_ndim(blocks, 4);
  const int64_t e = dense ? 1 : blocks.shape[0];
  const int64_t n = blocks.shape[dense ? 0 : 1];
  const int64_t kb = blocks.shape[dense ? 1 : 2];
  if (blocks.shape.back() != 16)
    bad_tensor(blocks, "the last dimension must be 16 bytes (32 e2m1 codes)");
  const int64_t k = kb * 32;
  if (e <= 0 || n <= 0 || k <= 0) bad_tensor(blocks, "is empty");
  if (dense)
    expect_shape(scales, {n, kb});
  else
    expect_shape(scales, {e, n, kb});
  if (options.split_gate_up && n % 2 != 0)
    bad_tensor(blocks, "has an odd row count; gate/up rows cannot be split");

  Layer layer;
  core::Format& f = layer.format;
  f.n = n;
  f.k = k;
  f.experts = static_cast<int32_t>(e);
  f.weight = dtype(HM_DTYPE_E2M1);
  f.zero_point = core::Dtype();
  f.scale_kind = core::ScaleKind::kGroup;
  f.group_k = 32;
  f.group_n = 0;
  // ue8m0 spans 2^-127..2^127: exactly bf16's range, not f16's (rule R19).
  choose_activation_output(layer, options, dtype(HM_DTYPE_BF16));

  // Row r of the result is checkpoint row src_row(r).
  auto src_row = [&](int64_t r) {
    if (!options.split_gate_up) return r;
    return r < n / 2 ? 2 * r : 2 * (r - n / 2) + 1;
  };
  layer.codes.resize(static_cast<size_t>(e * n * k));
  layer.scales.resize(static_cast<size_t>(e * n * kb));
  uint8_t* codes = layer.codes.data();
  parallel_for(e * n, k, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t x = i / n, src = x * n + src_row(i % n);
      const uint8_t* in = blocks.data + src * (k / 2);
      for (int64_t j = 0; j < k / 2; ++j) {
        codes[i * k + 2 * j] = in[j] & 15u;
        codes[i * k + 2 * j + 1] = in[j] >> 4;
      }
      for (int64_t g = 0; g < kb; ++g) {
        const uint8_t s = scales.data[src * kb + g];
        if (s == 0xff)
          bad_tensor(scales, "element " + std::to_string(src * kb + g) + " is the e8m0 NaN code",
                     HM_ERROR_NON_FINITE);
        layer.scales[i * kb + g] = std::ldexp(1.0f, static_cast<int>(s) - 127);
      }
    }
  });
  set_scale_dtype(layer, dtype(HM_DTYPE_UE8M0), options, scales);
  // 8-bit activations: the scales go into the weights' exponents, within the kernel's window.
  layer.rerounded_groups = fold_scale_exponents(layer);
  if (bias) {
    set_bias(layer, bias, e, n);
    if (options.split_gate_up) {
      const std::vector<float> b = layer.bias;
      for (int64_t i = 0; i < e * n; ++i) layer.bias[i] = b[(i / n) * n + src_row(i % n)];
    }
  } else {
    f.has_bias = false;
  }
  return layer;
}

}  // namespace hm::schema
