// The kernel headers: the embedded copy matches kernels/ in the source tree, a directory
// override (HUMMING_KERNEL_DIR) replaces it, and the content hash follows every change.
#include <filesystem>
#include <fstream>

#include "jit/subprocess.hpp"
#include "jit_test_support.hpp"

namespace hm::jit::test {
namespace {

namespace fs = std::filesystem;

class KernelDirTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = make_temp_directory(temp_root(), "hm-kernel-dir-"); }
  void TearDown() override { remove_tree(root_); }
  void write(const std::string& rel, const std::string& text) {
    fs::create_directories(fs::path(root_ + "/" + rel).parent_path());
    std::ofstream(root_ + "/" + rel) << text;
  }
  std::string root_;
};

TEST(KernelSources, EmbeddedCopyMatchesTheSourceTree) {
  const KernelSources embedded = KernelSources::embedded();
  const KernelSources tree = KernelSources::from_directory(HM_TEST_SOURCE_DIR "/../kernels");
  EXPECT_FALSE(embedded.files().empty());
  EXPECT_EQ(embedded.files().count("humming/core/types.cuh"), 1u);
  EXPECT_EQ(embedded.files(), tree.files()) << "rebuild: the embedded copy is stale";
  EXPECT_EQ(embedded.hash(), tree.hash());
  EXPECT_EQ(embedded.origin().rfind("embedded (", 0), 0u) << embedded.origin();
}

TEST_F(KernelDirTest, SelectsHeadersByExtensionWithRelativePaths) {
  write("humming/a.cuh", "a");
  write("humming/deep/b.h", "b");
  write("humming/notes.md", "not a header");
  write("humming/c.cu", "not a header either");
  const KernelSources s = KernelSources::from_directory(root_);
  const std::map<std::string, std::string> expected = {{"humming/a.cuh", "a"},
                                                       {"humming/deep/b.h", "b"}};
  EXPECT_EQ(s.files(), expected);
  EXPECT_NE(s.origin().find(root_), std::string::npos);
}

TEST_F(KernelDirTest, HashFollowsPathsAndContents) {
  const std::string base = KernelSources::from_files({{"x.cuh", "ab"}}, "t").hash();
  EXPECT_EQ(KernelSources::from_files({{"x.cuh", "ab"}}, "other origin").hash(), base);
  EXPECT_NE(KernelSources::from_files({{"x.cuh", "ac"}}, "t").hash(), base);
  EXPECT_NE(KernelSources::from_files({{"y.cuh", "ab"}}, "t").hash(), base);
  EXPECT_NE(KernelSources::from_files({{"x.cuh", "ab"}, {"z.cuh", ""}}, "t").hash(), base);
  // Moving bytes between a path and its contents must change the hash.
  EXPECT_NE(KernelSources::from_files({{"x.cuh", "a"}, {"b", ""}}, "t").hash(),
            KernelSources::from_files({{"x.cuh", "ab"}}, "t").hash());
}

TEST_F(KernelDirTest, MissingDirectoryIsAnIoError) {
  try {
    KernelSources::from_directory(root_ + "/absent");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_IO);
    EXPECT_NE(e.message().find("HUMMING_KERNEL_DIR"), std::string::npos) << e.message();
  }
}

// A header that exists only in the override directory compiles; with the embedded copy it does
// not, which shows the override is what supplied it.
TEST_F(KernelDirTest, OverrideDirectorySuppliesHeaders) {
  write("humming/override_probe.cuh", "#pragma once\nconstexpr int kOverrideProbe = 7;\n");
  EnvGuard env("HUMMING_KERNEL_DIR", root_.c_str());
  const KernelSources sources = KernelSources::from_environment();
  EXPECT_NE(sources.origin().find("HUMMING_KERNEL_DIR"), std::string::npos) << sources.origin();
  EXPECT_EQ(sources.files().count("humming/override_probe.cuh"), 1u);

  CompileRequest r;
  r.name = "override_probe";
  r.arch = "sm_80";
  r.source =
      "#include <humming/override_probe.cuh>\n"
      "static_assert(kOverrideProbe == 7, \"wrong header\");\n"
      "extern \"C\" __global__ void probe(int* out) { *out = kOverrideProbe; }\n";
  r.sources = &sources;
  const auto nvrtc = require_compiler(HM_COMPILER_NVRTC);
  EXPECT_NE(nvrtc->compile(r).image.find("probe"), std::string::npos);
  const auto nvcc = require_compiler(HM_COMPILER_NVCC);
  EXPECT_FALSE(nvcc->compile(r).image.empty());
  r.sources = &embedded_sources();
  EXPECT_THROW(nvrtc->compile(r), Error);
}

// KernelSources::get() reads HUMMING_KERNEL_DIR once per process, so this test re-runs itself
// in a fresh process with the variable set (an earlier test may already have fixed get()).
TEST_F(KernelDirTest, ProcessWideSourcesHonourTheEnvironment) {
  if (!env_or_empty("HM_TEST_KERNEL_DIR_CHILD").empty()) {
    const KernelSources& s = KernelSources::get();
    EXPECT_EQ(s.files().size(), 1u);
    EXPECT_EQ(s.files().count("humming/only_here.cuh"), 1u);
    EXPECT_EQ(&s, &KernelSources::get());
    EXPECT_NE(s.origin().find("HUMMING_KERNEL_DIR"), std::string::npos);
    return;
  }
  write("humming/only_here.cuh", "x");
  EnvGuard dir("HUMMING_KERNEL_DIR", root_.c_str());
  EnvGuard child("HM_TEST_KERNEL_DIR_CHILD", "1");
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const ProcessResult r =
      run_process({self, "--gtest_filter=KernelDirTest.ProcessWideSourcesHonourTheEnvironment"});
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe() << "\n" << r.output;
  EXPECT_NE(r.output.find("[  PASSED  ] 1 test"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace hm::jit::test
