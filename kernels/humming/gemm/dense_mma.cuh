// Dense quantized GEMM on mma.sync:  C[m, n] = A[m, k] * dequant(W)[n, k]^T (+ bias), with
// 16-bit activations (sm75: f16 with m16n8k8 pairs; sm80+: f16 and bf16 with m16n8k16) or 8-bit
// ones (sm89+: e4m3 and e5m2 with m16n8k32 into f32; sm80+: int8 with m16n8k32 into s32).
//
// Orientation (docs/layout.md §1): weights are the MMA's A operand (16 output channels per
// fragment), activations the B operand (8 tokens per fragment), so the accumulators hold C^T.
// Block: kWarps warps; warp w owns kWarpStrips 16-channel strips and every token of the block's
// kBlockM. K goes in steps of one 128-byte row of activations (params.h, dense_step_k): 64 k of
// 16-bit activations (one weight chunk per strip, 4 atoms of k16) or 128 k of 8-bit ones (two
// chunks, 4 atoms of k32); either way a step is 16 A registers per strip and the same ldmatrix
// reads of the activation tile. Per step: the block stages the activation tile [kBlockM][128 B]
// in shared memory (cp.async, double buffered, XOR-swizzled for ldmatrix); each warp loads its own
// weight chunks straight into registers one group of steps ahead (they are used by this warp
// only), extracts the MMA registers by the layout's recipe and dequantizes them into the
// activation type: 16-bit with the group scale and zero point applied (gemm/dequant.cuh), 8-bit
// exactly, group scales folded in f32 per K group (GroupFold, gemm/dequant_a8.cuh; groups of 32
// or 64 k per group slot of every step), and runs the MMAs. Split-K over gridDim.z: each split writes f32 partials, the last split to finish a
// tile sums them in split order (deterministic) and runs the epilogue (activation scale, channel
// scale, global scale, bias, conversion, store).
//
// MoE (C::kMoe, family moe_mma): a block computes one tile of one expert (gemm/sched.cuh's
// schedules: indexed, grouped contiguous, grouped masked); its rows of A are gathered (each
// thread resolves its rows once, a_row) and its rows of C scattered by the epilogue (c_row). No
// K splits: the grid has one block per (channel block, row block).
#pragma once

#include <humming/core/types.cuh>
#include <humming/dtype/convert.cuh>
#include <humming/gemm/dequant.cuh>
#include <humming/gemm/dequant_a8.cuh>
#include <humming/gemm/epilogue.cuh>
#include <humming/gemm/params.h>
#include <humming/gemm/sched.cuh>
#include <humming/layout/spec.h>
#include <humming/ptx/mma.cuh>

namespace hm::gemm {

template <class C>
struct DenseMma {
  using Act = typename C::Act;
  using Out = typename C::Out;
  static constexpr int kBits = C::kWeightBits;
  static constexpr int kActBits = C::kActBits;  // 16, or 8 (e4m3, e5m2, int8)
  static constexpr bool kA8 = kActBits == 8;
  static constexpr int kStepK = dense_step_k(kActBits);            // k per step: 64 or 128
  static constexpr int kStepChunks = dense_step_chunks(kActBits);  // weight chunks per step
  static constexpr int kUnit = 16 / (kActBits / 8);                // activations per 16 bytes
  static constexpr int kTokenGroups = C::kBlockM / 8;
  static constexpr int kThreads = C::kWarps * 32;
  using D = Dequant<C>;
  using RowCodes = typename D::RowCodes;
  using RowTerms = typename D::RowTerms;
  static constexpr bool kIsF16 = D::kIsF16;
  static constexpr int kGroupSlots = D::kGroupSlots;
  // 8-bit activations: group scales (and activation scales per K group) fold per K group into
  // f32 accumulators (`part` holds the group's sums); int8 sums are s32, converted to f32 at each
  // fold or, without folds, once before the epilogue.
  using Fold = GroupFold<C>;
  // Weight groups under a step (32 or 64 k, GPTQ g32 / g64) fold at every step, each token
  // group's sums in one partial set per group slot (compute_step_per_slot).
  static constexpr int kFoldSets = Fold::kSets;
  static_assert(kFoldSets == 1 || kFoldSets == D::kGroupSlots, "a partial set per group slot");
  static constexpr bool kActInt8 = kA8 && act_is_int8<C>();
  static constexpr bool kAccS32 = kActInt8 && !Fold::kAny;

  static constexpr int kDepth = dense_mma_steps_in_flight(C::kWarpStrips, kBits, kActBits);
  struct Smem {
    alignas(128) Act a[2][kDepth][C::kBlockM][kStepK];
  };
  static_assert(sizeof(Act) * kStepK == 128, "a step is one 128-byte row of activations");
  static_assert(!C::kMoe || C::kAlignedK, "MoE rows are gathered in 16-byte units");
  static_assert(!C::kAccF16 || (kIsF16 && !kA8),
                "f16 accumulation needs f16 activations on mma.sync (rule R5; 8-bit ones on wgmma)");
  using Acc = Select<kAccS32, S32Fragments<C::kWarpStrips, kTokenGroups>,
                     AccFragments<C::kAccF16, C::kWarpStrips, kTokenGroups>>;
  // A K group's sums (only with folds): s32 for int8 activations, else f32. Per-slot folds
  // write one token group's sets (SlotSums) at a time.
  using Part = Select<kActInt8, S32Fragments<C::kWarpStrips, kTokenGroups>,
                      AccFragments<false, C::kWarpStrips, kTokenGroups>>;
  using SlotSums = Select<kActInt8, S32Fragments<C::kWarpStrips, 1>,
                          AccFragments<false, C::kWarpStrips, 1>>;
  // Scale / zero-point codes are loaded with the weight chunks, one group ahead (D explains why).
  using ChunkCodes = RowCodes[C::kWarpStrips][kGroupSlots][2];  // [strip][slot][row, row+8]
  // A lane's words of one step: [strip][chunk of the step][word].
  using StepWords = uint32[C::kWarpStrips][kStepChunks][kBits];

  // ---- loads ---------------------------------------------------------------------------------

  // The activation tile of step kc into stage `stage`: row r = token m0 + r, 128 bytes; 16-byte
  // unit u of row r is stored at unit u ^ (r % 8) so ldmatrix reads are conflict-free.
  static __device__ __forceinline__ void load_activations(const DenseParams& p, Smem& s, int stage,
                                                          int d, int64_t m0, int64_t kc) {
    const Act* a = static_cast<const Act*>(p.a);
    if constexpr (C::kAlignedK) {
      for (int u = threadIdx.x; u < C::kBlockM * 8; u += kThreads) {
        const int r = u / 8, unit = u % 8;
        const int64_t token = m0 + r, kk = kc * kStepK + unit * kUnit;
        // k % kUnit == 0: a unit is all in or all out
        const bool valid = token < p.m && kk < p.k;
        const Act* src = valid ? a + token * p.k + kk : a;
        ptx::cp_async_16(ptx::smem_address(&s.a[stage][d][r][(unit ^ (r & 7)) * kUnit]), src,
                         valid ? 16 : 0);
      }
    } else {
      for (int e = threadIdx.x; e < C::kBlockM * kStepK; e += kThreads) {
        const int r = e / kStepK, col = e % kStepK;
        const int64_t token = m0 + r, kk = kc * kStepK + col;
        Act v{0};
        if (token < p.m && kk < p.k) v = a[token * p.k + kk];
        s.a[stage][d][r][((col / kUnit) ^ (r & 7)) * kUnit + col % kUnit] = v;
      }
    }
  }

  // MoE: the activation rows a thread copies in every step, resolved once per tile (a_row
  // reads HM_ARG_SORTED_IDS in the indexed mode): iteration i of load_activations' loop copies
  // unit threadIdx.x + i * kThreads, whose row is this pointer (null: padding, zero-filled).
  static constexpr int kActIters = (C::kBlockM * 8 + kThreads - 1) / kThreads;
  struct GatheredRows {
    const Act* row[C::kMoe ? kActIters : 1];
  };
  static __device__ __forceinline__ GatheredRows gathered_rows(const DenseParams& p, int64_t m0) {
    GatheredRows g;
#pragma unroll
    for (int i = 0; i < (C::kMoe ? kActIters : 1); ++i) {
      const int u = threadIdx.x + i * kThreads;
      const int64_t row = u < C::kBlockM * 8 ? a_row<C>(p, m0 + u / 8) : -1;
      g.row[i] = row < 0 ? nullptr : static_cast<const Act*>(p.a) + row * p.k;
    }
    return g;
  }
  static __device__ __forceinline__ void load_gathered(const DenseParams& p, Smem& s, int stage,
                                                       int d, const GatheredRows& rows,
                                                       int64_t kc) {
#pragma unroll
    for (int i = 0; i < kActIters; ++i) {
      const int u = threadIdx.x + i * kThreads;
      if (C::kBlockM * 8 % kThreads == 0 || u < C::kBlockM * 8) {
        const int r = u / 8, unit = u % 8;
        const int64_t kk = kc * kStepK + unit * kUnit;
        const bool valid = rows.row[i] != nullptr && kk < p.k;
        ptx::cp_async_16(ptx::smem_address(&s.a[stage][d][r][(unit ^ (r & 7)) * kUnit]),
                         valid ? rows.row[i] + kk : static_cast<const Act*>(p.a), valid ? 16 : 0);
      }
    }
  }

  // The rows of A of a thread's columns, for the activation scales of each fold (Fold::kAct):
  // for MoE resolved once per tile, not at every fold.
  using ActRows = ColumnRows<C, kTokenGroups, Fold::kAct && C::kMoe>;

  // ---- the kernel ----------------------------------------------------------------------------

  static __device__ __forceinline__ void run(const DenseParams& params) {
    if constexpr (C::kMoe) {
      const BlockWork work = block_work<C, C::kWarps * C::kWarpStrips>(params);
      if (work.expert < 0) return;  // no rows for this block
      DenseParams p = params;
      move_to_expert<C>(p, work.expert);
      run_tile(p, work);
    } else {
      run_tile(params, BlockWork{});
    }
  }

  // The tile of rows m0.. (tokens; MoE: `work`'s slots of its expert) over this block's K steps.
  static __device__ __forceinline__ void run_tile(const DenseParams& p, const BlockWork& work) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    Smem& s = *reinterpret_cast<Smem*>(smem_raw);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4;
    const int64_t strips_total = p.n_pad / 16;
    const int64_t strip0 = (static_cast<int64_t>(blockIdx.x) * C::kWarps + warp) * C::kWarpStrips;
    const int64_t m0 = C::kMoe ? work.m0 : static_cast<int64_t>(blockIdx.y) * C::kBlockM;
    // 8-bit activations: an odd number of 64-wide chunks leaves the last step half full (its
    // second chunk reads as zero weights, against activations that are zero past K).
    const int64_t k_chunks = p.k_pad / 64;  // k_pad is a multiple of 64
    const int64_t k_steps = (p.k_pad + 64 * (kStepChunks - 1)) / kStepK;
    const int64_t kc_begin =
        C::kMoe ? work.kc_begin : static_cast<int64_t>(blockIdx.z) * p.k_chunks_per_split;
    int64_t kc_end = C::kMoe ? work.kc_end : kc_begin + p.k_chunks_per_split;
    if (kc_end > k_steps) kc_end = k_steps;
    const GatheredRows rows = C::kMoe ? gathered_rows(p, m0) : GatheredRows{};
    const ActRows act_rows(p, m0, lane);

    Acc acc{};
    Part part{};  // unused without folds (the compiler drops it)
    uint32 poison = 0;  // rows to make NaN (step_fragments), int8 with group exponents only

    // Steps go in groups of kDepth: the loads of group i + 1 (weights into registers, activations
    // into the other shared-memory stage) are issued before group i is computed, so each warp has
    // kDepth steps per strip in flight and waits on memory once per group.
    const char* wbase = static_cast<const char*>(p.w);
    const int64_t last_group = C::kGroupK > 0 ? (p.k_pad - 1) / C::kGroupK : 0;
    StepWords words[kDepth], next[kDepth];
    ChunkCodes codes[kDepth], next_codes[kDepth];
    auto load_group = [&](StepWords(&dst)[kDepth], ChunkCodes(&dst_codes)[kDepth], int stage,
                          int64_t kc0) {
#pragma unroll
      for (int d = 0; d < kDepth; ++d) {
        // Past the split's end the last step is loaded again (harmless, never computed), which
        // keeps the loads unconditional.
        const int64_t kc = kc0 + d < kc_end ? kc0 + d : kc_end - 1;
        if constexpr (C::kMoe) {
          load_gathered(p, s, stage, d, rows, kc);
        } else {
          load_activations(p, s, stage, d, m0, kc);
        }
#pragma unroll
        for (int i = 0; i < C::kWarpStrips; ++i) {
          const int64_t strip = strip0 + i < strips_total ? strip0 + i : strips_total - 1;
#pragma unroll
          for (int c = 0; c < kStepChunks; ++c) {
            const int64_t chunk = kc * kStepChunks + c;
            if (kStepChunks == 1 || chunk < k_chunks) {
              D::template load_lane_words<true>(
                  dst[d][i][c],
                  wbase + quant::chunk_offset_bytes(kBits, p.n_pad, p.k_pad, 0, strip, chunk),
                  lane);
            } else {
#pragma unroll
              for (int w = 0; w < kBits; ++w) dst[d][i][c][w] = 0;
            }
          }
          if constexpr (D::kHasRowCodes) {
            const int64_t row = (strip0 + i) * 16 + g;
#pragma unroll
            for (int gi = 0; gi < kGroupSlots; ++gi) {
              // (Slots of a half step past the last chunk read the last group: never used.)
              int64_t group = D::group_of_slot(kc, gi);
              if constexpr (kStepChunks > 1 && C::kGroupK > 0)
                group = group < last_group ? group : last_group;
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
      for (int d = 0; d < kDepth; ++d) {
        const int64_t kc = kc0 + d;
        if (kc < kc_end) {
          if constexpr (kFoldSets > 1) {
            compute_step_per_slot(p, s.a[stage][d], words[d], codes[d], acc, m0, kc, lane,
                                  act_rows, poison);
          } else if constexpr (Fold::kAny) {
            compute_step(s.a[stage][d], words[d], codes[d], part, lane, poison);
            // The group's (or the split's) last step: its sums join acc, scaled.
            if ((kc + 1) % Fold::kSteps == 0 || kc + 1 == kc_end) {
              fold(p, codes[d], part, acc, m0, kc, lane, act_rows);
              part = Part{};
            }
          } else {
            compute_step(s.a[stage][d], words[d], codes[d], acc, lane, poison);
          }
        }
      }
      __syncthreads();  // the next group's loads overwrite this stage
      if (more) {
#pragma unroll
        for (int d = 0; d < kDepth; ++d)
#pragma unroll
          for (int i = 0; i < C::kWarpStrips; ++i)
#pragma unroll
            for (int c = 0; c < kStepChunks; ++c)
#pragma unroll
              for (int w = 0; w < kBits; ++w) words[d][i][c][w] = next[d][i][c][w];
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
    if constexpr (C::kAccF16 || kAccS32) {
      float wide[C::kWarpStrips][kTokenGroups][4];
      if constexpr (C::kAccF16) {
        widen_accumulators(acc.v, wide);
      } else {
#pragma unroll
        for (int i = 0; i < C::kWarpStrips; ++i)
#pragma unroll
          for (int j = 0; j < kTokenGroups; ++j)
#pragma unroll
            for (int q = 0; q < 4; ++q) wide[i][j][q] = accumulator_value(acc.v[i][j][q]);
      }
      if constexpr (poisons_rows<C>()) poison_rows(wide, poison);
      Epilogue::run(p, reinterpret_cast<float*>(smem_raw), wide, n0, m0);
    } else {
      if constexpr (poisons_rows<C>()) poison_rows(acc.v, poison);
      Epilogue::run(p, reinterpret_cast<float*>(smem_raw), acc.v, n0, m0);
    }
  }

  // The 16 A registers of every strip for one step, dequantized.
  // poison (int8 with group exponents, poisons_rows): bits 2i / 2i + 1 are set when
  // strip i's row g / g + 8 met a group code outside the window with a nonzero weight.
  static __device__ __forceinline__ void step_fragments(uint32 (&a_frag)[C::kWarpStrips][16],
                                                        const StepWords& words,
                                                        const ChunkCodes& codes, uint32& poison) {
#pragma unroll
    for (int i = 0; i < C::kWarpStrips; ++i) {
      if constexpr (!kA8) {
        RowTerms lo[kGroupSlots], hi[kGroupSlots];
#pragma unroll
        for (int gi = 0; gi < kGroupSlots; ++gi) {
          lo[gi] = D::row_terms(codes[i][gi][0]);
          hi[gi] = D::row_terms(codes[i][gi][1]);
        }
        D::chunk_fragments(a_frag[i], words[i][0], lo, hi);
      } else if constexpr (C::kScaleExponents) {
        // ue8m0 group x tensor scales go into the weights' exponents (gemm/dequant_a8.cuh).
        using Table = typename DequantA8<C>::Table;
        Table lo[kGroupSlots], hi[kGroupSlots];
#pragma unroll
        for (int gi = 0; gi < kGroupSlots; ++gi) {
          lo[gi] = DequantA8<C>::exponent_table(codes[i][gi][0].scale);
          hi[gi] = DequantA8<C>::exponent_table(codes[i][gi][1].scale);
          if constexpr (poisons_rows<C>()) {
            const bool out_lo = DequantA8<C>::outside_window(codes[i][gi][0].scale),
                       out_hi = DequantA8<C>::outside_window(codes[i][gi][1].scale);
            if (out_lo || out_hi)
              poison |= DequantA8<C>::slot_poison(words[i], gi, out_lo, out_hi)
                        << (2 * i);
          }
        }
        DequantA8<C>::template step_fragments_exp<kGroupSlots>(a_frag[i], words[i], lo, hi);
      } else if constexpr (C::kZeroPoint == kZeroInt) {
        uint32 lo[kGroupSlots], hi[kGroupSlots];  // the zero points' terms of rows g and g + 8
#pragma unroll
        for (int gi = 0; gi < kGroupSlots; ++gi) {
          lo[gi] = DequantA8<C>::zero_term(codes[i][gi][0].zero);
          hi[gi] = DequantA8<C>::zero_term(codes[i][gi][1].zero);
        }
        DequantA8<C>::template step_fragments_zp<kGroupSlots>(a_frag[i], words[i], lo, hi);
      } else {
        DequantA8<C>::step_fragments(a_frag[i], words[i]);
      }
    }
  }

  // One step's MMAs into `sums` (acc, or part with folds).
  template <class Sums>
  static __device__ __forceinline__ void compute_step(const Act (&tile)[C::kBlockM][kStepK],
                                                      const StepWords& words,
                                                      const ChunkCodes& codes, Sums& sums,
                                                      int lane, uint32& poison) {
    uint32 a_frag[C::kWarpStrips][16];
    step_fragments(a_frag, words, codes, poison);
#pragma unroll
    for (int j = 0; j < kTokenGroups; ++j)
      token_group_mmas(tile, a_frag, j, lane,
                       [&](int i, int) -> auto& { return sums.v[i][j]; });
  }

  // Token group j's MMAs over one step: its B fragments by ldmatrix (two atoms per x4: each
  // atom is 32 bytes of a row, k16 of 16-bit or k32 of 8-bit activations, its two registers the
  // units 2x and 2x + 1), atom x of strip i into sums_of(i, x).
  template <class SumsOf>
  static __device__ __forceinline__ void token_group_mmas(
      const Act (&tile)[C::kBlockM][kStepK], const uint32 (&a_frag)[C::kWarpStrips][16], int j,
      int lane, SumsOf&& sums_of) {
#pragma unroll
    for (int pair = 0; pair < 2; ++pair) {
      const int mi = lane / 8, r = j * 8 + lane % 8;
      const int unit = 4 * pair + mi;
      uint32 b[4];
      ptx::ldmatrix_x4(b, ptx::smem_address(&tile[r][(unit ^ (r & 7)) * kUnit]));
#pragma unroll
      for (int i = 0; i < C::kWarpStrips; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int x = 2 * pair + h;
          const uint32 af[4] = {a_frag[i][4 * x], a_frag[i][4 * x + 1], a_frag[i][4 * x + 2],
                                a_frag[i][4 * x + 3]};
          const uint32 bf[2] = {b[2 * h], b[2 * h + 1]};
          mma_atom(sums_of(i, x), af, bf);
        }
      }
    }
  }

  // One MMA atom (k16 of 16-bit or k32 of 8-bit activations) into one token group's sums.
  template <class Frag>
  static __device__ __forceinline__ void mma_atom(Frag& d, const uint32 (&af)[4],
                                                  const uint32 (&bf)[2]) {
    if constexpr (kActInt8) {
      ptx::mma_s8_16832(d, af, bf);
    } else if constexpr (kA8) {
      ptx::mma_fp8_16832<C::kActExpBits == 4>(d, af, bf);
    } else if constexpr (C::kAccF16) {
      ptx::mma_f16_16816_acc16(d, af, bf);
    } else if constexpr (kIsF16) {
      ptx::mma_f16_16816(d, af, bf);
    } else {
      ptx::mma_bf16_16816(d, af, bf);
    }
  }

  // kFoldSets > 1 (8-bit activations, weight groups of 32 or 64 k): step kc's MMAs and folds.
  // Each token group's sums go into one set per group slot (atom x into set x / (4 / kFoldSets),
  // every set starting at zero), and join acc right after, scaled by their slot's row scales
  // (and the step's column scales). ptxas still issues all of the step's MMAs before the folds
  // (every token group's sets live at once), so the tiles stop at 32 tokens (tune/dense.cpp).
  static __device__ __forceinline__ void compute_step_per_slot(
      const DenseParams& p, const Act (&tile)[C::kBlockM][kStepK], const StepWords& words,
      const ChunkCodes& codes, Acc& acc, int64_t m0, int64_t kc, int lane,
      const ActRows& act_rows, uint32& poison) {
    constexpr int kAtomsPerSet = 4 / kFoldSets;
    uint32 a_frag[C::kWarpStrips][16];
    step_fragments(a_frag, words, codes, poison);
    float lo[C::kWarpStrips][kFoldSets], hi[C::kWarpStrips][kFoldSets];
    row_scales(p, codes, lo, hi);
    float col[kTokenGroups][2];
    column_scales(p, m0, kc, lane, act_rows, col);
#pragma unroll
    for (int j = 0; j < kTokenGroups; ++j) {
      SlotSums sets[kFoldSets] = {};
      token_group_mmas(tile, a_frag, j, lane,
                       [&](int i, int x) -> auto& { return sets[x / kAtomsPerSet].v[i][0]; });
#pragma unroll
      for (int set = 0; set < kFoldSets; ++set)
#pragma unroll
        for (int i = 0; i < C::kWarpStrips; ++i)
#pragma unroll
          for (int q = 0; q < 4; ++q)
            acc.v[i][j][q] += accumulator_value(sets[set].v[i][0][q]) *
                              ((q < 2 ? lo[i][set] : hi[i][set]) * col[j][q & 1]);
    }
  }

  // Each strip's rows g and g + 8: the group scale of each of the first kSets slots (times the
  // global scale for group x tensor: it joins the group's here, not in the epilogue, as on
  // wgmma), or 1 without weight folds.
  template <int kSets>
  static __device__ __forceinline__ void row_scales(const DenseParams& p, const ChunkCodes& codes,
                                                    float (&lo)[C::kWarpStrips][kSets],
                                                    float (&hi)[C::kWarpStrips][kSets]) {
#pragma unroll
    for (int i = 0; i < C::kWarpStrips; ++i)
#pragma unroll
      for (int set = 0; set < kSets; ++set) {
        lo[i][set] = hi[i][set] = 1.0f;
        if constexpr (Fold::kWeight) {
          lo[i][set] = D::scale_from_code(codes[i][set][0].scale);
          hi[i][set] = D::scale_from_code(codes[i][set][1].scale);
          if constexpr (C::kScaleKind == kScaleGroupTensor) {
            lo[i][set] *= p.global[0];
            hi[i][set] *= p.global[0];
          }
        }
      }
  }

  // The activation scale of step kc's K group for each column of a thread's token groups
  // (Fold::kAct; element q of token group j is token j * 8 + 2 * (lane % 4) + q % 2), else 1.
  // Rows past M (or padding) read row 0's scale, for outputs that are never stored.
  static __device__ __forceinline__ void column_scales(const DenseParams& p, int64_t m0,
                                                       int64_t kc, int lane,
                                                       const ActRows& act_rows,
                                                       float (&col)[kTokenGroups][2]) {
#pragma unroll
    for (int j = 0; j < kTokenGroups; ++j) col[j][0] = col[j][1] = 1.0f;
    if constexpr (Fold::kAct) {
      const float* scales = p.act_scales + kc * kStepK / C::kActGroupK;
      const int64_t col0 = m0 + 2 * (lane & 3);
#pragma unroll
      for (int j = 0; j < kTokenGroups; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) col[j][h] = scales[act_rows(p, col0, j, h) * p.act_groups];
    }
  }

  // Fold::kAny with one set, after the last step of a fold period (step kc): acc += part * each
  // row's group scale (element q of a token group is row g, or g + 8 for q >= 2) times each
  // column's activation scale of the group. codes: the step's, slot 0 (a fold period is whole
  // steps, so one group per step).
  static __device__ __forceinline__ void fold(const DenseParams& p, const ChunkCodes& codes,
                                              const Part& part, Acc& acc, int64_t m0, int64_t kc,
                                              int lane, const ActRows& act_rows) {
    float lo[C::kWarpStrips][1], hi[C::kWarpStrips][1];
    row_scales(p, codes, lo, hi);
    float col[kTokenGroups][2];
    column_scales(p, m0, kc, lane, act_rows, col);
#pragma unroll
    for (int i = 0; i < C::kWarpStrips; ++i)
#pragma unroll
      for (int j = 0; j < kTokenGroups; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q)
          acc.v[i][j][q] +=
              accumulator_value(part.v[i][j][q]) * ((q < 2 ? lo[i][0] : hi[i][0]) * col[j][q & 1]);
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
