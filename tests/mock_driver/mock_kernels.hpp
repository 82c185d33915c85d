// What the mock driver knows about kernel images: their size (the driver API passes images
// without one), which kernels they contain, the kernels' parameter layout (so launches marshal
// arguments like the real driver does), and host implementations of the kernels it can run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/driver_types.hpp"

namespace hm::mock {

using runtime::CUresult;

struct KernelParam {
  size_t offset = 0;
  size_t size = 0;
};

struct KernelSignature {
  bool known = false;               // false: the mock cannot marshal this kernel's arguments
  std::vector<KernelParam> params;  // in declaration order
  size_t buffer_size = 0;           // bytes of the whole parameter buffer
};

// An ELF image's size from its headers (cubins); otherwise the image is NUL-terminated text (PTX).
size_t image_size(const void* image);

// True when `name` occurs in the image as a whole symbol (a PTX .entry or an ELF string table).
bool image_has_symbol(const std::string& image, const std::string& name);

// The parameter layout of kernel `name`: from its PTX .entry declaration when the image is PTX,
// else from the signatures the mock knows (hm_reference_gemm_f32_f32).
KernelSignature kernel_signature(const std::string& image, const std::string& name);

// Returns true when `[address, address + bytes)` lies inside one live allocation.
using RangeCheck = std::function<bool(uint64_t address, uint64_t bytes)>;

// Runs the host implementation of kernel `name` on the marshalled arguments. Returns false when
// the mock has none; otherwise sets *result (CUDA_ERROR_ILLEGAL_ADDRESS for an out-of-bounds
// operand, as the GPU would report it).
bool run_host_kernel(const std::string& name, const KernelSignature& signature,
                     const unsigned char* args, const RangeCheck& in_bounds, CUresult* result);

}  // namespace hm::mock
