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
