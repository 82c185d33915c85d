// The CUDA driver library, loaded with dlopen (never linked) and its entry points resolved by
// ABI version, so one libhumming.so runs on any driver new enough and on CUDA-compatible
// runtimes. Everything else in src/runtime/ calls the driver through Driver::api() and
// Driver::check().
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "humming.h"
#include "runtime/driver_types.hpp"

namespace hm::runtime {

// Entry points resolved after cuInit: X(base name, versioned-symbol suffix, ABI version).
// The version is the one whose signature the matching PFN_ type declares. It matters: asking
// cuGetProcAddress for a newer version can return another function under the same base name
// (cuCtxSynchronize at 13000 takes a context; cuStreamGetCtx at 12050 takes a green context).
#define HM_DRIVER_REQUIRED_ENTRY_POINTS(X) \
  X(cuDeviceGetCount, , 2000)              \
  X(cuDeviceGet, , 2000)                   \
  X(cuDeviceGetName, , 2000)               \
  X(cuDeviceGetAttribute, , 2000)          \
  X(cuDeviceTotalMem, _v2, 3020)           \
  X(cuDevicePrimaryCtxRetain, , 7000)      \
  X(cuDevicePrimaryCtxRelease, _v2, 11000) \
  X(cuCtxPushCurrent, _v2, 4000)           \
  X(cuCtxPopCurrent, _v2, 4000)            \
  X(cuCtxSynchronize, , 2000)              \
  X(cuModuleLoadDataEx, , 2010)            \
  X(cuModuleUnload, , 2000)                \
  X(cuModuleGetFunction, , 2000)           \
  X(cuFuncSetAttribute, , 9000)            \
  X(cuFuncGetAttribute, , 2020)            \
  X(cuLaunchKernel, , 4000)                \
  X(cuMemAlloc, _v2, 3020)                 \
  X(cuMemFree, _v2, 3020)                  \
  X(cuMemcpyHtoD, _v2, 3020)               \
  X(cuMemcpyDtoH, _v2, 3020)               \
  X(cuMemsetD8Async, , 3020)               \
  X(cuStreamCreate, , 2000)                \
  X(cuStreamDestroy, _v2, 4000)            \
  X(cuStreamSynchronize, , 2000)

// Entry points that may be absent: each one missing is a missing capability, never an error
// until a caller needs it (see the has_*() queries).
#define HM_DRIVER_OPTIONAL_ENTRY_POINTS(X) \
  X(cuLaunchKernelEx, , 11060)             \
  X(cuOccupancyMaxActiveClusters, , 11070) \
  X(cuTensorMapEncodeTiled, , 12000)       \
  X(cuPointerGetAttribute, , 4000)         \
  X(cuPointerGetAttributes, , 7000)        \
  X(cuStreamGetCtx, , 9020)

// The resolved entry points; optional ones may be null.
struct DriverApi {
  PFN_cuInit_v2000 cuInit = nullptr;
  PFN_cuDriverGetVersion_v2020 cuDriverGetVersion = nullptr;
  PFN_cuGetErrorName_v6000 cuGetErrorName = nullptr;      // optional
  PFN_cuGetErrorString_v6000 cuGetErrorString = nullptr;  // optional
#define HM_DRIVER_API_FIELD(name, suffix, version) PFN_##name##_v##version name = nullptr;
  HM_DRIVER_REQUIRED_ENTRY_POINTS(HM_DRIVER_API_FIELD)
  HM_DRIVER_OPTIONAL_ENTRY_POINTS(HM_DRIVER_API_FIELD)
#undef HM_DRIVER_API_FIELD
};

class Driver {
 public:
  // The process-wide driver, loaded once on first success (a failure is retried on the next
  // call). Loads HUMMING_CUDA_DRIVER_PATH when set (and only that), else libcuda.so.1, then
  // libcuda.so. Throws HM_ERROR_DRIVER_NOT_FOUND listing every path tried with its dlerror(),
  // HM_ERROR_DRIVER_SYMBOL naming missing required entry points, HM_ERROR_CUDA if cuInit fails.
  // A driver that finds no device (cuInit says CUDA_ERROR_NO_DEVICE) loads with device_count 0.
  static std::shared_ptr<const Driver> shared();
  // Loads the library at `path` on its own, independent of shared() (tests, tools).
  static std::shared_ptr<const Driver> load(const std::string& path);
  // The paths shared() tries, in order.
  static std::vector<std::string> candidate_paths();

  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // The file that was loaded (the full path where the dynamic loader reports it).
  const std::string& path() const { return path_; }
  int version() const { return version_; }  // cuDriverGetVersion: 13000 for CUDA 13.0
  int device_count() const { return device_count_; }

  // How entry points were found: through cuGetProcAddress_v2 when the library has it.
  bool has_get_proc_address() const { return get_proc_address_ != nullptr; }
  bool has_launch_kernel_ex() const { return api_.cuLaunchKernelEx != nullptr; }
  bool has_occupancy_max_active_clusters() const {
    return api_.cuOccupancyMaxActiveClusters != nullptr;
  }
  bool has_tensor_map_encode_tiled() const { return api_.cuTensorMapEncodeTiled != nullptr; }
  bool has_pointer_get_attribute() const { return api_.cuPointerGetAttribute != nullptr; }
  bool has_pointer_get_attributes() const { return api_.cuPointerGetAttributes != nullptr; }
  bool has_stream_get_ctx() const { return api_.cuStreamGetCtx != nullptr; }
  // Whether cuPointerGetAttributes answers the allocation range attributes (RANGE_START_ADDR /
  // RANGE_SIZE): taken as yes until a query with them fails where one without them succeeds (a
  // CUDA-compatible runtime that knows only the older attributes), then no for good, so that
  // such a runtime pays one failed query, not one per pointer per call.
  bool answers_pointer_ranges() const {
    return pointer_ranges_.load(std::memory_order_relaxed);
  }
  void note_no_pointer_ranges() const { pointer_ranges_.store(false, std::memory_order_relaxed); }

  const DriverApi& api() const { return api_; }

  // Throws hm::Error for a failed driver call: "<call> failed: CUDA_ERROR_X (text)[: detail]"
  // with the status from status_for_cuda_error(). Free when `result` is CUDA_SUCCESS.
  void check(CUresult result, const char* call, const char* detail = nullptr) const {
    if (result != CUDA_SUCCESS)
      fail_call(result, call, detail ? std::string(detail) : std::string());
  }
  [[noreturn]] void fail_call(CUresult result, const char* call, const std::string& detail) const;

  // "CUDA_ERROR_OUT_OF_MEMORY" / "out of memory", from the driver when it can say, else from
  // our own table, else "CUDA error <n>". Safe when the driver lacks cuGetErrorName/String.
  std::string error_name(CUresult result) const;
  std::string error_string(CUresult result) const;

 private:
  Driver() = default;
  static std::shared_ptr<const Driver> initialize(void* handle, const std::string& path);
  void* resolve(const char* base_name, const char* versioned_name, int abi_version) const;

  void* handle_ = nullptr;  // never dlclose'd: drivers keep threads and handlers alive
  std::string path_;
  int version_ = 0;
  int device_count_ = 0;
  PFN_cuGetProcAddress_v12000 get_proc_address_ = nullptr;
  DriverApi api_;
  mutable std::atomic<bool> pointer_ranges_{true};
};

// The hm status for a CUDA error: out of memory -> HM_ERROR_DEVICE_OUT_OF_MEMORY, launch and
// kernel faults -> HM_ERROR_LAUNCH, no / invalid device -> HM_ERROR_NO_DEVICE, else HM_ERROR_CUDA.
hm_status_t status_for_cuda_error(CUresult result);

}  // namespace hm::runtime
