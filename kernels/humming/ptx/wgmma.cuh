// Hopper warpgroup MMA (sm90a): the synchronization instructions, the shared-memory matrix
// descriptor, and the name of the instruction itself, WgmmaRs<N, kind>, whose specializations
// are generated per token width N into ptx/wgmma/m64n<N>.cuh (scripts/gen_wgmma.py), because
// its operand list has one register per accumulator.
#pragma once

#include <humming/core/types.cuh>

namespace hm::ptx {

// The operand types and accumulator of a wgmma.
enum WgmmaKind {
  kWgmmaF16AccF32,
  kWgmmaBf16AccF32,
  kWgmmaF16AccF16,
  kWgmmaE4m3AccF32,
  kWgmmaE5m2AccF32,
  kWgmmaE4m3AccF16,
  kWgmmaE5m2AccF16,
  kWgmmaS8AccS32,  // int8 x int8, s32 accumulators (exact; the kernel converts them to f32)
};

// wgmma.mma_async m64nNk16 (16-bit inputs) or m64nNk32 (8-bit floats, int8) with A (64 x K) from
// four registers per thread and B (K x N) by a shared-memory descriptor: 32 bytes of K either way,
// accumulating into d (f32: [N / 8][4]; f16 pairs: [N / 8][2]; s32: uint32 [N / 8][4]), or
// overwriting it when scale_d is 0:
//   static void run(float (&d)[N / 8][4], uint32 a0, a1, a2, a3, unsigned long long desc,
//                   int scale_d = 1).
// Include ptx/wgmma/m64n<N>.cuh for the width a kernel uses.
template <int kN, WgmmaKind kKind>
struct WgmmaRs;

// Orders this thread's register writes (A fragments, accumulators) before the next wgmma reads.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most kPending committed wgmma groups of this warpgroup are still running.
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// Makes this thread's generic-proxy writes to shared memory (st.shared, cp.async after its wait)
// visible to the async proxy, through which wgmma reads its shared-memory operands.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Keeps the compiler from moving reads or writes of an accumulator across a wgmma wait: the
// register is "changed" here, where the wait has made it final.
__device__ __forceinline__ void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void fence_operand(uint32& r) { asm volatile("" : "+r"(r)::"memory"); }

// Matrix descriptor of a K-major operand tile in shared memory with the 128-byte swizzle: rows
// of 64 16-bit values (128 bytes), 16-byte unit u of row r stored at unit u ^ (r % 8), 8-row
// groups 1024 bytes apart, the tile 1024-byte aligned. Advancing the start address by 32 bytes
// selects the next 16 values of K (the swizzle is applied to the absolute address bits).
// Fields (PTX ISA, "Matrix Descriptor Format"): start address >> 4 in bits 0-13, leading byte
// offset >> 4 in 16-29 (unused for swizzled K-major), stride byte offset >> 4 in 32-45, base
// offset 0, swizzle mode in 62-63 (1 = 128B).
__device__ __forceinline__ uint64_t smem_descriptor_k_sw128(uint32 smem_address) {
  return static_cast<uint64_t>((smem_address & 0x3FFFFu) >> 4) | (uint64_t{1} << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}
// The descriptor of a tile `offset` bytes (a multiple of 16) further: the start address field
// is the low 14 bits of address >> 4, and shared memory (228 KiB at most) keeps it from carrying
// out, so one add replaces re-encoding the address.
__device__ __forceinline__ uint64_t advance_descriptor(uint64_t descriptor, uint32 offset) {
  return descriptor + (offset >> 4);
}

}  // namespace hm::ptx
