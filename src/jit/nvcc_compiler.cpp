// NVCC as a subprocess: the fallback when NVRTC cannot be loaded, and a choice. Each compile
// writes the source and every kernel header into a fresh temporary directory, runs nvcc there
// (posix_spawn, no shell, so no quoting issues), reads the image back and removes the directory.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <regex>
#include <string>
#include <system_error>
#include <vector>

#include "core/error.hpp"
#include "core/quote.hpp"
#include "jit/compiler.hpp"
#include "jit/file_util.hpp"
#include "jit/kernel_sources.hpp"
#include "jit/subprocess.hpp"

namespace hm::jit {
namespace {

bool is_executable_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// The first executable candidate, or false with every candidate listed in *error.
bool find_nvcc(std::string* path, std::string* error) {
  const std::vector<std::string> candidates = nvcc_search_paths();
  for (const std::string& c : candidates) {
    if (is_executable_file(c)) {
      *path = c;
      return true;
    }
  }
  std::string tried;
  for (const std::string& c : candidates) tried += "\n  " + core::quoted(c, core::kQuotedPathBytes);
  const bool forced = !env_or_empty("HUMMING_NVCC").empty();
  *error = std::string("NVCC was not found") + (forced ? " at HUMMING_NVCC" : "") +
           "; tried:" + tried +
           "\nInstall the CUDA toolkit, put its bin/ on PATH, or set HUMMING_NVCC to the nvcc "
           "executable.";
  return false;
}

// "13.0.88" from `nvcc --version` ("... release 13.0, V13.0.88").
bool nvcc_version(const std::string& nvcc, std::string* version, std::string* error) {
  ProcessResult r;
  try {
    r = run_process({nvcc, "--version"});
  } catch (const Error& e) {
    *error = e.message();
    return false;
  }
  std::smatch m;
  static const std::regex pattern(R"(\bV(\d+)\.(\d+)\.(\d+))");
  if (!r.exited || r.exit_code != 0 || !std::regex_search(r.output, m, pattern)) {
    *error =
        "'" + nvcc + " --version' did not report a version (" + r.describe() + "):\n" + r.output;
    return false;
  }
  *version = m[1].str() + "." + m[2].str() + "." + m[3].str();
  return true;
}

constexpr const char* kScratchPrefix = "humming-nvcc-";

// Removes this user's scratch directories left in the temporary directory by processes killed
// mid-compile (the destructor below never ran). An hour is far longer than any compile, as for
// the cache's own tmp/; other users' directories are not ours to judge.
void prune_stale_scratch() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto cutoff = fs::file_time_type::clock::now() - std::chrono::hours(1);
  for (fs::directory_iterator it(temp_root(), ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().rfind(kScratchPrefix, 0) != 0) continue;
    struct stat st;
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid())
      continue;
    std::error_code time_ec;
    const auto mtime = fs::last_write_time(it->path(), time_ec);
    if (!time_ec && mtime < cutoff) remove_tree(it->path().string());
  }
}

// Removes the scratch directory whatever happens to the compile.
struct ScratchDirectory {
  std::string path;
  ~ScratchDirectory() { remove_tree(path); }
};

class NvccCompiler final : public Compiler {
 public:
  NvccCompiler(std::string path, std::string version)
      : path_(std::move(path)), version_(std::move(version)) {}

  // nvcc adds NVCC_PREPEND_FLAGS / NVCC_APPEND_FLAGS from its environment (ours) to every
  // command line, and they change the image (-G, -lineinfo, -O0...): they belong in the cache
  // key, so a user's flags are honoured and their binaries kept apart. Read at each call, like
  // the environment the subprocess inherits; quoted whole, so the id stays ASCII.
  std::string id() const override {
    std::string out = "nvcc " + version_;
    for (const char* var : {"NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"}) {
      const std::string value = env_or_empty(var);
      if (!value.empty()) out += std::string(" ") + var + "=" + core::quoted(value, value.size());
    }
    return out;
  }
  std::string path() const override { return path_; }

  std::vector<std::string> builtin_options(const std::string& arch) const override {
    return {is_ptx_arch(arch) ? "-ptx" : "-cubin", "-arch=" + arch, "-std=c++17"};
  }

  CompiledKernel compile(const CompileRequest& request) const override {
    require_valid_arch(request.arch);
    ScratchDirectory scratch{make_temp_directory(temp_root(), kScratchPrefix)};
    write_headers(request.kernel_sources(), scratch.path);
    const std::string stem = safe_file_name(request.name);
    const std::string source = scratch.path + "/" + stem + ".cu";
    const std::string output =
        scratch.path + "/" + stem + (is_ptx_arch(request.arch) ? ".ptx" : ".cubin");
    write_file(source, request.source);

    std::vector<std::string> argv = {path_};
    for (const std::string& o : builtin_options(request.arch)) argv.push_back(o);
    argv.push_back("-I" + scratch.path);
    argv.insert(argv.end(), request.options.begin(), request.options.end());
    argv.insert(argv.end(), {"-o", output, source});
    const ProcessResult r = run_process(argv);

    // The scratch path is noise in diagnostics (and differs every run); show relative names.
    std::string log = r.output;
    for (size_t at; (at = log.find(scratch.path + "/")) != std::string::npos;)
      log.erase(at, scratch.path.size() + 1);
    while (!log.empty() && log.back() == '\n') log.pop_back();

    const std::string what = "compiling kernel '" + request.name + "' for " + request.arch +
                             " with " + id() + " (" + path_ + ")";
    if (!r.exited || r.exit_code != 0)
      fail(HM_ERROR_COMPILE, what + " failed (" + r.describe() + ")" +
                                 (log.empty() ? std::string(" with no output") : ":\n" + log));
    CompiledKernel out;
    out.is_ptx = is_ptx_arch(request.arch);
    out.log = log;
    std::string error;
    if (!try_read_file(output, &out.image, &error))
      fail(HM_ERROR_COMPILE, what + " produced no output file: " + error);
    HM_REQUIRE(!out.image.empty(), HM_ERROR_COMPILE, what + " produced an empty image");
    return out;
  }

 private:
  static void write_headers(const KernelSources& sources, const std::string& root) {
    namespace fs = std::filesystem;
    for (const auto& [name, text] : sources.files()) {
      const fs::path rel(name);
      // The names come from our own tree, but a path escaping the scratch directory would be a
      // bug worth stopping on rather than a file written elsewhere.
      HM_REQUIRE(rel.is_relative() && rel.lexically_normal().string().rfind("..", 0) != 0,
                 HM_ERROR_INTERNAL, "kernel header path '" + name + "' is not a relative path");
      const fs::path target = fs::path(root) / rel;
      std::error_code ec;
      fs::create_directories(target.parent_path(), ec);
      if (ec)
        fail(HM_ERROR_IO,
             "creating '" + target.parent_path().string() + "' failed: " + ec.message());
      write_file(target.string(), text);
    }
  }

  std::string path_;
  std::string version_;
};

}  // namespace

std::vector<std::string> nvcc_search_paths() {
  const std::string forced = env_or_empty("HUMMING_NVCC");
  if (!forced.empty()) return {forced};
  std::vector<std::string> out;
  const std::string search = env_or_empty("PATH");
  for (size_t start = 0; start <= search.size();) {
    const size_t end = std::min(search.find(':', start), search.size());
    // An empty PATH element means the current directory, which we do not search on purpose.
    if (end > start) out.push_back(search.substr(start, end - start) + "/nvcc");
    start = end + 1;
  }
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    const std::string root = env_or_empty(var);
    if (!root.empty()) out.push_back(root + "/bin/nvcc");
  }
  out.push_back("/usr/local/cuda/bin/nvcc");
  return out;
}

std::unique_ptr<Compiler> make_nvcc_compiler() {
  std::string path, version, error;
  if (!find_nvcc(&path, &error) || !nvcc_version(path, &version, &error))
    fail(HM_ERROR_COMPILER_NOT_FOUND, error);
  prune_stale_scratch();
  return std::make_unique<NvccCompiler>(path, version);
}

CompilerProbe probe_nvcc() {
  CompilerProbe probe;
  probe.found = find_nvcc(&probe.path, &probe.error) &&
                nvcc_version(probe.path, &probe.version, &probe.error);
  if (probe.found) {
    const size_t dot = probe.version.find('.');
    const int major = std::stoi(probe.version.substr(0, dot));
    const int minor = std::stoi(probe.version.substr(dot + 1));
    probe.version_code = major * 1000 + minor * 10;
  } else {
    probe.path.clear();
  }
  return probe;
}

}  // namespace hm::jit
