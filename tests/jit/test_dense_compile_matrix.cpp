// The compile matrix of the dense GEMM kernels (mma.sync; wgmma on sm_90a): representative formats x every mma.sync arch,
// compiled with NVRTC, failing on local-memory spills (ptxas -v) in the kernel.
#include <algorithm>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/format.hpp"
#include "core/support.hpp"
#include "gemm/family.hpp"
#include "jit/codegen.hpp"
#include "jit/compiler.hpp"
#include "tune/dense.hpp"

namespace {

struct Case {
  const char* format;
  const char* arch;
};

// Weight widths and families, scale kinds, zero points, bias, both 16-bit activations.
const char* kFormats[] = {
    "w=uint4b8 a=f16 c=f16 s=f16:g128 n=4096 k=4096",
    "w=uint4b8 a=bf16 c=bf16 s=bf16:g128 n=4096 k=4096",
    "w=int8 a=f16 c=f16 s=f16:channel bias=1 n=4096 k=4096",
    "w=uint8b128 a=bf16 c=bf16 s=bf16:channel n=4096 k=4096",
    "w=uint3b4 a=f16 c=f16 s=f16:g64 n=4096 k=4096",
    "w=uint2b2 a=f16 c=f16 s=f16:g32 n=4096 k=4096",
    "w=uint4 a=f16 c=f16 s=f16:g128 zp=uint4 n=4096 k=4096",
    "w=uint4 a=bf16 c=bf16 s=bf16:g128 zp=bf16 n=4096 k=4096",
    "w=e2m1 a=bf16 c=bf16 s=ue8m0:g32 n=4096 k=4096",
    "w=e2m1 a=f16 c=f16 s=e4m3:g16+tensor n=4096 k=4096",
    "w=e4m3 a=bf16 c=bf16 s=bf16:channel n=4096 k=4096",
    "w=uint7b64 a=f16 c=f16 s=f16:g128 n=4096 k=4096",
    "w=uint5b16 a=bf16 c=f16 s=bf16:g128 n=4096 k=4100",
    "w=uint4b8 a=f16 c=f16 s=f16:g128 acc=f16 n=4096 k=4096",
    "w=uint4b8 a=f16 c=f16 s=f16:g48 n=4096 k=4096",
};
const char* kArchs[] = {"sm_75", "sm_80", "sm_86", "sm_89", "sm_90a", "sm_100a", "sm_120a"};
// Every sm_90a tile of these as well: the defaults pick wider tiles for layers of N >= 8192
// (src/tune/dense.cpp), and zero points need the most registers, in narrow and wide layers.
const char* kEveryTileOnSm90a[] = {
    "w=uint4b8 a=f16 c=f16 s=f16:g128 n=8192 k=8192",
    "w=uint4 a=bf16 c=bf16 s=bf16:g128 zp=bf16 n=8192 k=4096",
    "w=uint4 a=f16 c=f16 s=f16:g128 zp=uint4 n=4096 k=4096",
};

// Whether this process has already compiled (and checked) the request: formats that differ
// only in N or K, and the ranges that share one tile, generate the same kernel. It is checked
// once: NVRTC on the H200 host returned an empty log (no ptxas report) for a repeat of an
// identical program in one process (benchmarks/NOTES.md v23).
bool already_checked(const hm::jit::CompileRequest& request) {
  static std::set<std::string> seen;
  return !seen.insert(request.arch + '\n' + request.source).second;
}

TEST(DenseCompileMatrix, EveryFormatCompilesWithoutSpillsOnEveryArch) {
  auto compiler = hm::jit::make_compiler(HM_COMPILER_NVRTC);
  int compiled = 0;
  auto compile = [&](const char* text, const hm::core::Format& format, const char* arch_name,
                     const hm::tune::DenseRange& range) {
    auto kernel = hm::jit::dense_gemm_kernel(format, range.tile, format.k % 8 == 0, arch_name);
    if (already_checked(kernel.request)) {
      ++compiled;
      return;
    }
    kernel.request.options.push_back("--ptxas-options=-v");
    hm::jit::CompiledKernel out;
    try {
      out = compiler->compile(kernel.request);
    } catch (const hm::Error& e) {
      FAIL() << text << " on " << arch_name << ": " << e.message();
    }
    EXPECT_FALSE(out.image.empty());
    std::smatch spill;
    const std::regex spill_re("([0-9]+) bytes spill stores");
    ASSERT_TRUE(std::regex_search(out.log, spill, spill_re))
        << "no ptxas report in the log of " << kernel.request.name << ":\n" << out.log;
    EXPECT_EQ(spill[1], "0") << text << " on " << arch_name << " " << range.tile.name()
                             << " spills:\n" << out.log;
    // ptxas falls back to waiting after every wgmma when it cannot prove the asynchronous
    // pipeline safe; that would silently cost most of the kernel's overlap.
    EXPECT_EQ(out.log.find("serialized"), std::string::npos)
        << text << " on " << arch_name << " " << range.tile.name() << ":\n" << out.log;
    ++compiled;
  };
  for (const char* text : kFormats) {
    const auto format = hm::core::Format::parse(text);
    for (const char* arch_name : kArchs) {
      const auto arch = hm::core::parse_arch(arch_name);
      if (!hm::core::check(format, arch).empty()) continue;  // e.g. bf16 on sm_75
      // Every tile for the first two formats; the two largest tiles (the most registers: the
      // 16-warp tiles have 128 per thread) for the rest, to keep the matrix within CI's budget.
      auto ranges = hm::tune::default_dense_ranges(format, arch);
      if (text != kFormats[0] && text != kFormats[1])
        ranges.erase(ranges.begin(), ranges.end() - std::min<size_t>(2, ranges.size()));
      if (text != kFormats[0] && text != kFormats[1] && std::string(arch_name) != "sm_80" &&
          std::string(arch_name) != "sm_90a")
        continue;
      for (const auto& range : ranges) compile(text, format, arch_name, range);
    }
  }
  for (const char* text : kEveryTileOnSm90a) {
    const auto format = hm::core::Format::parse(text);
    for (const auto& range : hm::tune::default_dense_ranges(format, hm::core::parse_arch("sm_90a")))
      compile(text, format, "sm_90a", range);
  }
  EXPECT_GT(compiled, 40);
}

}  // namespace

// Every default tile of `text` on `arch` (whatever families the registry picks, each expected
// to be `family`) compiles without spills and without serialized wgmma; returns how many.
int expect_default_tiles_compile(const char* text, const char* family,
                                 const char* arch = "sm_90a") {
  auto compiler = hm::jit::make_compiler(HM_COMPILER_NVRTC);
  const auto format = hm::core::Format::parse(text);
  const auto layer = hm::gemm::make_layer(format, hm::core::parse_arch(arch), arch, nullptr);
  const auto ranges = hm::gemm::default_ranges(layer);
  EXPECT_FALSE(ranges.empty()) << text;
  int compiled = 0;
  for (const auto& range : ranges) {
    EXPECT_STREQ(range.family->name(), family) << text;
    auto kernel = range.family->generate(*range.tile, layer);
    if (already_checked(kernel.request)) {
      ++compiled;
      continue;
    }
    kernel.request.options.push_back("--ptxas-options=-v");
    hm::jit::CompiledKernel out;
    try {
      out = compiler->compile(kernel.request);
    } catch (const hm::Error& e) {
      ADD_FAILURE() << text << " " << range.tile->name() << ": " << e.message();
      continue;
    }
    std::smatch spill;
    const std::regex spill_re("([0-9]+) bytes spill stores");
    if (!std::regex_search(out.log, spill, spill_re)) {
      ADD_FAILURE() << "no ptxas report for " << text << ":\n" << out.log;
      continue;
    }
    EXPECT_EQ(spill[1], "0") << text << " " << range.tile->name() << " spills:\n" << out.log;
    EXPECT_EQ(out.log.find("serialized"), std::string::npos) << out.log;
    ++compiled;
  }
  return compiled;
}

// The indexed MoE family (gemm/sched.cuh on the wgmma kernel): every default tile compiles for
// sm_90a without spills, with zero points (the most registers) and without.
TEST(MoeGemmCompileMatrix, EveryDefaultTileCompilesWithoutSpills) {
  int compiled = 0;
  for (const char* text : {"w=uint4b8 a=bf16 c=bf16 s=bf16:g128 bias=1 n=1536 k=2048 e=128",
                           "w=uint4 a=f16 c=f16 s=f16:g128 zp=uint4 n=768 k=2048 e=8"})
    compiled += expect_default_tiles_compile(text, "moe_wgmma");
  EXPECT_EQ(compiled, 8);
}

// The mma.sync MoE family (moe_mma: gemm/dense_mma.cuh with sched.cuh's MoE schedules, rows of
// A gathered): every default tile compiles without spills on Turing (f16), Ampere (bf16 with
// zero points and a bias; int4 x int8; GPTQ g32 experts x int8, a partial set per group slot)
// and Ada (gpt-oss MXFP4 x e4m3, DeepSeek FP8 blocks with activation groups: the second
// accumulator set; GPTQ g64 experts x e4m3).
TEST(MoeGemmCompileMatrix, MmaSyncTilesCompileWithoutSpills) {
  int compiled = 0;
  compiled += expect_default_tiles_compile(
      "w=uint4b8 a=f16 c=f16 s=f16:g128 n=1536 k=2048 e=128", "moe_mma", "sm_75");
  for (const char* text : {"w=uint4 a=bf16 c=bf16 s=bf16:g128 zp=uint4 bias=1 n=2048 k=768 e=128",
                           "w=uint4b8 a=int8 c=f16 s=f16:g128 n=1536 k=2048 e=128",
                           "w=uint4b8 a=int8 c=f16 s=f16:g32 bias=1 n=2048 k=768 e=128"})
    compiled += expect_default_tiles_compile(text, "moe_mma", "sm_80");
  for (const char* text : {"w=e2m1 a=e4m3 c=bf16 s=ue8m0:g32+tensor bias=1 n=5760 k=2880 e=128",
                           "w=e4m3 a=e4m3:g128 c=bf16 s=f32:b128x128 n=4096 k=7168 e=256",
                           "w=uint4b8 a=e4m3 c=bf16 s=bf16:g64 n=1536 k=2048 e=128"})
    compiled += expect_default_tiles_compile(text, "moe_mma", "sm_89");
  EXPECT_EQ(compiled, 5 * 4 + 2 * 3);
}

// 8-bit activations on the MoE family: every default tile of the formats MoE serving runs with
// them (gpt-oss's MXFP4 experts with e4m3 and a bias, DeepSeek-V3's FP8 experts with 1 x 128
// activation groups and 128 x 128 weight blocks, GPTQ int4 g128 experts with int8) compiles for
// sm_90a without spills and without serialized wgmma.
TEST(MoeGemmCompileMatrix, EightBitActivationTilesCompileWithoutSpills) {
  int compiled = 0;
  for (const char* text : {"w=e2m1 a=e4m3 c=bf16 s=ue8m0:g32+tensor bias=1 n=5760 k=2880 e=128",
                           "w=e4m3 a=e4m3:g128 c=bf16 s=f32:b128x128 n=4096 k=7168 e=256",
                           "w=uint4b8 a=int8 c=f16 s=f16:g128 n=1536 k=2048 e=128",
                           // GPTQ g64 / g32 experts: a partial set per group slot (g32: the
                           // widest tile stays at 32 rows, tune::folded_group_token_cap)
                           "w=uint4b8 a=e4m3 c=bf16 s=bf16:g64 n=1536 k=2048 e=128",
                           "w=uint4b8 a=int8 c=f16 s=f16:g32 zp=none bias=1 n=2048 k=768 e=128"})
    compiled += expect_default_tiles_compile(text, "moe_wgmma");
  EXPECT_EQ(compiled, 20);
}

// 8-bit activations on the wgmma kernel (gemm/dequant_a8.cuh): every default tile compiles for
// sm_90a without spills and without serialized wgmma, for each way a weight becomes an 8-bit
// code (the activation's own type, a narrower float, an integer through f16) and both
// accumulators.
TEST(DenseA8CompileMatrix, EveryDefaultTileCompilesWithoutSpills) {
  int compiled = 0;
  for (const char* text : {"w=e4m3 a=e4m3 c=bf16 s=f32:channel n=8192 k=8192",
                           "w=e2m1 a=e4m3 c=bf16 s=bf16:channel bias=1 n=8192 k=8192",
                           "w=uint4b8 a=e4m3 c=f16 s=f16:channel n=4096 k=4096",
                           "w=e2m1 a=e5m2 c=f16 s=tensor acc=f16 n=4096 k=4096",
                           // group scales: a second accumulator set (the most registers)
                           "w=uint4b8 a=e4m3 c=bf16 s=bf16:g128 n=8192 k=8192",
                           "w=e4m3 a=e4m3 c=bf16 s=bf16:g256+tensor bias=1 n=4096 k=4096",
                           "w=e4m3 a=e4m3 c=bf16 s=f32:b128x128 n=4096 k=4096",
                           // ue8m0 group x tensor in the weights' exponents (MXFP4): 4 slots
                           // per step, no second accumulator set, 256-token tiles
                           "w=e2m1 a=e4m3 c=bf16 s=ue8m0:g32+tensor n=8192 k=8192"})
    compiled += expect_default_tiles_compile(text, "dense_wgmma");
  EXPECT_GE(compiled, 8 * 7);
}

// Per-token x K-group activation scales (a=<dtype>:g<K>, folded with the group's sums in f32):
// alone (channel weights), with block and group weight scales of the same and of a smaller
// group, with the weights' exponent window (MXFP4), and on int8.
TEST(DenseA8CompileMatrix, ActivationGroupTilesCompileWithoutSpills) {
  int compiled = 0;
  for (const char* text : {"w=e4m3 a=e4m3:g128 c=bf16 s=f32:b128x128 n=7168 k=7168",
                           "w=e2m1 a=e4m3:g128 c=bf16 s=bf16:channel n=8192 k=8192",
                           "w=uint4b8 a=e4m3:g256 c=bf16 s=bf16:g128 n=4096 k=4096",
                           "w=e2m1 a=e4m3:g128 c=bf16 s=ue8m0:g32+tensor n=4096 k=4096",
                           "w=uint4b8 a=int8:g128 c=bf16 s=bf16:channel n=4096 k=4096"})
    compiled += expect_default_tiles_compile(text, "dense_wgmma");
  EXPECT_GE(compiled, 5 * 7);
}

// int8 activations on the wgmma kernel (s8 x s8 into s32, gemm/dense_wgmma.cuh): every default
// tile compiles for sm_90a without spills, for each way an integer weight becomes an int8 lane
// (4-bit biased, 8-bit biased: the xor alone, 2-bit biased, unsigned without a zero point) and
// each place the s32 sums turn into f32 (before the epilogue; per K group at the fold, with the
// second accumulator set: the most registers; block scales read from global memory).
TEST(DenseA8CompileMatrix, Int8EveryDefaultTileCompilesWithoutSpills) {
  int compiled = 0;
  for (const char* text : {"w=uint4b8 a=int8 c=bf16 s=bf16:channel n=8192 k=8192",
                           "w=uint8b128 a=int8 c=bf16 s=f32:channel bias=1 n=8192 k=8192",
                           "w=uint2b2 a=int8 c=f16 s=tensor n=2560 k=6912",
                           "w=uint4 a=int8 c=f16 s=none n=4096 k=4096",
                           "w=uint4b8 a=int8 c=bf16 s=bf16:g128 n=8192 k=8192",
                           "w=uint8b128 a=int8 c=bf16 s=f32:b128x128 n=4096 k=4096"})
    compiled += expect_default_tiles_compile(text, "dense_wgmma");
  EXPECT_GE(compiled, 6 * 7);
}

// Float weights on int8 activations (rule R11, gemm/dequant_a8.cuh: counts of the weight's least
// step): every default tile of both kernels compiles without spills, for the 4-bit byte table
// (channel scales; f32 group folds: the second accumulator set), the same table shifted by ue8m0
// group exponents (MXFP4 -> INT8, with the rows' poison marks; with activation groups too), and
// the f16 path of wider floats (e2m3, MXFP6's element); mma.sync on Turing and Ampere; the MoE
// family with gpt-oss's MXFP4 experts.
TEST(DenseA8CompileMatrix, FloatWeightsOnInt8CompileWithoutSpills) {
  int compiled = 0;
  for (const char* text : {"w=e2m1 a=int8 c=bf16 s=bf16:channel n=8192 k=8192",
                           "w=e2m1 a=int8 c=bf16 s=bf16:g128 bias=1 n=8192 k=8192",
                           "w=e2m1 a=int8 c=bf16 s=ue8m0:g32+tensor n=8192 k=8192",
                           "w=e2m1 a=int8:g128 c=bf16 s=ue8m0:g32+tensor n=4096 k=4096",
                           "w=e2m3 a=int8 c=f16 s=f16:channel n=4096 k=4096"})
    compiled += expect_default_tiles_compile(text, "dense_wgmma");
  for (const char* text : {"w=e2m1 a=int8 c=bf16 s=bf16:channel n=8192 k=8192",
                           "w=e2m1 a=int8 c=bf16 s=ue8m0:g32+tensor n=8192 k=8192",
                           "w=e2m3 a=int8 c=f16 s=f16:channel n=4096 k=4096"})
    compiled += expect_default_tiles_compile(text, "dense_mma", "sm_80");
  compiled += expect_default_tiles_compile("w=e2m1 a=int8 c=f16 s=ue8m0:g32+tensor n=4096 k=4096",
                                           "dense_mma", "sm_75");
  compiled += expect_default_tiles_compile(
      "w=e2m1 a=int8 c=bf16 s=ue8m0:g32+tensor bias=1 n=5760 k=2880 e=128", "moe_wgmma");
  EXPECT_GE(compiled, 5 * 7 + 4 * 3 + 4);
}

// Group scales of 32 and 64 k on 8-bit activations (GPTQ g32 / g64 W4A8): both kernels fold
// every step, one partial set per group slot (GroupFold::kSets; wgmma tiles capped at 32 / 64
// tokens, mma.sync one token group's sets at a time). Every default tile compiles without
// spills: e4m3 and int8, group x tensor, integer zero points per group, activation groups on
// top; on mma.sync for the first arch each runs on (fp8: sm_89, int8: sm_80).
TEST(DenseA8CompileMatrix, SmallGroupFoldTilesCompileWithoutSpills) {
  int compiled = 0;
  for (const char* text : {"w=uint4b8 a=e4m3 c=bf16 s=bf16:g64 n=8192 k=8192",
                           "w=uint4b8 a=e4m3 c=bf16 s=bf16:g32 n=8192 k=8192",
                           "w=uint4b8 a=int8 c=bf16 s=bf16:g32 n=8192 k=8192",
                           "w=e2m1 a=e4m3 c=bf16 s=bf16:g32+tensor n=4096 k=4096",
                           "w=uint4 zp=uint4 a=e4m3 c=f16 s=f16:g64 n=4096 k=4096",
                           "w=uint4b8 a=e4m3:g128 c=bf16 s=bf16:g32 n=4096 k=4096"})
    compiled += expect_default_tiles_compile(text, "dense_wgmma");
  EXPECT_GE(compiled, 6 * 4);
  int mma = 0;
  for (const char* text : {"w=uint4b8 a=e4m3 c=bf16 s=bf16:g64 n=8192 k=8192",
                           "w=uint4b8 a=e4m3 c=bf16 s=bf16:g32 n=8192 k=8192",
                           "w=e2m1 a=e4m3 c=bf16 s=bf16:g32+tensor n=4096 k=4096",
                           "w=uint4 zp=uint4 a=e4m3 c=f16 s=f16:g64 n=4096 k=4096",
                           "w=uint4b8 a=e4m3:g128 c=bf16 s=bf16:g32 n=4096 k=4096"})
    mma += expect_default_tiles_compile(text, "dense_mma", "sm_89");
  mma += expect_default_tiles_compile("w=uint4b8 a=int8 c=bf16 s=bf16:g32 n=8192 k=8192",
                                      "dense_mma", "sm_80");
  EXPECT_GE(mma, 6 * 2);
}

// 8-bit activations on the mma.sync kernel (m16n8k32, gemm/dense_mma.cuh): every default tile
// compiles without spills on the first arch each runs on (fp8: sm_89, Ada; int8: sm_80, Ampere),
// for each way a weight becomes an 8-bit code, the fold of group scales (the second set of
// accumulators: the most registers), activation groups, and the exponent window (MXFP4).
TEST(DenseA8CompileMatrix, MmaSyncTilesCompileWithoutSpills) {
  int compiled = 0;
  for (const char* text : {"w=e4m3 a=e4m3 c=bf16 s=f32:channel n=8192 k=8192",
                           "w=e2m1 a=e4m3 c=bf16 s=bf16:channel bias=1 n=8192 k=8192",
                           "w=uint4b8 a=e5m2 c=f16 s=tensor n=4096 k=4096",
                           "w=uint4b8 a=e4m3 c=bf16 s=bf16:g128 n=8192 k=8192",
                           "w=e4m3 a=e4m3:g128 c=bf16 s=f32:b128x128 n=7168 k=7168",
                           "w=e2m1 a=e4m3 c=bf16 s=ue8m0:g32+tensor n=8192 k=8192"})
    compiled += expect_default_tiles_compile(text, "dense_mma", "sm_89");
  for (const char* text : {"w=uint4b8 a=int8 c=bf16 s=bf16:channel n=8192 k=8192",
                           "w=uint8b128 a=int8 c=f16 s=f32:channel bias=1 n=4096 k=4096",
                           "w=uint4b8 a=int8 c=bf16 s=bf16:g128 n=8192 k=8192",
                           "w=uint4b8 a=int8:g128 c=bf16 s=bf16:channel n=4096 k=4096"})
    compiled += expect_default_tiles_compile(text, "dense_mma", "sm_80");
  // Turing: int8 through four m8n8k16 per m16n8k32 (ptx::mma_s8_16832), f16 outputs (bf16
  // needs sm_80, rule R25).
  for (const char* text : {"w=uint4b8 a=int8 c=f16 s=f16:channel n=4096 k=4096",
                           "w=uint4b8 a=int8 c=f16 s=f16:g128 n=4096 k=4096"})
    compiled += expect_default_tiles_compile(text, "dense_mma", "sm_75");
  EXPECT_EQ(compiled, 12 * 3);
}

// Integer zero points with 8-bit activations (gemm/dequant_a8.cuh: q - z in the weights'
// conversion, one term per row and group slot): every default tile of both kernels compiles
// without spills, with the group fold (the most registers) on e4m3 and int8, and per-channel
// zero points on 7-bit weights (the widest int8 lanes hold).
TEST(DenseA8CompileMatrix, ZeroPointTilesCompileWithoutSpills) {
  int compiled = 0;
  for (const char* text : {"w=uint4 zp=uint4 a=e4m3 c=bf16 s=bf16:g128 n=8192 k=8192",
                           "w=uint4 zp=uint4 a=int8 c=f16 s=f16:g128 bias=1 n=4096 k=4096",
                           "w=uint7 zp=uint7 a=int8 c=f16 s=f16:channel n=4096 k=4096"})
    compiled += expect_default_tiles_compile(text, "dense_wgmma");
  compiled += expect_default_tiles_compile(
      "w=uint4 zp=uint4 a=e4m3 c=bf16 s=bf16:g128 n=8192 k=8192", "dense_mma", "sm_89");
  compiled += expect_default_tiles_compile(
      "w=uint4 zp=uint4 a=int8 c=f16 s=f16:g128 bias=1 n=4096 k=4096", "dense_mma", "sm_80");
  EXPECT_GE(compiled, 3 * 7 + 2 * 3);
}
