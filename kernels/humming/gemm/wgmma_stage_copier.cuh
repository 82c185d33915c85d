// The stage copier of the sm90a wgmma kernel (gemm/dense_wgmma.cuh): one thread's share of
// filling the kernel's shared-memory stages, chunk after chunk, with the activations, the weight
// chunks and the scale / zero-point codes of one K step. Either every thread copies its units
// with cp.async, or one thread (the copying warp's lane 0, or thread 0) copies tensor boxes with
// TMA that complete on the stage's `full` mbarrier. The kernel's mainloop decides when a stage is
// filled and waits for it; this component only says how, and who arrives on `full`.
//
// Everything that does not depend on the chunk is worked out once per block, and the
// chunk-dependent part advances by constant steps: per chunk a copy is an add and the cp.async
// (at small M the kernel is bound by instructions per chunk, so the copy must not redo 64-bit
// address arithmetic each time).
#pragma once

#include <humming/core/types.cuh>
#include <humming/gemm/params.h>
#include <humming/gemm/sched.cuh>
#include <humming/ptx/mbarrier.cuh>
#include <humming/ptx/mma.cuh>

namespace hm::gemm {

// Kernel is DenseWgmma<C>: the copier follows its configuration and its stage layout
// ([activations kBlockM x 128 B][weights kWarps x step][scale codes][zero codes], params.h).
template <class Kernel>
struct WgmmaStageCopier {
  using C = typename Kernel::Config;
  using D = typename Kernel::D;
  static constexpr int kActBytes = Kernel::kActBytes;
  static constexpr int kStepK = Kernel::kStepK;            // k per stage
  static constexpr int kStepChunks = Kernel::kStepChunks;  // chunks per warp and step
  static constexpr int kWarps = Kernel::kWarps;
  static constexpr int kThreads = Kernel::kThreads;  // the warps that compute
  static constexpr int kBlockN = Kernel::kBlockN;
  static constexpr int kChunkBytes = Kernel::kChunkBytes;
  static constexpr int kWarpStepBytes = Kernel::kWarpStepBytes;  // a warp's weights per step
  static constexpr int kLaneWords = Kernel::kLaneWords;
  static constexpr int kSlots = Kernel::kSlots;
  static constexpr int kScaleBytes = Kernel::kScaleBytes;  // 0: no scale codes in the stages
  static constexpr int kZeroBytes = Kernel::kZeroBytes;    // 0: no zero-point codes
  static constexpr int kWeightOffset = Kernel::kWeightOffset;
  static constexpr int kScaleOffset = Kernel::kScaleOffset;
  static constexpr int kZeroOffset = Kernel::kZeroOffset;

  // With TMA (C::kTma), one thread copies a stage's activation tile and weight chunks as two
  // tensor boxes: the activations [kBlockM rows][128 bytes] with the 128B swizzle the wgmma
  // descriptor expects, the weights [kWarps strips][one step's chunks] (docs/layout.md: a strip's
  // chunks are contiguous); rows and strips past the tensor arrive as zeros.
  // The scale and zero-point codes of a chunk are one box too when its group slots are
  // consecutive rows (params.h); then every copy is a TMA and one thread does all of a stage's
  // copying, else the threads that hold a code unit copy it with cp.async as without TMA.
  static constexpr bool kCodesByTma =
      C::kTma && dense_group_slots_consecutive(C::kGroupK, kStepK);
  static_assert(!C::kProducer || kCodesByTma,
                "the copying warp needs the scale / zero-point codes as TMA boxes too");
  // MoE rows of A are gathered (sched.cuh: a row of the tile is any row of A), which a tensor box
  // cannot do on sm_90: with TMA (and so a copying warp) the weights and codes come as boxes and
  // the copying warp's 32 lanes gather the rows with cp.async, each arriving on `full` when its
  // copies have landed (cp.async.mbarrier.arrive.noinc).
  static constexpr bool kWarpGathers = C::kMoe && C::kTma;
  static_assert(!kWarpGathers || C::kProducer, "MoE TMA tiles gather A in the copying warp");
  static constexpr uint32 kTmaBytes =
      (kWarpGathers ? 0 : C::kBlockM * 128) + kWarps * kWarpStepBytes +
      (kCodesByTma ? kSlots * kBlockN * (kScaleBytes + kZeroBytes) : 0);
  // The weight map's elements per K step (its coordinates count elements, params.h).
  static constexpr int kWarpStepElements =
      kWarpStepBytes / dense_wgmma_weight_tma_bytes(kLaneWords);
  // Arrivals that complete a stage's `full` barrier: the copying thread's alone when TMA does
  // everything, its lane 0's and each of its lanes' cp.async arrival when the copying warp
  // gathers MoE rows, else every thread's cp.async arrival.
  static constexpr int kFullArrivals = kWarpGathers ? 1 + 32 : kCodesByTma ? 1 : kThreads;
  // The thread that issues the TMA copies: the copying warp's lane 0, or thread 0.
  static __device__ __forceinline__ bool copies_by_tma() {
    return threadIdx.x == (C::kProducer ? kThreads : 0);
  }

  // Activations: unit u = t + j * kActThreads (t: the thread's index among the kActThreads that
  // copy them) is row u / 8, 16-byte unit u % 8 of the [kBlockM][64] tile, stored at unit
  // (u % 8) ^ (row % 8) (the 128B swizzle). With every computing thread copying (a multiple of
  // 64), a thread's rows are kActThreads / 8 apart and keep the same swizzle phase; with the
  // copying warp's 32 lanes they are 4 apart, so the phase alternates between two offsets.
  static constexpr int kActThreads = wgmma_act_copiers(kWarpGathers, kThreads);
  static constexpr int kActIters = wgmma_act_rows_per_copier(C::kBlockM, kActThreads);
  static constexpr int kRowsPerIter = kActThreads / 8;
  static_assert(kActThreads % 64 == 0 || kActThreads == 32, "one or two swizzle phases");
  static __device__ __forceinline__ int act_thread() {
    return kWarpGathers ? static_cast<int>(threadIdx.x) - kThreads : static_cast<int>(threadIdx.x);
  }
  // Activations: a 16-byte unit is kUnitK values of a row.
  static constexpr int kUnitK = 16 / kActBytes;
  // Weights: unit u is byte 16 (u % units per step) of warp u / (units per step)'s chunks of
  // the step (contiguous: docs/layout.md, a strip's chunks follow each other); the stage keeps
  // the warps' steps back to back, so it lands at kWeightOffset + 16 u.
  static constexpr int kUnitsPerStep = kWarpStepBytes / 16;
  static constexpr int kWeightIters = (kWarps * kUnitsPerStep + kThreads - 1) / kThreads;
  // The codes of one side tensor (scales or zero points, [group][cols] of kBytes-byte codes),
  // laid out in the stage as [slot][block channel]: unit u is slot u / units per row, 16-byte
  // unit u % units per row. One pass of the block's threads covers them (asserted below).
  struct Codes {
    const char* src = nullptr;  // this thread's unit in group row 0 (null: none to copy)
    int64_t row_bytes = 0;      // bytes between group rows
    int slot = 0;
    // Group rows in the tensor: K is padded to whole groups and 64-wide chunks, so the second
    // half of an 8-bit step past the last chunk has slots beyond them (zero-filled, not read).
    int groups = 0;
    template <int kBytes>
    __device__ __forceinline__ void plan(const void* base, int64_t cols, int64_t n0,
                                         int64_t n_pad, int64_t k_pad) {
      groups = C::kGroupK > 0 ? static_cast<int>(k_pad / C::kGroupK) : 1;
      constexpr int kUnits = kBlockN * kBytes / 16;  // 16-byte units of one slot's row
      const int t = threadIdx.x, u = t % kUnits;
      // Channel blocks start on a multiple of 64 and n_pad is one: a unit is all in or out.
      if (t < kSlots * kUnits && n0 + u * 16 / kBytes < n_pad) {
        src = static_cast<const char*>(base) + n0 * kBytes + u * 16;
        row_bytes = cols * kBytes;
        slot = t / kUnits;
      }
    }
    // Chunk kc's group row into the thread's unit `dst` of the stage.
    __device__ __forceinline__ void copy(uint32 dst, int kc) const {
      if (src != nullptr) {
        const int group = D::group_of_slot(kc, slot);
        ptx::cp_async_16(dst, group < groups ? src + static_cast<int64_t>(group) * row_bytes : src,
                         group < groups ? 16 : 0);
      }
    }
  };

  // A thread's activation rows: with few of them, one pointer each (stepping by 128 bytes);
  // with many (256-token tiles), one pointer and a row step, to spare registers.
  static constexpr int kActPointers = kActIters <= 4 || C::kMoe ? kActIters : 1;
  static_assert(!C::kMoe || kActIters <= kMoeMaxGatheredRows,
                "MoE rows are gathered: one pointer per row");
  const char* act[kActPointers];
  int64_t act_row_step;  // bytes between a thread's rows (kActPointers == 1)
  int act_rows;          // how many of its iterations hold a real token (dense)
  uint32 act_real;       // MoE: bit j set when iteration j's row is a real assignment
  int act_k;             // the unit's first k in the next step (16-byte units: all in or out)
  int k;                 // K
  int kc;                // the next K step
  uint32 act_dst;        // stage offset of iteration 0
  uint32 act_dst_odd;    // ... of iteration 1 minus kRowsPerIter rows (two swizzle phases)
  const char* w[kWeightIters];
  int w_step[kWeightIters];  // kWarpStepBytes, or 0 past the last strip (the unit is zero-filled)
  // Two chunks per step: the steps whose chunk of this unit exists (the last step of an odd
  // number of chunks has only its first; the other is zero-filled, never read past the strip).
  int w_steps[kStepChunks > 1 ? kWeightIters : 1];
  uint32 unit_dst;           // this thread's 16-byte unit in a stage: threadIdx.x * 16
  const void* map_a;         // TMA: the tensor maps (in the kernel's parameter) and the box
  const void* map_w;         //      coordinates of the block's rows, strips and channels
  const void* map_s;
  const void* map_z;
  int tma_m0, tma_strip0;
  // The weight map's row of strip0 and the code maps' row of group 0: MoE maps cover every
  // expert, whose strips and group rows follow those of the experts before it (the codes'
  // columns are the block's channels, the same for every expert).
  int tma_w_row0, tma_group0;
  Codes scale, zero;

  // p: the block's parameters (for MoE, moved to its expert: sched.cuh); maps: the kernel's own
  // parameter, whose tensor maps TMA reads (a copy in local memory is no tensor map).
  __device__ __forceinline__ WgmmaStageCopier(const DenseParams& p, const DenseParams& maps,
                                              int64_t m0, int64_t strip0, int64_t kc0,
                                              int64_t expert) {
    const int t = threadIdx.x;
    const int ta = act_thread();
    const int r0 = ta / 8, unit = ta % 8;
    act_row_step = int64_t{kRowsPerIter} * p.k * kActBytes;
    if constexpr (C::kMoe) {
      // Gathered rows (sched.cuh): each iteration's row of A, or none for a padding slot.
      act_real = 0;
      act_rows = 0;
#pragma unroll
      for (int j = 0; j < kActIters; ++j) {
        const int r = r0 + j * kRowsPerIter;
        // Only the threads that copy activations read the routing (ta < 0: a computing thread
        // of a tile whose copying warp gathers).
        const int64_t row = ta >= 0 && r < C::kBlockM ? a_row<C>(p, m0 + r) : -1;
        act[j] = static_cast<const char*>(p.a) +
                 ((row < 0 ? 0 : row) * p.k + kc0 * kStepK + unit * kUnitK) * kActBytes;
        if (row >= 0) act_real |= 1u << j;
      }
    } else {
      const char* act0 = static_cast<const char*>(p.a) +
                         ((m0 + r0) * p.k + kc0 * kStepK + unit * kUnitK) * kActBytes;
#pragma unroll
      for (int j = 0; j < kActPointers; ++j) act[j] = act0 + j * act_row_step;
      const int64_t rows = p.m - m0 < C::kBlockM ? p.m - m0 : C::kBlockM;
      act_rows =
          r0 < rows ? static_cast<int>((rows - r0 + kRowsPerIter - 1) / kRowsPerIter) : 0;
    }
    act_k = static_cast<int>(kc0 * kStepK) + unit * kUnitK;
    k = static_cast<int>(p.k);
    kc = static_cast<int>(kc0);
    act_dst = r0 * 128 + ((unit ^ (r0 & 7)) * 16);
    act_dst_odd = r0 * 128 + ((unit ^ ((r0 + kRowsPerIter) & 7)) * 16);
    unit_dst = t * 16;
    map_a = &maps.tma_a;
    map_w = &maps.tma_w;
    map_s = &maps.tma_s;
    map_z = &maps.tma_z;
    const int64_t strips = p.n_pad / 16, k_chunks = p.k_pad / 64;
    // The maps cover every expert (gemm/dense_launch.cpp).
    tma_m0 = static_cast<int>(m0);
    tma_strip0 = static_cast<int>(strip0);
    tma_w_row0 = static_cast<int>(expert * strips + strip0);
    tma_group0 = C::kGroupK > 0 ? static_cast<int>(expert * (p.k_pad / C::kGroupK)) : 0;
#pragma unroll
    for (int j = 0; j < kWeightIters; ++j) {
      const int u = t + j * kThreads;
      const int64_t strip = strip0 + u / kUnitsPerStep;
      const bool real = u < kWarps * kUnitsPerStep && strip < strips;
      w[j] = static_cast<const char*>(p.w) +
             (real ? (strip * k_chunks + kc0 * kStepChunks) * kChunkBytes +
                         (u % kUnitsPerStep) * 16
                   : 0);
      w_step[j] = real ? kWarpStepBytes : 0;
      if constexpr (kStepChunks > 1) {
        const int c = (u % kUnitsPerStep) / (kChunkBytes / 16);  // the unit's chunk of a step
        w_steps[j] = static_cast<int>((k_chunks - c + kStepChunks - 1) / kStepChunks);
      }
    }
    const int64_t n0 = strip0 * 16;
    if constexpr (kScaleBytes > 0)
      scale.template plan<kScaleBytes>(p.scales, p.scale_cols, n0, p.n_pad, p.k_pad);
    if constexpr (kZeroBytes > 0)
      zero.template plan<kZeroBytes>(p.zeros, p.n_pad, n0, p.n_pad, p.k_pad);
  }

  // Issues the copies of the next chunk into the stage at shared address `stage` (with TMA,
  // completing on the stage's `full` barrier), then steps to the chunk after it.
  // With kCodesByTma only the copying thread calls this; it then also arrives on `full`.
  __device__ __forceinline__ void copy_next(uint32 stage, uint32 full = 0) {
    if constexpr (C::kTma) {
      if (copies_by_tma()) {
        if constexpr (kCodesByTma) {
          ptx::mbarrier_arrive_expect_tx(full, kTmaBytes);
        } else {
          ptx::mbarrier_expect_tx(full, kTmaBytes);
        }
        if constexpr (!kWarpGathers) ptx::tma_load_2d(stage, map_a, kc * kStepK, tma_m0, full);
        ptx::tma_load_2d(stage + kWeightOffset, map_w, kc * kWarpStepElements, tma_w_row0, full);
        if constexpr (kCodesByTma) {
          // Slot 0's group row; the slots are the rows after it (params.h).
          const int group = tma_group0 + D::group_of_slot(kc, 0);
          if constexpr (kScaleBytes > 0)
            ptx::tma_load_2d(stage + kScaleOffset, map_s, tma_strip0 * 16, group, full);
          if constexpr (kZeroBytes > 0)
            ptx::tma_load_2d(stage + kZeroOffset, map_z, tma_strip0 * 16, group, full);
        }
      }
      if constexpr (kWarpGathers) copy_act(stage);  // every lane of the copying warp
    } else {
      copy_act(stage);
      copy_weights(stage);
    }
    if constexpr (!kCodesByTma) {
      if constexpr (kScaleBytes > 0) scale.copy(stage + kScaleOffset + unit_dst, kc);
      if constexpr (kZeroBytes > 0) zero.copy(stage + kZeroOffset + unit_dst, kc);
    }
    act_k += kStepK;
    ++kc;
  }

  // Iteration j's unit of the activation tile (one or two swizzle phases, see kActThreads).
  __device__ __forceinline__ uint32 act_unit(int j) const {
    if constexpr (kRowsPerIter % 8 == 0) return act_dst + j * kRowsPerIter * 128;
    return ((j & 1) != 0 ? act_dst_odd : act_dst) + j * kRowsPerIter * 128;
  }

  __device__ __forceinline__ void copy_act(uint32 stage) {
    const int a_bytes = act_k < k ? 16 : 0;
#pragma unroll
    for (int j = 0; j < kActIters; ++j) {
      // Rows past M (or padding slots) are left as they are: they only feed output columns
      // that are not stored.
      if (C::kMoe ? (act_real >> j & 1u) != 0 : j < act_rows)
        ptx::cp_async_16(stage + act_unit(j),
                         kActPointers == kActIters ? act[j] : act[0] + j * act_row_step,
                         a_bytes);
    }
#pragma unroll
    for (int j = 0; j < kActPointers; ++j) act[j] += 128;
  }

  __device__ __forceinline__ void copy_weights(uint32 stage) {
#pragma unroll
    for (int j = 0; j < kWeightIters; ++j) {
      if (kWeightIters * kThreads == kWarps * kUnitsPerStep ||
          threadIdx.x + j * kThreads < kWarps * kUnitsPerStep) {
        bool here = w_step[j] != 0;
        if constexpr (kStepChunks > 1) here = here && kc < w_steps[j];
        ptx::cp_async_16(stage + kWeightOffset + unit_dst + j * kThreads * 16, w[j],
                         here ? 16 : 0);
      }
      w[j] += w_step[j];
    }
  }

  static_assert(kSlots * kBlockN * kScaleBytes / 16 <= kThreads &&
                    kSlots * kBlockN * kZeroBytes / 16 <= kThreads,
                "one pass of the block's threads copies every scale and zero-point unit");
};

}  // namespace hm::gemm
