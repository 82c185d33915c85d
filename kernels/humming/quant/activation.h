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
// for bit whatever the flush-to-zero settings (no input or intermediate is flushed). The kernel
// computes x / scale from the group's reciprocal (divide_by_scale below), which gives the same
// quotient for every input the rule can see (tests/jit/test_quantize_activation_compile.cpp).
#pragma once

#if defined(__CUDACC_RTC__)
#include <humming/core/types.cuh>
#else
#include <math.h>
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

// The kernel's geometry (activation_kernel.cuh). A *team* of `warps` warps quantizes one *pass*
// of a row at a time: `warps` x 32 lanes x `vectors` vectors of kVector elements, held in
// registers as 16-bit values. A block holds one or more teams; the host picks warps and vectors per
// call (src/api/quant_device.cpp) and the kernel derives the rest (plan_work).
inline constexpr int kMaxThreads = 1024;         // threads per block at most (launch bounds)
inline constexpr int kVector = 8;                // elements per lane-vector: one 16-byte load
inline constexpr int kMaxVectorsPerLane = 4;     // lane-vectors of a pass, in registers
inline constexpr int kMaxTeamWarps = 32;         // warps of a team
inline constexpr int kWarpRowSpan = 32 * kVector;  // elements of one vector across a warp: 256
inline constexpr int kMaxSpan = kMaxTeamWarps * kWarpRowSpan * kMaxVectorsPerLane;  // 32768
inline constexpr int kMaxTeamsPerBlock = 8;      // named barriers 1..8, one per team
inline constexpr int64_t kMaxGridBlocks = 1 << 20;  // blocks stride over the work beyond this

// The input and output dtypes, as template arguments of the kernel and codegen tags.
enum InDtype : int { kInF16 = 0, kInBf16 = 1 };
enum OutDtype : int { kOutE4m3 = 0, kOutE5m2 = 1, kOutInt8 = 2 };

// Flags of Params: which accesses may use vector instructions (decided on the host from the
// addresses and K; the kernel is correct either way).
inline constexpr uint32_t kVectorLoads = 1u;   // a 16-byte aligned, k % 8 == 0, no perm
inline constexpr uint32_t kVectorStores = 2u;  // codes 8-byte aligned, k % 8 == 0
// Per-token rows, each spread over the blocks of one thread-block cluster (sm_90+, with
// kVectorLoads and kVectorStores): block r of a row's cluster holds its lane-vectors
// r * vectors * blockDim.x .. (r + 1) * vectors * blockDim.x - 1, Params::vectors per thread,
// and the row's absmax meets in distributed shared memory (activation_kernel.cuh, cluster_row).
// Params::warps is unused then.
inline constexpr uint32_t kClusterRows = 4u;
inline constexpr int kMaxClusterRanks = 8;  // the portable cluster size

// Passed by value as the kernel's only parameter; fixed-size fields, so host and device agree.
struct Params {
  const uint16_t* a;     // [m][k] f16 or bf16 bits
  const int32_t* perm;   // [k]: output column j reads input column perm[j]; null: identity
  uint8_t* codes;        // [m][k]
  float* scales;         // [m][groups]
  int64_t m, k;          // k < 2^31 (the launcher checks)
  int64_t group_k;       // columns per scale: k for per-token scales, else a multiple of 8
  int64_t groups;        // scales per row: ceil(k / group_k)
  uint32_t flags;        // kVectorLoads | kVectorStores | kClusterRows
  uint16_t warps;        // warps of a team, 1..kMaxTeamWarps (blockDim.x: a multiple of 32 x warps)
  uint16_t vectors;      // lane-vectors of a pass, 1..kMaxVectorsPerLane
};

// How a team finds a group's absmax, from group_k (plan_work).
enum Reduction : int {
  // group_k a power of two <= 256 and more than one group: a group is 1..32 adjacent lanes of one
  // lane-vector, reduced with xor shuffles; a unit of work is one pass of a row.
  kLaneGroups = 0,
  // any other group (per-token rows included): a unit of work is one group of a row, reduced
  // over the team (shuffles, then one named barrier). A group longer than a pass is read twice.
  kTeamGroups = 1,
};

struct WorkPlan {
  Reduction reduction;
  int64_t span;           // elements of one pass: warps x 256 x vectors
  int64_t units_per_row;  // kLaneGroups: passes of a row; kTeamGroups: groups of a row
};

HM_HOST_DEVICE inline WorkPlan plan_work(const Params& p) {
  WorkPlan plan;
  plan.span = int64_t{p.warps} * kWarpRowSpan * p.vectors;
  const bool lanes =
      p.groups > 1 && p.group_k <= kWarpRowSpan && (p.group_k & (p.group_k - 1)) == 0;
  plan.reduction = lanes ? kLaneGroups : kTeamGroups;
  // k < 2^31 (the launcher refuses more): a 32-bit division (a 64-bit one is a ~70-instruction
  // subroutine, on the kernel's critical path at small M).
  const uint32_t k32 = static_cast<uint32_t>(p.k), span32 = static_cast<uint32_t>(plan.span);
  plan.units_per_row = lanes ? int64_t{(k32 + span32 - 1) / span32} : p.groups;
  return plan;
}

// Dynamic shared memory of a block of `threads` threads: without kVectorLoads, each team gathers
// a pass (its span of 16-bit values) there before taking it into registers.
HM_HOST_DEVICE inline int64_t staging_bytes(const Params& p, int threads) {
  return (p.flags & kVectorLoads) ? 0 : int64_t{threads} * kVector * p.vectors * 2;
}

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

// ---- The kernel's arithmetic: the rule's two divisions without a division instruction.
//
// div.rn.f32 and rcp.rn.f32 are instruction sequences with a subroutine for the hard cases, which
// costs the kernel registers at every call site. The kernel computes the same numbers from
// reciprocals and FMAs, exact for every value the rule can see because the inputs are 16-bit:
//   scale = absmax / qmax: q = RN(a * RN(1/qmax)), r = a - q * qmax (one FMA, exact), and
//     RN(q + r * RN(1/qmax)) is the IEEE quotient for every f16 and bf16 absmax;
//   y = RN(1 / s'): one Newton step, y0 + y0 * (1 - s' * y0), from any y0 within 4 ulps of
//     1 / s' (rcp.approx is within 1) gives it for every scale s';
//   q = x / scale: with the same three steps on |x| and y, then x's sign, for every 16-bit x with
//     |x| <= absmax. Scales below kReciprocalMinScale (bf16 groups of tiny values) first
//     multiply x and the scale by kTinyScaleFactor (exact: x stays below 2^32), so s' >= 2^-80.
// tests/jit/test_quantize_activation_compile.cpp checks all three against the rule (the scales
// and reciprocals for every absmax; the codes for every f16 pair and a sample of bf16 pairs; the
// full bf16 sweep, run once, found no difference).
inline constexpr float kReciprocalMinScale = 0x1p-80f;
inline constexpr float kTinyScaleFactor = 0x1p96f;

HM_HOST_DEVICE inline float multiply_rn(float x, float y) {
#if defined(__CUDA_ARCH__)
  float out;
  asm("mul.rn.f32 %0, %1, %2;" : "=f"(out) : "f"(x), "f"(y));  // never flushed, never fused
  return out;
#else
  return x * y;
#endif
}

HM_HOST_DEVICE inline float fma_rn(float x, float y, float z) {
#if defined(__CUDA_ARCH__)
  float out;
  asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(out) : "f"(x), "f"(y), "f"(z));
  return out;
#else
  return fmaf(x, y, z);
#endif
}

// RN(1 / s) for a normal s whose reciprocal is normal, from the hardware approximation.
HM_HOST_DEVICE inline float reciprocal_rn(float s) {
#if defined(__CUDA_ARCH__)
  float y0;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y0) : "f"(s));
#else
  const float y0 = 1.0f / s;
#endif
  return fma_rn(y0, fma_rn(-s, y0, 1.0f), y0);
}

// group_scale without the division.
template <int Out>
HM_HOST_DEVICE inline float group_scale_by_reciprocal(uint32_t absmax_bits) {
  if (absmax_bits >= kInfBits) return bits_float(kNanScaleBits);
  constexpr float kMax = max_value<Out>(), kInverse = 1.0f / max_value<Out>();
  const float a = bits_float(absmax_bits);
  const float q = multiply_rn(a, kInverse);
  const float scale = fma_rn(fma_rn(-q, kMax, a), kInverse, q);
  return scale > 0.0f ? scale : 1.0f;
}

// A group's divisor: the scale (times `factor`) and its reciprocal.
struct ScaleDivisor {
  float scale;    // the group's scale (NaN: a non-finite group, zero codes)
  float divisor;  // scale * factor
  float inverse;  // RN(1 / divisor)
  float factor;   // 1, or kTinyScaleFactor below kReciprocalMinScale
};

HM_HOST_DEVICE inline ScaleDivisor divisor_of(float scale) {
  ScaleDivisor d;
  d.scale = scale;
  d.factor = scale < kReciprocalMinScale ? kTinyScaleFactor : 1.0f;
  d.divisor = scale * d.factor;
  d.inverse = reciprocal_rn(d.divisor);
  return d;
}

// RN(x / d.scale), the rule's q, for a finite scale.
HM_HOST_DEVICE inline float divide_by_scale(float x, const ScaleDivisor& d) {
  const float a = bits_float(float_bits(multiply_rn(x, d.factor)) & kAbsMask);
  const float q = multiply_rn(a, d.inverse);
  const float magnitude = fma_rn(fma_rn(-q, d.divisor, a), d.inverse, q);
  return bits_float(float_bits(magnitude) | (float_bits(x) & ~kAbsMask));
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
