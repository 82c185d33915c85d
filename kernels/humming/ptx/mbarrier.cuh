// Shared-memory barriers with phases (mbarrier, sm80+; arrive-on by cp.async completion, sm80+).
// The dense wgmma pipeline uses one "full" barrier per stage (every thread's copies landed) and
// one "empty" barrier per stage (every warp is done reading it), so warpgroups need not run in
// lockstep the way a block-wide __syncthreads forces them to.
#pragma once

#include <humming/core/types.cuh>

namespace hm::ptx {

__device__ __forceinline__ void mbarrier_init(uint32 bar, uint32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// One arrival of the executing thread.
__device__ __forceinline__ void mbarrier_arrive(uint32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// One arrival of the executing thread, made when all of its earlier cp.async copies have
// completed (.noinc: the arrival is one of the count the barrier was initialized with).
__device__ __forceinline__ void cp_async_mbarrier_arrive(uint32 bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
// Waits until the barrier's phase with parity `parity` has completed.
__device__ __forceinline__ void mbarrier_wait(uint32 bar, uint32 parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

}  // namespace hm::ptx
