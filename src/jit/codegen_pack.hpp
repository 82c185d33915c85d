// Code generation for the GPU packer (kernels/humming/layout/pack_kernel.cuh): one source per
// (weight bits, activation bits) for the weight, one for the side tensors. Their sources depend on
// nothing else, so every format with the same widths shares one compiled kernel.
#pragma once

#include <string>

#include "jit/codegen.hpp"

namespace hm::jit {

// The weight packer for b-bit weights feeding a-bit activations (the layout's pair, 1 <= b <= 8,
// b <= a, a in {16, 8, 4}). Throws HM_ERROR_UNSUPPORTED_FORMAT for a pair the layout lacks.
GeneratedKernel pack_weight_kernel(int weight_bits, int act_bits, const std::string& arch);

// The side-tensor reorder kernels, one image with an entry per element size.
GeneratedKernel pack_side_kernels(const std::string& arch);
// The entry of pack_side_kernels' image for elements of `element_bytes` (1, 2 or 4) bytes.
std::string pack_side_entry(int element_bytes);

}  // namespace hm::jit
