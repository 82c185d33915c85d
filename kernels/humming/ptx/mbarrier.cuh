// Shared-memory barriers with phases (mbarrier, sm80+; arrive-on by cp.async completion, sm80+;
// transaction counts and the TMA copies that complete them, sm90+).
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
// Adds `bytes` to the transaction count the barrier's current phase waits for (TMA copies that
// complete_tx on it), without arriving.
__device__ __forceinline__ void mbarrier_expect_tx(uint32 bar, uint32 bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
// One arrival that also adds `bytes` to the transaction count of the barrier's current phase.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32 bar, uint32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
// TMA (sm90): copies the box of 2-D tensor map `map` (a generic address of a CUtensorMap in
// parameter, constant or global memory) at coordinates (x, y), innermost first, to shared memory
// at `dst`, completing `bytes` of barrier `bar`'s transaction count. Out-of-bounds elements are
// zero-filled.
__device__ __forceinline__ void tma_load_2d(uint32 dst, const void* map, int x, int y,
                                            uint32 bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(map), "r"(x), "r"(y), "r"(bar)
      : "memory");
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
