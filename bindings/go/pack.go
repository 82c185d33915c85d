package humming

/*
#include <stdint.h>
#include "humming.h"
static inline void *hm_go_pack_stream(uintptr_t s) { return (void *)s; }
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// DeviceCanonical are canonical buffers in device memory for PackDevice. Codes is one byte per
// code, [E][N][K]; Scales and ZeroPoints hold the dtype's codes (not values) in canonical order
// [E][R][G], one element of the packed size each (1, 2 or 4 bytes, little-endian); GlobalScale is
// f32 [E]. A side tensor the format has is packed only when it is set here and in DevicePacked.
type DeviceCanonical struct {
	Codes, Scales, ZeroPoints, GlobalScale DeviceMemory
}

// DevicePacked are the standard-layout buffers PackDevice writes, in device memory.
type DevicePacked struct {
	Weight, Scales, ZeroPoints, GlobalScale DeviceMemory
}

func deviceSized(name string, m DeviceMemory, need int) (C.uint64_t, error) {
	if m == nil {
		return 0, nil
	}
	if need == 0 {
		return 0, invalid("'%s' was given, but the format has none", name)
	}
	if m.Len() < need {
		return 0, invalid("'%s' has %d bytes of device memory, needs %d", name, m.Len(), need)
	}
	return C.uint64_t(m.Ptr()), nil
}

func elementBytes(f *Format, role Role) (int, error) {
	d, err := f.DType(role)
	return d.bytes(), err
}

// PackDevice packs canonical buffers already on the context's device into the standard layout
// on stream (asynchronous: synchronize before reading). The weight is byte for byte what
// Format.Pack writes; every buffer's size is checked first.
func (c *Context) PackDevice(f *Format, in DeviceCanonical, out DevicePacked, stream Stream) error {
	if f == nil || f.h == nil {
		return closed("Format")
	}
	cs, err := f.CanonicalSizes()
	if err != nil {
		return err
	}
	ps, err := f.PackedSizes()
	if err != nil {
		return err
	}
	scaleBytes, zpBytes := 0, 0
	if cs.Scales > 0 {
		e, err := elementBytes(f, RoleScale)
		if err != nil {
			return err
		}
		scaleBytes = cs.Scales * e
	}
	if cs.ZeroPoints > 0 {
		e, err := elementBytes(f, RoleZeroPoint)
		if err != nil {
			return err
		}
		zpBytes = cs.ZeroPoints * e
	}
	var i C.hm_device_canonical_t
	C.hm_device_canonical_init_sized(&i, C.size_t(unsafe.Sizeof(i)))
	var o C.hm_device_packed_t
	C.hm_device_packed_init_sized(&o, C.size_t(unsafe.Sizeof(o)))
	if in.Codes == nil {
		return invalid("'Codes' is missing")
	}
	if out.Weight == nil {
		return invalid("'Weight' is missing")
	}
	for _, s := range []struct {
		name string
		m    DeviceMemory
		need int
		dst  *C.uint64_t
	}{
		{"Codes", in.Codes, cs.Codes, &i.codes},
		{"Scales", in.Scales, scaleBytes, &i.scales},
		{"ZeroPoints", in.ZeroPoints, zpBytes, &i.zero_points},
		{"GlobalScale", in.GlobalScale, cs.GlobalScale * 4, &i.global_scale},
		{"out.Weight", out.Weight, ps.Weight, &o.weight},
		{"out.Scales", out.Scales, ps.Scales, &o.scales},
		{"out.ZeroPoints", out.ZeroPoints, ps.ZeroPoints, &o.zero_points},
		{"out.GlobalScale", out.GlobalScale, ps.GlobalScale, &o.global_scale},
	} {
		p, err := deviceSized(s.name, s.m, s.need)
		if err != nil {
			return err
		}
		*s.dst = p
	}
	err = c.with(func(h *C.hm_context_t) C.hm_status_t {
		return C.hm_pack_device(h, f.h, &i, &o, C.hm_go_pack_stream(C.uintptr_t(stream)))
	})
	runtime.KeepAlive(f)
	return err
}
