package humming

/*
#include <stdlib.h>
#include "humming.h"

// The model progress callback: hm_go_model_progress is the Go function exported in progress.go.
extern int32_t hm_go_model_progress(void *user_data, int32_t kind, char *name, char *detail,
                                    uint64_t done, uint64_t total);
static int32_t hm_go_model_progress_trampoline(void *user_data, int32_t kind, const char *name,
                                               const char *detail, uint64_t done, uint64_t total) {
  return hm_go_model_progress(user_data, kind, (char *)name, (char *)detail, done, total);
}
static void hm_go_set_model_progress(hm_convert_model_options_t *o, uintptr_t handle) {
  o->progress = hm_go_model_progress_trampoline;
  o->progress_user_data = (void *)handle;
}
*/
import "C"

import (
	"sync"
	"unsafe"
)

// ModelEvent says what a model progress call is about: ConvertEventLayer, ConvertEventTensor or
// ConvertEventFile.
type ModelEvent int32

// ConvertModelOptions are hm_convert_model_options_t; the zero value lets the model's config
// decide everything.
type ConvertModelOptions struct {
	Scheme  string          // forces every layer's scheme; "": from the config
	Layer   *ConvertOptions // overrides of the config, field by field (Layer.Progress unused)
	Flags   uint32          // ConvertModel* bits
	Threads int32           // layers converted at once; 0: every usable core
	// Progress is called after each layer, tensor and file (kind, name, detail or nil, done and
	// total bytes); returning true cancels the conversion, which then writes nothing.
	Progress func(kind ModelEvent, name string, detail *string, done, total uint64) bool
}

// ConvertModelSummary is hm_convert_model_summary_t: what ConvertModel did.
type ConvertModelSummary struct {
	Layers, Tensors, Files, Shards int32
	BytesIn, BytesOut              uint64
	Seconds                        float64
}

var (
	modelProgressMu      sync.Mutex
	modelProgressNext    uintptr
	modelProgressByToken = map[uintptr]func(ModelEvent, string, *string, uint64, uint64) bool{}
	modelProgressPanics  = map[uintptr]interface{}{} // a callback's panic, raised after the C call
)

// ConvertModel converts a Hugging Face model folder into the standard layout
// (docs/convert.md), written atomically to outDir.
func ConvertModel(inDir, outDir string, options *ConvertModelOptions) (ConvertModelSummary, error) {
	in, out := cString(inDir), cString(outDir)
	defer free(unsafe.Pointer(in))
	defer free(unsafe.Pointer(out))
	opts := (*C.hm_convert_model_options_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.hm_convert_model_options_t{}))))
	defer C.free(unsafe.Pointer(opts))
	C.hm_convert_model_options_init_sized(opts, C.size_t(unsafe.Sizeof(*opts)))
	var token uintptr
	if options != nil {
		if options.Scheme != "" {
			s := cString(options.Scheme)
			defer free(unsafe.Pointer(s))
			opts.scheme = s
		}
		if options.Layer != nil {
			layer, release := options.Layer.cOptions()
			defer release()
			layer.progress = nil
			opts.layer_options = layer
		}
		opts.flags = C.uint32_t(options.Flags)
		opts.threads = C.int32_t(options.Threads)
		if options.Progress != nil {
			modelProgressMu.Lock()
			modelProgressNext++
			token = modelProgressNext
			modelProgressByToken[token] = options.Progress
			modelProgressMu.Unlock()
			defer func() {
				modelProgressMu.Lock()
				delete(modelProgressByToken, token)
				modelProgressMu.Unlock()
			}()
			C.hm_go_set_model_progress(opts, C.uintptr_t(token))
		}
	}
	var s C.hm_convert_model_summary_t
	C.hm_convert_model_summary_init_sized(&s, C.size_t(unsafe.Sizeof(s)))
	err := call(func() C.hm_status_t { return C.hm_convert_model(in, out, opts, &s) })
	if p, panicked := takePanic(&modelProgressMu, modelProgressPanics, token); panicked {
		panic(p)
	}
	return ConvertModelSummary{
		Layers: int32(s.layers), Tensors: int32(s.tensors), Files: int32(s.files),
		Shards: int32(s.shards), BytesIn: uint64(s.bytes_in), BytesOut: uint64(s.bytes_out),
		Seconds: float64(s.seconds),
	}, err
}
