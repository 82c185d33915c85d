#include "tune/dense.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/quote.hpp"
#include <humming/gemm/params.h>

namespace hm::tune {

const char* dense_family_name(DenseKernel kernel) {
  return kernel == DenseKernel::kWgmma ? "dense_wgmma" : "dense_mma";
}

std::string DenseTile::name() const {
  if (kernel == DenseKernel::kWgmma)
    return "wg_bm" + std::to_string(block_m) + "_w" + std::to_string(warps) + "_st" +
           std::to_string(stages) + "_b" + std::to_string(blocks_per_sm) +
           (decoupled ? "_mb" : "") + (dequant_ahead ? "_da" : "") +
           (tma ? "_tma" : "") + (producer ? "_pw" : "") + (cluster_split ? "_cs" : "");
  return "bm" + std::to_string(block_m) + "_w" + std::to_string(warps) + "_s" +
         std::to_string(warp_strips);
}

bool wgmma_covers(const core::Format& f, const core::Arch& arch) {
  return arch.major == 9 && arch.minor == 0 && arch.suffix == 'a' && f.k % 8 == 0 &&
         f.scale_kind != core::ScaleKind::kBlock;
}

bool producer_covers(const core::Format& f) {
  return gemm::dense_group_slots_consecutive(f.has_group_scales() ? f.group_k : 0);
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
  if (wgmma_covers(f, arch)) {
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
    const DenseTile large = f.has_zero_point() ? wgmma(256, 8, 4, 1, kTma | kAhead)
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
  // mma.sync: small M is weight-bandwidth bound: narrow blocks (64 channels) so that, with
  // split-K, every SM streams weights; larger M reuses each weight chunk over more tokens in
  // registers. One table for every mma.sync arch until measurements say otherwise.
  return {
      {16, mma(16, 4, 1)},
      {32, mma(32, 4, 2)},
      {INT64_MAX, mma(64, 4, 2)},
  };
}

namespace {

// An integer field of a tuning entry within [min, max], or `fallback` when absent. JSON numbers
// are 64-bit here; a value outside the range is refused, never truncated to the field's type
// (4294967312 used to become a block_m of 16).
int64_t integer_field(const nlohmann::json& e, const char* key, int64_t fallback, int64_t min,
                      int64_t max, const std::string& where) {
  const auto it = e.find(key);
  if (it == e.end()) return fallback;
  const std::string range = "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
  bool in_range = false;
  if (it->is_number_unsigned()) {
    const uint64_t v = it->get<uint64_t>();
    in_range = v <= static_cast<uint64_t>(max) && static_cast<int64_t>(v) >= min;
  } else if (it->is_number_integer()) {
    const int64_t v = it->get<int64_t>();
    in_range = v >= min && v <= max;
  }
  HM_REQUIRE(in_range, HM_ERROR_PARSE,
             where + "." + key + " is " + it->dump() + ", outside the range " + range);
  return it->get<int64_t>();
}

}  // namespace

std::vector<DenseRange> parse_dense_ranges(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    fail(HM_ERROR_PARSE, std::string("tuning JSON is not valid JSON: ") + e.what());
  }
  HM_REQUIRE(j.is_object() && j.contains("dense") && j["dense"].is_array() && !j["dense"].empty(),
             HM_ERROR_PARSE, "tuning JSON must be an object with a non-empty array \"dense\"");
  std::vector<DenseRange> out;
  for (size_t i = 0; i < j["dense"].size(); ++i) {
    const auto& e = j["dense"][i];
    const std::string where = "tuning JSON dense[" + std::to_string(i) + "]";
    HM_REQUIRE(e.is_object(), HM_ERROR_PARSE, where + " must be an object");
    for (auto it = e.begin(); it != e.end(); ++it) {
      const std::string& key = it.key();
      if (key == "kernel") {
        HM_REQUIRE(it->is_string() && (*it == "mma" || *it == "wgmma"), HM_ERROR_PARSE,
                   where + ".kernel must be \"mma\" or \"wgmma\"");
        continue;
      }
      if (key == "pipeline") {
        HM_REQUIRE(it->is_string() && (*it == "barrier" || *it == "mbarrier"), HM_ERROR_PARSE,
                   where + ".pipeline must be \"barrier\" or \"mbarrier\"");
        continue;
      }
      if (key == "copy") {
        HM_REQUIRE(it->is_string() && (*it == "cp.async" || *it == "tma"), HM_ERROR_PARSE,
                   where + ".copy must be \"cp.async\" or \"tma\"");
        continue;
      }
      if (key == "dequant_ahead" || key == "producer") {
        HM_REQUIRE(it->is_boolean(), HM_ERROR_PARSE, where + "." + key + " must be true or false");
        continue;
      }
      if (key == "split") {
        HM_REQUIRE(it->is_string() && (*it == "global" || *it == "cluster"), HM_ERROR_PARSE,
                   where + ".split must be \"global\" or \"cluster\"");
        continue;
      }
      HM_REQUIRE(key == "max_m" || key == "block_m" || key == "warps" || key == "warp_strips" ||
                     key == "stages" || key == "blocks_per_sm",
                 HM_ERROR_PARSE,
                 where + ": unknown key " + core::quoted(key) +
                     " (max_m, kernel, block_m, warps, warp_strips, stages, pipeline, copy, "
                     "dequant_ahead, producer, split, blocks_per_sm)");
      HM_REQUIRE(it->is_number_integer(), HM_ERROR_PARSE, where + "." + key + " must be an integer");
    }
    DenseRange r{INT64_MAX, {}};
    const bool wg = e.value("kernel", std::string("mma")) == "wgmma";
    // Wide ranges here, only to keep each value within its type; the checks below say which
    // values each kernel takes.
    r.max_m = integer_field(e, "max_m", INT64_MAX, 1, INT64_MAX, where);
    r.tile.kernel = wg ? DenseKernel::kWgmma : DenseKernel::kMma;
    r.tile.block_m = static_cast<int>(integer_field(e, "block_m", 16, 1, 4096, where));
    r.tile.warps = static_cast<int>(integer_field(e, "warps", 4, 1, 64, where));
    r.tile.warp_strips = static_cast<int>(integer_field(e, "warp_strips", 1, 1, 64, where));
    r.tile.stages = static_cast<int>(integer_field(e, "stages", wg ? 4 : 0, 0, 64, where));
    r.tile.blocks_per_sm =
        static_cast<int>(integer_field(e, "blocks_per_sm", wg ? 1 : 16, 1, 1024, where));
    r.tile.decoupled = e.value("pipeline", std::string("barrier")) == "mbarrier";
    r.tile.dequant_ahead = e.value("dequant_ahead", false);
    r.tile.tma = e.value("copy", std::string("cp.async")) == "tma";
    r.tile.producer = e.value("producer", false);
    r.tile.cluster_split = e.value("split", std::string("global")) == "cluster";
    HM_REQUIRE(r.max_m > 0, HM_ERROR_PARSE, where + ".max_m must be positive");
    HM_REQUIRE(r.tile.blocks_per_sm >= 1 && r.tile.blocks_per_sm <= 32, HM_ERROR_PARSE,
               where + ".blocks_per_sm must be in [1, 32]");
    if (wg) {
      HM_REQUIRE(r.tile.block_m >= 8 && r.tile.block_m <= 256 && r.tile.block_m % 8 == 0,
                 HM_ERROR_PARSE, where + ".block_m must be a multiple of 8 in [8, 256] for wgmma");
      HM_REQUIRE(r.tile.warps == 4 || r.tile.warps == 8 || r.tile.warps == 12 || r.tile.warps == 16,
                 HM_ERROR_PARSE,
                 where + ".warps must be 4, 8, 12 or 16 (one to four warpgroups) for wgmma");
      HM_REQUIRE(r.tile.warp_strips == 1, HM_ERROR_PARSE,
                 where + ".warp_strips must be 1 for wgmma (a warp owns one strip)");
      HM_REQUIRE(r.tile.stages >= 2 && r.tile.stages <= 16, HM_ERROR_PARSE,
                 where + ".stages must be in [2, 16]");
      HM_REQUIRE(!r.tile.dequant_ahead || r.tile.decoupled || r.tile.stages >= 3, HM_ERROR_PARSE,
                 where + ".dequant_ahead with the barrier pipeline needs stages >= 3");
      HM_REQUIRE(!r.tile.tma || r.tile.decoupled, HM_ERROR_PARSE,
                 where + ".copy \"tma\" needs \"pipeline\": \"mbarrier\" (TMA completes on "
                         "the stages' mbarriers)");
      HM_REQUIRE(!r.tile.producer || r.tile.tma, HM_ERROR_PARSE,
                 where + ".producer needs \"copy\": \"tma\" (the copying warp issues TMA)");
    } else {
      HM_REQUIRE(r.tile.block_m >= 8 && r.tile.block_m <= 128 && r.tile.block_m % 8 == 0,
                 HM_ERROR_PARSE, where + ".block_m must be a multiple of 8 in [8, 128]");
      HM_REQUIRE(r.tile.warps >= 1 && r.tile.warps <= 16, HM_ERROR_PARSE,
                 where + ".warps must be in [1, 16]");
      HM_REQUIRE(r.tile.warp_strips >= 1 && r.tile.warp_strips <= 4, HM_ERROR_PARSE,
                 where + ".warp_strips must be in [1, 4]");
      HM_REQUIRE(r.tile.stages == 0, HM_ERROR_PARSE,
                 where + ".stages applies to wgmma only (mma.sync double-buffers)");
      HM_REQUIRE(!e.contains("pipeline"), HM_ERROR_PARSE,
                 where + ".pipeline applies to wgmma only");
      HM_REQUIRE(!e.contains("dequant_ahead"), HM_ERROR_PARSE,
                 where + ".dequant_ahead applies to wgmma only");
      HM_REQUIRE(!e.contains("copy"), HM_ERROR_PARSE, where + ".copy applies to wgmma only");
      HM_REQUIRE(!e.contains("producer"), HM_ERROR_PARSE, where + ".producer applies to wgmma only");
      HM_REQUIRE(!e.contains("split"), HM_ERROR_PARSE, where + ".split applies to wgmma only");
    }
    HM_REQUIRE(out.empty() || r.max_m > out.back().max_m, HM_ERROR_PARSE,
               where + ".max_m must be larger than the previous entry's");
    out.push_back(r);
  }
  out.back().max_m = INT64_MAX;
  return out;
}

void check_dense_ranges(const std::vector<DenseRange>& ranges, const core::Format& f,
                        const core::Arch& arch) {
  for (const DenseRange& r : ranges) {
    if (r.tile.kernel == DenseKernel::kWgmma && !wgmma_covers(f, arch))
      fail(HM_ERROR_UNSUPPORTED,
           "tile " + r.tile.name() + " asks for the wgmma kernel, which needs sm_90a (this plan: " +
               arch.name() + "), K a multiple of 8 (K = " + std::to_string(f.k) +
               ") and no block scales; use \"kernel\": \"mma\" for this format");
    if (r.tile.producer && !producer_covers(f))
      fail(HM_ERROR_UNSUPPORTED,
           "tile " + r.tile.name() + " has a copying warp, which copies scale codes as TMA boxes: "
           "the group size must be a multiple or a divisor of 64 (" + f.to_string() + " has " +
               std::to_string(f.group_k) + ")");
  }
}

const DenseTile& tile_for(const std::vector<DenseRange>& ranges, int64_t m) {
  for (const DenseRange& r : ranges)
    if (m <= r.max_m) return r.tile;
  return ranges.back().tile;
}

namespace {

int code_bytes(const core::Dtype& d) { return (d.bits() + 7) / 8; }

}  // namespace

DenseLaunch plan_dense_launch(const DenseTile& tile, const core::Format& f, int64_t m,
                              int64_t n_padded, int64_t k_padded, int multiprocessors) {
  DenseLaunch l{};
  l.grid_x = (n_padded + tile.block_n() - 1) / tile.block_n();
  l.grid_y = (m + tile.block_m - 1) / tile.block_m;
  l.threads = static_cast<uint32_t>(tile.threads());
  const int bits = f.weight.bits();
  if (tile.kernel == DenseKernel::kWgmma) {
    const int group_k = f.has_group_scales() ? f.group_k : 0;
    l.smem_bytes = static_cast<uint32_t>(gemm::dense_wgmma_smem_bytes(
        tile.block_m, tile.warps, tile.stages, bits, gemm::dense_group_slots(group_k),
        f.has_group_scales() ? code_bytes(f.scale) : 0,
        f.has_zero_point() ? code_bytes(f.zero_point) : 0));
  } else {
    l.smem_bytes = static_cast<uint32_t>(gemm::dense_smem_bytes(
        tile.block_m, tile.block_n(), gemm::dense_chunks_in_flight(tile.warp_strips, bits)));
  }
  const int64_t k_chunks = k_padded / 64;
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
