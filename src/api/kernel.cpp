// Kernels (compile through the cache, load into the device) and launches.
#include <cstring>
#include <string>

#include "api/context.hpp"
#include "api/device_check.hpp"
#include "api/guard.hpp"
#include "core/address.hpp"
#include "core/checked.hpp"
#include "core/dtype.hpp"
#include "jit/codegen.hpp"
#include "runtime/launch.hpp"

namespace hm::api {

std::unique_ptr<hm_kernel> build_kernel(const std::shared_ptr<ContextState>& context,
                                        const jit::GeneratedKernel& generated) {
  ContextState& state = *context;
  jit::Cache::Result result;
  jit::CompiledKernel compiled;
  // With JIT disabled the cache refuses to compile on a miss (HM_ERROR_JIT_DISABLED, saying why
  // the key missed); the compiler is still consulted for its id, which is part of the key.
  compiled = state.cache->get_or_compile(generated.request, state.compiler(), &result);
  auto kernel = std::make_unique<hm_kernel>();
  kernel->context = context;
  kernel->name = generated.request.name;
  kernel->entry = generated.entry;
  kernel->cache_key = result.key.hex;
  if (state.device) {
    kernel->module = std::make_unique<runtime::Module>(*state.device, compiled.image);
    kernel->function = kernel->module->function(generated.entry);
  }
  return kernel;
}

}  // namespace hm::api

using namespace hm;
using namespace hm::api;

extern "C" {

HM_API hm_status_t hm_launch_params_create(hm_launch_params_t** out) {
  if (out) *out = nullptr;
  return HM_API_CALL({
    require_not_null(out, "out");
    *out = new hm_launch_params();
  });
}

HM_API void hm_launch_params_destroy(hm_launch_params_t* params) { delete params; }

HM_API hm_status_t hm_launch_params_set_pointer(hm_launch_params_t* params, int32_t slot,
                                                uint64_t device_pointer) {
  return HM_API_CALL({
    require_not_null(params, "params");
    if (slot < 0 || slot >= hm_launch_params::kNamedPointerSlots)
      fail(HM_ERROR_INVALID_ARGUMENT,
           "slot " + std::to_string(slot) +
               " is not a pointer slot (HM_ARG_A .. HM_ARG_MASKED_M, i.e. 0.." +
               std::to_string(hm_launch_params::kNamedPointerSlots - 1) + ")");
    params->pointers[slot] = device_pointer;
  });
}

HM_API hm_status_t hm_launch_params_set_int(hm_launch_params_t* params, int32_t slot,
                                            int64_t value) {
  return HM_API_CALL({
    require_not_null(params, "params");
    if (slot < HM_ARG_M || slot >= HM_ARG_M + hm_launch_params::kNamedIntSlots)
      fail(HM_ERROR_INVALID_ARGUMENT,
           "slot " + std::to_string(slot) +
               " is not an integer slot (HM_ARG_M .. HM_ARG_MOE_MODE, i.e. " +
               std::to_string(HM_ARG_M) + ".." +
               std::to_string(HM_ARG_M + hm_launch_params::kNamedIntSlots - 1) + ")");
    params->ints[slot - HM_ARG_M] = value;
  });
}

HM_API hm_status_t hm_launch_params_clear(hm_launch_params_t* params) {
  return HM_API_CALL({
    require_not_null(params, "params");
    *params = hm_launch_params();
  });
}

HM_API hm_status_t hm_kernel_create_reference_gemm(hm_context_t* context, hm_dtype_t in_dtype,
                                                   hm_dtype_t out_dtype, hm_kernel_t** out) {
  if (out) *out = nullptr;
  return HM_API_CALL({
    require_not_null(context, "context");
    require_not_null(out, "out");
    const core::Dtype in = core::Dtype::from_code(in_dtype);
    const core::Dtype out_type = core::Dtype::from_code(out_dtype);
    auto generated = jit::reference_gemm_kernel(in, out_type, context->state->arch_name);
    std::unique_ptr<hm_kernel> kernel = build_kernel(context->state, generated);
    kernel->input_bytes = (in.bits() + 7) / 8;
    kernel->output_bytes = (out_type.bits() + 7) / 8;
    *out = kernel.release();
  });
}

HM_API void hm_kernel_destroy(hm_kernel_t* kernel) { delete kernel; }

HM_API hm_status_t hm_kernel_name(const hm_kernel_t* kernel, char* buf, size_t size,
                                  size_t* length) {
  return HM_API_CALL({
    require_not_null(kernel, "kernel");
    copy_out_string(kernel->name, buf, size, length);
  });
}

HM_API hm_status_t hm_kernel_cache_key(const hm_kernel_t* kernel, char* buf, size_t size,
                                       size_t* length) {
  return HM_API_CALL({
    require_not_null(kernel, "kernel");
    copy_out_string(kernel->cache_key, buf, size, length);
  });
}

HM_API hm_status_t hm_kernel_launch(const hm_kernel_t* kernel, const hm_launch_params_t* params,
                                    void* stream) {
  return HM_API_CALL({
    require_not_null(kernel, "kernel");
    require_not_null(params, "params");
    if (!kernel->module)
      fail(HM_ERROR_NO_DEVICE, "kernel '" + kernel->name +
                                   "' was compiled by a context without a device: it can be "
                                   "cached, not launched");
    const int64_t m = params->integer(HM_ARG_M), n = params->integer(HM_ARG_N),
                  k = params->integer(HM_ARG_K);
    // The limits of humming.h keep the grid arithmetic below from overflowing.
    if (m <= 0 || n <= 0 || k <= 0 || m > HM_MAX_M || n > HM_MAX_N || k > HM_MAX_K)
      fail(HM_ERROR_INVALID_ARGUMENT,
           "HM_ARG_M, HM_ARG_N and HM_ARG_K must be in [1, HM_MAX_M / HM_MAX_N / HM_MAX_K], got M=" +
               std::to_string(m) + " N=" + std::to_string(n) + " K=" + std::to_string(k));
    uint64_t a = params->pointers[HM_ARG_A], b = params->pointers[HM_ARG_B],
             c = params->pointers[HM_ARG_C];
    if (!a || !b || !c)
      fail(HM_ERROR_INVALID_ARGUMENT, std::string("pointer slot ") +
                                          (!a ? "HM_ARG_A" : !b ? "HM_ARG_B" : "HM_ARG_C") +
                                          " is not set");
    // The same device, memory and stream checks as hm_plan_gemm, and typed loads and stores
    // need their element's alignment (a misaligned address faults and ends the CUDA context).
    core::require_aligned(a, kernel->input_bytes, "HM_ARG_A");
    core::require_aligned(b, kernel->input_bytes, "HM_ARG_B");
    core::require_aligned(c, kernel->output_bytes, "HM_ARG_C");
    // The reference GEMM reads A [M][K] and B [N][K] and writes C [M][N] (sizes within the
    // limits checked above; a product past 64 bits would read as more than any allocation).
    const uint64_t in = uint64_t(kernel->input_bytes), out = uint64_t(kernel->output_bytes);
    uint64_t extents[hm_launch_params::kNamedPointerSlots] = {};
    extents[HM_ARG_A] = core::saturating_product({uint64_t(m), uint64_t(k), in});
    extents[HM_ARG_B] = core::saturating_product({uint64_t(n), uint64_t(k), in});
    extents[HM_ARG_C] = core::saturating_product({uint64_t(m), uint64_t(n), out});
    const runtime::Device::Scope current(*kernel->context->device);
    check_launch_device(*kernel->context->device, *params, static_cast<runtime::CUstream>(stream),
                        extents);
    // The reference GEMM: a (ceil(N/16), ceil(M/16)) grid of 16x16 threads.
    constexpr int64_t kTile = 16, kMaxGridY = 65535;
    const int64_t grid_x = (n + kTile - 1) / kTile, grid_y = (m + kTile - 1) / kTile;
    if (grid_y > kMaxGridY || grid_x > 0x7fffffff)
      fail(HM_ERROR_UNSUPPORTED, "the reference GEMM handles M up to " +
                                     std::to_string(kMaxGridY * kTile) + ", got " + std::to_string(m));
    long long mm = m, nn = n, kk = k;
    void* args[] = {&a, &b, &c, &mm, &nn, &kk};
    runtime::launch(*kernel->context->device, kernel->function,
                    runtime::Dim3{static_cast<uint32_t>(grid_x), static_cast<uint32_t>(grid_y), 1},
                    runtime::Dim3{kTile, kTile, 1}, 0, static_cast<runtime::CUstream>(stream), args,
                    kernel->entry.c_str());
  });
}

}  // extern "C"
