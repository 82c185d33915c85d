// Programmatic dependent launch (sm_90+). A kernel launched with the programmatic stream
// serialization attribute (runtime/launch.hpp) may start while the kernel before it on the stream
// still runs; griddep_wait() then holds the calling thread until that kernel has finished and its
// memory writes are visible. Every thread must wait before it reads anything an earlier kernel
// may write (or writes anything it may read). On a normal launch the wait returns at once.
#pragma once

#include <humming/core/types.cuh>

namespace hm::ptx {

__device__ __forceinline__ void griddep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Lets the next kernel on the stream, if launched programmatically, start its blocks now rather
// than when this grid exits. It changes nothing about visibility: the next kernel's
// griddep_wait() still waits for this whole grid.
__device__ __forceinline__ void griddep_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

}  // namespace hm::ptx
