// Shared pieces of the jit tests: a tiny kernel built from the embedded headers, and the real
// compilers. These tests need the CUDA toolkit (NVRTC and NVCC) and no GPU; when a compiler is
// missing they fail with the loader's explanation rather than skip, because CI has the toolkit.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/error.hpp"
#include "host/test_cache_support.hpp"
#include "jit/compiler.hpp"
#include "jit/kernel_sources.hpp"

namespace hm::jit::test {

constexpr const char* kSelftestSymbol = "hm_jit_selftest_gemm";

inline const KernelSources& embedded_sources() {
  static const KernelSources sources = KernelSources::embedded();
  return sources;
}

// Includes the headers both ways (<...> and "..."), as generated sources may.
inline CompileRequest selftest_request(const std::string& arch) {
  CompileRequest r;
  r.name = "jit_selftest_gemm_f16_f32";
  r.arch = arch;
  r.source =
      std::string("#include <humming/reference/gemm.cuh>\n#include \"humming/core/types.cuh\"\n") +
      "HM_DEFINE_REFERENCE_GEMM(" + kSelftestSymbol + ", ::hm::f16, float)\n";
  r.sources = &embedded_sources();
  return r;
}

inline std::unique_ptr<Compiler> require_compiler(int which) {
  try {
    return make_compiler(which);
  } catch (const Error& e) {
    ADD_FAILURE() << "the jit tests need the CUDA toolkit: " << e.message();
    throw;
  }
}

inline bool is_elf(const std::string& image) {
  return image.rfind(
             "\x7f"
             "ELF",
             0) == 0;
}

}  // namespace hm::jit::test
