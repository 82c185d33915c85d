// The GPU activation quantizer (hm_quantize_activation_device): f16 / bf16 rows -> 8-bit codes and
// f32 scales per token or per token x K group, by the rule of activation.h.
//
// Work is cut into *teams* of Params::warps warps (1 to kMaxTeamsPerBlock teams per block; a team
// waits only on its own named barrier) and *passes*: a team loads warps x 32 lanes x
// Params::vectors 16-byte vectors of one row into registers (kept as 16-bit values), finds each
// group's absmax there and encodes from the registers, so the input is read once. Two ways to
// find the absmax (plan_work in activation.h):
//   kLaneGroups  group_k a power of two <= 256 (1x128 groups): a group is 1..32 adjacent lanes of
//                one vector, reduced with xor shuffles alone; a unit of work is a pass of a row;
//   kTeamGroups  per-token rows and every other group size: a unit of work is one group of a
//                row; a warp shuffle reduction, then one named barrier over a double-buffered
//                slot per warp (no atomics, nothing to clear). A group longer than a pass (at
//                most 32768 columns) is read twice: absmax, then encode (mostly from L2).
// The rule's two divisions are reciprocals and FMAs, exact for 16-bit inputs (activation.h); on
// sm_89+ fp8 codes come from cvt.rn.satfinite (round to nearest even onto the fp8 grid,
// saturating at the largest finite value: encode_float8's answer), int8 codes from one addition.
#pragma once

#include <humming/core/types.cuh>
#include <humming/ptx/cluster.cuh>
#include <humming/quant/activation.h>

namespace hm::actquant {

// Where a thread works: its team (warps x 32 lanes on one pass of a row) within the block.
struct Team {
  int warps, vectors;  // Params::warps, Params::vectors
  int index;           // the team in the block
  int warp, lane;      // the thread's warp in its team, its lane
};

__device__ __forceinline__ Team team_of(const Params& p) {
  Team t;
  t.warps = p.warps;
  t.vectors = p.vectors;
  const int team_threads = 32 * t.warps;
  t.index = static_cast<int>(threadIdx.x) / team_threads;
  t.warp = static_cast<int>(threadIdx.x) / 32 % t.warps;
  t.lane = static_cast<int>(threadIdx.x) % 32;
  return t;
}

// Waits for the team's warps: named barrier 1 + team (barrier 0, __syncthreads, is not used, so
// the teams of a block never wait for each other).
__device__ __forceinline__ void team_sync(const Team& t) {
  if (t.warps == 1) {
    __syncwarp();
  } else {
    asm volatile("bar.sync %0, %1;\n" ::"r"(t.index + 1), "r"(32 * t.warps) : "memory");
  }
}

// The first element, within a pass, of the thread's lane-vector i: a warp's lanes take 32
// adjacent vectors (512 coalesced bytes), the team's warps the next ones, and vector i + 1 comes
// after every warp's vector i (a short pass spreads over all the warps).
__device__ __forceinline__ int vector_offset(const Team& t, int i) {
  return ((i * t.warps + t.warp) * 32 + t.lane) * kVector;
}

__device__ __forceinline__ uint32_t umax(uint32_t a, uint32_t b) { return a > b ? a : b; }

// ---- loads

// A pass's inputs in registers: lane-vector i holds elements 2e (low half) and 2e + 1 (high half)
// of word e. Elements outside the pass are +0.
struct Pass {
  uint32_t h[kMaxVectorsPerLane][kVector / 2];
};

// The 16-bit input of output column `column` of the row at `a_row`; an out-of-range perm entry
// reads nothing and gives 0x7FFF, a NaN in f16 and in bf16 (the rule's NaN input).
__device__ __forceinline__ uint32_t load_bits(const Params& p, const uint16_t* a_row,
                                              int64_t column) {
  int64_t source = column;
  if (p.perm != nullptr) {
    int32_t entry;
    asm("ld.global.nc.s32 %0, [%1];\n" : "=r"(entry) : "l"(p.perm + column));
    if (entry < 0 || entry >= p.k) return 0x7FFFu;
    source = entry;
  }
  unsigned short h;
  asm("ld.global.nc.u16 %0, [%1];\n" : "=h"(h) : "l"(a_row + source));
  return h;
}

// Columns [c0, c0 + count) of the row at a_row, count <= the team's span. Without kVectorLoads
// (a perm, an unaligned a, or k % 8 != 0) the team first gathers the pass element by element into
// `staging` (its span of 16-bit values in shared memory; adjacent threads read adjacent columns),
// then each lane takes its vectors from there: the registers hold one pass either way, and the
// gather's loads are many and independent instead of 32 per thread held in registers.
__device__ __forceinline__ void load_pass(const Params& p, const Team& t, const uint16_t* a_row,
                                          int64_t c0, int count, uint16_t* staging, Pass& s) {
  if (!(p.flags & kVectorLoads)) {
    team_sync(t);  // the team's previous pass has read the staging
    const int team_threads = 32 * t.warps, first = t.warp * 32 + t.lane;
    const int span = team_threads * kVector * t.vectors;
#pragma unroll 8
    for (int j = first; j < span; j += team_threads)
      staging[j] = j < count ? static_cast<uint16_t>(load_bits(p, a_row, c0 + j)) : uint16_t{0};
    team_sync(t);
  }
#pragma unroll
  for (int i = 0; i < kMaxVectorsPerLane; ++i) {
    const int offset = vector_offset(t, i);
#pragma unroll
    for (int e = 0; e < kVector / 2; ++e) s.h[i][e] = 0u;
    if (i < t.vectors && offset < count) {
      if (p.flags & kVectorLoads) {
        // k % 8 == 0 and every pass starts at a multiple of 8: a vector is wholly in or out.
        asm("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n"
            : "=r"(s.h[i][0]), "=r"(s.h[i][1]), "=r"(s.h[i][2]), "=r"(s.h[i][3])
            : "l"(a_row + c0 + offset));
      } else {
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(s.h[i][0]), "=r"(s.h[i][1]), "=r"(s.h[i][2]), "=r"(s.h[i][3])
                     : "r"(static_cast<uint32_t>(__cvta_generic_to_shared(staging + offset))));
      }
    }
  }
}

// ---- absmax

// The larger of each 16-bit half of a and b, as unsigned integers.
__device__ __forceinline__ uint32_t max_u16x2(uint32_t a, uint32_t b) {
#if __CUDA_ARCH__ >= 900
  uint32_t out;
  asm("max.u16x2 %0, %1, %2;\n" : "=r"(out) : "r"(a), "r"(b));
  return out;
#else
  return umax(a & 0xFFFF0000u, b & 0xFFFF0000u) | umax(a & 0xFFFFu, b & 0xFFFFu);
#endif
}

// max |x| of a lane-vector as f32 bits (the rule's absmax). The magnitude bits of f16 and bf16
// values order as integers the way the magnitudes do (NaN above infinity above every finite
// value) and widening is monotone, so the max is taken on 16-bit values and widened once (cvt may
// quiet a NaN: its bits stay >= kInfBits, which is all the scale looks at).
template <int In>
__device__ __forceinline__ uint32_t vector_absmax(const uint32_t (&h)[kVector / 2]) {
  constexpr uint32_t kMagnitudes = 0x7FFF7FFFu;
  const uint32_t m = max_u16x2(max_u16x2(h[0] & kMagnitudes, h[1] & kMagnitudes),
                               max_u16x2(h[2] & kMagnitudes, h[3] & kMagnitudes));
  return float_bits(widen<In>(static_cast<uint16_t>(umax(m & 0xFFFFu, m >> 16))));
}

template <int In>
__device__ __forceinline__ uint32_t pass_absmax(const Pass& s) {
  uint32_t m = 0;
#pragma unroll
  for (int i = 0; i < kMaxVectorsPerLane; ++i) m = umax(m, vector_absmax<In>(s.h[i]));
  return m;  // vectors outside the pass are +0
}

__device__ __forceinline__ uint32_t warp_max(uint32_t m) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    m = umax(m, __shfl_xor_sync(0xFFFFFFFFu, m, offset));
  return m;
}

// The max of m over the team. `slots` (one per warp of the block) alternate between two buffers
// on consecutive calls: a warp writes a buffer again only after the next call's barrier, which
// every warp of the team reaches after reading it.
__device__ __forceinline__ uint32_t team_max(const Team& t, uint32_t m, uint32_t* slots) {
  m = warp_max(m);
  if (t.warps == 1) return m;
  uint32_t* team_slots = slots + t.index * t.warps;
  if (t.lane == 0) team_slots[t.warp] = m;
  team_sync(t);
  return warp_max(t.lane < t.warps ? team_slots[t.lane] : 0u);
}

// ---- encode and store

__device__ __forceinline__ uint32_t byte_perm(uint32_t a, uint32_t b, uint32_t selector) {
  uint32_t out;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(out) : "r"(a), "r"(b), "r"(selector));
  return out;
}

// The codes of one lane-vector: element e in byte e % 4 of word e / 4.
struct Codes {
  uint32_t lo, hi;
};

// The codes of q[0..7] by the rule's bit manipulation (fp8 before sm_89). Not inlined: eight
// of them at once in the caller's registers would spill.
template <int Out>
__device__ __noinline__ Codes encode_float8_vector(const float (&q)[kVector]) {
  uint32_t w[2] = {0u, 0u};
#pragma unroll
  for (int e = 0; e < kVector; ++e) w[e / 4] |= encode<Out>(q[e]) << (8 * (e % 4));
  return Codes{w[0], w[1]};
}

// The codes of the quotients q[0..7].
template <int Out>
__device__ __forceinline__ Codes pack_codes(const float (&q)[kVector]) {
  uint32_t w[2];
#if __CUDA_ARCH__ >= 890
  if (Out != kOutInt8) {
    // cvt.rn.satfinite (PTX ISA, cvt): the first source goes to the high byte.
#pragma unroll
    for (int word = 0; word < 2; ++word) {
      unsigned short pair[2];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float low = q[4 * word + 2 * half], high = q[4 * word + 2 * half + 1];
        if (Out == kOutE4m3)
          asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(pair[half]) : "f"(high), "f"(low));
        else
          asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;\n" : "=h"(pair[half]) : "f"(high), "f"(low));
      }
      w[word] = static_cast<uint32_t>(pair[0]) | (static_cast<uint32_t>(pair[1]) << 16);
    }
    return Codes{w[0], w[1]};
  }
#endif
  if (Out == kOutInt8) {
    // encode_int8 without its subtraction: after clamping, q + 1.5 * 2^23 has the bits
    // 0x4B400000 + the rounded integer, and 0x4B400000 is a multiple of 256: the low byte is the
    // code.
    uint32_t b[kVector];
#pragma unroll
    for (int e = 0; e < kVector; ++e) {
      const float clamped = q[e] < -128.0f ? -128.0f : q[e] > 127.0f ? 127.0f : q[e];
      b[e] = float_bits(__fadd_rn(clamped, 12582912.0f));
    }
#pragma unroll
    for (int word = 0; word < 2; ++word)
      w[word] = byte_perm(byte_perm(b[4 * word], b[4 * word + 1], 0x0040u),
                          byte_perm(b[4 * word + 2], b[4 * word + 3], 0x0040u), 0x5410u);
  } else {
    return encode_float8_vector<Out>(q);
  }
  return Codes{w[0], w[1]};
}

// The codes of one lane-vector of a group with divisor d.
template <int In, int Out>
__device__ __forceinline__ Codes encode_vector(const uint32_t (&h)[kVector / 2],
                                               const ScaleDivisor& d) {
  float q[kVector];
#pragma unroll
  for (int e = 0; e < kVector; ++e)
    q[e] = divide_by_scale(widen<In>(static_cast<uint16_t>(h[e / 2] >> (16 * (e % 2)))), d);
  const Codes c = pack_codes<Out>(q);
  const bool finite = d.scale == d.scale;  // a non-finite group: zero codes
  return Codes{finite ? c.lo : 0u, finite ? c.hi : 0u};
}

// Stores the codes of pass columns [offset, offset + 8) that are below `count`.
__device__ __forceinline__ void store_vector(const Params& p, uint8_t* codes_pass, int offset,
                                             int count, Codes c) {
  uint8_t* out = codes_pass + offset;
  if (offset + kVector <= count && (p.flags & kVectorStores)) {
    asm volatile("st.global.v2.u32 [%0], {%1, %2};\n" ::"l"(out), "r"(c.lo), "r"(c.hi) : "memory");
  } else {
#pragma unroll
    for (int e = 0; e < kVector; ++e)
      if (offset + e < count) out[e] = static_cast<uint8_t>((e < 4 ? c.lo : c.hi) >> (8 * (e % 4)));
  }
}

// Encodes a pass of `count` columns whose codes start at codes_pass.
template <int In, int Out>
__device__ __forceinline__ void encode_pass(const Params& p, const Team& t, uint8_t* codes_pass,
                                            int count, const Pass& s, const ScaleDivisor& d) {
#pragma unroll
  for (int i = 0; i < kMaxVectorsPerLane; ++i) {
    const int offset = vector_offset(t, i);
    if (i < t.vectors && offset < count)
      store_vector(p, codes_pass, offset, count, encode_vector<In, Out>(s.h[i], d));
  }
}

// ---- the two kinds of work

// kLaneGroups: columns [c0, c0 + count) of a row, groups of 8 << shift columns (shift 0..5), so
// 1 << shift lanes per group.
template <int In, int Out>
__device__ __forceinline__ void lane_groups(const Params& p, const Team& t, int64_t row,
                                            int64_t c0, int count, int shift,
                                            uint16_t* staging) {
  Pass s;
  load_pass(p, t, p.a + row * p.k, c0, count, staging, s);
  uint8_t* codes_pass = p.codes + row * p.k + c0;
  float* scales_pass = p.scales + row * p.groups + (c0 >> (shift + 3));  // c0: whole groups
  const int lanes = 1 << shift;
#pragma unroll
  for (int i = 0; i < kMaxVectorsPerLane; ++i) {
    uint32_t m = vector_absmax<In>(s.h[i]);
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1)
      if (offset < lanes) m = umax(m, __shfl_xor_sync(0xFFFFFFFFu, m, offset));
    const int offset = vector_offset(t, i);
    if (i < t.vectors && offset < count) {
      const ScaleDivisor d = divisor_of(group_scale_by_reciprocal<Out>(m));
      // The group's first lane holds its first vector, inside the pass whenever any of it is.
      if ((t.lane & (lanes - 1)) == 0) scales_pass[offset >> (shift + 3)] = d.scale;
      store_vector(p, codes_pass, offset, count, encode_vector<In, Out>(s.h[i], d));
    }
  }
}

// kTeamGroups: group g of a row, columns [c0, end); `slots`: this call's buffer of warp maxima.
template <int In, int Out>
__device__ __forceinline__ void team_group(const Params& p, const Team& t, int64_t row, int64_t g,
                                           int span, uint32_t* slots, uint16_t* staging) {
  const int64_t c0 = g * p.group_k;
  const int64_t end = c0 + p.group_k < p.k ? c0 + p.group_k : p.k;
  const uint16_t* a_row = p.a + row * p.k;
  uint8_t* codes_row = p.codes + row * p.k;
  Pass s;
  if (end - c0 <= span) {  // the group in one pass, in registers from load to store
    const int count = static_cast<int>(end - c0);
    load_pass(p, t, a_row, c0, count, staging, s);
    const ScaleDivisor d =
        divisor_of(group_scale_by_reciprocal<Out>(team_max(t, pass_absmax<In>(s), slots)));
    if (t.warp == 0 && t.lane == 0) p.scales[row * p.groups + g] = d.scale;
    encode_pass<In, Out>(p, t, codes_row + c0, count, s, d);
    return;
  }
  // A group longer than a pass: its absmax pass by pass, then the passes again to encode.
  uint32_t m = 0;
  for (int64_t c = c0; c < end; c += span) {
    load_pass(p, t, a_row, c, static_cast<int>(end - c < span ? end - c : span), staging, s);
    m = umax(m, pass_absmax<In>(s));
  }
  const ScaleDivisor d = divisor_of(group_scale_by_reciprocal<Out>(team_max(t, m, slots)));
  if (t.warp == 0 && t.lane == 0) p.scales[row * p.groups + g] = d.scale;
  for (int64_t c = c0; c < end; c += span) {
    const int count = static_cast<int>(end - c < span ? end - c : span);
    load_pass(p, t, a_row, c, count, staging, s);
    encode_pass<In, Out>(p, t, codes_row + c, count, s, d);
  }
}

// The team's units of work: unit u of the grid is (row u / per_row, u % per_row), a pass of the
// row for kLaneGroups, a group for kTeamGroups. The team takes first, first + stride, ..., walked
// as (row, unit of the row) pairs without a division in the loop.
struct Walk {
  int64_t row, unit, row_step, unit_step, per_row;

  __device__ __forceinline__ Walk(const Team& t, int64_t units_per_row) {
    const int teams = static_cast<int>(blockDim.x) / (32 * t.warps);
    const int64_t first = int64_t{blockIdx.x} * teams + t.index;
    const int64_t stride = int64_t{gridDim.x} * teams;
    per_row = units_per_row;
    row = first / per_row;
    unit = first % per_row;
    row_step = stride / per_row;
    unit_step = stride % per_row;
  }
  __device__ __forceinline__ void next() {
    row += row_step;
    unit += unit_step;
    if (unit >= per_row) {
      unit -= per_row;
      ++row;
    }
  }
};

// The two work loops. On sm_90+ they are inlined: the kernel then reads its parameter in place
// (__grid_constant__) with no stack frame, which measured 1.2-2.5 us faster at M = 1-128 on the
// H200 (NOTES v30; the frame held a copy of Params that every thread wrote and read back through
// local memory). Older arches keep them out of line: inlined, their register allocations add up
// past the 64 registers that 1024-thread blocks allow, and spill (software fp8 encoding).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define HM_ACTQUANT_WORK_LOOP __device__ __forceinline__
#else
#define HM_ACTQUANT_WORK_LOOP __device__ __noinline__
#endif

template <int In, int Out>
HM_ACTQUANT_WORK_LOOP void quantize_lane_groups(const Params& p, const Team& t, int span,
                                                int64_t units_per_row, uint16_t* staging) {
  const int shift = __ffs(static_cast<int>(p.group_k)) - 4;  // group_k = 8 << shift
  for (Walk w(t, units_per_row); w.row < p.m; w.next()) {
    const int64_t c0 = w.unit * span;
    lane_groups<In, Out>(p, t, w.row, c0, static_cast<int>(p.k - c0 < span ? p.k - c0 : span),
                         shift, staging);
  }
}

template <int In, int Out>
HM_ACTQUANT_WORK_LOOP void quantize_team_groups(const Params& p, const Team& t, int span,
                                                uint32_t (*warp_maxima)[kMaxThreads / 32],
                                                uint16_t* staging) {
  int parity = 0;
  for (Walk w(t, p.groups); w.row < p.m; w.next()) {
    team_group<In, Out>(p, t, w.row, w.unit, span, warp_maxima[parity], staging);
    parity ^= 1;
  }
}

// kClusterRows (sm_90+): row blockIdx.x / ranks, spread over the ranks blocks of one cluster,
// Params::vectors lane-vectors per thread (a block's are adjacent: vector i of every thread is
// i x blockDim.x vectors into the block's span, so each warp load reads 512 adjacent bytes). Each
// block reduces its part (shuffles, one block barrier), its first warp writes that maximum into
// every block of the cluster (distributed shared memory), and after one cluster barrier every
// block holds all of them. For the calls this serves (m <= SMs) the work is a chain of
// latencies: a whole row in one block of 32 warps (the kTeamGroups path) kept one SM issuing 32
// warps' instructions (v30: 8 us at M = 1 under ncu, issue-bound on the one busy SM); here a
// row's instructions spread over up to 8 SMs, and a block takes more vectors per thread before
// it takes more warps (plan_cluster_rows).
template <int In, int Out>
__device__ __forceinline__ void cluster_row(const Params& p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __shared__ uint32_t warp_maxima[kMaxThreads / 32];
  __shared__ uint32_t rank_maxima[kMaxClusterRanks];
  // The other blocks must have started before this one writes into their shared memory: every
  // thread arrives now and waits just before the write, by when the loads have long returned.
  ptx::cluster_arrive_relaxed();
  const uint32_t rank = ptx::cluster_rank(), ranks = ptx::cluster_blocks();
  const int64_t row = blockIdx.x / ranks;
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int warps = static_cast<int>(blockDim.x / 32);
  // At most 8 ranks x 1024 threads x 4 vectors x 8 columns: int holds every column.
  const int first = static_cast<int>((rank * p.vectors * blockDim.x + threadIdx.x) * kVector);
  const int step = static_cast<int>(blockDim.x * kVector);
  const uint16_t* a_row = p.a + row * p.k;
  // k % 8 == 0 (kVectorLoads): a vector is wholly in or out; one past k stays +0.
  Pass s;
#pragma unroll
  for (int i = 0; i < kMaxVectorsPerLane; ++i) {
    const int column = first + i * step;
#pragma unroll
    for (int e = 0; e < kVector / 2; ++e) s.h[i][e] = 0u;
    if (i < p.vectors && column < p.k)
      asm("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n"
          : "=r"(s.h[i][0]), "=r"(s.h[i][1]), "=r"(s.h[i][2]), "=r"(s.h[i][3])
          : "l"(a_row + column));
  }
  const uint32_t m = warp_max(pass_absmax<In>(s));
  if (lane == 0) warp_maxima[warp] = m;
  __syncthreads();
  ptx::cluster_wait();
  if (warp == 0) {
    const uint32_t block_max = warp_max(lane < warps ? warp_maxima[lane] : 0u);
    if (lane < static_cast<int>(ranks))
      ptx::store_cluster_u32(
          ptx::cluster_map(static_cast<uint32_t>(__cvta_generic_to_shared(&rank_maxima[rank])),
                           static_cast<uint32_t>(lane)),
          block_max);
  }
  ptx::cluster_sync();  // release / acquire: every rank's maximum is in rank_maxima
  uint32_t all = 0;
  for (uint32_t r = 0; r < ranks; ++r) all = umax(all, rank_maxima[r]);
  const ScaleDivisor d = divisor_of(group_scale_by_reciprocal<Out>(all));
  if (rank == 0 && threadIdx.x == 0) p.scales[row * p.groups] = d.scale;
  uint8_t* codes_row = p.codes + row * p.k;
#pragma unroll
  for (int i = 0; i < kMaxVectorsPerLane; ++i) {
    const int column = first + i * step;
    if (i < p.vectors && column < p.k)
      store_vector(p, codes_row, column, static_cast<int>(p.k), encode_vector<In, Out>(s.h[i], d));
  }
#endif
}

template <int In, int Out>
__device__ __forceinline__ void quantize(const Params& p) {
  if (p.flags & kClusterRows) {
    cluster_row<In, Out>(p);
    return;
  }
  __shared__ uint32_t warp_maxima[2][kMaxThreads / 32];
  extern __shared__ __align__(16) uint16_t staging_of_block[];  // staging_bytes(p, blockDim.x)
  const Team t = team_of(p);
  const WorkPlan plan = plan_work(p);
  const int span = static_cast<int>(plan.span);
  uint16_t* staging = staging_of_block + t.index * span;
  if (plan.reduction == kLaneGroups)
    quantize_lane_groups<In, Out>(p, t, span, plan.units_per_row, staging);
  else
    quantize_team_groups<In, Out>(p, t, span, warp_maxima, staging);
}

}  // namespace hm::actquant

// Defines the extern "C" quantizer `name` for input In (kInF16, kInBf16) and output Out (kOutE4m3,
// kOutE5m2, kOutInt8). Launch with 32 x Params::warps x (1..kMaxTeamsPerBlock teams) threads, at
// most kMaxThreads, staging_bytes(p, threads) of dynamic shared memory, and any grid (it strides
// over the work).
#define HM_DEFINE_QUANTIZE_ACTIVATION(name, In, Out)                                            \
  extern "C" __global__ void __launch_bounds__(::hm::actquant::kMaxThreads)                    \
      name(const __grid_constant__ ::hm::actquant::Params p) {                                 \
    ::hm::actquant::quantize<In, Out>(p);                                                      \
  }
