// Thin wrappers over the PTX instructions the GEMM templates use: tensor-core MMA, ldmatrix,
// cp.async. One function per instruction form; the callers own the fragment bookkeeping.
#pragma once

#include <humming/core/types.cuh>

namespace hm::ptx {

// D = A * B + D with f16 inputs and f32 accumulators. sm80+: one m16n8k16; sm75: two m16n8k8
// (the k16 A fragment is registers {0,1} and {2,3} of two k8 fragments; B likewise).
__device__ __forceinline__ void mma_f16_16816(float (&d)[4], const uint32 (&a)[4],
                                              const uint32 (&b)[2]) {
#if __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(b[0]));
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[2]), "r"(a[3]), "r"(b[1]));
#endif
}

// D = A * B + D with f16 inputs and f16 accumulators (acc=f16): d[0] holds row g's two columns,
// d[1] row g + 8's, each as an f16 pair. sm75: two m16n8k8, as above.
__device__ __forceinline__ void mma_f16_16816_acc16(uint32 (&d)[2], const uint32 (&a)[4],
                                                    const uint32 (&b)[2]) {
#if __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, "
      "{%0,%1};\n"
      : "+r"(d[0]), "+r"(d[1])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3}, {%4}, {%0,%1};\n"
      : "+r"(d[0]), "+r"(d[1])
      : "r"(a[0]), "r"(a[1]), "r"(b[0]));
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3}, {%4}, {%0,%1};\n"
      : "+r"(d[0]), "+r"(d[1])
      : "r"(a[2]), "r"(a[3]), "r"(b[1]));
#endif
}

// The same with bf16 inputs (sm80+).
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32 (&a)[4],
                                               const uint32 (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// D = A * B + D with 8-bit inputs, m16n8k32 (A: 4 registers of 4 codes, B: 2): e4m3 or e5m2
// into f32 accumulators (sm89+), s8 into s32 (sm80+). The caller compiles each only for an arch
// that has it (the dense family's gap check); elsewhere the body is a trap, so a kernel built for
// the wrong target fails loudly instead of computing nothing.
template <bool kE4m3>
__device__ __forceinline__ void mma_fp8_16832(float (&d)[4], const uint32 (&a)[4],
                                              const uint32 (&b)[2]) {
#if __CUDA_ARCH__ >= 890
  if constexpr (kE4m3)
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();
#endif
}
// On Turing (sm_75, which has no m16n8k32) as four m8n8k16: in the k32 fragments a0 / a2 hold
// row g's k 0-15 / 16-31 and a1 / a3 row g + 8's, b0 / b1 the column's k 0-15 / 16-31 (four s8
// each, k = 4 * (lane % 4) + i), and d0-d1 / d2-d3 rows g / g + 8: exactly the m8n8k16 A, B and
// D fragments, so each k16 half of each row half is one m8n8k16 into its two sums (exact: s32).
__device__ __forceinline__ void mma_s8_16832(uint32 (&d)[4], const uint32 (&a)[4],
                                             const uint32 (&b)[2]) {
#if __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif __CUDA_ARCH__ >= 750
#pragma unroll
  for (int h = 0; h < 2; ++h)      // row half: g, g + 8
#pragma unroll
    for (int x = 0; x < 2; ++x)    // k half: 0-15, 16-31
      asm volatile(
          "mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
          : "+r"(d[2 * h]), "+r"(d[2 * h + 1])
          : "r"(a[h + 2 * x]), "r"(b[x]));
#else
  __trap();
#endif
}

__device__ __forceinline__ uint32 smem_address(const void* p) {
  return static_cast<uint32>(__cvta_generic_to_shared(p));
}

// Four 8x8 matrices of 16-bit elements; lane i gives the row address of matrix i / 8, row i % 8.
__device__ __forceinline__ void ldmatrix_x4(uint32 (&r)[4], uint32 address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// 16-byte asynchronous copy global -> shared; bytes past src_bytes (0 or 16) are zero-filled.
// sm75 has no cp.async: the copy is a plain load and store there (and commit / wait are no-ops).
__device__ __forceinline__ void cp_async_16(uint32 smem, const void* global, int src_bytes) {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(global),
               "r"(src_bytes));
#else
  uint32 v[4] = {0, 0, 0, 0};
  if (src_bytes > 0)
    asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
                 : "l"(global));
  asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};\n" ::"r"(smem), "r"(v[0]), "r"(v[1]),
               "r"(v[2]), "r"(v[3]));
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n");
#endif
}
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
#endif
}

// Three-input logic op: lop3(a, b, c, LUT) (LUT from the truth table of a=0xF0, b=0xCC, c=0xAA).
template <int kLut>
__device__ __forceinline__ uint32 lop3(uint32 a, uint32 b, uint32 c) {
  uint32 d;
  asm("lop3.b32 %0, %1, %2, %3, %4;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c), "n"(kLut));
  return d;
}

// Weight loads are streamed once: keep them out of L1 and mark them first to evict from L2.
__device__ __forceinline__ void load_global_stream(uint32 (&r)[4], const void* p) {
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "l"(p));
}
__device__ __forceinline__ void load_global_stream(uint32 (&r)[2], const void* p) {
  asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "l"(p));
}
__device__ __forceinline__ void load_global_stream(uint32 (&r)[1], const void* p) {
  asm volatile("ld.global.nc.L1::no_allocate.u32 %0, [%1];\n" : "=r"(r[0]) : "l"(p));
}

}  // namespace hm::ptx
