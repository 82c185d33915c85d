// The standard layout's index arithmetic (kernels/humming/layout/spec.h) against independent
// statements of the same rules: the PTX ISA fragment formulas, the bit-stream definition of
// docs/layout.md §4 written as a bit loop, and words computed by hand.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include <humming/layout/spec.h>

#include "core/dtype.hpp"
#include "core/support.hpp"

namespace hm::quant {
namespace {

const int kActBits[] = {16, 8, 4};

std::vector<int> weight_bits_for(int a) {
  std::vector<int> out;
  for (int b = 1; b <= 8; ++b)
    if (layout_defined(b, a)) out.push_back(b);
  return out;
}

// ---- the MMA fragment ---------------------------------------------------------------------

// Matrix A of mma.m16n8k16 .f16/.bf16, mma.m16n8k32 .s8/.e4m3 and mma.m16n8k64 .s4/.e2m1 as the
// PTX ISA states them (9.7.14.5, "Matrix Fragments for mma.m16n8k16 with floating point type",
// "... for mma.m16n8k32", "... for mma.m16n8k64"): the row and column of element a_i of a lane.
ChunkElement ptx_fragment_a(int act_bits, int lane, int i) {
  const int g = lane >> 2, t = lane % 4;
  if (act_bits == 16) {  // 8 elements, 2 per register
    const int row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8;
    return {row, t * 2 + (i & 1) + (i >= 4 ? 8 : 0)};
  }
  if (act_bits == 8) {  // 16 elements, 4 per register
    const int row = (i < 4 || (i >= 8 && i < 12)) ? g : g + 8;
    return {row, t * 4 + (i & 3) + (i >= 8 ? 16 : 0)};
  }
  const int row = (i < 8 || (i >= 16 && i < 24)) ? g : g + 8;  // 32 elements, 8 per register
  return {row, t * 8 + (i & 7) + (i >= 16 ? 32 : 0)};
}

TEST(LayoutSpec, RegistersAreThePtxFragmentsOfConsecutiveAtoms) {
  for (int a : kActBits) {
    const int per_reg = fields_per_register(a), kt = atom_k(a);
    for (int lane = 0; lane < kLanes; ++lane) {
      for (int reg = 0; reg < registers_per_chunk(a); ++reg) {
        for (int j = 0; j < per_reg; ++j) {
          const int atom = reg / 4, i = (reg % 4) * per_reg + j;
          const ChunkElement want = ptx_fragment_a(a, lane, i);
          const ChunkElement got = element_of(a, lane, reg, j);
          EXPECT_EQ(got.row, want.row) << "a=" << a << " lane=" << lane << " reg=" << reg;
          EXPECT_EQ(got.k, want.k + atom * kt) << "a=" << a << " lane=" << lane << " reg=" << reg;
        }
      }
    }
  }
}

// sm75's m16n8k8 (PTX 9.7.14.5.7): a0,a1 row g, a2,a3 row g+8, col 2t + (i & 1). Registers 0-1
// of a k16 atom are that fragment for k 0..7 and registers 2-3 for k 8..15.
TEST(LayoutSpec, SixteenBitAtomSplitsIntoTwoM16n8k8Fragments) {
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int half = 0; half < 2; ++half) {
      for (int i = 0; i < 4; ++i) {
        const int g = lane >> 2, t = lane % 4;
        const ChunkElement got = element_of(16, lane, 2 * half + i / 2, i % 2);
        EXPECT_EQ(got.row, i < 2 ? g : g + 8);
        EXPECT_EQ(got.k, 8 * half + 2 * t + (i & 1));
      }
    }
  }
}

TEST(LayoutSpec, LaneFieldOfInvertsElementOf) {
  for (int a : kActBits) {
    std::set<std::pair<int, int>> seen;
    for (int lane = 0; lane < kLanes; ++lane) {
      for (int reg = 0; reg < registers_per_chunk(a); ++reg) {
        for (int j = 0; j < fields_per_register(a); ++j) {
          const ChunkElement e = element_of(a, lane, reg, j);
          ASSERT_TRUE(e.row >= 0 && e.row < kChunkRows && e.k >= 0 && e.k < kChunkK);
          seen.insert({e.row, e.k});
          const LaneField back = lane_field_of(a, e.row, e.k);
          EXPECT_EQ(back.lane, lane);
          EXPECT_EQ(back.reg, reg);
          EXPECT_EQ(back.field, j);
        }
      }
    }
    EXPECT_EQ(seen.size(), size_t(kChunkRows * kChunkK)) << "a=" << a;
  }
}

// ---- bits ---------------------------------------------------------------------------------

TEST(LayoutSpec, EveryBitOfTheLaneWordsHoldsExactlyOneValueBit) {
  for (int a : kActBits) {
    for (int b : weight_bits_for(a)) {
      std::vector<int> owner(32 * b, -1);
      for (int reg = 0; reg < registers_per_chunk(a); ++reg) {
        for (int j = 0; j < fields_per_register(a); ++j) {
          const ValueBits vb = value_bits(b, a, reg, j);
          int covered = 0;
          for (int r = 0; r < vb.runs; ++r) {
            const BitRun& run = vb.run[r];
            ASSERT_TRUE(run.word >= 0 && run.word < b && run.bit >= 0 && run.bit + run.width <= 32);
            for (int x = 0; x < run.width; ++x) {
              int& o = owner[run.word * 32 + run.bit + x];
              EXPECT_EQ(o, -1) << "b=" << b << " a=" << a << " bit used twice";
              o = reg * 64 + j;
            }
            covered |= int(low_bits(run.width)) << run.value_bit;
          }
          EXPECT_EQ(covered, int(low_bits(b))) << "b=" << b << " a=" << a << " reg=" << reg;
        }
      }
      for (int x = 0; x < 32 * b; ++x) EXPECT_NE(owner[x], -1) << "b=" << b << " a=" << a;
    }
  }
}

// docs/layout.md §4 as a bit loop: at slot position q the p virtual values form a p*b-bit stream
// over the b words (word i = stream bits [i*p, i*p + p), bit x of it = word bit q*p + x). Value v
// starts at t = v*b; whole in one word it reads upward from t; straddling, its high part is the
// rest of word t/p and its low part the start of the next word.
uint32_t stream_reference_value(const uint32_t* words, int b, int a, int reg, int field) {
  const int p = slot_bits(b), slots = a / p;
  const int v = reg / slots, q = field * slots + reg % slots;
  auto stream_bit = [&](int pos) { return (words[pos / p] >> (q * p + pos % p)) & 1u; };
  const int t = v * b, end_of_word = (t / p + 1) * p;
  uint32_t value = 0;
  if (t + b <= end_of_word) {
    for (int x = 0; x < b; ++x) value |= stream_bit(t + x) << x;
  } else {
    const int left = end_of_word - t, right = b - left;
    for (int x = 0; x < left; ++x) value |= stream_bit(t + x) << (right + x);
    for (int x = 0; x < right; ++x) value |= stream_bit(end_of_word + x) << x;
  }
  return value;
}

TEST(LayoutSpec, ExtractRegisterFollowsTheStreamDefinition) {
  std::mt19937 rng(7);
  for (int a : kActBits) {
    for (int b : weight_bits_for(a)) {
      for (int trial = 0; trial < 20; ++trial) {
        uint32_t words[8];
        for (int w = 0; w < b; ++w) words[w] = rng();
        for (int reg = 0; reg < registers_per_chunk(a); ++reg) {
          uint32_t want = 0;
          for (int j = 0; j < fields_per_register(a); ++j)
            want |= stream_reference_value(words, b, a, reg, j) << (j * a);
          ASSERT_EQ(extract_register(words, b, a, reg), want)
              << "b=" << b << " a=" << a << " reg=" << reg;
        }
      }
    }
  }
}

TEST(LayoutSpec, ValueBitsAgreeWithExtractRegister) {
  std::mt19937 rng(11);
  for (int a : kActBits) {
    for (int b : weight_bits_for(a)) {
      uint32_t words[8];
      for (int w = 0; w < b; ++w) words[w] = rng();
      for (int reg = 0; reg < registers_per_chunk(a); ++reg) {
        const uint32_t r = extract_register(words, b, a, reg);
        for (int j = 0; j < fields_per_register(a); ++j) {
          const ValueBits vb = value_bits(b, a, reg, j);
          uint32_t v = 0;
          for (int i = 0; i < vb.runs; ++i)
            v |= ((words[vb.run[i].word] >> vb.run[i].bit) & low_bits(vb.run[i].width))
                 << vb.run[i].value_bit;
          EXPECT_EQ(v, (r >> (j * a)) & low_bits(a)) << "b=" << b << " a=" << a;
        }
      }
    }
  }
}

// Powers of two never straddle: one shift and one mask per register, as for Marlin's int4.
TEST(LayoutSpec, PowerOfTwoWidthsNeedNoMerge) {
  for (int a : kActBits) {
    for (int b : {1, 2, 4, 8}) {
      if (!layout_defined(b, a)) continue;
      for (int reg = 0; reg < registers_per_chunk(a); ++reg) {
        EXPECT_FALSE(register_recipe(b, a, reg).merge) << "b=" << b << " a=" << a;
      }
    }
  }
}

// ---- words written by hand from docs/layout.md --------------------------------------------

// b=4, a=16: a word holds one k16 atom; nibble n holds register n % 4, field n / 4 (the classic
// 0,2,4,6,1,3,5,7 order). With code(row, k) = (k + 3 row) & 15, lane 5 (g=1, t=1), word 0:
//   nibble 0: reg 0 field 0 = (row 1, k 2)  -> 5      nibble 4: reg 0 field 1 = (1, 3)  -> 6
//   nibble 1: reg 1 field 0 = (row 9, k 2)  -> 13     nibble 5: reg 1 field 1 = (9, 3)  -> 14
//   nibble 2: reg 2 field 0 = (row 1, k 10) -> 13     nibble 6: reg 2 field 1 = (1, 11) -> 14
//   nibble 3: reg 3 field 0 = (row 9, k 10) -> 5      nibble 7: reg 3 field 1 = (9, 11) -> 6
// -> 0x6EE65DD5, stored at chunk word 5 * 4 + 0 = 20.
TEST(LayoutSpec, HandComputedInt4Word) {
  EXPECT_EQ(lane_word_offset(4, 5, 0), 20);
  uint32_t word = 0;
  for (int reg = 0; reg < 4; ++reg) {
    for (int j = 0; j < 2; ++j) {
      const ChunkElement e = element_of(16, 5, reg, j);
      const ValueBits vb = value_bits(4, 16, reg, j);
      ASSERT_EQ(vb.runs, 1);
      ASSERT_EQ(vb.run[0].word, 0);
      word |= uint32_t((e.k + 3 * e.row) & 15) << vb.run[0].bit;
    }
  }
  EXPECT_EQ(word, 0x6EE65DD5u);
}

// b=3, a=16 (p=4): register R lies in virtual word v = R / 4 = k / 16 (its atom). With
// code(row, k) = 1 + k / 16 the virtual values are v0=001 v1=010 v2=011 v3=100 in every slot, and
// the 12-bit stream of a slot position splits into the three words as
//   word 0: v0 (001) + high bit of v1 (0) at slot bit 3          -> 0001 = 0x1
//   word 1: low 2 bits of v1 (10) + high 2 bits of v2 (01) above -> 0110 = 0x6
//   word 2: low bit of v2 (1) + v3 (100) above                   -> 1001 = 0x9
// so every lane stores 0x11111111, 0x66666666, 0x99999999; words 0-1 in the 2-word segment
// (chunk words 2 lane, 2 lane + 1), word 2 in the 1-word segment (chunk word 64 + lane).
TEST(LayoutSpec, HandComputedThreeBitWords) {
  const uint32_t want[3] = {0x11111111u, 0x66666666u, 0x99999999u};
  uint32_t words[3] = {0, 0, 0};
  for (int reg = 0; reg < 16; ++reg) {
    for (int j = 0; j < 2; ++j) {
      const ChunkElement e = element_of(16, 0, reg, j);
      const uint32_t code = 1 + e.k / 16;
      const ValueBits vb = value_bits(3, 16, reg, j);
      for (int i = 0; i < vb.runs; ++i)
        words[vb.run[i].word] |= ((code >> vb.run[i].value_bit) & low_bits(vb.run[i].width))
                                 << vb.run[i].bit;
    }
  }
  for (int w = 0; w < 3; ++w) EXPECT_EQ(words[w], want[w]) << "word " << w;
  for (int reg = 0; reg < 16; ++reg)
    EXPECT_EQ(extract_register(want, 3, 16, reg), (1u + reg / 4) * 0x00010001u) << reg;
  EXPECT_EQ(lane_word_offset(3, 7, 0), 14);
  EXPECT_EQ(lane_word_offset(3, 7, 1), 15);
  EXPECT_EQ(lane_word_offset(3, 7, 2), 64 + 7);
}

// b=2, a=8: fields are bytes holding 4 two-bit slots; register R is virtual word R / 4, slot
// R % 4. With every value of register R equal to R % 4, each byte of word 0 reads slots
// (0,1,2,3) = 0b11100100 = 0xE4 and word 1 (registers 4..7) the same.
TEST(LayoutSpec, HandComputedTwoBitWordsForEightBitActivations) {
  const uint32_t want[2] = {0xE4E4E4E4u, 0xE4E4E4E4u};
  for (int reg = 0; reg < 8; ++reg)
    EXPECT_EQ(extract_register(want, 2, 8, reg), uint32_t(reg % 4) * 0x01010101u) << reg;
}

// ---- storage ------------------------------------------------------------------------------

TEST(LayoutSpec, LaneWordsTileTheChunkInAlignedSegments) {
  for (int b = 1; b <= 8; ++b) {
    std::vector<int> hits(32 * b, 0);
    for (int lane = 0; lane < kLanes; ++lane) {
      for (int w = 0; w < b; ++w) {
        const int off = lane_word_offset(b, lane, w);
        ASSERT_TRUE(off >= 0 && off < 32 * b);
        ++hits[off];
        // The first word of a segment starts an aligned vector of segment_words words, and the
        // same word of consecutive lanes is consecutive vectors.
        const int seg = segment_words(b, w);
        const int first = w - (off % seg);
        EXPECT_EQ(lane_word_offset(b, lane, first) % seg, 0) << "b=" << b;
        if (lane > 0) {
          EXPECT_EQ(off - lane_word_offset(b, lane - 1, w), seg) << "b=" << b;
        }
      }
    }
    for (int x = 0; x < 32 * b; ++x) EXPECT_EQ(hits[x], 1) << "b=" << b;
  }
  // Powers of two are plain lane-major.
  for (int b : {1, 2, 4})
    for (int lane = 0; lane < kLanes; ++lane)
      for (int w = 0; w < b; ++w) EXPECT_EQ(lane_word_offset(b, lane, w), lane * b + w);
}

TEST(LayoutSpec, ChunksAreOrderedExpertStripK) {
  // n_padded 128 (8 strips), k_padded 192 (3 chunks), b = 5: 640-byte chunks.
  EXPECT_EQ(chunk_bytes(5), 640);
  EXPECT_EQ(chunk_offset_bytes(5, 128, 192, 0, 0, 1), 640);
  EXPECT_EQ(chunk_offset_bytes(5, 128, 192, 0, 1, 0), 3 * 640);
  EXPECT_EQ(chunk_offset_bytes(5, 128, 192, 1, 0, 0), 8 * 3 * 640);
}

// ---- int8 lanes (int8 activations) ----------------------------------------------------------

// int8_lanes against the dtypes: for every integer weight that rule R10 lets onto int8
// activations (signed and biased up to 8 bits, unsigned up to 7), the stored codes q minus the
// implicit zero point are exactly the dtype's values (core::weight_integer_range), and every code
// in every byte of a register comes out as that value's int8 byte, whatever its neighbours hold.
TEST(Int8Lanes, EveryCodeOfEveryIntegerWeightBecomesItsValue) {
  using core::Dtype;
  using core::DtypeKind;
  std::mt19937 rng(17);
  int weights = 0;
  for (int b = 1; b <= 8; ++b)
    for (const Dtype w : {Dtype::integer(true, b), Dtype::biased_integer(b), Dtype::integer(false, b)}) {
      const core::IntegerRange r = core::weight_integer_range(w, Dtype());
      if (r.lo < -128 || r.hi > 127) continue;  // uint8: refused by R10
      ++weights;
      // jit/codegen.cpp's kImplicitZeroPoint: 2^(b-1) for signed and biased integers, else 0.
      const int zero_point = w.kind() == DtypeKind::kUnsignedInt ? 0 : 1 << (b - 1);
      EXPECT_EQ(-zero_point, r.lo) << w.name();
      EXPECT_EQ((1 << b) - 1 - zero_point, r.hi) << w.name();
      std::uniform_int_distribution<uint32_t> code(0, (1u << b) - 1);
      for (uint32_t q = 0; q < (1u << b); ++q)
        for (int byte = 0; byte < 4; ++byte)
          for (int trial = 0; trial < 8; ++trial) {
            uint32_t fields = 0;
            for (int j = 0; j < 4; ++j) fields |= (j == byte ? q : code(rng)) << (8 * j);
            const uint32_t lanes = int8_lanes(fields, zero_point);
            for (int j = 0; j < 4; ++j) {
              const int want = static_cast<int>((fields >> (8 * j)) & 0xFFu) - zero_point;
              EXPECT_EQ(static_cast<int8_t>((lanes >> (8 * j)) & 0xFFu), want)
                  << w.name() << " code " << ((fields >> (8 * j)) & 0xFFu) << " in byte " << j;
            }
          }
    }
  EXPECT_EQ(weights, 8 + 8 + 7);
}

}  // namespace
}  // namespace hm::quant
