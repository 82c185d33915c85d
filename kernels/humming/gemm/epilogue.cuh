// The dense GEMM epilogue, shared by the mma.sync and wgmma kernels: accumulators -> shared f32
// tile -> (split-K reduction) -> channel scale, global scale, bias, conversion, coalesced store.
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
#include <humming/gemm/params.h>
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
  static_assert(kBlockN % 8 == 0, "the stores move octets of channels");

  // v for (token, channel) finished: channel / global scale and bias applied, still f32.
  static __device__ __forceinline__ float finish(const DenseParams& p, float v, int64_t channel) {
    if constexpr (C::kScaleKind == kScaleChannel) v *= Dequant<C>::scale_from_code(
        Dequant<C>::scale_code(p.scales, channel));
    if constexpr (C::kScaleKind == kScaleTensor || C::kScaleKind == kScaleGroupTensor) v *= p.global[0];
    if constexpr (C::kHasBias) v += to_float(static_cast<const Out*>(p.bias)[channel]);
    return v;
  }

  static __device__ __forceinline__ void store(const DenseParams& p, float v, int64_t token,
                                               int64_t channel) {
    if (token >= p.m || channel >= p.n) return;
    static_cast<Out*>(p.c)[token * p.n + channel] = from_float<Out>(finish(p, v, channel));
  }

  // Whether 8 consecutive channels of a C row (and of the bias) can be stored as one 16-byte
  // vector: rows of C, and the bias, start on 8-channel boundaries. True for every real layer;
  // the API only promises 2-byte alignment, so it is checked, once per call (the answer is the
  // same for every thread).
  static __device__ __forceinline__ bool octets_fit(const DenseParams& p) {
    return p.n % 8 == 0 && reinterpret_cast<uint64_t>(p.c) % 16 == 0 &&
           (!C::kHasBias || reinterpret_cast<uint64_t>(p.bias) % 16 == 0);
  }

  // Channels [channel, channel + 8) of one token, finished and stored with one 16-byte store
  // when they fit (a store per channel costs the epilogue of a large tile microseconds of issue
  // slots), else channel by channel (the ragged end of N, or an unaligned C or bias).
  static __device__ __forceinline__ void store_octet(const DenseParams& p, const float (&v)[8],
                                                     int64_t token, int64_t channel, bool fit) {
    static_assert(sizeof(Out) == 2, "eight f16 / bf16 are 16 bytes");
    if (token >= p.m) return;
    if (!fit || channel + 8 > p.n) {
#pragma unroll
      for (int i = 0; i < 8; ++i) store(p, v[i], token, channel + i);
      return;
    }
    uint32 words[4];
#pragma unroll
    for (int i = 0; i < 8; i += 2)
      words[i / 2] = pack_pair<Out>(finish(p, v[i], channel + i), finish(p, v[i + 1], channel + i + 1));
    *reinterpret_cast<uint4*>(static_cast<Out*>(p.c) + token * p.n + channel) =
        make_uint4(words[0], words[1], words[2], words[3]);
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
  // shared memory at the same offset. The octets (8 channels) of the tile are dealt to the ranks
  // in turn (octet e to rank e % S, so every block shares the work even when the tile has few
  // octets), and each is summed over the S tiles in split order, so the result does not depend
  // on which block sums. A thread issues all of an octet's remote loads before adding: one
  // round trip of distributed shared memory instead of S in a row.
  static __device__ __forceinline__ void reduce_in_cluster(const DenseParams& p, float* tile,
                                                           int64_t n0, int64_t m0) {
    constexpr int kOctetsPerRow = kBlockN / 8;
    ptx::cluster_sync();  // every split's tile is in its block's shared memory
    const int ranks = static_cast<int>(ptx::cluster_blocks());
    const int rank = static_cast<int>(ptx::cluster_rank());
    const uint32 local = ptx::smem_address(tile);
    const int rows = p.m - m0 < C::kBlockM ? static_cast<int>(p.m - m0) : C::kBlockM;
    const bool fit = octets_fit(p);
    for (int e = threadIdx.x * ranks + rank; e < rows * kOctetsPerRow; e += kThreads * ranks) {
      const int r = e / kOctetsPerRow, c = (e % kOctetsPerRow) * 8;
      const uint32 offset = local + static_cast<uint32>(r * kTileStride + c) * 4;
      float4 part[kDenseMaxClusterSplits][2];
#pragma unroll
      for (int z = 0; z < kDenseMaxClusterSplits; ++z) {
        if (z < ranks) {
          const uint32 at = ptx::cluster_map(offset, static_cast<uint32>(z));
          part[z][0] = ptx::load_cluster_f32x4(at);
          part[z][1] = ptx::load_cluster_f32x4(at + 16);
        }
      }
      float sum[8] = {};
#pragma unroll
      for (int z = 0; z < kDenseMaxClusterSplits; ++z) {
        if (z < ranks) {
          sum[0] += part[z][0].x; sum[1] += part[z][0].y; sum[2] += part[z][0].z; sum[3] += part[z][0].w;
          sum[4] += part[z][1].x; sum[5] += part[z][1].y; sum[6] += part[z][1].z; sum[7] += part[z][1].w;
        }
      }
      store_octet(p, sum, m0 + r, n0 + c, fit);
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
    const int rows = p.m - m0 < C::kBlockM ? static_cast<int>(p.m - m0) : C::kBlockM;
    if (p.splits == 1) {
      const bool fit = octets_fit(p);
      for (int e = threadIdx.x; e < rows * kOctetsPerRow; e += kThreads) {
        const int r = e / kOctetsPerRow, c = (e % kOctetsPerRow) * 8;
        float v[8];
        load8(tile + r * kTileStride + c, v);
        store_octet(p, v, m0 + r, n0 + c, fit);
      }
      return;
    }
    // Split-K: publish this split's partials, count arrivals per tile; the last one reduces in
    // split order (deterministic whatever the arrival order) and leaves its counter at zero.
    // The partials are 16-byte aligned (the workspace is, and its counters are 16 KiB) and
    // n_pad is a multiple of 64, so octets move as two float4.
    float* mine = p.partials + static_cast<int64_t>(blockIdx.z) * p.m * p.n_pad;
    for (int e = threadIdx.x; e < rows * kOctetsPerRow; e += kThreads) {
      const int r = e / kOctetsPerRow, c = (e % kOctetsPerRow) * 8;
      if (n0 + c >= p.n_pad) continue;
      const float* from = tile + r * kTileStride + c;
      float4* to = reinterpret_cast<float4*>(mine + (m0 + r) * p.n_pad + n0 + c);
      to[0] = *reinterpret_cast<const float4*>(from);
      to[1] = *reinterpret_cast<const float4*>(from + 4);
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
    const bool fit = octets_fit(p);
    for (int e = threadIdx.x; e < rows * kOctetsPerRow; e += kThreads) {
      const int r = e / kOctetsPerRow, c = (e % kOctetsPerRow) * 8;
      const int64_t token = m0 + r, channel = n0 + c;
      if (channel >= p.n) continue;
      float sum[8] = {};
      for (int z = 0; z < p.splits; ++z) {
        const float4* from = reinterpret_cast<const float4*>(
            p.partials + (static_cast<int64_t>(z) * p.m + token) * p.n_pad + channel);
        const float4 lo = __ldcg(from), hi = __ldcg(from + 1);
        sum[0] += lo.x; sum[1] += lo.y; sum[2] += lo.z; sum[3] += lo.w;
        sum[4] += hi.x; sum[5] += hi.y; sum[6] += hi.z; sum[7] += hi.w;
      }
      store_octet(p, sum, token, channel, fit);
    }
  }
};

}  // namespace hm::gemm
