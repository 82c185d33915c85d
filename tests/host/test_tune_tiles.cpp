// Tile names: the name is what logs, hm_plan_describe and the kernel's entry show, so two tiles
// that compile to different kernels must never share one (issue 15: blocks_per_sm, the wgmma
// kernel's __launch_bounds__ minimum, was left out).
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "tune/dense.hpp"

namespace hm::tune {
namespace {

TEST(DenseTileName, EveryWgmmaFieldShows) {
  const auto ranges = parse_dense_ranges(
      R"({"dense": [{"max_m": 1, "kernel": "wgmma", "block_m": 64, "stages": 4},
                    {"max_m": 2, "kernel": "wgmma", "block_m": 64, "stages": 4, "blocks_per_sm": 2},
                    {"max_m": 3, "kernel": "wgmma", "block_m": 64, "stages": 4, "pipeline": "mbarrier"},
                    {"max_m": 4, "kernel": "wgmma", "block_m": 64, "stages": 4, "dequant_ahead": true},
                    {"max_m": 5, "kernel": "wgmma", "block_m": 64, "stages": 4, "pipeline": "mbarrier",
                     "copy": "tma"},
                    {"max_m": 6, "kernel": "wgmma", "block_m": 64, "stages": 4, "pipeline": "mbarrier",
                     "copy": "tma", "producer": true},
                    {"max_m": 7, "kernel": "wgmma", "block_m": 64, "stages": 4, "split": "cluster"},
                    {"max_m": 8, "kernel": "wgmma", "block_m": 64, "stages": 3},
                    {"max_m": 9, "kernel": "wgmma", "block_m": 64, "warps": 8, "stages": 4},
                    {"kernel": "wgmma", "block_m": 32, "stages": 4}]})");
  std::set<std::string> names;
  for (const auto& r : ranges) names.insert(r.tile.name());
  EXPECT_EQ(names.size(), ranges.size()) << "two different tiles share a name";
  EXPECT_EQ(ranges[1].tile.name(), "wg_bm64_w4_st4_b2");
}

}  // namespace
}  // namespace hm::tune
