// Dense tiles: one table of fields (tune::dense_tile_fields) yields the tile's name, ==, its
// tuning JSON and its generated Config. The name is what logs, hm_plan_describe and the kernel's
// entry show, so two tiles that compile to different kernels must never share one (issue 15:
// blocks_per_sm, the wgmma kernel's __launch_bounds__ minimum, was left out).
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "gemm/family.hpp"
#include "tune/dense.hpp"

namespace hm::tune {
namespace {

TEST(DenseTileName, EveryWgmmaFieldShows) {
  const auto ranges = gemm::parse_ranges(
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
  for (const auto& r : ranges) names.insert(r.tile->name());
  EXPECT_EQ(names.size(), ranges.size()) << "two different tiles share a name";
  EXPECT_EQ(ranges[1].tile->name(), "wg_bm64_w4_st4_b2");
  EXPECT_EQ(ranges[5].tile->name(), "wg_bm64_w4_st4_b1_mb_tma_pw");
}

TEST(DenseTileName, MmaNamesTheFieldsItCompiles) {
  const auto ranges = gemm::parse_ranges(
      R"({"dense": [{"max_m": 1, "block_m": 32, "warps": 8, "warp_strips": 2},
                    {"kernel": "mma", "block_m": 32, "warps": 8, "warp_strips": 2,
                     "blocks_per_sm": 4}]})");
  EXPECT_EQ(ranges[0].tile->name(), "bm32_w8_s2");
  // blocks_per_sm only sizes split-K for mma.sync: different tiles, one kernel, one name.
  EXPECT_FALSE(ranges[0].tile->same(*ranges[1].tile));
  EXPECT_EQ(ranges[1].tile->name(), "bm32_w8_s2");
}

// Every default tile of every arch family, written as JSON and parsed back, is the same tile.
TEST(DenseTileJson, EveryDefaultTileRoundTrips) {
  int tiles = 0;
  for (const char* text : {"w=uint4b8 a=f16 c=f16 s=f16:g128 n=8192 k=8192",
                           "w=uint4b8 a=f16 c=f16 s=f16:g128 n=4096 k=4096",
                           "w=uint4 a=bf16 c=bf16 s=bf16:g128 zp=bf16 n=4096 k=4096",
                           "w=uint4b8 a=f16 c=f16 s=f16:g48 n=4096 k=4096"}) {
    const auto format = core::Format::parse(text);
    for (const char* arch : {"sm_80", "sm_90a"}) {
      for (const auto& r : default_dense_ranges(format, core::parse_arch(arch))) {
        const std::string json = "{\"dense\": [" + r.tile.json() + "]}";
        const auto back = gemm::parse_ranges(json);
        ASSERT_EQ(back.size(), 1u);
        EXPECT_EQ(back[0].tile->json(), r.tile.json()) << json;
        EXPECT_EQ(back[0].tile->name(), r.tile.name()) << json;
        ++tiles;
      }
    }
  }
  EXPECT_GT(tiles, 20);
}

// The generated Config holds one constant per compiled field, in the table's order.
TEST(DenseTileConfig, OneConstantPerCompiledField) {
  DenseTile mma;
  EXPECT_EQ(mma.config(),
            "  static constexpr int kBlockM = 16;\n  static constexpr int kWarps = 4;\n"
            "  static constexpr int kWarpStrips = 1;\n");
  const auto wg = gemm::parse_ranges(
      R"({"dense": [{"kernel": "wgmma", "block_m": 8, "stages": 6, "blocks_per_sm": 3,
                     "split": "cluster"}]})");
  const std::string config = "{\"dense\": [" + wg[0].tile->json() + "]}";
  EXPECT_NE(config.find("\"split\":\"cluster\""), std::string::npos) << config;
}

TEST(DenseTileJson, WgmmaKeysAreRefusedForMma) {
  for (const char* json : {R"({"dense": [{"kernel": "mma", "pipeline": "mbarrier"}]})",
                           R"({"dense": [{"kernel": "mma", "stages": 4}]})",
                           R"({"dense": [{"kernel": "wgmma", "warps": 6}]})",
                           R"({"dense": [{"kernel": "wgmma", "block_m": 12}]})",
                           R"({"dense": [{"kernel": "tcgen05"}]})"}) {
    try {
      gemm::parse_ranges(json);
      ADD_FAILURE() << "accepted " << json;
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), HM_ERROR_PARSE) << json;
    }
  }
}

}  // namespace
}  // namespace hm::tune
