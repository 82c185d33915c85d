#include "api/utility.hpp"

#include "api/device_check.hpp"

#include <cstdio>
#include <mutex>
#include <optional>
#include <string>

#include "core/error.hpp"

namespace hm::api {
namespace {

std::string hex(uint64_t value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(value));
  return buf;
}

}  // namespace

const hm_kernel& utility_kernel(const std::shared_ptr<ContextState>& context,
                                const jit::GeneratedKernel& generated) {
  ContextState& state = *context;
  std::lock_guard<std::mutex> lock(state.utility_mutex);
  auto it = state.utility_kernels.find(generated.request.name);
  if (it != state.utility_kernels.end()) return *it->second;
  std::unique_ptr<hm_kernel> kernel = build_kernel(context, generated);
  kernel->context.reset();  // owned by the state (see ContextState::utility_kernels)
  return *state.utility_kernels.emplace(generated.request.name, std::move(kernel)).first->second;
}

void require_aligned(uint64_t pointer, uint64_t alignment, const char* name) {
  if (pointer % alignment != 0)
    fail(HM_ERROR_MISALIGNED, std::string(name) + " must be " + std::to_string(alignment) +
                                  "-byte aligned, got " + hex(pointer));
}

// The checks of hm_plan_gemm (api/device_check.cpp): one rule for every entry point.
void require_on_device(const runtime::Device& device, uint64_t pointer, const char* name) {
  check_device_pointer(device, name, pointer);
}

void require_stream_on_device(const runtime::Device& device, runtime::CUstream stream) {
  check_stream(device, stream);
}

}  // namespace hm::api
