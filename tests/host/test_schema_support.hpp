// Helpers of the converter tests: checkpoint tensors built in memory, conversion through the C
// API, dequantization back to f32 in the checkpoint's own column order, and exact comparison.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "humming.h"
#include "support/last_error.hpp"

namespace schema_test {

using ::hm::test::last_error;

// A checkpoint tensor that owns its bytes.
struct Tensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

template <typename T>
Tensor make_tensor(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
                   const std::vector<T>& values) {
  Tensor t{name, dtype, std::move(shape), {}};
  t.bytes.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

// Code of x in a core dtype (round to nearest even) and its exact value.
inline uint32_t encode(hm_dtype_t d, double x) { return hm::core::Dtype::from_code(d).encode(x); }
inline double decode(hm_dtype_t d, uint32_t code) {
  return hm::core::Dtype::from_code(d).decode(code);
}
inline double round_to(hm_dtype_t d, double x) { return decode(d, encode(d, x)); }

// 16-bit float tensors from values that are already exact in the dtype.
inline Tensor f16_tensor(const std::string& name, std::vector<int64_t> shape,
                         const std::vector<double>& v, hm_dtype_t d = HM_DTYPE_F16) {
  std::vector<uint16_t> codes(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    codes[i] = static_cast<uint16_t>(encode(d, v[i]));
    EXPECT_EQ(decode(d, codes[i]), v[i]) << name << "[" << i << "] is not exact";
  }
  return make_tensor(name, d == HM_DTYPE_F16 ? "F16" : "BF16", std::move(shape), codes);
}
inline Tensor f32_tensor(const std::string& name, std::vector<int64_t> shape,
                         const std::vector<double>& v) {
  std::vector<float> f(v.begin(), v.end());
  return make_tensor(name, "F32", std::move(shape), f);
}

// The result of hm_convert_layer, dequantized.
struct Converted {
  hm_status_t status = HM_SUCCESS;
  std::string error;
  std::string format;
  int64_t n = 0, k = 0;
  int32_t experts = 1;
  std::vector<float> weight;               // dequantized, the converted (possibly permuted) K order
  std::vector<float> in_checkpoint_order;  // the same, columns back in the checkpoint's order
  std::vector<float> bias;
  std::vector<int32_t> permutation;
  std::string note;  // hm_converted_layer_info's note ("" for NULL)
  hm_dtype_t weight_dtype = 0, zero_point_dtype = 0, scale_dtype = 0, activation = 0;
  int32_t scale_kind = 0, group_k = 0, group_n = 0;
};

// The C API's view of `tensors` (pointing into them: keep them alive for the call).
inline std::vector<hm_checkpoint_tensor_t> checkpoint_structs(const std::vector<Tensor>& tensors) {
  std::vector<hm_checkpoint_tensor_t> c(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    hm_checkpoint_tensor_init(&c[i]);
    c[i].name = tensors[i].name.c_str();
    c[i].dtype = tensors[i].dtype.c_str();
    c[i].ndim = static_cast<int32_t>(tensors[i].shape.size());
    for (size_t d = 0; d < tensors[i].shape.size(); ++d) c[i].shape[d] = tensors[i].shape[d];
    c[i].data = tensors[i].bytes.data();
    c[i].bytes = tensors[i].bytes.size();
  }
  return c;
}

inline Converted convert(int32_t scheme, const std::vector<Tensor>& tensors,
                         const hm_convert_options_t* options = nullptr) {
  const std::vector<hm_checkpoint_tensor_t> c = checkpoint_structs(tensors);
  Converted out;
  hm_converted_layer_t* layer = nullptr;
  out.status = hm_convert_layer(scheme, c.data(), c.size(), options, &layer);
  if (out.status != HM_SUCCESS) {
    out.error = last_error();
    EXPECT_EQ(layer, nullptr);
    return out;
  }
  hm_format_t* f = nullptr;
  EXPECT_EQ(hm_converted_layer_format(layer, &f), HM_SUCCESS) << last_error();
  char buf[512];
  hm_format_to_string(f, buf, sizeof buf, nullptr);
  out.format = buf;
  EXPECT_EQ(hm_format_validate(f, nullptr), HM_SUCCESS) << last_error();
  hm_format_get_shape(f, &out.n, &out.k, &out.experts);
  hm_format_get_dtype(f, HM_ROLE_WEIGHT, &out.weight_dtype);
  hm_format_get_dtype(f, HM_ROLE_ZERO_POINT, &out.zero_point_dtype);
  hm_format_get_dtype(f, HM_ROLE_SCALE, &out.scale_dtype);
  hm_format_get_dtype(f, HM_ROLE_ACTIVATION, &out.activation);
  hm_format_get_scale(f, &out.scale_kind, &out.group_k, &out.group_n);
  hm_converted_layer_info_t info;
  hm_converted_layer_info_init(&info);
  EXPECT_EQ(hm_converted_layer_info(layer, &info), HM_SUCCESS) << last_error();
  const int64_t total = out.experts * out.n * out.k;
  out.weight.resize(static_cast<size_t>(total));
  EXPECT_EQ(hm_dequantize(f, &info.weight, out.weight.data()), HM_SUCCESS) << last_error();
  int32_t has_bias = 0;
  hm_format_get_bias(f, &has_bias);
  EXPECT_EQ(has_bias != 0, info.bias != nullptr);
  if (info.bias) out.bias.assign(info.bias, info.bias + out.experts * out.n);
  if (info.k_permutation) out.permutation.assign(info.k_permutation, info.k_permutation + out.k);
  if (info.note) out.note = info.note;
  out.in_checkpoint_order = out.weight;
  if (!out.permutation.empty())
    for (int64_t r = 0; r < out.experts * out.n; ++r)
      for (int64_t i = 0; i < out.k; ++i)
        out.in_checkpoint_order[r * out.k + out.permutation[i]] = out.weight[r * out.k + i];
  hm_format_destroy(f);
  hm_converted_layer_destroy(layer);
  return out;
}

// Every element equal, bit for bit (so -0 vs 0 and NaN payloads would show).
inline void expect_bitwise(const std::vector<float>& got, const std::vector<float>& want,
                           const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &want[i], 4);
    if (a != b && ++bad <= 5)
      ADD_FAILURE() << what << ": element " << i << " is " << got[i]
                    << ", the checkpoint's own dequantization gives " << want[i];
  }
  EXPECT_EQ(bad, 0u) << what;
}

// At most `ulps` f32 steps apart.
inline void expect_within_ulps(const std::vector<float>& got, const std::vector<float>& want,
                               int ulps, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float a = got[i], b = want[i];
    const bool ok = a == b || std::fabs(a - b) <= ulps * std::fabs(std::nextafter(b, INFINITY) - b);
    if (!ok && ++bad <= 5)
      ADD_FAILURE() << what << ": element " << i << " is " << a << ", expected " << b;
  }
  EXPECT_EQ(bad, 0u) << what;
}

inline float f32(double x) { return static_cast<float>(x); }

}  // namespace schema_test
