package humming

/*
#include <stdlib.h>
#include "humming.h"
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// StoredLayer is a converted layer as stored (hm_stored_layer_*), with host copies of its
// buffers.
type StoredLayer struct {
	Format *Format // close it when done
	// Packed is the standard layout (sizes from Format.PackedSizes).
	Packed PackedWeight
	// Bias is f32 [E][N], nil when the format has none.
	Bias []float32
	// KPermutation is int32 [K], nil when K keeps its order; else gather the activations with
	// it: A'[:, k] = A[:, KPermutation[k]].
	KPermutation []int32
	// Note says what the conversion lost, one sentence; "" when nothing.
	Note string
}

// StoredModel is a converted folder (ConvertModel's output) or file (ConvertFile's), opened for
// reading its layers back (docs/convert.md "Reading it back"): the shards are mapped read-only
// and only the layers asked for are read. Several goroutines may read one model at once.
type StoredModel struct {
	h *C.hm_stored_model_t
	// Layers are the converted layers' names (prefixes), sorted.
	Layers []string
}

// OpenStoredModel opens a converted folder or file.
func OpenStoredModel(path string) (*StoredModel, error) {
	p := cString(path)
	defer free(unsafe.Pointer(p))
	m := &StoredModel{}
	if err := call(func() C.hm_status_t { return C.hm_stored_model_open(p, &m.h) }); err != nil {
		return nil, err
	}
	runtime.SetFinalizer(m, (*StoredModel).Close)
	var count C.size_t
	if err := call(func() C.hm_status_t { return C.hm_stored_model_layer_count(m.h, &count) }); err != nil {
		m.Close()
		return nil, err
	}
	for i := C.size_t(0); i < count; i++ {
		var name *C.char
		if err := call(func() C.hm_status_t { return C.hm_stored_model_layer_name(m.h, i, &name) }); err != nil {
			m.Close()
			return nil, err
		}
		m.Layers = append(m.Layers, C.GoString(name))
	}
	return m, nil
}

func (m *StoredModel) Close() {
	if m.h != nil {
		C.hm_stored_model_destroy(m.h)
		m.h = nil
	}
	runtime.SetFinalizer(m, nil)
}

// Format is the layer's format from the header alone (no tensor is read); close it when done.
func (m *StoredModel) Format(name string) (*Format, error) {
	if m == nil || m.h == nil {
		return nil, closed("StoredModel")
	}
	cname := cString(name)
	defer free(unsafe.Pointer(cname))
	var fh *C.hm_format_t
	err := call(func() C.hm_status_t { return C.hm_stored_model_layer_format(m.h, cname, &fh) })
	runtime.KeepAlive(m)
	if err != nil {
		return nil, err
	}
	return adoptFormat(fh), nil
}

// Read reads one layer; the error names a missing layer or a tensor that does not fit its
// format.
func (m *StoredModel) Read(name string) (*StoredLayer, error) {
	if m == nil || m.h == nil {
		return nil, closed("StoredModel")
	}
	cname := cString(name)
	defer free(unsafe.Pointer(cname))
	var h *C.hm_stored_layer_t
	err := call(func() C.hm_status_t { return C.hm_stored_model_read(m.h, cname, &h) })
	runtime.KeepAlive(m)
	if err != nil {
		return nil, err
	}
	defer C.hm_stored_layer_destroy(h)
	var fh *C.hm_format_t
	if err := call(func() C.hm_status_t { return C.hm_stored_layer_format(h, &fh) }); err != nil {
		return nil, err
	}
	layer := &StoredLayer{Format: adoptFormat(fh)}
	sizes, err := layer.Format.PackedSizes()
	if err != nil {
		layer.Format.Close()
		return nil, err
	}
	n, k, e, _ := layer.Format.Shape()
	var info C.hm_stored_layer_info_t
	C.hm_stored_layer_info_init_sized(&info, C.size_t(unsafe.Sizeof(info)))
	if err := call(func() C.hm_status_t { return C.hm_stored_layer_info(h, &info) }); err != nil {
		layer.Format.Close()
		return nil, err
	}
	layer.Packed = PackedWeight{
		Weight:      copyBytes(info.packed.weight, sizes.Weight),
		Scales:      copyBytes(info.packed.scales, sizes.Scales),
		ZeroPoints:  copyBytes(info.packed.zero_points, sizes.ZeroPoints),
		GlobalScale: copyFloats(info.packed.global_scale, sizes.GlobalScale/4),
	}
	layer.Bias = copyFloats(info.bias, int(e)*int(n))
	layer.KPermutation = copyInt32s(info.k_permutation, int(k))
	if info.note != nil {
		layer.Note = C.GoString(info.note)
	}
	return layer, nil
}
