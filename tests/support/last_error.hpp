// The calling thread's last error message from the C ABI, for test failure messages. One copy
// for every test suite (host, api, gpu).
#pragma once

#include <cstddef>
#include <string>

#include "humming.h"

namespace hm::test {

// The whole message, whatever its length ("" when the thread has none).
inline std::string last_error() {
  const size_t n = hm_last_error_message(nullptr, 0);
  std::string s(n, '\0');
  if (n) hm_last_error_message(&s[0], n + 1);
  return s;
}

}  // namespace hm::test
