// The MoE routing kernels (kernels/humming/moe/routing.cuh) compile with NVRTC for sm_75, sm_80
// and sm_90a, without local-memory spills, and each image holds its entry point; so does the MoE
// GEMM with the grouped schedules (gemm/sched.cuh) on sm_90a.
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "core/arch.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/format.hpp"
#include "gemm/family.hpp"
#include "jit/codegen_moe.hpp"
#include "jit/compiler.hpp"

namespace {

const char* kArchs[] = {"sm_75", "sm_80", "sm_90a"};

void expect_compiles_without_spills(const hm::jit::Compiler& compiler, hm::jit::GeneratedKernel k) {
  k.request.options.push_back("--ptxas-options=-v");
  hm::jit::CompiledKernel out;
  try {
    out = compiler.compile(k.request);
  } catch (const hm::Error& e) {
    ADD_FAILURE() << k.request.name << " on " << k.request.arch << ": " << e.message();
    return;
  }
  EXPECT_NE(out.image.find(k.entry), std::string::npos) << k.entry << " missing on "
                                                        << k.request.arch;
  const std::regex spill_re("([0-9]+) bytes spill stores");
  int reports = 0;
  for (std::sregex_iterator it(out.log.begin(), out.log.end(), spill_re), end; it != end; ++it) {
    ++reports;
    EXPECT_EQ((*it)[1], "0") << k.request.name << " on " << k.request.arch << " spills:\n"
                             << out.log;
  }
  EXPECT_GT(reports, 0) << "no ptxas report in the log of " << k.request.name << ":\n" << out.log;
}

TEST(MoeCompileMatrix, AlignAndReduceCompileForEveryArch) {
  auto compiler = hm::jit::make_compiler(HM_COMPILER_NVRTC);
  for (const char* arch : kArchs) {
    expect_compiles_without_spills(*compiler, hm::jit::moe_align_kernel(arch));
    for (hm_dtype_t d : {HM_DTYPE_F16, HM_DTYPE_BF16})
      for (int vec : {8, 1})
        expect_compiles_without_spills(
            *compiler, hm::jit::moe_reduce_kernel(hm::core::Dtype::from_code(d), vec, arch));
  }
}

TEST(MoeCompileMatrix, ReduceRefusesOtherDtypes) {
  try {
    hm::jit::moe_reduce_kernel(hm::core::Dtype::from_code(HM_DTYPE_F32), 8, "sm_80");
    ADD_FAILURE() << "f32 accepted";
  } catch (const hm::Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_UNSUPPORTED);
  }
}

// The grouped modes (HM_ARG_MOE_MODE) are a runtime field of the MoE GEMM's parameter, so the
// kernel a plan compiles once runs all three: every default tile of the Qwen3-30B-A3B down
// projection (with zero points and a bias: the most registers) compiles without spills.
TEST(MoeCompileMatrix, GroupedModesCompileWithoutSpills) {
  auto compiler = hm::jit::make_compiler(HM_COMPILER_NVRTC);
  const auto format =
      hm::core::Format::parse("w=uint4 a=bf16 c=bf16 s=bf16:g128 zp=uint4 bias=1 n=2048 k=768 e=128");
  const auto layer = hm::gemm::make_layer(format, hm::core::parse_arch("sm_90a"), "sm_90a", nullptr);
  const auto ranges = hm::gemm::default_ranges(layer);
  ASSERT_EQ(ranges.size(), 4u);
  for (const auto& range : ranges) {
    EXPECT_STREQ(range.family->name(), "moe_wgmma");
    expect_compiles_without_spills(*compiler, range.family->generate(*range.tile, layer));
  }
}

// MoE tiles with TMA: the weights and codes come as tensor boxes over every expert and the
// copying warp's 32 lanes gather the rows of A with cp.async (gemm/wgmma_stage_copier.cuh,
// kWarpGathers). Every such tile of the sweep (8 to 32 rows: at most 8 rows per lane) compiles
// without spills, 16-bit and 8-bit activations, with zero points; a tile without the copying
// warp, and one of more rows than the warp gathers, are refused by name.
TEST(MoeCompileMatrix, CopyingWarpTilesGatherRowsAndCompileWithoutSpills) {
  auto compiler = hm::jit::make_compiler(HM_COMPILER_NVRTC);
  const auto arch = hm::core::parse_arch("sm_90a");
  const char* formats[] = {
      "w=uint4b8 a=f16 c=f16 s=f16:g128 zp=none n=1536 k=2048 e=128",
      "w=uint4 a=bf16 c=bf16 s=bf16:g128 zp=uint4 bias=1 n=2048 k=768 e=128",
      "w=uint4b8 a=e4m3 c=bf16 s=f32:g128 zp=none n=512 k=1024 e=8",
  };
  const char* tiles[] = {
      R"({"dense": [{"kernel": "moe_wgmma", "block_m": 8, "stages": 8, "blocks_per_sm": 4,
                     "pipeline": "mbarrier", "copy": "tma", "producer": true,
                     "split": "cluster"}]})",
      R"({"dense": [{"kernel": "moe_wgmma", "block_m": 32, "warps": 8, "stages": 6,
                     "blocks_per_sm": 2, "pipeline": "mbarrier", "copy": "tma",
                     "producer": true, "dequant_ahead": true, "split": "cluster"}]})",
  };
  for (const char* text : formats) {
    const auto layer =
        hm::gemm::make_layer(hm::core::Format::parse(text), arch, "sm_90a", nullptr);
    for (const char* json : tiles) {
      const auto ranges = hm::gemm::parse_ranges(json);
      ASSERT_EQ(ranges.size(), 1u);
      const auto& range = ranges[0];
      range.family->check_tile(*range.tile, layer);
      expect_compiles_without_spills(*compiler, range.family->generate(*range.tile, layer));
    }
  }
  const auto layer =
      hm::gemm::make_layer(hm::core::Format::parse(formats[0]), arch, "sm_90a", nullptr);
  const std::pair<const char*, const char*> refused[] = {
      {R"({"dense": [{"kernel": "moe_wgmma", "block_m": 8, "stages": 8,
                      "pipeline": "mbarrier", "copy": "tma"}]})",
       "needs \"producer\": true"},
      {R"({"dense": [{"kernel": "moe_wgmma", "block_m": 40, "stages": 8,
                      "pipeline": "mbarrier", "copy": "tma", "producer": true}]})",
       "at most 8 rows per thread"},
  };
  for (const auto& [json, why] : refused) {
    const auto ranges = hm::gemm::parse_ranges(json);
    ASSERT_EQ(ranges.size(), 1u);
    try {
      ranges[0].family->check_tile(*ranges[0].tile, layer);
      ADD_FAILURE() << "accepted: " << json;
    } catch (const hm::Error& e) {
      EXPECT_EQ(e.status(), HM_ERROR_UNSUPPORTED);
      EXPECT_NE(e.message().find(why), std::string::npos) << e.message();
    }
  }
}

}  // namespace
