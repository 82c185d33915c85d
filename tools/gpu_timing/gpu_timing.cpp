// GPU timing for the tools and benchmarks: the device stream, graph capture, the L2-flushing event
// timer and the cuBLAS baseline (see gpu_timing.hpp).
#include "gpu_timing.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace gpu_timing {
namespace {

constexpr int CUBLAS_OP_N = 0;
constexpr int CUBLAS_OP_T = 1;
constexpr int CUBLAS_COMPUTE_32F = 68;
constexpr int CUBLAS_GEMM_DEFAULT = -1;

}  // namespace

// ---------------------------------------------------------------------------------------------
// DeviceStream

DeviceStream::DeviceStream(const Driver& cu, int ordinal) : cu_(cu) {
  CUcontext primary = nullptr;
  HM_CU_CHECK(cu_, cuDeviceGet(&device_, ordinal));
  HM_CU_CHECK(cu_, cuDevicePrimaryCtxRetain(&primary, device_));
  retained_ = true;
  try {
    HM_CU_CHECK(cu_, cuCtxSetCurrent(primary));
    HM_CU_CHECK(cu_, cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
  } catch (...) {
    // A constructor that throws runs no destructor: give the context back here.
    cu_.cuDevicePrimaryCtxRelease(device_);
    throw;
  }
}

DeviceStream::~DeviceStream() {
  try {
    close();
  } catch (const Error&) {
    // Only reached while another error propagates (the normal path calls close()); that one is
    // the error to report.
  }
}

void DeviceStream::close() {
  if (stream_ != nullptr) {
    CUstream s = stream_;
    stream_ = nullptr;
    HM_CU_CHECK(cu_, cuStreamDestroy(s));
  }
  if (retained_) {
    retained_ = false;
    HM_CU_CHECK(cu_, cuDevicePrimaryCtxRelease(device_));
  }
}

// ---------------------------------------------------------------------------------------------
// Timing

double percentile(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

Timer::Timer(const Driver& cu, CUstream stream, CUdeviceptr scratch, size_t scratch_bytes,
             int events)
    : cu_(cu), stream_(stream), scratch_(scratch), scratch_bytes_(scratch_bytes) {
  start_.reserve(events);
  stop_.reserve(events);
  try {
    for (int i = 0; i < events; ++i) {
      CUevent a = nullptr, b = nullptr;
      HM_CU_CHECK(cu_, cuEventCreate(&a, CU_EVENT_DEFAULT));
      start_.push_back(a);
      HM_CU_CHECK(cu_, cuEventCreate(&b, CU_EVENT_DEFAULT));
      stop_.push_back(b);
    }
  } catch (...) {
    for (CUevent e : start_) cu_.cuEventDestroy(e);
    for (CUevent e : stop_) cu_.cuEventDestroy(e);
    throw;
  }
}

Timer::~Timer() {
  try {
    destroy();
  } catch (const Error&) {
    // As in ~DeviceStream: the normal path calls destroy() and sees its errors.
  }
}

void Timer::destroy() {
  std::vector<CUevent> start, stop;
  start.swap(start_);
  stop.swap(stop_);
  std::string error;
  for (size_t i = 0; i < start.size(); ++i) {
    for (CUevent e : {start[i], stop[i]}) {
      const CUresult r = cu_.cuEventDestroy(e);
      if (r != CUDA_SUCCESS && error.empty())
        error = "cuEventDestroy_v2 failed: " + cu_.describe(r);
    }
  }
  if (!error.empty()) throw Error(error);
}

// Overwrites the whole scratch buffer (>= 2x L2), so the next call finds none of its data there.
void Timer::flush(int i) {
  if (scratch_bytes_)
    HM_CU_CHECK(cu_,
                cuMemsetD8Async(scratch_, static_cast<unsigned char>(i), scratch_bytes_, stream_));
}

Stats Timer::drain(Stats st) {
  HM_CU_CHECK(cu_, cuStreamSynchronize(stream_));
  return st;
}

Stats Timer::run(const Launch& launch, int warmup, int iters) {
  Stats st;
  if (iters < 1 || iters > static_cast<int>(start_.size()))
    throw Error("internal: " + std::to_string(iters) + " timed calls for a timer of " +
                std::to_string(start_.size()) + " events");
  for (int i = 0; i < warmup; ++i) {
    flush(i);
    st.error = launch();
    if (!st.error.empty()) return drain(st);
  }
  for (int i = 0; i < iters; ++i) {
    flush(i);
    HM_CU_CHECK(cu_, cuEventRecord(start_[i], stream_));
    st.error = launch();
    if (!st.error.empty()) return drain(st);
    HM_CU_CHECK(cu_, cuEventRecord(stop_[i], stream_));
  }
  HM_CU_CHECK(cu_, cuEventSynchronize(stop_[iters - 1]));
  HM_CU_CHECK(cu_, cuStreamSynchronize(stream_));
  std::vector<double> us(iters);
  for (int i = 0; i < iters; ++i) {
    float ms = 0;
    HM_CU_CHECK(cu_, cuEventElapsedTime(&ms, start_[i], stop_[i]));
    us[i] = 1e3 * ms;
  }
  std::sort(us.begin(), us.end());
  st.ok = true;
  st.count = iters;
  st.median = percentile(us, 0.5);
  st.p10 = percentile(us, 0.1);
  st.p90 = percentile(us, 0.9);
  st.min = us.front();
  return st;
}

Stats Timer::replay(CUgraphExec exec, int warmup, int iters) {
  return run([&]() -> std::string {
    const CUresult r = cu_.cuGraphLaunch(exec, stream_);
    return r == CUDA_SUCCESS ? "" : "cuGraphLaunch failed: " + cu_.describe(r);
  }, warmup, iters);
}

std::string capture(const Driver& cu, CUstream stream, int mode, const Launch& body,
                    CUgraphExec* exec) {
  *exec = nullptr;
  CUresult r = cu.cuStreamBeginCapture(stream, mode);
  if (r != CUDA_SUCCESS) return "cuStreamBeginCapture_v2 failed: " + cu.describe(r);
  std::string error = body();
  CUgraph graph = nullptr;
  r = cu.cuStreamEndCapture(stream, &graph);
  if (error.empty() && r != CUDA_SUCCESS)
    error = "cuStreamEndCapture failed: " + cu.describe(r) +
            " (something in the captured call is not capturable)";
  if (error.empty() && graph != nullptr) {
    r = cu.cuGraphInstantiateWithFlags(exec, graph, 0);
    if (r != CUDA_SUCCESS) {
      *exec = nullptr;
      error = "cuGraphInstantiateWithFlags failed: " + cu.describe(r);
    }
  }
  // The executable graph is independent of the graph it was made from.
  if (graph != nullptr) HM_CU_CHECK(cu, cuGraphDestroy(graph));
  if (error.empty() && *exec == nullptr) error = "stream capture produced no graph";
  return error;
}

Stats time_graph(const Driver& cu, Timer& timer, CUstream stream, int mode, const Launch& call,
                 int warmup, int iters) {
  Stats st;
  st.error = call();
  HM_CU_CHECK(cu, cuStreamSynchronize(stream));
  CUgraphExec exec = nullptr;
  if (st.error.empty()) st.error = capture(cu, stream, mode, call, &exec);
  if (!st.error.empty()) return st;
  try {
    st = timer.replay(exec, warmup, iters);
  } catch (...) {
    cu.cuGraphExecDestroy(exec);  // the driver error propagating is the one to report
    throw;
  }
  HM_CU_CHECK(cu, cuGraphExecDestroy(exec));
  return st;
}

// ---------------------------------------------------------------------------------------------
// cuBLAS

std::string Cublas::describe(cublasStatus_t s) const {
  std::string out = "cuBLAS status " + std::to_string(s);
  if (status_string) {
    const char* text = status_string(s);
    if (text) out += std::string(" (") + text + ")";
  }
  return out;
}

void load_cublas(Cublas& cb) {
  std::vector<std::string> candidates;
  const char* env = std::getenv("HUMMING_CUBLAS_PATH");
  if (env && *env) candidates.push_back(env);
  else candidates = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
  std::string tried;
  void* handle = nullptr;
  for (const std::string& c : candidates) {
    handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      cb.library = c;
      break;
    }
    tried += (tried.empty() ? "" : "; ") + c + ": " + dlerror();
  }
  if (handle == nullptr) {
    cb.error = "cannot load cuBLAS (set HUMMING_CUBLAS_PATH to libcublas.so.*): " + tried;
    return;
  }
  auto sym = [&](const char* name) { return dlsym(handle, name); };
  cb.create = reinterpret_cast<decltype(cb.create)>(sym("cublasCreate_v2"));
  cb.destroy = reinterpret_cast<decltype(cb.destroy)>(sym("cublasDestroy_v2"));
  cb.set_stream = reinterpret_cast<decltype(cb.set_stream)>(sym("cublasSetStream_v2"));
  cb.set_workspace = reinterpret_cast<decltype(cb.set_workspace)>(sym("cublasSetWorkspace_v2"));
  cb.get_version = reinterpret_cast<decltype(cb.get_version)>(sym("cublasGetVersion_v2"));
  cb.status_string = reinterpret_cast<decltype(cb.status_string)>(sym("cublasGetStatusString"));
  cb.gemm_ex = reinterpret_cast<decltype(cb.gemm_ex)>(sym("cublasGemmEx"));
  if (!cb.create || !cb.destroy || !cb.set_stream || !cb.set_workspace || !cb.get_version ||
      !cb.gemm_ex) {
    cb.error = cb.library + " lacks one of cublasCreate_v2, cublasDestroy_v2, cublasSetStream_v2, "
               "cublasSetWorkspace_v2, cublasGetVersion_v2, cublasGemmEx";
    return;
  }
  cublasHandle_t h = nullptr;
  const cublasStatus_t s = cb.create(&h);
  if (s != CUBLAS_STATUS_SUCCESS) {
    cb.error = "cublasCreate_v2 failed: " + cb.describe(s);
    return;
  }
  cb.handle = h;
  if (cb.get_version(h, &cb.version) != CUBLAS_STATUS_SUCCESS) cb.version = 0;
}

// cublasSetStream resets the workspace to the library's own pool, so the workspace is set after.
std::string cublas_bind(Cublas& cb, CUstream stream, CUdeviceptr workspace) {
  cublasStatus_t s = cb.set_stream(cb.handle, stream);
  if (s != CUBLAS_STATUS_SUCCESS) return "cublasSetStream_v2 failed: " + cb.describe(s);
  s = cb.set_workspace(cb.handle, reinterpret_cast<void*>(workspace), kCublasWorkspaceBytes);
  if (s != CUBLAS_STATUS_SUCCESS) return "cublasSetWorkspace_v2 failed: " + cb.describe(s);
  return "";
}

// A row-major [R,C] matrix is a column-major [C,R] one with the same leading dimension. So C is
// column-major C^T [N,M] (ldc N), W is column-major W^T [K,N] (lda K) and A is column-major A^T
// [K,M] (ldb K), and C^T = W * A^T = op(W^T) * A^T with op = transpose:
// cublas(m=N, n=M, k=K, transa=T, transb=N).
std::string cublas_gemm(const Cublas& cb, int dtype, CUdeviceptr a, CUdeviceptr w, CUdeviceptr c,
                        int64_t m, int64_t n, int64_t k) {
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t s = cb.gemm_ex(
      cb.handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
      static_cast<int>(k), &alpha, reinterpret_cast<const void*>(w), dtype, static_cast<int>(k),
      reinterpret_cast<const void*>(a), dtype, static_cast<int>(k), &beta,
      reinterpret_cast<void*>(c), dtype, static_cast<int>(n), CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT);
  return s == CUBLAS_STATUS_SUCCESS ? "" : "cublasGemmEx failed: " + cb.describe(s);
}

std::string cublas_unload(Cublas& cb) {
  if (cb.handle == nullptr) return "";
  const cublasStatus_t s = cb.destroy(cb.handle);
  cb.handle = nullptr;
  return s == CUBLAS_STATUS_SUCCESS ? "" : "cublasDestroy_v2 failed: " + cb.describe(s);
}

}  // namespace gpu_timing
