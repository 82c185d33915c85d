// The compile matrix of the GPU packer (kernels/humming/layout/pack_kernel.cuh): weight widths x
// activation widths x arch, compiled with NVRTC, failing on local-memory spills (ptxas -v) — the
// words of a lane must stay in registers, which needs every loop over the spec unrolled.
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "jit/codegen_pack.hpp"
#include "jit/compiler.hpp"

namespace {

const char* kArchs[] = {"sm_75", "sm_80", "sm_90a", "sm_120a"};

// Compiles one generated kernel with ptxas's report and checks it has no spills. Returns the
// image so callers can check which entries it holds.
std::string compile_without_spills(const hm::jit::Compiler& compiler, hm::jit::GeneratedKernel k) {
  k.request.options.push_back("--ptxas-options=-v");
  hm::jit::CompiledKernel out;
  try {
    out = compiler.compile(k.request);
  } catch (const hm::Error& e) {
    ADD_FAILURE() << k.request.name << " on " << k.request.arch << ": " << e.message();
    return "";
  }
  EXPECT_FALSE(out.image.empty()) << k.request.name << " on " << k.request.arch;
  const std::regex spill_re("([0-9]+) bytes spill stores");
  int reports = 0;
  for (std::sregex_iterator it(out.log.begin(), out.log.end(), spill_re), end; it != end; ++it) {
    ++reports;
    EXPECT_EQ((*it)[1], "0") << k.request.name << " on " << k.request.arch << " spills:\n"
                             << out.log;
  }
  EXPECT_GT(reports, 0) << "no ptxas report in the log of " << k.request.name << ":\n" << out.log;
  return out.image;
}

// Every (b, a) pair the layout defines on sm_80 (the packer's code does not depend on the arch
// beyond the stores); a spread of widths on the other archs.
TEST(PackCompileMatrix, WeightPackerCompilesForEveryWidthWithoutSpills) {
  auto compiler = hm::jit::make_compiler(HM_COMPILER_NVRTC);
  int compiled = 0;
  for (const char* arch : kArchs) {
    const bool every = std::string(arch) == "sm_80";
    for (int a : {16, 8, 4}) {
      for (int b = 1; b <= 8 && b <= a; ++b) {
        if (!every && !((a == 16 && (b == 1 || b == 3 || b == 4 || b == 7 || b == 8)) ||
                        (a == 8 && b == 5) || (a == 4 && b == 2)))
          continue;
        const auto k = hm::jit::pack_weight_kernel(b, a, arch);
        const std::string image = compile_without_spills(*compiler, k);
        EXPECT_NE(image.find(k.entry), std::string::npos) << k.entry << " missing on " << arch;
        ++compiled;
      }
    }
  }
  EXPECT_EQ(compiled, 20 + 3 * 7);
}

TEST(PackCompileMatrix, SideKernelsCompileOnEveryArch) {
  auto compiler = hm::jit::make_compiler(HM_COMPILER_NVRTC);
  for (const char* arch : kArchs) {
    const std::string image = compile_without_spills(*compiler, hm::jit::pack_side_kernels(arch));
    for (int bytes : {1, 2, 4})
      EXPECT_NE(image.find(hm::jit::pack_side_entry(bytes)), std::string::npos)
          << hm::jit::pack_side_entry(bytes) << " missing on " << arch;
  }
}

TEST(PackCompileMatrix, PairsOutsideTheLayoutAreRefused) {
  for (auto [b, a] : {std::pair{5, 4}, {0, 16}, {9, 16}, {4, 32}, {2, 2}}) {
    try {
      hm::jit::pack_weight_kernel(b, a, "sm_80");
      ADD_FAILURE() << "b=" << b << " a=" << a << " was accepted";
    } catch (const hm::Error& e) {
      EXPECT_EQ(e.status(), HM_ERROR_UNSUPPORTED_FORMAT) << e.message();
    }
  }
}

}  // namespace
