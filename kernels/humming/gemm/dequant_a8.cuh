// Dequantization of weight registers into 8-bit float activation codes (e4m3 or e5m2), for the
// wgmma kernel with 8-bit activations: a register of the 8-bit layout (docs/layout.md, a = 8)
// holds four weights of one row, four consecutive k, each field's code in its low bits; it
// becomes four codes of the activation's type, the m64nNk32 A fragment as it stands.
//
// Only exact conversions are allowed (support rules R8, R9), so the MMA sees the weights
// themselves, up to one power of two that the conversion leaves (kFactorExp, applied by the
// epilogue with the per-token activation scale):
//  - float weights (eXmY with X, Y no wider than the activation's): the sign moves to bit 7 and
//    exponent + mantissa sit under the activation's, mantissa bits aligned, so a field reads as
//    w * 2^(bias_w - bias_act) for normals and subnormals alike; an 8-bit weight of the
//    activation's own type needs nothing;
//  - integers (value q - implicit zero point, |value| <= 2^(m+1) for m activation mantissa bits):
//    through f16 pairs with the magic number 1024 (exact), then cvt to the 8-bit type (exact for
//    these small integers).
// Scales are channel or tensor scales only (the epilogue applies them in f32); group scales and
// zero points on 8-bit activations are not implemented yet (the family's gap says so).
#pragma once

#include <humming/core/types.cuh>
#include <humming/dtype/convert.cuh>
#include <humming/layout/spec.h>
#include <humming/ptx/mma.cuh>

namespace hm::gemm {

template <class C>
struct DequantA8 {
  static constexpr int kBits = C::kWeightBits;
  static constexpr int kActBits = 8;
  static constexpr int kActMan = C::kActManBits;
  static constexpr int kActBias = (1 << (C::kActExpBits - 1)) - 1;
  static_assert(C::kActExpBits + kActMan == 7, "e4m3 or e5m2");
  // The power of two the conversion leaves in every weight (epilogue: C *= 2^kFactorExp).
  static constexpr int kFactorExp = C::kWeightIsFloat ? kActBias - C::kWeightBias : 0;
  // Registers per 64-wide chunk: 2 atoms of m16n8k32, 4 registers each.
  static constexpr int kChunkRegisters = quant::registers_per_chunk(kActBits);
  static_assert(kChunkRegisters == 8, "the 8-bit layout");

  // Two f16 values of the fields in bytes kLo and kLo + 1 of x: 1024 + q each (0x64 over the
  // byte is the f16 exponent of 1024; q < 2^8 fits its mantissa).
  template <int kLo>
  static __device__ __forceinline__ uint32 magic_pair(uint32 x) {
    constexpr uint32 kSelector = kLo == 0 ? 0x4140u : 0x4342u;  // [x.b, 0x64, x.b+1, 0x64]
    return __byte_perm(x, 0x64u, kSelector);
  }
  // Two exact small f16 values -> two 8-bit codes (low half -> low byte).
  static __device__ __forceinline__ uint32 to_act_pair(uint32 h2) {
    unsigned short d;
    if constexpr (C::kActExpBits == 4)
      asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;\n" : "=h"(d) : "r"(h2));
    else
      asm("cvt.rn.satfinite.e5m2x2.f16x2 %0, %1;\n" : "=h"(d) : "r"(h2));
    return d;
  }

  // Register kReg (0..7) of one chunk, from a lane's kBits stored words.
  template <int kReg>
  static __device__ __forceinline__ uint32 fragment(const uint32 (&words)[kBits]) {
    const uint32 x = quant::extract_register_fixed<kBits, kActBits, kReg>(words);
    if constexpr (C::kWeightIsFloat) {
      if constexpr (kBits == 8 && C::kWeightManBits == kActMan) {
        return x;  // the activation's own type
      } else {
        constexpr uint32 kMagMask = quant::replicate(quant::low_bits(kBits - 1), 8);
        const uint32 sign = (x << (8 - kBits)) & 0x80808080u;
        return sign | ((x & kMagMask) << (kActMan - C::kWeightManBits));
      }
    } else {
      constexpr uint32 kMagicZero = 0x6400u + C::kImplicitZeroPoint;  // 1024 + zp as f16 bits
      constexpr uint32 kOffset = kMagicZero | (kMagicZero << 16);
      const uint32 lo = to_act_pair(Pair<f16>::sub(magic_pair<0>(x), kOffset));
      const uint32 hi = to_act_pair(Pair<f16>::sub(magic_pair<2>(x), kOffset));
      return lo | (hi << 16);
    }
  }

  // The 16 A registers of one 128-wide K step (two chunks, four k32 atoms): chunk c's eight
  // registers are a[8c .. 8c + 7], atom x of the step being a[4x .. 4x + 3].
  template <int kReg = 0>
  static __device__ __forceinline__ void step_fragments(uint32 (&a)[16],
                                                        const uint32 (&words)[2][kBits]) {
    a[kReg] = fragment<kReg % kChunkRegisters>(words[kReg / kChunkRegisters]);
    if constexpr (kReg + 1 < 16) step_fragments<kReg + 1>(a, words);
  }
};

}  // namespace hm::gemm
