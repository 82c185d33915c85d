// Loading kernel images into a device (see module.hpp).
#include "runtime/module.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace hm::runtime {
namespace {

constexpr size_t kJitLogBytes = 16 * 1024;

}  // namespace

Module::Module(const Device& device, const std::string& image) : device_(device) {
  HM_REQUIRE(!image.empty(), HM_ERROR_INVALID_ARGUMENT, "the kernel image to load is empty");
  const Driver& driver = device.driver();
  // The driver JIT (PTX) writes why it failed here; the size option's value is the capacity.
  std::string error_log(kJitLogBytes, '\0');
  int options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {error_log.data(), reinterpret_cast<void*>(uintptr_t{kJitLogBytes - 1})};

  Device::Scope scope(device);
  // std::string keeps a NUL after the data, which PTX text needs.
  const CUresult result =
      driver.api().cuModuleLoadDataEx(&module_, image.c_str(), 2, options, values);
  if (result != CUDA_SUCCESS) {
    std::string detail = "loading a " + std::to_string(image.size()) + "-byte image on device " +
                         std::to_string(device.ordinal()) + " (" + device.properties().arch + ")";
    error_log.resize(error_log.find('\0') == std::string::npos ? error_log.size()
                                                               : error_log.find('\0'));
    if (!error_log.empty()) detail += "; driver JIT log:\n" + error_log;
    driver.fail_call(result, "cuModuleLoadDataEx", detail);
  }
}

Module::~Module() {
  const DriverApi& api = device_.driver().api();
  for (CUfunction function : functions_) device_.forget_function(function);
  // No Scope here: a destructor must not throw. Failures are ignored; nothing can be done.
  CUcontext popped = nullptr;
  const bool pushed = api.cuCtxPushCurrent(device_.context()) == CUDA_SUCCESS;
  api.cuModuleUnload(module_);
  if (pushed) api.cuCtxPopCurrent(&popped);
}

CUfunction Module::function(const std::string& name) const {
  const Driver& driver = device_.driver();
  CUfunction function = nullptr;
  {
    Device::Scope scope(device_);
    const CUresult result = driver.api().cuModuleGetFunction(&function, module_, name.c_str());
    if (result == CUDA_ERROR_NOT_FOUND)
      driver.fail_call(result, "cuModuleGetFunction",
                       "the loaded image has no kernel named '" + name +
                           "' (check the extern \"C\" entry name or the compiler's lowered name)");
    if (result != CUDA_SUCCESS)
      driver.fail_call(result, "cuModuleGetFunction", "looking up kernel '" + name + "'");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (std::find(functions_.begin(), functions_.end(), function) == functions_.end())
    functions_.push_back(function);
  return function;
}

}  // namespace hm::runtime
