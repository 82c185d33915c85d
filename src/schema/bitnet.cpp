// BitNet b1.58 (transformers' BitLinear checkpoints):
//   weight        uint8 [N/4, K]: ternary codes c = w + 1 in {0, 1, 2}, 4 per byte packed along N
//                 in quarters: bits 2i..2i+1 of byte [r][k] hold row i * (N/4) + r
//   weight_scale  [1] (or one per fused shard); the layer divides by it: w = (c - 1) / scale
// The result is uint2b2 (code c + 1, value c - 1) with a tensor scale 1/scale (or channel scales
// for unequal shards). options.global_scale = HM_GLOBAL_SCALE_MULTIPLY multiplies instead.
#include <cmath>

#include "core/error.hpp"
#include "schema/common.hpp"

namespace hm::schema {

Layer convert_bitnet(const LayerTensors& t, const Options& options) {
  const io::TensorView& weight = t.require("weight");
  const io::TensorView& scale = t.require("weight_scale");
  expect_dtype(weight, {"U8", "I8"});
  expect_ndim(weight, 2);
  expect_dtype(scale, {"F32", "BF16", "F16"});
  const int64_t quarter = weight.shape[0], k = weight.shape[1], n = 4 * quarter;
  if (n <= 0 || k <= 0) bad_tensor(weight, "is empty");

  Layer layer;
  core::Format& f = layer.format;
  f.n = n;
  f.k = k;
  f.experts = 1;
  f.weight = core::Dtype::biased_integer(2);
  f.zero_point = core::Dtype();
  choose_activation_output(layer, options, preferred_16bit({&scale, t.find("bias")}));

  layer.codes.resize(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < quarter; ++r)
    for (int64_t i = 0; i < k; ++i) {
      const uint8_t byte = weight.data[r * k + i];
      for (int q = 0; q < 4; ++q) {
        const uint8_t c = (byte >> (2 * q)) & 3u;
        if (c == 3)
          bad_tensor(weight,
                     "byte [" + std::to_string(r) + "][" + std::to_string(i) +
                         "] holds the code 3, which is no ternary value (codes are w + 1 in 0..2)");
        layer.codes[(q * quarter + r) * k + i] = static_cast<uint8_t>(c + 1);
      }
    }

  const bool divide = options.global_scale != GlobalScaleConvention::kMultiply;
  std::vector<float> s = read_scales(scale);
  for (float& v : s) {
    if (!std::isfinite(v) || v == 0) bad_tensor(scale, "holds a scale that is zero or not finite");
    if (divide) v = static_cast<float>(1.0 / static_cast<double>(v));
  }
  set_shard_scales(layer, shard_scales(s, n, options, scale), dtype(HM_DTYPE_F32));
  set_bias(layer, t.find("bias"), 1, n);
  return layer;
}

}  // namespace hm::schema
