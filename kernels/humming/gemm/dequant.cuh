// Dequantization of weight registers into 16-bit activation pairs, shared by the dense GEMM
// kernels (mma.sync and wgmma): how a scale / zero-point code becomes the terms of one row, and
// how one register of layout fields becomes two weights of that row.
//
// Codes and terms are split on purpose: kernels load the raw codes early (with the weight chunk,
// from global memory or a shared-memory stage) and turn them into terms only when the chunk is
// computed, so no dependent load sits in the compute step.
#pragma once

#include <humming/core/types.cuh>
#include <humming/dtype/convert.cuh>
#include <humming/gemm/params.h>
#include <humming/layout/spec.h>
#include <humming/ptx/mma.cuh>

namespace hm::gemm {

// Scale kinds, as in humming.h (HM_SCALE_*).
constexpr int kScaleNone = 0, kScaleChannel = 1, kScaleGroup = 2, kScaleBlock = 3,
              kScaleTensor = 4, kScaleGroupTensor = 5;
// Zero points.
constexpr int kZeroNone = 0, kZeroInt = 1, kZeroFloat = 2;
// How a scale code becomes a value: the activation's own 16-bit type, f32, ue8m0, or a small
// signed float of kScaleExp / kScaleMan bits.
constexpr int kScaleCodeAct = 0, kScaleCodeF32 = 1, kScaleCodeUe8m0 = 2, kScaleCodeSmallFloat = 3,
              kScaleCodeF16 = 4, kScaleCodeBf16 = 5;

// A lane's kBits words of one chunk (`chunk`: its first byte), read segment by segment (4, 2 or
// 1 words, the layout's lane offsets) with one vector load each: streamed from global memory
// (kStream: not kept in L1) or plain loads (shared memory). Independent of the activation width.
template <bool kStream, int kN>
__device__ __forceinline__ void load_words(uint32 (&r)[kN], const uint32* src) {
  if constexpr (kStream) {
    ptx::load_global_stream(r, src);
  } else if constexpr (kN == 4) {
    const uint4 v = *reinterpret_cast<const uint4*>(src);
    r[0] = v.x, r[1] = v.y, r[2] = v.z, r[3] = v.w;
  } else if constexpr (kN == 2) {
    const uint2 v = *reinterpret_cast<const uint2*>(src);
    r[0] = v.x, r[1] = v.y;
  } else {
    r[0] = *src;
  }
}
template <int kBits, bool kStream>
__device__ __forceinline__ void load_lane_words(uint32 (&words)[kBits], const void* chunk,
                                                int lane) {
  const uint32* base = static_cast<const uint32*>(chunk);
#pragma unroll
  for (int w = 0; w < kBits;) {
    const int seg = quant::segment_words(kBits, w);
    const uint32* src = base + quant::lane_word_offset(kBits, lane, w);
    if (seg == 4) {
      uint32 r[4];
      load_words<kStream>(r, src);
#pragma unroll
      for (int i = 0; i < 4; ++i) words[w + i] = r[i];
    } else if (seg == 2) {
      uint32 r[2];
      load_words<kStream>(r, src);
      words[w] = r[0];
      words[w + 1] = r[1];
    } else {
      uint32 r[1];
      load_words<kStream>(r, src);
      words[w] = r[0];
    }
    w += seg;
  }
}

template <class C>
struct Dequant {
  using Act = typename C::Act;
  static constexpr int kBits = C::kWeightBits;
  static constexpr int kActBits = 16;
  static constexpr bool kIsF16 = C::kActIsF16;
  static constexpr int kActMantissa = kIsF16 ? 10 : 7;
  static constexpr int kActBias = kIsF16 ? 15 : 127;
  static constexpr bool kGroupScalesInMainloop =
      C::kScaleKind == kScaleGroup || C::kScaleKind == kScaleBlock ||
      C::kScaleKind == kScaleGroupTensor;
  static constexpr bool kHasRowCodes = kGroupScalesInMainloop || C::kZeroPoint != kZeroNone;
  // Integers dequantize exactly through the activation's magic number while magic + q fits the
  // mantissa (f16: 1024 + q for q < 1024; bf16: 128 + q for q < 128); else through f32.
  static constexpr bool kIntFast = !C::kWeightIsFloat && (kIsF16 || kBits <= 7);
  static constexpr uint32 kMagic = kIsF16 ? 0x6400u : 0x4300u;  // 1024.0 / 128.0
  static constexpr float kMagicValue = kIsF16 ? 1024.0f : 128.0f;

  // The K groups one K step needs codes for (params.h explains), and the slot of each of its
  // four MMA atoms. kc counts the kernel's K steps: 64-wide chunks, or the wgmma kernel's 128-wide
  // steps with 8-bit activations (params.h, dense_step_k).
  static constexpr int kStepK = dense_step_k(C::kActBits);
  static constexpr int kGroupSlots = dense_group_slots(C::kGroupK, kStepK);
  static __host__ __device__ constexpr int slot_of_atom(int atom) { return atom / (4 / kGroupSlots); }
  // The K group of slot `slot` of step kc, in kc's integer type (32-bit where the caller knows
  // the step index fits: a division by a constant is then a short multiply).
  template <class Int>
  static __device__ __forceinline__ Int group_of_slot(Int kc, int slot) {
    return C::kGroupK > 0 ? (kc * kStepK + slot * (kStepK / kGroupSlots)) / C::kGroupK : 0;
  }

  // Bytes of one scale / zero-point code as stored in the packed tensors.
  static constexpr int kScaleCodeBytes =
      C::kScaleCode == kScaleCodeF32 ? 4
      : (C::kScaleCode == kScaleCodeAct || C::kScaleCode == kScaleCodeF16 ||
         C::kScaleCode == kScaleCodeBf16)
          ? 2
          : 1;
  static constexpr int kZeroCodeBytes = C::kZeroPoint == kZeroFloat ? 2 : 1;

  // ---- codes ----------------------------------------------------------------------------------

  // Code i of a scale tensor (global or shared memory: generic addressing).
  static __device__ __forceinline__ uint32 scale_code(const void* scales, int64_t i) {
    if constexpr (kScaleCodeBytes == 4) return __float_as_uint(static_cast<const float*>(scales)[i]);
    if constexpr (kScaleCodeBytes == 2) return static_cast<const uint16*>(scales)[i];
    return static_cast<const unsigned char*>(scales)[i];
  }
  static __device__ __forceinline__ uint32 zero_code(const void* zeros, int64_t i) {
    if constexpr (C::kZeroPoint == kZeroInt) return static_cast<const unsigned char*>(zeros)[i];
    if constexpr (C::kZeroPoint == kZeroFloat) return static_cast<const uint16*>(zeros)[i];
    return 0;
  }

  static __device__ __forceinline__ float scale_from_code(uint32 code) {
    if constexpr (C::kScaleCode == kScaleCodeAct) {
      return to_float(Act{static_cast<uint16>(code)});
    } else if constexpr (C::kScaleCode == kScaleCodeF32) {
      return __uint_as_float(code);
    } else if constexpr (C::kScaleCode == kScaleCodeF16) {
      return to_float(f16{static_cast<uint16>(code)});
    } else if constexpr (C::kScaleCode == kScaleCodeBf16) {
      return to_float(bf16{static_cast<uint16>(code)});
    } else if constexpr (C::kScaleCode == kScaleCodeUe8m0) {
      return decode_ue8m0(code);
    } else {
      return decode_small_float<C::kScaleExp, C::kScaleMan, true>(code);
    }
  }

  // The raw codes one row needs for one K group.
  struct RowCodes {
    uint32 scale, zero;
  };

  // From the packed tensors in global memory: scales [group][scale_cols], zero points
  // [group][n_pad]; `row` is the output channel.
  static __device__ __forceinline__ RowCodes load_row_codes(const void* scales, const void* zeros,
                                                            int64_t scale_cols, int64_t n_pad,
                                                            int64_t group, int64_t row) {
    RowCodes c{0, 0};
    if constexpr (kGroupScalesInMainloop)
      c.scale = scale_code(scales, group * scale_cols +
                                       (C::kScaleKind == kScaleBlock ? row / C::kGroupN : row));
    if constexpr (C::kZeroPoint != kZeroNone) c.zero = zero_code(zeros, group * n_pad + row);
    return c;
  }

  // ---- terms ----------------------------------------------------------------------------------

  struct RowTerms {
    uint32 scale;   // pair; unused without mainloop scales
    uint32 offset;  // pair: magic + integer zero point
    uint32 zero;    // pair: float zero point
    float scale_f, zero_f;  // the same for the f32 path
  };

  static __device__ __forceinline__ RowTerms row_terms(const RowCodes& c) {
    RowTerms t{};
    if constexpr (kGroupScalesInMainloop) {
      // The support rules guarantee the scale is exactly representable in the activation type.
      const Act s = C::kScaleCode == kScaleCodeAct ? Act{static_cast<uint16>(c.scale)}
                                                  : from_float<Act>(scale_from_code(c.scale));
      t.scale = splat(s);
      t.scale_f = to_float(s);
    }
    if constexpr (!C::kWeightIsFloat) {
      float zp = static_cast<float>(C::kImplicitZeroPoint);
      if constexpr (C::kZeroPoint == kZeroInt) zp = static_cast<float>(c.zero);
      if constexpr (C::kZeroPoint == kZeroFloat) {
        t.zero = splat(Act{static_cast<uint16>(c.zero)});
        zp = to_float(Act{static_cast<uint16>(c.zero)});
      }
      t.zero_f = zp;
      // What dequant subtracts from (magic | q): magic + integer zero point, exact in the pair.
      if constexpr (kIntFast)
        t.offset = splat(from_float<Act>(
            kMagicValue +
            (C::kZeroPoint == kZeroInt ? zp : static_cast<float>(C::kImplicitZeroPoint))));
    }
    return t;
  }

  // ---- one register ---------------------------------------------------------------------------

  // x: the register from the layout recipe, each 16-bit field's value in its low kBits bits.
  static __device__ __forceinline__ uint32 dequant(uint32 x, const RowTerms& t) {
    uint32 w;
    if constexpr (C::kWeightIsFloat) {
      // Sign to bit 15, exponent and mantissa under the activation's: the pair then holds
      // w * 2^(bias_w - bias_act) for normals and subnormals alike; one exact multiply by a power
      // of two restores w.
      constexpr int kMan = C::kWeightManBits;
      constexpr uint32 kMagMask = quant::replicate(quant::low_bits(kBits - 1), 16);
      const uint32 sign = (x << (16 - kBits)) & 0x80008000u;
      const uint32 magnitude = (x & kMagMask) << (kActMantissa - kMan);
      constexpr int kFix = kActBias - C::kWeightBias;
      constexpr uint32 kFixBits = static_cast<uint32>(kFix + kActBias) << kActMantissa;
      w = Pair<Act>::mul(sign | magnitude, kFixBits | (kFixBits << 16));
    } else if constexpr (kIntFast) {
      w = Pair<Act>::sub(x | (kMagic | (kMagic << 16)), t.offset);  // q - zp, exact
      if constexpr (C::kZeroPoint == kZeroFloat) w = Pair<Act>::sub(w, t.zero);
    } else {
      const float q0 = static_cast<float>(x & 0xFFFFu), q1 = static_cast<float>(x >> 16);
      float w0 = q0 - t.zero_f, w1 = q1 - t.zero_f;
      if constexpr (kGroupScalesInMainloop) {
        w0 *= t.scale_f;
        w1 *= t.scale_f;
      }
      return pack_pair<Act>(w0, w1);
    }
    if constexpr (kGroupScalesInMainloop) w = Pair<Act>::mul(w, t.scale);
    return w;
  }

  // A lane's kBits words of one chunk (lane_words below).
  template <bool kStream>
  static __device__ __forceinline__ void load_lane_words(uint32 (&words)[kBits], const void* chunk,
                                                         int lane) {
    gemm::load_lane_words<kBits, kStream>(words, chunk, lane);
  }

  // The 16 MMA A registers of one 16 x 64 chunk (4 atoms of 4 registers, layout order), from a
  // lane's kBits words and the terms of its two rows (g, g + 8) per slot. Unrolled by template
  // so every register's extraction recipe is a compile-time constant.
  template <int kReg = 0>
  static __device__ __forceinline__ void chunk_fragments(uint32 (&a)[16],
                                                         const uint32 (&words)[kBits],
                                                         const RowTerms (&lo)[kGroupSlots],
                                                         const RowTerms (&hi)[kGroupSlots]) {
    a[kReg] = fragment<kReg>(words, (kReg & 1) ? hi[slot_of_atom(kReg / 4)]
                                               : lo[slot_of_atom(kReg / 4)]);
    if constexpr (kReg + 1 < 16) chunk_fragments<kReg + 1>(a, words, lo, hi);
  }

  // Integers through the magic number can be dequantized without first shifting each field down
  // to bit 0: a field left at bit e of its half (e + b within the mantissa) reads as
  // magic + q * 2^e, and one exact fma by 2^-e removes both the position and the magic. So a
  // register costs one lop3 ((x & mask) | magic) and one fma or sub, and a shift serves every
  // register whose fields lie in the same byte positions (int4: one shift per 4 registers
  // instead of 3). Not with integer zero points (their offset is per row, one more term per e),
  // nor for values that straddle two words. e is the field's offset within its byte.
  template <int kReg>
  static __host__ __device__ constexpr int in_place_bits() {
    constexpr quant::RegisterRecipe rc = quant::register_recipe(kBits, kActBits, kReg);
    constexpr int e = rc.shift % 8;
    return (kIntFast && !rc.merge && C::kZeroPoint != kZeroInt && e + kBits <= kActMantissa) ? e : 0;
  }

  template <int kReg>
  static __device__ __forceinline__ uint32 fragment(const uint32 (&words)[kBits], const RowTerms& t) {
    constexpr quant::RegisterRecipe rc = quant::register_recipe(kBits, kActBits, kReg);
    if constexpr (!kIntFast || rc.merge) {
      return dequant(quant::extract_register_fixed<kBits, kActBits, kReg>(words), t);
    } else {
      constexpr int e = in_place_bits<kReg>();
      constexpr uint32 kMagicPair = kMagic | (kMagic << 16);
      // (x >> (shift - e)) & (mask << e) | magic, as one lop3 (LUT (a & b) | c).
      const uint32 v = ptx::lop3<0xEA>(words[rc.word] >> (rc.shift - e), rc.mask << e, kMagicPair);
      uint32 w;
      if constexpr (e == 0) {
        w = Pair<Act>::sub(v, t.offset);  // q - zp, exact
      } else {
        // v * 2^-e - (magic * 2^-e + zp) = q - zp, exact (the zero point is the implicit one).
        constexpr float kScaleDown = 1.0f / static_cast<float>(1 << e);
        w = Pair<Act>::fma(v, splat(from_float<Act>(kScaleDown)),
                           splat(from_float<Act>(-(kMagicValue * kScaleDown +
                                                   static_cast<float>(C::kImplicitZeroPoint)))));
      }
      if constexpr (C::kZeroPoint == kZeroFloat) w = Pair<Act>::sub(w, t.zero);
      if constexpr (kGroupScalesInMainloop) w = Pair<Act>::mul(w, t.scale);
      return w;
    }
  }
};

}  // namespace hm::gemm
