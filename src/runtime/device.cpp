// A device and its primary context (see device.hpp).
#include "runtime/device.hpp"

#include <utility>

#include "core/error.hpp"
#include "runtime/arch.hpp"

namespace hm::runtime {
namespace {

// CU_STREAM_LEGACY and CU_STREAM_PER_THREAD: handles that mean "this context's default stream".
bool is_default_stream(CUstream stream) {
  const uintptr_t value = reinterpret_cast<uintptr_t>(stream);
  return value == 0 || value == 1 || value == 2;
}

// The context the innermost live Scope on this thread made current, or null. In this library
// only Scopes change the current context (Module's destructor pushes and pops in a pair), so
// while a Scope lives its context stays current and a nested Scope of it needs no push.
thread_local CUcontext t_scope_context = nullptr;

std::string bytes_detail(const char* what, size_t bytes, int ordinal) {
  return std::string(what) + " " + std::to_string(bytes) + " bytes on device " +
         std::to_string(ordinal);
}

}  // namespace

Device::Device(std::shared_ptr<const Driver> driver, int ordinal) : driver_(std::move(driver)) {
  HM_REQUIRE(driver_ != nullptr, HM_ERROR_INVALID_ARGUMENT, "Device needs a loaded driver");
  const int count = driver_->device_count();
  if (count == 0)
    fail(HM_ERROR_NO_DEVICE, "no CUDA device found: the driver " + driver_->path() +
                                 " reports 0 devices (check CUDA_VISIBLE_DEVICES), or create "
                                 "the context with HM_NO_DEVICE and a target arch");
  if (ordinal < 0 || ordinal >= count)
    fail(HM_ERROR_NO_DEVICE, "device ordinal " + std::to_string(ordinal) +
                                 " is out of range: the driver reports " + std::to_string(count) +
                                 " device(s), ordinals 0 to " + std::to_string(count - 1));
  const DriverApi& api = driver_->api();
  driver_->check(api.cuDeviceGet(&device_, ordinal), "cuDeviceGet");

  DeviceProperties& p = properties_;
  p.ordinal = ordinal;
  char name[256] = {};
  driver_->check(api.cuDeviceGetName(name, sizeof(name) - 1, device_), "cuDeviceGetName");
  p.name = name;
  auto attribute = [&](int id, const char* what) {
    int value = 0;
    driver_->check(api.cuDeviceGetAttribute(&value, id, device_), "cuDeviceGetAttribute", what);
    return value;
  };
  p.cc_major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability major");
  p.cc_minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability minor");
  p.multiprocessors = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessor count");
  p.max_threads_per_block =
      attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "max threads per block");
  p.smem_per_block_optin = attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                     "opt-in shared memory per block");
  p.l2_bytes = attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 cache size");
  size_t total = 0;
  driver_->check(api.cuDeviceTotalMem(&total, device_), "cuDeviceTotalMem");
  p.total_memory = static_cast<int64_t>(total);
  p.arch = arch_for_compute_capability(p.cc_major, p.cc_minor);

  // Last, so that nothing above can fail with the context retained.
  driver_->check(api.cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain",
                 ("device " + std::to_string(ordinal)).c_str());
}

Device::~Device() {
  // Nothing to do about a failure here; the driver reclaims the context at exit anyway.
  driver_->api().cuDevicePrimaryCtxRelease(device_);
}

Device::Scope::Scope(const Device& device) : device_(device), outer_(t_scope_context) {
  if (outer_ == device.context_) return;
  device.driver_->check(device.driver_->api().cuCtxPushCurrent(device.context_),
                        "cuCtxPushCurrent");
  pushed_ = true;
  t_scope_context = device.context_;
}

Device::Scope::~Scope() {
  if (!pushed_) return;
  CUcontext popped = nullptr;
  // Cannot throw here; a failed pop leaves the context current, which is harmless.
  device_.driver_->api().cuCtxPopCurrent(&popped);
  t_scope_context = outer_;
}

uint64_t Device::alloc(size_t bytes) const {
  HM_REQUIRE(bytes > 0, HM_ERROR_INVALID_ARGUMENT, "cannot allocate 0 bytes of device memory");
  Scope scope(*this);
  CUdeviceptr pointer = 0;
  const CUresult result = driver_->api().cuMemAlloc(&pointer, bytes);
  if (result != CUDA_SUCCESS)
    driver_->fail_call(result, "cuMemAlloc", bytes_detail("allocating", bytes, ordinal()));
  return pointer;
}

void Device::free(uint64_t pointer) const {
  if (pointer == 0) return;
  Scope scope(*this);
  driver_->check(driver_->api().cuMemFree(pointer), "cuMemFree");
}

void Device::copy_to_device(uint64_t dst, const void* src, size_t bytes) const {
  if (bytes == 0) return;
  Scope scope(*this);
  const CUresult result = driver_->api().cuMemcpyHtoD(dst, src, bytes);
  if (result != CUDA_SUCCESS)
    driver_->fail_call(result, "cuMemcpyHtoD", bytes_detail("copying", bytes, ordinal()));
  // From pageable memory cuMemcpyHtoD may return once the bytes are staged, before the DMA has
  // written them; only the legacy stream is ordered after it. Work the caller then puts on a
  // non-blocking stream (a graph replay, say) could read the old bytes, so the copy is waited
  // for here: "synchronous" means the device memory holds the data on return (an H100 saw a
  // routing graph on a non-blocking stream read stale ids, NOTES v36).
  driver_->check(driver_->api().cuStreamSynchronize(nullptr), "cuStreamSynchronize");
}

void Device::copy_to_host(void* dst, uint64_t src, size_t bytes) const {
  if (bytes == 0) return;
  Scope scope(*this);
  const CUresult result = driver_->api().cuMemcpyDtoH(dst, src, bytes);
  if (result != CUDA_SUCCESS)
    driver_->fail_call(result, "cuMemcpyDtoH", bytes_detail("copying", bytes, ordinal()));
}

void Device::memset_async(uint64_t dst, uint8_t value, size_t bytes, CUstream stream) const {
  if (bytes == 0) return;
  Scope scope(*this);
  const CUresult result = driver_->api().cuMemsetD8Async(dst, value, bytes, stream);
  if (result != CUDA_SUCCESS)
    driver_->fail_call(result, "cuMemsetD8Async", bytes_detail("setting", bytes, ordinal()));
}

CUstream Device::create_stream() const {
  Scope scope(*this);
  CUstream stream = nullptr;
  driver_->check(driver_->api().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  return stream;
}

void Device::destroy_stream(CUstream stream) const {
  if (stream == nullptr) return;
  Scope scope(*this);
  driver_->check(driver_->api().cuStreamDestroy(stream), "cuStreamDestroy");
}

void Device::synchronize(CUstream stream) const {
  Scope scope(*this);
  driver_->check(driver_->api().cuStreamSynchronize(stream), "cuStreamSynchronize");
}

std::optional<int> Device::pointer_device(uint64_t pointer) const {
  if (!driver_->has_pointer_get_attribute()) return std::nullopt;
  int device_ordinal = -1;
  const CUresult result = driver_->api().cuPointerGetAttribute(
      &device_ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, pointer);
  if (result == CUDA_ERROR_INVALID_VALUE) return std::nullopt;  // not memory the driver knows
  driver_->check(result, "cuPointerGetAttribute");
  return device_ordinal;
}

std::optional<bool> Device::owns_stream(CUstream stream) const {
  if (is_default_stream(stream)) return true;  // resolved against the current (our) context
  if (!driver_->has_stream_get_ctx()) return std::nullopt;
  Scope scope(*this);
  CUcontext stream_context = nullptr;
  const CUresult result = driver_->api().cuStreamGetCtx(stream, &stream_context);
  if (result == CUDA_ERROR_INVALID_HANDLE || result == CUDA_ERROR_INVALID_CONTEXT) return false;
  driver_->check(result, "cuStreamGetCtx");
  return stream_context == context_;
}

void Device::ensure_dynamic_shared_memory(CUfunction function, uint32_t bytes) const {
  std::lock_guard<std::mutex> lock(shared_memory_mutex_);
  auto it = dynamic_shared_limit_.find(function);
  if (it != dynamic_shared_limit_.end() && it->second >= bytes) return;
  if (static_cast<int64_t>(bytes) > properties_.smem_per_block_optin)
    fail(HM_ERROR_LAUNCH, "the kernel needs " + std::to_string(bytes) +
                              " bytes of dynamic shared memory; device " +
                              std::to_string(ordinal()) + " (" + properties_.name + ") allows " +
                              std::to_string(properties_.smem_per_block_optin) +
                              " per block: choose a tuning config that fits this device");
  Scope scope(*this);
  driver_->check(
      driver_->api().cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        static_cast<int>(bytes)),
      "cuFuncSetAttribute", "raising the dynamic shared memory limit");
  dynamic_shared_limit_[function] = bytes;
}

void Device::forget_function(CUfunction function) const {
  std::lock_guard<std::mutex> lock(shared_memory_mutex_);
  dynamic_shared_limit_.erase(function);
}

}  // namespace hm::runtime
