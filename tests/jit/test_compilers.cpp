// Finding and choosing compilers: probes, HUMMING_COMPILER, HUMMING_NVRTC_PATH, HUMMING_NVCC,
// the NVRTC -> NVCC fallback, and errors that list every place tried.
#include <sys/stat.h>

#include "jit_test_support.hpp"

namespace hm::jit::test {
namespace {

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

TEST(Compilers, ProbesFindTheToolkit) {
  const CompilerProbe nvrtc = probe_nvrtc();
  ASSERT_TRUE(nvrtc.found) << nvrtc.error;
  EXPECT_TRUE(file_exists(nvrtc.path)) << nvrtc.path;
  EXPECT_GE(nvrtc.version_code, 12000);
  EXPECT_EQ(nvrtc.version_code,
            std::stoi(nvrtc.version) * 1000 +
                std::stoi(nvrtc.version.substr(nvrtc.version.find('.') + 1)) * 10);
  const CompilerProbe nvcc = probe_nvcc();
  ASSERT_TRUE(nvcc.found) << nvcc.error;
  EXPECT_TRUE(file_exists(nvcc.path)) << nvcc.path;
  EXPECT_GE(nvcc.version_code, 12000);
  EXPECT_EQ(std::count(nvcc.version.begin(), nvcc.version.end(), '.'), 2) << nvcc.version;
}

TEST(Compilers, IdsNameCompilerAndVersion) {
  const auto nvrtc = require_compiler(HM_COMPILER_NVRTC);
  EXPECT_EQ(nvrtc->id(), "nvrtc " + probe_nvrtc().version);
  EXPECT_EQ(nvrtc->path(), probe_nvrtc().path);
  const auto nvcc = require_compiler(HM_COMPILER_NVCC);
  EXPECT_EQ(nvcc->id(), "nvcc " + probe_nvcc().version);
}

TEST(Compilers, EnvironmentChoosesTheDefault) {
  {
    EnvGuard choice("HUMMING_COMPILER", "nvcc");
    EXPECT_EQ(make_compiler(HM_COMPILER_DEFAULT)->id().rfind("nvcc ", 0), 0u);
    // An explicit choice in the API wins over the environment.
    EXPECT_EQ(make_compiler(HM_COMPILER_NVRTC)->id().rfind("nvrtc ", 0), 0u);
  }
  {
    EnvGuard choice("HUMMING_COMPILER", "nvrtc");
    EXPECT_EQ(make_compiler(HM_COMPILER_DEFAULT)->id().rfind("nvrtc ", 0), 0u);
  }
  {
    EnvGuard choice("HUMMING_COMPILER", nullptr);
    EXPECT_EQ(make_compiler(HM_COMPILER_DEFAULT)->id().rfind("nvrtc ", 0), 0u);
  }
  {
    EnvGuard choice("HUMMING_COMPILER", "clang");
    try {
      make_compiler(HM_COMPILER_DEFAULT);
      FAIL();
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), HM_ERROR_INVALID_ARGUMENT);
      EXPECT_NE(e.message().find("HUMMING_COMPILER"), std::string::npos);
    }
  }
  EXPECT_THROW(make_compiler(7), Error);
}

TEST(Compilers, NvrtcPathIsTheOnlyCandidateWhenSet) {
  EnvGuard choice("HUMMING_COMPILER", nullptr);
  const std::string real = probe_nvrtc().path;
  {
    EnvGuard path("HUMMING_NVRTC_PATH", real.c_str());
    EXPECT_EQ(make_compiler(HM_COMPILER_NVRTC)->path(), real);
  }
  EnvGuard path("HUMMING_NVRTC_PATH", "/nonexistent/libnvrtc.so.99");
  try {
    make_compiler(HM_COMPILER_NVRTC);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_COMPILER_NOT_FOUND);
    EXPECT_NE(e.message().find("/nonexistent/libnvrtc.so.99"), std::string::npos) << e.message();
    EXPECT_EQ(e.message().find("/usr/local/cuda/lib64"), std::string::npos)
        << "a named library must not be silently replaced: " << e.message();
    EXPECT_EQ(e.message().find("\n  'libnvrtc.so.13"), std::string::npos) << e.message();
  }
  const CompilerProbe probe = probe_nvrtc();
  EXPECT_FALSE(probe.found);
  EXPECT_NE(probe.error.find("HUMMING_NVRTC_PATH"), std::string::npos);
  // NVRTC unavailable: the default falls back to NVCC.
  EXPECT_EQ(make_compiler(HM_COMPILER_DEFAULT)->id().rfind("nvcc ", 0), 0u);
}

TEST(Compilers, NothingFoundListsEveryPlaceTried) {
  EnvGuard choice("HUMMING_COMPILER", nullptr);
  EnvGuard nvrtc("HUMMING_NVRTC_PATH", "/nonexistent/libnvrtc.so");
  EnvGuard nvcc("HUMMING_NVCC", "/nonexistent/bin/nvcc");
  try {
    make_compiler(HM_COMPILER_DEFAULT);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_COMPILER_NOT_FOUND);
    EXPECT_NE(e.message().find("/nonexistent/libnvrtc.so"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("/nonexistent/bin/nvcc"), std::string::npos) << e.message();
  }
  EXPECT_FALSE(probe_nvcc().found);
}

// The toolkit's lib folder is often not on the loader path, so the search goes on there.
TEST(Compilers, SearchOrder) {
  EnvGuard nvrtc_forced("HUMMING_NVRTC_PATH", nullptr);
  EnvGuard nvcc_forced("HUMMING_NVCC", nullptr);
  EnvGuard home("CUDA_HOME", "/opt/cuda-home");
  EnvGuard cuda_path("CUDA_PATH", nullptr);
  EnvGuard path("PATH", "/a/bin::/b/bin");
  const std::vector<std::string> nvrtc = nvrtc_search_paths();
  const std::vector<std::string> nvrtc_expected = {"libnvrtc.so.13",
                                                   "libnvrtc.so.12",
                                                   "/opt/cuda-home/lib64/libnvrtc.so.13",
                                                   "/opt/cuda-home/lib64/libnvrtc.so.12",
                                                   "/opt/cuda-home/lib/libnvrtc.so.13",
                                                   "/opt/cuda-home/lib/libnvrtc.so.12",
                                                   "/usr/local/cuda/lib64/libnvrtc.so.13",
                                                   "/usr/local/cuda/lib64/libnvrtc.so.12",
                                                   "/usr/local/cuda/lib/libnvrtc.so.13",
                                                   "/usr/local/cuda/lib/libnvrtc.so.12"};
  EXPECT_EQ(nvrtc, nvrtc_expected);
  const std::vector<std::string> nvcc_expected = {
      "/a/bin/nvcc", "/b/bin/nvcc", "/opt/cuda-home/bin/nvcc", "/usr/local/cuda/bin/nvcc"};
  EXPECT_EQ(nvcc_search_paths(), nvcc_expected);
  // Nothing on PATH or in CUDA_HOME: /usr/local/cuda/bin/nvcc is the last resort.
  const CompilerProbe probe = probe_nvcc();
  ASSERT_TRUE(probe.found) << probe.error;
  EXPECT_EQ(probe.path, "/usr/local/cuda/bin/nvcc");

  EnvGuard forced("HUMMING_NVCC", "/my/nvcc");
  EXPECT_EQ(nvcc_search_paths(), std::vector<std::string>{"/my/nvcc"});
}

}  // namespace
}  // namespace hm::jit::test
