// Quoting user text inside error messages: the text may be anything (a fuzzed string, binary
// garbage), and the message must stay one readable line of bounded length.
#pragma once

#include <cstddef>
#include <string>

namespace hm::core {

// Paths are quoted whole up to this many bytes (cache entries run to ~150).
constexpr size_t kQuotedPathBytes = 400;

// 'text' with printable ASCII kept and every other byte written as \xNN, cut after max_bytes.
inline std::string quoted(const std::string& text, size_t max_bytes = 60) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "'";
  for (size_t i = 0; i < text.size() && i < max_bytes; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (text.size() > max_bytes) out += "...";
  return out + "'";
}

}  // namespace hm::core
