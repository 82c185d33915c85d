#include "tune/dense.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/support.hpp"
#include "core/quote.hpp"
#include <humming/gemm/params.h>
#include <humming/layout/spec.h>

namespace hm::tune {

const char* dense_family_name(DenseKernel kernel) {
  return kernel == DenseKernel::kWgmma ? "dense_wgmma" : "dense_mma";
}

const std::vector<DenseTileField>& dense_tile_fields() {
  using F = DenseTileField;
  // Order: the tile name's and the generated Config's. Ranges per kernel: {min, max, step,
  // default, compiled into the kernel}.
  static const std::vector<F> kFields = {
      {"block_m", "kBlockM", "bm", &DenseTile::block_m, nullptr,
       {8, 128, 8, 16, true}, {8, 256, 8, 16, true}},
      {"warps", "kWarps", "w", &DenseTile::warps, nullptr,
       {1, 16, 1, 4, true}, {4, 16, 4, 4, true}},
      {"warp_strips", "kWarpStrips", "s", &DenseTile::warp_strips, nullptr,
       {1, 4, 1, 1, true}, {1, 1, 1, 1, true}},
      {"stages", "kStages", "st", &DenseTile::stages, nullptr,
       {0, 0, 1, 0, false}, {2, 16, 1, 4, true}},
      // The wgmma kernel's __launch_bounds__ minimum; the mma.sync kernel's code ignores it
      // (only its split-K sizing reads it).
      {"blocks_per_sm", "kMinBlocks", "b", &DenseTile::blocks_per_sm, nullptr,
       {1, 32, 1, 16, false}, {1, 32, 1, 1, true}},
      {"pipeline", "kDecoupled", "mb", nullptr, &DenseTile::decoupled,
       {}, {0, 1, 1, 0, true}, "barrier", "mbarrier"},
      {"dequant_ahead", "kDequantAhead", "da", nullptr, &DenseTile::dequant_ahead,
       {}, {0, 1, 1, 0, true}},
      {"copy", "kTma", "tma", nullptr, &DenseTile::tma, {}, {0, 1, 1, 0, true}, "cp.async", "tma"},
      {"producer", "kProducer", "pw", nullptr, &DenseTile::producer, {}, {0, 1, 1, 0, true}},
      {"split", "kClusterSplit", "cs", nullptr, &DenseTile::cluster_split,
       {}, {0, 1, 1, 0, true}, "global", "cluster"},
  };
  return kFields;
}

bool operator==(const DenseTile& a, const DenseTile& b) {
  if (a.kernel != b.kernel) return false;
  for (const DenseTileField& f : dense_tile_fields()) {
    if (f.value && a.*f.value != b.*f.value) return false;
    if (f.flag && a.*f.flag != b.*f.flag) return false;
  }
  return true;
}

std::string DenseTile::name() const {
  // Every field compiled into the kernel that is not fixed for it.
  std::string name = kernel == DenseKernel::kWgmma ? "wg" : "";
  for (const DenseTileField& f : dense_tile_fields()) {
    const DenseTileField::Range& r = f.range(kernel);
    if (!r.compiled || r.min == r.max) continue;
    if (f.value) name += std::string("_") + f.short_name + std::to_string(this->*f.value);
    else if (this->*f.flag) name += std::string("_") + f.short_name;
  }
  return name[0] == '_' ? name.substr(1) : name;
}

std::string DenseTile::json() const {
  nlohmann::json j;
  j["kernel"] = kernel == DenseKernel::kWgmma ? "wgmma" : "mma";
  for (const DenseTileField& f : dense_tile_fields()) {
    const DenseTileField::Range& r = f.range(kernel);
    if (r.min == r.max && !f.flag) continue;  // fixed for this kernel (mma: stages)
    if (f.value) j[f.key] = this->*f.value;
    else if (kernel == DenseKernel::kWgmma) {
      if (f.on) j[f.key] = this->*f.flag ? f.on : f.off;
      else j[f.key] = this->*f.flag;
    }
  }
  return j.dump();
}

std::string DenseTile::config() const {
  std::string c;
  for (const DenseTileField& f : dense_tile_fields()) {
    if (!f.range(kernel).compiled) continue;
    c += std::string("  static constexpr ") + (f.value ? "int " : "bool ") + f.config + " = " +
         (f.value ? std::to_string(this->*f.value) : (this->*f.flag ? "true" : "false")) + ";\n";
  }
  return c;
}

bool rows_in_16_byte_units(const core::Format& f) { return f.k * f.activation.bits() % 128 == 0; }

bool wgmma_covers(const core::Format& f, const core::Arch& arch) {
  return arch.major == 9 && arch.minor == 0 && arch.suffix == 'a' && rows_in_16_byte_units(f) &&
         (f.scale_kind != core::ScaleKind::kBlock || f.activation.bits() == 8);
}

bool wgmma_stages_scale_codes(const core::Format& f) {
  return gemm::dense_wgmma_stages_scale_codes(f.activation.bits(), f.has_group_scales(),
                                              f.scale_kind == core::ScaleKind::kBlock);
}

bool producer_covers(const core::Format& f) {
  return gemm::dense_group_slots_consecutive(f.has_group_scales() ? f.group_k : 0,
                                             gemm::dense_step_k(f.activation.bits()));
}

namespace {

DenseTile mma(int block_m, int warps, int warp_strips) {
  DenseTile t;
  t.block_m = block_m;
  t.warps = warps;
  t.warp_strips = warp_strips;
  return t;
}

// The options of a wgmma tile, or-ed together: kMbarrier (the pipeline), kAhead (dequant_ahead),
// kTma (copy: implies kMbarrier), kProducer (a copying warp: implies kTma), kCluster (split).
enum WgmmaOption : unsigned {
  kBarrier = 0,
  kMbarrier = 1,
  kAhead = 2,
  kTma = 4 | kMbarrier,
  kProducer = 8 | kTma,
  kCluster = 16,
};

DenseTile wgmma(int block_m, int warps, int stages, int blocks_per_sm, unsigned options) {
  DenseTile t;
  t.kernel = DenseKernel::kWgmma;
  t.block_m = block_m;
  t.warps = warps;
  t.stages = stages;
  t.blocks_per_sm = blocks_per_sm;
  t.decoupled = (options & kMbarrier) != 0;
  t.dequant_ahead = (options & kAhead) != 0;
  t.tma = (options & kTma) == kTma;
  t.producer = (options & kProducer) == kProducer;
  t.cluster_split = (options & kCluster) != 0;
  return t;
}

}  // namespace

std::vector<DenseRange> default_dense_ranges(const core::Format& f, const core::Arch& arch) {
  return default_dense_ranges(f, arch,
                              wgmma_covers(f, arch) ? DenseKernel::kWgmma : DenseKernel::kMma);
}

namespace {

std::vector<DenseRange> wgmma_ranges(const core::Format& f);

}  // namespace

std::vector<DenseRange> default_dense_ranges(const core::Format& f, const core::Arch& arch,
                                             DenseKernel kernel) {
  if (kernel == DenseKernel::kWgmma) {
    std::vector<DenseRange> ranges = wgmma_ranges(f);
    // 8-bit activations with group scales hold a second accumulator set per thread (one K
    // group's products, gemm/dense_wgmma.cuh): the tiles of 128 tokens and more, whose two
    // accumulator sets take 128-256 registers, become one 128-token tile of 8 warps without a
    // copying warp (with one, the 288-thread block's register cap made NVRTC spill). Not tuned
    // (NOTES v21). Group scales that go into the weights' exponents need no second set;
    // activation scales per K group (a=e4m3:g128) do, and more registers still.
    // 8-bit weights on 8-bit activations: a stage holds twice the weight bytes of a 4-bit one,
    // and the small-M tiles' 8 stages at 4 blocks per SM (4 x 75-83 KB) left room for 2-3
    // blocks, so their K splits, sized for 4, ran in 1.3-2 waves. 4 stages measured best of
    // 3-8 at M <= 16 (H100, NOTES v34; W8A8 e4m3 channel / b128x128 8192^2: M = 1 38.5 -> 37.2
    // and 43.6 -> 37.5 us, M = 16 41.2 -> 36.9 and 51.7 -> 37.2); the other tiles take what
    // fit_wgmma_blocks gives them below (the 64-token tile 6 stages: 42.8 -> 38.2, 53.4 ->
    // 40.3 at M = 64).
    if (f.activation.bits() == 8 && f.weight.bits() == 8) {
      for (DenseRange& r : ranges)
        if (r.tile.block_m <= 16 && r.tile.producer) r.tile.stages = 4;
    }
    if (f.activation.bits() == 8 && f.act_group_k > 0) {
      // Activation scales per K group add the fold's column scales on top: from 96 tokens on,
      // the 128-token tile without the second register set of dequantizing ahead (with it,
      // NVRTC spilled 16-360 bytes; compile matrix). Not measured.
      const DenseTile to_128 = wgmma(128, 8, 4, 1, kTma | kCluster);
      for (DenseRange& r : ranges)
        if (r.tile.block_m >= 96) r.tile = to_128;
    } else if (core::folds_weight_groups_in_f32(f)) {
      const DenseTile to_128 = wgmma(128, 8, 4, 1, kTma | kAhead | kCluster);
      for (DenseRange& r : ranges)
        if (r.tile.block_m >= 128) r.tile = to_128;
    }
    if (const int cap = folded_group_token_cap(f); cap > 0) {
      // Groups of 32 or 64 k fold every step, one partial set per group slot (128 / group_k
      // sets next to the accumulators): tiles stop at folded_group_token_cap. Not measured.
      const DenseTile capped = producer_covers(f) ? wgmma(cap, 4, 8, 2, kProducer | kCluster)
                                                  : wgmma(cap, 8, 6, 2, kTma);
      for (DenseRange& r : ranges)
        if (r.tile.block_m > cap) r.tile = capped;
    }
    for (DenseRange& r : ranges) fit_wgmma_blocks(r.tile, f);
    return ranges;
  }
  // mma.sync: small M is weight-bandwidth bound: narrow blocks (64 channels) so that, with
  // split-K, every SM streams weights; larger M reuses each weight chunk over more tokens in
  // registers. One table for every mma.sync arch until measurements say otherwise.
  // Activation scales per K group (8-bit activations) fold each group's sums with column scales
  // into a second accumulator set: the 64-token tile keeps one strip per warp (two took all 255
  // registers and spilled; compile matrix). Not measured. Weight groups of 32 or 64 k fold
  // per group slot of every step, and ptxas issues all of a step's MMAs before its folds, so
  // the sets of every token group are live at once: tiles stop at 32 tokens (64 spilled 4-48
  // bytes on sm_89 with one strip per warp, up to 260 with two; compile matrix).
  const bool act_groups = f.activation.bits() == 8 && f.act_group_k > 0;
  if (core::folds_weight_groups_per_slot(f)) return {{16, mma(16, 4, 1)}, {INT64_MAX, mma(32, 4, 2)}};
  return {
      {16, mma(16, 4, 1)},
      {32, mma(32, 4, 2)},
      {INT64_MAX, act_groups ? mma(64, 4, 1) : mma(64, 4, 2)},
  };
}

namespace {

std::vector<DenseRange> wgmma_ranges(const core::Format& f) {
  {
    // Measured on the H200 (benchmarks/NOTES.md, sweeps v6-v12, int4 g128 8192^2). Up to
    // M = 256 a tile holds every token of the call, so each weight is dequantized once, and a
    // copying warp feeds it by TMA (the computing warps only wait, dequantize and issue); K
    // splits fill the SMs and meet in shared memory as one cluster (from M = 9 on; at M <= 8
    // the global workspace measured faster). The widths: 64 channels per block at M <= 64
    // (enough blocks), 128 at M <= 192 with each chunk dequantized ahead of its wgmma, 256
    // tokens of two warpgroups up to M = 4096, then 160 tokens of four warpgroups (fewer, fuller
    // waves; 160 tokens need all 128 registers a 512-thread block allows, and zero points more,
    // so those formats keep the 256-token tile). Formats whose scale codes are not TMA boxes
    // (group sizes neither multiples nor divisors of 64) cannot have a copying warp: their
    // small-M tiles are the best measured without one.
    // Scales written into the weights' exponents (MXFP4 x FP8) also keep it: 2051.8 against
    // 2153.8 us at M = 16384, 8192^2 (NOTES v22 sweep).
    const bool keep_256 = f.has_zero_point() || core::scale_exponent_window(f).has_value();
    const DenseTile large = keep_256 ? wgmma(256, 8, 4, 1, kTma | kAhead)
                                     : wgmma(160, 16, 4, 1, kTma);
    // 65-128 tokens: 128 channels per block while that leaves at least 64 blocks (two K
    // splits fill the SMs), else 64 (4096 x 14336: 38.2 against 56.1 us, NOTES v14); the tile
    // is as long as the call needs, 96 tokens up to M = 96 (NOTES v17: M = 80 30.9 against
    // 36.1 us at 8192^2, 34.3 against 43.3 at 4096 x 14336).
    const bool wide = f.n >= 64 * 128;
    const unsigned mid = kProducer | kAhead | kCluster;
    const DenseTile to_96 = wide ? wgmma(96, 8, 6, 1, mid) : wgmma(96, 4, 8, 1, mid);
    const DenseTile to_128 = wide ? wgmma(128, 8, 6, 1, mid) : wgmma(128, 4, 8, 1, mid);
    // 129-192 tokens: 192 with a copying warp (M = 160: 41.4 against 65.5 us for the 256-token
    // tile at 8192^2, 66.9 against 81.2 at 4096 x 14336, NOTES v17), 64 channels for narrow
    // layers as above.
    const DenseTile to_192 = wide ? wgmma(192, 8, 4, 1, mid) : wgmma(192, 4, 6, 1, mid);
    if (producer_covers(f))
      return {
          {8, wgmma(8, 4, 8, 4, kProducer)},
          {16, wgmma(16, 4, 8, 4, kProducer | kCluster)},
          {32, wgmma(32, 4, 8, 2, kProducer | kCluster)},
          {64, wgmma(64, 4, 8, 2, mid)},
          {96, to_96},
          {128, to_128},
          {192, to_192},
          {4096, wgmma(256, 8, 4, 1, kTma | kAhead | kCluster)},
          {INT64_MAX, large},
      };
    return {
        {8, wgmma(8, 4, 8, 6, kBarrier)},
        {16, wgmma(16, 8, 8, 3, kTma)},
        {32, wgmma(32, 8, 8, 3, kTma)},
        {64, wgmma(64, 8, 6, 2, kBarrier | kAhead | kCluster)},
        {128, wgmma(128, 8, 6, 1, kTma | kAhead | kCluster)},
        {4096, wgmma(256, 8, 4, 1, kTma | kAhead | kCluster)},
        {INT64_MAX, large},
    };
  }
}

}  // namespace

DenseTile parse_dense_tile(const nlohmann::json& e, DenseKernel kernel, const std::string& where) {
  const bool wg = kernel == DenseKernel::kWgmma;
  const char* kernel_name = wg ? "wgmma" : "mma";
  DenseTile t;
  t.kernel = kernel;
  std::string keys = "max_m, kernel";
  for (const DenseTileField& f : dense_tile_fields()) keys += std::string(", ") + f.key;
  for (auto it = e.begin(); it != e.end(); ++it) {
    if (it.key() == "max_m" || it.key() == "kernel") continue;
    const auto field = std::find_if(dense_tile_fields().begin(), dense_tile_fields().end(),
                                    [&](const DenseTileField& f) { return it.key() == f.key; });
    HM_REQUIRE(field != dense_tile_fields().end(), HM_ERROR_PARSE,
               where + ": unknown key " + core::quoted(it.key()) + " (" + keys + ")");
  }
  for (const DenseTileField& f : dense_tile_fields()) {
    const DenseTileField::Range& r = f.range(kernel);
    const auto it = e.find(f.key);
    const std::string what = where + "." + f.key;
    if (f.flag) {
      if (it == e.end()) continue;
      HM_REQUIRE(wg, HM_ERROR_PARSE, what + " applies to wgmma only");
      if (f.on) {
        HM_REQUIRE(it->is_string() && (*it == f.on || *it == f.off), HM_ERROR_PARSE,
                   what + " must be \"" + f.off + "\" or \"" + f.on + "\"");
        t.*f.flag = *it == f.on;
      } else {
        HM_REQUIRE(it->is_boolean(), HM_ERROR_PARSE, what + " must be true or false");
        t.*f.flag = it->get<bool>();
      }
      continue;
    }
    if (it == e.end()) {
      t.*f.value = r.fallback;
      continue;
    }
    // JSON numbers are 64-bit here; a value outside the range is refused, never truncated to
    // the field's type (4294967312 used to become a block_m of 16).
    HM_REQUIRE(it->is_number_integer(), HM_ERROR_PARSE, what + " must be an integer");
    const bool in_range =
        it->is_number_unsigned()
            ? it->get<uint64_t>() <= static_cast<uint64_t>(r.max) &&
                  static_cast<int64_t>(it->get<uint64_t>()) >= r.min
            : it->get<int64_t>() >= r.min && it->get<int64_t>() <= r.max;
    const std::string range = r.min == r.max ? std::to_string(r.min)
                              : "[" + std::to_string(r.min) + ", " + std::to_string(r.max) + "]" +
                                    (r.step > 1 ? " in steps of " + std::to_string(r.step) : "");
    HM_REQUIRE(in_range && (it->get<int64_t>() - r.min) % r.step == 0, HM_ERROR_PARSE,
               what + " is " + it->dump() + ", outside the range " + range + " for " +
                   kernel_name);
    t.*f.value = static_cast<int>(it->get<int64_t>());
  }
  if (wg) {
    HM_REQUIRE(!t.dequant_ahead || t.decoupled || t.stages >= 3, HM_ERROR_PARSE,
               where + ".dequant_ahead with the barrier pipeline needs stages >= 3");
    HM_REQUIRE(!t.tma || t.decoupled, HM_ERROR_PARSE,
               where + ".copy \"tma\" needs \"pipeline\": \"mbarrier\" (TMA completes on "
                       "the stages' mbarriers)");
    HM_REQUIRE(!t.producer || t.tma, HM_ERROR_PARSE,
               where + ".producer needs \"copy\": \"tma\" (the copying warp issues TMA)");
  }
  return t;
}

int folded_group_token_cap(const core::Format& f) {
  if (!core::folds_weight_groups_per_slot(f)) return 0;
  return f.group_k == 32 ? 32 : 64;  // the sets take the registers of two 128-token sets
}

void check_dense_tile(const DenseTile& tile, const core::Format& f) {
  const int cap = folded_group_token_cap(f);
  if (tile.kernel == DenseKernel::kWgmma && cap > 0 && tile.block_m > cap)
    fail(HM_ERROR_UNSUPPORTED,
         "tile " + tile.name() + ": " + std::to_string(tile.block_m) + " tokens; groups of " +
             std::to_string(f.group_k) + " k on " + f.activation.name() +
             " activations hold a partial accumulator set per group slot, which fits tiles of "
             "at most " + std::to_string(cap) + " tokens");
  const bool int8_activations = f.activation.is_integer();
  if (tile.kernel == DenseKernel::kWgmma &&
      !gemm::dense_wgmma_token_width_ok(tile.block_m, int8_activations))
    fail(HM_ERROR_UNSUPPORTED,
         "tile " + tile.name() + ": " + std::to_string(tile.block_m) + " tokens is not a width the " +
             (int8_activations ? "integer wgmma instruction (int8 activations) takes: 8, 16, 24, "
                                 "32, then multiples of 16 up to 256"
                               : "wgmma instruction takes: multiples of 8 up to 256"));
  if (tile.producer && !producer_covers(f))
    fail(HM_ERROR_UNSUPPORTED,
         "tile " + tile.name() + " has a copying warp, which copies scale codes as TMA boxes: "
         "the group size must be a multiple or a divisor of 64 (" + f.to_string() + " has " +
             std::to_string(f.group_k) + ")");
}

namespace {

int code_bytes(const core::Dtype& d) { return (d.bits() + 7) / 8; }

}  // namespace

int dense_k_step(const core::Format& f) {
  // Both kernels step by one 128-byte row of activations (gemm/params.h).
  return gemm::dense_step_k(f.activation.bits());
}

int64_t dense_k_steps(const core::Format& f, int64_t k_padded) {
  const int64_t step = dense_k_step(f);
  return (k_padded + step - 1) / step;
}

uint32_t wgmma_smem_bytes(const DenseTile& tile, const core::Format& f) {
  const int group_k = f.has_group_scales() ? f.group_k : 0;
  return static_cast<uint32_t>(gemm::dense_wgmma_smem_bytes(
      tile.block_m, tile.warps, tile.stages,
      f.weight.bits() * gemm::dense_step_chunks(f.activation.bits()),
      gemm::dense_group_slots(group_k, gemm::dense_step_k(f.activation.bits())),
      wgmma_stages_scale_codes(f) ? code_bytes(f.scale) : 0,
      f.has_zero_point() ? code_bytes(f.zero_point) : 0));
}

bool wgmma_blocks_fit(const DenseTile& tile, const core::Format& f) {
  return uint64_t{static_cast<uint32_t>(tile.blocks_per_sm)} *
             (wgmma_smem_bytes(tile, f) + kWgmmaBlockSmemOverhead) <=
         kSm90SmemPerSm;
}

void fit_wgmma_blocks(DenseTile& tile, const core::Format& f) {
  // The barrier pipeline that dequantizes ahead keeps two chunks in flight past the one in use.
  const int least = !tile.decoupled && tile.dequant_ahead ? 3 : 2;
  while (!wgmma_blocks_fit(tile, f) && tile.stages > least) --tile.stages;
  while (!wgmma_blocks_fit(tile, f) && tile.blocks_per_sm > 1) --tile.blocks_per_sm;
}

DenseLaunch plan_dense_launch(const DenseTile& tile, const core::Format& f, int64_t m,
                              int64_t n_padded, int64_t k_padded, int multiprocessors) {
  DenseLaunch l{};
  l.grid_x = (n_padded + tile.block_n() - 1) / tile.block_n();
  l.grid_y = (m + tile.block_m - 1) / tile.block_m;
  l.threads = static_cast<uint32_t>(tile.threads());
  const int bits = f.weight.bits();
  if (tile.kernel == DenseKernel::kWgmma) {
    l.smem_bytes = wgmma_smem_bytes(tile, f);
  } else {
    l.smem_bytes = static_cast<uint32_t>(gemm::dense_smem_bytes(
        tile.block_m, tile.block_n(),
        gemm::dense_mma_steps_in_flight(tile.warp_strips, bits, f.activation.bits())));
  }
  // K steps: 64-wide chunks, or 128 k per step with 8-bit activations.
  const int64_t k_chunks = dense_k_steps(f, k_padded);
  const int64_t blocks = l.grid_x * l.grid_y;
  // Small grids split K so that about one wave of blocks (blocks_per_sm on every SM) streams
  // the weights, with at least 4 chunks per split and the f32 partials within 16 MiB.
  const int64_t want = std::max<int64_t>(1, int64_t{tile.blocks_per_sm} * multiprocessors / blocks);
  const int64_t by_k = std::max<int64_t>(1, std::min<int64_t>(32, k_chunks / 4));
  const int64_t by_workspace =
      std::max<int64_t>(1, (int64_t{16} << 20) / std::max<int64_t>(1, m * n_padded * 4));
  // Cluster splits need no workspace and no counters, but a cluster holds at most 8 blocks.
  l.cluster = tile.cluster_split;
  int64_t splits = l.cluster ? std::min({want, by_k, int64_t{gemm::kDenseMaxClusterSplits}})
                   : blocks <= kSplitCounterSlots ? std::min({want, by_k, by_workspace})
                                                  : 1;
  l.k_chunks_per_split = static_cast<int>((k_chunks + splits - 1) / splits);
  l.splits = static_cast<int>((k_chunks + l.k_chunks_per_split - 1) / l.k_chunks_per_split);
  if (l.splits <= 1) l.cluster = false;
  return l;
}

uint64_t dense_workspace_bytes(const DenseLaunch& l, int64_t m, int64_t n_padded) {
  if (l.splits <= 1 || l.cluster) return 0;
  HM_REQUIRE(l.grid_x * l.grid_y <= kSplitCounterSlots, HM_ERROR_INTERNAL,
             "split-K launch with more tiles than counter slots");
  return kSplitCounterBytes + static_cast<uint64_t>(l.splits) * m * n_padded * sizeof(float);
}

}  // namespace hm::tune
