// Environment variables: the one reader and the one parser of boolean variables (issue 16:
// HUMMING_DISABLE_JIT=false used to mean "on" in one place and "off" in another).
#pragma once

#include <string>

namespace hm::core {

// The variable's value, or "" when it is unset.
std::string env_text(const char* name);

// A boolean variable: unset, "", 0, false, no, off mean false; 1, true, yes, on mean true (any
// case). Anything else throws HM_ERROR_INVALID_ARGUMENT naming the variable and its value, so a
// typo is reported instead of silently taken either way.
bool env_bool(const char* name);

// The same rule for text from elsewhere; false when `text` is none of the spellings above.
bool parse_bool(const std::string& text, bool* value);

}  // namespace hm::core
