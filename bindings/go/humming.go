// Package humming is the Go binding of Humming, JIT-compiled GEMM kernels for quantized
// inference (a cgo package over include/humming.h; standard library only).
//
// Objects that own a C handle (Format, Context, Kernel, LaunchParams, Plan, DeviceBuffer,
// ConvertedLayer) have an explicit Close; a finalizer closes what was forgotten, as a safety
// net only. Failures are *Error values carrying the status code and the library's message,
// read on the same OS thread as the failing call.
//
// Build: the header comes from this repository (../../include); point the linker at
// libhumming.so with CGO_LDFLAGS="-L<dir> -Wl,-rpath,<dir>" (a CMake build directory works).
package humming

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#cgo LDFLAGS: -lhumming
#include <stdlib.h>
#include "humming.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"
)

//go:generate go run gen_constants.go

// Error is a failed Humming call: Status is an Error* constant, Message the library's text
// (it names the bad argument and says what to do).
type Error struct {
	Status  int32
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (%d): %s", e.Name(), e.Status, e.Message)
}

// Name is the status constant's name without the prefix, e.g. "ERROR_PARSE".
func (e *Error) Name() string { return StatusName(e.Status) }

// Category is the band of the status: ErrorParse belongs to ErrorInvalidArgument.
func (e *Error) Category() int32 { return e.Status / 1000 * 1000 }

// Is makes errors.Is(err, &humming.Error{Status: humming.ErrorParse}) match by status.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Status == e.Status
}

// StatusName names any status code ("UNKNOWN" for codes the library does not know).
func StatusName(status int32) string {
	return C.GoString(C.hm_status_name(C.hm_status_t(status)))
}

// LastErrorMessage is the calling OS thread's last message. Goroutines move between threads:
// lock the goroutine to its thread around a call and this read, as every function here does.
func LastErrorMessage() string {
	n := C.hm_last_error_message(nil, 0)
	if n == 0 {
		return ""
	}
	buf := make([]byte, int(n)+1)
	C.hm_last_error_message((*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)))
	return string(buf[:n])
}

// ClearLastError clears the calling OS thread's message.
func ClearLastError() { C.hm_clear_last_error() }

// call runs one C call with the goroutine locked to its OS thread, so that the thread-local
// message read after a failure belongs to this call.
func call(f func() C.hm_status_t) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if status := f(); status != C.HM_SUCCESS {
		message := LastErrorMessage()
		if message == "" {
			message = "(the library left no message)"
		}
		return &Error{Status: int32(status), Message: message}
	}
	return nil
}

func invalid(format string, args ...interface{}) error {
	return &Error{Status: ErrorInvalidArgument, Message: fmt.Sprintf(format, args...)}
}

func closed(what string) error {
	return &Error{Status: ErrorInvalidState, Message: "this " + what + " is closed"}
}

// copyOut calls a function that copies a string out by the snprintf rule.
func copyOut(f func(buf *C.char, size C.size_t, length *C.size_t) C.hm_status_t) (string, error) {
	buf := make([]byte, 256)
	var length C.size_t
	status := C.hm_status_t(C.HM_SUCCESS)
	err := call(func() C.hm_status_t {
		status = f((*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &length)
		return status
	})
	if status == C.HM_ERROR_BUFFER_TOO_SMALL {
		buf = make([]byte, int(length)+1)
		err = call(func() C.hm_status_t {
			return f((*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &length)
		})
	}
	if err != nil {
		return "", err
	}
	return string(buf[:length]), nil
}

// LibraryVersion is the version of the loaded library (compare with VersionMajor, ...).
func LibraryVersion() (major, minor, patch int) {
	v := int(C.hm_version())
	return v / 10000, v / 100 % 100, v % 100
}

// VersionString is "0.1.0".
func VersionString() string { return C.GoString(C.hm_version_string()) }

// LibraryABIVersion is the ABI major of the loaded library (the SONAME suffix).
func LibraryABIVersion() int { return int(C.hm_abi_version()) }

// cString is a C copy of s; free it with C.free.
func cString(s string) *C.char { return C.CString(s) }

func free(p unsafe.Pointer) { C.free(p) }
