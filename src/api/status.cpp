// Status names, the thread-local last-error message, version queries.
#include <cstring>
#include <string>

#include "api/guard.hpp"

namespace hm::api {
namespace {
// One message per thread: a failing call on one thread never clobbers another thread's message.
thread_local std::string t_last_error;
}  // namespace

void set_last_error(const std::string& message) { t_last_error = message; }

void copy_out_string(const std::string& text, char* buf, size_t size, size_t* length) {
  if (length != nullptr) *length = text.size();
  if (buf == nullptr && size != 0) fail(HM_ERROR_INVALID_ARGUMENT, "argument 'buf' is NULL but 'size' is not 0");
  if (size > 0) {
    size_t n = text.size() < size - 1 ? text.size() : size - 1;
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
  }
  if (text.size() >= size)
    fail(HM_ERROR_BUFFER_TOO_SMALL, "the text needs " + std::to_string(text.size() + 1) +
                                        " bytes with its NUL, the buffer has " + std::to_string(size));
}

}  // namespace hm::api

extern "C" {

HM_API uint32_t hm_version(void) { return HM_VERSION; }

HM_API const char* hm_version_string(void) {
#define HM_STR2(x) #x
#define HM_STR(x) HM_STR2(x)
  return HM_STR(HM_VERSION_MAJOR) "." HM_STR(HM_VERSION_MINOR) "." HM_STR(HM_VERSION_PATCH);
#undef HM_STR
#undef HM_STR2
}

HM_API uint32_t hm_abi_version(void) { return HM_ABI_VERSION; }

HM_API const char* hm_status_name(hm_status_t status) {
  switch (status) {
#define HM_CASE(name) \
  case HM_##name:     \
    return #name;
    HM_CASE(SUCCESS)
    HM_CASE(ERROR_INVALID_ARGUMENT)
    HM_CASE(ERROR_INVALID_STRUCT_SIZE)
    HM_CASE(ERROR_BUFFER_TOO_SMALL)
    HM_CASE(ERROR_PARSE)
    HM_CASE(ERROR_INVALID_STATE)
    HM_CASE(ERROR_MISALIGNED)
    HM_CASE(ERROR_WRONG_DEVICE)
    HM_CASE(ERROR_NON_FINITE)
    HM_CASE(ERROR_UNSUPPORTED)
    HM_CASE(ERROR_UNSUPPORTED_ARCH)
    HM_CASE(ERROR_UNSUPPORTED_FORMAT)
    HM_CASE(ERROR_DRIVER_NOT_FOUND)
    HM_CASE(ERROR_DRIVER_SYMBOL)
    HM_CASE(ERROR_NO_DEVICE)
    HM_CASE(ERROR_CUDA)
    HM_CASE(ERROR_LAUNCH)
    HM_CASE(ERROR_COMPILER_NOT_FOUND)
    HM_CASE(ERROR_COMPILE)
    HM_CASE(ERROR_JIT_DISABLED)
    HM_CASE(ERROR_IO)
    HM_CASE(ERROR_CACHE_CORRUPT)
    HM_CASE(ERROR_OUT_OF_MEMORY)
    HM_CASE(ERROR_DEVICE_OUT_OF_MEMORY)
    HM_CASE(ERROR_INTERNAL)
#undef HM_CASE
    default:
      return "UNKNOWN";
  }
}

HM_API size_t hm_last_error_message(char* buf, size_t size) {
  const std::string& message = hm::api::t_last_error;
  if (buf != nullptr && size > 0) {
    size_t n = message.size() < size - 1 ? message.size() : size - 1;
    std::memcpy(buf, message.data(), n);
    buf[n] = '\0';
  }
  return message.size();
}

HM_API void hm_clear_last_error(void) { hm::api::t_last_error.clear(); }

}  // extern "C"
