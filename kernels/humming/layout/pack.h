// GPU packing into the standard layout (docs/layout.md §10): the kernels' runtime arguments and
// the work of one lane of one chunk, as plain host/device functions. The device kernels
// (pack_kernel.cuh), the host launcher (src/api/pack_device.cpp) and the mock driver's host
// emulation all use this one definition; every position comes from spec.h.
#pragma once

#include <humming/layout/spec.h>

// Full unrolling on the device, where it keeps a lane's words in registers (the spec's functions
// fold to constants); the host emulation (mock driver) does not need the speed.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define HM_PACK_UNROLL _Pragma("unroll")
#else
#define HM_PACK_UNROLL
#endif

namespace hm::pack {

// One warp per chunk: lane l of the warp computes and stores lane l's words of the chunk.
inline constexpr int kWeightWarps = 4;        // warps (chunks in flight) per block
inline constexpr int kSideThreads = 256;      // threads per block of the side-tensor kernels
inline constexpr int64_t kMaxGridBlocks = 65535;  // blocks of either kernel; they grid-stride

// Canonical codes -> packed weight (hm_pack_device). Passed by value as the kernel's only
// parameter; every field has a fixed size, so host and device agree on the layout.
struct WeightParams {
  const uint8_t* codes;  // [experts][n][k] canonical codes, one per byte (any alignment)
  uint8_t* out;          // chunks [experts][strips][k_chunks], 16-byte aligned
  int64_t n, k;          // the canonical shape of one expert
  int64_t strips;        // n_padded / 16
  int64_t k_chunks;      // k_padded / 64
  int64_t chunks;        // experts * strips * k_chunks
  uint32_t code_xor;     // stored code = canonical code ^ code_xor (docs/layout.md §7)
  uint32_t pad_code;     // the canonical code written where (n, k) lies outside the weight
};

// Canonical-order side tensor -> packed order, for scales, zero points and the global scale
// (already encoded in their dtype): in [experts][rows][groups_in] -> out [experts][groups][columns]
// of one element type, with zero bytes where (group, column) lies outside the input.
struct SideParams {
  const void* in;     // element-aligned
  void* out;          // element-aligned
  int64_t rows;       // canonical rows (scale rows), <= columns
  int64_t groups_in;  // canonical groups along K, <= groups
  int64_t groups;     // packed groups
  int64_t columns;    // packed columns
  int64_t total;      // experts * groups * columns: elements written
};

// The B stored words of `lane` in chunk number `chunk` (chunk numbers follow the packed order,
// (expert * strips + strip) * k_chunks + k_chunk). Only the low B bits of a code are used.
template <int B, int A>
HM_HOST_DEVICE inline void lane_words(const WeightParams& p, int64_t chunk, int lane,
                                      uint32_t (&words)[B]) {
  static_assert(quant::layout_defined(B, A), "the standard layout has no place for this (b, a)");
  const int64_t k_chunk = chunk % p.k_chunks, row_strip = chunk / p.k_chunks;
  const int64_t strip = row_strip % p.strips, expert = row_strip / p.strips;
  const int64_t n0 = strip * quant::kChunkRows, k0 = k_chunk * quant::kChunkK;
  const uint8_t* codes = p.codes + expert * p.n * p.k;
HM_PACK_UNROLL
  for (int w = 0; w < B; ++w) words[w] = 0;
  // With B and A fixed and both loops unrolled, element_of and value_bits fold to constants: each
  // value costs a load, an xor and one or two shift-and-or into its word.
HM_PACK_UNROLL
  for (int reg = 0; reg < quant::registers_per_chunk(A); ++reg) {
HM_PACK_UNROLL
    for (int field = 0; field < quant::fields_per_register(A); ++field) {
      const quant::ChunkElement el = quant::element_of(A, lane, reg, field);
      const int64_t n = n0 + el.row, k = k0 + el.k;
      const uint32_t canonical = (n < p.n && k < p.k) ? uint32_t(codes[n * p.k + k]) : p.pad_code;
      const uint32_t code = (canonical ^ p.code_xor) & quant::low_bits(B);
      const quant::ValueBits vb = quant::value_bits(B, A, reg, field);
HM_PACK_UNROLL
      for (int r = 0; r < vb.runs; ++r) {
        const quant::BitRun& run = vb.run[r];
        words[run.word] |= ((code >> run.value_bit) & quant::low_bits(run.width)) << run.bit;
      }
    }
  }
}

// Element `i` of the packed side tensor (i < p.total), as T (1, 2 or 4 bytes).
template <typename T>
HM_HOST_DEVICE inline void side_element(const SideParams& p, int64_t i) {
  const int64_t column = i % p.columns, expert_group = i / p.columns;
  const int64_t group = expert_group % p.groups, expert = expert_group / p.groups;
  T value = 0;
  if (column < p.rows && group < p.groups_in)
    value = static_cast<const T*>(p.in)[(expert * p.rows + column) * p.groups_in + group];
  static_cast<T*>(p.out)[i] = value;
}

}  // namespace hm::pack
