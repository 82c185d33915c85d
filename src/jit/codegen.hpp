// Code generation: a kernel configuration -> the tiny .cu source that instantiates templates from
// kernels/humming/, its entry-point name, and the compile request. Generated sources stay small and
// readable (named macros, one line per instantiation); the work is in the headers.
#pragma once

#include <string>

#include "core/arch.hpp"
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

// Why the dense kernel of that kind cannot run `format` on `arch`, or "" when it can: the one
// definition of what the dense templates cover (src/gemm's registry, hence hm_plan_create, the
// support matrix and `humming support`, ask it). The format is assumed valid for the arch.
std::string dense_gemm_gap(const core::Format& format, tune::DenseKernel kernel,
                           const core::Arch& arch);

// The dense GEMM for a 16-bit-activation format and one tile: the mma.sync kernel
// (kernels/humming/gemm/dense_mma.cuh) or, for wgmma tiles, the sm_90a warpgroup kernel
// (gemm/dense_wgmma.cuh). aligned_k: K % 8 == 0, so activation rows load in 16-byte units.
// Throws HM_ERROR_UNSUPPORTED for formats the kernels do not cover yet (named).
// moe: the indexed MoE GEMM of a format with e >= 2 (gemm/sched.cuh; wgmma tiles only).
GeneratedKernel dense_gemm_kernel(const core::Format& format, const tune::DenseTile& tile,
                                  bool aligned_k, const std::string& arch, bool moe = false);


}  // namespace hm::jit
