// Helpers for GPU tests of dense layers through the public C API: a context (device 0 unless
// told) that owns its device buffers, a quantized + packed layer (random, or from a given f32
// weight) with its host-dequantized weight, random activations, the f64 host reference and the
// relative Frobenius error against it.
// Header-only; include from tests/gpu/*.cpp (each test file is its own translation unit).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "humming.h"
#include "support/last_error.hpp"

namespace hm::gpu_test {

// Relative Frobenius error bounds against the f64 reference on the dequantized weight: the
// weight rounded to the activation type after scaling (f16: 2^-11, bf16: 2^-8) plus the output
// rounding.
constexpr double kF16Bound = 2e-3;
constexpr double kBf16Bound = 1.5e-2;

using ::hm::test::last_error;

// Device buffers allocated through one context (not owned): upload() allocations are freed by
// free_all() or the destructor. Not thread-safe: one per thread (several may share a context).
struct Buffers {
  hm_context_t* ctx = nullptr;
  std::vector<uint64_t> owned;
  explicit Buffers(hm_context_t* context = nullptr) : ctx(context) {}
  ~Buffers() { free_all(); }
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;
  uint64_t alloc(size_t bytes) {
    uint64_t p = 0;
    EXPECT_EQ(hm_device_alloc(ctx, bytes, &p), HM_SUCCESS) << last_error();
    if (p) owned.push_back(p);
    return p;
  }
  uint64_t upload(const void* data, size_t bytes) {
    if (bytes == 0) return 0;
    const uint64_t p = alloc(bytes);
    EXPECT_EQ(hm_copy_to_device(ctx, p, data, bytes), HM_SUCCESS) << last_error();
    return p;
  }
  // `bytes` of 0xFF: NaN in f16 and bf16, so an output element the kernel never wrote shows.
  uint64_t poisoned(size_t bytes) { return upload(std::vector<uint8_t>(bytes, 0xFF).data(), bytes); }
  uint64_t zeroed(size_t bytes) { return upload(std::vector<uint8_t>(bytes, 0).data(), bytes); }
  void free_all() {
    for (uint64_t p : owned) hm_device_free(ctx, p);
    owned.clear();
  }
};

// A context on `device` (with an optional cache directory and HM_CONTEXT_* flags) and the
// buffers allocated through it; the buffers are freed before the context is destroyed.
struct Gpu : Buffers {
  explicit Gpu(int32_t device = 0, const char* cache_dir = nullptr, uint32_t flags = 0) {
    hm_context_options_t o;
    hm_context_options_init(&o);
    o.device = device;
    o.cache_dir = cache_dir;
    o.flags = flags;
    EXPECT_EQ(hm_context_create(&o, &ctx), HM_SUCCESS)
        << "device " << device << ": " << last_error();
  }
  ~Gpu() {
    free_all();
    hm_context_destroy(ctx);
  }
};

inline uint16_t encode16(hm_dtype_t d, double v, double* back) {
  uint32_t code = 0;
  hm_dtype_encode(d, v, &code);
  hm_dtype_decode(d, code, back);
  return static_cast<uint16_t>(code);
}

// One layer: its format, the dequantized weight the reference uses and the packed buffers.
struct Layer {
  hm_format_t* format = nullptr;
  int64_t n = 0, k = 0;
  int32_t experts = 1;                    // MoE formats: deq, bias and the buffers hold [E][...]
  hm_dtype_t act = 0, out = 0;
  int32_t has_bias = 0;
  int32_t act_group_k = 0;                // activation scales per token (0) or token x K group
  std::vector<float> deq;                 // [n][k] dequantized weight (host)
  std::vector<uint8_t> w, scales, zeros;  // packed
  std::vector<float> global;
  std::vector<uint16_t> bias_codes;
  std::vector<double> bias;
  Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;
  Layer(Layer&& o) noexcept { *this = std::move(o); }
  Layer& operator=(Layer&& o) noexcept {
    std::swap(format, o.format);
    n = o.n, k = o.k, experts = o.experts, act = o.act, out = o.out, has_bias = o.has_bias;
    act_group_k = o.act_group_k;
    deq = std::move(o.deq), w = std::move(o.w), scales = std::move(o.scales);
    zeros = std::move(o.zeros), global = std::move(o.global);
    bias_codes = std::move(o.bias_codes), bias = std::move(o.bias);
    return *this;
  }
  ~Layer() { hm_format_destroy(format); }
};

// A layer with its format parsed and its shape and dtypes read; nothing quantized yet.
inline Layer parse_layer(const std::string& text) {
  Layer L;
  EXPECT_EQ(hm_format_parse(text.c_str(), &L.format), HM_SUCCESS) << last_error();
  hm_format_get_shape(L.format, &L.n, &L.k, &L.experts);
  hm_format_get_dtype(L.format, HM_ROLE_ACTIVATION, &L.act);
  hm_format_get_dtype(L.format, HM_ROLE_OUTPUT, &L.out);
  hm_format_get_bias(L.format, &L.has_bias);
  hm_format_get_activation_groups(L.format, &L.act_group_k);
  return L;
}

// Dequantizes the canonical weight `q` of L's format into L.deq and packs it into L's buffers.
inline void pack_canonical(Layer& L, const hm_canonical_weight_t& q) {
  L.deq.resize(static_cast<size_t>(L.experts * L.n * L.k));
  EXPECT_EQ(hm_dequantize(L.format, &q, L.deq.data()), HM_SUCCESS) << last_error();
  hm_packed_sizes_t ps;
  hm_packed_sizes_init(&ps);
  EXPECT_EQ(hm_format_packed_sizes(L.format, &ps), HM_SUCCESS) << last_error();
  L.w.resize(ps.weight);
  L.scales.resize(ps.scales);
  L.zeros.resize(ps.zero_points);
  L.global.resize(ps.global_scale / 4);
  hm_packed_weight_t pw;
  hm_packed_weight_init(&pw);
  pw.weight = L.w.data();
  pw.scales = ps.scales ? L.scales.data() : nullptr;
  pw.zero_points = ps.zero_points ? L.zeros.data() : nullptr;
  pw.global_scale = ps.global_scale ? L.global.data() : nullptr;
  EXPECT_EQ(hm_pack(L.format, &q, &pw), HM_SUCCESS) << last_error();
}

// Quantizes the [n][k] f32 weight `w` into L (its dequantized copy and packed buffers).
inline void quantize_into(Layer& L, const std::vector<float>& w) {
  EXPECT_EQ(w.size(), static_cast<size_t>(L.experts * L.n * L.k)) << "weight size";
  hm_canonical_sizes_t cs;
  hm_canonical_sizes_init(&cs);
  EXPECT_EQ(hm_format_canonical_sizes(L.format, &cs), HM_SUCCESS) << last_error();
  std::vector<uint8_t> codes(cs.codes);
  std::vector<float> scales(cs.scales), zps(cs.zero_points), global(cs.global_scale);
  hm_canonical_weight_t q;
  hm_canonical_weight_init(&q);
  q.codes = codes.data();
  q.scales = cs.scales ? scales.data() : nullptr;
  q.zero_points = cs.zero_points ? zps.data() : nullptr;
  q.global_scale = cs.global_scale ? global.data() : nullptr;
  EXPECT_EQ(hm_quantize(L.format, w.data(), HM_DTYPE_F32, &q), HM_SUCCESS) << last_error();
  pack_canonical(L, q);
}

// The layer of `text` quantized from the given [n][k] f32 weight (a format with a bias gets none
// here: use make_layer).
inline Layer quantize_layer(const std::string& text, const std::vector<float>& w) {
  Layer L = parse_layer(text);
  EXPECT_EQ(L.has_bias, 0) << "quantize_layer does not make biases: " << text;
  quantize_into(L, w);
  return L;
}

// Quantizes a random N(0, 0.05) weight for `text` (bias N(0, 0.5) when the format has one).
inline Layer make_layer(const std::string& text, std::mt19937& rng) {
  Layer L = parse_layer(text);
  {
    std::normal_distribution<float> normal(0.0f, 0.05f);
    std::vector<float> w(static_cast<size_t>(L.experts * L.n * L.k));
    for (auto& x : w) x = normal(rng);
    quantize_into(L, w);
  }
  if (L.has_bias) {
    std::normal_distribution<float> normal(0.0f, 0.5f);
    L.bias.resize(L.experts * L.n);
    L.bias_codes.resize(L.bias.size());
    for (size_t i = 0; i < L.bias.size(); ++i) L.bias_codes[i] = encode16(L.out, normal(rng), &L.bias[i]);
  }
  return L;
}

// A layer whose canonical codes (and integer zero points) are drawn uniformly from [lo, hi],
// with power-of-two scales (2^-2 .. 2^0), a global scale of 0.5 and a bias of 1 where the
// format has them: chosen so that every product and sum of an exact-arithmetic test is exact.
inline Layer exact_layer(const std::string& text, std::mt19937& rng, int lo, int hi) {
  Layer L = parse_layer(text);
  hm_canonical_sizes_t cs;
  hm_canonical_sizes_init(&cs);
  EXPECT_EQ(hm_format_canonical_sizes(L.format, &cs), HM_SUCCESS) << last_error();
  std::vector<uint8_t> codes(cs.codes);
  std::vector<float> scales(cs.scales), zeros(cs.zero_points), global(cs.global_scale, 0.5f);
  std::uniform_int_distribution<int> code(lo, hi), pow(-2, 0);
  for (auto& c : codes) c = static_cast<uint8_t>(code(rng));
  for (auto& v : scales) v = std::ldexp(1.0f, pow(rng));
  for (auto& z : zeros) z = static_cast<float>(code(rng));
  hm_canonical_weight_t q;
  hm_canonical_weight_init(&q);
  q.codes = codes.data();
  q.scales = cs.scales ? scales.data() : nullptr;
  q.zero_points = cs.zero_points ? zeros.data() : nullptr;
  q.global_scale = cs.global_scale ? global.data() : nullptr;
  pack_canonical(L, q);
  if (L.has_bias) {
    L.bias.resize(static_cast<size_t>(L.experts * L.n));
    L.bias_codes.resize(L.bias.size());
    for (size_t i = 0; i < L.bias.size(); ++i) L.bias_codes[i] = encode16(L.out, 1.0, &L.bias[i]);
  }
  return L;
}

// The checkpoint tensor `name` (safetensors `dtype`, `shape`) over `bytes` bytes at `data`, for
// hm_convert_layer; the data stays the caller's.
inline hm_checkpoint_tensor_t checkpoint_tensor(const char* name, const char* dtype,
                                                std::initializer_list<int64_t> shape,
                                                const void* data, uint64_t bytes) {
  hm_checkpoint_tensor_t t;
  hm_checkpoint_tensor_init(&t);
  t.name = name;
  t.dtype = dtype;
  t.ndim = 0;
  for (int64_t d : shape) t.shape[t.ndim++] = d;
  t.data = data;
  t.bytes = bytes;
  return t;
}
// The same over a whole vector.
template <typename T>
hm_checkpoint_tensor_t checkpoint_tensor(const char* name, const char* dtype,
                                         std::initializer_list<int64_t> shape,
                                         const std::vector<T>& data) {
  return checkpoint_tensor(name, dtype, shape, data.data(), data.size() * sizeof(T));
}

// The layer a conversion made (hm_convert_layer, hm_converted_layer_stack): its format (text in
// *text, for messages), its canonical weight dequantized and packed, and its bias, if any, in
// the output dtype. Fatal gtest failures when the library refuses a query (wrap the call in
// ASSERT_NO_FATAL_FAILURE).
inline void converted_layer(const hm_converted_layer_t* converted, Layer* L, std::string* text) {
  hm_format_t* format = nullptr;
  ASSERT_EQ(hm_converted_layer_format(converted, &format), HM_SUCCESS) << last_error();
  char buf[256];
  ASSERT_EQ(hm_format_to_string(format, buf, sizeof buf, nullptr), HM_SUCCESS);
  hm_format_destroy(format);
  *text = buf;
  *L = parse_layer(buf);
  hm_converted_layer_info_t info;
  hm_converted_layer_info_init(&info);
  ASSERT_EQ(hm_converted_layer_info(converted, &info), HM_SUCCESS) << last_error();
  pack_canonical(*L, info.weight);
  if (L->has_bias) {
    ASSERT_NE(info.bias, nullptr) << buf;
    L->bias.resize(static_cast<size_t>(L->experts * L->n));
    L->bias_codes.resize(L->bias.size());
    for (size_t i = 0; i < L->bias.size(); ++i)
      L->bias_codes[i] = encode16(L->out, info.bias[i], &L->bias[i]);
  }
}

// Whether the context's device is sm_90 (the wgmma kernel's target).
inline bool device_has_wgmma(const Buffers& gpu) {
  hm_device_info_t info;
  hm_device_info_init(&info);
  return hm_context_device_info(gpu.ctx, &info) == HM_SUCCESS && info.cc_major == 9 &&
         info.cc_minor == 0;
}

// The layer's weight-side buffers on the device, set into launch params by set_weights().
struct DeviceWeights {
  uint64_t w = 0, scales = 0, zeros = 0, global = 0, bias = 0;
};

inline DeviceWeights upload_weights(Buffers& gpu, const Layer& L) {
  DeviceWeights d;
  d.w = gpu.upload(L.w.data(), L.w.size());
  d.scales = gpu.upload(L.scales.data(), L.scales.size());
  d.zeros = gpu.upload(L.zeros.data(), L.zeros.size());
  d.global = gpu.upload(L.global.data(), L.global.size() * 4);
  if (L.has_bias) d.bias = gpu.upload(L.bias_codes.data(), L.bias_codes.size() * 2);
  return d;
}

inline void set_weights(hm_launch_params_t* p, const DeviceWeights& d) {
  hm_launch_params_set_pointer(p, HM_ARG_B, d.w);
  hm_launch_params_set_pointer(p, HM_ARG_SCALES, d.scales);
  hm_launch_params_set_pointer(p, HM_ARG_ZEROS, d.zeros);
  hm_launch_params_set_pointer(p, HM_ARG_GLOBAL, d.global);
  hm_launch_params_set_pointer(p, HM_ARG_BIAS, d.bias);
}

// Launch params for one call shape: weights, A, C, M and a workspace. The caller destroys them.
inline hm_launch_params_t* params_for(const DeviceWeights& w, uint64_t a, uint64_t c, int64_t m,
                                      uint64_t ws, uint64_t ws_bytes) {
  hm_launch_params_t* p = nullptr;
  EXPECT_EQ(hm_launch_params_create(&p), HM_SUCCESS);
  set_weights(p, w);
  hm_launch_params_set_pointer(p, HM_ARG_A, a);
  hm_launch_params_set_pointer(p, HM_ARG_C, c);
  hm_launch_params_set_pointer(p, HM_ARG_WORKSPACE, ws);
  hm_launch_params_set_int(p, HM_ARG_WORKSPACE_BYTES, static_cast<int64_t>(ws_bytes));
  hm_launch_params_set_int(p, HM_ARG_M, m);
  return p;
}

// m x k random N(0, 1) activations: their codes (for the device) and exact values (reference).
struct Activations {
  std::vector<uint16_t> codes;
  std::vector<double> values;
};

inline Activations random_activations(const Layer& L, int64_t m, std::mt19937& rng) {
  Activations a;
  a.codes.resize(static_cast<size_t>(m * L.k));
  a.values.resize(a.codes.size());
  std::normal_distribution<double> normal;
  for (size_t i = 0; i < a.codes.size(); ++i) a.codes[i] = encode16(L.act, normal(rng), &a.values[i]);
  return a;
}

// 8-bit activations of m tokens: codes (one byte each), f32 scales ([m], or [m][groups] with
// activation groups) and the exact values code * scale in f64.
struct Activations8 {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  std::vector<double> values;
};

// Activation scales per row: 1, or ceil(k / group_k) with activation groups.
inline int64_t act_groups(const Layer& L) {
  return L.act_group_k > 0 ? (L.k + L.act_group_k - 1) / L.act_group_k : 1;
}

// The value of each of the 256 codes of `dtype`.
inline std::vector<double> code_values(hm_dtype_t dtype) {
  std::vector<double> v(256);
  for (uint32_t c = 0; c < 256; ++c) hm_dtype_decode(dtype, c, &v[c]);
  return v;
}

inline void fill_values(Activations8& a, const Layer& L, int64_t m) {
  const std::vector<double> table = code_values(L.act);
  const int64_t k = L.k, groups = act_groups(L);
  a.values.resize(static_cast<size_t>(m * k));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < k; ++j) {
      const int64_t g = L.act_group_k > 0 ? j / L.act_group_k : 0;
      a.values[i * k + j] = table[a.codes[i * k + j]] * static_cast<double>(a.scales[i * groups + g]);
    }
}

// Random N(0, 1) rows quantized per token by the library's host quantizer (the rule the GPU
// quantizer follows bit for bit).
inline Activations8 quantized_activations(const Layer& L, int64_t m, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(m * L.k));
  for (auto& v : x) v = normal(rng);
  Activations8 a;
  a.codes.resize(x.size());
  a.scales.resize(static_cast<size_t>(m * act_groups(L)));
  EXPECT_EQ(hm_quantize_activation(L.act, x.data(), m, L.k, L.act_group_k, a.codes.data(),
                                   a.scales.data()),
            HM_SUCCESS)
      << last_error();
  fill_values(a, L, m);
  return a;
}

// f64 reference C[m][n] = A[m][k] * deq[n][k]^T (+ bias), split over the host's cores by
// columns (the large shapes would otherwise dominate the test's time).
inline std::vector<double> reference(const Layer& L, const std::vector<double>& a, int64_t m) {
  std::vector<double> ref(static_cast<size_t>(m * L.n));
  const int64_t threads =
      std::max<int64_t>(1, std::min<int64_t>(std::thread::hardware_concurrency(), L.n));
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int64_t j = t; j < L.n; j += threads) {
        const float* w = &L.deq[static_cast<size_t>(j * L.k)];
        for (int64_t i = 0; i < m; ++i) {
          const double* x = &a[static_cast<size_t>(i * L.k)];
          double s = L.has_bias ? L.bias[j] : 0.0;
          for (int64_t l = 0; l < L.k; ++l) s += x[l] * w[l];
          ref[static_cast<size_t>(i * L.n + j)] = s;
        }
      }
    });
  for (auto& th : pool) th.join();
  return ref;
}

// Relative Frobenius error of output codes against the reference; 1e9 if any is not finite.
inline double relative_error(const Layer& L, const std::vector<uint16_t>& out,
                             const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double got = 0;
    hm_dtype_decode(L.out, out[i], &got);
    if (!std::isfinite(got)) return 1e9;
    num += (got - ref[i]) * (got - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// Copies m x n output codes back from `c`.
inline std::vector<uint16_t> download(Buffers& gpu, const Layer& L, uint64_t c, int64_t m) {
  std::vector<uint16_t> out(static_cast<size_t>(m * L.n));
  EXPECT_EQ(hm_copy_to_host(gpu.ctx, out.data(), c, out.size() * 2), HM_SUCCESS) << last_error();
  return out;
}

}  // namespace hm::gpu_test
