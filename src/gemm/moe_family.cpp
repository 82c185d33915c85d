// moe_wgmma and moe_mma: the Mixture-of-Experts GEMM (docs/moe.md) on the sm_90a wgmma kernel
// and on the mma.sync kernel (every arch from sm_75: Turing, Ampere, Ada, Blackwell). A block
// computes one tile of one expert: its rows are routed assignments gathered from A through
// HM_ARG_SORTED_IDS and scattered into C (gemm/sched.cuh); everything else (dequantization,
// pipeline, epilogue) is the dense kernel's, so each family is a dense one with its own
// coverage, tiles, grid and arguments; both share this file's launcher. The routing counts stay on the device: the grid covers the
// worst case (every expert padding a block) and blocks past *num_padded leave at once. The
// grouped modes (HM_ARG_MOE_MODE) run the same kernel: the mode is a runtime field of
// DenseParams, so one compiled tile serves all three and hm_plan_prepare compiles nothing more.
#include "gemm/moe_family.hpp"

#include <algorithm>
#include <string>

#include "api/context.hpp"  // hm_launch_params (the C ABI's argument slots)
#include "core/error.hpp"
#include "core/support.hpp"
#include "gemm/dense_family.hpp"
#include "gemm/dense_launch.hpp"
#include "jit/codegen.hpp"
#include "tune/dense.hpp"
#include <humming/gemm/params.h>
#include <humming/moe/routing.h>

namespace hm::gemm {

static_assert(kMoeIndexed == HM_MOE_MODE_INDEXED && kMoeContiguous == HM_MOE_MODE_CONTIGUOUS &&
                  kMoeMasked == HM_MOE_MODE_MASKED,
              "DenseParams::moe_mode takes humming.h's HM_MOE_MODE_* values");

int64_t moe_rows(int64_t m, int64_t top_k, int64_t experts, int64_t block) {
  // The capacity hm_moe_align fills (kernels/humming/moe/routing.h): one rule for both.
  return moe::align_capacity(m * top_k, static_cast<int32_t>(experts),
                             static_cast<int32_t>(block));
}

namespace {
// The top-k the default ranges count tokens at: what hm_plan_describe assumes and how grouped
// calls (whose rows have no top-k) convert rows per expert into tokens.
constexpr int64_t kTilesTopK = 8;
}  // namespace

int64_t moe_tile_m(int64_t mode, int64_t m, int64_t experts) {
  if (mode == HM_MOE_MODE_CONTIGUOUS) return std::max<int64_t>(1, m / kTilesTopK);
  if (mode == HM_MOE_MODE_MASKED)  // m, experts < 2^31, 2^13
    return std::clamp<int64_t>(m * experts / kTilesTopK, 1, HM_MAX_M);
  return m;
}

namespace {

// The dense wgmma options (tune/dense.cpp) a MoE tile can have: TMA only with a copying warp
// (which gathers the rows of A with cp.async); K splits only within a cluster (rows are slots,
// not tokens, so no global split-K workspace).
tune::DenseTile moe_wgmma_tile(int block_m, int warps, int stages, int blocks_per_sm,
                               bool mbarrier, bool ahead) {
  tune::DenseTile t;
  t.kernel = tune::DenseKernel::kWgmma;
  t.block_m = block_m;
  t.warps = warps;
  t.stages = stages;
  t.blocks_per_sm = blocks_per_sm;
  t.decoupled = mbarrier;
  t.dequant_ahead = ahead;
  t.cluster_split = true;
  return t;
}

// A mma.sync MoE tile: block_m rows, warps x strips 16-channel strips; no K splits.
tune::DenseTile moe_mma_tile(int block_m, int warps, int strips) {
  tune::DenseTile t;
  t.kernel = tune::DenseKernel::kMma;
  t.block_m = block_m;
  t.warps = warps;
  t.warp_strips = strips;
  return t;
}

class MoeFamily final : public DenseFamily {
 public:
  explicit MoeFamily(tune::DenseKernel kernel) : DenseFamily(kernel) {}

  const char* name() const override { return wgmma() ? "moe_wgmma" : "moe_mma"; }
  const char* tuning_name() const override { return name(); }

  std::string gap(const core::Format& f, const core::Arch& arch) const override {
    if (f.experts < 2)
      return "the MoE kernels take formats with experts (e >= 2), not e=" +
             std::to_string(f.experts);
    core::Format one = f;  // an expert is a dense layer
    one.experts = 1;
    if (!wgmma() && !tune::rows_in_16_byte_units(one))
      return "the mma.sync MoE kernel gathers rows of A in 16-byte units: K must be a multiple "
             "of " + std::to_string(128 / f.activation.bits()) + ", not " + std::to_string(f.k);
    // Groups of 32 or 64 k fold per group slot on both kernels (the MoE kernels are the dense
    // ones with gathered rows; jit::dense_gemm_gap says what they do not run).
    return jit::dense_gemm_gap(one, kernel_, arch);
  }

  // A block holds rows of one expert, so the tile grows with the rows an expert gets: about
  // M * top_k / E, with top_k taken as 8 (the routing is not known at plan time; a tuning JSON
  // can say otherwise). Measured on the H200 (NOTES v19, E = 128): 8 rows per block win while
  // experts get up to ~4 rows (M <= E / 2), 16 at ~8 rows (M = E: 90 against 109 us for 8), 64
  // at ~64 (M = 8E: 178 against 301 us for 32) and at ~256 (M = 32E: 505 against 548 us for 128
  // rows); 32 rows in between is not measured.
  // mma.sync: the same ranges with the dense mma.sync kernel's tile shapes (tune/dense.cpp: 64
  // or 128 channels per block, one or two strips per warp), measured only forced on the H200
  // (NOTES v25), not tuned.
  std::vector<std::pair<int64_t, std::shared_ptr<const Tile>>> default_tiles(
      const Layer& layer) const override {
    auto tile = [](const tune::DenseTile& t) { return std::make_shared<DenseTileOf>(t); };
    const core::Format& f = layer.format;
    const int64_t e = f.experts;
    // 8-bit activations whose K groups fold in f32 (weight group or block scales, activation
    // groups) hold a second accumulator set.
    const bool folds = f.activation.bits() == 8 &&
                       (f.act_group_k > 0 || core::folds_weight_groups_in_f32(f));
    if (!wgmma()) {
      // Groups of 32 or 64 k fold per group slot: tiles stop at 32 rows, as on the dense
      // mma.sync kernel (tune/dense.cpp says why), with one strip per warp (two spilled 12
      // bytes with the gathered rows' pointers: int4 g32 x int8, sm_80; compile matrix).
      if (core::folds_weight_groups_per_slot(f))
        return {
            {std::max<int64_t>(1, e / 2), tile(moe_mma_tile(8, 4, 1))},
            {2 * e, tile(moe_mma_tile(16, 4, 1))},
            {INT64_MAX, tile(moe_mma_tile(32, 4, 1))},
        };
      // With folds, one strip per warp at 64 rows (two spilled 16 bytes with the gathered rows'
      // pointers on top of both accumulator sets: int4 g128 x int8, sm_80; compile matrix).
      return {
          {std::max<int64_t>(1, e / 2), tile(moe_mma_tile(8, 4, 1))},
          {2 * e, tile(moe_mma_tile(16, 4, 1))},
          {4 * e, tile(moe_mma_tile(32, 4, 2))},
          {INT64_MAX, tile(moe_mma_tile(64, 4, folds ? 1 : 2))},
      };
    }
    // wgmma with folds: the 64-row tile runs one block per SM (at two, the 128-register cap made
    // NVRTC spill 20-312 bytes, 44 without dequantizing ahead; compile matrix). Not measured.
    // Every tile's blocks fit an SM's shared memory (tune::fit_wgmma_blocks: 8-bit weights on
    // 8-bit activations get fewer stages; not measured for MoE).
    auto fitted = [&](tune::DenseTile t) {
      tune::fit_wgmma_blocks(t, f);
      return tile(t);
    };
    // Groups of 32 k hold four partial sets (tune::folded_group_token_cap): the rows past 4E
    // keep the 32-row tile. Not measured.
    const int cap = tune::folded_group_token_cap(f);
    const tune::DenseTile widest = cap > 0 && cap < 64
                                       ? moe_wgmma_tile(cap, 4, 8, 2, true, false)
                                       : moe_wgmma_tile(64, 8, 6, folds ? 1 : 2, false, true);
    return {
        {std::max<int64_t>(1, e / 2), fitted(moe_wgmma_tile(8, 4, 8, 4, false, false))},
        {2 * e, fitted(moe_wgmma_tile(16, 4, 8, 3, false, false))},
        {4 * e, fitted(moe_wgmma_tile(32, 4, 8, 2, true, false))},
        {INT64_MAX, fitted(widest)},
    };
  }

  void check_tile(const Tile& generic, const Layer& layer) const override {
    const tune::DenseTile& t = dense_tile(generic);
    // The rows of A are gathered with cp.async (a tensor box cannot on sm_90): by every
    // computing thread, or with TMA for the rest by the copying warp's 32 lanes.
    if (t.tma && !t.producer)
      fail(HM_ERROR_UNSUPPORTED, "tile " + t.name() + ": a MoE tile with \"copy\": \"tma\" "
                                 "needs \"producer\": true (its copying warp gathers the rows "
                                 "of A, which are no tensor box)");
    const int gatherers = gemm::wgmma_act_copiers(t.tma, t.threads());
    if (gemm::wgmma_act_rows_per_copier(t.block_m, gatherers) > gemm::kMoeMaxGatheredRows)
      fail(HM_ERROR_UNSUPPORTED,
           "tile " + t.name() + ": a MoE tile gathers at most " +
               std::to_string(gemm::kMoeMaxGatheredRows) + " rows per thread (block_m <= " +
               std::to_string(gatherers) + " gathering threads; " +
               (t.tma ? "the copying warp's 32 lanes with TMA" : "every thread without TMA") +
               ")");
    DenseFamily::check_tile(generic, layer);
  }

  jit::GeneratedKernel generate(const Tile& tile, const Layer& layer) const override {
    // gap() refused K that does not divide into 16-byte rows; the generator checks it again.
    return jit::dense_gemm_kernel(layer.format, dense_tile(tile),
                                  tune::rows_in_16_byte_units(layer.format), layer.arch_name, true);
  }

  void check_loaded(const Tile& generic, const Layer& layer, runtime::CUfunction function,
                    const std::string& entry, int64_t, int64_t) const override {
    const tune::DenseTile& tile = dense_tile(generic);
    if (layer.device == nullptr) return;
    check_shared_memory(tile, layer, function, entry);
    if (!tile.cluster_split) return;
    // The largest cluster any call can ask for (launch() picks splits by the expected rows).
    tune::DenseLaunch widest = launch_shape(tile, layer, 1, 1);
    const int64_t k_steps = tune::dense_k_steps(layer.format, layer.shape.k_padded);
    widest.splits = std::min<int>(kDenseMaxClusterSplits,  // plan_dense_launch's by_k
                                  static_cast<int>(std::max<int64_t>(1, k_steps / 4)));
    if (widest.splits > 1)
      check_cluster_fits(tile, layer, function, entry, widest, "a MoE call at small M",
                         "use a tile without \"split\": \"cluster\" for this range");
  }

  uint64_t workspace_bytes(const Tile&, const Layer&, int64_t, int64_t) const override {
    return 0;  // K splits only within clusters
  }

  std::string describe(const Tile& tile, const Layer& layer, int64_t m) const override {
    const tune::DenseTile& t = dense_tile(tile);
    const tune::DenseLaunch l = launch_shape(t, layer, m, kTilesTopK);
    const std::string k = std::to_string(kTilesTopK);
    return t.name() + " indexed, grid " + std::to_string(l.grid_x) + "x" +
           std::to_string(l.grid_y) + "x" + std::to_string(l.splits) + " at top_k " + k + " (" +
           std::to_string(t.block_m) + " rows per block, " +
           (l.splits > 1 ? "cluster split-K " + std::to_string(l.splits) + " x " +
                               std::to_string(l.k_chunks_per_split) + " K steps of " +
                               std::to_string(tune::dense_k_step(layer.format))
                         : std::string("no split-K")) +
           "), workspace 0 bytes; grouped calls (HM_ARG_MOE_MODE) run the tile of M / " + k +
           " tokens (contiguous) or T_max * E / " + k + " (masked)" +
           describe_activation_path(layer.format);
  }

  void launch(const Tile& generic, const Layer& layer, runtime::CUfunction function,
              const std::string& entry, const Call& call) const override {
    const tune::DenseTile& tile = dense_tile(generic);
    const hm_launch_params& params = call.params;
    const core::Format& f = layer.format;
    DenseParams p{};
    marshal(layer, params, true, p);  // checks HM_ARG_MOE_MODE and its routing slots
    const int32_t mode = p.moe_mode;
    // The grouped modes have no top-k: a row of A is a row of C.
    const int64_t top_k = mode == kMoeIndexed ? params.integer(HM_ARG_TOP_K) : 1;
    if (mode == kMoeIndexed && (top_k < 1 || top_k > HM_MAX_TOP_K))
      fail(HM_ERROR_INVALID_ARGUMENT, "HM_ARG_TOP_K must be in [1, HM_MAX_TOP_K = " +
                                          std::to_string(HM_MAX_TOP_K) + "], got " +
                                          std::to_string(top_k));
    if (call.m > INT32_MAX / top_k)
      fail(HM_ERROR_INVALID_ARGUMENT, "M * top_k = " + std::to_string(call.m) + " * " +
                                          std::to_string(top_k) +
                                          " exceeds the int32 assignment ids");
    p.top_k = top_k;
    p.experts = f.experts;
    p.expert_w_bytes = static_cast<int64_t>(layer.shape.weight_bytes / f.experts);
    p.expert_s_bytes = static_cast<int64_t>(layer.shape.scale_bytes / f.experts);
    p.expert_z_bytes = static_cast<int64_t>(layer.shape.zero_point_bytes / f.experts);
    const tune::DenseLaunch l = launch_shape(tile, layer, call.m, top_k, mode);
    if (mode == kMoeMasked && l.grid_y > 65535)
      fail(HM_ERROR_UNSUPPORTED,
           "HM_MOE_MODE_MASKED runs ceil(T_max / " + std::to_string(tile.block_m) +
               ") blocks per expert: " + std::to_string(l.grid_y) + " for E = " +
               std::to_string(f.experts) + " and T_max = HM_ARG_M = " + std::to_string(call.m) +
               " exceed the 65535 the grid holds; use a smaller T_max (or the contiguous mode)");
    DenseGeometry g{l, 0};
    launch_dense(*layer.device, function, entry, f, layer.shape, tile, g, p, 0, call.m,
                 call.stream, call.tensor_maps);
  }

 private:
  bool wgmma() const { return kernel_ == tune::DenseKernel::kWgmma; }

  // Indexed: the grid covers every slot SORTED_IDS can hold (moe_rows); K splits (a cluster)
  // are sized for the blocks expected to have rows: M * top_k assignments over at most
  // min(E, M * top_k) experts, each padding half a block on average. Contiguous: the same with M
  // rows and top_k 1, every run padding at most one block. Masked: every slab's blocks (the
  // counts are on the device), K splits sized as if all rows were real (no over-splitting when
  // they are).
  tune::DenseLaunch launch_shape(const tune::DenseTile& tile, const Layer& layer, int64_t m,
                                 int64_t top_k, int32_t mode = kMoeIndexed) const {
    const int64_t e = layer.format.experts, bm = tile.block_m;
    const int64_t assignments = mode == kMoeMasked ? e * m : m * top_k;
    const int64_t expected = mode == kMoeMasked
                                 ? assignments
                                 : assignments + std::min(e, assignments) * (bm - 1) / 2;
    tune::DenseLaunch l = tune::plan_dense_launch(tile, layer.format, std::max<int64_t>(1, expected),
                                                  layer.shape.n_padded, layer.shape.k_padded,
                                                  layer.multiprocessors);
    // Blocks with rows are consecutive from block 0 (docs/moe.md; in the contiguous mode by
    // construction), and each holds at least one row: no more than M * top_k of them, however
    // many experts pad.
    if (mode == kMoeMasked)
      l.grid_y = e * ((m + bm - 1) / bm);
    else if (mode == kMoeContiguous)
      l.grid_y = std::min((m + bm - 1) / bm + e, m);
    else
      l.grid_y = std::min(moe_rows(m, top_k, e, bm) / bm, assignments);
    if (!l.cluster) {  // no global split-K for MoE
      l.splits = 1;
      l.k_chunks_per_split =
          static_cast<int>(tune::dense_k_steps(layer.format, layer.shape.k_padded));
    }
    return l;
  }
};

}  // namespace

const Family& moe_wgmma_family() {
  static const MoeFamily family(tune::DenseKernel::kWgmma);
  return family;
}

const Family& moe_mma_family() {
  static const MoeFamily family(tune::DenseKernel::kMma);
  return family;
}

}  // namespace hm::gemm
