// The wgmma kernel's pipeline (gemm/dense_wgmma.cuh): how its K steps ("chunks") flow through
// kStages shared-memory stages. The kernel says what a step is (dequantize a stage into 16 A
// registers, issue its wgmma, fold a K group's sums) and the stage copier
// (gemm/wgmma_stage_copier.cuh) how a stage is filled; this file says when each happens and how
// a stage passes between copies and compute:
//  - a block barrier per step (cp.async groups: chunk j is group j), cheapest for small tiles;
//  - per-stage full / empty mbarriers (C::kDecoupled), which let warpgroups drift apart (needed
//    for TMA, best for large tiles), optionally with a warp that only copies (C::kProducer).
// Either way the copies run kStages - 1 chunks ahead of the compute, and with C::kDequantAhead a
// warp dequantizes chunk i + 1 while chunk i's wgmma run.
#pragma once

#include <humming/core/types.cuh>
#include <humming/ptx/mbarrier.cuh>
#include <humming/ptx/mma.cuh>
#include <humming/ptx/wgmma.cuh>

namespace hm::gemm {

// K: the kernel (DenseWgmma<C>): its Config, kStages, kStageBytes, kThreads, kWarps, its
// Copier and pinned().
template <class K>
struct WgmmaPipeline {
  using C = typename K::Config;
  using Copier = typename K::Copier;
  static constexpr int kStages = K::kStages;
  static constexpr int kStageBytes = K::kStageBytes;
  static constexpr int kThreads = K::kThreads;
  static constexpr int kWarps = K::kWarps;

  // Runs the n chunks of a block's K range: dequantize(stage, regs) fills regs from a stage,
  // issue(stage, regs, i) issues chunk i's wgmma, fold(stage, i) runs after they complete.
  // a / ahead: the A registers of chunk i and, dequantizing ahead, of chunk i + 1.
  template <class Dequantize, class Issue, class Fold>
  static __device__ __forceinline__ void run(Copier& copier, const uint32 base_address,
                                             const int n, const int warp, const int lane,
                                             uint32 (&a)[16], uint32 (&ahead)[16],
                                             Dequantize& dequantize, Issue& issue, Fold& fold) {
    // With C::kDequantAhead a warp dequantizes chunk i + 1 into a second register set while
    // chunk i's wgmma run, so its own ALU work hides behind its own tensor work (ptxas accepts
    // this without serializing: the registers written are not inputs of the group in flight).
    // Without it, a warp dequantizes chunk i and issues it, and overlap comes only from other
    // warpgroups and blocks.
    // Runs step(i, registers of chunk i, registers for chunk i + 1) for every chunk. Dequantizing
    // ahead, the two register sets swap roles each step: two steps per iteration, so that no
    // register copy is needed (the arrays are named statically in each).
    auto run_steps = [&](auto&& step) {
      if constexpr (C::kDequantAhead) {
        for (int i = 0; i < n; i += 2) {
          step(i, a, ahead);
          if (i + 1 < n) step(i + 1, ahead, a);
        }
      } else {
        for (int i = 0; i < n; ++i) step(i, a, a);
      }
    };
    // The wgmma read their A registers asynchronously, until the wait; to the compiler they are
    // dead once the instruction is issued, and ptxas would hand them to whatever comes next (the
    // refill's addresses, the next chunk's codes) while the tensor cores still read them. An
    // empty asm that "changes" them after the wait keeps them alive and untouched until then.
    auto keep_until_here = [](uint32 (&regs)[16]) {
#pragma unroll
      for (int j = 0; j < 16; ++j) ptx::fence_operand(regs[j]);
    };
    if constexpr (C::kDecoupled) {
      // Per stage: `full` completes when every thread's copies into it have landed (cp.async
      // arrivals), `empty` when every warp has finished the wgmma that read it. No block-wide
      // barrier in the loop: a warpgroup may run one chunk ahead of another, so one dequantizes
      // while the other's wgmma keeps the tensor cores busy. Pays off with large tiles; small
      // ones, whose chunks are short, do better with one barrier per chunk (below).
      __shared__ __align__(8) uint64_t full[kStages], empty[kStages];
      const uint32 full0 = K::pinned(ptx::smem_address(&full[0]));
      const uint32 empty0 = K::pinned(ptx::smem_address(&empty[0]));
      if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < kStages; ++s) {
          ptx::mbarrier_init(full0 + 8 * s, Copier::kFullArrivals);
          ptx::mbarrier_init(empty0 + 8 * s, kThreads);  // every computing thread arrives
        }
        if constexpr (C::kTma) ptx::fence_proxy_async_shared();  // TMA completes on them
      }
      __syncthreads();
      // A stage's copies: thread 0's TMA alone, or every thread's share and its arrival, or
      // (Copier::kWarpGathers) the copying warp's lane 0's TMA and each of its lanes' gathered
      // rows of A and arrival.
      constexpr bool kArrivesByCpAsync = !Copier::kCodesByTma || Copier::kWarpGathers;
      auto fill = [&](int stage) {
        if (Copier::kCodesByTma && !Copier::kWarpGathers && !Copier::copies_by_tma()) return;
        copier.copy_next(base_address + stage * kStageBytes, full0 + 8 * stage);
        if constexpr (kArrivesByCpAsync) ptx::cp_async_mbarrier_arrive(full0 + 8 * stage);
      };
      // The computing warps' loop. Without a copying warp, they fill the first kStages - 1
      // stages and thread 0 refills each stage once every warp has released it.
      auto compute = [&] {
        if constexpr (!C::kProducer) {
#pragma unroll
          for (int s = 0; s < kStages - 1; ++s) {
            if (s < n) fill(s);
          }
        }
        if constexpr (C::kDequantAhead) {
          ptx::mbarrier_wait(full0, 0);
          dequantize(0, a);
        }
        int s = 0;          // the stage of chunk i
        uint32 phase = 0;   // the parity of its current use
        // Step i: chunk i's wgmma from `cur` (dequantized here, or one step earlier when ahead),
        // chunk i + 1 dequantized into `nxt` while they run.
        auto step = [&](int i, uint32 (&cur)[16], uint32 (&nxt)[16]) {
          if constexpr (!C::kDequantAhead) ptx::mbarrier_wait(full0 + 8 * s, phase);
          // The wgmma reads what cp.async wrote (TMA writes through the async proxy already).
          if constexpr (!C::kTma || Copier::kWarpGathers) ptx::fence_proxy_async_shared();
          if constexpr (!C::kDequantAhead) dequantize(s, cur);
          __syncwarp();  // the wgmma are warp-collective; lanes may come from divergent waits
          issue(s, cur, i);
          // Refill chunk i - 1's stage with chunk i + kStages - 1 while the tensor cores work,
          // once every warp has released it.
          if constexpr (!C::kProducer) {
            if (i + kStages - 1 < n && (!Copier::kCodesByTma || threadIdx.x == 0)) {
              const int r = s == 0 ? kStages - 1 : s - 1;
              if (i > 0) ptx::mbarrier_wait(empty0 + 8 * r, s == 0 ? phase ^ 1u : phase);
              fill(r);
            }
            __syncwarp();  // thread 0 may still be refilling; the wgmma wait below is collective
          }
          const int next = s + 1 == kStages ? 0 : s + 1;
          const uint32 next_phase = next == 0 ? phase ^ 1u : phase;
          if constexpr (C::kDequantAhead) {
            if (i + 1 < n) {
              ptx::mbarrier_wait(full0 + 8 * next, next_phase);
              dequantize(next, nxt);
            }
          }
          ptx::wgmma_wait<0>();
          keep_until_here(cur);
          fold(s, i);
          __syncwarp();
          // Every lane arrives, not only lane 0 after the __syncwarp: the same ordering by the
          // PTX memory model, but compute-sanitizer racecheck follows only the barrier, and
          // reported each refill against the other lanes' reads (NOTES v18: no measured cost).
          ptx::mbarrier_arrive(empty0 + 8 * s);
          s = next;
          phase = next_phase;
        };
        run_steps(step);
      };
      if constexpr (C::kProducer) {
        if (warp == kWarps) {
          // The copying warp: chunk i into stage i % kStages once the chunk kStages before it
          // has been released by every computing warp (its lane 0 alone, or all of its lanes
          // when they gather the rows of A).
          if (Copier::kWarpGathers || lane == 0) {
            int s = 0;
            uint32 phase = 0;
            for (int i = 0; i < n; ++i) {
              if (i >= kStages) ptx::mbarrier_wait(empty0 + 8 * s, phase ^ 1u);
              fill(s);
              if (++s == kStages) {
                s = 0;
                phase ^= 1u;
              }
            }
          }
          __syncwarp();
        } else {
          compute();
        }
      } else {
        compute();
      }
    } else {
      // Chunk j's copies are cp.async group j (empty groups keep the count uniform). With the
      // dequantization ahead, step i needs chunk i + 1 as well, so one stage fewer is in flight.
      static_assert(!C::kDequantAhead || kStages >= 3, "dequantizing ahead needs 3 stages");
      constexpr int kLanded = C::kDequantAhead ? kStages - 3 : kStages - 2;
#pragma unroll
      for (int s = 0; s < kStages - 1; ++s) {
        if (s < n) copier.copy_next(base_address + s * kStageBytes);
        ptx::cp_async_commit();
      }
      if constexpr (C::kDequantAhead) {
        ptx::cp_async_wait<kStages - 2>();
        __syncthreads();
        dequantize(0, a);
      }
      int s = 0;  // the stage of chunk i
      auto step = [&](int i, uint32 (&cur)[16], uint32 (&nxt)[16]) {
        ptx::cp_async_wait<kLanded>();
        ptx::fence_proxy_async_shared();  // the wgmma reads what cp.async wrote
        // Chunk i (and i + 1) has landed for every thread, and every warp has finished the wgmma
        // of chunk i - 1 (it waits at the end of each step), so chunk i - 1's stage can be
        // refilled.
        __syncthreads();
        if constexpr (!C::kDequantAhead) dequantize(s, cur);
        issue(s, cur, i);
        // Chunk i + kStages - 1 goes into chunk i - 1's stage while the tensor cores work.
        if (i + kStages - 1 < n)
          copier.copy_next(base_address + (s == 0 ? kStages - 1 : s - 1) * kStageBytes);
        ptx::cp_async_commit();
        const int next = s + 1 == kStages ? 0 : s + 1;
        if constexpr (C::kDequantAhead) {
          if (i + 1 < n) dequantize(next, nxt);
        }
        ptx::wgmma_wait<0>();
        keep_until_here(cur);
        fold(s, i);
        s = next;
      };
      run_steps(step);
    }
  }
};

}  // namespace hm::gemm
