// Tuning v1 for the dense GEMM: which kernel and tile each range of M uses, and how many K splits
// a launch gets. Heuristics per arch family live here as data; a JSON tuning config can replace
// the tile table (docs/tuning.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/arch.hpp"
#include "core/format.hpp"

namespace hm::tune {

// The two dense kernels: mma.sync (every arch from sm75, kernels/humming/gemm/dense_mma.cuh) and
// Hopper's warpgroup MMA (sm_90a only, gemm/dense_wgmma.cuh).
enum class DenseKernel { kMma, kWgmma };

// The kernel family a tile runs on, by name: "dense_mma" or "dense_wgmma" (the registry in
// src/gemm, hm_plan_describe and the prefix of the kernels' entry names).
const char* dense_family_name(DenseKernel kernel);

struct DenseTile {
  DenseKernel kernel = DenseKernel::kMma;
  int block_m = 16;     // tokens per block (multiple of 8)
  int warps = 4;        // warps per block (wgmma: whole warpgroups)
  int warp_strips = 1;  // 16-channel strips per warp (wgmma: 1)
  int stages = 0;       // wgmma: shared-memory pipeline stages (mma.sync: 0, fixed double buffer)
  bool decoupled = false;  // wgmma: per-stage mbarriers instead of a block barrier per chunk
  // wgmma: each warp dequantizes chunk i + 1 while chunk i's wgmma run (a second register set)
  bool dequant_ahead = false;
  // wgmma with the mbarrier pipeline: one thread copies activations and weights with TMA
  bool tma = false;
  // wgmma with TMA: that thread is an extra warp's, which does nothing but copy
  bool producer = false;
  // wgmma: the K splits of a tile run as one thread-block cluster (at most 8) and are summed
  // through distributed shared memory (no workspace); else through a global f32 workspace
  bool cluster_split = false;
  // Blocks of this tile one SM is assumed to run at once; split-K fills one such wave.
  int blocks_per_sm = 16;
  int block_n() const { return 16 * warps * warp_strips; }
  // "bm16_w4_s1" (mma.sync), "wg_bm128_w8_st4_b2[_mb][_da][_tma][_pw][_cs]" (wgmma: every
  // field that changes the kernel, so two kernels never share a name; blocks_per_sm is the
  // wgmma kernel's __launch_bounds__ minimum, while the mma.sync kernel's code ignores it)
  std::string name() const;
  int threads() const { return 32 * (warps + (producer ? 1 : 0)); }
  friend bool operator==(const DenseTile& a, const DenseTile& b) {
    return a.kernel == b.kernel && a.block_m == b.block_m && a.warps == b.warps &&
           a.warp_strips == b.warp_strips && a.stages == b.stages && a.decoupled == b.decoupled &&
           a.dequant_ahead == b.dequant_ahead && a.tma == b.tma && a.producer == b.producer &&
           a.cluster_split == b.cluster_split && a.blocks_per_sm == b.blocks_per_sm;
  }
};

struct DenseRange {
  int64_t max_m;  // this tile serves M <= max_m (the last range: any M)
  DenseTile tile;
};

// Whether the wgmma kernel covers a format on an arch: sm_90a, K a multiple of 8 (activation rows
// load in 16-byte units), no block scales (those stay on mma.sync).
bool wgmma_covers(const core::Format& format, const core::Arch& arch);
// Whether a wgmma tile with a copying warp (`producer`) covers a format: its scale and zero-point
// codes must come as TMA boxes (group sizes that are multiples or divisors of 64).
bool producer_covers(const core::Format& format);

// The default table for a format on an arch.
std::vector<DenseRange> default_dense_ranges(const core::Format& format, const core::Arch& arch);
// {"dense": [{"max_m": 16, "kernel": "wgmma", "block_m": 16, "warps": 4, ...}, ...]} -> the
// table (keys in docs/tuning.md). Throws HM_ERROR_PARSE naming what is wrong. The last entry
// serves every larger M.
std::vector<DenseRange> parse_dense_ranges(const std::string& json);
// Throws HM_ERROR_UNSUPPORTED when a range asks for a kernel the format or arch cannot use.
void check_dense_ranges(const std::vector<DenseRange>& ranges, const core::Format& format,
                        const core::Arch& arch);

// The range serving m.
const DenseTile& tile_for(const std::vector<DenseRange>& ranges, int64_t m);

struct DenseLaunch {
  int64_t grid_x, grid_y;  // channel blocks, token blocks
  int splits;              // K splits (grid z)
  bool cluster;            // the splits of a tile are one cluster (1, 1, splits); no workspace
  int k_chunks_per_split;
  uint32_t threads;        // per block
  uint32_t smem_bytes;     // dynamic shared memory per block
};
// Grid, block and split-K for one call (see dense.cpp for the rule).
DenseLaunch plan_dense_launch(const DenseTile& tile, const core::Format& format, int64_t m,
                              int64_t n_padded, int64_t k_padded, int multiprocessors);

// The split-K workspace: tile counters at a fixed place first (so that they stay zeroed whatever
// M the previous call had), then the f32 partials [splits][m][n_padded]. Split-K is only used
// when the grid has fewer tiles than counter slots.
constexpr int64_t kSplitCounterSlots = 4096;
constexpr uint64_t kSplitCounterBytes = kSplitCounterSlots * sizeof(int32_t);
// Workspace bytes for a launch (0 without split-K or with cluster split-K).
uint64_t dense_workspace_bytes(const DenseLaunch& launch, int64_t m, int64_t n_padded);

}  // namespace hm::tune
