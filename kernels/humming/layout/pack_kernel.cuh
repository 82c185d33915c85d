// The GPU packer: canonical codes in device memory -> the standard weight layout, bit for bit what
// the host packer (src/quant/layout.cpp) writes, plus the side-tensor reorder for scales, zero
// points and the global scale. The per-lane work is in pack.h (shared with the host emulation);
// this file only maps it onto warps and stores the words.
#pragma once

#include <humming/core/types.cuh>
#include <humming/layout/pack.h>

namespace hm::pack {

// Stores `count` (4, 2 or 1) consecutive words with one naturally aligned vector store: a warp's
// store of one segment is then a single contiguous 512 / 256 / 128-byte run (docs/layout.md §5).
__device__ __forceinline__ void store_words(uint32_t* dst, const uint32_t* w, int count) {
  if (count == 4) {
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"l"(dst), "r"(w[0]), "r"(w[1]),
                 "r"(w[2]), "r"(w[3])
                 : "memory");
  } else if (count == 2) {
    asm volatile("st.global.v2.u32 [%0], {%1, %2};\n" ::"l"(dst), "r"(w[0]), "r"(w[1]) : "memory");
  } else {
    asm volatile("st.global.u32 [%0], %1;\n" ::"l"(dst), "r"(w[0]) : "memory");
  }
}

// One warp per chunk, grid-striding over chunks. The reads of a warp cover 16 rows x 64 bytes of
// codes in 8-row runs of 4F consecutive bytes (the L1 serves the rest of each sector); the
// writes are the fully coalesced segment stores above.
template <int B, int A>
__device__ __forceinline__ void pack_weight(const WeightParams& p) {
  const int lane = static_cast<int>(threadIdx.x) % quant::kLanes;
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kWeightWarps + threadIdx.x / quant::kLanes;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kWeightWarps;
  for (int64_t chunk = warp; chunk < p.chunks; chunk += stride) {
    uint32_t words[B];
    lane_words<B, A>(p, chunk, lane, words);
    // The chunk number is its position in the packed order, so its offset is chunk * bytes; the
    // spec's function says so rather than this file.
    const int64_t strips_chunks = p.strips * p.k_chunks;
    const int64_t offset = quant::chunk_offset_bytes(
        B, p.strips * quant::kChunkRows, p.k_chunks * quant::kChunkK, chunk / strips_chunks,
        chunk / p.k_chunks % p.strips, chunk % p.k_chunks);
    uint32_t* base = reinterpret_cast<uint32_t*>(p.out + offset);
#pragma unroll
    for (int w = 0; w < B; w += quant::segment_words(B, w))
      store_words(base + quant::lane_word_offset(B, lane, w), words + w, quant::segment_words(B, w));
  }
}

template <typename T>
__device__ __forceinline__ void pack_side(const SideParams& p) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.total;
       i += stride)
    side_element<T>(p, i);
}

}  // namespace hm::pack

// Defines the extern "C" weight packer `name` for B-bit weights and A-bit activations. Launch
// with blocks of kWeightWarps * 32 threads and any grid (it strides; at most kMaxGridBlocks).
#define HM_DEFINE_PACK_WEIGHT(name, B, A)                                                       \
  extern "C" __global__ void __launch_bounds__(::hm::pack::kWeightWarps * 32)                  \
      name(const ::hm::pack::WeightParams p) {                                                 \
    ::hm::pack::pack_weight<B, A>(p);                                                          \
  }

// Defines the extern "C" side-tensor reorder `name` for elements of type T. Launch with blocks of
// kSideThreads threads and any grid.
#define HM_DEFINE_PACK_SIDE(name, T)                                                            \
  extern "C" __global__ void __launch_bounds__(::hm::pack::kSideThreads)                       \
      name(const ::hm::pack::SideParams p) {                                                   \
    ::hm::pack::pack_side<T>(p);                                                               \
  }
