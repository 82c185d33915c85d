// Tuning v1 for the dense GEMM: which kernel and tile each range of M uses, and how many K splits
// a launch gets. Heuristics per arch family live here as data; a JSON tuning config can replace
// the tile table (docs/tuning.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/arch.hpp"
#include "core/format.hpp"

#include <nlohmann/json_fwd.hpp>

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
  // Blocks of this tile one SM is assumed to run at once; split-K fills one such wave.
  int blocks_per_sm = 16;
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
  int block_n() const { return 16 * warps * warp_strips; }
  int threads() const { return 32 * (warps + (producer ? 1 : 0)); }
  // The next four come from one table of the fields (dense_tile_fields()), so a field added
  // there shows in all of them.
  // "bm16_w4_s1" (mma.sync), "wg_bm128_w8_st4_b2[_mb][_da][_tma][_pw][_cs]" (wgmma): every
  // field that changes the kernel, so two kernels never share a name.
  std::string name() const;
  // The entry of the tuning JSON that parses back to this tile (docs/tuning.md).
  std::string json() const;
  // The tile's lines of the generated Config ("  static constexpr int kBlockM = 16;\n" ...).
  std::string config() const;
  friend bool operator==(const DenseTile& a, const DenseTile& b);
};

// One field of a dense tile: where it lives in the struct, and every way it is spelled. Int
// fields take [min, max] in steps of `step` per kernel (min == max: fixed, not named); flags are
// wgmma-only and spelled either as a JSON boolean or as one of two strings.
struct DenseTileField {
  const char* key;     // the tuning JSON key
  const char* config;  // the generated Config constant
  const char* short_name;  // in the tile name: "bm" -> "_bm16"; a flag: "_mb" when set
  int DenseTile::*value = nullptr;  // an int field
  bool DenseTile::*flag = nullptr;  // or a flag
  struct Range { int min, max, step, fallback; bool compiled; };
  Range mma, wgmma;  // per kernel; `compiled`: a Config constant of that kernel
  const char* off = nullptr;  // a flag's JSON strings ("barrier", "mbarrier"); null: a boolean
  const char* on = nullptr;
  const Range& range(DenseKernel k) const { return k == DenseKernel::kWgmma ? wgmma : mma; }
};
const std::vector<DenseTileField>& dense_tile_fields();

struct DenseRange {
  int64_t max_m;  // this tile serves M <= max_m (the last range: any M)
  DenseTile tile;
};

// Whether activation rows of the format load in 16-byte units: K a multiple of 8 (16-bit
// activations) or 16 (8-bit).
bool rows_in_16_byte_units(const core::Format& format);
// Whether the wgmma kernel covers a format on an arch: sm_90a, rows_in_16_byte_units, and no
// block scales unless the activations are 8-bit (16-bit ones stay on mma.sync).
bool wgmma_covers(const core::Format& format, const core::Arch& arch);
// Whether the wgmma kernel stages the format's group / block scale codes per channel in shared
// memory (gemm/params.h: the kernel asks the same function).
bool wgmma_stages_scale_codes(const core::Format& format);
// Whether a wgmma tile with a copying warp (`producer`) covers a format: its scale and zero-point
// codes must come as TMA boxes (group sizes that are multiples or divisors of 64).
bool producer_covers(const core::Format& format);

// The most tokens a wgmma tile of `format` may hold when its weight groups are under a 128-k
// step (8-bit activations with group scales of 32 or 64 k fold every step, one partial
// accumulator set per group slot, GroupFold::kSets): 32 for g32, 64 for g64; 0 (no cap) for
// every other format.
int folded_group_token_cap(const core::Format& format);

// The default table for a format on an arch: the wgmma kernel's where it covers the format,
// else the mma kernel's; with `kernel`, that kernel's (the format on the arch it covers).
std::vector<DenseRange> default_dense_ranges(const core::Format& format, const core::Arch& arch);
std::vector<DenseRange> default_dense_ranges(const core::Format& format, const core::Arch& arch,
                                             DenseKernel kernel);
// The tile of one tuning JSON entry for `kernel` ("max_m" and "kernel" are the caller's): the
// keys of docs/tuning.md, missing ones at their defaults. Throws HM_ERROR_PARSE naming `where`
// and the key.
DenseTile parse_dense_tile(const nlohmann::json& entry, DenseKernel kernel,
                           const std::string& where);
// Throws HM_ERROR_UNSUPPORTED when a tile asks for what the format cannot have (a copying warp
// with scale codes that are not TMA boxes).
void check_dense_tile(const DenseTile& tile, const core::Format& format);

// The wgmma kernel's dynamic shared memory per block for a tile and format (its stages, or the
// epilogue's staging when larger; gemm/params.h dense_wgmma_smem_bytes).
uint32_t wgmma_smem_bytes(const DenseTile& tile, const core::Format& format);
// What a wgmma block takes of an SM's shared memory beyond its dynamic bytes: the 1 KiB the
// system reserves per block on sm_90, and the kernel's static shared memory (its pipeline
// barriers and the epilogue's: 2 KiB in every compiled tile, cuobjdump -res-usage).
constexpr uint32_t kWgmmaBlockSmemOverhead = 1024 + 2048;
// Shared memory per SM on sm_90 (the wgmma kernel's only arch): 228 KiB.
constexpr uint32_t kSm90SmemPerSm = 228 * 1024;
// Whether blocks_per_sm blocks of the tile fit one sm_90 SM's shared memory.
bool wgmma_blocks_fit(const DenseTile& tile, const core::Format& format);
// Makes a default wgmma tile's blocks_per_sm blocks fit an SM's shared memory: fewer stages
// (down to the pipeline's least), then fewer blocks per SM. The K splits are sized for
// blocks_per_sm blocks on every SM; blocks that cannot be resident run as a second wave.
void fit_wgmma_blocks(DenseTile& tile, const core::Format& format);

struct DenseLaunch {
  int64_t grid_x, grid_y;  // channel blocks, token blocks
  int splits;              // K splits (grid z)
  bool cluster;            // the splits of a tile are one cluster (1, 1, splits); no workspace
  int k_chunks_per_split;
  uint32_t threads;        // per block
  uint32_t smem_bytes;     // dynamic shared memory per block
};
// The k of one K step of either dense kernel (DenseParams::k_chunks_per_split counts steps): 64,
// or 128 with 8-bit activations (one 128-byte row of activations, gemm/params.h).
int dense_k_step(const core::Format& format);
// The K steps of a layer whose K is padded to k_padded (the last may be half full with 8-bit
// activations: an odd number of 64-wide chunks).
int64_t dense_k_steps(const core::Format& format, int64_t k_padded);
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
