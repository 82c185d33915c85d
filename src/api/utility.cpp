#include "api/utility.hpp"

#include <mutex>

namespace hm::api {

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

}  // namespace hm::api
