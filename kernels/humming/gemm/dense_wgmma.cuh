// Dense quantized GEMM on Hopper warpgroup MMA (sm90a), 16-bit activations:
//   C[m, n] = A[m, k] * dequant(W)[n, k]^T (+ bias).
//
// Orientation (docs/layout.md §1): weights are the MMA's A operand, taken from registers after
// dequantization; activations are the B operand, read by the tensor cores straight from shared
// memory through a matrix descriptor; tokens are the wgmma's N (8 .. 256), so one kernel serves
// decoding (N = 8) and prefill (N = 256). Warp w of a warpgroup owns the 16-channel strip w of
// the warpgroup's 64 channels, which is exactly one standard-layout chunk row: the layout's
// register order is the wgmma A fragment.
//
// Block: kWarps / 4 warpgroups side by side along N (channels), all sharing the activation tile
// of kBlockM tokens. Pipeline: kStages shared-memory stages, each holding one 64-wide K chunk of
// activations, of every warp's weight chunk and of the block's scale / zero-point codes, filled
// by cp.async kStages - 1 chunks ahead of the compute. Per chunk each warp dequantizes its 16 A
// registers (4 atoms), issues 4 wgmma and waits for them: ptxas serializes every wgmma when a
// non-wgmma instruction writes any wgmma input register while a group is in flight, so the
// dequantization of the next chunk cannot overlap this chunk's wgmma within a warpgroup; the
// overlap comes from the other warpgroups and blocks on the SM instead. A stage is refilled
// once every warp is past the barrier that follows its last reader.
// Split-K and the epilogue are shared with the mma.sync kernel (gemm/epilogue.cuh).
#pragma once

#include <humming/core/types.cuh>
#include <humming/gemm/dequant.cuh>
#include <humming/gemm/epilogue.cuh>
#include <humming/gemm/params.h>
#include <humming/layout/spec.h>
#include <humming/ptx/mma.cuh>
#include <humming/ptx/wgmma.cuh>

namespace hm::gemm {

template <class C>
struct DenseWgmma {
  using Act = typename C::Act;
  using D = Dequant<C>;
  using RowTerms = typename D::RowTerms;
  static constexpr int kBits = C::kWeightBits;
  static constexpr int kWarps = C::kWarps;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kStages = C::kStages;
  static constexpr int kBlockN = 16 * kWarps;
  static constexpr int kTokenGroups = C::kBlockM / 8;
  static constexpr int kChunkBytes = quant::chunk_bytes(kBits);
  static constexpr int kSlots = D::kGroupSlots;
  static constexpr int kScaleBytes = D::kGroupScalesInMainloop ? D::kScaleCodeBytes : 0;
  static constexpr int kZeroBytes = C::kZeroPoint != kZeroNone ? D::kZeroCodeBytes : 0;
  // One stage: [activations kBlockM x 128 B][weights kWarps x chunk][scale codes][zero codes].
  static constexpr int kWeightOffset = C::kBlockM * 128;
  static constexpr int kScaleOffset = kWeightOffset + kWarps * kChunkBytes;
  static constexpr int kZeroOffset = kScaleOffset + kSlots * kBlockN * kScaleBytes;
  static constexpr int kStageBytes = dense_wgmma_stage_bytes(C::kBlockM, kWarps, kBits, kSlots,
                                                             kScaleBytes, kZeroBytes);
  using Epilogue = DenseEpilogue<C, kWarps, 1>;

  static_assert(kWarps % 4 == 0 && kWarps >= 4, "whole warpgroups");
  static_assert(C::kBlockM % 8 == 0 && C::kBlockM >= 8 && C::kBlockM <= 256, "wgmma N is 8..256");
  static_assert(kStages >= 2, "double buffering at least");
  static_assert(C::kAlignedK, "activation rows load in 16-byte units (K % 8 == 0)");
  static_assert(C::kScaleKind != kScaleBlock, "block scales use the mma.sync kernel");
  static_assert(dense_wgmma_smem_bytes(C::kBlockM, kWarps, kStages, kBits, kSlots, kScaleBytes,
                                       kZeroBytes) -
                        1024 >=
                    (kStages * kStageBytes > Epilogue::kSmemBytes ? kStages * kStageBytes
                                                                  : Epilogue::kSmemBytes),
                "the host sizes dynamic shared memory with dense_wgmma_smem_bytes()");

  // Issues the cp.async copies of chunk kc into the stage at shared address `stage`.
  static __device__ __forceinline__ void load_stage(const DenseParams& p, uint32 stage, int64_t kc,
                                                    int64_t m0, int64_t strip0) {
    // Activations: row r = token m0 + r, 16-byte unit u at u ^ (r % 8) (the 128B swizzle).
    const Act* a = static_cast<const Act*>(p.a);
    for (int u = threadIdx.x; u < C::kBlockM * 8; u += kThreads) {
      const int r = u / 8, unit = u % 8;
      const int64_t token = m0 + r, kk = kc * 64 + unit * 8;
      const bool valid = token < p.m && kk < p.k;  // k % 8 == 0: a unit is all in or all out
      ptx::cp_async_16(stage + r * 128 + ((unit ^ (r & 7)) * 16), valid ? a + token * p.k + kk : a,
                       valid ? 16 : 0);
    }
    // Weights: warp w's chunk is strip strip0 + w (contiguous in the packed tensor).
    constexpr int kUnitsPerChunk = kChunkBytes / 16;
    const char* w = static_cast<const char*>(p.w);
    const int64_t strips = p.n_pad / 16;
    for (int u = threadIdx.x; u < kWarps * kUnitsPerChunk; u += kThreads) {
      const int warp = u / kUnitsPerChunk, unit = u % kUnitsPerChunk;
      const bool valid = strip0 + warp < strips;
      const char* src =
          w + quant::chunk_offset_bytes(kBits, p.n_pad, p.k_pad, 0, valid ? strip0 + warp : 0, kc) +
          unit * 16;
      ptx::cp_async_16(stage + kWeightOffset + warp * kChunkBytes + unit * 16, src, valid ? 16 : 0);
    }
    // Codes of the block's channels for each group slot: [slot][channel]. Channel blocks start
    // on a multiple of 64 and n_pad is one, so a 16-byte unit is all in or all out.
    const int64_t n0 = strip0 * 16;
    if constexpr (kScaleBytes > 0) {
      constexpr int kUnits = kBlockN * kScaleBytes / 16;
      const char* s = static_cast<const char*>(p.scales);
      for (int u = threadIdx.x; u < kSlots * kUnits; u += kThreads) {
        const int slot = u / kUnits, unit = u % kUnits;
        const bool valid = n0 + unit * 16 / kScaleBytes < p.n_pad;
        const int64_t group = D::group_of_slot(kc, slot);
        ptx::cp_async_16(stage + kScaleOffset + (slot * kUnits + unit) * 16,
                         valid ? s + (group * p.scale_cols + n0) * kScaleBytes + unit * 16 : s,
                         valid ? 16 : 0);
      }
    }
    if constexpr (kZeroBytes > 0) {
      constexpr int kUnits = kBlockN * kZeroBytes / 16;
      const char* z = static_cast<const char*>(p.zeros);
      for (int u = threadIdx.x; u < kSlots * kUnits; u += kThreads) {
        const int slot = u / kUnits, unit = u % kUnits;
        const bool valid = n0 + unit * 16 / kZeroBytes < p.n_pad;
        const int64_t group = D::group_of_slot(kc, slot);
        ptx::cp_async_16(stage + kZeroOffset + (slot * kUnits + unit) * 16,
                         valid ? z + (group * p.n_pad + n0) * kZeroBytes + unit * 16 : z,
                         valid ? 16 : 0);
      }
    }
  }

  // One lane's kBits words of its warp's chunk in a stage (the layout's lane offsets).
  static __device__ __forceinline__ void read_words(uint32 (&words)[kBits], const unsigned char* chunk,
                                                    int lane) {
    const uint32* base = reinterpret_cast<const uint32*>(chunk);
#pragma unroll
    for (int w = 0; w < kBits;) {
      const int seg = quant::segment_words(kBits, w);
      const uint32* src = base + quant::lane_word_offset(kBits, lane, w);
      if (seg == 4) {
        const uint4 v = *reinterpret_cast<const uint4*>(src);
        words[w] = v.x;
        words[w + 1] = v.y;
        words[w + 2] = v.z;
        words[w + 3] = v.w;
      } else if (seg == 2) {
        const uint2 v = *reinterpret_cast<const uint2*>(src);
        words[w] = v.x;
        words[w + 1] = v.y;
      } else {
        words[w] = *src;
      }
      w += seg;
    }
  }

  static __device__ __forceinline__ void run(const DenseParams& p) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    // The 128B swizzle needs 1024-byte aligned tiles; the host adds 1024 bytes of slack.
    const uint32 raw_address = ptx::smem_address(smem_raw);
    const uint32 base_address = (raw_address + 1023u) & ~1023u;
    unsigned char* base = smem_raw + (base_address - raw_address);

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4;
    const int64_t strip0 = static_cast<int64_t>(blockIdx.x) * kWarps;
    const int64_t m0 = static_cast<int64_t>(blockIdx.y) * C::kBlockM;
    const int64_t k_chunks = p.k_pad / 64;
    const int64_t kc_begin = static_cast<int64_t>(blockIdx.z) * p.k_chunks_per_split;
    const int64_t kc_end =
        kc_begin + p.k_chunks_per_split < k_chunks ? kc_begin + p.k_chunks_per_split : k_chunks;
    const int n = static_cast<int>(kc_end - kc_begin);  // >= 1: the host never makes empty splits
    // Blocks walk their K range from different starting chunks. In the standard layout a strip's
    // chunks are contiguous along K, so strips are k_pad / 64 chunks apart (a power of two for
    // the usual K): blocks in lockstep at the same chunk would all hit addresses that differ
    // only in high bits (the same DRAM channels). The order is fixed per block, so results stay
    // deterministic.
    const int rotation = static_cast<int>((blockIdx.x * 5u + blockIdx.y * 3u) % static_cast<unsigned>(n));
    auto chunk = [&](int i) -> int64_t {
      const int j = i + rotation;
      return kc_begin + (j >= n ? j - n : j);
    };

    float acc[1][kTokenGroups][4];
#pragma unroll
    for (int j = 0; j < kTokenGroups; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[0][j][q] = 0.0f;

#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < n) load_stage(p, base_address + s * kStageBytes, chunk(s), m0, strip0);
      ptx::cp_async_commit();  // empty groups keep the count uniform
    }

    for (int i = 0; i < n; ++i) {
      ptx::cp_async_wait<kStages - 2>();
      // Chunk i has landed for every thread, and every warp has finished the wgmma of chunk
      // i - 1 (it waits at the end of each step), so chunk i - 1's stage can be refilled.
      __syncthreads();
      const int next = i + kStages - 1;
      if (next < n) load_stage(p, base_address + (next % kStages) * kStageBytes, chunk(next), m0,
                               strip0);
      ptx::cp_async_commit();

      const uint32 stage_address = base_address + (i % kStages) * kStageBytes;
      const unsigned char* stage = base + (i % kStages) * kStageBytes;
      uint32 words[kBits];
      read_words(words, stage + kWeightOffset + warp * kChunkBytes, lane);
      RowTerms lo[kSlots], hi[kSlots];
#pragma unroll
      for (int slot = 0; slot < kSlots; ++slot) {
        typename D::RowCodes c_lo{0, 0}, c_hi{0, 0};
        const int row = warp * 16 + g;
        if constexpr (kScaleBytes > 0) {
          const void* codes = stage + kScaleOffset + slot * kBlockN * kScaleBytes;
          c_lo.scale = D::scale_code(codes, row);
          c_hi.scale = D::scale_code(codes, row + 8);
        }
        if constexpr (kZeroBytes > 0) {
          const void* codes = stage + kZeroOffset + slot * kBlockN * kZeroBytes;
          c_lo.zero = D::zero_code(codes, row);
          c_hi.zero = D::zero_code(codes, row + 8);
        }
        lo[slot] = D::row_terms(c_lo);
        hi[slot] = D::row_terms(c_hi);
      }
      uint32 a[16];
      D::chunk_fragments(a, words, lo, hi);

      ptx::wgmma_fence();
#pragma unroll
      for (int x = 0; x < 4; ++x)
        C::Wgmma::run(acc[0], a[4 * x], a[4 * x + 1], a[4 * x + 2], a[4 * x + 3],
                      ptx::smem_descriptor_k_sw128(stage_address + x * 32));
      ptx::wgmma_commit();
      ptx::wgmma_wait<0>();
    }
    ptx::wgmma_wait<0>();
#pragma unroll
    for (int j = 0; j < kTokenGroups; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) ptx::fence_operand(acc[0][j][q]);
    Epilogue::run(p, reinterpret_cast<float*>(base), acc, strip0 * 16, m0);
  }
};

}  // namespace hm::gemm

// Defines the extern "C" kernel `name` for the configuration struct `Config` (which names its
// wgmma instruction as Config::Wgmma). kMinBlocks (the tuner's blocks per SM) caps registers so
// that many blocks fit, which the split-K sizing counts on.
#define HM_DEFINE_DENSE_WGMMA(name, Config)                                                   \
  extern "C" __global__ void __launch_bounds__(Config::kWarps * 32, Config::kMinBlocks)      \
      name(const ::hm::gemm::DenseParams params) {                                             \
    ::hm::gemm::DenseWgmma<Config>::run(params);                                               \
  }
