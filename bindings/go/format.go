package humming

/*
#include "humming.h"

// The canonical and packed structs are filled here, in C, from pointer arguments: Go memory
// passed to C may not hold Go pointers, so Go never builds these structs itself.
static hm_canonical_weight_t hm_go_canonical(uint8_t *codes, float *scales, float *zp, float *gs) {
  hm_canonical_weight_t w;
  hm_canonical_weight_init_sized(&w, sizeof w);
  w.codes = codes;
  w.scales = scales;
  w.zero_points = zp;
  w.global_scale = gs;
  return w;
}

static hm_packed_weight_t hm_go_packed(void *weight, void *scales, void *zp, float *gs) {
  hm_packed_weight_t w;
  hm_packed_weight_init_sized(&w, sizeof w);
  w.weight = weight;
  w.scales = scales;
  w.zero_points = zp;
  w.global_scale = gs;
  return w;
}

static hm_status_t hm_go_quantize(const hm_format_t *f, const void *weight, hm_dtype_t dtype,
                                  uint8_t *codes, float *scales, float *zp, float *gs) {
  hm_canonical_weight_t out = hm_go_canonical(codes, scales, zp, gs);
  return hm_quantize(f, weight, dtype, &out);
}

static hm_status_t hm_go_dequantize(const hm_format_t *f, uint8_t *codes, float *scales,
                                    float *zp, float *gs, float *weight) {
  hm_canonical_weight_t in = hm_go_canonical(codes, scales, zp, gs);
  return hm_dequantize(f, &in, weight);
}

static hm_status_t hm_go_pack(const hm_format_t *f, uint8_t *codes, float *scales, float *zp,
                              float *gs, void *pw, void *ps, void *pz, float *pg) {
  hm_canonical_weight_t in = hm_go_canonical(codes, scales, zp, gs);
  hm_packed_weight_t out = hm_go_packed(pw, ps, pz, pg);
  return hm_pack(f, &in, &out);
}

static hm_status_t hm_go_unpack(const hm_format_t *f, void *pw, void *ps, void *pz, float *pg,
                                uint8_t *codes, float *scales, float *zp, float *gs) {
  hm_packed_weight_t in = hm_go_packed(pw, ps, pz, pg);
  hm_canonical_weight_t out = hm_go_canonical(codes, scales, zp, gs);
  return hm_unpack(f, &in, &out);
}
*/
import "C"

import (
	"runtime"
	"strings"
	"unsafe"
)

// Role is the role a dtype plays in a format (RoleWeight, RoleActivation, ...).
type Role int32

// Scale is how weight scales are laid out: Kind is a Scale* constant.
type Scale struct {
	Kind, GroupK, GroupN int32
}

// CanonicalSizes are the element counts of the canonical buffers (0 where there are none).
type CanonicalSizes struct {
	Codes, Scales, ZeroPoints, GlobalScale int
}

// PackedSizes are the byte sizes of the standard-layout buffers, and N and K after padding.
type PackedSizes struct {
	Weight, Scales, ZeroPoints, GlobalScale int
	NPadded, KPadded                        int64
}

// CanonicalWeight holds canonical (unpacked) quantized weights; nil where the format has none.
type CanonicalWeight struct {
	Codes       []uint8
	Scales      []float32
	ZeroPoints  []float32
	GlobalScale []float32
}

// PackedWeight holds standard-layout buffers as bytes (the global scales as f32).
type PackedWeight struct {
	Weight      []byte
	Scales      []byte
	ZeroPoints  []byte
	GlobalScale []float32
}

// Format describes one linear (or MoE) layer; parse one from its canonical string
// ("w=int4 a=f16 n=4096 k=4096", docs/format.md). It may be read from several goroutines at once.
type Format struct {
	h *C.hm_format_t
}

func adoptFormat(h *C.hm_format_t) *Format {
	f := &Format{h: h}
	runtime.SetFinalizer(f, (*Format).Close)
	return f
}

// NewFormat is the default format "w=uint4b8 a=f16 c=f16 s=f16:g128 n=0 k=0"; set the shape.
func NewFormat() (*Format, error) {
	var h *C.hm_format_t
	if err := call(func() C.hm_status_t { return C.hm_format_create(&h) }); err != nil {
		return nil, err
	}
	return adoptFormat(h), nil
}

// ParseFormat reads a canonical format string.
func ParseFormat(text string) (*Format, error) {
	s := cString(text)
	defer free(unsafe.Pointer(s))
	var h *C.hm_format_t
	if err := call(func() C.hm_status_t { return C.hm_format_parse(s, &h) }); err != nil {
		return nil, err
	}
	return adoptFormat(h), nil
}

// Close destroys the format; later calls return ErrorInvalidState. Safe to call twice.
func (f *Format) Close() {
	if f.h != nil {
		C.hm_format_destroy(f.h)
		f.h = nil
	}
	runtime.SetFinalizer(f, nil)
}

// with runs a call on the live handle, keeping f reachable (and unfinalized) until it returns.
func (f *Format) with(do func(h *C.hm_format_t) C.hm_status_t) error {
	if f == nil || f.h == nil {
		return closed("Format")
	}
	err := call(func() C.hm_status_t { return do(f.h) })
	runtime.KeepAlive(f)
	return err
}

func (f *Format) Clone() (*Format, error) {
	var h *C.hm_format_t
	if err := f.with(func(fh *C.hm_format_t) C.hm_status_t { return C.hm_format_clone(fh, &h) }); err != nil {
		return nil, err
	}
	return adoptFormat(h), nil
}

// Text is the canonical string.
func (f *Format) Text() (string, error) {
	if f == nil || f.h == nil {
		return "", closed("Format")
	}
	defer runtime.KeepAlive(f)
	return copyOut(func(buf *C.char, size C.size_t, length *C.size_t) C.hm_status_t {
		return C.hm_format_to_string(f.h, buf, size, length)
	})
}

func (f *Format) String() string {
	text, err := f.Text()
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return text
}

// Equal reports whether both describe the same layer.
func (f *Format) Equal(other *Format) bool {
	if f == nil || other == nil || f.h == nil || other.h == nil {
		return false
	}
	equal := C.hm_format_equal(f.h, other.h) == 1
	runtime.KeepAlive(f)
	runtime.KeepAlive(other)
	return equal
}

func (f *Format) DType(role Role) (DType, error) {
	var code C.hm_dtype_t
	err := f.with(func(h *C.hm_format_t) C.hm_status_t { return C.hm_format_get_dtype(h, C.int32_t(role), &code) })
	return DType(code), err
}

func (f *Format) SetDType(role Role, dtype DType) error {
	return f.with(func(h *C.hm_format_t) C.hm_status_t {
		return C.hm_format_set_dtype(h, C.int32_t(role), C.hm_dtype_t(dtype))
	})
}

func (f *Format) Scale() (Scale, error) {
	var kind, gk, gn C.int32_t
	err := f.with(func(h *C.hm_format_t) C.hm_status_t { return C.hm_format_get_scale(h, &kind, &gk, &gn) })
	return Scale{int32(kind), int32(gk), int32(gn)}, err
}

// SetScale sets the scale layout: kind is a Scale* constant; group sizes as humming.h says.
func (f *Format) SetScale(kind, groupK, groupN int32) error {
	return f.with(func(h *C.hm_format_t) C.hm_status_t {
		return C.hm_format_set_scale(h, C.int32_t(kind), C.int32_t(groupK), C.int32_t(groupN))
	})
}

// Shape is (n, k, experts).
func (f *Format) Shape() (n, k int64, experts int32, err error) {
	var cn, ck C.int64_t
	var ce C.int32_t
	err = f.with(func(h *C.hm_format_t) C.hm_status_t { return C.hm_format_get_shape(h, &cn, &ck, &ce) })
	return int64(cn), int64(ck), int32(ce), err
}

func (f *Format) SetShape(n, k int64, experts int32) error {
	return f.with(func(h *C.hm_format_t) C.hm_status_t {
		return C.hm_format_set_shape(h, C.int64_t(n), C.int64_t(k), C.int32_t(experts))
	})
}

func (f *Format) Bias() (bool, error) {
	var b C.int32_t
	err := f.with(func(h *C.hm_format_t) C.hm_status_t { return C.hm_format_get_bias(h, &b) })
	return b != 0, err
}

func (f *Format) SetBias(hasBias bool) error {
	v := C.int32_t(0)
	if hasBias {
		v = 1
	}
	return f.with(func(h *C.hm_format_t) C.hm_status_t { return C.hm_format_set_bias(h, v) })
}

// ActivationGroups is the K group of the activation scales: 0 for one f32 scale per token ([M]),
// else one per token and groupK inputs ([M][ceil(K / groupK)], "a=e4m3:g128").
func (f *Format) ActivationGroups() (int, error) {
	var g C.int32_t
	err := f.with(func(h *C.hm_format_t) C.hm_status_t { return C.hm_format_get_activation_groups(h, &g) })
	return int(g), err
}

// SetActivationGroups sets the K group of the activation scales (0: one scale per token).
func (f *Format) SetActivationGroups(groupK int) error {
	return f.with(func(h *C.hm_format_t) C.hm_status_t {
		return C.hm_format_set_activation_groups(h, C.int32_t(groupK))
	})
}

// Validate checks the support rules for arch ("sm_90a", ...), or for any arch when arch is "".
func (f *Format) Validate(arch string) error {
	var a *C.char
	if arch != "" {
		a = cString(arch)
		defer free(unsafe.Pointer(a))
	}
	return f.with(func(h *C.hm_format_t) C.hm_status_t { return C.hm_format_validate(h, a) })
}

// Kernels lists the kernel families that run the format on arch (any target when arch is ""),
// e.g. ["dense_wgmma" "dense_mma"]. A valid format that no kernel runs yet is an error with
// Status ErrorUnsupported saying what is missing (the formats NewPlan refuses).
func (f *Format) Kernels(arch string) ([]string, error) {
	if f == nil || f.h == nil {
		return nil, closed("Format")
	}
	defer runtime.KeepAlive(f)
	var a *C.char
	if arch != "" {
		a = cString(arch)
		defer free(unsafe.Pointer(a))
	}
	names, err := copyOut(func(buf *C.char, size C.size_t, length *C.size_t) C.hm_status_t {
		return C.hm_format_kernels(f.h, a, buf, size, length)
	})
	if err != nil {
		return nil, err
	}
	return strings.Fields(names), nil
}

func (f *Format) CanonicalSizes() (CanonicalSizes, error) {
	var s C.hm_canonical_sizes_t
	C.hm_canonical_sizes_init_sized(&s, C.size_t(unsafe.Sizeof(s)))
	err := f.with(func(h *C.hm_format_t) C.hm_status_t { return C.hm_format_canonical_sizes(h, &s) })
	return CanonicalSizes{int(s.codes), int(s.scales), int(s.zero_points), int(s.global_scale)}, err
}

func (f *Format) PackedSizes() (PackedSizes, error) {
	var s C.hm_packed_sizes_t
	C.hm_packed_sizes_init_sized(&s, C.size_t(unsafe.Sizeof(s)))
	err := f.with(func(h *C.hm_format_t) C.hm_status_t { return C.hm_format_packed_sizes(h, &s) })
	return PackedSizes{int(s.weight), int(s.scales), int(s.zero_points), int(s.global_scale),
		int64(s.n_padded), int64(s.k_padded)}, err
}

func sized(name string, have, need int) error {
	if have != need {
		return invalid("'%s' has %d elements, this format needs %d", name, have, need)
	}
	return nil
}

func (f *Format) emptyCanonical() (*CanonicalWeight, error) {
	s, err := f.CanonicalSizes()
	if err != nil {
		return nil, err
	}
	w := &CanonicalWeight{Codes: make([]uint8, s.Codes)}
	if s.Scales > 0 {
		w.Scales = make([]float32, s.Scales)
	}
	if s.ZeroPoints > 0 {
		w.ZeroPoints = make([]float32, s.ZeroPoints)
	}
	if s.GlobalScale > 0 {
		w.GlobalScale = make([]float32, s.GlobalScale)
	}
	return w, nil
}

func (f *Format) checkCanonical(w *CanonicalWeight) error {
	s, err := f.CanonicalSizes()
	if err != nil {
		return err
	}
	for _, c := range []struct {
		name       string
		have, need int
	}{{"Codes", len(w.Codes), s.Codes}, {"Scales", len(w.Scales), s.Scales},
		{"ZeroPoints", len(w.ZeroPoints), s.ZeroPoints}, {"GlobalScale", len(w.GlobalScale), s.GlobalScale}} {
		if err := sized(c.name, c.have, c.need); err != nil {
			return err
		}
	}
	return nil
}

func (f *Format) checkPacked(w *PackedWeight) error {
	s, err := f.PackedSizes()
	if err != nil {
		return err
	}
	for _, c := range []struct {
		name       string
		have, need int
	}{{"Weight", len(w.Weight), s.Weight}, {"Scales", len(w.Scales), s.Scales},
		{"ZeroPoints", len(w.ZeroPoints), s.ZeroPoints}, {"GlobalScale", 4 * len(w.GlobalScale), s.GlobalScale}} {
		if err := sized(c.name, c.have, c.need); err != nil {
			return err
		}
	}
	return nil
}

func u8p(s []uint8) *C.uint8_t {
	if len(s) == 0 {
		return nil
	}
	return (*C.uint8_t)(unsafe.Pointer(&s[0]))
}

func f32p(s []float32) *C.float {
	if len(s) == 0 {
		return nil
	}
	return (*C.float)(unsafe.Pointer(&s[0]))
}

func bytep(s []byte) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}

func (f *Format) weightElements() (int, error) {
	n, k, e, err := f.Shape()
	return int(n * k * int64(e)), err
}

// Quantize quantizes a row-major f32 weight [E][N][K] into new canonical buffers.
func (f *Format) Quantize(weight []float32) (*CanonicalWeight, error) {
	return f.quantize(unsafe.Pointer(f32p(weight)), len(weight), DTypeF32)
}

// QuantizeBits16 quantizes a weight of f16 or bf16 bit patterns (dtype says which).
func (f *Format) QuantizeBits16(weight []uint16, dtype DType) (*CanonicalWeight, error) {
	if dtype != DTypeF16 && dtype != DTypeBf16 {
		return nil, invalid("'dtype' is %v; 16-bit weights are f16 or bf16", dtype)
	}
	var p unsafe.Pointer
	if len(weight) > 0 {
		p = unsafe.Pointer(&weight[0])
	}
	return f.quantize(p, len(weight), dtype)
}

func (f *Format) quantize(weight unsafe.Pointer, count int, dtype DType) (*CanonicalWeight, error) {
	need, err := f.weightElements()
	if err != nil {
		return nil, err
	}
	if err := sized("weight", count, need); err != nil {
		return nil, err
	}
	out, err := f.emptyCanonical()
	if err != nil {
		return nil, err
	}
	err = f.with(func(h *C.hm_format_t) C.hm_status_t {
		return C.hm_go_quantize(h, weight, C.hm_dtype_t(dtype), u8p(out.Codes), f32p(out.Scales),
			f32p(out.ZeroPoints), f32p(out.GlobalScale))
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Dequantize turns canonical buffers back into a row-major f32 weight [E][N][K].
func (f *Format) Dequantize(w *CanonicalWeight) ([]float32, error) {
	if err := f.checkCanonical(w); err != nil {
		return nil, err
	}
	count, err := f.weightElements()
	if err != nil {
		return nil, err
	}
	out := make([]float32, count)
	err = f.with(func(h *C.hm_format_t) C.hm_status_t {
		return C.hm_go_dequantize(h, u8p(w.Codes), f32p(w.Scales), f32p(w.ZeroPoints), f32p(w.GlobalScale), f32p(out))
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Pack converts canonical buffers to the standard layout (exactly invertible by Unpack).
func (f *Format) Pack(w *CanonicalWeight) (*PackedWeight, error) {
	if err := f.checkCanonical(w); err != nil {
		return nil, err
	}
	s, err := f.PackedSizes()
	if err != nil {
		return nil, err
	}
	out := &PackedWeight{Weight: make([]byte, s.Weight), Scales: make([]byte, s.Scales),
		ZeroPoints: make([]byte, s.ZeroPoints), GlobalScale: make([]float32, s.GlobalScale/4)}
	err = f.with(func(h *C.hm_format_t) C.hm_status_t {
		return C.hm_go_pack(h, u8p(w.Codes), f32p(w.Scales), f32p(w.ZeroPoints), f32p(w.GlobalScale),
			bytep(out.Weight), bytep(out.Scales), bytep(out.ZeroPoints), f32p(out.GlobalScale))
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Unpack converts standard-layout buffers back to canonical ones.
func (f *Format) Unpack(w *PackedWeight) (*CanonicalWeight, error) {
	if err := f.checkPacked(w); err != nil {
		return nil, err
	}
	out, err := f.emptyCanonical()
	if err != nil {
		return nil, err
	}
	err = f.with(func(h *C.hm_format_t) C.hm_status_t {
		return C.hm_go_unpack(h, bytep(w.Weight), bytep(w.Scales), bytep(w.ZeroPoints), f32p(w.GlobalScale),
			u8p(out.Codes), f32p(out.Scales), f32p(out.ZeroPoints), f32p(out.GlobalScale))
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SupportMatrix is the support matrix as text (what `humming support` prints).
func SupportMatrix() (string, error) {
	return copyOut(func(buf *C.char, size C.size_t, length *C.size_t) C.hm_status_t {
		return C.hm_support_matrix(buf, size, length)
	})
}
