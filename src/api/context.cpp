// Contexts, runtime info and the small device helpers of the C ABI.
#include "api/context.hpp"

#include <cstring>
#include <string>

#include "api/guard.hpp"
#include "core/env.hpp"
#include "jit/kernel_sources.hpp"
#include "runtime/driver.hpp"

namespace hm::api {

const jit::Compiler& ContextState::compiler() {
  std::lock_guard<std::mutex> lock(compiler_mutex_);
  if (!compiler_) compiler_ = jit::make_compiler(compiler_choice);
  return *compiler_;
}

namespace {

// The compile target for a device: its native arch when Humming knows the family, else PTX for
// the newest known arch it can run (the driver compiles it on load), so an unknown but
// CUDA-compatible device still gets a correct kernel.
std::string target_for_device(const core::Arch& native, core::Arch* chosen) {
  for (const core::Arch& known : core::known_archs()) {
    if (known.major == native.major && known.minor == native.minor) {
      *chosen = native;
      return native.name();
    }
  }
  core::Arch best;
  for (const core::Arch& known : core::known_archs())
    if (known.compute_capability() <= native.compute_capability()) best = known;
  if (best.major == 0)
    fail(HM_ERROR_UNSUPPORTED_ARCH, "the device's compute capability " + native.name() +
                                        " is older than the oldest supported arch (sm_75)");
  best.suffix = '\0';  // PTX of the plain variant runs on any newer device
  *chosen = best;
  return best.virtual_name();
}

void copy_field(char* dst, size_t size, const std::string& src) {
  size_t n = src.size() < size - 1 ? src.size() : size - 1;
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

hm_context* context_or_throw(hm_context* c, const char* name) {
  require_not_null(c, name);
  return c;
}

const runtime::Device& device_of(const hm_context* c) {
  if (!c->state->device)
    fail(HM_ERROR_NO_DEVICE, "the context was created without a device (HM_NO_DEVICE, for "
                             "ahead-of-time compilation); create one with a device ordinal");
  return *c->state->device;
}

}  // namespace
}  // namespace hm::api

using namespace hm;
using namespace hm::api;

extern "C" {

HM_API void hm_context_options_init(hm_context_options_t* options) {
  if (!options) return;
  std::memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
  options->device = 0;
  options->compiler = HM_COMPILER_DEFAULT;
}

HM_API hm_status_t hm_context_create(const hm_context_options_t* options, hm_context_t** out) {
  if (out) *out = nullptr;
  return HM_API_CALL({
    require_not_null(options, "options");
    require_not_null(out, "out");
    require_struct_size(options->struct_size, sizeof(hm_context_options_t), "options");
    if (options->compiler < HM_COMPILER_DEFAULT || options->compiler > HM_COMPILER_NVCC)
      fail(HM_ERROR_INVALID_ARGUMENT, "options->compiler is " + std::to_string(options->compiler) +
                                          ", expected HM_COMPILER_DEFAULT, _NVRTC or _NVCC");
    const uint32_t known_flags = HM_CONTEXT_DISABLE_JIT | HM_CONTEXT_NO_CACHE;
    if (options->flags & ~known_flags)
      fail(HM_ERROR_INVALID_ARGUMENT, "options->flags has unknown bits " +
                                          std::to_string(options->flags & ~known_flags));
    auto state = std::make_shared<ContextState>();
    state->compiler_choice = options->compiler;
    if (options->device == HM_NO_DEVICE) {
      if (!options->target_arch)
        fail(HM_ERROR_INVALID_ARGUMENT,
             "options->target_arch is NULL: a context without a device (HM_NO_DEVICE) compiles "
             "for a named arch, e.g. \"sm_90a\"");
      state->arch = core::parse_arch(options->target_arch);
      state->arch_name = state->arch.name();
    } else if (options->device < 0) {
      fail(HM_ERROR_INVALID_ARGUMENT, "options->device is " + std::to_string(options->device) +
                                          ": use a device ordinal >= 0 or HM_NO_DEVICE");
    } else {
      state->device = std::make_unique<runtime::Device>(runtime::Driver::shared(), options->device);
      const auto& p = state->device->properties();
      if (options->target_arch) {
        state->arch = core::parse_arch(options->target_arch);
        state->arch_name = state->arch.name();
      } else {
        state->arch_name = target_for_device(core::native_arch(p.cc_major, p.cc_minor), &state->arch);
      }
    }
    // Read whatever the flags say, so that a value the parser refuses is reported, not ignored.
    const bool env_disables_jit = core::env_bool("HUMMING_DISABLE_JIT");
    const bool env_disables_programmatic = core::env_bool("HUMMING_DISABLE_PROGRAMMATIC_LAUNCH");
    if (state->device) state->device->set_programmatic_launches(!env_disables_programmatic);
    const bool jit_disabled = (options->flags & HM_CONTEXT_DISABLE_JIT) || env_disables_jit;
    state->cache = std::make_unique<jit::Cache>(options->cache_dir ? options->cache_dir : "",
                                                jit_disabled, (options->flags & HM_CONTEXT_NO_CACHE) != 0);
    *out = new hm_context{std::move(state)};
  });
}

HM_API void hm_context_destroy(hm_context_t* context) { delete context; }

HM_API void hm_device_info_init(hm_device_info_t* info) {
  if (!info) return;
  std::memset(info, 0, sizeof *info);
  info->struct_size = sizeof *info;
}

HM_API hm_status_t hm_context_device_info(const hm_context_t* context, hm_device_info_t* info) {
  return HM_API_CALL({
    require_not_null(context, "context");
    require_not_null(info, "info");
    require_struct_size(info->struct_size, sizeof(hm_device_info_t), "info");
    const ContextState& s = *context->state;
    hm_device_info_t d;
    hm_device_info_init(&d);
    copy_field(d.arch, sizeof d.arch, s.arch_name);
    if (s.device) {
      const auto& p = s.device->properties();
      d.device = p.ordinal;
      d.cc_major = p.cc_major;
      d.cc_minor = p.cc_minor;
      copy_field(d.name, sizeof d.name, p.name);
      d.multiprocessors = p.multiprocessors;
      d.shared_memory_per_block_optin = p.smem_per_block_optin;
      d.l2_cache_bytes = p.l2_bytes;
      d.total_memory_bytes = p.total_memory;
    } else {
      d.device = HM_NO_DEVICE;
      d.cc_major = s.arch.major;
      d.cc_minor = s.arch.minor;
      copy_field(d.name, sizeof d.name, "none");
    }
    d.struct_size = sizeof d;  // the bytes filled (report_filled)
    std::memcpy(info, &d, sizeof d);  // the struct is at least this size (checked above)
  });
}

HM_API void hm_runtime_info_init(hm_runtime_info_t* info) {
  if (!info) return;
  std::memset(info, 0, sizeof *info);
  info->struct_size = sizeof *info;
}

HM_API hm_status_t hm_runtime_info(hm_runtime_info_t* info) {
  return HM_API_CALL({
    require_not_null(info, "info");
    require_struct_size(info->struct_size, sizeof(hm_runtime_info_t), "info");
    hm_runtime_info_t r;
    hm_runtime_info_init(&r);
    // Each part is probed on its own: a missing driver must not hide the compiler, and so on.
    try {
      auto driver = runtime::Driver::shared();
      r.driver_version = driver->version();
      r.device_count = driver->device_count();
      copy_field(r.driver_path, sizeof r.driver_path, driver->path());
    } catch (const Error& e) {
      copy_field(r.driver_error, sizeof r.driver_error, e.message());
    }
    jit::CompilerProbe nvrtc = jit::probe_nvrtc();
    if (nvrtc.found) {
      r.nvrtc_version = nvrtc.version_code;
      copy_field(r.nvrtc_path, sizeof r.nvrtc_path, nvrtc.path);
    } else {
      copy_field(r.nvrtc_error, sizeof r.nvrtc_error, nvrtc.error);
    }
    jit::CompilerProbe nvcc = jit::probe_nvcc();
    if (nvcc.found) {
      copy_field(r.nvcc_path, sizeof r.nvcc_path, nvcc.path);
      copy_field(r.nvcc_version, sizeof r.nvcc_version, nvcc.version);
    }
    try {
      copy_field(r.kernel_sources, sizeof r.kernel_sources, jit::KernelSources::get().origin());
    } catch (const Error& e) {
      copy_field(r.kernel_sources, sizeof r.kernel_sources, "unavailable: " + e.message());
    }
    try {
      jit::Cache cache("", false, false);
      copy_field(r.cache_dir, sizeof r.cache_dir, cache.dir());
      auto stats = cache.stats();
      r.cache_bytes = stats.bytes;
      r.cache_entries = stats.entries;
    } catch (const Error& e) {
      copy_field(r.cache_dir, sizeof r.cache_dir, "unavailable: " + e.message());
    }
    r.struct_size = sizeof r;  // the bytes filled (report_filled)
    std::memcpy(info, &r, sizeof r);
  });
}

HM_API hm_status_t hm_device_alloc(hm_context_t* context, size_t bytes, uint64_t* device_pointer) {
  if (device_pointer) *device_pointer = 0;
  return HM_API_CALL({
    context_or_throw(context, "context");
    require_not_null(device_pointer, "device_pointer");
    if (bytes == 0) fail(HM_ERROR_INVALID_ARGUMENT, "argument 'bytes' is 0");
    *device_pointer = device_of(context).alloc(bytes);
  });
}

HM_API hm_status_t hm_device_free(hm_context_t* context, uint64_t device_pointer) {
  return HM_API_CALL({
    context_or_throw(context, "context");
    device_of(context).free(device_pointer);
  });
}

HM_API hm_status_t hm_copy_to_device(hm_context_t* context, uint64_t dst, const void* src,
                                     size_t bytes) {
  return HM_API_CALL({
    context_or_throw(context, "context");
    if (bytes == 0) return;
    require_not_null(src, "src");
    if (dst == 0) fail(HM_ERROR_INVALID_ARGUMENT, "argument 'dst' is a null device pointer");
    device_of(context).copy_to_device(dst, src, bytes);
  });
}

HM_API hm_status_t hm_copy_to_host(hm_context_t* context, void* dst, uint64_t src, size_t bytes) {
  return HM_API_CALL({
    context_or_throw(context, "context");
    if (bytes == 0) return;
    require_not_null(dst, "dst");
    if (src == 0) fail(HM_ERROR_INVALID_ARGUMENT, "argument 'src' is a null device pointer");
    device_of(context).copy_to_host(dst, src, bytes);
  });
}

HM_API hm_status_t hm_stream_synchronize(hm_context_t* context, void* stream) {
  return HM_API_CALL({
    context_or_throw(context, "context");
    device_of(context).synchronize(static_cast<runtime::CUstream>(stream));
  });
}

}  // extern "C"
