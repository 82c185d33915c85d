package humming

// #include "humming.h"
import "C"

import "unsafe"

// DType is a dtype code of humming.h (DTypeF16, ...; DTypeNone is "no dtype").
type DType uint32

// ParseDType reads a canonical name or alias ("f16", "fp8", "float8_e4m3fn", ...).
func ParseDType(name string) (DType, error) {
	text := cString(name)
	defer free(unsafe.Pointer(text))
	var code C.hm_dtype_t
	err := call(func() C.hm_status_t { return C.hm_dtype_parse(text, &code) })
	return DType(code), err
}

// Name is the canonical name, which parses back to the same code.
func (d DType) Name() (string, error) {
	return copyOut(func(buf *C.char, size C.size_t, length *C.size_t) C.hm_status_t {
		return C.hm_dtype_name(C.hm_dtype_t(d), buf, size, length)
	})
}

func (d DType) String() string {
	if name, err := d.Name(); err == nil {
		return name
	}
	if d == DTypeNone {
		return "none"
	}
	return "dtype(invalid)"
}

// Bits is the dtype's width.
func (d DType) Bits() int { return int(d & 0xFF) }

func (d DType) bytes() int { return (d.Bits() + 7) / 8 }

// Decode is the exact value of one code (dtypes of at most 8 bits, or f16/bf16 patterns).
func (d DType) Decode(code uint32) (float64, error) {
	var v C.double
	err := call(func() C.hm_status_t { return C.hm_dtype_decode(C.hm_dtype_t(d), C.uint32_t(code), &v) })
	return float64(v), err
}

// Encode is the nearest code (round to nearest even, saturating to the largest finite value).
func (d DType) Encode(value float64) (uint32, error) {
	var code C.uint32_t
	err := call(func() C.hm_status_t { return C.hm_dtype_encode(C.hm_dtype_t(d), C.double(value), &code) })
	return uint32(code), err
}
