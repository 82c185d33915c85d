#include "tune/dense.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace hm::tune {

std::string DenseTile::name() const {
  return "bm" + std::to_string(block_m) + "_w" + std::to_string(warps) + "_s" +
         std::to_string(warp_strips);
}

std::vector<DenseRange> default_dense_ranges(int compute_capability) {
  // Small M is weight-bandwidth bound: narrow blocks (64 channels) so that, with split-K, every SM
  // streams weights; larger M reuses each weight chunk over more tokens in registers.
  (void)compute_capability;  // one table for every mma.sync arch until measurements say otherwise
  return {
      {16, {16, 4, 1}},
      {32, {32, 4, 2}},
      {INT64_MAX, {64, 4, 2}},
  };
}

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
      HM_REQUIRE(key == "max_m" || key == "block_m" || key == "warps" || key == "warp_strips",
                 HM_ERROR_PARSE,
                 where + ": unknown key \"" + key + "\" (max_m, block_m, warps, warp_strips)");
      HM_REQUIRE(it->is_number_integer(), HM_ERROR_PARSE, where + "." + key + " must be an integer");
    }
    DenseRange r{INT64_MAX, {}};
    if (e.contains("max_m")) r.max_m = e["max_m"].get<int64_t>();
    r.tile.block_m = e.value("block_m", 16);
    r.tile.warps = e.value("warps", 4);
    r.tile.warp_strips = e.value("warp_strips", 1);
    HM_REQUIRE(r.max_m > 0, HM_ERROR_PARSE, where + ".max_m must be positive");
    HM_REQUIRE(r.tile.block_m >= 8 && r.tile.block_m <= 128 && r.tile.block_m % 8 == 0,
               HM_ERROR_PARSE, where + ".block_m must be a multiple of 8 in [8, 128]");
    HM_REQUIRE(r.tile.warps >= 1 && r.tile.warps <= 16, HM_ERROR_PARSE,
               where + ".warps must be in [1, 16]");
    HM_REQUIRE(r.tile.warp_strips >= 1 && r.tile.warp_strips <= 4, HM_ERROR_PARSE,
               where + ".warp_strips must be in [1, 4]");
    HM_REQUIRE(out.empty() || r.max_m > out.back().max_m, HM_ERROR_PARSE,
               where + ".max_m must be larger than the previous entry's");
    out.push_back(r);
  }
  out.back().max_m = INT64_MAX;
  return out;
}

const DenseTile& tile_for(const std::vector<DenseRange>& ranges, int64_t m) {
  for (const DenseRange& r : ranges)
    if (m <= r.max_m) return r.tile;
  return ranges.back().tile;
}

DenseLaunch plan_dense_launch(const DenseTile& tile, int64_t m, int64_t n_padded, int64_t k_padded,
                              int multiprocessors) {
  DenseLaunch l{};
  l.grid_x = (n_padded + tile.block_n() - 1) / tile.block_n();
  l.grid_y = (m + tile.block_m - 1) / tile.block_m;
  const int64_t k_chunks = k_padded / 64;
  const int64_t blocks = l.grid_x * l.grid_y;
  // Each warp keeps one weight chunk in flight, so a split's time is about its chunk count times
  // the memory latency: small grids split K until there are ~16 blocks per SM (at least 4 chunks
  // per split), and the f32 partials stay within 16 MiB.
  const int64_t want = std::max<int64_t>(1, (16 * multiprocessors + blocks - 1) / blocks);
  const int64_t by_k = std::max<int64_t>(1, std::min<int64_t>(32, k_chunks / 4));
  const int64_t by_workspace =
      std::max<int64_t>(1, (int64_t{16} << 20) / std::max<int64_t>(1, m * n_padded * 4));
  int64_t splits = blocks <= kSplitCounterSlots ? std::min({want, by_k, by_workspace}) : 1;
  l.k_chunks_per_split = static_cast<int>((k_chunks + splits - 1) / splits);
  l.splits = static_cast<int>((k_chunks + l.k_chunks_per_split - 1) / l.k_chunks_per_split);
  return l;
}

uint64_t dense_workspace_bytes(const DenseLaunch& l, int64_t m, int64_t n_padded) {
  if (l.splits <= 1) return 0;
  HM_REQUIRE(l.grid_x * l.grid_y <= kSplitCounterSlots, HM_ERROR_INTERNAL,
             "split-K launch with more tiles than counter slots");
  return kSplitCounterBytes + static_cast<uint64_t>(l.splits) * m * n_padded * sizeof(float);
}

}  // namespace hm::tune
