// Dequantization of weight registers into 8-bit activation codes (e4m3, e5m2 or int8), for the
// dense kernels with 8-bit activations (wgmma and mma.sync): a register of the 8-bit layout
// (docs/layout.md, a = 8) holds four weights of one row, four consecutive k, each field's code in
// its low bits; it becomes four codes of the activation's type, the m64nNk32 A fragment as it
// stands, which is also the mma.sync m16n8k32 A fragment of one warp (the fragment layout of k32
// is the same for e4m3, e5m2 and s8).
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
//    these small integers);
//  - integers on int8 activations (value q - implicit zero point in [-128, 127], rule R10): the
//    byte itself, two's complement, by one add and one xor per register (quant::int8_lanes,
//    layout/spec.h);
//  - float weights on int8 activations (rule R11): each weight as a whole number of its least
//    step 2^kStepExp (e2m1: -12..12 halves), the step left to the epilogue. A 4-bit float's 8
//    magnitudes are a byte table (float_steps) looked up two registers at a time like the
//    exponent tables below, then negated lane by lane where the sign is set; wider floats go
//    through f16 (the code placed in an f16's fields, scaled to its step count exactly, and the
//    byte of 1152 + steps kept), for formats like e2m3 (MXFP6) that need no speed here.
// Channel and tensor scales are applied by the epilogue in f32; group scales either fold in f32 per
// K group (GroupFold below) or, for ue8m0 group x tensor scales on 4-bit float weights
// (C::kScaleExponents, the MXFP4 -> FP8 path), go into the weights' exponents here:
//  - a 4-bit float's 8 magnitudes, times 2^kScaleExpLo, are normal activation codes (a byte table
//    of two registers, fixed per format); a group code e in the window [lo, hi]
//    (core::scale_exponent_window, the one definition) adds e - lo to the exponent field of the
//    seven nonzero entries, so one byte permute per register turns four weights into
//    w * 2^e exactly, with no rescaling of the accumulators; the sign is OR-ed in after.
//  - a code outside the window makes the group's nonzero weights NaN (the table's entries
//    become 0x7F), so a scale the quantizer or converter did not place shows in the output
//    instead of overflowing or flushing silently.
//  On int8 activations (MXFP4 -> INT8) the table holds the magnitudes' step counts and a group
//  code e in its window [lo, hi] shifts both table words left by e - lo (12 << 3 = 96 still fits
//  a lane). int8 has no NaN: a code outside the window zeroes the group's weights and the kernel
//  marks the row when the group has a nonzero weight (poisons), so its outputs come out NaN in
//  the epilogue all the same.
// Integer zero points (C::kZeroPoint == kZeroInt: AWQ and asymmetric GPTQ): the same two integer
// paths, with the zero point of the register's row and K group in place of the implicit one —
// f16 (1024 + z) subtracted from the magic pair, or the byte add 128 - z before the xor — one
// term per row and group slot (zero_term), so a register costs what it costs without. Rules R8
// and R10 bound |q - z| so both stay exact (e4m3: 4-bit weights, e5m2: 3-bit, int8: 7-bit).
// Float zero points (rule R14) stay with 16-bit activations.
#pragma once

#include <humming/core/types.cuh>
#include <humming/dtype/convert.cuh>
#include <humming/gemm/dequant.cuh>
#include <humming/layout/spec.h>
#include <humming/ptx/mma.cuh>

namespace hm::gemm {

// The activation code (a float of act_man mantissa bits, bias act_bias) of magnitude code c
// (0..7) of a 4-bit float weight (w_man mantissa bits, bias w_bias), times 2^exp_lo: normal for
// every c > 0 when exp_lo is the window's lo (core::scale_exponent_window), 0 for c = 0.
HM_PARAMS_HD constexpr uint32 exponent_table_entry(int c, int w_man, int w_bias, int act_man,
                                                   int act_bias, int exp_lo) {
  if (c == 0) return 0;
  const int e = c >> w_man, m = c & ((1 << w_man) - 1);
  int x = e - w_bias, p = w_man, r = m;  // value = (1 + r / 2^p) * 2^x
  if (e == 0) {                          // a subnormal weight, m * 2^(1 - bias - w_man), normalized
    p = 0;
    while ((m >> (p + 1)) != 0) ++p;
    r = m - (1 << p);
    x = p + 1 - w_bias - w_man;
  }
  return static_cast<uint32>(((x + exp_lo + act_bias) << act_man) | (r << (act_man - p)));
}

// A float weight's magnitude code c (w_man mantissa bits) as a count of the format's least step
// (its least subnormal, 2^(1 - bias - w_man)): m for subnormals, (2^w_man + m) << (e - 1) above.
HM_PARAMS_HD constexpr uint32 float_steps(int c, int w_man) {
  const int e = c >> w_man, m = c & ((1 << w_man) - 1);
  return e == 0 ? static_cast<uint32>(m) : static_cast<uint32>(((1 << w_man) | m) << (e - 1));
}

// Whether Config C's activations are int8 (8 bits, no exponent): the wgmma is then s8 x s8 into
// s32 accumulators (gemm/dense_wgmma.cuh) and the weights become int8 lanes.
template <class C>
HM_PARAMS_HD constexpr bool act_is_int8() {
  return C::kActBits == 8 && C::kActExpBits == 0;
}

// Whether Config C marks rows to poison (DequantA8::outside_window): int8 activations with ue8m0
// group exponents in the weights, where a group code outside the window cannot make the weights
// NaN as it does on float activations, so the kernel makes the row's sums NaN instead.
template <class C>
HM_PARAMS_HD constexpr bool poisons_rows() {
  return C::kScaleExponents && act_is_int8<C>();
}

// The sums of the rows marked in `poison` made NaN (poisons_rows), so that every output of such a
// row is NaN whatever the epilogue or split-K adds: bits 2i and 2i + 1 are strip i's rows g and
// g + 8, which are elements q < 2 and q >= 2 of each token group (the wgmma kernel has one strip).
template <int kStrips, int kTokenGroups>
__device__ __forceinline__ void poison_rows(float (&sums)[kStrips][kTokenGroups][4],
                                            uint32 poison) {
#pragma unroll
  for (int i = 0; i < kStrips; ++i)
#pragma unroll
    for (int j = 0; j < kTokenGroups; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q)
        if ((poison >> (2 * i + q / 2)) & 1u) sums[i][j][q] = __int_as_float(0x7fc00000);
}

// How a kernel with 8-bit activations (gemm/dense_mma.cuh, gemm/dense_wgmma.cuh) applies the
// scales that change along K: group and block scales cannot go into the 8-bit weights without
// rounding them, so each K group's products go into a second set of accumulators that is folded
// into the main ones in f32, times each row's scale of the group, once the group's last step is
// done. ue8m0 group x tensor scales on 4-bit float weights (C::kScaleExponents) need no fold:
// the dequantization writes each group's exponent into the weights (below). Per-token x K-group
// activation scales (C::kActGroupK > 0, a=e4m3:g128) fold the same way, each token's (column's)
// scale of the group multiplying its sums; with weight groups as well, the fold period is the
// smaller group (one divides the other: the host's gap check). Groups are whole K steps.
template <class C>
struct GroupFold {
  static constexpr bool kWeight =
      C::kActBits == 8 && Dequant<C>::kGroupScalesInMainloop && !C::kScaleExponents;
  static constexpr bool kAct = C::kActBits == 8 && C::kActGroupK > 0;
  static constexpr bool kAny = kWeight || kAct;
  static constexpr int kStepK = dense_step_k(C::kActBits);
  // Weight groups smaller than a step (32 or 64 k: GPTQ g32 / g64) fold every step, one partial
  // set per group slot of the step (atom x into set x / (4 / kSets)); larger
  // ones fold at their last step into one set.
  static constexpr int kSets =
      kWeight && C::kGroupK > 0 && C::kGroupK < kStepK ? kStepK / C::kGroupK : 1;
  static constexpr int kWeightK = kSets > 1 ? kStepK : C::kGroupK;
  // The fold period in k: the group (a step for the smaller ones), or the smaller of the two.
  static constexpr int kK = !kAct      ? (kWeight ? kWeightK : 0)
                            : !kWeight ? C::kActGroupK
                            : kWeightK < C::kActGroupK ? kWeightK
                                                       : C::kActGroupK;
  static constexpr int kSteps = kAny ? kK / kStepK : 1;  // K steps per fold
  static_assert(kSets == 1 || (kStepK % C::kGroupK == 0 && C::kScaleKind != kScaleBlock),
                "group scales under a step divide it (32 or 64 k), and are not block scales");
  static_assert(!(kWeight && kAct) || C::kGroupK % C::kActGroupK == 0 ||
                    C::kActGroupK % C::kGroupK == 0,
                "weight and activation groups: one size divides the other");
  static_assert(!kAny || (kK % kStepK == 0 && !C::kAccF16),
                "8-bit activations fold f32 groups of whole K steps (128 k)");
};

template <class C>
struct DequantA8 {
  static constexpr int kBits = C::kWeightBits;
  static constexpr int kActBits = 8;
  static constexpr bool kActInt8 = act_is_int8<C>();
  static constexpr int kActMan = C::kActManBits;
  static constexpr int kActBias = kActInt8 ? 0 : (1 << (C::kActExpBits - 1)) - 1;
  static_assert(kActInt8 || C::kActExpBits + kActMan == 7, "e4m3 or e5m2");
  // Float weights on int8: the least step's exponent, and the top magnitude's step count.
  static constexpr bool kFloatOnInt8 = kActInt8 && C::kWeightIsFloat;
  static constexpr int kStepExp = C::kWeightIsFloat ? 1 - C::kWeightBias - C::kWeightManBits : 0;
  static constexpr uint32 kMostSteps =
      kFloatOnInt8 ? float_steps((1 << (kBits - 1)) - 1, C::kWeightManBits) : 0;
  static_assert(!kFloatOnInt8 || kMostSteps <= 127u, "float weights on int8 fit a lane (rule R11)");
  static_assert(!C::kScaleExponents || kBits == 4, "group scales go into 4-bit float weights only");
  // The power of two the conversion leaves in every weight (epilogue: C *= 2^kFactorExp). Float
  // activations: the bias difference, none when the group scales' exponents go into the weights
  // (they restore the value exactly). int8: the least step, times 2^lo of the exponent window.
  static constexpr int kFactorExp =
      kActInt8 ? kStepExp + (C::kScaleExponents ? C::kScaleExpLo : 0)
      : C::kScaleExponents ? 0
      : C::kWeightIsFloat  ? kActBias - C::kWeightBias
                           : 0;
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

  // int8 activations: the fields become int8 lanes q - zp (quant::int8_lanes), which needs the
  // zero point the layout implies and every value in [-128, 127] (rule R10).
  static_assert(!kActInt8 || C::kWeightIsFloat ||
                    (C::kImplicitZeroPoint == 0 ? kBits <= 7
                                                : C::kImplicitZeroPoint == 1 << (kBits - 1)),
                "q - zp fits int8 (rule R10)");

  static_assert(C::kZeroPoint != kZeroFloat, "float zero points need 16-bit activations (R14)");
  static_assert(C::kZeroPoint == kZeroNone || (!C::kWeightIsFloat && C::kImplicitZeroPoint == 0),
                "zero points come with unsigned integer weights (rule R13)");

  // What a register of one row subtracts for zero-point code z (0 <= z < 2^kBits): the f16 pair
  // of 1024 + z (float activations), or, for int8 lanes, the byte add 128 - z (quant::int8_lanes
  // with a runtime zero point: q + 128 - z stays within a byte for q, z < 128).
  static __device__ __forceinline__ uint32 zero_term(uint32 z) {
    if constexpr (kActInt8) {
      return (128u - z) * 0x01010101u;
    } else {
      const uint32 h = 0x6400u + z;
      return h | (h << 16);
    }
  }

  // ---- float weights on int8 activations (rule R11) -----------------------------------------
  // Lanes of magnitudes (step counts, each <= 127) made signed where the sign byte's bit 7 is
  // set: -m is (0x80 - m) ^ 0x80 lane by lane (no borrow crosses a lane for m <= 127, and -0 is
  // 0), chosen by the sign replicated over its lane (prmt's sign mode: selector nibbles 8..B).
  static __device__ __forceinline__ uint32 signed_lanes(uint32 magnitudes, uint32 sign_bytes) {
    uint32 mask;
    asm("prmt.b32 %0, %1, 0, 0xBA98;\n" : "=r"(mask) : "r"(sign_bytes));
    const uint32 negated = (0x80808080u - magnitudes) ^ 0x80808080u;
    return (magnitudes & ~mask) | (negated & mask);
  }
  // Four codes of a float weight wider than 4 bits (one per byte, in its low kBits) as int8
  // lanes of their step counts, two at a time through f16: the code's exponent and mantissa go
  // under an f16's (value w * 2^(bias - 15), subnormals included), times 2^(15 - bias) is w,
  // times 2^(bias + kWeightManBits - 1) plus 1152 is 1152 + steps, exact in [1025, 1279] where
  // an f16's low byte is 128 + steps; the xor makes it two's complement.
  static __device__ __forceinline__ uint32 float_int8_lanes(uint32 x) {
    static_assert(kFloatOnInt8 && C::kWeightManBits <= 10 && 15 - C::kWeightBias >= -14 &&
                      15 - C::kWeightBias <= 15 && C::kWeightBias + C::kWeightManBits - 1 >= -14 &&
                      C::kWeightBias + C::kWeightManBits - 1 <= 15,
                  "the f16 steps of float weights on int8 (the dense family's gap check)");
    constexpr uint32 kMag = quant::replicate(quant::low_bits(kBits - 1), 16);
    constexpr int kUp = 10 - C::kWeightManBits;
    auto pair = [](uint32 h) {
      const uint32 f = ((h & kMag) << kUp) | ((h << (16 - kBits)) & 0x80008000u);
      constexpr uint32 kToW = static_cast<uint32>(15 - C::kWeightBias + 15) << 10;  // 2^(15 - bias)
      constexpr uint32 kToSteps = static_cast<uint32>(C::kWeightBias + C::kWeightManBits - 1 + 15)
                                  << 10;  // 2^(bias + man - 1)
      constexpr uint32 kMagic = 0x6480u;  // 1152
      return Pair<f16>::fma(Pair<f16>::mul(f, kToW | (kToW << 16)), kToSteps | (kToSteps << 16),
                            kMagic | (kMagic << 16));
    };
    const uint32 lo = pair(__byte_perm(x, 0u, 0x4140u)), hi = pair(__byte_perm(x, 0u, 0x4342u));
    return __byte_perm(lo, hi, 0x6420u) ^ 0x80808080u;
  }
  // The byte table of a 4-bit float's step counts (entries 0..3, 4..7).
  static constexpr uint32 steps_word(int first) {
    return float_steps(first, C::kWeightManBits) | (float_steps(first + 1, C::kWeightManBits) << 8) |
           (float_steps(first + 2, C::kWeightManBits) << 16) |
           (float_steps(first + 3, C::kWeightManBits) << 24);
  }
  static constexpr uint32 kStepsLo = kFloatOnInt8 && kBits == 4 ? steps_word(0) : 0;
  static constexpr uint32 kStepsHi = kFloatOnInt8 && kBits == 4 ? steps_word(4) : 0;

  // Register kReg (0..7) of one chunk, from a lane's kBits stored words, for a row whose
  // zero point's term (zero_term) is `zero`.
  template <int kReg>
  static __device__ __forceinline__ uint32 fragment_zp(const uint32 (&words)[kBits], uint32 zero) {
    const uint32 x = quant::extract_register_fixed<kBits, kActBits, kReg>(words);
    if constexpr (kActInt8) {
      return (x + zero) ^ 0x80808080u;
    } else {
      const uint32 lo = to_act_pair(Pair<f16>::sub(magic_pair<0>(x), zero));
      const uint32 hi = to_act_pair(Pair<f16>::sub(magic_pair<2>(x), zero));
      return lo | (hi << 16);
    }
  }

  // Register kReg (0..7) of one chunk, from a lane's kBits stored words.
  template <int kReg>
  static __device__ __forceinline__ uint32 fragment(const uint32 (&words)[kBits]) {
    const uint32 x = quant::extract_register_fixed<kBits, kActBits, kReg>(words);
    if constexpr (kFloatOnInt8) {
      return float_int8_lanes(x);
    } else if constexpr (kActInt8) {
      return quant::int8_lanes(x, C::kImplicitZeroPoint);
    } else if constexpr (C::kWeightIsFloat) {
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

  // ---- group scales in the exponents (C::kScaleExponents) -----------------------------------
  static constexpr uint32 table_word(int first) {
    return exponent_table_entry(first, C::kWeightManBits, C::kWeightBias, kActMan, kActBias,
                                C::kScaleExpLo) |
           (exponent_table_entry(first + 1, C::kWeightManBits, C::kWeightBias, kActMan, kActBias,
                                 C::kScaleExpLo) << 8) |
           (exponent_table_entry(first + 2, C::kWeightManBits, C::kWeightBias, kActMan, kActBias,
                                 C::kScaleExpLo) << 16) |
           (exponent_table_entry(first + 3, C::kWeightManBits, C::kWeightBias, kActMan, kActBias,
                                 C::kScaleExpLo) << 24);
  }
  static constexpr int kExpWindow = C::kScaleExpHi - C::kScaleExpLo;  // + 1 codes
  static constexpr bool kFloatTable = C::kScaleExponents && !kActInt8;  // tables of act codes
  static constexpr uint32 kTableLo = kFloatTable ? table_word(0) : 0;
  static constexpr uint32 kTableHi = kFloatTable ? table_word(4) : 0;
  static constexpr int kLeastField = kFloatTable ? int((kTableLo >> 8 & 0xFFu) >> kActMan) : 1;
  static constexpr int kMostField = kFloatTable ? int((kTableHi >> 24) >> kActMan) + kExpWindow : 0;
  static_assert(!C::kScaleExponents || (C::kWeightIsFloat && kBits == 4),
                "group scales go into the exponents of 4-bit float weights only");
  static_assert(kLeastField >= 1, "every nonzero table entry is a normal activation code");
  static_assert(!C::kScaleExponents || !kActInt8 || (kMostSteps << kExpWindow) <= 127u,
                "int8: the top magnitude shifted to the window's top fits a lane");
  static_assert(!kFloatTable || kMostField < (1 << C::kActExpBits) - 1 ||
                    (C::kActExpBits == 4 && kMostField == 15 &&
                     (((kTableHi >> 24) & ((1u << kActMan) - 1)) != (1u << kActMan) - 1)),
                "the window's top stays finite (e4m3's top field holds finite values below its NaN)");

  // The byte table of one row's group: its code e in the window adds e - lo to the exponent of
  // the nonzero entries (no carry leaves a byte: the window keeps them below the sign bit); on
  // int8, shifts the step counts left by e - lo (the window keeps them within 127).
  struct Table {
    uint32 lo, hi;  // entries 0..3, 4..7
  };
  static constexpr uint32 kWindowBase = static_cast<uint32>(127 + C::kScaleExpLo);  // lo's code
  // Whether rows with group code `code` are poisoned (poisons_rows: int8 activations; float
  // activations make such weights NaN instead and need no mark).
  static __device__ __forceinline__ bool outside_window(uint32 code) {
    return code - kWindowBase > static_cast<uint32>(kExpWindow);
  }
  // The poison bits (1: row g, 2: row g + 8) of group slot `slot` of a step whose row codes were
  // outside the window (out_lo / out_hi), for rows with a nonzero weight in that slot only: float
  // activations make only nonzero weights NaN, and an all-zero group (or the half step past K,
  // whose words are zero and codes arbitrary) is zero either way. words as step_fragments_exp
  // takes them (row g in the even nibbles of each word, row g + 8 in the odd ones). Called on
  // the rare path only, so the common path costs two window checks per slot.
  static __device__ __forceinline__ uint32 slot_poison(const uint32 (&words)[2][kBits], int slot,
                                                       bool out_lo, bool out_hi) {
    uint32 lo = 0, hi = 0;
#pragma unroll
    for (int v = 0; v < 8; ++v) {
      if (Dequant<C>::slot_of_atom(v / 2) == slot) {
        lo |= words[v / 4][v % 4] & 0x07070707u;
        hi |= words[v / 4][v % 4] & 0x70707070u;
      }
    }
    return (out_lo && lo != 0 ? 1u : 0u) | (out_hi && hi != 0 ? 2u : 0u);
  }
  static __device__ __forceinline__ Table exponent_table(uint32 code) {
    if constexpr (kActInt8) {
      // Step counts shifted by e - lo; outside the window, zero weights (the row is poisoned).
      const uint32 shift = code - kWindowBase;
      if (shift > static_cast<uint32>(kExpWindow)) return {0u, 0u};
      return {kStepsLo << shift, kStepsHi << shift};
    }
    // code * step - base * step folds into one multiply-add per word (exact modulo 2^32).
    constexpr uint32 kBase = kWindowBase;
    constexpr uint32 kStepLo = (1u << kActMan) * 0x01010100u, kStepHi = (1u << kActMan) * 0x01010101u;
    const Table t{code * kStepLo + (kTableLo - kBase * kStepLo),
                  code * kStepHi + (kTableHi - kBase * kStepHi)};
    // Outside the window (below lo, the difference wraps): NaN for every nonzero magnitude.
    if (code - kBase > static_cast<uint32>(kExpWindow)) return {0x7F7F7F00u, 0x7F7F7F7Fu};
    return t;
  }
  // Registers 2v and 2v + 1 of a chunk from its stored word v (docs/layout.md §3, b = 4, a = 8:
  // register 2v holds nibbles 0, 2, 4, 6 of the word, row g; register 2v + 1 nibbles 1, 3, 5, 7,
  // row g + 8). The word's eight magnitudes are already the nibbles of a byte selector: two
  // lookups per row table give each row's four values among the other row's, and one permute
  // per register keeps its own; the sign (bit 3 of each code) is OR-ed in at bit 7. Eleven
  // instructions for eight weights.
  static __device__ __forceinline__ void word_exp(uint32 word, Table lo, Table hi, uint32& even,
                                                  uint32& odd) {
    const uint32 selector = word & 0x77777777u, selector_hi = selector >> 16;
    const uint32 lo0 = __byte_perm(lo.lo, lo.hi, selector);     // T_lo of nibbles 0..3
    const uint32 lo1 = __byte_perm(lo.lo, lo.hi, selector_hi);  // ... of nibbles 4..7
    const uint32 hi0 = __byte_perm(hi.lo, hi.hi, selector);
    const uint32 hi1 = __byte_perm(hi.lo, hi.hi, selector_hi);
    if constexpr (kActInt8) {
      // Step counts: negated lane by lane where the code's sign (bit 3) is set, about 17
      // instructions for eight weights.
      even = signed_lanes(__byte_perm(lo0, lo1, 0x6420u), word << 4);
      odd = signed_lanes(__byte_perm(hi0, hi1, 0x7531u), word);
    } else {
      even = __byte_perm(lo0, lo1, 0x6420u) | ((word << 4) & 0x80808080u);
      odd = __byte_perm(hi0, hi1, 0x7531u) | (word & 0x80808080u);
    }
  }
  // The 16 A registers of a step (words: a lane's 4 stored words of each of the step's two
  // chunks); lo / hi: the tables of rows g and g + 8 per group slot.
  template <int kSlots>
  static __device__ __forceinline__ void step_fragments_exp(uint32 (&a)[16],
                                                            const uint32 (&words)[2][kBits],
                                                            const Table (&lo)[kSlots],
                                                            const Table (&hi)[kSlots]) {
    static_assert(kBits == 4, "a lane's word v of a chunk is its registers 2v and 2v + 1");
#pragma unroll
    for (int v = 0; v < 8; ++v) {
      // Registers 2v, 2v + 1 of the step: chunk v / 4's word v % 4, the step's atom v / 2.
      const int slot = Dequant<C>::slot_of_atom(v / 2);
      word_exp(words[v / 4][v % 4], lo[slot], hi[slot], a[2 * v], a[2 * v + 1]);
    }
  }

  // step_fragments with integer zero points: zlo / zhi are the terms (zero_term) of rows g and
  // g + 8 per group slot. Even registers of an atom hold row g, odd ones row g + 8 (the k32 A
  // fragment), and atom x takes its slot's terms.
  template <int kSlots, int kReg = 0>
  static __device__ __forceinline__ void step_fragments_zp(uint32 (&a)[16],
                                                           const uint32 (&words)[2][kBits],
                                                           const uint32 (&zlo)[kSlots],
                                                           const uint32 (&zhi)[kSlots]) {
    constexpr int kSlot = Dequant<C>::slot_of_atom(kReg / 4);
    a[kReg] = fragment_zp<kReg % kChunkRegisters>(words[kReg / kChunkRegisters],
                                                  kReg % 2 == 0 ? zlo[kSlot] : zhi[kSlot]);
    if constexpr (kReg + 1 < 16) step_fragments_zp<kSlots, kReg + 1>(a, words, zlo, zhi);
  }

  // The 16 A registers of one 128-wide K step (two chunks, four k32 atoms): chunk c's eight
  // registers are a[8c .. 8c + 7], atom x of the step being a[4x .. 4x + 3].
  // 4-bit float weights on int8 take the step-count table two registers at a time (word_exp).
  template <int kReg = 0>
  static __device__ __forceinline__ void step_fragments(uint32 (&a)[16],
                                                        const uint32 (&words)[2][kBits]) {
    if constexpr (kFloatOnInt8 && kBits == 4) {
      static_assert(kReg == 0, "the whole step at once");
      const Table steps{kStepsLo, kStepsHi};
#pragma unroll
      for (int v = 0; v < 8; ++v) word_exp(words[v / 4][v % 4], steps, steps, a[2 * v], a[2 * v + 1]);
    } else {
      a[kReg] = fragment<kReg % kChunkRegisters>(words[kReg / kChunkRegisters]);
      if constexpr (kReg + 1 < 16) step_fragments<kReg + 1>(a, words);
    }
  }
};

}  // namespace hm::gemm
