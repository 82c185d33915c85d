// Dense quantized GEMM on mma.sync for 16-bit activations (sm75: f16 with m16n8k8 pairs; sm80+:
// f16 and bf16 with m16n8k16):  C[m, n] = A[m, k] * dequant(W)[n, k]^T (+ bias).
//
// Orientation (docs/layout.md §1): weights are the MMA's A operand (16 output channels per
// fragment), activations the B operand (8 tokens per fragment), so the accumulators hold C^T.
// Block: kWarps warps; warp w owns kWarpStrips 16-channel strips and every token of the block's
// kBlockM. Per 64-wide K chunk: the block stages the activation tile [kBlockM][64] in shared
// memory (cp.async, double buffered, XOR-swizzled for ldmatrix); each warp loads its own weight
// chunks straight into registers one chunk ahead (they are used by this warp only), extracts
// the MMA registers by the layout's recipe, dequantizes them into the activation type with the
// group scale and zero point applied, and runs the MMAs. Split-K over gridDim.z: each split
// writes f32 partials, the last split to finish a tile sums them in split order (deterministic)
// and runs the epilogue (channel scale, global scale, bias, conversion, store).
#pragma once

#include <humming/core/types.cuh>
#include <humming/dtype/convert.cuh>
#include <humming/gemm/dequant.cuh>
#include <humming/gemm/epilogue.cuh>
#include <humming/gemm/params.h>
#include <humming/layout/spec.h>
#include <humming/ptx/mma.cuh>

namespace hm::gemm {

template <class C>
struct DenseMma {
  using Act = typename C::Act;
  using Out = typename C::Out;
  static constexpr int kBits = C::kWeightBits;
  static constexpr int kActBits = 16;
  static constexpr int kRegs = quant::registers_per_chunk(kActBits);  // 16 per chunk
  static constexpr int kTokenGroups = C::kBlockM / 8;
  static constexpr int kThreads = C::kWarps * 32;
  using D = Dequant<C>;
  using RowCodes = typename D::RowCodes;
  using RowTerms = typename D::RowTerms;
  static constexpr bool kIsF16 = D::kIsF16;
  static constexpr int kGroupSlots = D::kGroupSlots;

  static constexpr int kDepth = dense_chunks_in_flight(C::kWarpStrips, kBits);
  struct Smem {
    alignas(128) Act a[2][kDepth][C::kBlockM][64];
  };
  static_assert(!C::kMoe, "the indexed MoE schedule runs on the wgmma kernel");
  static_assert(!C::kAccF16 || kIsF16, "f16 accumulation needs f16 activations (rule R5)");
  using Acc = AccFragments<C::kAccF16, C::kWarpStrips, kTokenGroups>;
  // Scale / zero-point codes are loaded with the weight chunks, one group ahead (D explains why).
  using ChunkCodes = RowCodes[C::kWarpStrips][kGroupSlots][2];  // [strip][slot][row, row+8]

  // ---- loads ---------------------------------------------------------------------------------

  // The activation tile of chunk kc into stage `stage`: row r = token m0 + r, 64 values; 16-byte
  // unit u of row r is stored at unit u ^ (r % 8) so ldmatrix reads are conflict-free.
  static __device__ __forceinline__ void load_activations(const DenseParams& p, Smem& s, int stage,
                                                          int d, int64_t m0, int64_t kc) {
    const Act* a = static_cast<const Act*>(p.a);
    if constexpr (C::kAlignedK) {
      for (int u = threadIdx.x; u < C::kBlockM * 8; u += kThreads) {
        const int r = u / 8, unit = u % 8;
        const int64_t token = m0 + r, kk = kc * 64 + unit * 8;
        const bool valid = token < p.m && kk < p.k;  // k % 8 == 0: a unit is all in or all out
        const Act* src = valid ? a + token * p.k + kk : a;
        ptx::cp_async_16(ptx::smem_address(&s.a[stage][d][r][(unit ^ (r & 7)) * 8]), src,
                         valid ? 16 : 0);
      }
    } else {
      for (int e = threadIdx.x; e < C::kBlockM * 64; e += kThreads) {
        const int r = e / 64, col = e % 64;
        const int64_t token = m0 + r, kk = kc * 64 + col;
        Act v{0};
        if (token < p.m && kk < p.k) v = a[token * p.k + kk];
        s.a[stage][d][r][((col / 8) ^ (r & 7)) * 8 + col % 8] = v;
      }
    }
  }

  // ---- the kernel ----------------------------------------------------------------------------

  static __device__ __forceinline__ void run(const DenseParams& p) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    Smem& s = *reinterpret_cast<Smem*>(smem_raw);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4;
    const int64_t strips_total = p.n_pad / 16;
    const int64_t strip0 = (static_cast<int64_t>(blockIdx.x) * C::kWarps + warp) * C::kWarpStrips;
    const int64_t m0 = static_cast<int64_t>(blockIdx.y) * C::kBlockM;
    const int64_t k_chunks = p.k_pad / 64;
    const int64_t kc_begin = static_cast<int64_t>(blockIdx.z) * p.k_chunks_per_split;
    int64_t kc_end = kc_begin + p.k_chunks_per_split;
    if (kc_end > k_chunks) kc_end = k_chunks;

    Acc acc{};

    // Chunks go in groups of kDepth: the loads of group i + 1 (weights into registers, activations
    // into the other shared-memory stage) are issued before group i is computed, so each warp has
    // kDepth chunks per strip in flight and waits on memory once per group.
    const char* wbase = static_cast<const char*>(p.w);
    uint32 words[kDepth][C::kWarpStrips][kBits], next[kDepth][C::kWarpStrips][kBits];
    ChunkCodes codes[kDepth], next_codes[kDepth];
    auto load_group = [&](uint32(&dst)[kDepth][C::kWarpStrips][kBits], ChunkCodes(&dst_codes)[kDepth],
                          int stage, int64_t kc0) {
#pragma unroll
      for (int d = 0; d < kDepth; ++d) {
        // Past the split's end the last chunk is loaded again (harmless, never computed), which
        // keeps the loads unconditional.
        const int64_t kc = kc0 + d < kc_end ? kc0 + d : kc_end - 1;
        load_activations(p, s, stage, d, m0, kc);
#pragma unroll
        for (int i = 0; i < C::kWarpStrips; ++i) {
          const int64_t strip = strip0 + i < strips_total ? strip0 + i : strips_total - 1;
          D::template load_lane_words<true>(dst[d][i],
                     wbase + quant::chunk_offset_bytes(kBits, p.n_pad, p.k_pad, 0, strip, kc), lane);
          if constexpr (D::kHasRowCodes) {
            const int64_t row = (strip0 + i) * 16 + g;
#pragma unroll
            for (int gi = 0; gi < kGroupSlots; ++gi) {
              const int64_t group = D::group_of_slot(kc, gi);
              dst_codes[d][i][gi][0] = D::load_row_codes(p.scales, p.zeros, p.scale_cols, p.n_pad,
                                                         group, row < p.n_pad ? row : 0);
              dst_codes[d][i][gi][1] = D::load_row_codes(p.scales, p.zeros, p.scale_cols, p.n_pad,
                                                         group, row + 8 < p.n_pad ? row + 8 : 0);
            }
          }
        }
      }
      ptx::cp_async_commit();
    };

    if (kc_begin < kc_end) load_group(words, codes, 0, kc_begin);
    int stage = 0;
    for (int64_t kc0 = kc_begin; kc0 < kc_end; kc0 += kDepth) {
      const bool more = kc0 + kDepth < kc_end;
      if (more) {
        load_group(next, next_codes, stage ^ 1, kc0 + kDepth);
        ptx::cp_async_wait<1>();
      } else {
        ptx::cp_async_wait<0>();
      }
      __syncthreads();
#pragma unroll
      for (int d = 0; d < kDepth; ++d)
        if (kc0 + d < kc_end) compute_chunk(s.a[stage][d], words[d], codes[d], acc, lane);
      __syncthreads();  // the next group's loads overwrite this stage
      if (more) {
#pragma unroll
        for (int d = 0; d < kDepth; ++d)
#pragma unroll
          for (int i = 0; i < C::kWarpStrips; ++i)
#pragma unroll
            for (int w = 0; w < kBits; ++w) words[d][i][w] = next[d][i][w];
        if constexpr (D::kHasRowCodes) {
#pragma unroll
          for (int d = 0; d < kDepth; ++d)
#pragma unroll
            for (int i = 0; i < C::kWarpStrips; ++i)
#pragma unroll
              for (int gi = 0; gi < kGroupSlots; ++gi) {
                codes[d][i][gi][0] = next_codes[d][i][gi][0];
                codes[d][i][gi][1] = next_codes[d][i][gi][1];
              }
        }
      }
      stage ^= 1;
    }
    const int64_t n0 = static_cast<int64_t>(blockIdx.x) * Epilogue::kBlockN;
    if constexpr (C::kAccF16) {
      float wide[C::kWarpStrips][kTokenGroups][4];
      widen_accumulators(acc.v, wide);
      Epilogue::run(p, reinterpret_cast<float*>(smem_raw), wide, n0, m0);
    } else {
      Epilogue::run(p, reinterpret_cast<float*>(smem_raw), acc.v, n0, m0);
    }
  }

  static __device__ __forceinline__ void compute_chunk(const Act (&tile)[C::kBlockM][64],
                                                       const uint32 (&words)[C::kWarpStrips][kBits],
                                                       const ChunkCodes& codes,
                                                       Acc& acc, int lane) {
    // Dequantized A fragments of every strip for the chunk's 4 atoms.
    uint32 a_frag[C::kWarpStrips][kRegs];
#pragma unroll
    for (int i = 0; i < C::kWarpStrips; ++i) {
      RowTerms lo[kGroupSlots], hi[kGroupSlots];
#pragma unroll
      for (int gi = 0; gi < kGroupSlots; ++gi) {
        lo[gi] = D::row_terms(codes[i][gi][0]);
        hi[gi] = D::row_terms(codes[i][gi][1]);
      }
      D::chunk_fragments(a_frag[i], words[i], lo, hi);
    }
    // B fragments by ldmatrix (two atoms per x4), then the MMAs.
#pragma unroll
    for (int j = 0; j < kTokenGroups; ++j) {
#pragma unroll
      for (int pair = 0; pair < 2; ++pair) {
        const int mi = lane / 8, r = j * 8 + lane % 8;
        const int unit = 4 * pair + mi;
        uint32 b[4];
        ptx::ldmatrix_x4(b, ptx::smem_address(&tile[r][(unit ^ (r & 7)) * 8]));
#pragma unroll
        for (int i = 0; i < C::kWarpStrips; ++i) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int x = 2 * pair + h;
            const uint32 af[4] = {a_frag[i][4 * x], a_frag[i][4 * x + 1], a_frag[i][4 * x + 2],
                                  a_frag[i][4 * x + 3]};
            const uint32 bf[2] = {b[2 * h], b[2 * h + 1]};
            if constexpr (C::kAccF16) {
              ptx::mma_f16_16816_acc16(acc.v[i][j], af, bf);
            } else if constexpr (kIsF16) {
              ptx::mma_f16_16816(acc.v[i][j], af, bf);
            } else {
              ptx::mma_bf16_16816(acc.v[i][j], af, bf);
            }
          }
        }
      }
    }
  }

  // ---- epilogue ------------------------------------------------------------------------------

  using Epilogue = DenseEpilogue<C, C::kWarps, C::kWarpStrips>;
  static_assert(dense_smem_bytes(C::kBlockM, Epilogue::kBlockN, kDepth) >= sizeof(Smem) &&
                    dense_smem_bytes(C::kBlockM, Epilogue::kBlockN, kDepth) >= Epilogue::kSmemBytes,
                "the host sizes dynamic shared memory with dense_smem_bytes()");
};

}  // namespace hm::gemm

// Defines the extern "C" kernel `name` for the configuration struct `Config`.
#define HM_DEFINE_DENSE_MMA(name, Config)                                                     \
  extern "C" __global__ void __launch_bounds__(Config::kWarps * 32, 1)                       \
      name(const ::hm::gemm::DenseParams params) {                                             \
    ::hm::gemm::DenseMma<Config>::run(params);                                                 \
  }
