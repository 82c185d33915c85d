// Compiling one generated kernel source to a device image: the Compiler interface, its two
// implementations (NVRTC loaded with dlopen, NVCC run as a subprocess), and how one is chosen.
// No CUDA header is included anywhere here: the library builds and runs without the toolkit.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace hm::jit {

class KernelSources;

struct CompileRequest {
  std::string name;                  // human-readable kernel name, "reference_gemm_f16_f16"
  std::string source;                // the generated .cu text; #includes <humming/...> headers
  std::string arch;                  // "sm_90a", "sm_80", ...; "compute_90" means emit PTX
  std::vector<std::string> options;  // extra options, passed verbatim (in order) to the compiler
  const KernelSources* sources = nullptr;  // the headers; nullptr means KernelSources::get()

  const KernelSources& kernel_sources() const;
};

struct CompiledKernel {
  std::string image;  // CUBIN bytes, or PTX text (without a trailing NUL) when is_ptx
  bool is_ptx = false;
  std::string log;  // the compiler's messages (warnings), possibly empty
};

class Compiler {
 public:
  virtual ~Compiler() = default;
  // Name and version, "nvrtc 13.0" / "nvcc 13.0.88", plus for NVCC any NVCC_PREPEND_FLAGS /
  // NVCC_APPEND_FLAGS it will see: part of the cache key.
  virtual std::string id() const = 0;
  // The library or executable in use, for messages and `humming info`.
  virtual std::string path() const = 0;
  // The options the compiler adds on its own for `arch` (also part of the cache key, so a change
  // to them never reuses binaries built without it).
  virtual std::vector<std::string> builtin_options(const std::string& arch) const { return {}; }
  // Throws hm::Error(HM_ERROR_COMPILE) naming the kernel, the arch and the compiler, with the
  // full compiler log; HM_ERROR_INVALID_ARGUMENT for a malformed arch.
  virtual CompiledKernel compile(const CompileRequest& request) const = 0;
};

// which: HM_COMPILER_DEFAULT, HM_COMPILER_NVRTC or HM_COMPILER_NVCC (humming.h).
// DEFAULT means HUMMING_COMPILER=nvrtc|nvcc when set, else NVRTC, else NVCC.
// Throws HM_ERROR_COMPILER_NOT_FOUND listing every place tried.
std::unique_ptr<Compiler> make_compiler(int which);
std::unique_ptr<Compiler> make_nvrtc_compiler();
std::unique_ptr<Compiler> make_nvcc_compiler();

// What `humming info` shows: found or not, and why not, without throwing.
struct CompilerProbe {
  bool found = false;
  std::string path;      // the resolved library / executable
  std::string version;   // "13.0" (NVRTC), "13.0.88" (NVCC)
  int version_code = 0;  // major * 1000 + minor * 10, like CUDA versions
  std::string error;     // why it was not found (every place tried)
};
CompilerProbe probe_nvrtc();
CompilerProbe probe_nvcc();

// Where each compiler is looked for, in order (the environment is read on every call).
// NVRTC: HUMMING_NVRTC_PATH alone when set; else libnvrtc.so.13 and .12 by soname, then in
// $CUDA_HOME/lib64, $CUDA_HOME/lib, $CUDA_PATH/lib64, $CUDA_PATH/lib, /usr/local/cuda/lib64 and
// /usr/local/cuda/lib. NVCC: HUMMING_NVCC alone when set; else nvcc in each PATH directory, then
// $CUDA_HOME/bin, $CUDA_PATH/bin, /usr/local/cuda/bin.
std::vector<std::string> nvrtc_search_paths();
std::vector<std::string> nvcc_search_paths();

// True for "compute_XX" targets (PTX output), false for "sm_XX" (CUBIN).
bool is_ptx_arch(const std::string& arch);
// Throws HM_ERROR_INVALID_ARGUMENT unless arch is sm_<digits>[a|f] or compute_<digits>[a|f].
void require_valid_arch(const std::string& arch);

}  // namespace hm::jit
