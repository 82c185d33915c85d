// Dense tiles: one table of fields (tune::dense_tile_fields) yields the tile's name, ==, its
// tuning JSON and its generated Config. The name is what logs, hm_plan_describe and the kernel's
// entry show, so two tiles that compile to different kernels must never share one (issue 15:
// blocks_per_sm, the wgmma kernel's __launch_bounds__ minimum, was left out).
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "gemm/family.hpp"
#include "gemm/dense_family.hpp"
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

// Every default wgmma tile (dense and MoE) fits blocks_per_sm blocks into an sm_90 SM's shared
// memory: the K splits are sized for that many blocks on every SM, and a block that cannot be
// resident runs in a second wave (8-bit weights on 8-bit activations overflowed: 4 x 75-83 KB
// at M <= 16; NOTES v34). The formats: each weight width on each activation width, with group,
// block and zero-point codes, and a MoE format of each.
TEST(DenseTileFit, EveryDefaultWgmmaTileFitsItsBlocksPerSm) {
  const core::Arch arch = core::parse_arch("sm_90a");
  int tiles = 0;
  for (const char* text :
       {"w=uint4b8 a=f16 c=f16 s=f16:g128 n=8192 k=8192", "w=uint8b128 a=f16 c=f16 s=f16:channel n=8192 k=8192",
        "w=uint4 a=bf16 c=bf16 s=bf16:g128 zp=bf16 n=4096 k=4096",
        "w=e2m1 a=e4m3 c=bf16 s=bf16:channel n=8192 k=8192",
        "w=e2m1 a=e4m3 c=bf16 s=e8m0:g32 n=8192 k=8192",
        "w=e4m3 a=e4m3 c=bf16 s=f32:channel n=8192 k=8192",
        "w=e4m3 a=e4m3 c=bf16 s=f32:b128x128 n=8192 k=8192",
        "w=e4m3 a=e4m3:g128 c=bf16 s=f32:b128x128 n=8192 k=8192",
        "w=uint8b128 a=int8 c=f16 s=f32:channel n=8192 k=8192",
        "w=uint8 a=int8 c=f16 s=f16:g128 zp=uint8 n=4096 k=4096",
        "w=uint4b8 a=int8 c=f16 s=f16:g128 n=8192 k=8192",
        "w=uint4b8 a=f16 c=f16 s=f16:g128 n=1536 k=2048 e=128",
        "w=e4m3 a=e4m3 c=bf16 s=f32:b128x128 n=4096 k=7168 e=256",
        "w=uint8b128 a=int8 c=f16 s=f32:channel n=1536 k=2048 e=128"}) {
    SCOPED_TRACE(text);
    const core::Format format = core::Format::parse(text);
    const gemm::Layer layer = gemm::make_layer(format, arch, "sm_90a", nullptr);
    for (const gemm::Family* family : gemm::families_for(format, arch)) {
      if (std::string(family->name()).find("wgmma") == std::string::npos) continue;
      for (const auto& [max_m, tile] : family->default_tiles(layer)) {
        const auto& t = dynamic_cast<const gemm::DenseTileOf&>(*tile).tile;
        EXPECT_TRUE(wgmma_blocks_fit(t, format))
            << family->name() << " M <= " << max_m << ": " << t.name() << " takes "
            << wgmma_smem_bytes(t, format) + kWgmmaBlockSmemOverhead << " bytes x "
            << t.blocks_per_sm << " blocks";
        ++tiles;
      }
    }
  }
  EXPECT_GT(tiles, 60);
}

// fit_wgmma_blocks takes stages first, then blocks; a tile that fits is left as it is.
TEST(DenseTileFit, StagesGoFirstThenBlocks) {
  const core::Format w8 = core::Format::parse("w=e4m3 a=e4m3 c=bf16 s=f32:channel n=8192 k=8192");
  DenseTile t;
  t.kernel = DenseKernel::kWgmma;
  t.block_m = 64;
  t.warps = 4;
  t.stages = 8;
  t.blocks_per_sm = 2;
  t.decoupled = t.tma = t.producer = true;
  fit_wgmma_blocks(t, w8);  // 2 x (8 x 16 KiB + ...) does not fit; 2 x (6 x 16 KiB + ...) does
  EXPECT_EQ(t.stages, 6);
  EXPECT_EQ(t.blocks_per_sm, 2);
  t.stages = 8;
  t.blocks_per_sm = 16;  // no stage count fits 16 blocks of 64 tokens
  fit_wgmma_blocks(t, w8);
  EXPECT_EQ(t.stages, 2);
  EXPECT_LT(t.blocks_per_sm, 16);
  EXPECT_TRUE(wgmma_blocks_fit(t, w8));
  DenseTile fits = t;
  fit_wgmma_blocks(fits, w8);
  EXPECT_EQ(fits, t);
  // The defaults for 8-bit weights on 8-bit activations: 4 stages at M <= 16, 6 at 33-64.
  const auto ranges = default_dense_ranges(w8, core::parse_arch("sm_90a"));
  ASSERT_GE(ranges.size(), 4u);
  EXPECT_EQ(ranges[0].tile.stages, 4);
  EXPECT_EQ(ranges[1].tile.stages, 4);
  EXPECT_EQ(ranges[3].tile.block_m, 64);
  EXPECT_EQ(ranges[3].tile.stages, 6);
}

}  // namespace
}  // namespace hm::tune
