// Does programmatic dependent launch overlap two kernels on this GPU, on a plain stream and in a
// captured graph? (NOTES v23: quantizer + GEMM with it measured no gain, and nothing said
// whether the GEMM's blocks had started early.) A probe, not a test: it prints what it saw.
//
//   primary    spins for --spin-us on each block; executes griddepcontrol.launch_dependents
//              first thing (or not at all: the control); records its first start and last end;
//   secondary  132+ blocks shaped like a small-M GEMM (384 threads, 160 KB of shared memory)
//              record when they entered, then griddepcontrol.wait, then when the wait returned.
// Times from %globaltimer (ns, one clock for every SM). "entry - primary end" < 0 means the
// secondary's blocks were resident while the primary ran.
//   nvcc -arch=sm_90a -O2 -o pdl_probe pdl_probe.cu && ./pdl_probe
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#define CHECK(x)                                                                            \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// t[0] primary first start (min), t[1] primary last end (max), t[2] secondary first entry (min),
// t[3] secondary last entry (max), t[4] secondary first return from the wait (min).
__global__ void primary(uint64_t* t, uint64_t spin_ns, int trigger) {
  if (trigger) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const uint64_t start = now_ns();
  if (threadIdx.x == 0) atomicMin(reinterpret_cast<unsigned long long*>(&t[0]), start);
  while (now_ns() - start < spin_ns) {
  }
  __syncthreads();
  if (threadIdx.x == 0) atomicMax(reinterpret_cast<unsigned long long*>(&t[1]), now_ns());
}

__global__ void secondary(uint64_t* t) {
  extern __shared__ unsigned char smem[];
  const uint64_t entry = now_ns();
  if (threadIdx.x == 0) {
    atomicMin(reinterpret_cast<unsigned long long*>(&t[2]), entry);
    atomicMax(reinterpret_cast<unsigned long long*>(&t[3]), entry);
  }
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (threadIdx.x == 0) {
    atomicMin(reinterpret_cast<unsigned long long*>(&t[4]), now_ns());
    smem[0] = 1;
  }
}

__global__ void reset(uint64_t* t) {
  t[0] = t[2] = t[4] = ~0ull;
  t[1] = t[3] = 0;
}

struct Shape {
  const char* name;
  int primary_blocks, primary_threads, primary_smem;
};

int main(int argc, char** argv) {
  double spin_us = 20;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string_view(argv[i]) == "--spin-us") spin_us = std::atof(argv[i + 1]);
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int secondary_smem = 160 * 1024;
  CHECK(cudaFuncSetAttribute(secondary, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             secondary_smem));
  CHECK(cudaFuncSetAttribute(primary, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  uint64_t* t = nullptr;
  CHECK(cudaMalloc(&t, 8 * sizeof(uint64_t)));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // The quantizer's launch shapes (one 1024-thread block per row) and one that leaves no room.
  const Shape shapes[] = {{"1 x 1024 (quantizer, M = 1)", 1, 1024, 0},
                          {"16 x 1024 (M = 16)", 16, 1024, 0},
                          {"128 x 1024 (M = 128)", 128, 1024, 0},
                          {"SMs x 256, 200 KB smem (no room)", sms, 256, 200 * 1024}};
  std::printf("# %d SMs; primary spins %.1f us; times in us relative to the primary's end\n", sms,
              spin_us);
  std::printf("%-36s %-8s %-7s %10s %10s %10s %10s\n", "primary", "launch", "trigger",
              "prim_dur", "sec_first", "sec_last", "wait_ret");
  for (const Shape& s : shapes) {
    for (int mode = 0; mode < 3; ++mode) {  // 0 stream order, 1 PDL stream, 2 PDL graph
      for (int trigger = 0; trigger < 2; ++trigger) {
        if (mode == 0 && trigger == 1) continue;
        auto enqueue = [&] {
          reset<<<1, 1, 0, stream>>>(t);
          primary<<<s.primary_blocks, s.primary_threads, s.primary_smem, stream>>>(
              t, static_cast<uint64_t>(spin_us * 1000), trigger);
          cudaLaunchConfig_t config{};
          config.gridDim = dim3(sms, 1, 1);
          config.blockDim = dim3(384, 1, 1);
          config.dynamicSmemBytes = secondary_smem;
          config.stream = stream;
          cudaLaunchAttribute attribute{};
          attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
          attribute.val.programmaticStreamSerializationAllowed = 1;
          config.attrs = &attribute;
          config.numAttrs = mode == 0 ? 0 : 1;
          CHECK(cudaLaunchKernelEx(&config, secondary, t));
        };
        double sum[4] = {0, 0, 0, 0};
        const int reps = 5;
        cudaGraphExec_t exec = nullptr;
        if (mode == 2) {
          cudaGraph_t graph;
          CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
          enqueue();
          CHECK(cudaStreamEndCapture(stream, &graph));
          CHECK(cudaGraphInstantiate(&exec, graph, 0));
          CHECK(cudaGraphDestroy(graph));
        }
        for (int r = 0; r < reps + 1; ++r) {
          if (mode == 2) CHECK(cudaGraphLaunch(exec, stream));
          else enqueue();
          CHECK(cudaStreamSynchronize(stream));
          uint64_t h[5];
          CHECK(cudaMemcpy(h, t, sizeof h, cudaMemcpyDeviceToHost));
          if (r == 0) continue;  // warm-up
          const double end = static_cast<double>(h[1]);
          sum[0] += (end - static_cast<double>(h[0])) / 1e3;
          sum[1] += (static_cast<double>(h[2]) - end) / 1e3;
          sum[2] += (static_cast<double>(h[3]) - end) / 1e3;
          sum[3] += (static_cast<double>(h[4]) - end) / 1e3;
        }
        if (exec != nullptr) CHECK(cudaGraphExecDestroy(exec));
        std::printf("%-36s %-8s %-7s %10.2f %10.2f %10.2f %10.2f\n", s.name,
                    mode == 0 ? "stream" : mode == 1 ? "pdl" : "pdl-graph",
                    trigger ? "first" : "none", sum[0] / reps, sum[1] / reps, sum[2] / reps,
                    sum[3] / reps);
      }
    }
  }
  CHECK(cudaFree(t));
  return 0;
}
