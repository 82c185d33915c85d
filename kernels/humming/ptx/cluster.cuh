// Thread-block clusters (sm90+): the cluster barrier, a block's rank, and reads and writes of
// another block's shared memory (distributed shared memory). The dense GEMM uses them to reduce
// K splits that run as one cluster without a trip through global memory, the activation
// quantizer to reduce a row's absmax over the blocks that share the row.
#pragma once

#include <humming/core/types.cuh>

namespace hm::ptx {

// Every thread of every block of the cluster arrives, then waits for all the others. Release /
// acquire: shared-memory writes before it are visible to the cluster's reads after it. Threads
// need not be converged (no .aligned), so a block may call it from a warp-divergent path.
__device__ __forceinline__ void cluster_sync() {
  asm volatile(
      "barrier.cluster.arrive.release;\n"
      "barrier.cluster.wait.acquire;\n" ::
          : "memory");
}

// This block's rank in its cluster, 0 .. cluster_blocks() - 1 (x fastest, then y, then z).
__device__ __forceinline__ uint32 cluster_rank() {
  uint32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32 cluster_blocks() {
  uint32 r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(r));
  return r;
}

// The address in block `rank`'s shared memory that corresponds to this block's shared address
// `address` (same offset in the other block's window).
__device__ __forceinline__ uint32 cluster_map(uint32 address, uint32 rank) {
  uint32 r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(address), "r"(rank));
  return r;
}

// The first of a two-part cluster barrier, relaxed (orders no memory): every thread arrives early
// and calls cluster_wait() later, when it needs the others to have started (before writing into
// their shared memory). One arrive / wait pair is one phase of the cluster barrier.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait;\n" ::: "memory");
}

// Stores a u32 at a cluster_map() address (another block's shared memory).
__device__ __forceinline__ void store_cluster_u32(uint32 cluster_address, uint32 value) {
  asm volatile("st.shared::cluster.u32 [%0], %1;\n" ::"r"(cluster_address), "r"(value)
               : "memory");
}

// 16 bytes (four f32) of the cluster's shared memory at a cluster_map() address.
__device__ __forceinline__ float4 load_cluster_f32x4(uint32 cluster_address) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(cluster_address)
               : "memory");
  return v;
}

}  // namespace hm::ptx
