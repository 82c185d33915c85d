package humming

// #include "humming.h"
import "C"

import "math"

// ReferenceGemmF32 is C[M,N] = A[M,K] * W[N,K]^T (+ bias[N]) on the host, f32 row-major with
// f64 sums; bias may be nil.
func ReferenceGemmF32(a, w, bias []float32, m, n, k int) ([]float32, error) {
	na, errA := product("a", m, k)
	nw, errW := product("w", n, k)
	nc, errC := product("c", m, n)
	for _, err := range []error{errA, errW, errC} {
		if err != nil {
			return nil, err
		}
	}
	if len(a) != na || len(w) != nw || (bias != nil && len(bias) != n) {
		return nil, invalid("sizes: 'a' has %d elements (want %d), 'w' %d (want %d), 'bias' %d (want %d or none)",
			len(a), na, len(w), nw, len(bias), n)
	}
	c := make([]float32, nc)
	err := call(func() C.hm_status_t {
		return C.hm_reference_gemm_f32(f32p(a), f32p(w), f32p(bias), f32p(c), C.int64_t(m), C.int64_t(n), C.int64_t(k))
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// The elements of codes and scales, from the same checked values the library gets: groupK must
// fit the ABI's int32_t (sized from a wider value, the scales would be too few for the library),
// and no count may be negative or overflow.
func activationSizes(dtype DType, m, k, groupK int) (codes, scales int, err error) {
	if err := checkGroupK(groupK); err != nil {
		return 0, 0, err
	}
	if k < 0 {
		return 0, 0, invalid("'k' is %d, negative", k)
	}
	cols := k
	if dtype.Bits() < 8 {
		cols = k/2 + k%2
	}
	groups := 1
	if groupK > 0 {
		groups = k/groupK + btoi(k%groupK != 0)
	}
	if codes, err = product("codes", m, cols); err != nil {
		return 0, 0, err
	}
	if scales, err = product("scales", m, groups); err != nil {
		return 0, 0, err
	}
	return codes, scales, nil
}

// checkGroupK refuses a group size the ABI's int32_t cannot carry as it is (never truncated).
func checkGroupK(groupK int) error {
	if groupK < 0 || groupK > math.MaxInt32 {
		return invalid("'groupK' is %d: 0 (per token) or a group size up to %d", groupK, math.MaxInt32)
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// product is an element count: an argument error when a factor is negative or it overflows.
func product(what string, factors ...int) (int, error) {
	n := 1
	for _, f := range factors {
		if f < 0 {
			return 0, invalid("the size of '%s' has a negative factor %v", what, factors)
		}
		if f != 0 && n > math.MaxInt/f {
			return 0, invalid("the size of '%s' overflows %v", what, factors)
		}
		n *= f
	}
	return n, nil
}

// QuantizeActivation quantizes f32 activations a[M][K] to dtype (e4m3, e5m2, int8, int4 or
// e2m1) with one scale per token (groupK 0) or per token and group. Codes: 8-bit dtypes
// [M][K] bytes, 4-bit [M][ceil(K/2)] (even k in the low nibble); scales f32 [M][G].
func QuantizeActivation(dtype DType, a []float32, m, k, groupK int) (codes []byte, scales []float32, err error) {
	if m <= 0 || k <= 0 {
		return nil, nil, invalid("m and k must be positive, got m=%d k=%d", m, k)
	}
	na, err := product("a", m, k)
	if err != nil {
		return nil, nil, err
	}
	if len(a) != na {
		return nil, nil, invalid("'a' has %d elements, expected %d", len(a), na)
	}
	nc, ns, err := activationSizes(dtype, m, k, groupK)
	if err != nil {
		return nil, nil, err
	}
	codes, scales = make([]byte, nc), make([]float32, ns)
	err = call(func() C.hm_status_t {
		return C.hm_quantize_activation(C.hm_dtype_t(dtype), f32p(a), C.int64_t(m), C.int64_t(k), C.int32_t(groupK),
			bytep(codes), f32p(scales))
	})
	if err != nil {
		return nil, nil, err
	}
	return codes, scales, nil
}

// DequantizeActivation is the inverse of QuantizeActivation: f32 [M][K].
func DequantizeActivation(dtype DType, codes []byte, scales []float32, m, k, groupK int) ([]float32, error) {
	nc, ns, err := activationSizes(dtype, m, k, groupK)
	if err != nil {
		return nil, err
	}
	if len(codes) != nc || len(scales) != ns {
		return nil, invalid("'codes' has %d bytes (want %d), 'scales' %d elements (want %d)", len(codes), nc, len(scales), ns)
	}
	nout, err := product("out", m, k)
	if err != nil {
		return nil, err
	}
	if m <= 0 || k <= 0 {
		// As the library says it (before it would name an empty slice's NULL pointer instead).
		return nil, invalid("m and k must be positive, got m=%d k=%d", m, k)
	}
	out := make([]float32, nout)
	err = call(func() C.hm_status_t {
		return C.hm_dequantize_activation(C.hm_dtype_t(dtype), bytep(codes), f32p(scales),
			C.int64_t(m), C.int64_t(k), C.int32_t(groupK), f32p(out))
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
