// Tuning v1 for the dense mma.sync GEMM: which tile each range of M uses, and how many K splits a
// launch gets. Heuristics per arch family live here as data; a JSON tuning config can replace
// the tile table (docs/tuning.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hm::tune {

struct DenseTile {
  int block_m = 16;     // tokens per block (multiple of 8)
  int warps = 4;        // warps per block
  int warp_strips = 1;  // 16-channel strips per warp
  int block_n() const { return 16 * warps * warp_strips; }
  std::string name() const;  // "bm16_w4_s1"
  friend bool operator==(const DenseTile& a, const DenseTile& b) {
    return a.block_m == b.block_m && a.warps == b.warps && a.warp_strips == b.warp_strips;
  }
};

struct DenseRange {
  int64_t max_m;  // this tile serves M <= max_m (the last range: any M)
  DenseTile tile;
};

// The default table for a compute capability (major * 10 + minor).
std::vector<DenseRange> default_dense_ranges(int compute_capability);
// {"dense": [{"max_m": 16, "block_m": 16, "warps": 4, "warp_strips": 1}, ...]} -> the table.
// Throws HM_ERROR_PARSE naming what is wrong. The last entry serves every larger M.
std::vector<DenseRange> parse_dense_ranges(const std::string& json);

// The range serving m.
const DenseTile& tile_for(const std::vector<DenseRange>& ranges, int64_t m);

struct DenseLaunch {
  int64_t grid_x, grid_y;  // channel blocks, token blocks
  int splits;              // K splits (grid z)
  int k_chunks_per_split;
};
// Grid and split-K for one call (see dense.cpp for the rule).
DenseLaunch plan_dense_launch(const DenseTile& tile, int64_t m, int64_t n_padded, int64_t k_padded,
                              int multiprocessors);

// The split-K workspace: tile counters at a fixed place first (so that they stay zeroed whatever
// M the previous call had), then the f32 partials [splits][m][n_padded]. Split-K is only used
// when the grid has fewer tiles than counter slots.
constexpr int64_t kSplitCounterSlots = 4096;
constexpr uint64_t kSplitCounterBytes = kSplitCounterSlots * sizeof(int32_t);
// Workspace bytes for a launch (0 without split-K).
uint64_t dense_workspace_bytes(const DenseLaunch& launch, int64_t m, int64_t n_padded);

}  // namespace hm::tune
