// The one internal error type. Library code throws hm::Error with a status from humming.h and a
// message that names what was wrong and what to do; src/api/ turns it into a status code plus the
// thread-local message. Nothing else may cross the C ABI.
#pragma once

#include <exception>
#include <string>
#include <utility>

#include "humming.h"

namespace hm {

class Error : public std::exception {
 public:
  Error(hm_status_t status, std::string message) : status_(status), message_(std::move(message)) {}
  hm_status_t status() const noexcept { return status_; }
  const char* what() const noexcept override { return message_.c_str(); }
  const std::string& message() const noexcept { return message_; }

 private:
  hm_status_t status_;
  std::string message_;
};

[[noreturn]] inline void fail(hm_status_t status, std::string message) {
  throw Error(status, std::move(message));
}

// Throws Error(status, message) when `condition` is false. The message is built only on failure.
#define HM_REQUIRE(condition, status, message)              \
  do {                                                      \
    if (!(condition)) ::hm::fail((status), (message));      \
  } while (0)

}  // namespace hm
