// A loaded cubin or PTX image (cuModuleLoadDataEx) and the kernels in it. PTX is compiled by the
// driver's JIT on load; its error log goes into the exception's message.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "runtime/device.hpp"

namespace hm::runtime {

class Module {
 public:
  // Loads `image` (cubin bytes or NUL-free PTX text) into the device's primary context.
  // The Device must outlive the Module.
  Module(const Device& device, const std::string& image);
  ~Module();  // unloads it
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The kernel named `name` (its extern "C" or mangled entry name). Throws HM_ERROR_CUDA naming
  // the symbol when the image has no such kernel. Valid while the Module lives.
  CUfunction function(const std::string& name) const;

  const Device& device() const { return device_; }

 private:
  const Device& device_;
  CUmodule module_ = nullptr;
  mutable std::mutex mutex_;
  mutable std::vector<CUfunction> functions_;  // handed out, forgotten by the Device on unload
};

}  // namespace hm::runtime
