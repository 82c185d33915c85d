package humming

// #include <stdint.h>
import "C"

import "unsafe"

// hm_go_progress receives hm_convert_file's progress calls (see convert.go); user_data is the
// token of the callback registered for that conversion.
//
//export hm_go_progress
func hm_go_progress(userData unsafe.Pointer, name *C.char, done, total C.uint64_t) {
	progressMu.Lock()
	f := progressByToken[uintptr(userData)]
	progressMu.Unlock()
	if f != nil {
		f(C.GoString(name), uint64(done), uint64(total))
	}
}

// hm_go_model_progress receives hm_convert_model's progress calls (see convert_model.go);
// a nonzero return cancels the conversion.
//
//export hm_go_model_progress
func hm_go_model_progress(userData unsafe.Pointer, kind C.int32_t, name, detail *C.char, done, total C.uint64_t) C.int32_t {
	modelProgressMu.Lock()
	f := modelProgressByToken[uintptr(userData)]
	modelProgressMu.Unlock()
	if f == nil {
		return 0
	}
	var d *string
	if detail != nil {
		s := C.GoString(detail)
		d = &s
	}
	if f(ModelEvent(kind), C.GoString(name), d, uint64(done), uint64(total)) {
		return 1
	}
	return 0
}
