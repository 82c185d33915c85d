package humming_test

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"testing"

	"humming.dev/humming"
)

// Contexts, device memory, kernels and plans on the mock CUDA driver (its device memory is host
// memory, and it runs the reference GEMM as host code, so the results are real).
func mockContext(t *testing.T, device int) *humming.Context {
	if os.Getenv("HUMMING_MOCK_DRIVER") == "" {
		if os.Getenv("HUMMING_REQUIRE_MOCK") != "" {
			t.Fatal("HUMMING_REQUIRE_MOCK is set but HUMMING_MOCK_DRIVER is not")
		}
		t.Skip("HUMMING_MOCK_DRIVER is not set (CTest sets it)")
	}
	ctx, err := humming.NewContextWithOptions(humming.ContextOptions{Device: device, CacheDir: os.Getenv("HUMMING_CACHE_DIR")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctx.Close)
	return ctx
}

func TestMockDeviceAndRuntimeInfo(t *testing.T) {
	ctx := mockContext(t, 0)
	info, err := ctx.DeviceInfo()
	if err != nil || info.Device != 0 || info.CCMajor != 9 || info.Arch != "sm_90a" || !strings.Contains(info.Name, "Mock") {
		t.Fatal(info, err)
	}
	rt, err := humming.GetRuntimeInfo()
	if err != nil || rt.DeviceCount != 2 || !strings.Contains(rt.DriverPath, "humming_mock_cuda") {
		t.Fatal(rt, err)
	}
}

func TestMockDeviceMemory(t *testing.T) {
	ctx := mockContext(t, 0)
	data := []float32{1, 2, 3, 4.5}
	b, err := humming.Upload(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	back, err := humming.Download[float32](b)
	if err != nil || len(back) != 4 || back[3] != 4.5 {
		t.Fatal(back, err)
	}
	if err := humming.CopyToHost(make([]float32, 3), b); err == nil || !strings.Contains(err.Error(), "16") {
		t.Fatal(err)
	}
	b.Close()
	b.Close()
	if _, err := humming.Download[float32](b); err == nil {
		t.Fatal("read a freed buffer")
	}
	os.Setenv("HM_MOCK_FAIL_ALLOC", "1")
	_, err = ctx.Alloc(64)
	os.Unsetenv("HM_MOCK_FAIL_ALLOC")
	if e, ok := err.(*humming.Error); !ok || e.Status != humming.ErrorDeviceOutOfMemory {
		t.Fatal(err)
	}
}

// A buffer's Close (also run by its finalizer, on the finalizer goroutine) frees through its
// context, which the owner may be closing at that moment: Context.Close must wait for calls in
// flight (a finalizer freeing through a destroyed handle crashed the process once in CI). Under
// `go test -race` (as CTest runs it) an unsynchronized handle is reported here every time.
func TestMockContextCloseWaitsForCallsInFlight(t *testing.T) {
	for round := 0; round < 20; round++ {
		ctx := mockContext(t, 0)
		buffers := make([]*humming.DeviceBuffer, 16)
		for i := range buffers {
			b, err := ctx.Alloc(256)
			if err != nil {
				t.Fatal(err)
			}
			buffers[i] = b
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, b := range buffers {
			wg.Add(1)
			go func(b *humming.DeviceBuffer) {
				defer wg.Done()
				<-start
				_ = b.Close() // freed, or refused once the context is closed
			}(b)
		}
		close(start)
		ctx.Close()
		wg.Wait()
	}
}

func TestMockReferenceKernel(t *testing.T) {
	ctx := mockContext(t, 0)
	kernel, err := ctx.ReferenceGemmKernel(humming.DTypeF32, humming.DTypeF32)
	if err != nil {
		t.Fatal(err)
	}
	defer kernel.Close()
	if name, _ := kernel.Name(); name != "reference_gemm_f32_f32" {
		t.Fatal(name)
	}
	if key, _ := kernel.CacheKey(); len(key) != 64 {
		t.Fatal(key)
	}
	m, n, k := 5, 7, 33
	a, b := make([]float32, m*k), make([]float32, n*k)
	for i := range a {
		a[i] = float32(i%9 - 4)
	}
	for i := range b {
		b[i] = float32(i%7 - 3)
	}
	want, _ := humming.ReferenceGemmF32(a, b, nil, m, n, k)
	da, _ := humming.Upload(ctx, a)
	db, _ := humming.Upload(ctx, b)
	dc, _ := ctx.Alloc(m * n * 4)
	params, _ := humming.NewLaunchParams()
	defer params.Close()
	if err := kernel.Gemm(params, da, db, dc, m, n, k, humming.DefaultStream); err != nil {
		t.Fatal(err)
	}
	if err := ctx.Synchronize(humming.DefaultStream); err != nil {
		t.Fatal(err)
	}
	got, _ := humming.Download[float32](dc)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("C[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	if err := kernel.Gemm(params, da, db, dc, m, n+1, k, humming.DefaultStream); err == nil || !strings.Contains(err.Error(), "'b'") {
		t.Fatal(err)
	}
}

func TestMockPlan(t *testing.T) {
	ctx := mockContext(t, 0)
	n, k, m := 256, 256, 16
	f, _ := humming.ParseFormat("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=256")
	q, _ := f.Quantize(make([]float32, n*k))
	packed, _ := f.Pack(q)
	plan, err := ctx.NewPlan(f, humming.PlanOptions{MaxM: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer plan.Close()
	if err := plan.Prepare(); err != nil {
		t.Fatal(err)
	}
	if d, err := plan.Describe(int64(m)); err != nil || d == "" {
		t.Fatal(d, err)
	}
	ws, err := plan.WorkspaceSize(64)
	if err != nil {
		t.Fatal(err)
	}
	workspace, _ := ctx.Zeroed(int(ws) + 16)
	a, _ := ctx.Alloc(m * k * 2)
	w, _ := humming.Upload(ctx, packed.Weight)
	s, _ := humming.Upload(ctx, packed.Scales)
	c, _ := ctx.Alloc(m * n * 2)
	params, _ := humming.NewLaunchParams()
	defer params.Close()
	args := humming.GemmArgs{A: a, Weight: w, Scales: s, Workspace: workspace}
	if err := plan.Gemm(params, args, c, m, humming.DefaultStream); err != nil { // launched; the mock does not compute it
		t.Fatal(err)
	}
	if err := plan.Gemm(params, humming.GemmArgs{A: a, Weight: w}, c, m, humming.DefaultStream); err == nil || !strings.Contains(err.Error(), "'Scales'") {
		t.Fatal(err)
	}
	if err := plan.Gemm(params, args, c, 65, humming.DefaultStream); err == nil || !strings.Contains(err.Error(), "'A'") {
		t.Fatal(err)
	}
	if err := plan.Gemm(params, humming.GemmArgs{A: a, Weight: w, Scales: s, Bias: c, Workspace: workspace}, c, m, humming.DefaultStream); err == nil {
		t.Fatal("bias accepted by a format without one")
	}
	// A prepared plan serves several goroutines, each with its own launch params.
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own, _ := humming.NewLaunchParams()
			defer own.Close()
			if err := plan.Gemm(own, args, c, 8, humming.DefaultStream); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

func TestMockUnsupportedArchAndAheadOfTime(t *testing.T) {
	sm80 := mockContext(t, 1)
	f, _ := humming.ParseFormat("w=e2m1 a=e2m1 c=f16 s=ue8m0:g32 n=256 k=256")
	_, err := sm80.NewPlan(f, humming.PlanOptions{})
	if e, ok := err.(*humming.Error); !ok || e.Category() != humming.ErrorUnsupported {
		t.Fatal(err)
	}
	aot, err := humming.NewContextWithOptions(humming.ContextOptions{Device: humming.NoDevice, TargetArch: "sm_90a"})
	if err != nil {
		t.Fatal(err)
	}
	defer aot.Close()
	if info, _ := aot.DeviceInfo(); info.Arch != "sm_90a" || info.Device != humming.NoDevice {
		t.Fatal(info)
	}
	if _, err := aot.Alloc(16); err == nil {
		t.Fatal("device memory without a device")
	}
	if _, err := humming.NewContextWithOptions(humming.ContextOptions{Device: humming.NoDevice}); err == nil || !strings.Contains(err.Error(), "target_arch") {
		t.Fatal(err)
	}
}

// The mock runs the packer's lane function on the host: the result is the real packing.
func TestMockPackDevice(t *testing.T) {
	ctx := mockContext(t, 0)
	f, err := humming.ParseFormat("w=uint5b16 a=f16 c=f16 s=f16:g32 n=70 k=200 e=2")
	if err != nil {
		t.Fatal(err)
	}
	weights := make([]float32, 2*70*200)
	for i := range weights {
		weights[i] = float32(i%23) - 11
	}
	q, err := f.Quantize(weights)
	if err != nil {
		t.Fatal(err)
	}
	want, err := f.Pack(q)
	if err != nil {
		t.Fatal(err)
	}
	scaleCodes := make([]uint16, len(q.Scales))
	for i, s := range q.Scales {
		c, err := humming.DTypeF16.Encode(float64(s))
		if err != nil {
			t.Fatal(err)
		}
		scaleCodes[i] = uint16(c)
	}
	codes, _ := humming.Upload(ctx, q.Codes)
	scales, _ := humming.Upload(ctx, scaleCodes)
	weight, _ := ctx.Alloc(len(want.Weight))
	packedScales, _ := ctx.Alloc(len(want.Scales))
	in := humming.DeviceCanonical{Codes: codes, Scales: scales}
	if err := ctx.PackDevice(f, in, humming.DevicePacked{Weight: weight, Scales: packedScales}, humming.DefaultStream); err != nil {
		t.Fatal(err)
	}
	if err := ctx.Synchronize(humming.DefaultStream); err != nil {
		t.Fatal(err)
	}
	gotW, _ := humming.Download[byte](weight)
	gotS, _ := humming.Download[byte](packedScales)
	if !bytes.Equal(gotW, want.Weight) || !bytes.Equal(gotS, want.Scales) {
		t.Fatal("PackDevice differs from Pack")
	}
	short := humming.DeviceCanonical{Codes: scales}
	if err := ctx.PackDevice(f, short, humming.DevicePacked{Weight: weight}, humming.DefaultStream); err == nil || !strings.Contains(err.Error(), "'Codes'") {
		t.Fatal(err)
	}
}

func TestMockQuantizeActivationDeviceMatchesHost(t *testing.T) {
	ctx := mockContext(t, 0)
	// The mock runs the quantizer's per-row rule on the host: bit for bit the host quantizer.
	m, k, groupK := 3, 203, 16
	values := make([]float32, m*k)
	bits := make([]uint16, m*k)
	for i := range values {
		values[i] = float32(i*37%101-50) * 0.125 // exact in bf16
		bits[i] = uint16(math.Float32bits(values[i]) >> 16)
	}
	a, _ := ctx.Alloc(m * k * 2)
	codes, _ := ctx.Alloc(m * k)
	groups, err := humming.ActivationScaleGroups(k, groupK)
	if err != nil || groups != 13 {
		t.Fatal(groups, err)
	}
	scales, _ := ctx.Alloc(m * groups * 4)
	if err := humming.CopyToDevice(a, bits); err != nil {
		t.Fatal(err)
	}
	in := humming.DeviceActivation{InDType: humming.DTypeBf16, M: m, K: k, A: a}
	if err := ctx.QuantizeActivationDevice(in, humming.DTypeE4m3, groupK, codes, scales, humming.DefaultStream); err != nil {
		t.Fatal(err)
	}
	if err := ctx.Synchronize(humming.DefaultStream); err != nil {
		t.Fatal(err)
	}
	wantCodes, wantScales, err := humming.QuantizeActivation(humming.DTypeE4m3, values, m, k, groupK)
	if err != nil {
		t.Fatal(err)
	}
	gotCodes := make([]uint8, m*k)
	gotScales := make([]float32, m*groups)
	if err := humming.CopyToHost(gotCodes, codes); err != nil {
		t.Fatal(err)
	}
	if err := humming.CopyToHost(gotScales, scales); err != nil {
		t.Fatal(err)
	}
	for i := range gotCodes {
		if gotCodes[i] != wantCodes[i] {
			t.Fatalf("code %d: %d, want %d", i, gotCodes[i], wantCodes[i])
		}
	}
	for i := range gotScales {
		if math.Float32bits(gotScales[i]) != math.Float32bits(wantScales[i]) {
			t.Fatalf("scale %d: %v, want %v", i, gotScales[i], wantScales[i])
		}
	}
	// group_k 12 (not a multiple of 8) has ceil(203 / 12) = 17 groups: room for them, so that
	// the library's own rule is what refuses it.
	scales17, _ := ctx.Alloc(m * 17 * 4)
	err = ctx.QuantizeActivationDevice(in, humming.DTypeE4m3, 12, codes, scales17, humming.DefaultStream)
	if err == nil || !strings.Contains(err.Error(), "multiple of 8") {
		t.Fatal(err)
	}
}

// mockMoePlan is a prepared plan of `format` (a MoE format of 4 experts, N = 128, K = 256),
// closed when the test ends, with its packed weight and scales uploaded.
func mockMoePlan(t *testing.T, ctx *humming.Context, format string) (*humming.Plan, *humming.DeviceBuffer, *humming.DeviceBuffer) {
	t.Helper()
	f, err := humming.ParseFormat(format)
	if err != nil {
		t.Fatal(err)
	}
	q, _ := f.Quantize(make([]float32, 4*128*256))
	packed, _ := f.Pack(q)
	plan, err := ctx.NewPlan(f, humming.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plan.Close)
	if err := plan.Prepare(); err != nil {
		t.Fatal(err)
	}
	w, _ := humming.Upload(ctx, packed.Weight)
	s, _ := humming.Upload(ctx, packed.Scales)
	return plan, w, s
}

func TestMockMoePlan(t *testing.T) {
	ctx := mockContext(t, 0)
	e, n, k, m, topK := 4, 128, 256, 5, 2
	plan, w, s := mockMoePlan(t, ctx, "w=uint4b8 a=f16 c=f16 s=f16:g128 n=128 k=256 e=4")
	block, err := plan.MoeBlockSize(int64(m))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := plan.MoeRows(int64(m), int32(topK))
	if err != nil || rows != int64((m*topK+e*(int(block)-1)+int(block)-1)/int(block)*int(block)) {
		t.Fatal(rows, block, err)
	}
	a, _ := ctx.Alloc(m * k * 2)
	c, _ := ctx.Alloc(m * topK * n * 2)
	sorted, _ := ctx.Alloc(int(rows) * 4)
	experts, _ := ctx.Alloc(int(rows) / int(block) * 4)
	padded, _ := ctx.Alloc(4)
	params, _ := humming.NewLaunchParams()
	defer params.Close()
	args := humming.GemmArgs{A: a, Weight: w, Scales: s}
	routing := humming.MoeRoutingBuffers{SortedIds: sorted, ExpertIds: experts, NumTokensPadded: padded}
	if err := plan.MoeGemm(params, args, routing, c, m, topK, humming.DefaultStream); err != nil {
		t.Fatal(err) // launched; the mock does not compute it
	}
	short, _ := ctx.Alloc(m * n * 2)
	if err := plan.MoeGemm(params, args, routing, short, m, topK, humming.DefaultStream); err == nil || !strings.Contains(err.Error(), "'C'") {
		t.Fatal(err)
	}
	small := humming.MoeRoutingBuffers{SortedIds: padded, ExpertIds: experts, NumTokensPadded: padded}
	if err := plan.MoeGemm(params, args, small, c, m, topK, humming.DefaultStream); err == nil || !strings.Contains(err.Error(), "SortedIds") {
		t.Fatal(err)
	}
	if err := plan.Gemm(params, args, c, m, humming.DefaultStream); err == nil || !strings.Contains(err.Error(), "MoeGemm") {
		t.Fatal(err)
	}
}

func TestMockMoeGroupedModes(t *testing.T) {
	ctx := mockContext(t, 0)
	e, n, k := 4, 128, 256
	plan, w, s := mockMoePlan(t, ctx, "w=uint4b8 a=f16 c=f16 s=f16:g128 n=128 k=256 e=4")
	if humming.ArgExpertOffsets != 12 || humming.ArgMaskedM != 13 || humming.ArgMoeMode != 21 ||
		humming.MoeModeContiguous != 1 || humming.MoeModeMasked != 2 {
		t.Fatal("slot or mode values differ from humming.h")
	}
	params, _ := humming.NewLaunchParams()
	defer params.Close()

	// Contiguous: M rows grouped by expert, offsets [E + 1].
	rows := 37
	a, _ := ctx.Alloc(rows * k * 2)
	c, _ := ctx.Alloc(rows * n * 2)
	offsets, _ := humming.Upload(ctx, []int32{0, 10, 10, 30, 37})
	args := humming.GemmArgs{A: a, Weight: w, Scales: s}
	if err := plan.MoeGemmContiguous(params, args, offsets, c, rows, humming.DefaultStream); err != nil {
		t.Fatal(err) // launched; the mock does not compute it
	}
	short, _ := ctx.Alloc(4 * 4)
	if err := plan.MoeGemmContiguous(params, args, short, c, rows, humming.DefaultStream); err == nil ||
		!strings.Contains(err.Error(), "ExpertOffsets") {
		t.Fatal(err)
	}

	// Masked: [E, T_max] slabs, counts [E].
	tMax := 9
	a3, _ := ctx.Alloc(e * tMax * k * 2)
	c3, _ := ctx.Alloc(e * tMax * n * 2)
	counts, _ := humming.Upload(ctx, []int32{0, 9, 3, 100})
	args3 := humming.GemmArgs{A: a3, Weight: w, Scales: s}
	if err := plan.MoeGemmMasked(params, args3, counts, c3, tMax, humming.DefaultStream); err != nil {
		t.Fatal(err)
	}
	if err := plan.MoeGemmMasked(params, args3, counts, short, tMax, humming.DefaultStream); err == nil ||
		!strings.Contains(err.Error(), "'C'") {
		t.Fatal(err)
	}
	three, _ := ctx.Alloc(3 * 4) // one count short of E
	if err := plan.MoeGemmMasked(params, args3, three, c3, tMax, humming.DefaultStream); err == nil ||
		!strings.Contains(err.Error(), "MaskedM") {
		t.Fatal(err)
	}
	if err := ctx.Synchronize(humming.DefaultStream); err != nil {
		t.Fatal(err)
	}
}

func TestMockGemmTakesActScalesWith8BitActivationsOnly(t *testing.T) {
	ctx := mockContext(t, 0)
	n, k, m := 128, 256, 16
	actScales, _ := ctx.Alloc(m * 4)
	c, _ := ctx.Alloc(m * n * 2)
	params, _ := humming.NewLaunchParams()
	defer params.Close()
	plan := func(t *testing.T, spec string) (*humming.Plan, *humming.PackedWeight) {
		f, err := humming.ParseFormat(spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.Close)
		p, err := ctx.NewPlan(f, humming.PlanOptions{})
		if e, ok := err.(*humming.Error); ok && e.Category() == humming.ErrorUnsupported {
			// Until the library has 8-bit activation kernels; plan_internal_test.go covers the
			// same checks through Plan.Gemm meanwhile.
			t.Skipf("the library cannot plan %q yet: %v", spec, err)
		} else if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		q, err := f.Quantize(make([]float32, n*k))
		if err != nil {
			t.Fatal(err)
		}
		packed, err := f.Pack(q)
		if err != nil {
			t.Fatal(err)
		}
		return p, packed
	}
	upload := func(b []byte) humming.DeviceMemory {
		d, err := humming.Upload(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	t.Run("f16", func(t *testing.T) {
		// f16 activations have no scales: a buffer given for them is refused before the C call.
		p, packed := plan(t, fmt.Sprintf("w=uint4b8 a=f16 c=f16 s=f16:g128 n=%d k=%d", n, k))
		a, _ := ctx.Alloc(m * k * 2)
		args := humming.GemmArgs{A: a, Weight: upload(packed.Weight), Scales: upload(packed.Scales), ActScales: actScales}
		if err := p.Gemm(params, args, c, m, humming.DefaultStream); err == nil || !strings.Contains(err.Error(), "'ActScales' was given") {
			t.Fatal(err)
		}
	})
	t.Run("e4m3", func(t *testing.T) {
		// A is one code byte per element, and its [M] f32 scales are required.
		p, packed := plan(t, fmt.Sprintf("w=e2m1 a=e4m3 c=bf16 s=bf16:channel n=%d k=%d", n, k))
		a, _ := ctx.Alloc(m * k)
		short, _ := ctx.Alloc((m - 1) * 4)
		args := humming.GemmArgs{A: a, Weight: upload(packed.Weight), Scales: upload(packed.Scales)}
		if err := p.Gemm(params, args, c, m, humming.DefaultStream); err == nil || !strings.Contains(err.Error(), "'ActScales' is nil") {
			t.Fatal(err)
		}
		args.ActScales = short
		if err := p.Gemm(params, args, c, m, humming.DefaultStream); err == nil || !strings.Contains(err.Error(), "'ActScales' has 60 bytes") {
			t.Fatal(err)
		}
	})
	t.Run("e4m3:g128", func(t *testing.T) {
		// Activation groups: f32 [M][ceil(K / 128)] scales, one per row and K group.
		p, packed := plan(t, fmt.Sprintf("w=e4m3 a=e4m3:g128 c=bf16 s=f32:b128x128 n=%d k=%d", n, k))
		groups := (k + 127) / 128
		a, _ := ctx.Alloc(m * k)
		args := humming.GemmArgs{A: a, Weight: upload(packed.Weight), Scales: upload(packed.Scales)}
		if err := p.Gemm(params, args, c, m, humming.DefaultStream); err == nil ||
			!strings.Contains(err.Error(), "'ActScales' is nil") || !strings.Contains(err.Error(), fmt.Sprintf("[M][%d]", groups)) {
			t.Fatal(err)
		}
		// Per-token scales ([M]) are too few for a grouped format.
		args.ActScales = actScales
		if err := p.Gemm(params, args, c, m, humming.DefaultStream); err == nil || !strings.Contains(err.Error(), "'ActScales' has 64 bytes") {
			t.Fatal(err)
		}
		if err := p.Prepare(); err != nil {
			t.Fatal(err)
		}
		ws, err := p.WorkspaceSize(int64(m))
		if err != nil {
			t.Fatal(err)
		}
		args.Workspace, _ = ctx.Zeroed(int(ws) + 16)
		args.ActScales, _ = ctx.Alloc(m * groups * 4)
		if err := p.Gemm(params, args, c, m, humming.DefaultStream); err != nil {
			t.Fatal(err)
		}
		if err := ctx.Synchronize(humming.DefaultStream); err != nil {
			t.Fatal(err)
		}
	})
}

// 8-bit activations on a MoE format: the masked mode reads A as E*tMax rows, and one activation
// scale per row of A, not per tMax.
func TestMockMoeMaskedActScalesCoverEverySlabRow(t *testing.T) {
	ctx := mockContext(t, 0)
	e, n, k, tMax := 4, 128, 256, 9
	plan, w, s := mockMoePlan(t, ctx, "w=uint4b8 a=e4m3 c=f16 s=f16:g128 n=128 k=256 e=4")
	params, _ := humming.NewLaunchParams()
	defer params.Close()
	a, _ := ctx.Alloc(e * tMax * k)
	c, _ := ctx.Alloc(e * tMax * n * 2)
	counts, _ := humming.Upload(ctx, []int32{0, 9, 3, 100})
	perSlabRow, _ := ctx.Alloc(tMax * 4)
	args := humming.GemmArgs{A: a, Weight: w, Scales: s, ActScales: perSlabRow}
	if err := plan.MoeGemmMasked(params, args, counts, c, tMax, humming.DefaultStream); err == nil ||
		!strings.Contains(err.Error(), "'ActScales' has 36 bytes") {
		t.Fatal(err)
	}
	everyRow, _ := ctx.Alloc(e * tMax * 4)
	args.ActScales = everyRow
	if err := plan.MoeGemmMasked(params, args, counts, c, tMax, humming.DefaultStream); err != nil {
		t.Fatal(err)
	}
	if err := ctx.Synchronize(humming.DefaultStream); err != nil {
		t.Fatal(err)
	}
}
