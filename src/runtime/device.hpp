// One CUDA device with its retained primary context: the unit an hm_context wraps. Every method
// makes the context current on the calling thread for its duration, so a Device can be shared by
// any number of threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "runtime/driver.hpp"

namespace hm::runtime {

struct DeviceProperties {
  int ordinal = 0;
  int cc_major = 0, cc_minor = 0;
  std::string name;
  int multiprocessors = 0;
  int max_threads_per_block = 0;
  int64_t smem_per_block_optin = 0;  // bytes a block may use once it opts in (see launch.hpp)
  int64_t l2_bytes = 0;
  int64_t total_memory = 0;
  std::string arch;  // compile target, arch_for_compute_capability(cc_major, cc_minor)
};

class Device {
 public:
  // Throws HM_ERROR_NO_DEVICE (naming the device count) for an ordinal out of range.
  Device(std::shared_ptr<const Driver> driver, int ordinal);
  ~Device();  // releases the primary context
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const Driver& driver() const { return *driver_; }
  const std::shared_ptr<const Driver>& shared_driver() const { return driver_; }
  int ordinal() const { return properties_.ordinal; }
  CUcontext context() const { return context_; }
  const DeviceProperties& properties() const { return properties_; }
  // Whether launches that may be programmatic (runtime/launch.hpp, Order::kProgrammatic) are, where
  // the device and driver allow them; on by default, off by HUMMING_DISABLE_PROGRAMMATIC_LAUNCH
  // (the context reads it). Set before the device is shared between threads.
  bool programmatic_launches() const { return programmatic_launches_; }
  void set_programmatic_launches(bool on) { programmatic_launches_ = on; }

  // Makes the device's primary context current on this thread until the end of the scope
  // (push / pop, so whatever was current before is current again afterwards). Scopes nest for
  // free: within a live Scope of the same context on this thread a Scope pushes nothing, so an
  // API call opens one Scope and the helpers it calls (each with a Scope of its own, for callers
  // without one) add no context switches (hm_plan_gemm: one push and one pop per call).
  class Scope {
   public:
    explicit Scope(const Device& device);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    const Device& device_;
    CUcontext outer_;      // what the enclosing Scope on this thread made current (or null)
    bool pushed_ = false;  // false: nested in a Scope of the same context
  };

  // Device memory (cuMemAlloc / cuMemFree). alloc(0) is an error; free(0) does nothing.
  uint64_t alloc(size_t bytes) const;
  void free(uint64_t pointer) const;
  // Synchronous copies: on return the destination holds the data, for work on any stream (the
  // host-to-device copy waits for its DMA, which cuMemcpyHtoD alone does not from pageable
  // memory); a size of 0 does nothing.
  void copy_to_device(uint64_t dst, const void* src, size_t bytes) const;
  void copy_to_host(void* dst, uint64_t src, size_t bytes) const;
  void memset_async(uint64_t dst, uint8_t value, size_t bytes, CUstream stream) const;

  CUstream create_stream() const;  // non-blocking (does not wait on the legacy default stream)
  void destroy_stream(CUstream stream) const;
  void synchronize(CUstream stream) const;  // nullptr: the legacy default stream

  // Ownership checks for HM_ERROR_WRONG_DEVICE. nullopt when the driver cannot tell (optional
  // entry point missing, or memory the driver does not know, such as plain host memory).
  std::optional<int> pointer_device(uint64_t pointer) const;
  std::optional<bool> owns_stream(CUstream stream) const;

  // Raises the function's dynamic shared memory limit to at least `bytes`, once per function
  // (launch() does it for launches above 48 KiB). Kernels that also use static shared memory
  // should call this before their first launch with any dynamic size.
  void ensure_dynamic_shared_memory(CUfunction function, uint32_t bytes) const;

 private:
  friend class Module;
  void forget_function(CUfunction function) const;  // its module is being unloaded

  std::shared_ptr<const Driver> driver_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  DeviceProperties properties_;
  bool programmatic_launches_ = true;
  mutable std::mutex shared_memory_mutex_;
  mutable std::unordered_map<CUfunction, uint32_t> dynamic_shared_limit_;
};

}  // namespace hm::runtime
