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

template <class C>
struct DenseMma {
  using Act = typename C::Act;
  using Out = typename C::Out;
  static constexpr int kBits = C::kWeightBits;
  static constexpr int kActBits = 16;
  static constexpr int kRegs = quant::registers_per_chunk(kActBits);  // 16 per chunk
  static constexpr int kTokenGroups = C::kBlockM / 8;
  static constexpr int kThreads = C::kWarps * 32;
  static constexpr bool kIsF16 = sizeof(Act) == 2 && C::kActIsF16;
  static constexpr int kActMantissa = kIsF16 ? 10 : 7;
  static constexpr int kActBias = kIsF16 ? 15 : 127;
  static constexpr bool kGroupScalesInMainloop =
      C::kScaleKind == kScaleGroup || C::kScaleKind == kScaleBlock ||
      C::kScaleKind == kScaleGroupTensor;
  // Integers dequantize exactly through the activation's magic number while magic + q fits the
  // mantissa (f16: 1024 + q for q < 1024; bf16: 128 + q for q < 128); else through f32.
  static constexpr bool kIntFast = !C::kWeightIsFloat && (kIsF16 || kBits <= 7);
  static constexpr uint32 kMagic = kIsF16 ? 0x6400u : 0x4300u;  // 1024.0 / 128.0
  static constexpr float kMagicValue = kIsF16 ? 1024.0f : 128.0f;

  static constexpr int kDepth = dense_chunks_in_flight(C::kWarpStrips, kBits);
  struct Smem {
    alignas(128) Act a[2][kDepth][C::kBlockM][64];
  };

  // ---- scales and zero points ----------------------------------------------------------------

  static __device__ __forceinline__ float scale_value(const DenseParams& p, int64_t group,
                                                      int64_t col) {
    const int64_t i = group * p.scale_cols + col;
    if constexpr (C::kScaleCode == kScaleCodeAct) {
      return to_float(Act{static_cast<const uint16*>(p.scales)[i]});
    } else if constexpr (C::kScaleCode == kScaleCodeF32) {
      return static_cast<const float*>(p.scales)[i];
    } else if constexpr (C::kScaleCode == kScaleCodeF16) {
      return to_float(f16{static_cast<const uint16*>(p.scales)[i]});
    } else if constexpr (C::kScaleCode == kScaleCodeBf16) {
      return to_float(bf16{static_cast<const uint16*>(p.scales)[i]});
    } else if constexpr (C::kScaleCode == kScaleCodeUe8m0) {
      return decode_ue8m0(static_cast<const unsigned char*>(p.scales)[i]);
    } else {
      return decode_small_float<C::kScaleExp, C::kScaleMan, true>(
          static_cast<const unsigned char*>(p.scales)[i]);
    }
  }

  // The mainloop scale of one row as an activation-type pair (the support rules guarantee the
  // scale is exactly representable in the activation type).
  static __device__ __forceinline__ uint32 scale_pair(const DenseParams& p, int64_t group,
                                                      int64_t row) {
    const int64_t col = C::kScaleKind == kScaleBlock ? row / C::kGroupN : row;
    if constexpr (C::kScaleCode == kScaleCodeAct) {
      return splat(Act{static_cast<const uint16*>(p.scales)[group * p.scale_cols + col]});
    } else {
      return splat(from_float<Act>(scale_value(p, group, col)));
    }
  }

  static __device__ __forceinline__ float zero_value(const DenseParams& p, int64_t group,
                                                     int64_t row) {
    const int64_t i = group * p.n_pad + row;
    if constexpr (C::kZeroPoint == kZeroInt) {
      return static_cast<float>(static_cast<const unsigned char*>(p.zeros)[i]);
    } else if constexpr (C::kZeroPoint == kZeroFloat) {
      return to_float(Act{static_cast<const uint16*>(p.zeros)[i]});
    } else {
      return static_cast<float>(C::kImplicitZeroPoint);
    }
  }

  // What dequant subtracts from (magic | q): magic + zero point, as a pair (exact: the zero point
  // of an integer weight is an integer below 256).
  static __device__ __forceinline__ uint32 offset_pair(const DenseParams& p, int64_t group,
                                                       int64_t row) {
    float zp = C::kZeroPoint == kZeroInt ? zero_value(p, group, row)
                                         : static_cast<float>(C::kImplicitZeroPoint);
    return splat(from_float<Act>(kMagicValue + zp));
  }

  // ---- dequantization of one register (two values of one row) --------------------------------

  struct RowTerms {
    uint32 scale;   // pair; unused without mainloop scales
    uint32 offset;  // pair: magic + integer zero point
    uint32 zero;    // pair: float zero point
    float scale_f, zero_f;  // the same for the f32 path
  };

  static __device__ __forceinline__ RowTerms row_terms(const DenseParams& p, int64_t group,
                                                       int64_t row) {
    RowTerms t{};
    if constexpr (kGroupScalesInMainloop) {
      t.scale = scale_pair(p, group, row);
      t.scale_f = to_float(Act{static_cast<uint16>(t.scale & 0xFFFFu)});
    }
    if constexpr (!C::kWeightIsFloat) {
      if constexpr (kIntFast) t.offset = offset_pair(p, group, row);
      if constexpr (C::kZeroPoint == kZeroFloat) t.zero = splat(Act{static_cast<const uint16*>(
          p.zeros)[group * p.n_pad + row]});
      t.zero_f = zero_value(p, group, row);
    }
    return t;
  }

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

  // One lane's kBits words of one chunk, with the widest aligned vector loads the layout allows.
  static __device__ __forceinline__ void load_chunk(uint32 (&words)[kBits], const char* chunk,
                                                    int lane) {
    const uint32* base = reinterpret_cast<const uint32*>(chunk);
#pragma unroll
    for (int w = 0; w < kBits;) {
      const int seg = quant::segment_words(kBits, w);
      const uint32* src = base + quant::lane_word_offset(kBits, lane, w);
      if (seg == 4) {
        uint32 r[4];
        ptx::load_global_stream(r, src);
#pragma unroll
        for (int i = 0; i < 4; ++i) words[w + i] = r[i];
      } else if (seg == 2) {
        uint32 r[2];
        ptx::load_global_stream(r, src);
        words[w] = r[0];
        words[w + 1] = r[1];
      } else {
        uint32 r[1];
        ptx::load_global_stream(r, src);
        words[w] = r[0];
      }
      w += seg;
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

    float acc[C::kWarpStrips][kTokenGroups][4];
#pragma unroll
    for (int i = 0; i < C::kWarpStrips; ++i)
#pragma unroll
      for (int j = 0; j < kTokenGroups; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;

    // Chunks go in groups of kDepth: the loads of group i + 1 (weights into registers, activations
    // into the other shared-memory stage) are issued before group i is computed, so each warp has
    // kDepth chunks per strip in flight and waits on memory once per group.
    const char* wbase = static_cast<const char*>(p.w);
    uint32 words[kDepth][C::kWarpStrips][kBits], next[kDepth][C::kWarpStrips][kBits];
    auto load_group = [&](uint32(&dst)[kDepth][C::kWarpStrips][kBits], int stage, int64_t kc0) {
#pragma unroll
      for (int d = 0; d < kDepth; ++d) {
        // Past the split's end the last chunk is loaded again (harmless, never computed), which
        // keeps the loads unconditional.
        const int64_t kc = kc0 + d < kc_end ? kc0 + d : kc_end - 1;
        load_activations(p, s, stage, d, m0, kc);
#pragma unroll
        for (int i = 0; i < C::kWarpStrips; ++i) {
          const int64_t strip = strip0 + i < strips_total ? strip0 + i : strips_total - 1;
          load_chunk(dst[d][i],
                     wbase + quant::chunk_offset_bytes(kBits, p.n_pad, p.k_pad, 0, strip, kc), lane);
        }
      }
      ptx::cp_async_commit();
    };

    if (kc_begin < kc_end) load_group(words, 0, kc_begin);
    int stage = 0;
    for (int64_t kc0 = kc_begin; kc0 < kc_end; kc0 += kDepth) {
      const bool more = kc0 + kDepth < kc_end;
      if (more) {
        load_group(next, stage ^ 1, kc0 + kDepth);
        ptx::cp_async_wait<1>();
      } else {
        ptx::cp_async_wait<0>();
      }
      __syncthreads();
#pragma unroll
      for (int d = 0; d < kDepth; ++d)
        if (kc0 + d < kc_end) compute_chunk(p, s.a[stage][d], words[d], acc, strip0, kc0 + d, lane);
      __syncthreads();  // the next group's loads overwrite this stage
      if (more) {
#pragma unroll
        for (int d = 0; d < kDepth; ++d)
#pragma unroll
          for (int i = 0; i < C::kWarpStrips; ++i)
#pragma unroll
            for (int w = 0; w < kBits; ++w) words[d][i][w] = next[d][i][w];
      }
      stage ^= 1;
    }
    epilogue(p, acc, strip0, m0, lane, g);
  }

  static __device__ __forceinline__ void compute_chunk(const DenseParams& p,
                                                       const Act (&tile)[C::kBlockM][64],
                                                       const uint32 (&words)[C::kWarpStrips][kBits],
                                                       float (&acc)[C::kWarpStrips][kTokenGroups][4],
                                                       int64_t strip0, int64_t kc, int lane) {
    const int g = lane / 4;
    // Dequantized A fragments of every strip for the chunk's 4 atoms.
    uint32 a_frag[C::kWarpStrips][kRegs];
#pragma unroll
    for (int i = 0; i < C::kWarpStrips; ++i) {
      const int64_t row = (strip0 + i) * 16 + g;  // and row + 8
      RowTerms lo{}, hi{};
      int64_t last_group = -1;
#pragma unroll
      for (int x = 0; x < 4; ++x) {  // atoms of 16 k
        const int64_t group = C::kGroupK > 0 ? (kc * 64 + x * 16) / C::kGroupK : 0;
        if (x == 0 || (C::kGroupK > 0 && C::kGroupK < 64 && group != last_group)) {
          lo = row_terms(p, group, row < p.n_pad ? row : 0);
          hi = row_terms(p, group, row + 8 < p.n_pad ? row + 8 : 0);
          last_group = group;
        }
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const uint32 x_reg = quant::extract_register(words[i], kBits, kActBits, 4 * x + r);
          a_frag[i][4 * x + r] = dequant(x_reg, (r & 1) ? hi : lo);
        }
      }
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
            if constexpr (kIsF16) {
              ptx::mma_f16_16816(acc[i][j], af, bf);
            } else {
              ptx::mma_bf16_16816(acc[i][j], af, bf);
            }
          }
        }
      }
    }
  }

  // ---- epilogue ------------------------------------------------------------------------------

  static __device__ __forceinline__ void store(const DenseParams& p, float v, int64_t token,
                                               int64_t channel) {
    if (token >= p.m || channel >= p.n) return;
    if constexpr (C::kScaleKind == kScaleChannel) v *= scale_value(p, 0, channel);
    if constexpr (C::kScaleKind == kScaleTensor || C::kScaleKind == kScaleGroupTensor) v *= p.global[0];
    if constexpr (C::kHasBias) v += to_float(static_cast<const Out*>(p.bias)[channel]);
    static_cast<Out*>(p.c)[token * p.n + channel] = from_float<Out>(v);
  }

  // The epilogue goes through shared memory: the warps drop their accumulators into an f32 tile
  // [kBlockM][block_n], then the whole block walks the tile row by row, so global stores (and
  // split-K partial traffic) are coalesced along the channels, and no accumulator is indexed at
  // run time. Accumulator element q of (strip i, token group j) is channel row g (+8 for q >= 2),
  // token 2t + (q & 1): the mma C fragment, here C^T.
  static constexpr int kBlockN = 16 * C::kWarps * C::kWarpStrips;
  static constexpr int kTileStride = kBlockN + 4;  // +4 floats: rows start on different banks
  static_assert(dense_smem_bytes(C::kBlockM, kBlockN, kDepth) >= sizeof(Smem) &&
                    dense_smem_bytes(C::kBlockM, kBlockN, kDepth) >= C::kBlockM * kTileStride * 4,
                "the host sizes dynamic shared memory with dense_smem_bytes()");

  static __device__ __forceinline__ void epilogue(const DenseParams& p,
                                                  float (&acc)[C::kWarpStrips][kTokenGroups][4],
                                                  int64_t strip0, int64_t m0, int lane, int g) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    float* tile = reinterpret_cast<float*>(smem_raw);
    const int t = lane % 4, warp = threadIdx.x / 32;
    __syncthreads();  // the mainloop's last reads of the staging buffers are done
#pragma unroll
    for (int i = 0; i < C::kWarpStrips; ++i)
#pragma unroll
      for (int j = 0; j < kTokenGroups; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int token = j * 8 + 2 * t + (q & 1);
          const int channel = (warp * C::kWarpStrips + i) * 16 + g + 8 * (q >> 1);
          tile[token * kTileStride + channel] = acc[i][j][q];
        }
    __syncthreads();
    const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kBlockN;
    if (p.splits == 1) {
      for (int e = threadIdx.x; e < C::kBlockM * kBlockN; e += kThreads) {
        const int r = e / kBlockN, c = e % kBlockN;
        store(p, tile[r * kTileStride + c], m0 + r, n0 + c);
      }
      return;
    }
    // Split-K: publish this split's partials, count arrivals per tile; the last one reduces in
    // split order (deterministic whatever the arrival order) and leaves its counter at zero.
    float* mine = p.partials + static_cast<int64_t>(blockIdx.z) * p.m * p.n_pad;
    for (int e = threadIdx.x; e < C::kBlockM * kBlockN; e += kThreads) {
      const int r = e / kBlockN, c = e % kBlockN;
      if (m0 + r < p.m && n0 + c < p.n_pad) mine[(m0 + r) * p.n_pad + n0 + c] = tile[r * kTileStride + c];
    }
    __threadfence();
    __syncthreads();
    __shared__ int last;
    if (threadIdx.x == 0) {
      int32_t* counter = p.counters + blockIdx.y * gridDim.x + blockIdx.x;
      last = atomicAdd(counter, 1) == p.splits - 1;
      if (last) *counter = 0;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int e = threadIdx.x; e < C::kBlockM * kBlockN; e += kThreads) {
      const int r = e / kBlockN, c = e % kBlockN;
      const int64_t token = m0 + r, channel = n0 + c;
      if (token >= p.m || channel >= p.n) continue;
      float sum = 0.0f;
      for (int z = 0; z < p.splits; ++z)
        sum += __ldcg(p.partials + (static_cast<int64_t>(z) * p.m + token) * p.n_pad + channel);
      store(p, sum, token, channel);
    }
  }
};

}  // namespace hm::gemm

// Defines the extern "C" kernel `name` for the configuration struct `Config`.
#define HM_DEFINE_DENSE_MMA(name, Config)                                                     \
  extern "C" __global__ void __launch_bounds__(Config::kWarps * 32, 1)                       \
      name(const ::hm::gemm::DenseParams params) {                                             \
    ::hm::gemm::DenseMma<Config>::run(params);                                                 \
  }
