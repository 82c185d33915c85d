// GPU timing for the tools and benchmarks (bench_gemm, `humming demo`): a stream in the device's
// primary context, CUDA-graph capture, an L2-flushing CUDA-event timer that reports the
// median, and cuBLAS (cublasGemmEx) as the baseline. The driver (gpu_driver.hpp) and cuBLAS are
// loaded with dlopen, so clients build without the CUDA toolkit and run without cuBLAS.
//
// NOTE: this talks to the driver and cuBLAS only, never to Humming: clients reach Humming through
// the public C API, and hand this code device pointers and a Launch that calls hm_plan_gemm.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gpu_driver.hpp"

namespace gpu_timing {

// The driver comes from the loader the tools, benchmarks and GPU tests share (gpu_driver.hpp).
// Its names are gpu_timing's too, the ones this interface and its clients use.
using gpu_driver::CUcontext;
using gpu_driver::CUdevice;
using gpu_driver::CUdeviceptr;
using gpu_driver::CUevent;
using gpu_driver::CUgraph;
using gpu_driver::CUgraphExec;
using gpu_driver::CUresult;
using gpu_driver::CUstream;
using gpu_driver::CU_EVENT_DEFAULT;
using gpu_driver::CU_STREAM_CAPTURE_MODE_GLOBAL;
using gpu_driver::CU_STREAM_CAPTURE_MODE_RELAXED;
using gpu_driver::CU_STREAM_NON_BLOCKING;
using gpu_driver::CUDA_SUCCESS;
using gpu_driver::Driver;
// A failed driver call or a broken precondition. Clients turn it into their own error report.
using gpu_driver::Error;
using gpu_driver::load_driver;

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
