package humming

// #include <stdint.h>
import "C"

import "unsafe"

// hm_go_progress receives hm_convert_file's progress calls (see convert.go); user_data is the
// token of the callback registered for that conversion.
//
//export hm_go_progress
func hm_go_progress(userData unsafe.Pointer, name *C.char, done, total C.uint64_t) {
	token := uintptr(userData)
	// A panic must not unwind through the C++ frames below (their destructors would never run:
	// temporary files and mappings left behind). It is kept, later calls are skipped, and
	// ConvertFile panics with it once the C call has returned.
	defer func() {
		if r := recover(); r != nil {
			keepPanic(&progressMu, progressPanics, token, r)
		}
	}()
	progressMu.Lock()
	f := progressByToken[token]
	_, failed := progressPanics[token]
	progressMu.Unlock()
	if f != nil && !failed {
		f(C.GoString(name), uint64(done), uint64(total))
	}
}

// hm_go_cancel answers hm_convert_file's cancel calls: 1 once the conversion's progress
// callback has panicked (ConvertFile raises that panic after the call).
//
//export hm_go_cancel
func hm_go_cancel(userData unsafe.Pointer) C.int32_t {
	progressMu.Lock()
	_, failed := progressPanics[uintptr(userData)]
	progressMu.Unlock()
	if failed {
		return 1
	}
	return 0
}

// hm_go_model_progress receives hm_convert_model's progress calls (see convert_model.go);
// a nonzero return cancels the conversion.
//
//export hm_go_model_progress
func hm_go_model_progress(userData unsafe.Pointer, kind C.int32_t, name, detail *C.char, done, total C.uint64_t) (cancel C.int32_t) {
	token := uintptr(userData)
	// A panic is kept and cancels the conversion (returning 1); ConvertModel panics with it once
	// the C call has returned, never unwinding through the C++ frames.
	defer func() {
		if r := recover(); r != nil {
			keepPanic(&modelProgressMu, modelProgressPanics, token, r)
			cancel = 1
		}
	}()
	modelProgressMu.Lock()
	f := modelProgressByToken[token]
	_, failed := modelProgressPanics[token]
	modelProgressMu.Unlock()
	if failed {
		return 1
	}
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
