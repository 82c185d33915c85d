// NVRTC, loaded at run time with dlopen so the library needs no CUDA toolkit to build or load.
// The kernel headers are handed to NVRTC from memory under their relative paths, so
// `#include <humming/...>` resolves without any file on disk and without -I options.
#include <dlfcn.h>

#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/quote.hpp"
#include "jit/compiler.hpp"
#include "jit/file_util.hpp"
#include "jit/kernel_sources.hpp"

namespace hm::jit {
namespace {

// The subset of nvrtc.h we use, declared here because src/ includes no CUDA headers. These
// signatures are stable across CUDA 11-13.
using nvrtcResult = int;
using nvrtcProgram = struct NvrtcProgramOpaque*;
constexpr nvrtcResult kNvrtcSuccess = 0;
constexpr nvrtcResult kNvrtcErrorCompilation = 6;

struct NvrtcApi {
  std::string path;  // as resolved by the loader
  nvrtcResult (*version)(int*, int*) = nullptr;
  const char* (*get_error_string)(nvrtcResult) = nullptr;
  nvrtcResult (*create_program)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                                const char* const*) = nullptr;
  nvrtcResult (*destroy_program)(nvrtcProgram*) = nullptr;
  nvrtcResult (*compile_program)(nvrtcProgram, int, const char* const*) = nullptr;
  nvrtcResult (*get_program_log_size)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*get_program_log)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*get_cubin_size)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*get_cubin)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*get_ptx_size)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*get_ptx)(nvrtcProgram, char*) = nullptr;
  int major = 0, minor = 0;
};

}  // namespace

// HUMMING_NVRTC_PATH, when set, is the only candidate: a user who names a library wants that
// one or an error, never a silent substitute.
std::vector<std::string> nvrtc_search_paths() {
  const std::string forced = env_or_empty("HUMMING_NVRTC_PATH");
  if (!forced.empty()) return {forced};
  const char* sonames[] = {"libnvrtc.so.13", "libnvrtc.so.12"};
  std::vector<std::string> out(std::begin(sonames), std::end(sonames));
  // The toolkit's library folder is often not on the loader path (no ldconfig entry, no
  // LD_LIBRARY_PATH), so look where toolkits install too.
  std::vector<std::string> dirs;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    const std::string root = env_or_empty(var);
    if (!root.empty()) {
      dirs.push_back(root + "/lib64");
      dirs.push_back(root + "/lib");
    }
  }
  dirs.push_back("/usr/local/cuda/lib64");
  dirs.push_back("/usr/local/cuda/lib");
  for (const std::string& dir : dirs)
    for (const char* so : sonames) {
      const std::string path = dir + "/" + so;
      bool seen = false;
      for (const std::string& p : out) seen = seen || p == path;
      if (!seen) out.push_back(path);
    }
  return out;
}

namespace {

template <typename Fn>
bool resolve(void* handle, const char* name, Fn* fn, std::string* missing) {
  *fn = reinterpret_cast<Fn>(::dlsym(handle, name));
  if (*fn == nullptr) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return *fn != nullptr;
}

// Loads the first candidate that has every entry point; otherwise explains each failure.
bool load_nvrtc(NvrtcApi* api, std::string* error) {
  std::string tried;
  for (const std::string& candidate : nvrtc_search_paths()) {
    // RTLD_LOCAL keeps NVRTC's symbols out of the global namespace of the host process.
    void* handle = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = ::dlerror();
      tried += "\n  " + core::quoted(candidate, core::kQuotedPathBytes) + ": " + (why ? why : "dlopen failed");
      continue;
    }
    std::string missing;
    resolve(handle, "nvrtcVersion", &api->version, &missing);
    resolve(handle, "nvrtcGetErrorString", &api->get_error_string, &missing);
    resolve(handle, "nvrtcCreateProgram", &api->create_program, &missing);
    resolve(handle, "nvrtcDestroyProgram", &api->destroy_program, &missing);
    resolve(handle, "nvrtcCompileProgram", &api->compile_program, &missing);
    resolve(handle, "nvrtcGetProgramLogSize", &api->get_program_log_size, &missing);
    resolve(handle, "nvrtcGetProgramLog", &api->get_program_log, &missing);
    resolve(handle, "nvrtcGetCUBINSize", &api->get_cubin_size, &missing);
    resolve(handle, "nvrtcGetCUBIN", &api->get_cubin, &missing);
    resolve(handle, "nvrtcGetPTXSize", &api->get_ptx_size, &missing);
    resolve(handle, "nvrtcGetPTX", &api->get_ptx, &missing);
    if (!missing.empty()) {
      tried += "\n  " + core::quoted(candidate, core::kQuotedPathBytes) + ": loaded, but lacks " + missing;
      ::dlclose(handle);
      continue;
    }
    if (api->version(&api->major, &api->minor) != kNvrtcSuccess) {
      tried += "\n  " + core::quoted(candidate, core::kQuotedPathBytes) + ": loaded, but nvrtcVersion failed";
      ::dlclose(handle);
      continue;
    }
    // The file the loader actually opened (a soname may resolve anywhere on the search path).
    Dl_info info;
    api->path = (::dladdr(reinterpret_cast<void*>(api->version), &info) && info.dli_fname)
                    ? info.dli_fname
                    : candidate;
    // The handle is deliberately never closed: NVRTC keeps state that outlives any one compiler.
    return true;
  }
  const bool forced = !env_or_empty("HUMMING_NVRTC_PATH").empty();
  *error = std::string("NVRTC could not be loaded") + (forced ? " from HUMMING_NVRTC_PATH" : "") +
           "; tried:" + tried +
           "\nInstall the CUDA toolkit's NVRTC (libnvrtc.so.13 or .12), or set HUMMING_NVRTC_PATH "
           "to the library file, or use NVCC (HUMMING_COMPILER=nvcc).";
  return false;
}

class NvrtcCompiler final : public Compiler {
 public:
  explicit NvrtcCompiler(NvrtcApi api) : api_(std::move(api)) {}

  std::string id() const override {
    return "nvrtc " + std::to_string(api_.major) + "." + std::to_string(api_.minor);
  }
  std::string path() const override { return api_.path; }

  std::vector<std::string> builtin_options(const std::string& arch) const override {
    // No --use_fast_math: kernels opt into approximations explicitly where they are exact enough.
    return {"--gpu-architecture=" + arch, "-std=c++17", "-default-device"};
  }

  CompiledKernel compile(const CompileRequest& request) const override {
    require_valid_arch(request.arch);
    const KernelSources& sources = request.kernel_sources();
    std::vector<const char*> contents, names;
    for (const auto& [name, text] : sources.files()) {
      names.push_back(name.c_str());
      contents.push_back(text.c_str());
    }
    // The program name is what NVRTC prints in front of every diagnostic for the main file.
    const std::string program_name = safe_file_name(request.name) + ".cu";
    nvrtcProgram program = nullptr;
    check(api_.create_program(&program, request.source.c_str(), program_name.c_str(),
                              static_cast<int>(names.size()), contents.data(), names.data()),
          "nvrtcCreateProgram", request, "");
    struct Destroy {
      const NvrtcApi& api;
      nvrtcProgram* program;
      ~Destroy() { api.destroy_program(program); }
    } destroy{api_, &program};

    std::vector<std::string> options = builtin_options(request.arch);
    options.insert(options.end(), request.options.begin(), request.options.end());
    std::vector<const char*> option_ptrs;
    for (const std::string& o : options) option_ptrs.push_back(o.c_str());
    const nvrtcResult compiled =
        api_.compile_program(program, static_cast<int>(option_ptrs.size()), option_ptrs.data());

    CompiledKernel out;
    out.log = program_log(program, request);
    check(compiled, "nvrtcCompileProgram", request, out.log);
    out.is_ptx = is_ptx_arch(request.arch);
    size_t size = 0;
    if (out.is_ptx) {
      check(api_.get_ptx_size(program, &size), "nvrtcGetPTXSize", request, out.log);
      out.image.assign(size, '\0');
      check(api_.get_ptx(program, out.image.data()), "nvrtcGetPTX", request, out.log);
      while (!out.image.empty() && out.image.back() == '\0') out.image.pop_back();
    } else {
      check(api_.get_cubin_size(program, &size), "nvrtcGetCUBINSize", request, out.log);
      out.image.assign(size, '\0');
      check(api_.get_cubin(program, out.image.data()), "nvrtcGetCUBIN", request, out.log);
    }
    HM_REQUIRE(!out.image.empty(), HM_ERROR_COMPILE,
               describe(request) + " produced an empty image (" + id() + ")");
    return out;
  }

 private:
  std::string describe(const CompileRequest& request) const {
    return "compiling kernel '" + request.name + "' for " + request.arch + " with " + id() + " (" +
           api_.path + ")";
  }

  std::string program_log(nvrtcProgram program, const CompileRequest& request) const {
    size_t size = 0;
    check(api_.get_program_log_size(program, &size), "nvrtcGetProgramLogSize", request, "");
    std::string log(size, '\0');
    if (size > 0)
      check(api_.get_program_log(program, log.data()), "nvrtcGetProgramLog", request, "");
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    return log;
  }

  void check(nvrtcResult result, const char* call, const CompileRequest& request,
             const std::string& log) const {
    if (result == kNvrtcSuccess) return;
    const char* text = api_.get_error_string(result);
    std::string message = describe(request) + " failed: " + call + " returned " +
                          (text ? text : "an unknown error") + " (" + std::to_string(result) + ")";
    if (result == kNvrtcErrorCompilation) message = describe(request) + " failed";
    message += log.empty() ? std::string(" (no compiler log)") : ":\n" + log;
    fail(HM_ERROR_COMPILE, message);
  }

  NvrtcApi api_;
};

}  // namespace

std::unique_ptr<Compiler> make_nvrtc_compiler() {
  NvrtcApi api;
  std::string error;
  if (!load_nvrtc(&api, &error)) fail(HM_ERROR_COMPILER_NOT_FOUND, error);
  return std::make_unique<NvrtcCompiler>(std::move(api));
}

CompilerProbe probe_nvrtc() {
  CompilerProbe probe;
  NvrtcApi api;
  probe.found = load_nvrtc(&api, &probe.error);
  if (probe.found) {
    probe.path = api.path;
    probe.version = std::to_string(api.major) + "." + std::to_string(api.minor);
    probe.version_code = api.major * 1000 + api.minor * 10;
  }
  return probe;
}

}  // namespace hm::jit
