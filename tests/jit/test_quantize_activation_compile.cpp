// The compile matrix of the GPU activation quantizer (kernels/humming/quant/activation_kernel.cuh):
// every (input, output) dtype pair on sm_75, sm_80 and sm_90a with NVRTC, failing on local-memory
// spills (the pass's values must stay in registers), and the pairs the codegen refuses.
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "jit/codegen_quant.hpp"
#include "jit/compiler.hpp"

namespace {

using hm::core::Dtype;

TEST(QuantizeActivationCompile, EveryPairCompilesWithoutSpills) {
  auto compiler = hm::jit::make_compiler(HM_COMPILER_NVRTC);
  const std::regex spill_re("([0-9]+) bytes spill stores");
  for (const char* arch : {"sm_75", "sm_80", "sm_90a"}) {
    for (const char* in : {"f16", "bf16"}) {
      for (const char* out : {"e4m3", "e5m2", "int8"}) {
        // Every pair on sm_80; one per input dtype elsewhere (the code does not depend on the
        // arch), to keep the suite inside the compile budget.
        if (std::string(arch) != "sm_80" && std::string(out) != (in[0] == 'f' ? "e4m3" : "int8"))
          continue;
        hm::jit::GeneratedKernel k =
            hm::jit::quantize_activation_kernel(Dtype::parse(in), Dtype::parse(out), arch);
        k.request.options.push_back("--ptxas-options=-v");
        SCOPED_TRACE(k.request.name + " on " + arch);
        hm::jit::CompiledKernel compiled;
        try {
          compiled = compiler->compile(k.request);
        } catch (const hm::Error& e) {
          ADD_FAILURE() << e.message();
          continue;
        }
        EXPECT_NE(compiled.image.find(k.entry), std::string::npos) << k.entry << " missing";
        int reports = 0;
        for (std::sregex_iterator it(compiled.log.begin(), compiled.log.end(), spill_re), end;
             it != end; ++it) {
          ++reports;
          EXPECT_EQ((*it)[1], "0") << "spills:\n" << compiled.log;
        }
        EXPECT_GT(reports, 0) << "no ptxas report:\n" << compiled.log;
      }
    }
  }
}

TEST(QuantizeActivationCompile, OtherPairsAreRefused) {
  for (auto [in, out] : {std::pair{"f32", "e4m3"}, {"e4m3", "e4m3"}, {"f16", "int4"},
                         {"bf16", "e2m1"}, {"f16", "uint8"}, {"f16", "f16"}}) {
    try {
      hm::jit::quantize_activation_kernel(Dtype::parse(in), Dtype::parse(out), "sm_80");
      ADD_FAILURE() << in << " -> " << out << " was accepted";
    } catch (const hm::Error& e) {
      EXPECT_EQ(e.status(), HM_ERROR_UNSUPPORTED_FORMAT) << e.message();
      EXPECT_NE(e.message().find(std::string(in) == "f16" || std::string(in) == "bf16" ? out : in),
                std::string::npos)
          << e.message();
    }
  }
}

}  // namespace
