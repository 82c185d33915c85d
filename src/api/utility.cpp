#include "api/utility.hpp"

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

void require_on_device(const runtime::Device& device, uint64_t pointer, const char* name) {
  if (pointer == 0) return;
  const std::optional<int> owner = device.pointer_device(pointer);
  if (owner && *owner != device.ordinal())
    fail(HM_ERROR_WRONG_DEVICE, std::string(name) + " (" + hex(pointer) + ") is memory of device " +
                                    std::to_string(*owner) + ", but the context is on device " +
                                    std::to_string(device.ordinal()));
}

void require_stream_on_device(const runtime::Device& device, runtime::CUstream stream) {
  const std::optional<bool> owns = device.owns_stream(stream);
  if (owns && !*owns)
    fail(HM_ERROR_WRONG_DEVICE, "the stream does not belong to the context's device " +
                                    std::to_string(device.ordinal()));
}

}  // namespace hm::api
