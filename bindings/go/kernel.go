package humming

/*
#include <stdint.h>
#include "humming.h"
static inline void *hm_go_stream(uintptr_t s) { return (void *)s; }
*/
import "C"

import "runtime"

// Slot is a launch-parameter slot (ArgA, ArgB, ..., ArgM, ...).
type Slot int32

// LaunchParams are the arguments of a launch by slot. Not safe for concurrent use (the header
// says so): use one per goroutine.
type LaunchParams struct {
	h *C.hm_launch_params_t
}

func NewLaunchParams() (*LaunchParams, error) {
	var h *C.hm_launch_params_t
	if err := call(func() C.hm_status_t { return C.hm_launch_params_create(&h) }); err != nil {
		return nil, err
	}
	p := &LaunchParams{h: h}
	runtime.SetFinalizer(p, (*LaunchParams).Close)
	return p, nil
}

func (p *LaunchParams) Close() {
	if p.h != nil {
		C.hm_launch_params_destroy(p.h)
		p.h = nil
	}
	runtime.SetFinalizer(p, nil)
}

func (p *LaunchParams) with(do func(h *C.hm_launch_params_t) C.hm_status_t) error {
	if p == nil || p.h == nil {
		return closed("LaunchParams")
	}
	err := call(func() C.hm_status_t { return do(p.h) })
	runtime.KeepAlive(p)
	return err
}

func (p *LaunchParams) SetPointer(slot Slot, ptr DevicePtr) error {
	return p.with(func(h *C.hm_launch_params_t) C.hm_status_t {
		return C.hm_launch_params_set_pointer(h, C.int32_t(slot), C.uint64_t(ptr))
	})
}

func (p *LaunchParams) SetInt(slot Slot, value int64) error {
	return p.with(func(h *C.hm_launch_params_t) C.hm_status_t {
		return C.hm_launch_params_set_int(h, C.int32_t(slot), C.int64_t(value))
	})
}

// Clear resets every slot to 0.
func (p *LaunchParams) Clear() error {
	return p.with(func(h *C.hm_launch_params_t) C.hm_status_t { return C.hm_launch_params_clear(h) })
}

// Kernel is one compiled kernel (today: the reference GEMM); usable from several goroutines.
type Kernel struct {
	h                 *C.hm_kernel_t
	inDType, outDType DType
}

// ReferenceGemmKernel compiles (or loads from the cache) the reference GEMM
// C[M,N] = A[M,K] * B[N,K]^T for inDType (A, B) and outDType, each F16, BF16 or F32.
func (c *Context) ReferenceGemmKernel(inDType, outDType DType) (*Kernel, error) {
	var h *C.hm_kernel_t
	err := c.with(func(ch *C.hm_context_t) C.hm_status_t {
		return C.hm_kernel_create_reference_gemm(ch, C.hm_dtype_t(inDType), C.hm_dtype_t(outDType), &h)
	})
	if err != nil {
		return nil, err
	}
	k := &Kernel{h: h, inDType: inDType, outDType: outDType}
	runtime.SetFinalizer(k, (*Kernel).Close)
	return k, nil
}

func (k *Kernel) Close() {
	if k.h != nil {
		C.hm_kernel_destroy(k.h)
		k.h = nil
	}
	runtime.SetFinalizer(k, nil)
}

func (k *Kernel) text(f func(h *C.hm_kernel_t, buf *C.char, size C.size_t, length *C.size_t) C.hm_status_t) (string, error) {
	if k == nil || k.h == nil {
		return "", closed("Kernel")
	}
	defer runtime.KeepAlive(k)
	return copyOut(func(buf *C.char, size C.size_t, length *C.size_t) C.hm_status_t { return f(k.h, buf, size, length) })
}

func (k *Kernel) Name() (string, error) {
	return k.text(func(h *C.hm_kernel_t, b *C.char, s C.size_t, l *C.size_t) C.hm_status_t {
		return C.hm_kernel_name(h, b, s, l)
	})
}

// CacheKey is the kernel's cache key (hex), for logs.
func (k *Kernel) CacheKey() (string, error) {
	return k.text(func(h *C.hm_kernel_t, b *C.char, s C.size_t, l *C.size_t) C.hm_status_t {
		return C.hm_kernel_cache_key(h, b, s, l)
	})
}

// Launch runs the kernel with raw launch parameters on stream (asynchronous). The pointers
// set in params must address device memory of the right sizes.
func (k *Kernel) Launch(params *LaunchParams, stream Stream) error {
	if k == nil || k.h == nil {
		return closed("Kernel")
	}
	err := params.with(func(ph *C.hm_launch_params_t) C.hm_status_t {
		return C.hm_kernel_launch(k.h, ph, C.hm_go_stream(C.uintptr_t(stream)))
	})
	runtime.KeepAlive(k)
	return err
}

func needBytes(name string, m DeviceMemory, need int) error {
	if m == nil {
		return invalid("'%s' is nil", name)
	}
	if m.Len() < need {
		return invalid("'%s' has %d bytes of device memory, needs %d", name, m.Len(), need)
	}
	return nil
}

// Gemm runs C[M,N] = A[M,K] * B[N,K]^T on stream with the buffer sizes checked first.
// Asynchronous: synchronize before reading C.
func (k *Kernel) Gemm(params *LaunchParams, a, b, c DeviceMemory, m, n, kk int, stream Stream) error {
	in, out := k.inDType.bytes(), k.outDType.bytes()
	for _, check := range []error{needBytes("a", a, m*kk*in), needBytes("b", b, n*kk*in), needBytes("c", c, m*n*out)} {
		if check != nil {
			return check
		}
	}
	if err := params.Clear(); err != nil {
		return err
	}
	for _, s := range []struct {
		slot Slot
		ptr  DevicePtr
	}{{ArgA, a.Ptr()}, {ArgB, b.Ptr()}, {ArgC, c.Ptr()}} {
		if err := params.SetPointer(s.slot, s.ptr); err != nil {
			return err
		}
	}
	for _, s := range []struct {
		slot Slot
		v    int
	}{{ArgM, m}, {ArgN, n}, {ArgK, kk}} {
		if err := params.SetInt(s.slot, int64(s.v)); err != nil {
			return err
		}
	}
	return k.Launch(params, stream)
}
