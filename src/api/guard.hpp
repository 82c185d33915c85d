// The boundary between the C ABI and the C++ core: every exported function runs its body through
// api_call(), which turns exceptions into status codes and the thread-local message, so nothing
// throws across the ABI. Argument checks shared by every entry point live here too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>

#include "core/error.hpp"
#include "humming.h"

namespace hm::api {

// Sets / clears the calling thread's last error message (src/api/status.cpp).
void set_last_error(const std::string& message);

template <typename Body>
hm_status_t api_call(const char* function, Body&& body) noexcept {
  try {
    body();
    return HM_SUCCESS;
  } catch (const Error& e) {
    set_last_error(std::string(function) + ": " + e.message());
    return e.status();
  } catch (const std::bad_alloc&) {
    set_last_error(std::string(function) + ": out of host memory");
    return HM_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_last_error(std::string(function) + ": internal error: " + e.what() +
                   " (please report this with the message)");
    return HM_ERROR_INTERNAL;
  } catch (...) {
    set_last_error(std::string(function) + ": internal error: unknown exception");
    return HM_ERROR_INTERNAL;
  }
}

// Runs `body` through api_call with the function's own name.
#define HM_API_CALL(...) ::hm::api::api_call(__func__, [&]() { __VA_ARGS__; })

inline void require_not_null(const void* p, const char* name) {
  if (p == nullptr) fail(HM_ERROR_INVALID_ARGUMENT, std::string("argument '") + name + "' is NULL");
}

// Option/info structs: struct_size must cover at least the first released layout (`min_size`)
// and, for inputs, the library only reads fields that lie within struct_size.
inline void require_struct_size(uint32_t struct_size, size_t min_size, const char* name) {
  if (struct_size < min_size)
    fail(HM_ERROR_INVALID_STRUCT_SIZE,
         std::string("'") + name + "->struct_size' is " + std::to_string(struct_size) +
             ", expected at least " + std::to_string(min_size) +
             " (initialize it with the matching _init() function)");
}

// Whether the caller's struct `ptr` (of `type`) reaches past `field`: fields appended after a
// struct's first release are read (or written) only then, since older callers pass shorter
// structs.
#define HM_STRUCT_HAS(ptr, type, field) \
  ((ptr)->struct_size >= offsetof(type, field) + sizeof((ptr)->field))

// Info structs the library fills: afterwards struct_size says how many bytes it filled (the
// smaller of the caller's size and its own), so a caller built against a newer header can tell
// which of its fields this library knew (humming.h, conventions).
template <class T>
void report_filled(T* out) {
  if (out->struct_size > sizeof(T)) out->struct_size = static_cast<uint32_t>(sizeof(T));
}

// Copies `text` into (buf, size) by the snprintf rule and reports the full length.
// Returns HM_ERROR_BUFFER_TOO_SMALL (with a message) when it did not fit.
void copy_out_string(const std::string& text, char* buf, size_t size, size_t* length);

}  // namespace hm::api
