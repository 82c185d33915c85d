package humming

/*
#include <stdint.h>
#include <stdlib.h>
#include "humming.h"
// A stream travels through Go as an integer; the pointer is rebuilt on the C side.
static inline void *hm_go_stream(uintptr_t s) { return (void *)s; }
*/
import "C"

import (
	"runtime"
	"sync"
	"time"
	"unsafe"
)

// DevicePtr is a device address (CUdeviceptr).
type DevicePtr uint64

// Stream is a CUDA stream (CUstream); DefaultStream is the legacy default stream. A stream from
// another CUDA library converts with Stream(uintptr(ptr)).
type Stream uintptr

const DefaultStream Stream = 0

// DeviceMemory is device memory Humming may use: an address and a size in bytes. DeviceBuffer
// (ours) and DeviceView (another library's) implement it.
type DeviceMemory interface {
	Ptr() DevicePtr
	Len() int
}

// DeviceView is device memory owned elsewhere; the caller keeps it alive while it is used.
type DeviceView struct {
	Address DevicePtr
	Bytes   int
}

func (v DeviceView) Ptr() DevicePtr { return v.Address }
func (v DeviceView) Len() int       { return v.Bytes }

// ContextOptions configure NewContextWithOptions. Device NoDevice compiles ahead of time for
// TargetArch; Compiler is a Compiler* constant.
type ContextOptions struct {
	Device     int
	TargetArch string
	CacheDir   string
	Compiler   int32
	DisableJIT bool
	NoCache    bool
}

// DeviceInfo describes the context's device (or its target arch, without one).
type DeviceInfo struct {
	Device                    int
	CCMajor, CCMinor          int
	Name, Arch                string
	Multiprocessors           int
	SharedMemoryPerBlockOptin int64
	L2CacheBytes              int64
	TotalMemoryBytes          int64
}

// RuntimeInfo is what the library found on this machine (`humming info`).
type RuntimeInfo struct {
	DriverVersion, DeviceCount int
	DriverPath, DriverError    string
	NVRTCVersion               int
	NVRTCPath, NVRTCError      string
	NVCCPath, NVCCVersion      string
	KernelSources, CacheDir    string
	CacheBytes, CacheEntries   uint64
}

func goText(p *C.char) string { return C.GoString(p) }

// GetRuntimeInfo reports the driver, devices, compilers and cache.
func GetRuntimeInfo() (RuntimeInfo, error) {
	var i C.hm_runtime_info_t
	C.hm_runtime_info_init_sized(&i, C.size_t(unsafe.Sizeof(i)))
	if err := call(func() C.hm_status_t { return C.hm_runtime_info(&i) }); err != nil {
		return RuntimeInfo{}, err
	}
	return RuntimeInfo{
		DriverVersion: int(i.driver_version), DeviceCount: int(i.device_count),
		DriverPath: goText(&i.driver_path[0]), DriverError: goText(&i.driver_error[0]),
		NVRTCVersion: int(i.nvrtc_version), NVRTCPath: goText(&i.nvrtc_path[0]), NVRTCError: goText(&i.nvrtc_error[0]),
		NVCCPath: goText(&i.nvcc_path[0]), NVCCVersion: goText(&i.nvcc_version[0]),
		KernelSources: goText(&i.kernel_sources[0]), CacheDir: goText(&i.cache_dir[0]),
		CacheBytes: uint64(i.cache_bytes), CacheEntries: uint64(i.cache_entries),
	}, nil
}

// CachePrune trims the kernel cache: it removes the entries not used for maxAge (0: no age
// limit), then the least recently used ones while the cache takes more than maxBytes (0: no
// size limit). dir "": the default cache. It returns the entries and bytes removed.
func CachePrune(dir string, maxAge time.Duration, maxBytes uint64) (entries, bytes uint64, err error) {
	if maxAge < 0 {
		return 0, 0, invalid("CachePrune: maxAge %v is negative", maxAge)
	}
	if maxBytes == 0 {
		maxBytes = ^uint64(0)
	}
	var cdir *C.char
	if dir != "" {
		cdir = C.CString(dir)
		defer C.free(unsafe.Pointer(cdir))
	}
	var e, b C.uint64_t
	err = call(func() C.hm_status_t {
		return C.hm_cache_prune(cdir, C.uint64_t(maxAge/time.Second), C.uint64_t(maxBytes), &e, &b)
	})
	return uint64(e), uint64(b), err
}

// Context is a device with its driver state, compiler and kernel cache (or a target arch
// without a device). It may be used from several goroutines at once. Kernels and plans keep
// its state alive, so they may be closed in any order.
type Context struct {
	// mu lets Close wait for the calls in flight: a DeviceBuffer's finalizer frees its memory
	// through the context on the finalizer goroutine, which may run while the owner closes it.
	mu     sync.RWMutex
	h      *C.hm_context_t
	device int
}

// NewContext opens CUDA device `device` with default options.
func NewContext(device int) (*Context, error) {
	return NewContextWithOptions(ContextOptions{Device: device})
}

func NewContextWithOptions(o ContextOptions) (*Context, error) {
	var opts C.hm_context_options_t
	C.hm_context_options_init_sized(&opts, C.size_t(unsafe.Sizeof(opts)))
	opts.device = C.int32_t(o.Device)
	if o.TargetArch != "" {
		opts.target_arch = cString(o.TargetArch)
		defer free(unsafe.Pointer(opts.target_arch))
	}
	if o.CacheDir != "" {
		opts.cache_dir = cString(o.CacheDir)
		defer free(unsafe.Pointer(opts.cache_dir))
	}
	opts.compiler = C.int32_t(o.Compiler)
	if o.DisableJIT {
		opts.flags |= C.HM_CONTEXT_DISABLE_JIT
	}
	if o.NoCache {
		opts.flags |= C.HM_CONTEXT_NO_CACHE
	}
	var h *C.hm_context_t
	if err := call(func() C.hm_status_t { return C.hm_context_create(&opts, &h) }); err != nil {
		return nil, err
	}
	c := &Context{h: h, device: o.Device}
	runtime.SetFinalizer(c, (*Context).Close)
	return c, nil
}

// Close destroys the context handle (the state lives on while kernels or plans use it). It
// waits for calls through the context that are in flight on other goroutines; device buffers
// still open afterwards can no longer be freed (Close them first).
func (c *Context) Close() {
	c.mu.Lock()
	if c.h != nil {
		C.hm_context_destroy(c.h)
		c.h = nil
	}
	c.mu.Unlock()
	runtime.SetFinalizer(c, nil)
}

// with runs one C call on the handle, which stays valid until it returns. `do` must not call
// with again (a waiting Close would deadlock the two).
func (c *Context) with(do func(h *C.hm_context_t) C.hm_status_t) error {
	if c == nil {
		return closed("Context")
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.h == nil {
		return closed("Context")
	}
	err := call(func() C.hm_status_t { return do(c.h) })
	runtime.KeepAlive(c)
	return err
}

// Device is the ordinal, or NoDevice.
func (c *Context) Device() int { return c.device }

func (c *Context) DeviceInfo() (DeviceInfo, error) {
	var i C.hm_device_info_t
	C.hm_device_info_init_sized(&i, C.size_t(unsafe.Sizeof(i)))
	if err := c.with(func(h *C.hm_context_t) C.hm_status_t { return C.hm_context_device_info(h, &i) }); err != nil {
		return DeviceInfo{}, err
	}
	return DeviceInfo{
		Device: int(i.device), CCMajor: int(i.cc_major), CCMinor: int(i.cc_minor),
		Name: goText(&i.name[0]), Arch: goText(&i.arch[0]), Multiprocessors: int(i.multiprocessors),
		SharedMemoryPerBlockOptin: int64(i.shared_memory_per_block_optin),
		L2CacheBytes:              int64(i.l2_cache_bytes), TotalMemoryBytes: int64(i.total_memory_bytes),
	}, nil
}

// Synchronize waits for the work queued on stream.
func (c *Context) Synchronize(stream Stream) error {
	return c.with(func(h *C.hm_context_t) C.hm_status_t {
		return C.hm_stream_synchronize(h, C.hm_go_stream(C.uintptr_t(stream)))
	})
}

// DeviceBuffer is device memory from Context.Alloc; Close (or the finalizer) frees it.
type DeviceBuffer struct {
	ctx   *Context
	ptr   DevicePtr
	bytes int
}

// Alloc allocates bytes of (uninitialized) device memory.
func (c *Context) Alloc(bytes int) (*DeviceBuffer, error) {
	if bytes < 0 {
		return nil, invalid("'bytes' is negative (%d)", bytes)
	}
	size := bytes
	if size == 0 {
		size = 1
	}
	var p C.uint64_t
	if err := c.with(func(h *C.hm_context_t) C.hm_status_t { return C.hm_device_alloc(h, C.size_t(size), &p) }); err != nil {
		return nil, err
	}
	b := &DeviceBuffer{ctx: c, ptr: DevicePtr(p), bytes: bytes}
	runtime.SetFinalizer(b, (*DeviceBuffer).Close)
	return b, nil
}

func (b *DeviceBuffer) Ptr() DevicePtr { return b.ptr }
func (b *DeviceBuffer) Len() int       { return b.bytes }

// Close frees the memory. Safe to call twice.
func (b *DeviceBuffer) Close() error {
	if b.ptr == 0 {
		return nil
	}
	ptr := b.ptr
	b.ptr = 0
	runtime.SetFinalizer(b, nil)
	return b.ctx.with(func(h *C.hm_context_t) C.hm_status_t { return C.hm_device_free(h, C.uint64_t(ptr)) })
}

// HostData are element types copied to and from the device byte for byte.
type HostData interface {
	~uint8 | ~int8 | ~uint16 | ~int16 | ~uint32 | ~int32 | ~uint64 | ~int64 | ~float32 | ~float64
}

func byteLen[T HostData](s []T) int {
	var zero T
	return len(s) * int(unsafe.Sizeof(zero))
}

// CopyToDevice copies a host slice of exactly the buffer's size into it (synchronously).
func CopyToDevice[T HostData](b *DeviceBuffer, src []T) error {
	if b.ptr == 0 {
		return closed("DeviceBuffer")
	}
	if n := byteLen(src); n != b.bytes {
		return invalid("'src' has %d bytes, the device buffer has %d", n, b.bytes)
	}
	var p unsafe.Pointer
	if len(src) > 0 {
		p = unsafe.Pointer(&src[0])
	}
	err := b.ctx.with(func(h *C.hm_context_t) C.hm_status_t {
		return C.hm_copy_to_device(h, C.uint64_t(b.ptr), p, C.size_t(b.bytes))
	})
	runtime.KeepAlive(b)
	return err
}

// CopyToHost copies the whole buffer into a host slice of exactly its size (synchronously).
func CopyToHost[T HostData](dst []T, b *DeviceBuffer) error {
	if b.ptr == 0 {
		return closed("DeviceBuffer")
	}
	if n := byteLen(dst); n != b.bytes {
		return invalid("'dst' has %d bytes, the device buffer has %d", n, b.bytes)
	}
	var p unsafe.Pointer
	if len(dst) > 0 {
		p = unsafe.Pointer(&dst[0])
	}
	err := b.ctx.with(func(h *C.hm_context_t) C.hm_status_t {
		return C.hm_copy_to_host(h, p, C.uint64_t(b.ptr), C.size_t(b.bytes))
	})
	runtime.KeepAlive(b)
	return err
}

// Upload allocates device memory holding a copy of data.
func Upload[T HostData](c *Context, data []T) (*DeviceBuffer, error) {
	b, err := c.Alloc(byteLen(data))
	if err != nil {
		return nil, err
	}
	if err := CopyToDevice(b, data); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// Download returns a host copy of a buffer as elements of T.
func Download[T HostData](b *DeviceBuffer) ([]T, error) {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if b.bytes%size != 0 {
		return nil, invalid("%d bytes are not a whole number of %d-byte elements", b.bytes, size)
	}
	out := make([]T, b.bytes/size)
	return out, CopyToHost(out, b)
}

// Zeroed allocates zero-filled device memory (plan workspaces are zeroed once).
func (c *Context) Zeroed(bytes int) (*DeviceBuffer, error) {
	return Upload(c, make([]byte, bytes))
}
