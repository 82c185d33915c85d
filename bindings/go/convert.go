package humming

/*
#include <stdlib.h>
#include <string.h>
#include "humming.h"

// The progress callback: hm_go_progress is the Go function exported in progress.go.
extern void hm_go_progress(void *user_data, char *tensor_name, uint64_t done, uint64_t total);
static void hm_go_progress_trampoline(void *user_data, const char *name, uint64_t done, uint64_t total) {
  hm_go_progress(user_data, (char *)name, done, total);
}
// The cancel callback: hm_go_cancel (progress.go) says whether the progress callback panicked.
extern int32_t hm_go_cancel(void *user_data);
static int32_t hm_go_cancel_trampoline(void *user_data) { return hm_go_cancel(user_data); }
static void hm_go_set_progress(hm_convert_options_t *o, uintptr_t handle) {
  o->progress = hm_go_progress_trampoline;
  o->progress_user_data = (void *)handle;
  o->cancel = hm_go_cancel_trampoline;
  o->cancel_user_data = (void *)handle;
}
*/
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// ParseScheme maps a scheme name ("gptq", "awq", "ct-fp8", ...) to its Scheme* constant.
func ParseScheme(name string) (int32, error) {
	s := cString(name)
	defer free(unsafe.Pointer(s))
	var out C.int32_t
	err := call(func() C.hm_status_t { return C.hm_scheme_parse(s, &out) })
	return int32(out), err
}

// CheckpointTensor is one checkpoint tensor in host memory: its name ("qweight", or a full
// name), safetensors dtype ("I32", "F16", "F8_E4M3", ...), shape and row-major bytes.
type CheckpointTensor struct {
	Name, DType string
	Shape       []int64
	Data        []byte
}

// ConvertOptions are hm_convert_options_t; the zero value lets the scheme decide everything.
type ConvertOptions struct {
	Activation, Output    DType
	Bits, GroupSize       int32
	Flags                 uint32 // Convert* bits
	GlobalScaleConvention int32  // GlobalScale*
	ShardRows             []int64
	// Progress is called by ConvertFile after each tensor written (name, done and total bytes).
	Progress func(name string, done, total uint64)
}

// cOptions builds the C options in C memory (they may point to more C memory, never to Go's);
// release frees it all.
func (o *ConvertOptions) cOptions() (opts *C.hm_convert_options_t, release func()) {
	opts = (*C.hm_convert_options_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.hm_convert_options_t{}))))
	C.hm_convert_options_init_sized(opts, C.size_t(unsafe.Sizeof(*opts)))
	var rows unsafe.Pointer
	if o != nil {
		opts.activation = C.hm_dtype_t(o.Activation)
		opts.output = C.hm_dtype_t(o.Output)
		opts.bits = C.int32_t(o.Bits)
		opts.group_size = C.int32_t(o.GroupSize)
		opts.flags = C.uint32_t(o.Flags)
		opts.global_scale_convention = C.int32_t(o.GlobalScaleConvention)
		if len(o.ShardRows) > 0 {
			rows = C.CBytes(unsafe.Slice((*byte)(unsafe.Pointer(&o.ShardRows[0])), 8*len(o.ShardRows)))
			opts.shard_rows = (*C.int64_t)(rows)
			opts.shard_count = C.int32_t(len(o.ShardRows))
		}
	}
	return opts, func() {
		C.free(rows)
		C.free(unsafe.Pointer(opts))
	}
}

// ConvertedLayer is a converted layer with host copies of its buffers. Not for concurrent use
// (the header makes no promise for it).
type ConvertedLayer struct {
	h *C.hm_converted_layer_t
	// Canonical holds the canonical buffers: pass them to Format().Pack.
	Canonical CanonicalWeight
	// Bias is f32 [E][N], nil when the format has none.
	Bias []float32
	// KPermutation is int32 [K], nil when K keeps its order; else gather the activations with
	// it: A'[:, k] = A[:, KPermutation[k]].
	KPermutation []int32
	// Note says what the conversion lost (e.g. MXFP4 scale groups below the exponent window of
	// 8-bit activations, whose codes were re-rounded), one sentence; "" when nothing.
	Note string
}

func (l *ConvertedLayer) Close() {
	if l.h != nil {
		C.hm_converted_layer_destroy(l.h)
		l.h = nil
	}
	runtime.SetFinalizer(l, nil)
}

// Format is a new copy of the layer's format (close it yourself).
func (l *ConvertedLayer) Format() (*Format, error) {
	if l == nil || l.h == nil {
		return nil, closed("ConvertedLayer")
	}
	var h *C.hm_format_t
	err := call(func() C.hm_status_t { return C.hm_converted_layer_format(l.h, &h) })
	runtime.KeepAlive(l)
	if err != nil {
		return nil, err
	}
	return adoptFormat(h), nil
}

// copyBytes copies n bytes from C memory (C.GoBytes takes a C int: a layer of 2 GiB or more,
// such as a stacked FP8 MoE layer, would not fit it).
func copyBytes(p unsafe.Pointer, n int) []byte {
	if p == nil || n == 0 {
		return nil
	}
	return append([]byte(nil), unsafe.Slice((*byte)(p), n)...)
}

// copyInt32s copies n int32 values from C memory; nil for NULL or 0.
func copyInt32s(p *C.int32_t, n int) []int32 {
	if p == nil || n == 0 {
		return nil
	}
	return append([]int32(nil), unsafe.Slice((*int32)(unsafe.Pointer(p)), n)...)
}

func copyFloats(p *C.float, n int) []float32 {
	if p == nil || n == 0 {
		return nil
	}
	return append([]float32(nil), unsafe.Slice((*float32)(unsafe.Pointer(p)), n)...)
}

// ConvertLayer converts one layer from its checkpoint tensors (copied into C memory for the
// call: Go memory handed to C may not hold Go pointers, and the tensor structs point to data).
func ConvertLayer(scheme int32, tensors []CheckpointTensor, options *ConvertOptions) (*ConvertedLayer, error) {
	count := len(tensors)
	size := C.size_t(unsafe.Sizeof(C.hm_checkpoint_tensor_t{}))
	array := (*C.hm_checkpoint_tensor_t)(C.calloc(C.size_t(count+1), size))
	defer C.free(unsafe.Pointer(array))
	structs := unsafe.Slice(array, count+1)[:count]
	var owned []unsafe.Pointer
	defer func() {
		for _, p := range owned {
			C.free(p)
		}
	}()
	for i, t := range tensors {
		if len(t.Shape) > 8 {
			return nil, invalid("tensor '%s' has %d dimensions; at most 8", t.Name, len(t.Shape))
		}
		s := &structs[i]
		C.hm_checkpoint_tensor_init_sized(s, C.size_t(unsafe.Sizeof(*s)))
		s.name, s.dtype = cString(t.Name), cString(t.DType)
		owned = append(owned, unsafe.Pointer(s.name), unsafe.Pointer(s.dtype))
		for d, v := range t.Shape {
			s.shape[d] = C.int64_t(v)
		}
		s.ndim = C.int32_t(len(t.Shape))
		if len(t.Data) > 0 {
			data := C.CBytes(t.Data)
			owned = append(owned, data)
			s.data = data
		}
		s.bytes = C.uint64_t(len(t.Data))
	}
	opts, release := options.cOptions()
	defer release()
	var h *C.hm_converted_layer_t
	if err := call(func() C.hm_status_t {
		return C.hm_convert_layer(C.int32_t(scheme), array, C.size_t(count), opts, &h)
	}); err != nil {
		return nil, err
	}
	return adoptConvertedLayer(h)
}

// adoptConvertedLayer takes ownership of a layer the library made and copies out its buffers.
func adoptConvertedLayer(h *C.hm_converted_layer_t) (*ConvertedLayer, error) {
	layer := &ConvertedLayer{h: h}
	runtime.SetFinalizer(layer, (*ConvertedLayer).Close)
	format, err := layer.Format()
	if err != nil {
		layer.Close()
		return nil, err
	}
	defer format.Close()
	sizes, err := format.CanonicalSizes()
	if err != nil {
		layer.Close()
		return nil, err
	}
	n, k, e, _ := format.Shape()
	var info C.hm_converted_layer_info_t
	C.hm_converted_layer_info_init_sized(&info, C.size_t(unsafe.Sizeof(info)))
	if err := call(func() C.hm_status_t { return C.hm_converted_layer_info(h, &info) }); err != nil {
		layer.Close()
		return nil, err
	}
	layer.Canonical.Codes = copyBytes(unsafe.Pointer(info.weight.codes), sizes.Codes)
	layer.Canonical.Scales = copyFloats(info.weight.scales, sizes.Scales)
	layer.Canonical.ZeroPoints = copyFloats(info.weight.zero_points, sizes.ZeroPoints)
	layer.Canonical.GlobalScale = copyFloats(info.weight.global_scale, sizes.GlobalScale)
	layer.Bias = copyFloats(info.bias, int(e)*int(n))
	layer.KPermutation = copyInt32s(info.k_permutation, int(k))
	if info.note != nil {
		layer.Note = C.GoString(info.note)
	}
	return layer, nil
}

// StackExperts and StackRows say how StackLayers joins layers (docs/convert.md "Stacking
// experts"): the layers' experts in order (E = the sum of theirs), or expert by expert the
// layers' rows in order (N = the sum of theirs: gate and up into gate_up).
const (
	StackExperts = int32(C.HM_STACK_EXPERTS)
	StackRows    = int32(C.HM_STACK_ROWS)
)

// StackLayers joins converted layers into a new one (hm_converted_layer_stack): they must share
// one format but for E (or N) and one K permutation; nothing is re-quantized. The inputs are
// left as they are.
func StackLayers(layers []*ConvertedLayer, axis int32) (*ConvertedLayer, error) {
	count := len(layers)
	// A C array of the handles: Go memory handed to C may not hold Go pointers.
	array := (**C.hm_converted_layer_t)(C.calloc(C.size_t(count+1), C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer C.free(unsafe.Pointer(array))
	slots := unsafe.Slice(array, count+1)
	for i, l := range layers {
		if l == nil || l.h == nil {
			return nil, closed("ConvertedLayer")
		}
		slots[i] = l.h
	}
	var h *C.hm_converted_layer_t
	err := call(func() C.hm_status_t {
		return C.hm_converted_layer_stack(array, C.size_t(count), C.int32_t(axis), &h)
	})
	runtime.KeepAlive(layers)
	if err != nil {
		return nil, err
	}
	return adoptConvertedLayer(h)
}

// Progress callbacks in flight, by handle: C holds the handle (an integer), never a Go pointer.
var (
	progressMu      sync.Mutex
	progressNext    uintptr
	progressByToken = map[uintptr]func(string, uint64, uint64){}
	progressPanics  = map[uintptr]interface{}{} // a callback's panic, raised after the C call
)

// keepPanic records a callback's panic for `token` (the first one: later calls are skipped).
func keepPanic(mu *sync.Mutex, panics map[uintptr]interface{}, token uintptr, r interface{}) {
	mu.Lock()
	defer mu.Unlock()
	if _, seen := panics[token]; !seen {
		panics[token] = r
	}
}

// takePanic removes and returns the panic a callback of `token` raised, if any.
func takePanic(mu *sync.Mutex, panics map[uintptr]interface{}, token uintptr) (interface{}, bool) {
	mu.Lock()
	defer mu.Unlock()
	p, ok := panics[token]
	delete(panics, token)
	return p, ok
}

// ConvertFile converts every quantized layer of a safetensors file into the standard layout
// (docs/convert.md); options.Progress, if set, is called after each tensor written. A panic in
// it stops the conversion after the current layer (nothing is written to outPath) and is raised
// again once the C call has returned.
func ConvertFile(scheme, inPath, outPath string, options *ConvertOptions) error {
	s, in, out := cString(scheme), cString(inPath), cString(outPath)
	defer free(unsafe.Pointer(s))
	defer free(unsafe.Pointer(in))
	defer free(unsafe.Pointer(out))
	opts, release := options.cOptions()
	defer release()
	var token uintptr
	if options != nil && options.Progress != nil {
		progressMu.Lock()
		progressNext++
		token = progressNext
		progressByToken[token] = options.Progress
		progressMu.Unlock()
		defer func() {
			progressMu.Lock()
			delete(progressByToken, token)
			progressMu.Unlock()
		}()
		C.hm_go_set_progress(opts, C.uintptr_t(token))
	}
	err := call(func() C.hm_status_t { return C.hm_convert_file(s, in, out, opts) })
	if p, panicked := takePanic(&progressMu, progressPanics, token); panicked {
		panic(p)
	}
	return err
}
