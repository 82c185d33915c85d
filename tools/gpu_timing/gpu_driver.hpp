// The CUDA driver for the programs around Humming (bench_gemm, `humming demo`) and for the GPU
// tests: the entry points they need beyond the C API (devices, contexts, streams, events, graphs,
// async copies, managed and registered memory), from the driver library that Humming loads too.
// It is loaded with dlopen, so clients build without the CUDA toolkit and never link libcuda.
//
// NOTE: this talks to the driver only, never to Humming. It hands out the raw entry points and
// leaves context handling to each client: gpu_timing::DeviceStream sets a primary context
// current on its thread, the GPU tests push and pop one around their calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace gpu_driver {

// A driver that cannot be loaded, or a failed driver call (see Driver::check).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// ---------------------------------------------------------------------------------------------
// The entry points, with the ABI version whose signature each pointer type declares
// (cudaTypedefs.h spelling): cuGetProcAddress is asked for exactly that version, and the
// versioned export name is the fallback. So cuStreamDestroy is always cuStreamDestroy_v2, never
// the older ABI a plain dlsym("cuStreamDestroy") would find.

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr unsigned CU_STREAM_NON_BLOCKING = 1;
constexpr unsigned CU_EVENT_DEFAULT = 0;
constexpr int CU_STREAM_CAPTURE_MODE_GLOBAL = 0;  // the strictest: flags unsafe calls on any thread
constexpr int CU_STREAM_CAPTURE_MODE_RELAXED = 2;
constexpr unsigned CU_MEM_ATTACH_GLOBAL = 1;
constexpr unsigned CU_MEMHOSTREGISTER_PORTABLE = 1;
constexpr unsigned CU_MEMHOSTREGISTER_DEVICEMAP = 2;
constexpr int CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS = 88;

using PFN_cuGetErrorName = CUresult (*)(CUresult, const char**);
using PFN_cuDeviceGet_v2000 = CUresult (*)(CUdevice*, int);
using PFN_cuDeviceGetAttribute_v2000 = CUresult (*)(int*, int, CUdevice);
using PFN_cuDevicePrimaryCtxRetain_v7000 = CUresult (*)(CUcontext*, CUdevice);
using PFN_cuDevicePrimaryCtxRelease_v11000 = CUresult (*)(CUdevice);
using PFN_cuCtxSetCurrent_v4000 = CUresult (*)(CUcontext);
using PFN_cuCtxPushCurrent_v4000 = CUresult (*)(CUcontext);
using PFN_cuCtxPopCurrent_v4000 = CUresult (*)(CUcontext*);
using PFN_cuCtxCreate_v3020 = CUresult (*)(CUcontext*, unsigned, CUdevice);
using PFN_cuCtxDestroy_v4000 = CUresult (*)(CUcontext);
using PFN_cuStreamCreate_v2000 = CUresult (*)(CUstream*, unsigned);
using PFN_cuStreamDestroy_v4000 = CUresult (*)(CUstream);
using PFN_cuStreamSynchronize_v2000 = CUresult (*)(CUstream);
using PFN_cuEventCreate_v2000 = CUresult (*)(CUevent*, unsigned);
using PFN_cuEventRecord_v2000 = CUresult (*)(CUevent, CUstream);
using PFN_cuEventSynchronize_v2000 = CUresult (*)(CUevent);
using PFN_cuEventElapsedTime_v2000 = CUresult (*)(float*, CUevent, CUevent);
using PFN_cuEventDestroy_v4000 = CUresult (*)(CUevent);
using PFN_cuMemcpyHtoDAsync_v3020 = CUresult (*)(CUdeviceptr, const void*, size_t, CUstream);
using PFN_cuMemsetD8Async_v3020 = CUresult (*)(CUdeviceptr, unsigned char, size_t, CUstream);
using PFN_cuMemAllocManaged_v6000 = CUresult (*)(CUdeviceptr*, size_t, unsigned);
using PFN_cuMemFree_v3020 = CUresult (*)(CUdeviceptr);
using PFN_cuMemHostRegister_v6050 = CUresult (*)(void*, size_t, unsigned);
using PFN_cuMemHostUnregister_v4000 = CUresult (*)(void*);
using PFN_cuStreamBeginCapture_v10010 = CUresult (*)(CUstream, int);
using PFN_cuStreamEndCapture_v10000 = CUresult (*)(CUstream, CUgraph*);
using PFN_cuGraphInstantiateWithFlags_v11040 = CUresult (*)(CUgraphExec*, CUgraph,
                                                            unsigned long long);
using PFN_cuGraphLaunch_v10000 = CUresult (*)(CUgraphExec, CUstream);
using PFN_cuGraphExecDestroy_v10000 = CUresult (*)(CUgraphExec);
using PFN_cuGraphDestroy_v10000 = CUresult (*)(CUgraph);

// X(name, exported versioned name, ABI version). load_driver() fails when one of these is missing.
#define HM_GPU_DRIVER_ENTRY_POINTS(X)                                  \
  X(cuDeviceGet, "cuDeviceGet", 2000)                                  \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute", 2000)                \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000)        \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", 11000)  \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", 4000)                          \
  X(cuCtxPushCurrent, "cuCtxPushCurrent_v2", 4000)                     \
  X(cuCtxPopCurrent, "cuCtxPopCurrent_v2", 4000)                       \
  X(cuCtxDestroy, "cuCtxDestroy_v2", 4000)                             \
  X(cuStreamCreate, "cuStreamCreate", 2000)                            \
  X(cuStreamDestroy, "cuStreamDestroy_v2", 4000)                       \
  X(cuStreamSynchronize, "cuStreamSynchronize", 2000)                  \
  X(cuEventCreate, "cuEventCreate", 2000)                              \
  X(cuEventRecord, "cuEventRecord", 2000)                              \
  X(cuEventSynchronize, "cuEventSynchronize", 2000)                    \
  X(cuEventElapsedTime, "cuEventElapsedTime", 2000)                    \
  X(cuEventDestroy, "cuEventDestroy_v2", 4000)                         \
  X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", 3020)                   \
  X(cuMemsetD8Async, "cuMemsetD8Async", 3020)                          \
  X(cuMemAllocManaged, "cuMemAllocManaged", 6000)                      \
  X(cuMemFree, "cuMemFree_v2", 3020)                                   \
  X(cuMemHostRegister, "cuMemHostRegister_v2", 6050)                   \
  X(cuMemHostUnregister, "cuMemHostUnregister", 4000)                  \
  X(cuStreamBeginCapture, "cuStreamBeginCapture_v2", 10010)            \
  X(cuStreamEndCapture, "cuStreamEndCapture", 10000)                   \
  X(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", 11040) \
  X(cuGraphLaunch, "cuGraphLaunch", 10000)                             \
  X(cuGraphExecDestroy, "cuGraphExecDestroy", 10000)                   \
  X(cuGraphDestroy, "cuGraphDestroy", 10000)

// Entry points that may be null after load_driver(): a client checks before calling one, and
// leaves out (saying so) what needs it.
#define HM_GPU_DRIVER_OPTIONAL_ENTRY_POINTS(X) X(cuCtxCreate, "cuCtxCreate_v2", 3020)

struct Driver {
  void* handle = nullptr;
  PFN_cuGetErrorName cuGetErrorName = nullptr;    // optional
  PFN_cuGetErrorName cuGetErrorString = nullptr;  // optional, same signature
#define HM_GPU_DRIVER_FIELD(name, exported, version) PFN_##name##_v##version name = nullptr;
  HM_GPU_DRIVER_ENTRY_POINTS(HM_GPU_DRIVER_FIELD)
  HM_GPU_DRIVER_OPTIONAL_ENTRY_POINTS(HM_GPU_DRIVER_FIELD)
#undef HM_GPU_DRIVER_FIELD

  // "CUDA_ERROR_X (text)" for a result code.
  std::string describe(CUresult r) const;
  // "<call> failed: <describe(r)>": the one wording of a failed call, for exceptions and tests.
  std::string failure(CUresult r, const char* call) const;
  // Throws Error(failure(r, call)) unless r is CUDA_SUCCESS.
  void check(CUresult r, const char* call) const;
};

// Calls a Driver member and throws Error naming the call as written when it fails.
#define HM_CU_CHECK(cu, call) (cu).check((cu).call, #call)

// Loads the same library the Humming runtime loads: HUMMING_CUDA_DRIVER_PATH when set, else
// libcuda.so.1 (a second dlopen of an already loaded library returns the same instance), calls
// cuInit and resolves every entry point above. Throws Error when any of that fails. The library
// stays loaded for the life of the process.
Driver load_driver();

}  // namespace gpu_driver
