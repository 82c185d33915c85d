// Code generation: a kernel configuration -> the tiny .cu source that instantiates templates from
// kernels/humming/, its entry-point name, and the compile request. Generated sources stay small and
// readable (named macros, one line per instantiation); the work is in the headers.
#pragma once

#include <string>

#include "core/dtype.hpp"
#include "core/format.hpp"
#include "tune/dense.hpp"
#include "jit/compiler.hpp"

namespace hm::jit {

struct GeneratedKernel {
  std::string entry;     // the extern "C" kernel name in the image
  CompileRequest request;
};

// The plain reference GEMM (kernels/humming/reference/gemm.cuh) for (in, out) in {f16, bf16, f32}.
// Throws HM_ERROR_UNSUPPORTED for other dtypes.
GeneratedKernel reference_gemm_kernel(core::Dtype in, core::Dtype out, const std::string& arch);

// The dense mma.sync GEMM (kernels/humming/gemm/dense_mma.cuh) for a 16-bit-activation format
// and one tile. aligned_k: K % 8 == 0, so activation rows load in 16-byte units.
// Throws HM_ERROR_UNSUPPORTED for formats this kernel does not cover yet (named).
GeneratedKernel dense_mma_kernel(const core::Format& format, const tune::DenseTile& tile,
                                 bool aligned_k, const std::string& arch);

}  // namespace hm::jit
