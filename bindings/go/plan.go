package humming

/*
#include <stdint.h>
#include <stdlib.h>
#include "humming.h"
static inline void *hm_go_stream(uintptr_t s) { return (void *)s; }
*/
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"
)

// PlanOptions configure Context.NewPlan. MaxM 0 means no limit.
type PlanOptions struct {
	Nondeterministic bool
	MaxM             int64
	TuningJSON       string
}

// GemmArgs are the device buffers of one Plan.Gemm: the activations, the standard-layout
// weight (Format.Pack's output, uploaded) and what the format needs besides it. Leave nil
// what the format does not use.
type GemmArgs struct {
	A, Weight, Scales, ZeroPoints, GlobalScale, Bias, Workspace DeviceMemory
	// ActScales is for 8-bit activations (a=e4m3, a=e5m2, a=int8) only, and needed there: A holds one
	// code per byte and ActScales the f32 scale of each of its M rows (M*4 bytes), as
	// Context.QuantizeActivationDevice writes them with groupK 0; with activation groups
	// (a=e4m3:g128, Format.ActivationGroups) the f32 [M][ceil(K / groupK)] scales the quantizer
	// writes with that groupK (M*G*4 bytes).
	ActScales DeviceMemory
}

// Plan binds a format to a context: validated on creation, every kernel compiled in Prepare,
// then Gemm runs with no host synchronization and no allocation. A prepared plan may be used
// from several goroutines at once, each with its own LaunchParams.
type Plan struct {
	h          *C.hm_plan_t
	n          int
	experts    int
	activation DType
	actGroupK  int // activation groups: the K group of the activation scales, 0 for one per row
	actGroups  int // the activation scales per row: ceil(K / actGroupK), or 1
	aRow       int
	cElem      int
	bias       bool
	packed     PackedSizes
}

func (c *Context) NewPlan(format *Format, o PlanOptions) (*Plan, error) {
	var opts C.hm_plan_options_t
	C.hm_plan_options_init_sized(&opts, C.size_t(unsafe.Sizeof(opts)))
	if o.Nondeterministic {
		opts.flags = C.HM_PLAN_NONDETERMINISTIC
	}
	opts.max_m = C.int64_t(o.MaxM)
	if o.TuningJSON != "" {
		opts.tuning_json = cString(o.TuningJSON)
		defer free(unsafe.Pointer(opts.tuning_json))
	}
	if format == nil || format.h == nil {
		return nil, closed("Format")
	}
	var h *C.hm_plan_t
	err := c.with(func(ch *C.hm_context_t) C.hm_status_t { return C.hm_plan_create(ch, format.h, &opts, &h) })
	runtime.KeepAlive(format)
	if err != nil {
		return nil, err
	}
	p := &Plan{h: h}
	runtime.SetFinalizer(p, (*Plan).Close)
	n, k, experts, err := format.Shape()
	if err != nil {
		p.Close()
		return nil, err
	}
	act, err1 := format.DType(RoleActivation)
	out, err2 := format.DType(RoleOutput)
	bias, err3 := format.Bias()
	packed, err4 := format.PackedSizes()
	groupK, err5 := format.ActivationGroups()
	for _, e := range []error{err1, err2, err3, err4, err5} {
		if e != nil {
			p.Close()
			return nil, e
		}
	}
	p.n, p.aRow, p.cElem, p.bias, p.packed = int(n), (int(k)*act.Bits()+7)/8, out.bytes(), bias, packed
	p.experts, p.activation = int(experts), act
	p.actGroupK, p.actGroups = actScaleGroups(groupK, int(k))
	return p, nil
}

func (p *Plan) Close() {
	if p.h != nil {
		C.hm_plan_destroy(p.h)
		p.h = nil
	}
	runtime.SetFinalizer(p, nil)
}

func (p *Plan) with(do func(h *C.hm_plan_t) C.hm_status_t) error {
	if p == nil || p.h == nil {
		return closed("Plan")
	}
	err := call(func() C.hm_status_t { return do(p.h) })
	runtime.KeepAlive(p)
	return err
}

// Prepare compiles (or loads from the cache) every kernel the plan can choose.
func (p *Plan) Prepare() error {
	return p.with(func(h *C.hm_plan_t) C.hm_status_t { return C.hm_plan_prepare(h) })
}

// WorkspaceSize is the device workspace for calls with M up to maxM; allocate it zeroed once.
func (p *Plan) WorkspaceSize(maxM int64) (uint64, error) {
	var bytes C.uint64_t
	err := p.with(func(h *C.hm_plan_t) C.hm_status_t { return C.hm_plan_workspace_size(h, C.int64_t(maxM), &bytes) })
	return uint64(bytes), err
}

// MoeBlockSize is, for a MoE plan, the block size the routing pads each expert's rows to for
// a call with m tokens.
func (p *Plan) MoeBlockSize(m int64) (int32, error) {
	var block C.int32_t
	err := p.with(func(h *C.hm_plan_t) C.hm_status_t { return C.hm_plan_moe_block_size(h, C.int64_t(m), &block) })
	return int32(block), err
}

// MoeRows is, for a MoE plan, the entries SORTED_IDS must hold for m tokens and topK experts each.
func (p *Plan) MoeRows(m int64, topK int32) (int64, error) {
	var rows C.int64_t
	err := p.with(func(h *C.hm_plan_t) C.hm_status_t { return C.hm_plan_moe_rows(h, C.int64_t(m), C.int32_t(topK), &rows) })
	return int64(rows), err
}

// Describe names the kernel and tiling used for M, for logs.
func (p *Plan) Describe(m int64) (string, error) {
	if p == nil || p.h == nil {
		return "", closed("Plan")
	}
	defer runtime.KeepAlive(p)
	return copyOut(func(buf *C.char, size C.size_t, length *C.size_t) C.hm_status_t {
		return C.hm_plan_describe(p.h, C.int64_t(m), buf, size, length)
	})
}

// GemmRaw runs with raw launch parameters (asynchronous); the pointers set in params must
// address device memory of the sizes the format and M need.
func (p *Plan) GemmRaw(params *LaunchParams, stream Stream) error {
	if p == nil || p.h == nil {
		return closed("Plan")
	}
	err := params.with(func(ph *C.hm_launch_params_t) C.hm_status_t {
		return C.hm_plan_gemm(p.h, ph, C.hm_go_stream(C.uintptr_t(stream)))
	})
	runtime.KeepAlive(p)
	return err
}

func optional(name string, m DeviceMemory, need int) (DevicePtr, error) {
	if need == 0 {
		if m != nil {
			return 0, invalid("'%s' was given, but the format has no use for it", name)
		}
		return 0, nil
	}
	if err := needBytes(name, m, need); err != nil {
		return 0, err
	}
	return m.Ptr(), nil
}

// Gemm runs C[M,N] = A[M,K] * dequant(W)^T (+ bias) on stream, with every buffer's size
// checked against the format and M first. Asynchronous: synchronize before reading C. 8-bit
// activations (a=e4m3, a=e5m2, a=int8): A is [M, K] codes and args.ActScales their [M] f32 scales
// ([M][ceil(K / groupK)] with activation groups, a=e4m3:g128).
func (p *Plan) Gemm(params *LaunchParams, args GemmArgs, c DeviceMemory, m int, stream Stream) error {
	if p == nil { // a closed plan (nil handle) is refused after the argument checks
		return closed("Plan")
	}
	if p.experts > 1 {
		return invalid("the plan's format has %d experts: use MoeGemm", p.experts)
	}
	return p.run(params, args, c, m, m, m, nil, stream)
}

// MoeRoutingBuffers is the indexed routing of a MoE call (docs/moe.md), laid out by MoeAlign (or an
// engine's moe_align) with the plan's MoeBlockSize(m): int32 device buffers.
type MoeRoutingBuffers struct {
	SortedIds, ExpertIds, NumTokensPadded DeviceMemory
}

// MoeGemm runs a MoE plan (experts >= 2), indexed: C[M*topK, N], row t*topK+j being token t
// through its j-th expert (A [M, K]; Weight, Scales, ZeroPoints, GlobalScale and Bias hold every
// expert). Every buffer's size is checked first; the routing's contents are read only on the
// device. Asynchronous.
func (p *Plan) MoeGemm(params *LaunchParams, args GemmArgs, routing MoeRoutingBuffers, c DeviceMemory, m int,
	topK int, stream Stream) error {
	if p == nil {
		return closed("Plan")
	}
	if p.experts < 2 {
		return invalid("the plan's format is dense (one expert): use Gemm")
	}
	if topK < 0 || topK > math.MaxInt32 {
		return invalid("'topK' is %d, beyond the C ABI's int32_t", topK)
	}
	rows, err := p.MoeRows(int64(m), int32(topK))
	if err != nil {
		return err
	}
	block, err := p.MoeBlockSize(int64(m))
	if err != nil {
		return err
	}
	extra := []slotValue{}
	for _, r := range []struct {
		name string
		slot Slot
		mem  DeviceMemory
		need int
	}{{"SortedIds", ArgSortedIds, routing.SortedIds, int(rows) * 4},
		{"ExpertIds", ArgExpertIds, routing.ExpertIds, int(rows/int64(block)) * 4},
		{"NumTokensPadded", ArgNumTokensPadded, routing.NumTokensPadded, 4}} {
		if err := needBytes(r.name, r.mem, r.need); err != nil {
			return err
		}
		extra = append(extra, slotValue{r.slot, r.mem.Ptr()})
	}
	return p.run(params, args, c, m, m, m*topK, func() error {
		for _, v := range extra {
			if err := params.SetPointer(v.slot, v.ptr); err != nil {
				return err
			}
		}
		return params.SetInt(ArgTopK, int64(topK))
	}, stream)
}

// MoeGemmContiguous runs a MoE plan, grouped contiguous (docs/moe.md): A [M, K] with rows grouped
// by expert, C [M, N]; expert e owns rows expertOffsets[e] .. expertOffsets[e+1] (int32, E+1
// entries, read only on the device and clamped to [0, M]). Rows outside every expert's run are
// not written. Asynchronous.
func (p *Plan) MoeGemmContiguous(params *LaunchParams, args GemmArgs, expertOffsets DeviceMemory, c DeviceMemory,
	m int, stream Stream) error {
	if p.experts < 2 {
		return invalid("the plan's format is dense (one expert): use Gemm")
	}
	if err := needBytes("ExpertOffsets", expertOffsets, (p.experts+1)*4); err != nil {
		return err
	}
	return p.run(params, args, c, m, m, m, p.grouped(params, MoeModeContiguous, ArgExpertOffsets, expertOffsets),
		stream)
}

// MoeGemmMasked runs a MoE plan, grouped masked (docs/moe.md): A [E, tMax, K], C [E, tMax, N];
// only the first maskedM[e] rows of expert e's slab are read and written (int32, E entries, read
// only on the device and clamped to [0, tMax]). Asynchronous.
func (p *Plan) MoeGemmMasked(params *LaunchParams, args GemmArgs, maskedM DeviceMemory, c DeviceMemory, tMax int,
	stream Stream) error {
	if p.experts < 2 {
		return invalid("the plan's format is dense (one expert): use Gemm")
	}
	if err := needBytes("MaskedM", maskedM, p.experts*4); err != nil {
		return err
	}
	rows := p.experts * tMax
	return p.run(params, args, c, tMax, rows, rows, p.grouped(params, MoeModeMasked, ArgMaskedM, maskedM), stream)
}

// grouped sets a grouped call's mode and its routing slot (after run has cleared the params).
func (p *Plan) grouped(params *LaunchParams, mode int, slot Slot, routing DeviceMemory) func() error {
	return func() error {
		if err := params.SetInt(ArgMoeMode, int64(mode)); err != nil {
			return err
		}
		return params.SetPointer(slot, routing.Ptr())
	}
}

type slotValue struct {
	slot Slot
	ptr  DevicePtr
}

// actScaleGroups is (groupK, G) for a format's activation groups and K: G = ceil(K / groupK)
// scales per row, or (0, 1) for one scale per row.
func actScaleGroups(groupK, k int) (int, int) {
	if groupK <= 0 {
		return 0, 1
	}
	return groupK, (k + groupK - 1) / groupK
}

// actScalesWanted says what ActScales must hold for M rows, for the error messages.
func (p *Plan) actScalesWanted(m int) string {
	if p.actGroupK == 0 {
		return fmt.Sprintf("one f32 scale per row, %d bytes for %d rows of A", m*4, m)
	}
	return fmt.Sprintf("f32 [M][%d] scales, one per row and group of %d along K, %d bytes for %d rows of A",
		p.actGroups, p.actGroupK, m*p.groups()*4, m)
}

// groups is the activation scales per row (1 for a Plan built without NewPlan's fields).
func (p *Plan) groups() int {
	if p.actGroups < 1 {
		return 1
	}
	return p.actGroups
}

// checkActScales: f32 scales come with 8-bit activations (a=e4m3, a=e5m2, a=int8), whose codes mean
// nothing without them, and only with them (the library refuses the slot for every other format,
// so a buffer given there is a mistake too): [M], or [M][G] with activation groups.
func (p *Plan) checkActScales(scales DeviceMemory, m int) error {
	scaled := p.activation == DTypeE4m3 || p.activation == DTypeE5m2 || p.activation == DTypeInt8
	switch {
	case scaled && scales == nil:
		return invalid("'ActScales' is nil; a=%s activations need %s", p.activation, p.actScalesWanted(m))
	case scaled && scales.Len() < m*p.groups()*4:
		return invalid("'ActScales' has %d bytes of device memory; a=%s activations need %s",
			scales.Len(), p.activation, p.actScalesWanted(m))
	case scales != nil && !scaled:
		return invalid("'ActScales' was given, but a=%s activations have no scales (only a=e4m3, a=e5m2 and a=int8 do)",
			p.activation)
	}
	return nil
}

// run checks and sets the slots every call has (HM_ARG_M = m, A with aRows rows, C with cRows,
// the weight-side buffers, the workspace), then `more` (the MoE routing), and launches.
func (p *Plan) run(params *LaunchParams, args GemmArgs, c DeviceMemory, m, aRows, cRows int, more func() error,
	stream Stream) error {
	if err := needBytes("A", args.A, aRows*p.aRow); err != nil {
		return err
	}
	if err := needBytes("C", c, cRows*p.n*p.cElem); err != nil {
		return err
	}
	if err := p.checkActScales(args.ActScales, aRows); err != nil { // masked: E * tMax rows
		return err
	}
	biasBytes := 0
	if p.bias {
		biasBytes = p.experts * p.n * p.cElem
	}
	values := []slotValue{{ArgA, args.A.Ptr()}, {ArgC, c.Ptr()}}
	if args.ActScales != nil {
		values = append(values, slotValue{ArgActScales, args.ActScales.Ptr()})
	}
	for _, o := range []struct {
		name string
		slot Slot
		mem  DeviceMemory
		need int
	}{{"Weight", ArgB, args.Weight, p.packed.Weight}, {"Scales", ArgScales, args.Scales, p.packed.Scales},
		{"ZeroPoints", ArgZeros, args.ZeroPoints, p.packed.ZeroPoints},
		{"GlobalScale", ArgGlobal, args.GlobalScale, p.packed.GlobalScale}, {"Bias", ArgBias, args.Bias, biasBytes}} {
		ptr, err := optional(o.name, o.mem, o.need)
		if err != nil {
			return err
		}
		if ptr != 0 {
			values = append(values, slotValue{o.slot, ptr})
		}
	}
	if err := params.Clear(); err != nil {
		return err
	}
	for _, v := range values {
		if err := params.SetPointer(v.slot, v.ptr); err != nil {
			return err
		}
	}
	if err := params.SetInt(ArgM, int64(m)); err != nil {
		return err
	}
	if args.Workspace != nil {
		// The library checks the size against what this M needs, and names both.
		if err := params.SetPointer(ArgWorkspace, args.Workspace.Ptr()); err != nil {
			return err
		}
		if err := params.SetInt(ArgWorkspaceBytes, int64(args.Workspace.Len())); err != nil {
			return err
		}
	}
	if more != nil {
		if err := more(); err != nil {
			return err
		}
	}
	return p.GemmRaw(params, stream)
}
