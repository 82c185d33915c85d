// Storage types and scalar conversions for device code. Humming's kernels include no CUDA toolkit
// headers (cuda_fp16.h alone costs NVRTC a large part of a one-second compile budget), so 16-bit
// floats are plain bit containers here and conversions are a few instructions of our own.
#pragma once

#if defined(__CUDACC_RTC__)
// NVRTC compiles without the C library headers: the fixed-width integers the shared host/device
// headers use (humming/layout/spec.h) are defined here, as <stdint.h> would on our targets.
typedef unsigned int uint32_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
typedef unsigned short uint16_t;
typedef unsigned char uint8_t;
#endif

namespace hm {

using int64 = long long;
using uint32 = unsigned int;
using uint16 = unsigned short;

// A when kFirst, else B: std::conditional_t without the standard library (NVRTC has none).
template <bool kFirst, class A, class B>
struct SelectType {
  using Type = A;
};
template <class A, class B>
struct SelectType<false, A, B> {
  using Type = B;
};
template <bool kFirst, class A, class B>
using Select = typename SelectType<kFirst, A, B>::Type;

struct f16 {
  uint16 bits;
};
struct bf16 {
  uint16 bits;
};
// 8-bit float activations (OCP e4m3fn, e5m2): what the kernels' 8-bit Configs name as Act.
struct e4m3 {
  unsigned char bits;
};
struct e5m2 {
  unsigned char bits;
};
// 8-bit integer activations (two's complement codes): what the kernels' int8 Configs name as Act.
struct s8 {
  unsigned char bits;
};

__device__ __forceinline__ float to_float(float x) { return x; }

__device__ __forceinline__ float to_float(f16 x) {
  float out;
  asm("cvt.f32.f16 %0, %1;" : "=f"(out) : "h"(x.bits));
  return out;
}

__device__ __forceinline__ float to_float(bf16 x) {
  return __uint_as_float(static_cast<uint32>(x.bits) << 16);
}

template <typename T>
__device__ __forceinline__ T from_float(float x);

template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}

template <>
__device__ __forceinline__ f16 from_float<f16>(float x) {
  f16 out;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(out.bits) : "f"(x));
  return out;
}

// Round-to-nearest-even by integer arithmetic: works on every arch (the bf16 cvt needs sm80).
template <>
__device__ __forceinline__ bf16 from_float<bf16>(float x) {
  uint32 u = __float_as_uint(x);
  bf16 out;
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    out.bits = static_cast<uint16>((u >> 16) | 0x40u);  // quiet NaN, sign kept
  } else {
    u += 0x7fffu + ((u >> 16) & 1u);
    out.bits = static_cast<uint16>(u >> 16);
  }
  return out;
}

}  // namespace hm
