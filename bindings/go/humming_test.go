package humming_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"humming.dev/humming"
)

// The mock CUDA driver stands in for libcuda when HUMMING_MOCK_DRIVER is set (CTest sets it);
// the driver is loaded once per process, so this happens before any test.
func TestMain(m *testing.M) {
	if mock := os.Getenv("HUMMING_MOCK_DRIVER"); mock != "" {
		os.Setenv("HUMMING_CUDA_DRIVER_PATH", mock)
	}
	os.Exit(m.Run())
}

func header(t *testing.T) string {
	path := os.Getenv("HUMMING_HEADER")
	if path == "" {
		path = filepath.Join("..", "..", "include", "humming.h")
	}
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(text)
}

func define(t *testing.T, text, name string) int {
	m := regexp.MustCompile(`(?m)^#define ` + name + ` (\d+)`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("%s not in the header", name)
	}
	v, _ := strconv.Atoi(m[1])
	return v
}

func TestVersionMatchesHeader(t *testing.T) {
	h := header(t)
	major, minor, patch := humming.LibraryVersion()
	if major != define(t, h, "HM_VERSION_MAJOR") || minor != define(t, h, "HM_VERSION_MINOR") || patch != define(t, h, "HM_VERSION_PATCH") {
		t.Fatalf("library %d.%d.%d does not match the header", major, minor, patch)
	}
	if humming.VersionString() != fmt.Sprintf("%d.%d.%d", major, minor, patch) {
		t.Fatal(humming.VersionString())
	}
	if humming.LibraryABIVersion() != define(t, h, "HM_ABI_VERSION") || humming.ABIVersion != humming.LibraryABIVersion() {
		t.Fatal("ABI version")
	}
}

// A new pointer slot (8-bit activations' per-token scales), taken by launch params.
func TestActScalesSlotIsTheHeaders(t *testing.T) {
	if humming.ArgActScales != 11 || int(humming.ArgActScales) != define(t, header(t), "HM_ARG_ACT_SCALES") {
		t.Fatal(humming.ArgActScales)
	}
	params, err := humming.NewLaunchParams()
	if err != nil {
		t.Fatal(err)
	}
	defer params.Close()
	if err := params.SetPointer(humming.ArgActScales, 0x1000); err != nil {
		t.Fatal(err)
	}
}

func TestErrorsCarryStatusNameAndMessage(t *testing.T) {
	_, err := humming.ParseFormat("w=int4 bogus")
	var e *humming.Error
	if !errors.As(err, &e) {
		t.Fatalf("not an *Error: %v", err)
	}
	if e.Status != humming.ErrorParse || e.Name() != "ERROR_PARSE" || e.Category() != humming.ErrorInvalidArgument {
		t.Fatalf("%v", e)
	}
	if !strings.Contains(e.Message, "bogus") || !strings.HasPrefix(e.Error(), "ERROR_PARSE (1003): hm_format_parse") {
		t.Fatalf("%v", e)
	}
	if !errors.Is(err, &humming.Error{Status: humming.ErrorParse}) {
		t.Fatal("errors.Is by status")
	}
	if humming.StatusName(424242) != "UNKNOWN" {
		t.Fatal("unknown status name")
	}
}

func TestMessagesStayWithTheirGoroutine(t *testing.T) {
	// Goroutines hop between OS threads; each failure must still report its own message.
	var wg sync.WaitGroup
	failures := make(chan string, 1000)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				_, err := humming.ParseFormat(fmt.Sprintf("w=int4 goroutine%d=1", g))
				if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("goroutine%d", g)) {
					failures <- fmt.Sprint(err)
				}
			}
		}(g)
	}
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Fatal(f)
	}
}

func TestDTypes(t *testing.T) {
	for name, d := range map[string]humming.DType{"f16": humming.DTypeF16, "bf16": humming.DTypeBf16,
		"e4m3": humming.DTypeE4m3, "uint4b8": humming.DTypeUint4b8, "int8": humming.DTypeInt8} {
		got, err := humming.ParseDType(name)
		if err != nil || got != d || d.String() != name {
			t.Fatalf("%s: %v %v %v", name, got, err, d)
		}
	}
	for code := uint32(0); code < 256; code++ {
		v, err := humming.DTypeE4m3.Decode(code)
		if err != nil {
			t.Fatal(err)
		}
		if math.IsNaN(v) {
			continue
		}
		back, _ := humming.DTypeE4m3.Encode(v)
		if w, _ := humming.DTypeE4m3.Decode(back); w != v {
			t.Fatalf("code %d: %v -> %d -> %v", code, v, back, w)
		}
	}
	if _, err := humming.ParseDType("f17"); !errors.Is(err, &humming.Error{Status: humming.ErrorParse}) {
		t.Fatal(err)
	}
}

func TestFormats(t *testing.T) {
	text := "w=int4 a=bf16 c=bf16 s=bf16:g64 zp=none bias=1 acc=f32 n=512 k=1024 e=1"
	f, err := humming.ParseFormat(text)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.String() != text {
		t.Fatal(f.String())
	}
	g, _ := f.Clone()
	if !g.Equal(f) {
		t.Fatal("clone differs")
	}
	if err := g.SetShape(128, 256, 1); err != nil {
		t.Fatal(err)
	}
	g.SetDType(humming.RoleWeight, humming.DTypeInt8)
	g.SetScale(humming.ScaleChannel, 0, 0)
	g.SetBias(false)
	if g.Equal(f) {
		t.Fatal("changed clone still equal")
	}
	if n, k, e, _ := f.Shape(); n != 512 || k != 1024 || e != 1 {
		t.Fatal("the original changed")
	}
	if d, _ := g.DType(humming.RoleWeight); d != humming.DTypeInt8 {
		t.Fatal(d)
	}
	if s, _ := f.Scale(); s.GroupK != 64 || s.Kind != humming.ScaleGroup {
		t.Fatal(s)
	}
	if b, _ := f.Bias(); !b {
		t.Fatal("bias")
	}
	if err := g.SetDType(humming.Role(99), humming.DTypeF16); err == nil {
		t.Fatal("role 99 accepted")
	}
	bad, _ := humming.ParseFormat("w=e2m1 a=e2m1 c=f16 s=ue8m0:g32 n=256 k=256")
	err = bad.Validate("sm_80")
	var e *humming.Error
	if !errors.As(err, &e) || e.Category() != humming.ErrorUnsupported {
		t.Fatalf("%v", err)
	}
	if names, err := g.Kernels("sm_90a"); err != nil || strings.Join(names, " ") != "dense_wgmma dense_mma" {
		t.Fatalf("kernels on sm_90a: %v %v", names, err)
	}
	fp8, _ := humming.ParseFormat("w=e4m3 a=e4m3 c=bf16 s=f32:channel n=256 k=256")
	if names, err := fp8.Kernels("sm_90a"); err != nil || strings.Join(names, " ") != "dense_wgmma dense_mma" {
		t.Fatalf("e4m3 activations with channel scales on sm_90a: %v %v", names, err)
	}
	if names, err := fp8.Kernels("sm_89"); err != nil || strings.Join(names, " ") != "dense_mma" {
		t.Fatalf("e4m3 activations with channel scales on sm_89: %v %v", names, err)
	}
	fp8.Close()
	// Valid, but no kernel yet: the error names what is missing.
	fp8Groups, _ := humming.ParseFormat("w=uint4b8 a=e4m3 c=f16 s=f16:g96 n=256 k=256")
	if _, err := fp8Groups.Kernels("sm_90a"); !errors.As(err, &e) || e.Status != humming.ErrorUnsupported ||
		!strings.Contains(e.Message, "e4m3 activations") {
		t.Fatalf("e4m3 activations with groups of 96 have no kernel: %v", err)
	}
	fp8Groups.Close()
	g.Close()
	g.Close()
	if _, _, _, err := g.Shape(); !errors.Is(err, &humming.Error{Status: humming.ErrorInvalidState}) {
		t.Fatalf("closed format: %v", err)
	}
	if m, err := humming.SupportMatrix(); err != nil || len(m) < 256 {
		t.Fatal(err)
	}
}

// Activation groups (per-token x K-group activation scales): set, read back, printed, parsed.
func TestFormatActivationGroups(t *testing.T) {
	f, err := humming.ParseFormat("w=e4m3 a=e4m3 c=bf16 s=f32:b128x128 n=256 k=512")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if g, err := f.ActivationGroups(); err != nil || g != 0 {
		t.Fatal(g, err)
	}
	if err := f.SetActivationGroups(128); err != nil {
		t.Fatal(err)
	}
	if g, err := f.ActivationGroups(); err != nil || g != 128 {
		t.Fatal(g, err)
	}
	text := f.String()
	if !strings.Contains(text, "a=e4m3:g128") {
		t.Fatal(text)
	}
	back, err := humming.ParseFormat(text)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	if g, _ := back.ActivationGroups(); g != 128 || !back.Equal(f) {
		t.Fatal(back)
	}
	if err := f.Validate("sm_90a"); err != nil {
		t.Fatal(err)
	}
	err = f.SetActivationGroups(-1)
	var e *humming.Error
	if !errors.As(err, &e) || e.Status != humming.ErrorInvalidArgument || !strings.Contains(e.Message, "'group_k' is -1") {
		t.Fatalf("%v", err)
	}
	if g, _ := f.ActivationGroups(); g != 128 {
		t.Fatal("a refused value changed the format", g)
	}
}

func TestQuantizePackUnpackDequantize(t *testing.T) {
	n, k := 256, 512
	f, _ := humming.ParseFormat(fmt.Sprintf("w=uint4b8 a=f16 s=f16:g128 n=%d k=%d", n, k))
	w := make([]float32, n*k)
	for i := range w {
		w[i] = float32((i*2654435761)%1000)/500 - 1
	}
	q, err := f.Quantize(w)
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Codes) != n*k || len(q.Scales) != n*k/128 {
		t.Fatal("sizes")
	}
	p, err := f.Pack(q)
	if err != nil {
		t.Fatal(err)
	}
	back, err := f.Unpack(p)
	if err != nil {
		t.Fatal(err)
	}
	for i := range q.Codes {
		if back.Codes[i] != q.Codes[i] {
			t.Fatalf("code %d", i)
		}
	}
	d, err := f.Dequantize(q)
	if err != nil {
		t.Fatal(err)
	}
	for i := range w {
		step := q.Scales[i/128]
		if math.Abs(float64(w[i]-d[i])) > 0.5*float64(step)*1.001+1e-7 {
			t.Fatalf("element %d: %v vs %v", i, w[i], d[i])
		}
	}
	halves := make([]uint16, len(w))
	widened := make([]float32, len(w))
	for i, x := range w {
		h, _ := humming.DTypeF16.Encode(float64(x))
		halves[i] = uint16(h)
		v, _ := humming.DTypeF16.Decode(h)
		widened[i] = float32(v)
	}
	q16, err1 := f.QuantizeBits16(halves, humming.DTypeF16)
	q32, err2 := f.Quantize(widened)
	if err1 != nil || err2 != nil || string(q16.Codes) != string(q32.Codes) {
		t.Fatal("f16 and widened f32 quantize differently", err1, err2)
	}
	if _, err := f.Quantize(w[1:]); err == nil || !strings.Contains(err.Error(), "'weight'") {
		t.Fatal(err)
	}
	q.Scales = q.Scales[1:]
	if _, err := f.Pack(q); err == nil || !strings.Contains(err.Error(), "'Scales'") {
		t.Fatal(err)
	}
}

func TestReferenceGemmAndActivations(t *testing.T) {
	c, err := humming.ReferenceGemmF32([]float32{1, 2, 3, 4, 5, 6}, []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
		[]float32{0.5, 0.5, 0.5, 0.5}, 2, 4, 3)
	if err != nil || fmt.Sprint(c) != "[6.5 6.5 6.5 6.5 15.5 15.5 15.5 15.5]" {
		t.Fatal(c, err)
	}
	x := make([]float32, 5*64)
	for i := range x {
		x[i] = float32(i%17-8) / 3
	}
	codes, scales, err := humming.QuantizeActivation(humming.DTypeInt8, x, 5, 64, 0)
	if err != nil || len(codes) != 5*64 || len(scales) != 5 {
		t.Fatal(err)
	}
	back, err := humming.DequantizeActivation(humming.DTypeInt8, codes, scales, 5, 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range x {
		if math.Abs(float64(x[i]-back[i])) > 0.5*float64(scales[i/64])*1.001 {
			t.Fatalf("%d: %v vs %v", i, x[i], back[i])
		}
	}
	if _, _, err := humming.QuantizeActivation(humming.DTypeF16, x, 5, 64, 0); err == nil {
		t.Fatal("f16 activations quantized")
	}
	// A group beyond the ABI's int32_t is refused, not truncated (the scales were sized from the
	// wide value and the library wrote k / 8 of them per row: a heap overflow).
	if _, _, err := humming.QuantizeActivation(humming.DTypeE4m3, x, 5, 64, 1<<32+8); err == nil ||
		!strings.Contains(err.Error(), "group size up to") {
		t.Fatal(err)
	}
	// M = 0: refused as the library refuses it (it indexed an empty slice and panicked).
	if _, err := humming.DequantizeActivation(humming.DTypeInt8, nil, nil, 0, 64, 0); err == nil ||
		!strings.Contains(err.Error(), "must be positive") {
		t.Fatal(err)
	}
	var plan *humming.Plan
	if err := plan.Gemm(nil, humming.GemmArgs{}, nil, 1, humming.DefaultStream); err == nil ||
		!strings.Contains(err.Error(), "closed") {
		t.Fatal(err)
	}
}

// gptq builds a 4-bit GPTQ layer (v1 zeros) the way GPTQ packs it, and the weight it means.
func gptq(n, k, group int) (qweight, qzeros, scales []byte, w []float32) {
	q := func(nn, kk int) uint32 { return uint32((nn*31 + kk*17) % 16) }
	z := func(g, nn int) uint32 { return 1 + uint32((g*5+nn*3)%15) }
	s := func(g, nn int) float32 { return float32(math.Pow(2, -float64((g+nn)%4)-3)) }
	le := func(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }
	for r := 0; r < k/8; r++ {
		for nn := 0; nn < n; nn++ {
			var word uint32
			for j := 0; j < 8; j++ {
				word |= q(nn, 8*r+j) << (4 * j)
			}
			qweight = append(qweight, le(word)...)
		}
	}
	for g := 0; g < k/group; g++ {
		for wi := 0; wi < n/8; wi++ {
			var word uint32
			for j := 0; j < 8; j++ {
				word |= (z(g, 8*wi+j) - 1) << (4 * j)
			}
			qzeros = append(qzeros, le(word)...)
		}
		for nn := 0; nn < n; nn++ {
			h, _ := humming.DTypeF16.Encode(float64(s(g, nn)))
			scales = append(scales, byte(h), byte(h>>8))
		}
	}
	for nn := 0; nn < n; nn++ {
		for kk := 0; kk < k; kk++ {
			g := kk / group
			w = append(w, (float32(q(nn, kk))-float32(z(g, nn)))*s(g, nn))
		}
	}
	return
}

// gptqTensors is gptq()'s layer (groups of 128) as checkpoint tensors, with its weight.
func gptqTensors(n, k int) ([]humming.CheckpointTensor, []float32) {
	qweight, qzeros, scales, w := gptq(n, k, 128)
	groups := int64(k / 128)
	return []humming.CheckpointTensor{
		{Name: "qweight", DType: "I32", Shape: []int64{int64(k / 8), int64(n)}, Data: qweight},
		{Name: "qzeros", DType: "I32", Shape: []int64{groups, int64(n / 8)}, Data: qzeros},
		{Name: "scales", DType: "F16", Shape: []int64{groups, int64(n)}, Data: scales},
	}, w
}

// Experts converted one by one stack into one MoE layer, and two layers' rows into gate_up.
func TestStackLayersJoinsExpertsAndRows(t *testing.T) {
	n, k := 64, 256
	tensors, w := gptqTensors(n, k)
	one, err := humming.ConvertLayer(humming.SchemeGPTQ, tensors, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	moe, err := humming.StackLayers([]*humming.ConvertedLayer{one, one, one}, humming.StackExperts)
	if err != nil {
		t.Fatal(err)
	}
	defer moe.Close()
	f, err := moe.Format()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if gn, gk, ge, _ := f.Shape(); gn != int64(n) || gk != int64(k) || ge != 3 {
		t.Fatal(gn, gk, ge)
	}
	d, err := f.Dequantize(&moe.Canonical)
	if err != nil || len(d) != 3*len(w) {
		t.Fatal(len(d), err)
	}
	for i := range d {
		if d[i] != w[i%len(w)] {
			t.Fatalf("element %d: %v, want %v", i, d[i], w[i%len(w)])
		}
	}
	gateUp, err := humming.StackLayers([]*humming.ConvertedLayer{moe, moe}, humming.StackRows)
	if err != nil {
		t.Fatal(err)
	}
	defer gateUp.Close()
	g, _ := gateUp.Format()
	defer g.Close()
	if gn, _, ge, _ := g.Shape(); gn != int64(2*n) || ge != 3 {
		t.Fatal(gn, ge)
	}
	if _, err := humming.StackLayers([]*humming.ConvertedLayer{one}, humming.StackExperts); err == nil ||
		!strings.Contains(err.Error(), "at least two") {
		t.Fatal(err)
	}
	if _, err := humming.StackLayers([]*humming.ConvertedLayer{moe, one}, humming.StackRows); err == nil ||
		!strings.Contains(err.Error(), "in more than n") {
		t.Fatal(err)
	}
}

func TestGPTQConversionIsExact(t *testing.T) {
	if s, err := humming.ParseScheme("gptq"); err != nil || s != humming.SchemeGPTQ {
		t.Fatal(s, err)
	}
	n, k := 64, 256
	tensors, w := gptqTensors(n, k)
	layer, err := humming.ConvertLayer(humming.SchemeGPTQ, tensors, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer layer.Close()
	f, err := layer.Format()
	if err != nil {
		t.Fatal(err)
	}
	d, err := f.Dequantize(&layer.Canonical)
	if err != nil {
		t.Fatal(err)
	}
	for i := range w {
		if d[i] != w[i] {
			t.Fatalf("element %d: %v, want %v", i, d[i], w[i])
		}
	}
	if layer.Bias != nil || layer.KPermutation != nil || layer.Note != "" {
		t.Fatal("bias, permutation or note from nowhere")
	}
	if _, err := humming.ConvertLayer(humming.SchemeGPTQ, tensors[:2], nil); err == nil || !strings.Contains(err.Error(), "scales") {
		t.Fatal(err)
	}
	called := false
	err = humming.ConvertFile("gptq", "/nonexistent/in.safetensors", filepath.Join(t.TempDir(), "out.safetensors"),
		&humming.ConvertOptions{Progress: func(string, uint64, uint64) { called = true }})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/in.safetensors") || called {
		t.Fatal(err)
	}
}

// writeSafetensors writes an 8-byte little-endian header length, the JSON header, the data.
func writeSafetensors(t *testing.T, path string, names []string, dtypes []string, shapes [][]int64, blobs [][]byte) {
	header := map[string]interface{}{}
	var data []byte
	for i, name := range names {
		header[name] = map[string]interface{}{"dtype": dtypes[i], "shape": shapes[i],
			"data_offsets": []int{len(data), len(data) + len(blobs[i])}}
		data = append(data, blobs[i]...)
	}
	text, _ := json.Marshal(header)
	for len(text)%8 != 0 {
		text = append(text, ' ')
	}
	out := make([]byte, 8)
	binary.LittleEndian.PutUint64(out, uint64(len(text)))
	out = append(append(out, text...), data...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A panicking progress callback does not unwind through the library: it cancels the conversion
// (nothing written, no temporary file left), then ConvertFile panics with the callback's value.
func TestConvertFileProgressPanicComesBackAfterTheCall(t *testing.T) {
	n, k := 64, 256
	qweight, qzeros, scales, _ := gptq(n, k, 128)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.safetensors"), filepath.Join(dir, "out.safetensors")
	p := "model.layers.0.mlp.down_proj."
	writeSafetensors(t, in, []string{p + "qweight", p + "qzeros", p + "scales"},
		[]string{"I32", "I32", "F16"},
		[][]int64{{int64(k / 8), int64(n)}, {2, int64(n / 8)}, {2, int64(n)}},
		[][]byte{qweight, qzeros, scales})
	calls := 0
	recovered := func() (r interface{}) {
		defer func() { r = recover() }()
		_ = humming.ConvertFile("gptq", in, out, &humming.ConvertOptions{Progress: func(string, uint64, uint64) {
			calls++
			panic("from the callback")
		}})
		return nil
	}()
	if recovered != "from the callback" || calls != 1 {
		t.Fatalf("recovered %v after %d calls", recovered, calls)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "in.safetensors" {
			t.Fatal("left behind by the cancelled conversion:", e.Name())
		}
	}
}

func TestConvertFileWithProgress(t *testing.T) {
	n, k := 64, 256
	qweight, qzeros, scales, _ := gptq(n, k, 128)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.safetensors"), filepath.Join(dir, "out.safetensors")
	p := "model.layers.0.mlp.down_proj."
	writeSafetensors(t, in, []string{p + "qweight", p + "qzeros", p + "scales", "model.norm.weight"},
		[]string{"I32", "I32", "F16", "F16"},
		[][]int64{{int64(k / 8), int64(n)}, {2, int64(n / 8)}, {2, int64(n)}, {4}},
		[][]byte{qweight, qzeros, scales, make([]byte, 8)})
	var names []string
	var lastDone, lastTotal uint64
	err := humming.ConvertFile("gptq", in, out, &humming.ConvertOptions{Progress: func(name string, done, total uint64) {
		names = append(names, name)
		lastDone, lastTotal = done, total
	}})
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(names, ",")
	if !strings.Contains(joined, "model.layers.0.mlp.down_proj") || !strings.Contains(joined, "model.norm.weight") ||
		lastDone != lastTotal || lastTotal == 0 {
		t.Fatalf("progress calls: %v (%d of %d)", names, lastDone, lastTotal)
	}
	data, _ := os.ReadFile(out)
	var header map[string]json.RawMessage
	if err := json.Unmarshal(data[8:8+binary.LittleEndian.Uint64(data[:8])], &header); err != nil {
		t.Fatal(err)
	}
	var meta map[string]string
	json.Unmarshal(header["__metadata__"], &meta)
	f, err := humming.ParseFormat(meta["humming.format.model.layers.0.mlp.down_proj"])
	if err != nil {
		t.Fatal(err)
	}
	if gotN, gotK, _, _ := f.Shape(); gotN != int64(n) || gotK != int64(k) {
		t.Fatal(f)
	}
}

func TestConvertModelFolder(t *testing.T) {
	n, k := 64, 256
	qweight, qzeros, scales, _ := gptq(n, k, 128)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	os.Mkdir(in, 0o755)
	p := "model.layers.0.mlp.down_proj."
	writeSafetensors(t, filepath.Join(in, "model.safetensors"),
		[]string{p + "qweight", p + "qzeros", p + "scales", "model.norm.weight"},
		[]string{"I32", "I32", "F16", "F16"},
		[][]int64{{int64(k / 8), int64(n)}, {2, int64(n / 8)}, {2, int64(n)}, {4}},
		[][]byte{qweight, qzeros, scales, make([]byte, 8)})
	os.WriteFile(filepath.Join(in, "config.json"), []byte(`{"quantization_config": {"quant_method": "gptq",
		"bits": 4, "group_size": 128, "sym": false, "meta": {"quantizer": ["auto_gptq:0.7.1"]}}}`), 0o644)
	os.WriteFile(filepath.Join(in, "tokenizer.json"), []byte("{}"), 0o644)
	var layers []string
	summary, err := humming.ConvertModel(in, out, &humming.ConvertModelOptions{Threads: 2,
		Progress: func(kind humming.ModelEvent, name string, detail *string, done, total uint64) bool {
			if kind == humming.ConvertEventLayer {
				layers = append(layers, name)
			}
			return false
		}})
	if err != nil {
		t.Fatal(err)
	}
	if summary.Layers != 1 || summary.Tensors != 1 || summary.Files != 1 || len(layers) != 1 {
		t.Fatalf("%+v %v", summary, layers)
	}
	if _, err := os.Stat(filepath.Join(out, "tokenizer.json")); err != nil {
		t.Fatal(err)
	}
	// Read back: the layer ConvertLayer makes of the same tensors, byte for byte.
	stored, err := humming.OpenStoredModel(out)
	if err != nil {
		t.Fatal(err)
	}
	defer stored.Close()
	if len(stored.Layers) != 1 || stored.Layers[0] != "model.layers.0.mlp.down_proj" {
		t.Fatalf("layers %v", stored.Layers)
	}
	layer, err := stored.Read(stored.Layers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer layer.Format.Close()
	converted, err := humming.ConvertLayer(humming.SchemeGPTQ, []humming.CheckpointTensor{
		{Name: "qweight", DType: "I32", Shape: []int64{int64(k / 8), int64(n)}, Data: qweight},
		{Name: "qzeros", DType: "I32", Shape: []int64{2, int64(n / 8)}, Data: qzeros},
		{Name: "scales", DType: "F16", Shape: []int64{2, int64(n)}, Data: scales}},
		// As the folder's config says: AutoGPTQ's v1 zeros, sym: false.
		&humming.ConvertOptions{Flags: humming.ConvertGPTQV1Autogptq | humming.ConvertAsymmetric})
	if err != nil {
		t.Fatal(err)
	}
	defer converted.Close()
	format, _ := converted.Format()
	defer format.Close()
	want, err := format.Pack(&converted.Canonical)
	if err != nil {
		t.Fatal(err)
	}
	if layer.Format.String() != format.String() || !bytes.Equal(layer.Packed.Weight, want.Weight) ||
		!bytes.Equal(layer.Packed.Scales, want.Scales) || !bytes.Equal(layer.Packed.ZeroPoints, want.ZeroPoints) {
		t.Fatalf("read back %v, converted %v", layer.Format, format)
	}
	if f, err := stored.Format(stored.Layers[0]); err != nil || f.String() != format.String() {
		t.Fatalf("Format: %v %v", f, err)
	}
	if _, err := stored.Read("model.layers.9.mlp.down_proj"); err == nil {
		t.Fatal("a layer the folder lacks was read")
	}
	if _, err := humming.ConvertModel(in, out, nil); err == nil {
		t.Fatal("an existing output folder was replaced without ConvertModelForce")
	}
	if _, err := humming.ConvertModel(in, out, &humming.ConvertModelOptions{Flags: humming.ConvertModelForce,
		Layer: &humming.ConvertOptions{Flags: humming.ConvertGPTQV1Autogptq}}); err != nil {
		t.Fatal(err)
	}
	cancelled := filepath.Join(dir, "cancelled")
	_, err = humming.ConvertModel(in, cancelled, &humming.ConvertModelOptions{
		Progress: func(humming.ModelEvent, string, *string, uint64, uint64) bool { return true }})
	if err == nil {
		t.Fatal("cancelling did not fail the conversion")
	}
	if _, err := os.Stat(cancelled); !os.IsNotExist(err) {
		t.Fatal("a cancelled conversion left its output")
	}
}

// A cache entry laid out by hand, last used 30 days ago: pruned by age, kept by a longer one.
func TestCachePruneRemovesEntriesUnusedForTheAge(t *testing.T) {
	dir := t.TempDir()
	entry := filepath.Join(dir, "v1", "sm_90a", "ab", "ab01")
	if err := os.MkdirAll(entry, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(entry, "kernel.cubin"), make([]byte, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	meta := filepath.Join(entry, "meta.json")
	if err := os.WriteFile(meta, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-30 * 24 * time.Hour)
	if err := os.Chtimes(meta, old, old); err != nil {
		t.Fatal(err)
	}
	if n, b, err := humming.CachePrune(dir, 40*24*time.Hour, 0); err != nil || n != 0 || b != 0 {
		t.Fatal(n, b, err)
	}
	if n, b, err := humming.CachePrune(dir, 24*time.Hour, 0); err != nil || n != 1 || b != 102 {
		t.Fatal(n, b, err)
	}
	if _, err := os.Stat(entry); !os.IsNotExist(err) {
		t.Fatal("entry left:", err)
	}
}
