// The Humming standard weight layout as pure index arithmetic (docs/layout.md is the prose; this is
// the executable definition). Everything here is constexpr, lane-local and free of the standard
// library, so the host packer, the tests and the GPU code (kernels, GPU packer, code generator)
// derive every position from the same functions.
//
// Vocabulary (docs/layout.md §2): a = activation bits (16, 8, 4), b = weight bits (1..8, b <= a).
// A chunk is a 16-row x 64-k tile of one expert's weight; each of the 32 lanes of a warp owns 32 of
// its values, split into `a` MMA registers of 32/a fields of a bits each; the lane stores them in
// b 32-bit words.
#pragma once

// Under NVRTC (no standard headers) humming/core/types.cuh supplies the fixed-width integers.
#if defined(__CUDACC_RTC__)
#include <humming/core/types.cuh>
#else
#include <stdint.h>
#endif

#ifndef HM_HOST_DEVICE
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define HM_HOST_DEVICE __host__ __device__
#else
#define HM_HOST_DEVICE
#endif
#endif

namespace hm::quant {

inline constexpr int kChunkRows = 16;      // rows (output channels n) of a chunk
inline constexpr int kChunkK = 64;         // k columns of a chunk
inline constexpr int kLanes = 32;          // lanes of a warp
inline constexpr int kValuesPerLane = 32;  // kChunkRows * kChunkK / kLanes
inline constexpr int kPadN = 64;           // N is padded to this (one wgmma warpgroup of rows)
inline constexpr int kPadK = kChunkK;      // K is padded to this (and to the group size)

// ---- geometry of one lane's registers -------------------------------------------------------

// Whether the layout is defined for weights of b bits feeding activations of a bits.
HM_HOST_DEVICE constexpr bool layout_defined(int weight_bits, int act_bits) {
  return (act_bits == 16 || act_bits == 8 || act_bits == 4) && weight_bits >= 1 &&
         weight_bits <= 8 && weight_bits <= act_bits;
}
// k extent of one MMA atom: m16n8k16 (16-bit), m16n8k32 (8-bit), m16n8k64 (4-bit).
HM_HOST_DEVICE constexpr int atom_k(int act_bits) { return 256 / act_bits; }
// Values (fields of act_bits bits) in one 32-bit MMA register.
HM_HOST_DEVICE constexpr int fields_per_register(int act_bits) { return 32 / act_bits; }
// Registers a lane holds per chunk: 4 per atom, 64 / atom_k atoms per chunk.
HM_HOST_DEVICE constexpr int registers_per_chunk(int act_bits) { return act_bits; }
// Power-of-two slot a value occupies before the b <-> p compaction: next_pow2(b).
HM_HOST_DEVICE constexpr int slot_bits(int weight_bits) {
  return weight_bits <= 1 ? 1 : weight_bits <= 2 ? 2 : weight_bits <= 4 ? 4 : 8;
}
// Slots of slot_bits in one field of act_bits.
HM_HOST_DEVICE constexpr int slots_per_field(int weight_bits, int act_bits) {
  return act_bits / slot_bits(weight_bits);
}
// Bytes of one chunk: 32 lanes x b words.
HM_HOST_DEVICE constexpr int chunk_bytes(int weight_bits) { return kLanes * 4 * weight_bits; }

// `value` repeated every `period` bits across 32 bits (bits pushed past bit 31 are dropped).
HM_HOST_DEVICE constexpr uint32_t replicate(uint32_t value, int period) {
  uint32_t r = 0;
  for (int i = 0; i < 32; i += period) r |= value << i;
  return r;
}
HM_HOST_DEVICE constexpr uint32_t low_bits(int n) { return n >= 32 ? 0xFFFFFFFFu : (1u << n) - 1u; }

// ---- (row, k) of a chunk <-> (lane, register, field) -----------------------------------------
// PTX ISA 9.7.14.5, "Matrix Fragments for mma.m16n8k16 / m16n8k32 / m16n8k64" (matrix A,
// .f16/.bf16, .s8/.e4m3, .s4/.e2m1): lane l = 4g + t holds rows g and g + 8; register r of atom x
// covers row g + 8 (r & 1) and k = x*KT + (r >> 1) KT/2 + t KT/8 + j. Numbering the chunk's
// registers R = 4x + r turns this into one formula for every activation width:
//   row = g + 8 (R & 1),   k = (R >> 1) * 4F + t * F + j,   F = fields_per_register, j < F,
// i.e. the F values of a register are F consecutive k of one row.

struct ChunkElement {
  int row;  // 0..15
  int k;    // 0..63
};
struct LaneField {
  int lane;   // 0..31
  int reg;    // 0..registers_per_chunk - 1
  int field;  // 0..fields_per_register - 1 (field j occupies bits [j*a, j*a + a) of the register)
};

HM_HOST_DEVICE constexpr ChunkElement element_of(int act_bits, int lane, int reg, int field) {
  const int f = fields_per_register(act_bits);
  return ChunkElement{lane / 4 + 8 * (reg & 1), (reg >> 1) * 4 * f + (lane % 4) * f + field};
}
HM_HOST_DEVICE constexpr LaneField lane_field_of(int act_bits, int row, int k) {
  const int f = fields_per_register(act_bits);
  return LaneField{4 * (row % 8) + (k % (4 * f)) / f, 2 * (k / (4 * f)) + row / 8, k % f};
}

// ---- where a value's bits live in the lane's b words -----------------------------------------
// Step 1 (virtual words, p = slot_bits(b), S = a / p slots per field): register R belongs to
// virtual word v = R / S, slot s = R % S; its field j sits in slot q = j*S + s of that word, i.e.
// bits [q*p, q*p + b). p virtual words hold the 32 values (for b = p they are the stored words).
// Step 2 (compaction, b < p only): at every slot position q the p values v = 0..p-1 form a stream
// of p*b bits over the b stored words (p bits each, word i covering stream bits [i*p, i*p + p)).
// Value v starts at t = v*b: word i = t / p, offset r = t % p. If r + b <= p it lies whole in
// word i at slot bits [r, r + b). Otherwise it straddles: its high `left` = p - r bits fill slot
// bits [r, p) of word i and its low `right` = b - left bits fill slot bits [0, right) of word
// i + 1 (high part first, so one shift joins the halves: docs/layout.md §4).

struct BitRun {
  int word;       // stored word of the lane, 0..b-1
  int bit;        // first bit in that word
  int width;      // bits in this run
  int value_bit;  // first bit of the value it holds
};
struct ValueBits {
  int runs;  // 1, or 2 when the value straddles two words
  BitRun run[2];
};

HM_HOST_DEVICE constexpr ValueBits value_bits(int weight_bits, int act_bits, int reg, int field) {
  const int b = weight_bits, p = slot_bits(b), s_per_field = act_bits / p;
  const int v = reg / s_per_field, s = reg % s_per_field;
  const int slot_base = (field * s_per_field + s) * p;
  const int t = v * b, i = t / p, r = t % p;
  ValueBits out{1, {{i, slot_base + r, b, 0}, {0, 0, 0, 0}}};
  if (r + b > p) {
    const int left = p - r, right = b - left;
    out.runs = 2;
    out.run[0] = BitRun{i, slot_base + r, left, right};
    out.run[1] = BitRun{i + 1, slot_base, right, 0};
  }
  return out;
}

// ---- the kernel's extraction recipe (docs/layout.md §5) ---------------------------------------
// Register R, with each field's value in its low b bits, is
//   src = merge ? select(merge_mask, words[word] >> merge_shift, words[word + 1]) : words[word]
//   reg = (src >> shift) & mask
// where select(m, x, y) = (x & m) | (y & ~m) is one lop3 (LUT 0xE4 with m as the third operand).
// The merged word depends only on the virtual word, so a kernel computes it once per S registers.

struct RegisterRecipe {
  int word;             // stored word holding the value (its high part when merging)
  bool merge;           // the value straddles words `word` and `word + 1`
  int merge_shift;      // p - b: aligns the high part of words[word] above the low part
  uint32_t merge_mask;  // bits taken from words[word] >> merge_shift, the rest from word + 1
  int shift;            // right shift of the source word
  uint32_t mask;        // the b low bits of every field
};

HM_HOST_DEVICE constexpr RegisterRecipe register_recipe(int weight_bits, int act_bits, int reg) {
  const int b = weight_bits, p = slot_bits(b), s_per_field = act_bits / p;
  const int v = reg / s_per_field, s = reg % s_per_field;
  const int t = v * b, i = t / p, r = t % p;
  RegisterRecipe out{i, false, 0, 0u, r + s * p, replicate(low_bits(b), act_bits)};
  if (r + b > p) {
    const int right = b - (p - r);
    out.merge = true;
    out.merge_shift = p - b;
    out.merge_mask = replicate(low_bits(b) & ~low_bits(right), p);
    out.shift = s * p;
  }
  return out;
}

// The executable form of the recipe: register `reg` of a lane whose b stored words are `words`.
HM_HOST_DEVICE constexpr uint32_t extract_register(const uint32_t* words, int weight_bits,
                                                   int act_bits, int reg) {
  const RegisterRecipe rc = register_recipe(weight_bits, act_bits, reg);
  uint32_t src = words[rc.word];
  if (rc.merge) {
    const uint32_t hi = src >> rc.merge_shift, lo = words[rc.word + 1];
    src = (hi & rc.merge_mask) | (lo & ~rc.merge_mask);
  }
  return (src >> rc.shift) & rc.mask;
}

// The same with the recipe fixed at compile time: what kernels call, so that no recipe arithmetic
// (masks built by loops) is left for run time.
template <int kWeightBits, int kActBits, int kReg>
HM_HOST_DEVICE constexpr uint32_t extract_register_fixed(const uint32_t* words) {
  constexpr RegisterRecipe rc = register_recipe(kWeightBits, kActBits, kReg);
  uint32_t src = words[rc.word];
  if constexpr (rc.merge) {
    const uint32_t hi = src >> rc.merge_shift, lo = words[rc.word + 1];
    src = (hi & rc.merge_mask) | (lo & ~rc.merge_mask);
  }
  return (src >> rc.shift) & rc.mask;
}

// A register of the 8-bit layout (a = 8) as four int8 lanes, for int8 activations: each byte's
// field q (below 2^b, upper bits clear, as extract_register gives it) becomes the two's
// complement of q - zero_point, the weight's value (docs/layout.md: offset-binary codes, the
// implicit zero point 2^(b-1) for signed and biased integers, 0 for unsigned ones of at most 7
// bits). Per byte q + 128 - zero_point lies in [0, 255] (q < 2^b <= 2 * zero_point, or q < 128
// when it is 0), so the add carries into no other byte, and flipping bit 7 turns that
// offset-binary byte into q - zero_point. For 8-bit weights the add is 0: one xor.
HM_HOST_DEVICE constexpr uint32_t int8_lanes(uint32_t fields, int zero_point) {
  return (fields + static_cast<uint32_t>(128 - zero_point) * 0x01010101u) ^ 0x80808080u;
}

// ---- where a lane's words live in the chunk ---------------------------------------------------
// The b words of all 32 lanes are stored as segments of 4, 2 and 1 words per lane (b = 4q + 2x + y:
// q segments of 4, then x of 2, then y of 1), each segment lane-major. A lane therefore reads its
// words with aligned 16/8/4-byte vector loads, and every load instruction of a warp reads one
// contiguous 512/256/128-byte run (coalesced in global memory, conflict-free in shared memory).
// For b = 1, 2, 4 this is plain lane-major order.

// Offset, in 32-bit words from the start of the chunk, of stored word `word` of `lane`.
HM_HOST_DEVICE constexpr int lane_word_offset(int weight_bits, int lane, int word) {
  const int quads = weight_bits / 4, rest = weight_bits % 4;
  if (word < 4 * quads) return (word / 4) * 4 * kLanes + lane * 4 + word % 4;
  int w = word - 4 * quads, base = quads * 4 * kLanes;
  if (rest & 2) {
    if (w < 2) return base + lane * 2 + w;
    w -= 2;
    base += 2 * kLanes;
  }
  return base + lane + w;
}
// Words per lane in the segment that holds stored word `word` (the widest vector load for it).
HM_HOST_DEVICE constexpr int segment_words(int weight_bits, int word) {
  const int quads = weight_bits / 4, rest = weight_bits % 4;
  if (word < 4 * quads) return 4;
  return ((rest & 2) && word - 4 * quads < 2) ? 2 : 1;
}

// ---- where a chunk lives in the tensor --------------------------------------------------------
// Chunks are ordered [expert][n / 16][k / 64]: each 16-row strip is contiguous along K.
HM_HOST_DEVICE constexpr int64_t chunk_offset_bytes(int weight_bits, int64_t n_padded,
                                                    int64_t k_padded, int64_t expert, int64_t strip,
                                                    int64_t k_chunk) {
  const int64_t strips = n_padded / kChunkRows, k_chunks = k_padded / kChunkK;
  return ((expert * strips + strip) * k_chunks + k_chunk) * chunk_bytes(weight_bits);
}

}  // namespace hm::quant
