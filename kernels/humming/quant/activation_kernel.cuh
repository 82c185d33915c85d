// The GPU activation quantizer (hm_quantize_activation_device): f16 / bf16 rows -> 8-bit codes and
// f32 scales per token or per token x K group, by the rule of activation.h. One block per row (the
// grid strides over rows beyond kMaxGridBlocks). A pass loads up to kSpan elements of the row into
// registers (kVectorsPerThread vectors of 8 per thread, 16-byte loads when aligned), reduces each
// group's absmax with segmented warp shuffles and one shared-memory atomicMax per warp segment,
// then encodes from the registers: one read of the input when a group fits in a pass (group_k <=
// 16384, i.e. every per-group case and per-token rows up to K = 16384). Larger groups read twice
// (absmax, then encode); the second read is mostly served by L2.
#pragma once

#include <humming/core/types.cuh>
#include <humming/quant/activation.h>

namespace hm::actquant {

// One pass: elements [c0, c1) of a row in registers. Vector i of thread t holds elements
// c0 + 8 * (i * kThreads + t) + 0..7, so a warp's vectors are 32 consecutive vectors and every
// group (a multiple of 8 columns, starting at a multiple of 8) is a run of consecutive lanes.
struct Pass {
  float x[kVectorsPerThread][kVector];
  uint32_t absmax[kVectorsPerThread];  // max |x| bits of the vector (0 outside [c0, c1))
};

template <int In>
__device__ __forceinline__ void load_pass(const Params& p, int64_t row, int64_t c0, int64_t c1,
                                          Pass& s) {
#pragma unroll
  for (int i = 0; i < kVectorsPerThread; ++i) {
    const int64_t j0 = c0 + static_cast<int64_t>(kVector) * (i * kThreads + threadIdx.x);
    uint32_t m = 0;
    if (j0 + kVector <= c1 && (p.flags & kVectorLoads)) {
      uint32_t w[4];
      asm("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                   : "l"(p.a + row * p.k + j0));
#pragma unroll
      for (int e = 0; e < kVector; ++e) {
        s.x[i][e] = widen<In>(static_cast<uint16_t>(w[e / 2] >> (16 * (e % 2))));
        const uint32_t b = float_bits(s.x[i][e]) & kAbsMask;
        m = b > m ? b : m;
      }
    } else {
#pragma unroll
      for (int e = 0; e < kVector; ++e) {
        s.x[i][e] = j0 + e < c1 ? load_input<In>(p, row, j0 + e) : 0.0f;
        const uint32_t b = float_bits(s.x[i][e]) & kAbsMask;
        m = b > m ? b : m;
      }
    }
    s.absmax[i] = m;
  }
}

// Folds each vector's absmax into group_max[(j0 - base) / group_k] (`base`: the first column of
// the pass's first group), through a suffix max over the warp's run of lanes of one group and one
// atomicMax by the run's first lane.
__device__ __forceinline__ void reduce_pass(const Params& p, int64_t base, int64_t c0,
                                            const Pass& s, uint32_t* group_max) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int i = 0; i < kVectorsPerThread; ++i) {
    const int64_t j0 = c0 + static_cast<int64_t>(kVector) * (i * kThreads + threadIdx.x);
    const int64_t g = (j0 - base) / p.group_k;  // vectors past the end: value 0, any valid slot
    const int group = static_cast<int>(g < kMaxGroupsPerPass ? g : kMaxGroupsPerPass - 1);
    uint32_t m = s.absmax[i];
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
      const uint32_t other = __shfl_down_sync(0xFFFFFFFFu, m, offset);
      const int other_group = __shfl_down_sync(0xFFFFFFFFu, group, offset);
      if (lane + offset < 32 && other_group == group) m = other > m ? other : m;
    }
    const int previous_group = __shfl_up_sync(0xFFFFFFFFu, group, 1);
    if ((lane == 0 || previous_group != group) && m != 0) atomicMax(group_max + group, m);
  }
}

// Encodes the pass from registers with the scales of group_max and stores codes (and, from the
// first vector of each group when `write_scales`, its scale). Group g0 starts at column `base`.
template <int Out>
__device__ __forceinline__ void store_pass(const Params& p, int64_t row, int64_t base, int64_t c0,
                                           int64_t c1, const Pass& s, int64_t g0,
                                           const uint32_t* group_max, bool write_scales) {
#pragma unroll
  for (int i = 0; i < kVectorsPerThread; ++i) {
    const int64_t j0 = c0 + static_cast<int64_t>(kVector) * (i * kThreads + threadIdx.x);
    if (j0 >= c1) continue;
    const int64_t g = (j0 - base) / p.group_k;
    const float scale = group_scale<Out>(group_max[g]);
    if (write_scales && (j0 - base) % p.group_k == 0) p.scales[row * p.groups + g0 + g] = scale;
    uint32_t w[2] = {0u, 0u};
#pragma unroll
    for (int e = 0; e < kVector; ++e)
      w[e / 4] |= quantize_element<Out>(s.x[i][e], scale) << (8 * (e % 4));
    uint8_t* out = p.codes + row * p.k + j0;
    if (j0 + kVector <= c1 && (p.flags & kVectorStores)) {
      asm volatile("st.global.v2.u32 [%0], {%1, %2};\n" ::"l"(out), "r"(w[0]), "r"(w[1])
                   : "memory");
    } else {
#pragma unroll
      for (int e = 0; e < kVector; ++e)
        if (j0 + e < c1) out[e] = static_cast<uint8_t>(w[e / 4] >> (8 * (e % 4)));
    }
  }
}

template <int In, int Out>
__device__ __forceinline__ void quantize_rows(const Params& p) {
  __shared__ uint32_t group_max[kMaxGroupsPerPass];
  // A pass holds whole groups when a group fits: span = the most whole groups in kSpan.
  const bool groups_fit = p.group_k <= kSpan;
  const int64_t span = groups_fit ? kSpan / p.group_k * p.group_k : kSpan;
  for (int64_t row = blockIdx.x; row < p.m; row += gridDim.x) {
    if (groups_fit) {
      for (int64_t c0 = 0; c0 < p.k; c0 += span) {
        const int64_t c1 = c0 + span < p.k ? c0 + span : p.k;
        const int64_t g0 = c0 / p.group_k;
        for (int g = threadIdx.x; g < kMaxGroupsPerPass; g += kThreads) group_max[g] = 0;
        Pass s;
        load_pass<In>(p, row, c0, c1, s);
        __syncthreads();  // group_max cleared (and the previous pass done with it)
        reduce_pass(p, c0, c0, s, group_max);
        __syncthreads();
        store_pass<Out>(p, row, c0, c0, c1, s, g0, group_max, true);
        __syncthreads();  // before the next pass clears group_max
      }
    } else {
      // A group larger than a pass: its absmax over every pass, then the passes again.
      for (int64_t g = 0; g < p.groups; ++g) {
        const int64_t base = g * p.group_k;
        const int64_t end = base + p.group_k < p.k ? base + p.group_k : p.k;
        if (threadIdx.x == 0) group_max[0] = 0;
        __syncthreads();
        for (int64_t c0 = base; c0 < end; c0 += span) {
          Pass s;
          load_pass<In>(p, row, c0, c0 + span < end ? c0 + span : end, s);
          reduce_pass(p, base, c0, s, group_max);
        }
        __syncthreads();
        for (int64_t c0 = base; c0 < end; c0 += span) {
          const int64_t c1 = c0 + span < end ? c0 + span : end;
          Pass s;
          load_pass<In>(p, row, c0, c1, s);
          store_pass<Out>(p, row, base, c0, c1, s, g, group_max, c0 == base);
        }
        __syncthreads();  // before the next group clears group_max[0]
      }
    }
  }
}

}  // namespace hm::actquant

// Defines the extern "C" quantizer `name` for input In (kInF16, kInBf16) and output Out (kOutE4m3,
// kOutE5m2, kOutInt8). Launch with kThreads threads per block and min(m, kMaxGridBlocks) blocks.
#define HM_DEFINE_QUANTIZE_ACTIVATION(name, In, Out)                                            \
  extern "C" __global__ void __launch_bounds__(::hm::actquant::kThreads)                       \
      name(const ::hm::actquant::Params p) {                                                   \
    ::hm::actquant::quantize_rows<In, Out>(p);                                                 \
  }
