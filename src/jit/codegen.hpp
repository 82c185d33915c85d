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
GeneratedKernel dense_gemm_kernel(const core::Format& format, const tune::DenseTile& tile,
                                  bool aligned_k, const std::string& arch);

// The wgmma instruction m64nNk16 with A from registers and B by descriptor, as a struct `name`
// with `static void run(float (&d)[n / 8][4], uint32 a0, a1, a2, a3, unsigned long long desc)`
// (f32 accumulators) or `run(uint32 (&d)[n / 8][2], ...)` (acc_f16: f16 pairs). Generated because
// its operand list has n / 2 (n / 4) accumulators.
std::string wgmma_op_source(const std::string& name, int n, bool f16, bool acc_f16);

}  // namespace hm::jit
