// Code generation for the MoE routing kernels (kernels/humming/moe/routing.cuh): one source for
// the alignment (its sizes are runtime values), one per (dtype, vector width) for the reduction.
#pragma once

#include <string>

#include "core/dtype.hpp"
#include "jit/codegen.hpp"

namespace hm::jit {

// The alignment kernel (hm_moe_align).
GeneratedKernel moe_align_kernel(const std::string& arch);

// The top-k reduction for f16 / bf16 values (`dtype`), `vec` values per thread (8: 16-byte
// accesses, or 1). Throws HM_ERROR_UNSUPPORTED for another dtype or width.
GeneratedKernel moe_reduce_kernel(core::Dtype dtype, int vec, const std::string& arch);

}  // namespace hm::jit
