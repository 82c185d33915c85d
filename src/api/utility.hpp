// What the utility-kernel entry points (hm_pack_device, the activation quantizer, the MoE
// routing helpers) share: the
// compile-once-per-context kernel table and the checks of raw device addresses.
#pragma once

#include <cstdint>
#include <memory>

#include "api/context.hpp"
#include "jit/codegen.hpp"
#include "runtime/device.hpp"

namespace hm::api {

// The utility kernel `generated`, compiled (through the cache) and loaded once per context. The
// lock covers the build, so concurrent first calls compile once.
const hm_kernel& utility_kernel(const std::shared_ptr<ContextState>& context,
                                const jit::GeneratedKernel& generated);

// HM_ERROR_MISALIGNED naming `name` unless pointer % alignment == 0.
void require_aligned(uint64_t pointer, uint64_t alignment, const char* name);

// The per-address and stream checks of hm_plan_gemm (api/device_check.hpp): memory of another
// device, or host memory the device cannot reach, fails naming `name`. Driver queries only:
// legal during stream capture.
void require_on_device(const runtime::Device& device, uint64_t pointer, const char* name);

void require_stream_on_device(const runtime::Device& device, runtime::CUstream stream);

}  // namespace hm::api
