package humming_test

import (
	"fmt"

	"humming.dev/humming"
)

// Formats, host quantization and errors need no GPU.
func ExampleParseFormat() {
	f, err := humming.ParseFormat("w=uint4b8 a=f16 s=f16:g128 n=256 k=512")
	if err != nil {
		panic(err)
	}
	defer f.Close()
	sizes, _ := f.PackedSizes()
	fmt.Println(f)
	fmt.Println("packed weight bytes:", sizes.Weight)

	_, err = humming.ParseFormat("w=int4 bogus")
	if e, ok := err.(*humming.Error); ok {
		fmt.Println(e.Name(), e.Status)
	}
	// Output:
	// w=uint4b8 a=f16 c=f16 s=f16:g128 zp=none bias=0 acc=f32 n=256 k=512 e=1
	// packed weight bytes: 65536
	// ERROR_PARSE 1003
}

// The whole path on GPU 0: quantize and pack a weight, prepare a plan, run one GEMM.
// (Compiled by go test; it runs on a GPU host with `go run` of the same code.)
func Example_gemm() {
	const n, k, m = 256, 512, 16
	format, err := humming.ParseFormat(fmt.Sprintf("w=uint4b8 a=f16 c=f16 s=f16:g128 n=%d k=%d", n, k))
	if err != nil {
		panic(err)
	}
	defer format.Close()
	weight := make([]float32, n*k)
	for i := range weight {
		weight[i] = float32(i%13)/13 - 0.5
	}
	canonical, _ := format.Quantize(weight)
	packed, _ := format.Pack(canonical)

	ctx, err := humming.NewContext(0)
	if err != nil {
		fmt.Println("no GPU here:", err) // *humming.Error: status name, code, message
		return
	}
	defer ctx.Close()
	plan, err := ctx.NewPlan(format, humming.PlanOptions{MaxM: m})
	if err != nil {
		panic(err)
	}
	defer plan.Close()
	if err := plan.Prepare(); err != nil {
		panic(err)
	}
	a := make([]uint16, m*k) // f16 bit patterns
	for i := range a {
		h, _ := humming.DTypeF16.Encode(float64(i%5-2) / 4)
		a[i] = uint16(h)
	}
	da, _ := humming.Upload(ctx, a)
	dw, _ := humming.Upload(ctx, packed.Weight)
	ds, _ := humming.Upload(ctx, packed.Scales)
	wsBytes, _ := plan.WorkspaceSize(m)
	workspace, _ := ctx.Zeroed(int(wsBytes))
	dc, _ := ctx.Alloc(m * n * 2)
	params, _ := humming.NewLaunchParams()
	defer params.Close()
	args := humming.GemmArgs{A: da, Weight: dw, Scales: ds, Workspace: workspace}
	if err := plan.Gemm(params, args, dc, m, humming.DefaultStream); err != nil {
		panic(err)
	}
	ctx.Synchronize(humming.DefaultStream)
	c, _ := humming.Download[uint16](dc)
	first, _ := humming.DTypeF16.Decode(uint32(c[0]))
	fmt.Println("C[0][0] =", first)
}
