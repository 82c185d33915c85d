// Shared pieces of the cache tests: a fake compiler that counts its compiles (no toolkit
// needed), a scratch cache directory per test, and an environment guard.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "jit/cache.hpp"
#include "jit/compiler.hpp"
#include "jit/file_util.hpp"
#include "jit/kernel_sources.hpp"

namespace hm::jit::test {

// The image depends on the whole request, and on the process when `per_process_image` is set,
// so a test can tell whose copy of an entry a process ended up with.
class FakeCompiler : public Compiler {
 public:
  explicit FakeCompiler(std::string id = "fake 1.0") : id_(std::move(id)) {}
  std::string id() const override { return id_; }
  std::string path() const override { return "/opt/fake/compiler"; }
  std::vector<std::string> builtin_options(const std::string& arch) const override {
    return builtin_;
  }
  CompiledKernel compile(const CompileRequest& r) const override {
    ++compiles;
    if (fail_with_log)
      fail(HM_ERROR_COMPILE, "fake compile of '" + r.name + "' failed:\n" + *fail_with_log);
    std::string image = "FAKEIMG|" + r.name + "|" + r.arch + "|" + r.source;
    for (const std::string& o : r.options) image += "|" + o;
    if (per_process_image) image += "|pid=" + std::to_string(::getpid());
    return CompiledKernel{image, is_ptx_arch(r.arch), "fake warning: " + r.name};
  }

  std::string id_;
  std::vector<std::string> builtin_ = {"-std=c++17"};
  bool per_process_image = false;
  std::optional<std::string> fail_with_log;
  mutable std::atomic<int> compiles{0};
};

// Sets (or, with nullptr, unsets) an environment variable for the guard's lifetime.
class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~EnvGuard() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

inline const KernelSources& test_sources() {
  static const KernelSources sources = KernelSources::from_files(
      {{"humming/test/a.cuh", "#pragma once\nconstexpr int kA = 1;\n"}}, "test files");
  return sources;
}

inline CompileRequest test_request(std::string name = "test_kernel", std::string arch = "sm_90a") {
  CompileRequest r;
  r.name = std::move(name);
  r.arch = std::move(arch);
  r.source = "#include <humming/test/a.cuh>\nextern \"C\" __global__ void k() {}\n";
  r.options = {"-DHM_TEST=1"};
  r.sources = &test_sources();
  return r;
}

// A fresh cache directory under $TMPDIR, removed after the test; HUMMING_DISABLE_JIT is cleared
// so the environment of the test run cannot change the outcome.
class CacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = make_temp_directory(temp_root(), "hm-cache-test-");
    dir_ = root_ + "/cache";
  }
  void TearDown() override { remove_tree(root_); }

  EnvGuard no_disable_{"HUMMING_DISABLE_JIT", nullptr};
  std::string root_;
  std::string dir_;
};

}  // namespace hm::jit::test
