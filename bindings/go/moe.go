package humming

/*
#include <stdint.h>
#include "humming.h"
static inline void *hm_go_moe_stream(uintptr_t s) { return (void *)s; }
*/
import "C"

import "unsafe"

// MoeRouting is one routing decision (docs/moe.md): TopKIDs is int32 [NumTokens][TopK] global
// expert ids in device memory; ExpertMap (optional) is int32 [NumExperts] global -> local expert,
// -1 for experts of other ranks, with NumLocalExperts (0: NumExperts). Assignments whose id is
// out of range or maps outside the local experts are dropped.
type MoeRouting struct {
	TopKIDs         DeviceMemory
	NumTokens       int64
	TopK            int32
	NumExperts      int32
	NumLocalExperts int32
	ExpertMap       DeviceMemory
}

// MoeAlignSizes are the capacities (int32 elements) of MoeAlign's outputs.
type MoeAlignSizes struct {
	SortedIDs, ExpertIDs, ExpertOffsets, ExpertCounts int64
}

// MoeAlignOut are MoeAlign's int32 output buffers in device memory; ExpertCounts is optional.
type MoeAlignOut struct {
	SortedIDs, ExpertIDs, NumTokensPadded, ExpertOffsets, ExpertCounts DeviceMemory
}

// MoeReduceArgs are MoeReduce's buffers: Input [NumTokens*TopK][N] and Out [NumTokens][N] of
// DType (DTypeF16 or DTypeBF16), TopKWeights float32 [NumTokens][TopK].
type MoeReduceArgs struct {
	DType       DType
	N           int64
	Input       DeviceMemory
	TopKWeights DeviceMemory
	Out         DeviceMemory
}

func ptrOf(m DeviceMemory) C.uint64_t {
	if m == nil {
		return 0
	}
	return C.uint64_t(m.Ptr())
}

func (r MoeRouting) raw() C.hm_moe_routing_t {
	var c C.hm_moe_routing_t
	C.hm_moe_routing_init_sized(&c, C.size_t(unsafe.Sizeof(c)))
	c.topk_ids = ptrOf(r.TopKIDs)
	c.num_tokens = C.int64_t(r.NumTokens)
	c.top_k = C.int32_t(r.TopK)
	c.num_experts = C.int32_t(r.NumExperts)
	c.num_local_experts = C.int32_t(r.NumLocalExperts)
	c.expert_map = ptrOf(r.ExpertMap)
	return c
}

// MoeAlignSizesFor returns the capacities of MoeAlign's buffers for r's shapes and blockSize
// (host only; r's device buffers are not read).
func MoeAlignSizesFor(r MoeRouting, blockSize int32) (MoeAlignSizes, error) {
	c := r.raw()
	var s C.hm_moe_align_sizes_t
	C.hm_moe_align_sizes_init_sized(&s, C.size_t(unsafe.Sizeof(s)))
	err := call(func() C.hm_status_t { return C.hm_moe_align_sizes(&c, C.int32_t(blockSize), &s) })
	return MoeAlignSizes{int64(s.sorted_ids), int64(s.expert_ids), int64(s.expert_offsets),
		int64(s.expert_counts)}, err
}

func moeNeedBytes(name string, m DeviceMemory, need int64) error {
	if m == nil {
		return nil
	}
	if int64(m.Len()) < need {
		return invalid("'%s' has %d bytes of device memory, needs %d", name, m.Len(), need)
	}
	return nil
}

// MoeAlign writes the indexed MoE layout of r for token blocks of blockSize into out, on stream
// (asynchronous; capturable in a CUDA graph after a first call has compiled the kernel).
func (c *Context) MoeAlign(r MoeRouting, blockSize int32, out MoeAlignOut, stream Stream) error {
	s, err := MoeAlignSizesFor(r, blockSize)
	if err != nil {
		return err
	}
	if err := moeNeedBytes("TopKIDs", r.TopKIDs, 4*r.NumTokens*int64(r.TopK)); err != nil {
		return err
	}
	for _, b := range []struct {
		name string
		m    DeviceMemory
		n    int64
	}{{"SortedIDs", out.SortedIDs, s.SortedIDs}, {"ExpertIDs", out.ExpertIDs, s.ExpertIDs},
		{"NumTokensPadded", out.NumTokensPadded, 1}, {"ExpertOffsets", out.ExpertOffsets, s.ExpertOffsets},
		{"ExpertCounts", out.ExpertCounts, s.ExpertCounts}} {
		if err := moeNeedBytes(b.name, b.m, 4*b.n); err != nil {
			return err
		}
	}
	rc := r.raw()
	var o C.hm_moe_align_out_t
	C.hm_moe_align_out_init_sized(&o, C.size_t(unsafe.Sizeof(o)))
	o.sorted_ids = ptrOf(out.SortedIDs)
	o.expert_ids = ptrOf(out.ExpertIDs)
	o.num_tokens_padded = ptrOf(out.NumTokensPadded)
	o.expert_offsets = ptrOf(out.ExpertOffsets)
	o.expert_counts = ptrOf(out.ExpertCounts)
	return c.with(func(h *C.hm_context_t) C.hm_status_t {
		return C.hm_moe_align(h, &rc, C.int32_t(blockSize), &o, C.hm_go_moe_stream(C.uintptr_t(stream)))
	})
}

// MoeReduce writes Out[t] = sum_j TopKWeights[t][j] * Input[t*TopK+j] over r's kept assignments
// (f32 accumulation, one rounding) on stream.
func (c *Context) MoeReduce(r MoeRouting, a MoeReduceArgs, stream Stream) error {
	rows := r.NumTokens * int64(r.TopK)
	for _, b := range []struct {
		name string
		m    DeviceMemory
		n    int64
	}{{"Input", a.Input, 2 * rows * a.N}, {"TopKWeights", a.TopKWeights, 4 * rows},
		{"Out", a.Out, 2 * r.NumTokens * a.N}} {
		if err := moeNeedBytes(b.name, b.m, b.n); err != nil {
			return err
		}
	}
	rc := r.raw()
	var ca C.hm_moe_reduce_args_t
	C.hm_moe_reduce_args_init_sized(&ca, C.size_t(unsafe.Sizeof(ca)))
	ca.dtype = C.hm_dtype_t(a.DType)
	ca.n = C.int64_t(a.N)
	ca.input = ptrOf(a.Input)
	ca.topk_weights = ptrOf(a.TopKWeights)
	ca.out = ptrOf(a.Out)
	return c.with(func(h *C.hm_context_t) C.hm_status_t {
		return C.hm_moe_reduce(h, &rc, &ca, C.hm_go_moe_stream(C.uintptr_t(stream)))
	})
}
