// Device addresses in messages and their alignment rule: one spelling for every entry point that
// takes raw addresses (hm_plan_gemm's families, the GPU packer, the activation quantizer, the MoE
// routing helpers).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "core/error.hpp"

namespace hm::core {

// "0x7f3a00000000".
inline std::string hex_address(uint64_t value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(value));
  return buf;
}

// HM_ERROR_MISALIGNED naming `name` unless pointer % alignment == 0.
inline void require_aligned(uint64_t pointer, uint64_t alignment, const char* name) {
  if (pointer % alignment != 0)
    fail(HM_ERROR_MISALIGNED, std::string(name) + " must be " + std::to_string(alignment) +
                                  "-byte aligned, got " + hex_address(pointer));
}

}  // namespace hm::core
