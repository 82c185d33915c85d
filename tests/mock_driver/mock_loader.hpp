// Test helpers for the mock CUDA driver: the paths of its three builds, its control functions
// (mock_control.h) reached through dlopen, and scoped environment variables for its switches.
// Header-only; used by tests/api/test_runtime_*.cpp (and any test that runs on the mock).
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>

#include "mock_driver/mock_control.h"

namespace hm::test {

// The mock's path (HM_MOCK_DRIVER_PATH), or a reduced build next to it: variant "_minimal"
// (no cuGetProcAddress, no optional entry points) or "_no_launch" (also no cuLaunchKernel and
// cuMemAlloc_v2).
inline std::string mock_driver_path(const std::string& variant = "") {
  const std::string full = HM_MOCK_DRIVER_PATH;
  const std::string stem = "humming_mock_cuda";
  const size_t at = full.rfind(stem);
  if (at == std::string::npos) throw std::runtime_error("unexpected mock path " + full);
  return full.substr(0, at + stem.size()) + variant + full.substr(at + stem.size());
}

// The control functions of one mock library (each build has its own state).
class MockControl {
 public:
  explicit MockControl(const std::string& path = mock_driver_path())
      : handle_(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    if (handle_ == nullptr) throw std::runtime_error("cannot dlopen the mock " + path);
  }
  ~MockControl() { dlclose(handle_); }
  MockControl(const MockControl&) = delete;
  MockControl& operator=(const MockControl&) = delete;

  void reset() const { get<hm_mock_reset_fn>("hm_mock_reset")(); }
  std::optional<hm_mock_launch_t> last_launch() const {
    hm_mock_launch_t launch{};
    if (get<hm_mock_last_launch_fn>("hm_mock_last_launch")(&launch) != 0) return std::nullopt;
    return launch;
  }
  int64_t launch_count() const { return get<hm_mock_launch_count_fn>("hm_mock_launch_count")(); }
  int64_t live_allocations() const {
    return get<hm_mock_live_allocations_fn>("hm_mock_live_allocations")();
  }
  int64_t live_modules() const { return get<hm_mock_live_modules_fn>("hm_mock_live_modules")(); }
  int64_t live_streams() const { return get<hm_mock_live_streams_fn>("hm_mock_live_streams")(); }
  int primary_ctx_refcount(int ordinal) const {
    return get<hm_mock_primary_ctx_refcount_fn>("hm_mock_primary_ctx_refcount")(ordinal);
  }
  int64_t proc_address_calls() const {
    return get<hm_mock_proc_address_calls_fn>("hm_mock_proc_address_calls")();
  }
  int64_t func_attribute_sets() const {
    return get<hm_mock_func_attribute_sets_fn>("hm_mock_func_attribute_sets")();
  }
  int64_t newer_abi_calls() const {
    return get<hm_mock_newer_abi_calls_fn>("hm_mock_newer_abi_calls")();
  }
  // Driver calls since the reset to the entry point `name` (its exported symbol), or to all.
  int64_t driver_calls(const char* name = nullptr) const {
    return get<hm_mock_driver_calls_fn>("hm_mock_driver_calls")(name);
  }
  // "cuCtxPopCurrent_v2=1 cuCtxPushCurrent_v2=1 ...": every entry point called since the reset.
  std::string driver_call_summary() const {
    auto fn = get<hm_mock_driver_call_summary_fn>("hm_mock_driver_call_summary");
    std::string text(static_cast<size_t>(fn(nullptr, 0)) + 1, '\0');
    fn(text.data(), static_cast<int64_t>(text.size()));
    text.pop_back();
    return text;
  }
  std::string last_image() const {
    auto fn = get<hm_mock_last_image_fn>("hm_mock_last_image");
    std::string image(static_cast<size_t>(fn(nullptr, 0)), '\0');
    fn(image.data(), static_cast<int64_t>(image.size()));
    return image;
  }
  // A stream of device `ordinal`'s primary context, or of another context of that device.
  void* create_stream(int ordinal, bool own_context = false) const {
    void* stream = nullptr;
    if (get<hm_mock_stream_create_fn>("hm_mock_stream_create")(ordinal, own_context, &stream) != 0)
      throw std::runtime_error("hm_mock_stream_create failed for device " + std::to_string(ordinal));
    return stream;
  }
  void destroy_stream(void* stream) const {
    using Destroy = int (*)(void*);
    if (get<Destroy>("cuStreamDestroy_v2")(stream) != 0)
      throw std::runtime_error("cuStreamDestroy_v2 failed");
  }
  // Runs `body` with device `ordinal`'s primary context retained and current, as memory entry
  // points (cuMemAllocManaged, cuMemHostRegister_v2) need; returns what the body returns.
  template <typename Body>
  int in_context(int ordinal, Body&& body) const {
    using Retain = int (*)(void**, int);
    using Release = int (*)(int);
    using Push = int (*)(void*);
    using Pop = int (*)(void**);
    void* context = nullptr;
    if (get<Retain>("cuDevicePrimaryCtxRetain")(&context, ordinal) != 0)
      throw std::runtime_error("cuDevicePrimaryCtxRetain failed");
    get<Push>("cuCtxPushCurrent_v2")(context);
    const int result = body();
    void* popped = nullptr;
    get<Pop>("cuCtxPopCurrent_v2")(&popped);
    get<Release>("cuDevicePrimaryCtxRelease_v2")(ordinal);
    return result;
  }
  // Any exported symbol of the mock, e.g. a cu* entry point to call directly.
  void* symbol(const char* name) const { return dlsym(handle_, name); }
  // The mock's entry points for memory the library never allocates itself (managed memory,
  // registered host memory), for tests that make such memory; null where the mock lacks one.
  struct MemoryCalls {
    int (*alloc_managed)(uint64_t*, size_t, unsigned) = nullptr;  // cuMemAllocManaged
    int (*host_register)(void*, size_t, unsigned) = nullptr;      // cuMemHostRegister_v2
    int (*host_unregister)(void*) = nullptr;                      // cuMemHostUnregister
    int (*mem_free)(uint64_t) = nullptr;                          // cuMemFree_v2
    bool complete() const { return alloc_managed && host_register && host_unregister && mem_free; }
  };
  MemoryCalls memory_calls() const {
    MemoryCalls m;
    m.alloc_managed = reinterpret_cast<decltype(m.alloc_managed)>(symbol("cuMemAllocManaged"));
    m.host_register = reinterpret_cast<decltype(m.host_register)>(symbol("cuMemHostRegister_v2"));
    m.host_unregister = reinterpret_cast<decltype(m.host_unregister)>(symbol("cuMemHostUnregister"));
    m.mem_free = reinterpret_cast<decltype(m.mem_free)>(symbol("cuMemFree_v2"));
    return m;
  }

 private:
  template <typename Fn>
  Fn get(const char* name) const {
    void* p = dlsym(handle_, name);
    if (p == nullptr) throw std::runtime_error(std::string("the mock lacks ") + name);
    return reinterpret_cast<Fn>(p);
  }
  void* handle_;
};

// Sets (or, with nullptr, unsets) an environment variable for the scope, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_.c_str(), old_->c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace hm::test
