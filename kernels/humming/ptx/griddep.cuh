// Programmatic dependent launch (sm_90+). A kernel launched with the programmatic stream
// serialization attribute (runtime/launch.hpp) may start while the kernel before it on the stream
// still runs; griddep_wait() then holds the calling thread until that kernel has finished and its
// memory writes are visible. Every thread must wait before it reads anything an earlier kernel
// may write (or writes anything it may read). On a normal launch the wait returns at once.
//
// No kernel here triggers its dependents early (griddepcontrol.launch_dependents): the next
// kernel's blocks then start as this grid's blocks exit, on an idle GPU, about 1 us sooner than
// in stream order. Triggered at the activation quantizer's start, the GEMM's blocks took the SMs
// the quantizer left free and the rest started late: M = 16 lost 1.2 us (NOTES v30).
// Nor does a GEMM read ahead of its wait: asking TMA for all of a small-M block's weight boxes
// in L2 before the wait (legal: a hint), with the cluster-regime quantizer triggering at entry,
// made the W4A8 8192^2 GEMM alone 6-9 us slower at M = 1-128, the prefetches queued ahead of
// the stages' own copies (H100, NOTES v33).
#pragma once

#include <humming/core/types.cuh>

namespace hm::ptx {

__device__ __forceinline__ void griddep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

}  // namespace hm::ptx
