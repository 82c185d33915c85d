// GPU activation quantization (hm_quantize_activation_device): the kernel's runtime arguments and
// the per-element rule as plain host/device functions. The device kernel (activation_kernel.cuh),
// the host launcher (src/api/quant_device.cpp) and the mock driver's host emulation share this one
// definition; the host reference (src/quant/activation.cpp) computes the same numbers with its own
// code table, and tests/host/test_activation_rule.cpp checks the two encoders agree.
//
// The rule (docs/dtypes.md, "Activation quantization"), for one group of a row:
//   absmax = max |x| over the group, as f32 (f16 / bf16 inputs widen exactly);
//   a non-finite x in the group: scale = NaN (0x7FC00000) and every code of the group 0;
//   else scale = absmax / qmax, IEEE f32 division rounded to nearest even (qmax: 448 e4m3,
//     57344 e5m2, 127 int8), and 1.0f when that is 0 (all zeros, or an f32 underflow);
//   code = the dtype's code nearest to q = x / scale (again one IEEE f32 division), ties to the
//     even code, saturating at +-qmax.
// Everything is integer bit manipulation or IEEE-exact f32 division, so host and device agree bit
// for bit whatever the flush-to-zero settings (no input or intermediate is flushed).
#pragma once

#if defined(__CUDACC_RTC__)
#include <humming/core/types.cuh>
#else
#include <stdint.h>
#include <string.h>
#endif

#ifndef HM_HOST_DEVICE
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define HM_HOST_DEVICE __host__ __device__
#else
#define HM_HOST_DEVICE
#endif
#endif

namespace hm::actquant {

inline constexpr int kThreads = 1024;       // threads per block (one block per row at a time)
inline constexpr int kVector = 8;           // elements per thread-vector: one 16-byte load
inline constexpr int kVectorsPerThread = 2; // vectors a thread keeps in registers per pass
inline constexpr int kSpan = kThreads * kVector * kVectorsPerThread;  // elements per pass: 16384
inline constexpr int kMaxGroupsPerPass = kSpan / kVector;             // group_k >= 8
inline constexpr int64_t kMaxGridBlocks = 1 << 20;  // blocks stride over the rows beyond this

// The input and output dtypes, as template arguments of the kernel and codegen tags.
enum InDtype : int { kInF16 = 0, kInBf16 = 1 };
enum OutDtype : int { kOutE4m3 = 0, kOutE5m2 = 1, kOutInt8 = 2 };

// Flags of Params: which accesses may use vector instructions (decided on the host from the
// addresses and K; the kernel is correct either way).
inline constexpr uint32_t kVectorLoads = 1u;   // a 16-byte aligned, k % 8 == 0, no perm
inline constexpr uint32_t kVectorStores = 2u;  // codes 8-byte aligned, k % 8 == 0

// Passed by value as the kernel's only parameter; fixed-size fields, so host and device agree.
struct Params {
  const uint16_t* a;     // [m][k] f16 or bf16 bits
  const int32_t* perm;   // [k]: output column j reads input column perm[j]; null: identity
  uint8_t* codes;        // [m][k]
  float* scales;         // [m][groups]
  int64_t m, k;
  int64_t group_k;       // columns per scale: k for per-token scales, else a multiple of 8
  int64_t groups;        // scales per row: ceil(k / group_k)
  uint32_t flags;        // kVectorLoads | kVectorStores
  uint32_t reserved;
};

inline constexpr uint32_t kNanScaleBits = 0x7FC00000u;  // the scale of a non-finite group
inline constexpr uint32_t kInfBits = 0x7F800000u;       // |x| bits at or above: non-finite
inline constexpr uint32_t kAbsMask = 0x7FFFFFFFu;

HM_HOST_DEVICE inline uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
#endif
}

HM_HOST_DEVICE inline float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// IEEE f32 division, round to nearest even, never flushed: the one division of the rule.
HM_HOST_DEVICE inline float divide_rn(float x, float y) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(x, y);
#else
  return x / y;
#endif
}

// f16 / bf16 bits -> f32, exactly (subnormals, infinities and NaNs included).
HM_HOST_DEVICE inline float widen_bf16(uint16_t h) { return bits_float(uint32_t{h} << 16); }
HM_HOST_DEVICE inline float widen_f16(uint16_t h) {
#if defined(__CUDA_ARCH__)
  float out;
  asm("cvt.f32.f16 %0, %1;" : "=f"(out) : "h"(h));
  return out;
#else
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  uint32_t exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
  if (exponent == 0x1F) return bits_float(sign | 0x7F800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0) return bits_float(sign);
    exponent = 1;  // subnormal: normalize
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    mantissa &= 0x3FFu;
  }
  return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
#endif
}

template <int In>
HM_HOST_DEVICE inline float widen(uint16_t h) {
  return In == kInF16 ? widen_f16(h) : widen_bf16(h);
}

// The largest magnitude of the output dtype: the divisor of the scale.
template <int Out>
HM_HOST_DEVICE constexpr float max_value() {
  return Out == kOutE4m3 ? 448.0f : Out == kOutE5m2 ? 57344.0f : 127.0f;
}

// Shifts the non-negative `value` right by `shift` (1..31) bits, rounding to nearest even.
HM_HOST_DEVICE inline uint32_t shift_right_rne(uint32_t value, int shift) {
  const uint32_t kept = value >> shift;
  const uint32_t rest = value & ((1u << shift) - 1u), half = 1u << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
}

// Round to nearest even of the f32 `q` to a signed float with M mantissa bits and exponent bias
// B (e4m3fn: 3, 7; e5m2: 2, 15), saturating at the magnitude code `max_code` (0x7E, 0x7B). q may
// be any non-NaN f32, subnormal or infinite (an infinity saturates).
template <int M, int B>
HM_HOST_DEVICE inline uint32_t encode_float8(float q, uint32_t max_code) {
  const uint32_t u = float_bits(q);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & kAbsMask;
  const int e = static_cast<int>(a >> 23);  // biased f32 exponent; 0: f32 subnormal
  uint32_t magnitude;
  if (e >= 128 - B) {
    // A normal value of the dtype: drop 23 - M mantissa bits; a carry moves into the exponent.
    magnitude = shift_right_rne(a, 23 - M) - (static_cast<uint32_t>(127 - B) << M);
  } else {
    // Below the dtype's smallest normal 2^(1-B): the code is round(|q| * 2^(B - 1 + M)), an
    // integer 0..2^M (2^M is the smallest normal's code). |q| = sig * 2^(max(e,1) - 150).
    const uint32_t sig = (a & 0x7FFFFFu) | (e != 0 ? 0x800000u : 0u);
    const int shift = 151 - B - M - (e != 0 ? e : 1);  // >= 24 - M
    magnitude = shift >= 25 ? 0u : shift_right_rne(sig, shift);  // sig < 2^24: < 0.5 beyond
  }
  return sign | (magnitude < max_code ? magnitude : max_code);
}

// Round to nearest even of q to int8 (two's complement code), saturating at -128 and 127.
HM_HOST_DEVICE inline uint32_t encode_int8(float q) {
  const float clamped = q < -128.0f ? -128.0f : q > 127.0f ? 127.0f : q;
  // Adding 1.5 * 2^23 leaves no fraction bits below 2^22: the addition rounds to nearest even.
#if defined(__CUDA_ARCH__)
  const float rounded = __fsub_rn(__fadd_rn(clamped, 12582912.0f), 12582912.0f);
#else
  const float rounded = (clamped + 12582912.0f) - 12582912.0f;
#endif
  return static_cast<uint32_t>(static_cast<int32_t>(rounded)) & 0xFFu;
}

template <int Out>
HM_HOST_DEVICE inline uint32_t encode(float q) {
  if (Out == kOutE4m3) return encode_float8<3, 7>(q, 0x7Eu);
  if (Out == kOutE5m2) return encode_float8<2, 15>(q, 0x7Bu);
  return encode_int8(q);
}

// The scale of a group from the bits of its absmax (|x| bits; >= kInfBits: non-finite).
template <int Out>
HM_HOST_DEVICE inline float group_scale(uint32_t absmax_bits) {
  if (absmax_bits >= kInfBits) return bits_float(kNanScaleBits);
  const float scale = divide_rn(bits_float(absmax_bits), max_value<Out>());
  return scale > 0.0f ? scale : 1.0f;
}

// The code of x in a group of scale `scale` (group_scale's answer).
template <int Out>
HM_HOST_DEVICE inline uint32_t quantize_element(float x, float scale) {
  if (!(scale == scale)) return 0u;  // a non-finite group: zero codes
  return encode<Out>(divide_rn(x, scale));
}

// Input column `column` of row `row` after the permutation, as f32; an out-of-range perm entry
// reads nothing and gives NaN, which makes its group non-finite (scale NaN).
template <int In>
HM_HOST_DEVICE inline float load_input(const Params& p, int64_t row, int64_t column) {
  int64_t source = column;
  if (p.perm != nullptr) {
    source = p.perm[column];
    if (source < 0 || source >= p.k) return bits_float(kNanScaleBits);
  }
  return widen<In>(p.a[row * p.k + source]);
}

// The whole computation for one row, element by element: the mock driver's host emulation (and
// a readable statement of what the kernel computes).
template <int In, int Out>
HM_HOST_DEVICE inline void quantize_row_reference(const Params& p, int64_t row) {
  for (int64_t g = 0; g < p.groups; ++g) {
    const int64_t c0 = g * p.group_k, c1 = c0 + p.group_k < p.k ? c0 + p.group_k : p.k;
    uint32_t absmax = 0;
    for (int64_t j = c0; j < c1; ++j) {
      const uint32_t bits = float_bits(load_input<In>(p, row, j)) & kAbsMask;
      absmax = bits > absmax ? bits : absmax;
    }
    const float scale = group_scale<Out>(absmax);
    p.scales[row * p.groups + g] = scale;
    for (int64_t j = c0; j < c1; ++j)
      p.codes[row * p.k + j] =
          static_cast<uint8_t>(quantize_element<Out>(load_input<In>(p, row, j), scale));
  }
}

}  // namespace hm::actquant
