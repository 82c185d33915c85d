// Real compiles of a small kernel built from the embedded headers, with NVRTC and with NVCC, for
// every architecture family we target, as CUBIN and as PTX.
#include "jit_test_support.hpp"

namespace hm::jit::test {
namespace {

struct Target {
  int compiler;  // HM_COMPILER_NVRTC / HM_COMPILER_NVCC
  const char* arch;
};

class CompileMatrix : public ::testing::TestWithParam<Target> {};

TEST_P(CompileMatrix, TinyKernelCompiles) {
  const Target t = GetParam();
  const auto compiler = require_compiler(t.compiler);
  const CompiledKernel k = compiler->compile(selftest_request(t.arch));
  ASSERT_FALSE(k.image.empty());
  EXPECT_NE(k.image.find(kSelftestSymbol), std::string::npos)
      << "the extern \"C\" entry point is missing";
  if (is_ptx_arch(t.arch)) {
    EXPECT_TRUE(k.is_ptx);
    const std::string target = std::string(".target sm_") + (t.arch + 8);  // compute_90 -> sm_90
    EXPECT_NE(k.image.find(target), std::string::npos) << target;
    EXPECT_NE(k.image.find(std::string(".entry ") + kSelftestSymbol), std::string::npos);
    EXPECT_EQ(k.image.find('\0'), std::string::npos) << "PTX text must not carry a NUL";
  } else {
    EXPECT_FALSE(k.is_ptx);
    EXPECT_TRUE(is_elf(k.image)) << "a CUBIN is an ELF file";
  }
}

std::string target_name(const ::testing::TestParamInfo<Target>& info) {
  return std::string(info.param.compiler == HM_COMPILER_NVRTC ? "nvrtc_" : "nvcc_") +
         info.param.arch;
}

INSTANTIATE_TEST_SUITE_P(Nvrtc, CompileMatrix,
                         ::testing::Values(Target{HM_COMPILER_NVRTC, "sm_75"},
                                           Target{HM_COMPILER_NVRTC, "sm_80"},
                                           Target{HM_COMPILER_NVRTC, "sm_90a"},
                                           Target{HM_COMPILER_NVRTC, "sm_100a"},
                                           Target{HM_COMPILER_NVRTC, "sm_120a"},
                                           Target{HM_COMPILER_NVRTC, "compute_90"}),
                         target_name);
INSTANTIATE_TEST_SUITE_P(
    Nvcc, CompileMatrix,
    ::testing::Values(Target{HM_COMPILER_NVCC, "sm_75"}, Target{HM_COMPILER_NVCC, "sm_80"},
                      Target{HM_COMPILER_NVCC, "sm_90a"}, Target{HM_COMPILER_NVCC, "sm_100a"},
                      Target{HM_COMPILER_NVCC, "sm_120a"}, Target{HM_COMPILER_NVCC, "compute_90"}),
    target_name);

// Both compilers, both errors: a syntax error and a missing header give HM_ERROR_COMPILE with
// the compiler's own diagnostics, the kernel name and the arch in the message.
class CompileErrors : public ::testing::TestWithParam<int> {};

TEST_P(CompileErrors, SyntaxErrorCarriesTheLog) {
  const auto compiler = require_compiler(GetParam());
  CompileRequest r = selftest_request("sm_80");
  r.name = "broken_kernel";
  r.source += "__global__ void broken() { int x = ; }\n";
  try {
    compiler->compile(r);
    FAIL() << "a syntax error compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_COMPILE);
    const std::string m = e.message();
    EXPECT_NE(m.find("broken_kernel"), std::string::npos) << m;
    EXPECT_NE(m.find("sm_80"), std::string::npos) << m;
    EXPECT_NE(m.find(compiler->id()), std::string::npos) << m;
    EXPECT_NE(m.find("expected an expression"), std::string::npos) << m;
    EXPECT_NE(m.find("broken_kernel.cu(4)"), std::string::npos)
        << "diagnostics name the file and line: " << m;
  }
}

TEST_P(CompileErrors, MissingHeaderIsACompileError) {
  const auto compiler = require_compiler(GetParam());
  CompileRequest r = selftest_request("sm_80");
  r.source = "#include <humming/no_such_header.cuh>\n";
  try {
    compiler->compile(r);
    FAIL() << "a missing header compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_COMPILE);
    EXPECT_NE(e.message().find("humming/no_such_header.cuh"), std::string::npos) << e.message();
  }
}

// Request options reach the compiler; warnings come back in the log.
TEST_P(CompileErrors, OptionsArePassedAndWarningsLogged) {
  const auto compiler = require_compiler(GetParam());
  CompileRequest r = selftest_request("sm_80");
  r.source +=
      "static_assert(HM_SELFTEST_VALUE == 3, \"option not passed\");\n"
      "__global__ void warns() { int never_used = 1; }\n";
  EXPECT_THROW(compiler->compile(r), Error);
  r.options = {"-DHM_SELFTEST_VALUE=3"};
  const CompiledKernel k = compiler->compile(r);
  EXPECT_NE(k.log.find("never_used"), std::string::npos) << k.log;
}

INSTANTIATE_TEST_SUITE_P(Compilers, CompileErrors,
                         ::testing::Values(HM_COMPILER_NVRTC, HM_COMPILER_NVCC),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(info.param == HM_COMPILER_NVRTC ? "nvrtc" : "nvcc");
                         });

TEST(CompileMatrix, MalformedArchIsRejectedBeforeCompiling) {
  const auto compiler = require_compiler(HM_COMPILER_NVRTC);
  try {
    compiler->compile(selftest_request("sm90"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_INVALID_ARGUMENT);
  }
}

}  // namespace
}  // namespace hm::jit::test
