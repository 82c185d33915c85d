// Shared helpers of the `humming` command. The command is a client of the public C API only
// (include/humming.h), so it exercises exactly what users get.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/quote.hpp"  // header-only: the library's own quoting of user text in messages
#include "humming.h"

namespace cli {

// User text in a message, with control bytes escaped (paths and values may hold anything).
inline std::string quoted(const std::string& text) {
  return hm::core::quoted(text, hm::core::kQuotedPathBytes);
}

// `text` as a decimal integer in [min, max]; anything else (not a number, trailing text, out of
// range) throws a Failure naming --option and the range: values are never truncated.
int64_t parse_integer(const std::string& text, const std::string& option, int64_t min,
                      int64_t max);

// The calling thread's last library error message.
inline std::string last_error() {
  size_t n = hm_last_error_message(nullptr, 0);
  std::string s(n, '\0');
  if (n) hm_last_error_message(&s[0], n + 1);
  return s;
}

// Thrown by check(); main() prints it and exits with 1.
struct Failure {
  std::string message;
};

inline void check(hm_status_t status, const char* what) {
  if (status != HM_SUCCESS)
    throw Failure{std::string(what) + " failed: " + hm_status_name(status) + ": " + last_error()};
}

// "--name value" / "--name=value" options after the subcommand.
class Args {
 public:
  Args(int argc, char** argv, int first);
  // Returns the option's value or `fallback`; remembers that the option is known.
  std::string get(const std::string& name, const std::string& fallback);
  bool flag(const std::string& name);
  // Words before the first option ("convert IN_DIR OUT_DIR"); finish() refuses them unless
  // this was called.
  std::vector<std::string> positionals();
  // Fails on any option that no get()/flag() asked for (typos are errors, not ignored).
  void finish() const;

 private:
  std::vector<std::pair<std::string, std::string>> options_;
  std::vector<std::string> known_;
  std::vector<std::string> positionals_;
  bool positionals_taken_ = false;
};

int cmd_info(Args& args);
int cmd_support(Args& args);
int cmd_compile(Args& args);
int cmd_demo(Args& args);
int cmd_convert(Args& args);
int cmd_cache(Args& args);

}  // namespace cli
