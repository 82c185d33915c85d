package humming

import (
	"strings"
	"testing"
)

// bufferOfLen is device memory of a size only: the checks read Len, nothing reads through Ptr.
type bufferOfLen int

func (s bufferOfLen) Ptr() DevicePtr { return 0x1000 }
func (s bufferOfLen) Len() int       { return int(s) }

// Plan.Gemm checks ActScales against the plan's activation dtype before the C call. The mock
// tests reach that with real plans, and skip the a=e4m3 case where the library cannot plan it
// (before its 8-bit activation kernels); here plans that only know their shape and dtypes do, on
// every build (no handle, so a call that passes every check ends in "this Plan is closed",
// never in the library).
func TestGemmChecksActScalesAgainstTheActivationDType(t *testing.T) {
	const n, k, m = 128, 256, 16
	params, err := NewLaunchParams()
	if err != nil {
		t.Fatal(err)
	}
	defer params.Close()
	gemm := func(act DType, actScales DeviceMemory) error {
		p := &Plan{n: n, experts: 1, activation: act, aRow: k * act.bytes(), cElem: 2}
		args := GemmArgs{A: bufferOfLen(m * k * 2), ActScales: actScales}
		return p.Gemm(params, args, bufferOfLen(m*n*2), m, DefaultStream)
	}
	for _, act := range []DType{DTypeE4m3, DTypeE5m2, DTypeInt8} {
		if err := gemm(act, nil); err == nil || !strings.Contains(err.Error(), "'ActScales' is nil") {
			t.Fatal(act, err)
		}
		if err := gemm(act, bufferOfLen((m-1)*4)); err == nil || !strings.Contains(err.Error(), "'ActScales' has 60 bytes") {
			t.Fatal(act, err)
		}
		if err := gemm(act, bufferOfLen(m*4)); err == nil || !strings.Contains(err.Error(), "Plan is closed") {
			t.Fatal(act, err)
		}
	}
	for _, act := range []DType{DTypeF16, DTypeBf16, DTypeInt4} {
		if err := gemm(act, bufferOfLen(m*4)); err == nil || !strings.Contains(err.Error(), "'ActScales' was given") {
			t.Fatal(act, err)
		}
		if err := gemm(act, nil); err == nil || !strings.Contains(err.Error(), "Plan is closed") {
			t.Fatal(act, err)
		}
	}
}

// With activation groups (a=e4m3:g128) ActScales is [M][ceil(K / groupK)]: per-row scales are
// too few.
func TestGemmChecksGroupedActScales(t *testing.T) {
	const n, k, m = 128, 512, 16
	params, err := NewLaunchParams()
	if err != nil {
		t.Fatal(err)
	}
	defer params.Close()
	if gk, g := actScaleGroups(128, 520); gk != 128 || g != 5 {
		t.Fatal(gk, g)
	}
	if gk, g := actScaleGroups(0, 512); gk != 0 || g != 1 {
		t.Fatal(gk, g)
	}
	groupK, groups := actScaleGroups(128, k)
	p := &Plan{n: n, experts: 1, activation: DTypeE4m3, actGroupK: groupK, actGroups: groups, aRow: k, cElem: 2}
	gemm := func(actScales DeviceMemory) error {
		args := GemmArgs{A: bufferOfLen(m * k), ActScales: actScales}
		return p.Gemm(params, args, bufferOfLen(m*n*2), m, DefaultStream)
	}
	if err := gemm(nil); err == nil || !strings.Contains(err.Error(), "'ActScales' is nil") ||
		!strings.Contains(err.Error(), "[M][4]") {
		t.Fatal(err)
	}
	if err := gemm(bufferOfLen(m * 4)); err == nil || !strings.Contains(err.Error(), "'ActScales' has 64 bytes") {
		t.Fatal(err)
	}
	if err := gemm(bufferOfLen(m * groups * 4)); err == nil || !strings.Contains(err.Error(), "Plan is closed") {
		t.Fatal(err)
	}
}
