#include "jit/compiler.hpp"

#include <cctype>

#include "core/error.hpp"
#include "core/quote.hpp"
#include "jit/file_util.hpp"
#include "jit/kernel_sources.hpp"

namespace hm::jit {

const KernelSources& CompileRequest::kernel_sources() const {
  return sources ? *sources : KernelSources::get();
}

bool is_ptx_arch(const std::string& arch) { return arch.rfind("compute_", 0) == 0; }

void require_valid_arch(const std::string& arch) {
  std::string rest;
  if (arch.rfind("sm_", 0) == 0) rest = arch.substr(3);
  if (arch.rfind("compute_", 0) == 0) rest = arch.substr(8);
  size_t digits = 0;
  while (digits < rest.size() && std::isdigit(static_cast<unsigned char>(rest[digits]))) ++digits;
  const std::string suffix = rest.substr(digits);
  const bool ok = digits >= 2 && digits <= 3 && (suffix.empty() || suffix == "a" || suffix == "f");
  HM_REQUIRE(ok, HM_ERROR_INVALID_ARGUMENT,
             "target arch " + core::quoted(arch, 40) +
                 " is malformed: expected sm_<cc> or compute_<cc> with an optional 'a' or 'f' "
                 "suffix, e.g. sm_80, sm_90a, compute_90");
}

std::unique_ptr<Compiler> make_compiler(int which) {
  if (which == HM_COMPILER_NVRTC) return make_nvrtc_compiler();
  if (which == HM_COMPILER_NVCC) return make_nvcc_compiler();
  HM_REQUIRE(which == HM_COMPILER_DEFAULT, HM_ERROR_INVALID_ARGUMENT,
             "compiler choice " + std::to_string(which) +
                 " is unknown: use HM_COMPILER_DEFAULT, HM_COMPILER_NVRTC or HM_COMPILER_NVCC");
  const std::string choice = env_or_empty("HUMMING_COMPILER");
  if (choice == "nvrtc") return make_nvrtc_compiler();
  if (choice == "nvcc") return make_nvcc_compiler();
  HM_REQUIRE(choice.empty(), HM_ERROR_INVALID_ARGUMENT,
             "HUMMING_COMPILER is " + core::quoted(choice) + ": set it to 'nvrtc' or 'nvcc', or unset it");
  std::string nvrtc_error;
  try {
    return make_nvrtc_compiler();
  } catch (const Error& e) {
    if (e.status() != HM_ERROR_COMPILER_NOT_FOUND) throw;
    nvrtc_error = e.message();
  }
  try {
    return make_nvcc_compiler();
  } catch (const Error& e) {
    if (e.status() != HM_ERROR_COMPILER_NOT_FOUND) throw;
    fail(HM_ERROR_COMPILER_NOT_FOUND,
         "no kernel compiler found.\n" + nvrtc_error + "\n" + e.message());
  }
}

}  // namespace hm::jit
