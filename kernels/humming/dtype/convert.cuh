// Scalar and paired conversions the GEMM templates need: decoding small-float scale codes, and
// arithmetic on packed pairs of 16-bit floats held in a uint32 (what an MMA register is).
#pragma once

#include <humming/core/types.cuh>

namespace hm {

// 2^e as an f32 for -126 <= e <= 127.
__device__ __forceinline__ float exp2i(int e) { return __int_as_float((e + 127) << 23); }

// Exact value of a small float code: kExp exponent bits, kMan mantissa bits, IEEE-style bias
// 2^(kExp-1) - 1 (ue8m0: bias 127, no sign, no mantissa). Finite codes only (scales are finite).
template <int kExp, int kMan, bool kSigned>
__device__ __forceinline__ float decode_small_float(uint32 code) {
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  const uint32 e = (code >> kMan) & ((1u << kExp) - 1u);
  const uint32 m = code & ((1u << kMan) - 1u);
  float magnitude;
  if (e == 0) {
    // Subnormal: m * 2^(1 - bias - kMan); split the power so tiny exponents stay representable.
    magnitude = static_cast<float>(m) * exp2i(1 - kBias) * exp2i(-kMan);
  } else {
    magnitude = static_cast<float>(m + (1u << kMan)) * exp2i(static_cast<int>(e) - kBias - kMan);
  }
  if (kSigned && ((code >> (kExp + kMan)) & 1u)) magnitude = -magnitude;
  return magnitude;
}

// ue8m0 (MX scale): 2^(code - 127); code 0 is 2^-127 (an f32 subnormal).
__device__ __forceinline__ float decode_ue8m0(uint32 code) {
  return code == 0 ? exp2i(-126) * 0.5f : exp2i(static_cast<int>(code) - 127);
}

// ---- pairs of 16-bit floats in one register --------------------------------------------------

template <typename T>
struct Pair;

template <>
struct Pair<f16> {
  static __device__ __forceinline__ uint32 fma(uint32 a, uint32 b, uint32 c) {
    uint32 d;
    asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
  }
  static __device__ __forceinline__ uint32 mul(uint32 a, uint32 b) {
    uint32 d;
    asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
    return d;
  }
  static __device__ __forceinline__ uint32 sub(uint32 a, uint32 b) {
    uint32 d;
    asm("sub.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
    return d;
  }
};

// bf16x2 arithmetic is fma only before sm90: a*b is fma(a, b, -0), a-b is fma(b, -1, a).
template <>
struct Pair<bf16> {
  static __device__ __forceinline__ uint32 fma(uint32 a, uint32 b, uint32 c) {
    uint32 d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
  }
  static __device__ __forceinline__ uint32 mul(uint32 a, uint32 b) {
    return fma(a, b, 0x80008000u);
  }
  static __device__ __forceinline__ uint32 sub(uint32 a, uint32 b) {
    return fma(b, 0xBF80BF80u, a);  // a + b * -1
  }
};

template <typename T>
__device__ __forceinline__ uint32 splat(T x) {
  return static_cast<uint32>(x.bits) | (static_cast<uint32>(x.bits) << 16);
}

template <typename T>
__device__ __forceinline__ uint32 pack_pair(float lo, float hi) {
  return static_cast<uint32>(from_float<T>(lo).bits) |
         (static_cast<uint32>(from_float<T>(hi).bits) << 16);
}

}  // namespace hm
