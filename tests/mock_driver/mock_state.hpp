// The mock CUDA driver's state and helpers, shared by its sources (see mock_cuda.cpp for what the
// mock is and how it is switched).
#pragma once

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "mock_control.h"
#include "mock_kernels.hpp"
#include "runtime/driver_types.hpp"

// Exported by name (dlsym finds it), or reachable only through cuGetProcAddress_v2.
#define HM_MOCK_EXPORT extern "C" __attribute__((visibility("default")))
#define HM_MOCK_INTERNAL extern "C" __attribute__((visibility("hidden")))
#ifdef HM_MOCK_MINIMAL
#define HM_MOCK_OPTIONAL HM_MOCK_INTERNAL
#else
#define HM_MOCK_OPTIONAL HM_MOCK_EXPORT
#endif
#ifdef HM_MOCK_NO_LAUNCH
#define HM_MOCK_REQUIRED_BUT_DROPPED HM_MOCK_INTERNAL
#else
#define HM_MOCK_REQUIRED_BUT_DROPPED HM_MOCK_EXPORT
#endif

namespace hm::mock {

using namespace hm::runtime;  // the driver types and constants

constexpr int kDriverVersion = 13000;
constexpr int kDefaultDynamicShared = 48 * 1024;
constexpr int kMaxThreadsPerBlock = 1024;

struct DeviceSpec {
  int cc;
  int multiprocessors;
  int smem_optin;
  int l2_bytes;
};

// Plausible numbers per compute capability; anything else gets the last row's.
constexpr DeviceSpec kSpecs[] = {
    {75, 40, 65536, 4 << 20},      {80, 108, 166912, 40 << 20}, {86, 84, 101376, 6 << 20},
    {89, 128, 101376, 72 << 20},   {90, 132, 232448, 50 << 20}, {100, 148, 232448, 126 << 20},
    {103, 148, 232448, 126 << 20}, {110, 20, 232448, 32 << 20}, {120, 170, 101376, 96 << 20},
    {121, 48, 101376, 24 << 20},   {0, 16, 49152, 4 << 20},
};

inline const DeviceSpec& spec_for(int cc) {
  for (const DeviceSpec& s : kSpecs)
    if (s.cc == cc) return s;
  return kSpecs[sizeof(kSpecs) / sizeof(kSpecs[0]) - 1];
}

struct Context {
  int ordinal = 0;
  int refcount = 0;
};
struct Module;
struct Function {
  std::string name;
  Module* module = nullptr;
  KernelSignature signature;
  int max_dynamic_shared = kDefaultDynamicShared;
};
struct Module {
  std::string image;
  Context* context = nullptr;
  std::map<std::string, std::unique_ptr<Function>> functions;
};
// What an address range is: cuMemAlloc, cuMemAllocManaged, or user memory cuMemHostRegister
// pinned (which the mock must never free).
enum class MemoryKind { kDevice, kManaged, kHostRegistered };
struct Allocation {
  size_t bytes = 0;
  Context* context = nullptr;
  MemoryKind kind = MemoryKind::kDevice;
  unsigned int flags = 0;  // cuMemHostRegister flags
};
struct Stream {
  Context* context = nullptr;
};

struct State {
  std::mutex mutex;
  std::atomic<bool> initialized{false};
  std::map<int, std::unique_ptr<Context>> primary;  // never erased: handles stay comparable
  // Contexts that are not a device's primary one (hm_mock_stream_create), never erased either.
  std::vector<std::unique_ptr<Context>> secondary;
  std::map<uint64_t, Allocation> allocations;       // by base address
  std::set<Module*> modules;
  std::set<Stream*> streams;
  // Functions of unloaded modules, handed out again first: real drivers reuse handles too, so a
  // cache keyed by a stale CUfunction shows up in tests.
  std::vector<std::unique_ptr<Function>> spare_functions;
  bool has_launch = false;
  hm_mock_launch_t last_launch{};
  std::string last_image;
  int64_t launches = 0, proc_address_calls = 0, attribute_sets = 0, newer_abi_calls = 0;
  // Calls per entry point since the reset, by exported symbol (hm_mock_driver_calls); a lock of
  // their own, taken before and released before any entry point takes `mutex`.
  std::mutex calls_mutex;
  std::map<std::string, int64_t> calls;
};

inline State& state() {
  static State* s = new State();  // never destroyed: callers may outlive static destructors
  return *s;
}

// Initial-exec TLS: the mock is dlopen'ed, and a general-dynamic thread_local would live in a
// block from __tls_get_addr, which the sanitizer build's LeakSanitizer does not scan
// (cmake/sanitizer_options.cpp: tracking those blocks crashed its tracer), so the vector's heap
// buffer would be reported as leaked. Static TLS from glibc's surplus is scanned; the vector is
// 24 bytes.
inline thread_local std::vector<Context*> t_context_stack __attribute__((tls_model("initial-exec")));

// How deep this thread is in entry points: one that calls another (cuModuleLoadData calls
// cuModuleLoadDataEx) is one driver call, counted under its own name. Initial-exec, as above.
inline thread_local int t_call_depth __attribute__((tls_model("initial-exec"))) = 0;

// Counts one call of the entry point `name` unless it is made by another entry point.
class CallCounter {
 public:
  explicit CallCounter(const char* name) {
    if (t_call_depth++ != 0) return;
    State& s = state();
    std::lock_guard<std::mutex> lock(s.calls_mutex);
    ++s.calls[name];
  }
  ~CallCounter() { --t_call_depth; }
  CallCounter(const CallCounter&) = delete;
  CallCounter& operator=(const CallCounter&) = delete;
};
// The first statement of every cu* entry point.
#define HM_MOCK_COUNT_CALL() const hm::mock::CallCounter hm_mock_call_counter_(__func__)

inline bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
}

// The opt-in shared memory per block of a device of compute capability cc: its spec's, or
// HM_MOCK_SMEM_OPTIN bytes (a smaller part, or a MIG-like limit, for the prepare-time check).
inline int smem_optin_of(int cc) {
  const char* v = std::getenv("HM_MOCK_SMEM_OPTIN");
  return v != nullptr && v[0] != '\0' ? std::atoi(v) : spec_for(cc).smem_optin;
}

// The devices from HM_MOCK_DEVICES; false when the variable is malformed.
inline bool devices(std::vector<int>* ccs) {
  const char* v = std::getenv("HM_MOCK_DEVICES");
  std::string text = v ? v : "90,80";
  ccs->clear();
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const long cc = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || cc < 10 || cc > 999) return false;
    ccs->push_back(static_cast<int>(cc));
  }
  return true;
}

inline bool device_cc(CUdevice device, int* cc) {
  std::vector<int> ccs;
  if (!devices(&ccs) || device < 0 || device >= static_cast<int>(ccs.size())) return false;
  *cc = ccs[device];
  return true;
}

inline Context* current() { return t_context_stack.empty() ? nullptr : t_context_stack.back(); }

inline bool live(Context* c) { return c != nullptr && c->refcount > 0; }

// Stream handles 0, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD mean the current context's.
inline bool stream_usable(State& s, CUstream stream, Context* context) {
  const uintptr_t value = reinterpret_cast<uintptr_t>(stream);
  if (value <= 2) return true;
  auto* st = reinterpret_cast<Stream*>(stream);
  return s.streams.count(st) && st->context == context;
}

// True when [address, address + bytes) lies inside one live allocation (callers hold the lock).
inline bool in_bounds(State& s, uint64_t address, uint64_t bytes) {
  if (bytes == 0) return true;
  auto it = s.allocations.upper_bound(address);
  if (it == s.allocations.begin()) return false;
  --it;
  return address >= it->first && address + bytes <= it->first + it->second.bytes &&
         address + bytes >= address;
}

#define HM_MOCK_REQUIRE_INIT() \
  if (!state().initialized) return CUDA_ERROR_NOT_INITIALIZED

inline void retire_module(State& s, Module* module) {
  for (auto& entry : module->functions) s.spare_functions.push_back(std::move(entry.second));
  delete module;
}

// Drops what a primary context owned when its last reference goes, like the real driver.
inline void destroy_context_objects(State& s, Context* context) {
  for (auto it = s.allocations.begin(); it != s.allocations.end();) {
    if (it->second.context == context) {
      if (it->second.kind != MemoryKind::kHostRegistered)
        std::free(reinterpret_cast<void*>(it->first));
      it = s.allocations.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = s.modules.begin(); it != s.modules.end();)
    if ((*it)->context == context) {
      retire_module(s, *it);
      it = s.modules.erase(it);
    } else {
      ++it;
    }
  for (auto it = s.streams.begin(); it != s.streams.end();)
    if ((*it)->context == context) {
      delete *it;
      it = s.streams.erase(it);
    } else {
      ++it;
    }
}

inline Function* live_function(State& s, CUfunction f) {
  auto* function = reinterpret_cast<Function*>(f);
  for (Module* m : s.modules)
    for (auto& entry : m->functions)
      if (entry.second.get() == function) return function;
  return nullptr;
}

}  // namespace hm::mock

using namespace hm::runtime;

// The entry points, defined across mock_cuda.cpp, mock_launch.cpp and mock_memory.cpp (the
// cuGetProcAddress_v2 table needs all of them).
extern "C" {
CUresult cuInit(unsigned int flags);
CUresult cuDriverGetVersion(int* version);
CUresult cuGetErrorName(CUresult error, const char** text);
CUresult cuGetErrorString(CUresult error, const char** text);
CUresult cuDeviceGetCount(int* count);
CUresult cuDeviceGet(CUdevice* device, int ordinal);
CUresult cuDeviceGetName(char* name, int length, CUdevice device);
CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice device);
CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice device);
CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device);
CUresult cuCtxPushCurrent_v2(CUcontext context);
CUresult cuCtxPopCurrent_v2(CUcontext* context);
CUresult cuCtxGetCurrent(CUcontext* context);
CUresult cuCtxSetCurrent(CUcontext context);
CUresult cuCtxSynchronize();
CUresult cuModuleLoadData(CUmodule* module, const void* image);
CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int option_count,
                            int* options, void** option_values);
CUresult cuModuleUnload(CUmodule module);
CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name);
CUresult cuFuncSetAttribute(CUfunction function, int attribute, int value);
CUresult cuFuncGetAttribute(int* value, int attribute, CUfunction function);
CUresult cuLaunchKernel(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                        unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                        unsigned int block_z, unsigned int shared_bytes, CUstream stream,
                        void** params, void** extra);
CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction function, void** params,
                          void** extra);
CUresult cuOccupancyMaxActiveClusters(int* clusters, CUfunction function,
                                      const CUlaunchConfig* config);
CUresult cuMemAlloc_v2(CUdeviceptr* pointer, size_t bytes);
CUresult cuMemFree_v2(CUdeviceptr pointer);
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes);
CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream);
CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t bytes, CUstream stream);
CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t bytes);
CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t bytes, CUstream stream);
CUresult cuMemAllocManaged(CUdeviceptr* pointer, size_t bytes, unsigned int flags);
CUresult cuMemHostRegister_v2(void* pointer, size_t bytes, unsigned int flags);
CUresult cuMemHostUnregister(void* pointer);
CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr pointer);
CUresult cuPointerGetAttributes(unsigned int count, int* attributes, void** data,
                                CUdeviceptr pointer);
CUresult cuStreamCreate(CUstream* stream, unsigned int flags);
CUresult cuStreamDestroy_v2(CUstream stream);
CUresult cuStreamSynchronize(CUstream stream);
CUresult cuStreamGetCtx(CUstream stream, CUcontext* context);
CUresult cuStreamGetCtx_v2(CUstream stream, CUcontext* context, void** green);
CUresult cuTensorMapEncodeTiled(CUtensorMap* map, int data_type, uint32_t rank,
                                void* global_address, const uint64_t* global_dim,
                                const uint64_t* global_strides, const uint32_t* box_dim,
                                const uint32_t* element_strides, int interleave, int swizzle,
                                int l2_promotion, int oob_fill);
}
