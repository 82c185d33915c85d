#include "core/env.hpp"

#include <cctype>
#include <cstdlib>

#include "core/error.hpp"
#include "core/quote.hpp"

namespace hm::core {

std::string env_text(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::string(value) : std::string();
}

bool parse_bool(const std::string& text, bool* value) {
  std::string t = text;
  for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t.empty() || t == "0" || t == "false" || t == "no" || t == "off") {
    *value = false;
    return true;
  }
  if (t == "1" || t == "true" || t == "yes" || t == "on") {
    *value = true;
    return true;
  }
  return false;
}

bool env_bool(const char* name) {
  const std::string text = env_text(name);
  bool value = false;
  if (!parse_bool(text, &value))
    fail(HM_ERROR_INVALID_ARGUMENT,
         std::string(name) + " is " + quoted(text) +
             ", which is neither on (1, true, yes, on) nor off (0, false, no, off, or empty); set "
             "one of those or unset it");
  return value;
}

}  // namespace hm::core
