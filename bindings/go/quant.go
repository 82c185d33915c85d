package humming

// #include "humming.h"
import "C"

import "unsafe"

// ReferenceGemmF32 is C[M,N] = A[M,K] * W[N,K]^T (+ bias[N]) on the host, f32 row-major with
// f64 sums; bias may be nil.
func ReferenceGemmF32(a, w, bias []float32, m, n, k int) ([]float32, error) {
	if len(a) != m*k || len(w) != n*k || (bias != nil && len(bias) != n) {
		return nil, invalid("sizes: 'a' has %d elements (want %d), 'w' %d (want %d), 'bias' %d (want %d or none)",
			len(a), m*k, len(w), n*k, len(bias), n)
	}
	c := make([]float32, m*n)
	err := call(func() C.hm_status_t {
		return C.hm_reference_gemm_f32(f32p(a), f32p(w), f32p(bias), f32p(c), C.int64_t(m), C.int64_t(n), C.int64_t(k))
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

func activationSizes(dtype DType, m, k, groupK int) (codes, scales int) {
	cols := k
	if dtype.Bits() < 8 {
		cols = (k + 1) / 2
	}
	groups := 1
	if groupK > 0 {
		groups = (k + groupK - 1) / groupK
	}
	return m * cols, m * groups
}

// QuantizeActivation quantizes f32 activations a[M][K] to dtype (e4m3, e5m2, int8, int4 or
// e2m1) with one scale per token (groupK 0) or per token and group. Codes: 8-bit dtypes
// [M][K] bytes, 4-bit [M][ceil(K/2)] (even k in the low nibble); scales f32 [M][G].
func QuantizeActivation(dtype DType, a []float32, m, k, groupK int) (codes []byte, scales []float32, err error) {
	if len(a) != m*k {
		return nil, nil, invalid("'a' has %d elements, expected %d", len(a), m*k)
	}
	nc, ns := activationSizes(dtype, m, k, groupK)
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
	nc, ns := activationSizes(dtype, m, k, groupK)
	if len(codes) != nc || len(scales) != ns {
		return nil, invalid("'codes' has %d bytes (want %d), 'scales' %d elements (want %d)", len(codes), nc, len(scales), ns)
	}
	out := make([]float32, m*k)
	err := call(func() C.hm_status_t {
		return C.hm_dequantize_activation(C.hm_dtype_t(dtype), unsafe.Pointer(&codes[0]), f32p(scales),
			C.int64_t(m), C.int64_t(k), C.int32_t(groupK), f32p(out))
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
