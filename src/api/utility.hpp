// What the utility-kernel entry points (hm_pack_device, the activation quantizer, the MoE
// routing helpers) share: the compile-once-per-context kernel table. Their address checks are
// core::require_aligned (core/address.hpp) and api/device_check.hpp's, as hm_plan_gemm's.
#pragma once

#include <cstdint>
#include <memory>

#include "api/context.hpp"
#include "jit/codegen.hpp"

namespace hm::api {

// The utility kernel `generated`, compiled (through the cache) and loaded once per context. The
// lock covers the build, so concurrent first calls compile once.
const hm_kernel& utility_kernel(const std::shared_ptr<ContextState>& context,
                                const jit::GeneratedKernel& generated);

}  // namespace hm::api
