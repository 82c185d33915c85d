package humming_test

import (
	"math"
	"os"
	"testing"

	"humming.dev/humming"
)

// GPU runs: skipped without a CUDA device or under the mock driver. CTest's bindings_go_gpu
// runs them (-run GPU) only where a device is present, and reports skipped elsewhere.
func gpuContext(t *testing.T) *humming.Context {
	if os.Getenv("HUMMING_MOCK_DRIVER") != "" {
		t.Skip("the mock driver is loaded in this process")
	}
	if rt, err := humming.GetRuntimeInfo(); err != nil || rt.DeviceCount <= 0 {
		t.Skipf("no CUDA device (%v %s)", err, rt.DriverError)
	}
	ctx, err := humming.NewContextWithOptions(humming.ContextOptions{Device: 0, CacheDir: os.Getenv("HUMMING_CACHE_DIR")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctx.Close)
	return ctx
}

func f16(t *testing.T, v float32) uint16 {
	h, err := humming.DTypeF16.Encode(float64(v))
	if err != nil {
		t.Fatal(err)
	}
	return uint16(h)
}

func TestGPUReferenceKernelIsExact(t *testing.T) {
	ctx := gpuContext(t)
	m, n, k := 33, 47, 64
	a, b := make([]float32, m*k), make([]float32, n*k)
	ah, bh := make([]uint16, m*k), make([]uint16, n*k)
	for i := range a {
		a[i] = float32(i%7 - 3)
		ah[i] = f16(t, a[i])
	}
	for i := range b {
		b[i] = float32(i%5 - 2)
		bh[i] = f16(t, b[i])
	}
	want, _ := humming.ReferenceGemmF32(a, b, nil, m, n, k)
	kernel, err := ctx.ReferenceGemmKernel(humming.DTypeF16, humming.DTypeF32)
	if err != nil {
		t.Fatal(err)
	}
	defer kernel.Close()
	da, _ := humming.Upload(ctx, ah)
	db, _ := humming.Upload(ctx, bh)
	dc, _ := ctx.Alloc(m * n * 4)
	params, _ := humming.NewLaunchParams()
	defer params.Close()
	if err := kernel.Gemm(params, da, db, dc, m, n, k, humming.DefaultStream); err != nil {
		t.Fatal(err)
	}
	ctx.Synchronize(humming.DefaultStream)
	got, _ := humming.Download[float32](dc)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("C[%d] = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestGPUPlanMatchesTheDequantizedReference(t *testing.T) {
	ctx := gpuContext(t)
	n, k := 256, 512
	f, _ := humming.ParseFormat("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=512")
	w := make([]float32, n*k)
	for i := range w {
		w[i] = float32((i*2654435761)%1000)/500 - 1
	}
	q, _ := f.Quantize(w)
	deq, _ := f.Dequantize(q)
	packed, _ := f.Pack(q)
	plan, err := ctx.NewPlan(f, humming.PlanOptions{MaxM: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer plan.Close()
	if err := plan.Prepare(); err != nil {
		t.Fatal(err)
	}
	ws, _ := plan.WorkspaceSize(64)
	workspace, _ := ctx.Zeroed(int(ws) + 16)
	dw, _ := humming.Upload(ctx, packed.Weight)
	ds, _ := humming.Upload(ctx, packed.Scales)
	params, _ := humming.NewLaunchParams()
	defer params.Close()
	for _, m := range []int{1, 16, 37, 64} {
		ah, a32 := make([]uint16, m*k), make([]float32, m*k)
		for i := range ah {
			ah[i] = f16(t, float32((i*40503)%97)/48-1)
			v, _ := humming.DTypeF16.Decode(uint32(ah[i]))
			a32[i] = float32(v)
		}
		want, _ := humming.ReferenceGemmF32(a32, deq, nil, m, n, k)
		da, _ := humming.Upload(ctx, ah)
		dc, _ := ctx.Alloc(m * n * 2)
		args := humming.GemmArgs{A: da, Weight: dw, Scales: ds, Workspace: workspace}
		if err := plan.Gemm(params, args, dc, m, humming.DefaultStream); err != nil {
			t.Fatal(err)
		}
		ctx.Synchronize(humming.DefaultStream)
		got, _ := humming.Download[uint16](dc)
		var diff, norm float64
		for i := range want {
			v, _ := humming.DTypeF16.Decode(uint32(got[i]))
			diff += (v - float64(want[i])) * (v - float64(want[i]))
			norm += float64(want[i]) * float64(want[i])
		}
		if e := math.Sqrt(diff / norm); e > 2e-3 {
			d, _ := plan.Describe(int64(m))
			t.Fatalf("M=%d: relative error %.2e (%s)", m, e, d)
		}
	}
}
