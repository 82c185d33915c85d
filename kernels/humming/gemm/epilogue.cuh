// The dense GEMM epilogue, shared by the mma.sync and wgmma kernels: accumulators -> shared f32
// tile -> (split-K reduction) -> activation scale (8-bit activations), channel scale, global
// scale, bias, conversion, coalesced store.
//
// Split-K partial tiles meet either in global memory (a workspace of f32 partials, reduced by
// the tile's last block to finish) or, when the splits of a tile run as one thread-block cluster
// (kClusterSplit, sm90), in the blocks' shared memory: each block reduces a share of the tile
// from every block's f32 tile over distributed shared memory, in split order.
//
// Both kernels hold C^T fragments of the same shape: per warp, kWarpStrips strips of 16 channels
// by kTokenGroups groups of 8 tokens, element q of (strip i, token group j) being channel row
// g (+8 for q >= 2) and token 2t + (q & 1) — the mma.sync m16n8 C fragment, which is also the
// wgmma m64nN accumulator of one warp of the warpgroup.
#pragma once

#include <humming/core/types.cuh>
#include <humming/gemm/dequant.cuh>
#include <humming/gemm/dequant_a8.cuh>
#include <humming/gemm/params.h>
#include <humming/gemm/sched.cuh>
#include <humming/ptx/cluster.cuh>

namespace hm::gemm {

// A warp's accumulators: f32 fragments, or (acc=f16) f16 pairs, two registers per token group.
// Value-initialized ({}) they are zero in both forms.
template <bool kF16, int kStrips, int kTokenGroups>
struct AccFragments {
  float v[kStrips][kTokenGroups][4];
};
template <int kStrips, int kTokenGroups>
struct AccFragments<true, kStrips, kTokenGroups> {
  uint32 v[kStrips][kTokenGroups][2];
};

// The accumulators of s8 x s8 MMAs (int8 activations, mma.sync or wgmma): s32 in b32 registers,
// laid out as the f32 ones. A sum of K products of at most 128 * 128 = 2^14 is exact while
// K < 2^17 (the dense family's gap keeps K <= 65536); converting it to f32 rounds once (exact
// below 2^24), which is all the int8 path rounds before the scales.
template <int kStrips, int kTokenGroups>
struct S32Fragments {
  uint32 v[kStrips][kTokenGroups][4];
};
// An accumulator's value in f32 (s32: the one rounding of the int8 path).
__device__ __forceinline__ float accumulator_value(float x) { return x; }
__device__ __forceinline__ float accumulator_value(uint32 x) {
  return static_cast<float>(static_cast<int>(x));
}

// acc=f16: the MMA accumulates f16 pairs, register 0 of a token group holding row g's two tokens
// and register 1 row g + 8's; the epilogue works on the f32 fragment layout above.
template <int kStrips, int kTokenGroups>
__device__ __forceinline__ void widen_accumulators(const uint32 (&in)[kStrips][kTokenGroups][2],
                                                   float (&out)[kStrips][kTokenGroups][4]) {
#pragma unroll
  for (int i = 0; i < kStrips; ++i)
#pragma unroll
    for (int j = 0; j < kTokenGroups; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        out[i][j][2 * h] = to_float(f16{static_cast<uint16>(in[i][j][h] & 0xFFFFu)});
        out[i][j][2 * h + 1] = to_float(f16{static_cast<uint16>(in[i][j][h] >> 16)});
      }
}

// kWarps warps hold accumulators; the block has kThreads threads (more when it has a warp that
// only copies, which helps with the stores).
template <class C, int kWarps, int kWarpStrips, int kThreads_ = kWarps * 32,
          bool kClusterSplit = false>
struct DenseEpilogue {
  using Out = typename C::Out;
  static constexpr int kTokenGroups = C::kBlockM / 8;
  static constexpr int kThreads = kThreads_;
  static constexpr int kBlockN = 16 * kWarps * kWarpStrips;
  static constexpr int kTileStride = kBlockN + 4;  // +4 floats: rows start on different banks
  // Shared memory the epilogue needs (the caller's staging buffers are reused).
  static constexpr int kSmemBytes = C::kBlockM * kTileStride * 4;
  static_assert(kBlockN % 8 == 0, "the stores move quads and octets of channels");

  // v for (token, channel) finished: channel / global scale and bias applied, still f32.
  static __device__ __forceinline__ float finish(const DenseParams& p, float v, int64_t channel) {
    if constexpr (C::kScaleKind == kScaleChannel) v *= Dequant<C>::scale_from_code(
        Dequant<C>::scale_code(p.scales, channel));
    // (8-bit activations fold group x tensor scales in the mainloop, global included, unless
    // the group scales went into the weights' exponents.)
    constexpr bool kGlobalHere =
        C::kScaleKind == kScaleTensor ||
        (C::kScaleKind == kScaleGroupTensor && (C::kActBits == 16 || C::kScaleExponents));
    if constexpr (kGlobalHere) v *= p.global[0];
    if constexpr (C::kHasBias) v += to_float(static_cast<const Out*>(p.bias)[channel]);
    return v;
  }

  // What every value of tile row `token` (a row of A that exists) is multiplied by first: with
  // 8-bit activations, the row's activation scale times the power of two the weight conversion
  // left (gemm/dequant_a8.cuh); else 1. The product of two f32 is exact for power-of-two factors
  // and rounds once otherwise, before the channel scale as the reference order has it.
  // With activation scales per K group (C::kActGroupK > 0) the mainloop's fold applied them,
  // and only the power of two is left.
  static constexpr bool kRowScale = C::kActBits == 8;
  static __device__ __forceinline__ float row_factor(const DenseParams& p, int64_t token) {
    if constexpr (kRowScale) {
      if constexpr (C::kActGroupK > 0) return exp2i(DequantA8<C>::kFactorExp);
      return p.act_scales[a_row<C>(p, token)] * exp2i(DequantA8<C>::kFactorExp);
    } else {
      return 1.0f;
    }
  }

  // Tile row `token` (m0 + r): C row c_row(token) (sched.cuh), none for padding.
  static __device__ __forceinline__ void store(const DenseParams& p, float v, int64_t token,
                                               int64_t channel) {
    const int64_t row = c_row<C>(p, token);
    if (row < 0 || channel >= p.n) return;
    if constexpr (kRowScale) v *= row_factor(p, token);
    static_cast<Out*>(p.c)[row * p.n + channel] = from_float<Out>(finish(p, v, channel));
  }

  // Whether kVec consecutive channels of a C row (and of the bias) can be stored as one vector
  // (8 or 16 bytes): rows of C, and the bias, start on kVec-channel boundaries. True for every
  // real layer; the API only promises 2-byte alignment, so it is checked, once per call (the
  // answer is the same for every thread).
  template <int kVec>
  static __device__ __forceinline__ bool vectors_fit(const DenseParams& p) {
    constexpr uint64_t kBytes = kVec * sizeof(Out);
    return p.n % kVec == 0 && reinterpret_cast<uint64_t>(p.c) % kBytes == 0 &&
           (!C::kHasBias || reinterpret_cast<uint64_t>(p.bias) % kBytes == 0);
  }

  // Channels [channel, channel + kVec) of one token, finished and stored with one vector store
  // when they fit (a store per channel costs the epilogue of a large tile microseconds of issue
  // slots), else channel by channel (the ragged end of N, or an unaligned C or bias).
  template <int kVec>
  static __device__ __forceinline__ void store_vector(const DenseParams& p, const float (&v)[kVec],
                                                      int64_t token, int64_t channel, bool fit) {
    static_assert(sizeof(Out) == 2 && (kVec == 4 || kVec == 8), "8 or 16 bytes of f16 / bf16");
    const int64_t row = c_row<C>(p, token);
    if (row < 0) return;
    if (!fit || channel + kVec > p.n) {
#pragma unroll
      for (int i = 0; i < kVec; ++i) store(p, v[i], token, channel + i);
      return;
    }
    const float factor = row_factor(p, token);
    uint32 words[kVec / 2];
#pragma unroll
    for (int i = 0; i < kVec; i += 2)
      words[i / 2] = pack_pair<Out>(finish(p, kRowScale ? v[i] * factor : v[i], channel + i),
                                    finish(p, kRowScale ? v[i + 1] * factor : v[i + 1],
                                           channel + i + 1));
    Out* dst = static_cast<Out*>(p.c) + row * p.n + channel;
    if constexpr (kVec == 8) {
      *reinterpret_cast<uint4*>(dst) = make_uint4(words[0], words[1], words[2], words[3]);
    } else {
      *reinterpret_cast<uint2*>(dst) = make_uint2(words[0], words[1]);
    }
  }

  // Eight floats of a shared tile row (16-byte aligned: rows are kTileStride floats apart and
  // kTileStride is a multiple of 4).
  static __device__ __forceinline__ void load8(const float* at, float (&v)[8]) {
    const float4 lo = *reinterpret_cast<const float4*>(at);
    const float4 hi = *reinterpret_cast<const float4*>(at + 4);
    v[0] = lo.x; v[1] = lo.y; v[2] = lo.z; v[3] = lo.w;
    v[4] = hi.x; v[5] = hi.y; v[6] = hi.z; v[7] = hi.w;
  }

  // The splits of this tile are the blocks of this block's cluster, each with its f32 tile in
  // shared memory at the same offset. The tile's quads (4 channels) go to the ranks 32 at a time
  // (a warp's worth: distributed shared memory wants a warp's loads contiguous, as global memory
  // does), in turn, so that every block takes a share even of a small tile. Each quad is summed
  // over the S tiles in split order, so the result does not depend on which block sums; a thread
  // issues all S remote loads before adding (one round trip, not S in a row).
  static __device__ __forceinline__ void reduce_in_cluster(const DenseParams& p, float* tile,
                                                           int64_t n0, int64_t m0) {
    constexpr int kQuadsPerRow = kBlockN / 4;
    ptx::cluster_sync();  // every split's tile is in its block's shared memory
    const int ranks = static_cast<int>(ptx::cluster_blocks());
    const int rank = static_cast<int>(ptx::cluster_rank());
    const uint32 local = ptx::smem_address(tile);
    const int rows = tile_rows<C>(p, m0);
    const bool fit = vectors_fit<4>(p);
    const int first = (rank + ranks * static_cast<int>(threadIdx.x / 32)) * 32 + threadIdx.x % 32;
    for (int e = first; e < rows * kQuadsPerRow; e += kThreads * ranks) {
      const int r = e / kQuadsPerRow, c = (e % kQuadsPerRow) * 4;
      const uint32 offset = local + static_cast<uint32>(r * kTileStride + c) * 4;
      float4 part[kDenseMaxClusterSplits];
#pragma unroll
      for (int z = 0; z < kDenseMaxClusterSplits; ++z)
        if (z < ranks) part[z] = ptx::load_cluster_f32x4(ptx::cluster_map(offset, static_cast<uint32>(z)));
      float sum[4] = {};
#pragma unroll
      for (int z = 0; z < kDenseMaxClusterSplits; ++z) {
        if (z < ranks) {
          sum[0] += part[z].x;
          sum[1] += part[z].y;
          sum[2] += part[z].z;
          sum[3] += part[z].w;
        }
      }
      store_vector<4>(p, sum, m0 + r, n0 + c, fit);
    }
    ptx::cluster_sync();  // no block leaves while another still reads its tile
  }

  // `tile`: at least kSmemBytes of shared memory the block no longer reads. The whole block
  // calls this; it starts with a barrier so the mainloop's last shared-memory reads are done.
  static __device__ __forceinline__ void run(const DenseParams& p, float* tile,
                                             float (&acc)[kWarpStrips][kTokenGroups][4],
                                             int64_t n0, int64_t m0) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;
    __syncthreads();
    if (warp < kWarps) {
#pragma unroll
    for (int i = 0; i < kWarpStrips; ++i)
#pragma unroll
      for (int j = 0; j < kTokenGroups; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int token = j * 8 + 2 * t + (q & 1);
          const int channel = (warp * kWarpStrips + i) * 16 + g + 8 * (q >> 1);
          tile[token * kTileStride + channel] = acc[i][j][q];
        }
    }
    if constexpr (kClusterSplit) {
      if (p.splits > 1) {
        reduce_in_cluster(p, tile, n0, m0);
        return;
      }
    }
    __syncthreads();
    // Thread e of a pass takes octet e: 8 channels of one token row, so a warp's stores cover
    // whole 256-byte row segments.
    constexpr int kOctetsPerRow = kBlockN / 8;
    const int rows = tile_rows<C>(p, m0);
    if (p.splits == 1) {
      const bool fit = vectors_fit<8>(p);
      for (int e = threadIdx.x; e < rows * kOctetsPerRow; e += kThreads) {
        const int r = e / kOctetsPerRow, c = (e % kOctetsPerRow) * 8;
        float v[8];
        load8(tile + r * kTileStride + c, v);
        store_vector<8>(p, v, m0 + r, n0 + c, fit);
      }
      return;
    }
    // MoE tiles split K only within a cluster (their rows are slots, not tokens of p.m).
    if constexpr (C::kMoe) return;
    // Split-K: publish this split's partials, count arrivals per tile; the last one reduces in
    // split order (deterministic whatever the arrival order) and leaves the workspace as it
    // found it, all zero: its counter, and every partial it consumed (humming.h promises a
    // workspace that stays zeroed, so that one buffer can serve plans whose tiles lay it out
    // differently). Global memory is read and written in quads (4 channels, one float4; the
    // partials are 16-byte aligned: the workspace is, its counters are 16 KiB, n_pad is a
    // multiple of 64), so that a warp's accesses are 512 contiguous bytes.
    constexpr int kQuadsPerRow = kBlockN / 4;
    float* mine = p.partials + static_cast<int64_t>(blockIdx.z) * p.m * p.n_pad;
    for (int e = threadIdx.x; e < rows * kQuadsPerRow; e += kThreads) {
      const int r = e / kQuadsPerRow, c = (e % kQuadsPerRow) * 4;
      if (n0 + c < p.n_pad)
        *reinterpret_cast<float4*>(mine + (m0 + r) * p.n_pad + n0 + c) =
            *reinterpret_cast<const float4*>(tile + r * kTileStride + c);
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
    const bool fit = vectors_fit<4>(p);
    for (int e = threadIdx.x; e < rows * kQuadsPerRow; e += kThreads) {
      const int r = e / kQuadsPerRow, c = (e % kQuadsPerRow) * 4;
      const int64_t token = m0 + r, channel = n0 + c;
      if (channel >= p.n_pad) continue;  // the quads the splits wrote, padding channels included
      float sum[4] = {};
      for (int z = 0; z < p.splits; ++z) {
        float4* at = reinterpret_cast<float4*>(
            p.partials + (static_cast<int64_t>(z) * p.m + token) * p.n_pad + channel);
        const float4 v = __ldcg(at);
        __stcg(at, make_float4(0.f, 0.f, 0.f, 0.f));
        sum[0] += v.x;
        sum[1] += v.y;
        sum[2] += v.z;
        sum[3] += v.w;
      }
      if (channel < p.n) store_vector<4>(p, sum, token, channel, fit);
    }
  }
};

}  // namespace hm::gemm
