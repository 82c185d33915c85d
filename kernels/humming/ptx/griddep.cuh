// Programmatic dependent launch (sm_90+). A kernel launched with the programmatic stream
// serialization attribute (runtime/launch.hpp) may start while the kernel before it on the stream
// still runs; griddep_wait() then holds the calling thread until that kernel has finished and its
// memory writes are visible. Every thread must wait before it reads anything an earlier kernel
// may write (or writes anything it may read). On a normal launch the wait returns at once.
//
// One kernel triggers its dependents early (griddepcontrol.launch_dependents): the activation
// quantizer in its cluster regime, whose blocks are small (at most one per SM, 128-256 threads
// at decode sizes), so the GEMM's blocks find room beside them, start, and have their weights
// prefetched into L2 while the quantizer runs (gemm/wgmma_stage_copier.cuh). The wait still
// holds them until the quantizer has finished. Triggered at the start of the quantizer's
// 1024-thread blocks (the team path), the GEMM's blocks took the SMs the quantizer left free
// and the rest started late: M = 16 lost 1.2 us (NOTES v30); that path does not trigger.
// Without a trigger the next kernel's blocks start as this grid's blocks exit, on an idle GPU,
// about 1 us sooner than in stream order.
#pragma once

#include <humming/core/types.cuh>

namespace hm::ptx {

__device__ __forceinline__ void griddep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Lets the kernel after this one on the stream, if launched programmatically, start its blocks
// now (they still wait in griddep_wait for this grid to finish). Every thread of a block that
// triggers calls it; a block that exits without calling it counts as triggered.
__device__ __forceinline__ void griddep_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

}  // namespace hm::ptx
