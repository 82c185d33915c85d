// C entry points of the host quantization reference: hm_quantize, hm_dequantize,
// hm_reference_gemm_f32 and hm_canonical_weight_init (src/quant/quantize.*, reference_gemm.*).
#include <cstring>
#include <vector>

#include "api/canonical.hpp"
#include "api/format.hpp"
#include "api/guard.hpp"
#include "core/checked.hpp"
#include "quant/activation.hpp"
#include "quant/quantize.hpp"
#include "quant/reference_gemm.hpp"
#include "quant/scalar_codec.hpp"

namespace {

using hm::api::canonical_view;
using hm::api::format_of;
using hm::api::require_not_null;

// The weight as f32: F32 is used in place; F16 and BF16 are widened (exactly) into `storage`.
const float* weight_as_f32(const void* weight, hm_dtype_t src_dtype, uint64_t count,
                           std::vector<float>* storage) {
  if (src_dtype == HM_DTYPE_F32) return static_cast<const float*>(weight);
  HM_REQUIRE(src_dtype == HM_DTYPE_F16 || src_dtype == HM_DTYPE_BF16, HM_ERROR_INVALID_ARGUMENT,
             "src_dtype must be HM_DTYPE_F32, HM_DTYPE_F16 or HM_DTYPE_BF16");
  const auto* half = static_cast<const uint16_t*>(weight);
  storage->resize(count);
  float* out = storage->data();
  if (src_dtype == HM_DTYPE_BF16) {
    for (uint64_t i = 0; i < count; ++i) {
      const uint32_t bits = static_cast<uint32_t>(half[i]) << 16;  // bf16 is f32's top half
      std::memcpy(&out[i], &bits, sizeof bits);
    }
  } else {
    for (uint64_t i = 0; i < count; ++i) out[i] = hm::quant::float_from_half(half[i]);
  }
  return out;
}

}  // namespace

extern "C" {

HM_API void hm_canonical_weight_init(hm_canonical_weight_t* weight) {
  if (weight == nullptr) return;
  std::memset(weight, 0, sizeof *weight);
  weight->struct_size = sizeof *weight;
}

HM_API hm_status_t hm_quantize(const hm_format_t* format, const void* weight, hm_dtype_t src_dtype,
                               const hm_canonical_weight_t* out) {
  return HM_API_CALL({
    const hm::core::Format& f = format_of(format);
    require_not_null(weight, "weight");
    const hm::quant::CanonicalWeight buffers = canonical_view(out, "out");
    const hm::quant::CanonicalShape shape = hm::quant::canonical_shape(f);
    std::vector<float> widened;
    hm::quant::quantize(f, weight_as_f32(weight, src_dtype, shape.codes, &widened), buffers);
  });
}

HM_API hm_status_t hm_dequantize(const hm_format_t* format, const hm_canonical_weight_t* in,
                                 float* weight) {
  return HM_API_CALL({
    const hm::core::Format& f = format_of(format);
    require_not_null(weight, "weight");
    hm::quant::dequantize(f, canonical_view(in, "in"), weight);
  });
}

HM_API hm_status_t hm_reference_gemm_f32(const float* a, const float* w, const float* bias,
                                         float* c, int64_t m, int64_t n, int64_t k) {
  return HM_API_CALL(hm::quant::reference_gemm_f32(a, w, bias, c, m, n, k));
}

}  // extern "C"

// ---- activations ------------------------------------------------------------------------------

namespace {

void check_activation_args(int64_t m, int64_t k, int32_t group_k) {
  HM_REQUIRE(m > 0 && k > 0, HM_ERROR_INVALID_ARGUMENT,
             "m and k must be positive, got m=" + std::to_string(m) + " k=" + std::to_string(k));
  HM_REQUIRE(group_k >= 0, HM_ERROR_INVALID_ARGUMENT,
             "group_k must be 0 (per token) or positive, got " + std::to_string(group_k));
  // The f32 input is the largest buffer: when its size fits, so do the codes' and the scales'.
  hm::core::size_product({m, k, 4}, "the bytes of 'a' (m x k x 4)");
}

}  // namespace

extern "C" {

HM_API hm_status_t hm_quantize_activation(hm_dtype_t dtype, const float* a, int64_t m, int64_t k,
                                          int32_t group_k, void* codes, float* scales) {
  return HM_API_CALL({
    require_not_null(a, "a");
    require_not_null(codes, "codes");
    require_not_null(scales, "scales");
    check_activation_args(m, k, group_k);
    hm::quant::quantize_activation(hm::core::Dtype::from_code(dtype), a, m, k, group_k,
                                   static_cast<uint8_t*>(codes), scales);
  });
}

HM_API hm_status_t hm_dequantize_activation(hm_dtype_t dtype, const void* codes,
                                            const float* scales, int64_t m, int64_t k,
                                            int32_t group_k, float* out) {
  return HM_API_CALL({
    require_not_null(codes, "codes");
    require_not_null(scales, "scales");
    require_not_null(out, "out");
    check_activation_args(m, k, group_k);
    hm::quant::dequantize_activation(hm::core::Dtype::from_code(dtype),
                                     static_cast<const uint8_t*>(codes), scales, m, k, group_k, out);
  });
}

}  // extern "C"
