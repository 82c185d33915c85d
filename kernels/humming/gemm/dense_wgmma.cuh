// Dense quantized GEMM on Hopper warpgroup MMA (sm90a), 16- or 8-bit activations:
//   C[m, n] = A[m, k] * dequant(W)[n, k]^T (+ bias).
//
// Orientation (docs/layout.md §1): weights are the MMA's A operand, taken from registers after
// dequantization; activations are the B operand, read by the tensor cores straight from shared
// memory through a matrix descriptor; tokens are the wgmma's N (8 .. 256), so one kernel serves
// decoding (N = 8) and prefill (N = 256). Warp w of a warpgroup owns the 16-channel strip w of
// the warpgroup's 64 channels, which is exactly one standard-layout chunk row: the layout's
// register order is the wgmma A fragment.
//
// Activation width (C::kActBits): the kernel steps K by one 128-byte row of activations, 64 k of
// f16 / bf16 (m64nNk16, one weight chunk per warp, gemm/dequant.cuh) or 128 k of e4m3 / e5m2 /
// int8 (m64nNk32, two chunks per warp, gemm/dequant_a8.cuh); either way a step is 16 A registers
// and 4 wgmma, each reading the next 32 bytes of the activation rows. 8-bit activations come with
// a per-token f32 scale that the epilogue applies. int8 accumulates in s32, exactly, and turns
// into f32 once: before the epilogue, or at each K group's fold (S32Fragments,
// gemm/epilogue.cuh). Below, "chunk i" of the pipeline is its i-th K step (one 64-wide weight
// chunk with 16-bit activations, two with 8-bit).
//
// Block: kWarps / 4 warpgroups side by side along N (channels), all sharing the activation tile of
// kBlockM tokens. Pipeline: kStages shared-memory stages, each holding one K step of activations,
// of every warp's weight chunks and of the block's scale / zero-point codes, filled kStages - 1
// chunks ahead of the compute, either by every thread with cp.async (each thread's share planned
// once per block, stepped by constants per chunk) or by one thread with TMA boxes (C::kTma). How a
// stage is filled is the stage copier's (gemm/wgmma_stage_copier.cuh); when, and into which stage,
// is the pipeline's (gemm/wgmma_pipeline.cuh); what a step does is this kernel's. Per chunk each warp dequantizes its 16 A registers (4 atoms) and issues 4
// wgmma; with C::kDequantAhead it dequantizes chunk i + 1 into a second register set while chunk
// i's wgmma run, else before issuing them. Either way the A registers must stay untouched until the
// wgmma wait, which the compiler does not know (keep_until_here). The stages are synchronized one
// of two ways (the tile's `pipeline`): a block barrier per chunk (cheapest for small tiles), or
// per-stage full / empty mbarriers that let warpgroups drift apart (C::kDecoupled; needed for TMA,
// best for large tiles). With C::kProducer an extra warp does all the copying (TMA), so the
// computing warps' loop is only waits, dequantization and wgmma (MoE: the copying warp also
// gathers the tile's rows of A, with cp.async, since a tensor box cannot). Split-K and the
// epilogue are shared with the mma.sync kernel (gemm/epilogue.cuh); with C::kClusterSplit the K
// splits of a tile are one thread-block cluster and meet in shared memory instead of a global
// workspace.
#pragma once

#include <humming/core/types.cuh>
#include <humming/gemm/dequant.cuh>
#include <humming/gemm/dequant_a8.cuh>
#include <humming/gemm/epilogue.cuh>
#include <humming/gemm/params.h>
#include <humming/gemm/sched.cuh>
#include <humming/gemm/wgmma_pipeline.cuh>
#include <humming/gemm/wgmma_stage_copier.cuh>
#include <humming/layout/spec.h>
#include <humming/ptx/griddep.cuh>
#include <humming/ptx/mbarrier.cuh>
#include <humming/ptx/mma.cuh>
#include <humming/ptx/wgmma.cuh>

namespace hm::gemm {

// The wgmma's accumulator set: S32Fragments for int8 activations, else AccFragments
// (gemm/epilogue.cuh).
template <bool kS32, bool kAccF16, int kTokenGroups>
struct WgmmaAccumulators {
  using Type = AccFragments<kAccF16, 1, kTokenGroups>;
};
template <bool kAccF16, int kTokenGroups>
struct WgmmaAccumulators<true, kAccF16, kTokenGroups> {
  using Type = S32Fragments<1, kTokenGroups>;
};

template <class C>
struct DenseWgmma {
  using Config = C;
  using Act = typename C::Act;
  using D = Dequant<C>;
  using RowTerms = typename D::RowTerms;
  static constexpr int kBits = C::kWeightBits;
  static constexpr int kActBits = C::kActBits;  // 16 or 8
  static constexpr int kActBytes = kActBits / 8;
  static constexpr int kStepK = dense_step_k(kActBits);  // k per stage (128 bytes of a row)
  static constexpr int kStepChunks = dense_step_chunks(kActBits);  // chunks per warp and step
  static constexpr int kWarps = C::kWarps;
  static constexpr int kThreads = kWarps * 32;  // the warps that compute
  // With C::kProducer one more warp only copies (its lane 0 issues every TMA of every stage), so
  // the computing warps spend no instruction on copies and never wait for a refill.
  static constexpr int kBlockThreads = kThreads + (C::kProducer ? 32 : 0);
  static constexpr int kStages = C::kStages;
  static constexpr int kBlockN = 16 * kWarps;
  static constexpr int kTokenGroups = C::kBlockM / 8;
  static constexpr int kChunkBytes = quant::chunk_bytes(kBits);
  static constexpr int kWarpStepBytes = kStepChunks * kChunkBytes;  // a warp's weights per step
  static constexpr int kLaneWords = kStepChunks * kBits;             // ... per lane, in words
  static constexpr int kSlots = D::kGroupSlots;
  // Block scales with 8-bit activations: a row's code is read from global memory as each step
  // is issued (a block of channels shares one), not staged per channel (params.h).
  static constexpr bool kStagesScaleCodes = dense_wgmma_stages_scale_codes(
      C::kActBits, D::kGroupScalesInMainloop, C::kScaleKind == kScaleBlock);
  static constexpr bool kBlockCodesFromGlobal =
      D::kGroupScalesInMainloop && !kStagesScaleCodes;
  static constexpr int kScaleBytes = kStagesScaleCodes ? D::kScaleCodeBytes : 0;
  static constexpr int kZeroBytes = C::kZeroPoint != kZeroNone ? D::kZeroCodeBytes : 0;
  // One stage: [activations kBlockM x 128 B][weights kWarps x step][scale codes][zero codes].
  static constexpr int kWeightOffset = dense_wgmma_weight_offset(C::kBlockM);
  static constexpr int kScaleOffset = dense_wgmma_scale_offset(C::kBlockM, kWarps, kLaneWords);
  static constexpr int kZeroOffset =
      dense_wgmma_zero_offset(C::kBlockM, kWarps, kLaneWords, kSlots, kScaleBytes);
  static constexpr int kStageBytes = dense_wgmma_stage_bytes(C::kBlockM, kWarps, kLaneWords,
                                                             kSlots, kScaleBytes, kZeroBytes);
  using Epilogue = DenseEpilogue<C, kWarps, 1, kBlockThreads, C::kClusterSplit>;

  static_assert(kWarps % 4 == 0 && kWarps >= 4, "whole warpgroups");
  static_assert(C::kBlockM % 8 == 0 && C::kBlockM >= 8 && C::kBlockM <= 256, "wgmma N is 8..256");
  static_assert(kStages >= 2, "double buffering at least");
  static_assert(C::kAlignedK, "activation rows load in 16-byte units (K % (128 / kActBits) == 0)");
  static_assert(kActBits == 16 || kActBits == 8, "16- or 8-bit activations");
  // 8-bit activations with group scales (or activation scales per K group) fold each group's
  // sums in f32 (GroupFold, gemm/dequant_a8.cuh): a K group's products go into a second set of
  // accumulators (`part`, overwritten by the group's first wgmma) and are folded into the main
  // ones once its last step has completed.
  using Fold = GroupFold<C>;
  static constexpr bool kWeightFold = Fold::kWeight;
  static constexpr bool kActFold = Fold::kAct;
  static constexpr bool kFoldGroups = Fold::kAny;
  static constexpr int kFoldK = Fold::kK;
  static constexpr int kStepsPerGroup = Fold::kSteps;
  // Weight groups under a step (32 or 64 k) fold every step, a partial set per group slot.
  static constexpr int kFoldSets = Fold::kSets;
  static_assert(kFoldSets == 1 || kFoldSets == kSlots, "a partial set per staged group slot");
  // int8 activations: the wgmma's accumulators are s32 (`part` when groups fold, whose f32 sum
  // `acc` stays f32; else `acc` itself, converted to f32 before the epilogue).
  static constexpr bool kActInt8 = act_is_int8<C>();
  static constexpr bool kAccS32 = kActInt8 && !kFoldGroups;
  static_assert(!kActInt8 || !C::kAccF16, "int8 activations accumulate in s32");
  static_assert(dense_wgmma_token_width_ok(C::kBlockM, kActInt8),
                "integer wgmma takes N = 8..32 or a multiple of 16 tokens (params.h)");
  static_assert(C::kScaleKind != kScaleBlock || kActBits == 8,
                "block scales on 16-bit activations use the mma.sync kernel");
  static_assert(!C::kTma || C::kDecoupled, "TMA copies complete on the stages' mbarriers");
  static_assert(!C::kProducer || C::kTma, "the copying warp copies with TMA");
  static_assert(dense_wgmma_smem_bytes(C::kBlockM, kWarps, kStages, kLaneWords, kSlots, kScaleBytes,
                                       kZeroBytes) -
                        1024 >=
                    (kStages * kStageBytes > Epilogue::kSmemBytes ? kStages * kStageBytes
                                                                  : Epilogue::kSmemBytes),
                "the host sizes dynamic shared memory with dense_wgmma_smem_bytes()");

  // Filling the stages, chunk after chunk (each thread's cp.async share, or the TMA boxes of
  // one thread, and the arrivals on the stages' `full` barriers): gemm/wgmma_stage_copier.cuh.
  using Copier = WgmmaStageCopier<DenseWgmma>;

  // The value, in a register the compiler may not recompute it into (an opaque definition).
  static __device__ __forceinline__ uint32 pinned(uint32 v) {
    asm volatile("" : "+r"(v));
    return v;
  }

  // params: the kernel's __grid_constant__ parameter (TMA reads its tensor maps in place).
  static __device__ __forceinline__ void run(const DenseParams& params) {
    // Launched programmatically (runtime/launch.hpp) this grid may start before the previous
    // kernel on the stream ends: every thread waits for it before it touches memory, so what
    // overlaps is the launch and the blocks' start (on a normal launch the wait returns at once).
    ptx::griddep_wait();
    const BlockWork work = block_work<C, kWarps>(params);
    if constexpr (C::kMoe) {
      if (work.expert < 0) return;  // no rows for this block (the whole cluster leaves)
      DenseParams p = params;
      move_to_expert<C>(p, work.expert);
      run_tile(p, params, work);
    } else {
      run_tile(params, params, work);
    }
  }

  // p: the tile's parameters (MoE: its expert's); maps: the kernel's parameter, for TMA.
  static __device__ __forceinline__ void run_tile(const DenseParams& p, const DenseParams& maps,
                                                  const BlockWork& work) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    // The 128B swizzle needs 1024-byte aligned tiles; the host adds 1024 bytes of slack.
    const uint32 raw_address = ptx::smem_address(smem_raw);
    const uint32 base_address = (raw_address + 1023u) & ~1023u;
    unsigned char* base = smem_raw + (base_address - raw_address);

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4;
    const int64_t strip0 = work.strip0, m0 = work.m0, kc_begin = work.kc_begin;
    const int n = static_cast<int>(work.kc_end - kc_begin);  // >= 1: the host makes no empty split
    typename WgmmaAccumulators<kAccS32, C::kAccF16, kTokenGroups>::Type acc{};
    // kFoldGroups: a K group's sums (one set per group slot of a step for groups under a step)
    typename WgmmaAccumulators<kActInt8, false, kFoldGroups ? kTokenGroups : 1>::Type
        part[kFoldSets];

    // What a thread reads in every stage, as offsets from smem_raw worked out once and pinned in
    // registers: left to itself the compiler recomputes them (thread index, alignment, window
    // address) in every step, which costs more than the dequantization at small M.
    const uint32 base_offset = pinned(base_address - raw_address);
    const int lane_pinned = static_cast<int>(pinned(static_cast<uint32>(lane)));
    const uint32 weights_at = pinned(base_offset + kWeightOffset + warp * kWarpStepBytes);
    const uint32 row = warp * 16 + g;
    const uint32 scales_at = pinned(base_offset + kScaleOffset + row * kScaleBytes);
    const uint32 zeros_at = pinned(base_offset + kZeroOffset + row * kZeroBytes);
    // The rows of A of this thread's columns, for the activation scales of each fold: for MoE
    // resolved once per tile, not at every fold.
    const ColumnRows<C, kTokenGroups, kActFold && C::kMoe> act_rows(p, m0, lane);
    // int8 activations with group exponents (MXFP4 -> INT8): bit 0 / 1 set once row g / g + 8
    // met a group code outside the window with a nonzero weight in the group, whose outputs are
    // then NaN (poisons_rows).
    uint32 poison = 0;
    // Dequantizes the weights of the step in stage s into the warp's 16 A registers.
    auto dequantize = [&](int s, uint32 (&a)[16]) {
      const uint32 stage = s * kStageBytes;
      if constexpr (kActBits == 8) {
        uint32 words[kStepChunks][kBits];
#pragma unroll
        for (int c = 0; c < kStepChunks; ++c)
          load_lane_words<kBits, false>(words[c], smem_raw + weights_at + stage + c * kChunkBytes,
                                        lane_pinned);
        if constexpr (C::kScaleExponents) {
          using Table = typename DequantA8<C>::Table;
          Table lo[kSlots], hi[kSlots];
#pragma unroll
          for (int slot = 0; slot < kSlots; ++slot) {
            const void* codes = smem_raw + scales_at + stage + slot * kBlockN * kScaleBytes;
            const uint32 code_lo = D::scale_code(codes, 0), code_hi = D::scale_code(codes, 8);
            lo[slot] = DequantA8<C>::exponent_table(code_lo);
            hi[slot] = DequantA8<C>::exponent_table(code_hi);
            if constexpr (poisons_rows<C>()) {
              const bool out_lo = DequantA8<C>::outside_window(code_lo),
                         out_hi = DequantA8<C>::outside_window(code_hi);
              if (out_lo || out_hi)
                poison |= DequantA8<C>::slot_poison(words, slot, out_lo, out_hi);
            }
          }
          DequantA8<C>::template step_fragments_exp<kSlots>(a, words, lo, hi);
        } else if constexpr (kZeroBytes > 0) {
          uint32 lo[kSlots], hi[kSlots];  // the zero points' terms of rows g and g + 8
#pragma unroll
          for (int slot = 0; slot < kSlots; ++slot) {
            const void* codes = smem_raw + zeros_at + stage + slot * kBlockN * kZeroBytes;
            lo[slot] = DequantA8<C>::zero_term(D::zero_code(codes, 0));
            hi[slot] = DequantA8<C>::zero_term(D::zero_code(codes, 8));
          }
          DequantA8<C>::template step_fragments_zp<kSlots>(a, words, lo, hi);
        } else {
          DequantA8<C>::step_fragments(a, words);
        }
      } else {
        uint32 words[kBits];
        D::template load_lane_words<false>(words, smem_raw + weights_at + stage, lane_pinned);
        RowTerms lo[kSlots], hi[kSlots];
#pragma unroll
        for (int slot = 0; slot < kSlots; ++slot) {
          typename D::RowCodes c_lo{0, 0}, c_hi{0, 0};
          if constexpr (kScaleBytes > 0) {
            const void* codes = smem_raw + scales_at + stage + slot * kBlockN * kScaleBytes;
            c_lo.scale = D::scale_code(codes, 0);
            c_hi.scale = D::scale_code(codes, 8);
          }
          if constexpr (kZeroBytes > 0) {
            const void* codes = smem_raw + zeros_at + stage + slot * kBlockN * kZeroBytes;
            c_lo.zero = D::zero_code(codes, 0);
            c_hi.zero = D::zero_code(codes, 8);
          }
          lo[slot] = D::row_terms(c_lo);
          hi[slot] = D::row_terms(c_hi);
        }
        D::chunk_fragments(a, words, lo, hi);
      }
    };
    // Issues the 4 wgmma of step i in stage s (A: the registers, B: its activation tile).
    const uint64_t descriptor0 = ptx::smem_descriptor_k_sw128(pinned(base_address));
    // Block scales: the codes of the rows g and g + 8 for the step in flight, loaded as it is
    // issued (their latency hides behind its wgmma).
    uint32 block_lo = 0, block_hi = 0;
    auto issue = [&](int s, const uint32 (&a)[16], int i) {
      const uint64_t stage_descriptor = ptx::advance_descriptor(descriptor0, s * kStageBytes);
      if constexpr (kBlockCodesFromGlobal) {
        const int64_t group = D::group_of_slot(kc_begin + i, 0);
        const int64_t channel = strip0 * 16 + row;
        const void* codes = static_cast<const char*>(p.scales) +
                            group * p.scale_cols * D::kScaleCodeBytes;
        // Channels past N in a ragged last block (never stored) read the last row block's
        // code: a row block index past the tensor read past its end (compute-sanitizer).
        const int64_t last = p.scale_cols - 1, lo = channel / C::kGroupN,
                      hi = (channel + 8) / C::kGroupN;
        block_lo = D::scale_code(codes, lo < last ? lo : last);
        block_hi = D::scale_code(codes, hi < last ? hi : last);
      }
      ptx::wgmma_fence();
      if constexpr (kFoldGroups && kFoldSets > 1) {
        // Groups under a step: atom x is group slot x / (4 / kFoldSets)'s, and each slot's first
        // atom starts its set afresh.
        constexpr int kAtomsPerSet = 4 / kFoldSets;
#pragma unroll
        for (int x = 0; x < 4; ++x)
          C::Wgmma::run(part[x / kAtomsPerSet].v[0], a[4 * x], a[4 * x + 1], a[4 * x + 2],
                        a[4 * x + 3], ptx::advance_descriptor(stage_descriptor, x * 32),
                        x % kAtomsPerSet == 0 ? 0 : 1);
      } else if constexpr (kFoldGroups) {
        // The first step of a group (or of this split) starts `part` afresh.
        const int64_t kc = kc_begin + i;
        const int fresh = (i == 0 || kc % kStepsPerGroup == 0) ? 0 : 1;
#pragma unroll
        for (int x = 0; x < 4; ++x)
          C::Wgmma::run(part[0].v[0], a[4 * x], a[4 * x + 1], a[4 * x + 2], a[4 * x + 3],
                        ptx::advance_descriptor(stage_descriptor, x * 32), x == 0 ? fresh : 1);
      } else {
#pragma unroll
        for (int x = 0; x < 4; ++x)
          C::Wgmma::run(acc.v[0], a[4 * x], a[4 * x + 1], a[4 * x + 2], a[4 * x + 3],
                        ptx::advance_descriptor(stage_descriptor, x * 32));  // next 32 bytes of K
      }
      ptx::wgmma_commit();
    };
    // kFoldGroups, after step i's wgmma have completed (its stage s still holds its codes): at
    // the group's last step (or the split's), acc += part * the group's scale of each row
    // (element q of a token group is row g, or g + 8 for q >= 2), times the global scale, times
    // (kActFold) each column's activation scale of the group (element q of token group j is
    // token j * 8 + 2 * (lane % 4) + q % 2, as the epilogue maps them).
    auto fold = [&](int s, int i) {
      if constexpr (kFoldGroups) {
        const int64_t kc = kc_begin + i;
        if ((kc + 1) % kStepsPerGroup != 0 && i + 1 != n) return;
        // Each set's row scales (rows g and g + 8): its group slot's codes in the stage.
        float lo[kFoldSets], hi[kFoldSets];
#pragma unroll
        for (int set = 0; set < kFoldSets; ++set) {
          lo[set] = hi[set] = 1.0f;
          if constexpr (kWeightFold) {
            if constexpr (kBlockCodesFromGlobal) {
              lo[set] = D::scale_from_code(block_lo);
              hi[set] = D::scale_from_code(block_hi);
            } else {
              const void* codes = smem_raw + scales_at + s * kStageBytes + set * kBlockN * kScaleBytes;
              lo[set] = D::scale_from_code(D::scale_code(codes, 0));
              hi[set] = D::scale_from_code(D::scale_code(codes, 8));
            }
            if constexpr (C::kScaleKind == kScaleGroupTensor) {
              // Group x tensor: the global scale joins the group's here, not in the epilogue,
              // so a group scale near its dtype's top (the global then tiny) cannot overflow.
              lo[set] *= p.global[0];
              hi[set] *= p.global[0];
            }
          }
        }
        // The activation group of this fold's K steps (a fold never spans two: kFoldK divides
        // kActGroupK), and each of the thread's two columns per token group: rows past M (or
        // padding) read row 0's scale, for outputs that are never stored.
        if constexpr (kActFold) {
          // One token group at a time: its two column scales, then its four sums (all of the
          // tile's scales at once would hold 2 * kTokenGroups more registers over the fold).
          const float* scales = p.act_scales + kc * kStepK / C::kActGroupK;
          const int64_t col0 = m0 + 2 * (lane & 3);
#pragma unroll
          for (int j = 0; j < kTokenGroups; ++j) {
            float col[2];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              col[h] = scales[act_rows(p, col0, j, h) * p.act_groups];
            }
#pragma unroll
            for (int set = 0; set < kFoldSets; ++set)
#pragma unroll
              for (int q = 0; q < 4; ++q) {
                ptx::fence_operand(part[set].v[0][j][q]);
                acc.v[0][j][q] += accumulator_value(part[set].v[0][j][q]) *
                                  ((q < 2 ? lo[set] : hi[set]) * col[q & 1]);
              }
          }
        } else {
#pragma unroll
          for (int set = 0; set < kFoldSets; ++set)
#pragma unroll
            for (int j = 0; j < kTokenGroups; ++j)
#pragma unroll
              for (int q = 0; q < 4; ++q) {
                ptx::fence_operand(part[set].v[0][j][q]);
                acc.v[0][j][q] +=
                    accumulator_value(part[set].v[0][j][q]) * (q < 2 ? lo[set] : hi[set]);
              }
        }
      }
    };
    // The stages' schedule (gemm/wgmma_pipeline.cuh): when each step's copies, dequantization,
    // wgmma and fold run, and how the stages are handed between copies and compute.
    uint32 a[16], ahead[16];  // chunk i's A registers; chunk i + 1's when dequantizing ahead
    Copier copier(p, maps, m0, strip0, kc_begin, work.expert);
    WgmmaPipeline<DenseWgmma>::run(copier, base_address, n, warp, lane, a, ahead, dequantize,
                                   issue, fold);
    // A wgmma wait is a warpgroup instruction: the copying warp, one warp of an incomplete
    // warpgroup that issued no wgmma, must not execute it (compute-sanitizer synccheck:
    // "warpgroup instruction executed with an incomplete warpgroup", issue 16).
    if (!C::kProducer || warp < kWarps) ptx::wgmma_wait<0>();
#pragma unroll
    for (int j = 0; j < kTokenGroups; ++j)
#pragma unroll
      for (int q = 0; q < (C::kAccF16 ? 2 : 4); ++q) ptx::fence_operand(acc.v[0][j][q]);
    if constexpr (C::kAccF16) {
      float wide[1][kTokenGroups][4];
      widen_accumulators(acc.v, wide);
      Epilogue::run(p, reinterpret_cast<float*>(base), wide, strip0 * 16, m0);
    } else if constexpr (kAccS32) {
      float wide[1][kTokenGroups][4];
#pragma unroll
      for (int j = 0; j < kTokenGroups; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) wide[0][j][q] = accumulator_value(acc.v[0][j][q]);
      if constexpr (poisons_rows<C>()) poison_rows(wide, poison);
      Epilogue::run(p, reinterpret_cast<float*>(base), wide, strip0 * 16, m0);
    } else {
      if constexpr (poisons_rows<C>()) poison_rows(acc.v, poison);
      Epilogue::run(p, reinterpret_cast<float*>(base), acc.v, strip0 * 16, m0);
    }
  }
};

}  // namespace hm::gemm

// Defines the extern "C" kernel `name` for the configuration struct `Config` (which names its
// wgmma instruction as Config::Wgmma). kMinBlocks (the tuner's blocks per SM) caps registers so
// that many blocks fit, which the split-K sizing counts on.
#define HM_DEFINE_DENSE_WGMMA(name, Config)                                                   \
  extern "C" __global__ void __launch_bounds__(::hm::gemm::DenseWgmma<Config>::kBlockThreads,  \
                                               Config::kMinBlocks)                            \
      name(const __grid_constant__ ::hm::gemm::DenseParams params) {                           \
    ::hm::gemm::DenseWgmma<Config>::run(params);                                               \
  }
