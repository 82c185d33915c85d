// A fake CUDA driver (libcuda) in host memory, so CI without a GPU can test the runtime: the
// driver loader, error mapping, contexts, modules, launches and device memory. It keeps the real
// driver's rules where the runtime could break them (a context must be current, pointers must be
// inside allocations, shared memory above 48 KiB needs the function attribute, entry points are
// resolved by ABI version), and "device memory" is host memory, so tests can check results.
//
// Environment, read at call time:
//   HM_MOCK_DEVICES=90,80       compute capabilities of the devices (default "90,80"; major*10 +
//                               minor, e.g. 75, 86, 100, 121). Empty: cuInit says NO_DEVICE.
//   HM_MOCK_FAIL_INIT=1         cuInit fails with CUDA_ERROR_SYSTEM_DRIVER_MISMATCH; any other
//                               number N > 1 makes it fail with CUresult N (34: a stub library).
//   HM_MOCK_FAIL_ALLOC=1        cuMemAlloc_v2 fails with CUDA_ERROR_OUT_OF_MEMORY.
//   HM_MOCK_FAIL_LAUNCH=1       cuLaunchKernel(Ex) fails with CUDA_ERROR_LAUNCH_FAILED.
//   HM_MOCK_MAX_CLUSTER=N       cuOccupancyMaxActiveClusters answers 0 for clusters of more than
//                               N blocks (default 8: one processing cluster's worth).
//   HM_MOCK_HIDE_SYMBOLS=a,b    cuGetProcAddress_v2 answers CUDA_ERROR_NOT_FOUND with
//                               CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND for these base names.
//   HM_MOCK_PAGEABLE_MEMORY_ACCESS=1  devices report CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS
//                               (they could read plain host memory, as with HMM or ATS).
//   HM_MOCK_FAIL_POINTER_GET_ATTRIBUTES=1  cuPointerGetAttributes (plural) fails with
//                               CUDA_ERROR_NOT_SUPPORTED; cuPointerGetAttribute still answers.
//   HM_MOCK_PLURAL_WITHOUT_RANGES=1  cuPointerGetAttributes fails a query that asks for the
//                               range attributes (a runtime that knows only the older ones).
//   HM_MOCK_SMEM_OPTIN=BYTES    every device allows blocks BYTES of shared memory (opt-in).
//   HM_MOCK_NO_POINTER_RANGE=1  the pointer range attributes (RANGE_START_ADDR / RANGE_SIZE) have
//                               no value (a runtime that does not know them): sizes go unchecked.
//
// Every cu* call is counted by entry point (hm_mock_driver_calls, mock_control.h), so tests can
// hold the library to a number of driver calls per API call.
//
// Memory: cuMemAlloc, cuMemAllocManaged and cuMemHostRegister ranges are known to
// cuPointerGetAttribute (context, memory type, device pointer, managed, device ordinal); any
// other address is CUDA_ERROR_INVALID_VALUE, like plain host memory on a real driver.
//
// Images: any non-empty image loads (ELF sized from its headers, else NUL-terminated text); a
// text image containing "HM_MOCK_JIT_ERROR" fails with CUDA_ERROR_INVALID_PTX and the rest of
// that line in the JIT error log. A kernel exists when its name occurs in the image as a whole
// symbol; launches marshal arguments by the PTX .entry parameter list (mock_kernels.cpp) and run
// hm_reference_gemm_f32_f32 on the host, synchronously.
//
// Builds (one set of sources): humming_mock_cuda exports every entry point by its versioned name,
// plus cuGetProcAddress_v2, which also hands out cuLaunchKernelEx and cuPointerGetAttributes
// (exported by no name, so hiding them makes them truly absent). HM_MOCK_MINIMAL drops
// cuGetProcAddress_v2 and the optional entry points (cuLaunchKernelEx, cuPointerGetAttribute(s),
// cuStreamGetCtx): the loader must fall back to dlsym. HM_MOCK_NO_LAUNCH also drops
// cuLaunchKernel and cuMemAlloc_v2: required symbols missing.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mock_state.hpp"

using namespace hm::mock;

// ---------------------------------------------------------------------------------------------
// Initialization, version, errors
// ---------------------------------------------------------------------------------------------

HM_MOCK_EXPORT CUresult cuInit(unsigned int flags) {
  HM_MOCK_COUNT_CALL();
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (const char* fail = std::getenv("HM_MOCK_FAIL_INIT");
      fail && fail[0] && std::strcmp(fail, "0")) {
    const int code = std::atoi(fail);
    return code > 1 ? code : CUDA_ERROR_SYSTEM_DRIVER_MISMATCH;
  }
  std::vector<int> ccs;
  if (!devices(&ccs)) return CUDA_ERROR_INVALID_VALUE;
  if (ccs.empty()) return CUDA_ERROR_NO_DEVICE;
  state().initialized = true;
  return CUDA_SUCCESS;
}

HM_MOCK_EXPORT CUresult cuDriverGetVersion(int* version) {
  HM_MOCK_COUNT_CALL();
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = kDriverVersion;
  return CUDA_SUCCESS;
}

namespace {
struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};
constexpr ErrorText kErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     "system has unsupported display driver / cuda driver combination"},
};
}  // namespace

HM_MOCK_EXPORT CUresult cuGetErrorName(CUresult error, const char** text) {
  HM_MOCK_COUNT_CALL();
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (const ErrorText& e : kErrors)
    if (e.code == error) return *text = e.name, CUDA_SUCCESS;
  *text = nullptr;  // like the real driver, for codes it does not know
  return CUDA_ERROR_INVALID_VALUE;
}

HM_MOCK_EXPORT CUresult cuGetErrorString(CUresult error, const char** text) {
  HM_MOCK_COUNT_CALL();
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (const ErrorText& e : kErrors)
    if (e.code == error) return *text = e.text, CUDA_SUCCESS;
  *text = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}

// ---------------------------------------------------------------------------------------------
// Devices and primary contexts
// ---------------------------------------------------------------------------------------------

HM_MOCK_EXPORT CUresult cuDeviceGetCount(int* count) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  std::vector<int> ccs;
  if (count == nullptr || !devices(&ccs)) return CUDA_ERROR_INVALID_VALUE;
  *count = static_cast<int>(ccs.size());
  return CUDA_SUCCESS;
}

HM_MOCK_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  int cc = 0;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!device_cc(ordinal, &cc)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;  // the mock's device handles are the ordinals
  return CUDA_SUCCESS;
}

HM_MOCK_EXPORT CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  int cc = 0;
  if (name == nullptr || length <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!device_cc(device, &cc)) return CUDA_ERROR_INVALID_DEVICE;
  const std::string text =
      device == 0 ? "Humming Mock GPU" : "Humming Mock GPU " + std::to_string(device);
  std::snprintf(name, static_cast<size_t>(length), "%s", text.c_str());
  return CUDA_SUCCESS;
}

HM_MOCK_EXPORT CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice device) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  int cc = 0;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!device_cc(device, &cc)) return CUDA_ERROR_INVALID_DEVICE;
  const DeviceSpec& spec = spec_for(cc);
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *value = kMaxThreadsPerBlock;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
      *value = kDefaultDynamicShared;
      break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
      *value = 32;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *value = spec.multiprocessors;
      break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
      *value = spec.l2_bytes;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *value = cc / 10;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *value = cc % 10;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
      *value = smem_optin_of(cc);
      break;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS:
      *value = env_flag("HM_MOCK_PAGEABLE_MEMORY_ACCESS") ? 1 : 0;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

HM_MOCK_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice device) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  int cc = 0;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!device_cc(device, &cc)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = (cc >= 90 ? size_t{141} : size_t{80}) << 30;
  return CUDA_SUCCESS;
}

HM_MOCK_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  int cc = 0;
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!device_cc(device, &cc)) return CUDA_ERROR_INVALID_DEVICE;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::unique_ptr<Context>& c = s.primary[device];
  if (!c) {
    c = std::make_unique<Context>();
    c->ordinal = device;
  }
  ++c->refcount;
  *context = reinterpret_cast<CUcontext>(c.get());
  return CUDA_SUCCESS;
}

HM_MOCK_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  int cc = 0;
  if (!device_cc(device, &cc)) return CUDA_ERROR_INVALID_DEVICE;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.primary.find(device);
  if (it == s.primary.end() || it->second->refcount == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--it->second->refcount == 0) destroy_context_objects(s, it->second.get());
  return CUDA_SUCCESS;
}

HM_MOCK_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext context) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto* c = reinterpret_cast<Context*>(context);
  if (!live(c)) return CUDA_ERROR_INVALID_CONTEXT;
  t_context_stack.push_back(c);
  return CUDA_SUCCESS;
}

HM_MOCK_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext* context) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  if (t_context_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (context != nullptr) *context = reinterpret_cast<CUcontext>(t_context_stack.back());
  t_context_stack.pop_back();
  return CUDA_SUCCESS;
}

HM_MOCK_EXPORT CUresult cuCtxGetCurrent(CUcontext* context) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *context = reinterpret_cast<CUcontext>(current());
  return CUDA_SUCCESS;
}

HM_MOCK_EXPORT CUresult cuCtxSetCurrent(CUcontext context) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  auto* c = reinterpret_cast<Context*>(context);
  if (c == nullptr) {
    if (!t_context_stack.empty()) t_context_stack.pop_back();
    return CUDA_SUCCESS;
  }
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!live(c)) return CUDA_ERROR_INVALID_CONTEXT;
  if (t_context_stack.empty())
    t_context_stack.push_back(c);
  else
    t_context_stack.back() = c;
  return CUDA_SUCCESS;
}

HM_MOCK_EXPORT CUresult cuCtxSynchronize() {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  std::lock_guard<std::mutex> lock(state().mutex);
  return live(current()) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

// ---------------------------------------------------------------------------------------------
// cuGetProcAddress_v2 (the CUDA 12 signature)
// ---------------------------------------------------------------------------------------------

#ifndef HM_MOCK_MINIMAL
namespace {

struct ProcEntry {
  const char* name;
  int version;  // the CUDA version that introduced this ABI of the entry point
  void* function;
};

template <typename F>
void* fn(F f) {
  return reinterpret_cast<void*>(f);
}

const std::vector<ProcEntry>& proc_table() {
  static const std::vector<ProcEntry> table = {
      {"cuInit", 2000, fn(cuInit)},
      {"cuDriverGetVersion", 2020, fn(cuDriverGetVersion)},
      {"cuGetErrorName", 6000, fn(cuGetErrorName)},
      {"cuGetErrorString", 6000, fn(cuGetErrorString)},
      {"cuDeviceGetCount", 2000, fn(cuDeviceGetCount)},
      {"cuDeviceGet", 2000, fn(cuDeviceGet)},
      {"cuDeviceGetName", 2000, fn(cuDeviceGetName)},
      {"cuDeviceGetAttribute", 2000, fn(cuDeviceGetAttribute)},
      {"cuDeviceTotalMem", 3020, fn(cuDeviceTotalMem_v2)},
      {"cuDevicePrimaryCtxRetain", 7000, fn(cuDevicePrimaryCtxRetain)},
      {"cuDevicePrimaryCtxRelease", 11000, fn(cuDevicePrimaryCtxRelease_v2)},
      {"cuCtxPushCurrent", 4000, fn(cuCtxPushCurrent_v2)},
      {"cuCtxPopCurrent", 4000, fn(cuCtxPopCurrent_v2)},
      {"cuCtxGetCurrent", 4000, fn(cuCtxGetCurrent)},
      {"cuCtxSetCurrent", 4000, fn(cuCtxSetCurrent)},
      {"cuCtxSynchronize", 2000, fn(cuCtxSynchronize)},
      {"cuModuleLoadData", 2000, fn(cuModuleLoadData)},
      {"cuModuleLoadDataEx", 2010, fn(cuModuleLoadDataEx)},
      {"cuModuleUnload", 2000, fn(cuModuleUnload)},
      {"cuModuleGetFunction", 2000, fn(cuModuleGetFunction)},
      {"cuFuncSetAttribute", 9000, fn(cuFuncSetAttribute)},
      {"cuFuncGetAttribute", 2020, fn(cuFuncGetAttribute)},
      {"cuLaunchKernel", 4000, fn(cuLaunchKernel)},
      {"cuLaunchKernelEx", 11060, fn(cuLaunchKernelEx)},
      {"cuOccupancyMaxActiveClusters", 11070, fn(cuOccupancyMaxActiveClusters)},
      {"cuMemAlloc", 3020, fn(cuMemAlloc_v2)},
      {"cuMemFree", 3020, fn(cuMemFree_v2)},
      {"cuMemcpyHtoD", 3020, fn(cuMemcpyHtoD_v2)},
      {"cuMemcpyDtoH", 3020, fn(cuMemcpyDtoH_v2)},
      {"cuMemcpyHtoDAsync", 3020, fn(cuMemcpyHtoDAsync_v2)},
      {"cuMemcpyDtoHAsync", 3020, fn(cuMemcpyDtoHAsync_v2)},
      {"cuMemsetD8", 3020, fn(cuMemsetD8_v2)},
      {"cuMemsetD8Async", 3020, fn(cuMemsetD8Async)},
      {"cuMemAllocManaged", 6000, fn(cuMemAllocManaged)},
      {"cuMemHostRegister", 6050, fn(cuMemHostRegister_v2)},
      {"cuMemHostUnregister", 4000, fn(cuMemHostUnregister)},
      {"cuPointerGetAttribute", 4000, fn(cuPointerGetAttribute)},
      {"cuPointerGetAttributes", 7000, fn(cuPointerGetAttributes)},
      {"cuStreamCreate", 2000, fn(cuStreamCreate)},
      {"cuStreamDestroy", 4000, fn(cuStreamDestroy_v2)},
      {"cuStreamSynchronize", 2000, fn(cuStreamSynchronize)},
      {"cuStreamGetCtx", 9020, fn(cuStreamGetCtx)},
      {"cuStreamGetCtx", 12050, fn(cuStreamGetCtx_v2)},
      {"cuTensorMapEncodeTiled", 12000, fn(cuTensorMapEncodeTiled)},
  };
  return table;
}

bool hidden(const char* symbol) {
  const char* v = std::getenv("HM_MOCK_HIDE_SYMBOLS");
  if (v == nullptr) return false;
  std::istringstream in(v);
  std::string item;
  while (std::getline(in, item, ','))
    if (item == symbol) return true;
  return false;
}

}  // namespace

HM_MOCK_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** function, int cuda_version,
                                            uint64_t flags, int* symbol_status) {
  HM_MOCK_COUNT_CALL();
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    ++state().proc_address_calls;
  }
  if (symbol == nullptr || function == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *function = nullptr;
  if (cuda_version > kDriverVersion) return CUDA_ERROR_INVALID_VALUE;  // newer than the driver
  const ProcEntry* best = nullptr;
  bool known = false;
  if (!hidden(symbol))
    for (const ProcEntry& e : proc_table())
      if (std::strcmp(e.name, symbol) == 0) {
        known = true;
        if (e.version <= cuda_version && (best == nullptr || e.version > best->version)) best = &e;
      }
  if (best == nullptr) {
    if (symbol_status != nullptr)
      *symbol_status =
          known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  *function = best->function;
  if (symbol_status != nullptr) *symbol_status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}
#endif

// ---------------------------------------------------------------------------------------------
// Control functions for tests (mock_control.h)
// ---------------------------------------------------------------------------------------------

HM_MOCK_EXPORT void hm_mock_reset(void) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.has_launch = false;
  s.last_launch = hm_mock_launch_t{};
  s.last_image.clear();
  s.launches = s.proc_address_calls = s.attribute_sets = s.newer_abi_calls = 0;
  std::lock_guard<std::mutex> calls_lock(s.calls_mutex);
  s.calls.clear();
}

HM_MOCK_EXPORT int64_t hm_mock_driver_calls(const char* name) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.calls_mutex);
  if (name != nullptr) {
    auto it = s.calls.find(name);
    return it == s.calls.end() ? 0 : it->second;
  }
  int64_t total = 0;
  for (const auto& entry : s.calls) total += entry.second;
  return total;
}

HM_MOCK_EXPORT int64_t hm_mock_driver_call_summary(char* buf, int64_t size) {
  std::string text;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.calls_mutex);
    for (const auto& [name, count] : s.calls)
      text += (text.empty() ? "" : " ") + name + "=" + std::to_string(count);
  }
  if (buf != nullptr && size > 0) {
    const size_t n = std::min<size_t>(text.size(), static_cast<size_t>(size) - 1);
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
  }
  return static_cast<int64_t>(text.size());
}

HM_MOCK_EXPORT int hm_mock_last_launch(hm_mock_launch_t* out) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.has_launch || out == nullptr) return -1;
  *out = s.last_launch;
  return 0;
}

HM_MOCK_EXPORT int64_t hm_mock_launch_count(void) {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().launches;
}

HM_MOCK_EXPORT int64_t hm_mock_live_allocations(void) {
  std::lock_guard<std::mutex> lock(state().mutex);
  return static_cast<int64_t>(state().allocations.size());
}

HM_MOCK_EXPORT int64_t hm_mock_live_modules(void) {
  std::lock_guard<std::mutex> lock(state().mutex);
  return static_cast<int64_t>(state().modules.size());
}

HM_MOCK_EXPORT int64_t hm_mock_live_streams(void) {
  std::lock_guard<std::mutex> lock(state().mutex);
  return static_cast<int64_t>(state().streams.size());
}

HM_MOCK_EXPORT int hm_mock_primary_ctx_refcount(int ordinal) {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto it = state().primary.find(ordinal);
  return it == state().primary.end() ? 0 : it->second->refcount;
}

HM_MOCK_EXPORT int64_t hm_mock_proc_address_calls(void) {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().proc_address_calls;
}

HM_MOCK_EXPORT int64_t hm_mock_func_attribute_sets(void) {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().attribute_sets;
}

HM_MOCK_EXPORT int64_t hm_mock_newer_abi_calls(void) {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().newer_abi_calls;
}

HM_MOCK_EXPORT int hm_mock_stream_create(int ordinal, int own_context, void** out) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  int cc = 0;
  if (out == nullptr || !s.initialized || !device_cc(ordinal, &cc)) return -1;
  Context* context = nullptr;
  if (own_context) {
    s.secondary.push_back(std::make_unique<Context>());
    context = s.secondary.back().get();
    context->ordinal = ordinal;
    context->refcount = 1;
  } else {
    auto it = s.primary.find(ordinal);
    if (it == s.primary.end() || !live(it->second.get())) return -1;
    context = it->second.get();
  }
  auto* st = new Stream{context};
  s.streams.insert(st);
  *out = st;
  return 0;
}

HM_MOCK_EXPORT int64_t hm_mock_last_image(void* buf, int64_t size) {
  std::lock_guard<std::mutex> lock(state().mutex);
  const std::string& image = state().last_image;
  if (buf != nullptr && size > 0)
    std::memcpy(buf, image.data(), std::min<size_t>(image.size(), static_cast<size_t>(size)));
  return static_cast<int64_t>(image.size());
}
