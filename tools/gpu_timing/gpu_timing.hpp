// GPU timing for the tools and benchmarks (bench_gemm, `humming demo`): the CUDA driver entry
// points that timing needs, CUDA-graph capture, an L2-flushing CUDA-event timer that reports the
// median, and cuBLAS (cublasGemmEx) as the baseline. Both libraries are loaded with dlopen, so
// clients build without the CUDA toolkit and run without cuBLAS.
//
// NOTE: this talks to the driver and cuBLAS only, never to Humming: clients reach Humming through
// the public C API, and hand this code device pointers and a Launch that calls hm_plan_gemm.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpu_timing {

// A failed driver call or a broken precondition. Clients turn it into their own error report.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// ---------------------------------------------------------------------------------------------
// The CUDA driver entry points timing needs, with the ABI version whose signature each pointer
// type declares (cudaTypedefs.h spelling): cuGetProcAddress is asked for exactly that version,
// and the versioned export name is the fallback.

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
constexpr int CU_STREAM_CAPTURE_MODE_GLOBAL = 0;
constexpr int CU_STREAM_CAPTURE_MODE_RELAXED = 2;

using PFN_cuGetErrorName = CUresult (*)(CUresult, const char**);
using PFN_cuDeviceGet_v2000 = CUresult (*)(CUdevice*, int);
using PFN_cuDevicePrimaryCtxRetain_v7000 = CUresult (*)(CUcontext*, CUdevice);
using PFN_cuDevicePrimaryCtxRelease_v11000 = CUresult (*)(CUdevice);
using PFN_cuCtxSetCurrent_v4000 = CUresult (*)(CUcontext);
using PFN_cuStreamCreate_v2000 = CUresult (*)(CUstream*, unsigned);
using PFN_cuStreamDestroy_v4000 = CUresult (*)(CUstream);
using PFN_cuStreamSynchronize_v2000 = CUresult (*)(CUstream);
using PFN_cuEventCreate_v2000 = CUresult (*)(CUevent*, unsigned);
using PFN_cuEventRecord_v2000 = CUresult (*)(CUevent, CUstream);
using PFN_cuEventSynchronize_v2000 = CUresult (*)(CUevent);
using PFN_cuEventElapsedTime_v2000 = CUresult (*)(float*, CUevent, CUevent);
using PFN_cuEventDestroy_v4000 = CUresult (*)(CUevent);
using PFN_cuMemsetD8Async_v3020 = CUresult (*)(CUdeviceptr, unsigned char, size_t, CUstream);
using PFN_cuStreamBeginCapture_v10010 = CUresult (*)(CUstream, int);
using PFN_cuStreamEndCapture_v10000 = CUresult (*)(CUstream, CUgraph*);
using PFN_cuGraphInstantiateWithFlags_v11040 = CUresult (*)(CUgraphExec*, CUgraph,
                                                            unsigned long long);
using PFN_cuGraphLaunch_v10000 = CUresult (*)(CUgraphExec, CUstream);
using PFN_cuGraphExecDestroy_v10000 = CUresult (*)(CUgraphExec);
using PFN_cuGraphDestroy_v10000 = CUresult (*)(CUgraph);

// X(name, exported versioned name, ABI version)
#define HM_GPU_TIMING_DRIVER_ENTRY_POINTS(X)                        \
  X(cuDeviceGet, "cuDeviceGet", 2000)                               \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000)     \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", 11000) \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", 4000)                       \
  X(cuStreamCreate, "cuStreamCreate", 2000)                         \
  X(cuStreamDestroy, "cuStreamDestroy_v2", 4000)                    \
  X(cuStreamSynchronize, "cuStreamSynchronize", 2000)               \
  X(cuEventCreate, "cuEventCreate", 2000)                           \
  X(cuEventRecord, "cuEventRecord", 2000)                           \
  X(cuEventSynchronize, "cuEventSynchronize", 2000)                 \
  X(cuEventElapsedTime, "cuEventElapsedTime", 2000)                 \
  X(cuEventDestroy, "cuEventDestroy_v2", 4000)                      \
  X(cuMemsetD8Async, "cuMemsetD8Async", 3020)                       \
  X(cuStreamBeginCapture, "cuStreamBeginCapture_v2", 10010)         \
  X(cuStreamEndCapture, "cuStreamEndCapture", 10000)                \
  X(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", 11040) \
  X(cuGraphLaunch, "cuGraphLaunch", 10000)                          \
  X(cuGraphExecDestroy, "cuGraphExecDestroy", 10000)                \
  X(cuGraphDestroy, "cuGraphDestroy", 10000)

struct Driver {
  void* handle = nullptr;
  PFN_cuGetErrorName cuGetErrorName = nullptr;    // optional
  PFN_cuGetErrorName cuGetErrorString = nullptr;  // optional, same signature
#define HM_GPU_TIMING_FIELD(name, exported, version) PFN_##name##_v##version name = nullptr;
  HM_GPU_TIMING_DRIVER_ENTRY_POINTS(HM_GPU_TIMING_FIELD)
#undef HM_GPU_TIMING_FIELD

  // "CUDA_ERROR_X (text)" for a result code.
  std::string describe(CUresult r) const;
  // Throws Error("<call> failed: <describe(r)>") unless r is CUDA_SUCCESS.
  void check(CUresult r, const char* call) const;
};

// Calls a Driver member and throws Error naming the call as written when it fails.
#define HM_CU_CHECK(cu, call) (cu).check((cu).call, #call)

// Loads the same library the Humming runtime loads: HUMMING_CUDA_DRIVER_PATH when set, else
// libcuda.so.1 (a second dlopen of an already loaded library returns the same instance), calls
// cuInit and resolves every entry point above. Throws Error when any of that fails.
Driver load_driver();

// The device's primary context (the one the Humming library uses), made current on this thread,
// and a non-blocking stream in it: the library makes the context current only inside its own
// calls, and graph capture is not allowed on the legacy default stream.
class DeviceStream {
 public:
  DeviceStream(const Driver& cu, int ordinal);  // throws Error
  ~DeviceStream();                              // close(), errors ignored (see close)
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;

  CUstream stream() const { return stream_; }
  // Destroys the stream and releases the context; throws Error when the driver refuses.
  // Call it on the normal path; the destructor only cleans up while an error is propagating.
  void close();

 private:
  const Driver& cu_;
  CUdevice device_ = 0;
  bool retained_ = false;
  CUstream stream_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Timing: one call = optional L2 flush, event, the launch, event. All calls are queued before
// the host waits, so the GPU never idles between them (idle gaps would let clocks drop).

// Enqueues one call on the stream; returns "" or why it failed.
using Launch = std::function<std::string()>;

struct Stats {
  bool ok = false;
  std::string error;
  double median = 0, p10 = 0, p90 = 0, min = 0;  // microseconds
  int count = 0;
};

// Linear interpolation between the closest ranks; `sorted` must be non-empty and ascending.
double percentile(const std::vector<double>& sorted, double q);

class Timer {
 public:
  // `scratch` (`scratch_bytes`, 0 for no flush) is overwritten before every call; it should be
  // at least 2x the L2. `events`: the most timed calls one run() may make.
  Timer(const Driver& cu, CUstream stream, CUdeviceptr scratch, size_t scratch_bytes, int events);
  ~Timer();  // destroy(), errors ignored
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // `warmup` untimed calls, then `iters` timed ones; a failed launch is returned in Stats::error
  // (after draining the stream), a failed driver call throws Error.
  Stats run(const Launch& launch, int warmup, int iters);
  // run() over replays of an instantiated graph.
  Stats replay(CUgraphExec exec, int warmup, int iters);
  // Destroys the events (throws Error when the driver refuses); the timer is unusable after.
  void destroy();

 private:
  void flush(int i);
  Stats drain(Stats st);
  const Driver& cu_;
  CUstream stream_;
  CUdeviceptr scratch_;
  size_t scratch_bytes_;
  std::vector<CUevent> start_, stop_;
};

// Captures what `body` enqueues on `stream` into a graph (capture `mode`) and instantiates it.
// The capture is always ended, even when the body fails, so the stream stays usable. Returns ""
// and sets *exec (the caller destroys it), or why it failed.
std::string capture(const Driver& cu, CUstream stream, int mode, const Launch& body,
                    CUgraphExec* exec);

// The whole protocol for one call: one plain call first (one-time work such as module loading or
// library heuristics happens outside the capture), capture in `mode`, time `iters` replays after
// `warmup`, destroy the graph. A failed call or capture is returned in Stats::error.
Stats time_graph(const Driver& cu, Timer& timer, CUstream stream, int mode, const Launch& call,
                 int warmup, int iters);

// ---------------------------------------------------------------------------------------------
// cuBLAS, loaded by dlopen. Only the calls the baseline needs.

using cublasHandle_t = struct cublasContext*;
using cublasStatus_t = int;
constexpr cublasStatus_t CUBLAS_STATUS_SUCCESS = 0;
constexpr int CUDA_R_16F = 2;
constexpr int CUDA_R_16BF = 14;
// cuBLAS recommends a 32 MiB workspace on Hopper; we hand it our own so that nothing is allocated
// while a call is being captured into a graph.
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

struct Cublas {
  std::string library;  // the name or path that loaded
  std::string error;    // why it is unavailable ("" when usable)
  cublasHandle_t handle = nullptr;
  int version = 0;
  cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*destroy)(cublasHandle_t) = nullptr;
  cublasStatus_t (*set_stream)(cublasHandle_t, CUstream) = nullptr;
  cublasStatus_t (*set_workspace)(cublasHandle_t, void*, size_t) = nullptr;
  cublasStatus_t (*get_version)(cublasHandle_t, int*) = nullptr;
  const char* (*status_string)(cublasStatus_t) = nullptr;  // optional
  cublasStatus_t (*gemm_ex)(cublasHandle_t, int, int, int, int, int, const void*, const void*,
                            int, int, const void*, int, int, const void*, void*, int, int, int,
                            int) = nullptr;

  bool usable() const { return handle != nullptr; }
  std::string describe(cublasStatus_t s) const;
};

// HUMMING_CUBLAS_PATH when set (and only that), else the sonames of CUDA 13 and 12, else the
// unversioned name; creates a handle. Never throws: on failure cb.error says why. Needs a
// current context (cublasCreate initializes on it).
void load_cublas(Cublas& cb);

// Binds the handle to `stream` and a kCublasWorkspaceBytes workspace. Returns "" or why not.
std::string cublas_bind(Cublas& cb, CUstream stream, CUdeviceptr workspace);

// Row-major C[M,N] = A[M,K] * W[N,K]^T, all of CUDA data type `dtype` (CUDA_R_16F or
// CUDA_R_16BF), f32 accumulation, on the bound stream. Returns "" or why it failed.
std::string cublas_gemm(const Cublas& cb, int dtype, CUdeviceptr a, CUdeviceptr w, CUdeviceptr c,
                        int64_t m, int64_t n, int64_t k);

// Destroys the handle (if any). Returns "" or why the destroy failed.
std::string cublas_unload(Cublas& cb);

}  // namespace gpu_timing
