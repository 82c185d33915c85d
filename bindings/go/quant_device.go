package humming

/*
#include <stdint.h>
#include "humming.h"
static inline void *hm_go_quant_stream(uintptr_t s) { return (void *)s; }
*/
import "C"

import "unsafe"

// ActivationScaleGroups is the number of scales per row of activation quantization: 1 for
// groupK 0 (per token), else ceil(k / groupK).
func ActivationScaleGroups(k, groupK int) (int, error) {
	if err := checkGroupK(groupK); err != nil {
		return 0, err
	}
	var out C.int64_t
	err := call(func() C.hm_status_t {
		return C.hm_activation_scale_groups(C.int64_t(k), C.int32_t(groupK), &out)
	})
	return int(out), err
}

// DeviceActivation describes activations in device memory for QuantizeActivationDevice: A is
// [M][K] of InDType (DTypeF16 or DTypeBf16); Perm, when set, an int32 [K] permutation (output
// column j reads input column Perm[j]).
type DeviceActivation struct {
	InDType DType
	M, K    int
	A, Perm DeviceMemory
}

// QuantizeActivationDevice quantizes activations on the context's device into outDType codes
// (e4m3, e5m2 or int8; one byte each, [M][K]) and f32 scales ([M][G]) on stream, bit for bit
// what QuantizeActivation computes on the host for the same values. groupK is 0 (per token) or
// a multiple of 8. Asynchronous: synchronize before reading; every buffer's size is checked
// first.
func (c *Context) QuantizeActivationDevice(in DeviceActivation, outDType DType, groupK int,
	codes, scales DeviceMemory, stream Stream) error {
	groups, err := ActivationScaleGroups(in.K, groupK)
	if err != nil {
		return err
	}
	var args C.hm_activation_quant_args_t
	C.hm_activation_quant_args_init_sized(&args, C.size_t(unsafe.Sizeof(args)))
	args.in_dtype = C.hm_dtype_t(in.InDType)
	args.out_dtype = C.hm_dtype_t(outDType)
	args.group_k = C.int32_t(groupK) // in range: ActivationScaleGroups checked it
	args.m = C.int64_t(in.M)
	args.k = C.int64_t(in.K)
	if in.A == nil || codes == nil || scales == nil {
		return invalid("'A', 'codes' and 'scales' are required")
	}
	// M = 0 launches nothing: buffers of 0 bytes are then enough.
	sized := func(name string, m DeviceMemory, factors ...int) (C.uint64_t, error) {
		need, err := product(name, factors...)
		if err != nil || m == nil {
			return 0, err
		}
		if m.Len() < need {
			return 0, invalid("'%s' has %d bytes of device memory, needs %d", name, m.Len(), need)
		}
		return C.uint64_t(m.Ptr()), nil
	}
	if args.a, err = sized("A", in.A, in.M, in.K, 2); err != nil {
		return err
	}
	if args.perm, err = sized("Perm", in.Perm, in.K, 4); err != nil {
		return err
	}
	if args.codes, err = sized("codes", codes, in.M, in.K); err != nil {
		return err
	}
	if args.scales, err = sized("scales", scales, in.M, groups, 4); err != nil {
		return err
	}
	return c.with(func(h *C.hm_context_t) C.hm_status_t {
		return C.hm_quantize_activation_device(h, &args, C.hm_go_quant_stream(C.uintptr_t(stream)))
	})
}
