// Code generation for the GPU activation quantizer (kernels/humming/quant/activation_kernel.cuh):
// one tiny source per (input, output) dtype pair; nothing else enters the source, so every shape
// and group size shares the pair's compiled kernel.
#pragma once

#include <string>

#include "core/dtype.hpp"
#include "jit/codegen.hpp"

namespace hm::jit {

// The quantizer of f16 / bf16 activations into e4m3, e5m2 or int8 codes. Throws
// HM_ERROR_UNSUPPORTED_FORMAT naming the dtype for any other pair.
GeneratedKernel quantize_activation_kernel(core::Dtype in, core::Dtype out,
                                           const std::string& arch);

}  // namespace hm::jit
