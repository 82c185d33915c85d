// The MoE routing kernels (kernels/humming/moe/routing.cuh) compile with NVRTC for sm_75, sm_80
// and sm_90a, without local-memory spills, and each image holds its entry point.
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "core/dtype.hpp"
#include "core/error.hpp"
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

}  // namespace
