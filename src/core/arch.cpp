// GPU architecture naming and parsing (see arch.hpp).
#include "core/arch.hpp"

#include "core/error.hpp"
#include "core/quote.hpp"

namespace hm::core {
namespace {

// Compute capabilities that have an arch-specific ("a") target in the CUDA 13 toolkit. 10.1 is
// Thor as drivers before CUDA 13 report it (11.0 since).
constexpr int kArchSpecific[] = {90, 100, 101, 103, 110, 120, 121};

const char kAcceptedForms[] =
    "expected sm_<major><minor>[a|f] such as sm_80, sm_90a or sm_120a (also accepted: sm90a, "
    "90a, compute_90a, 9.0)";

[[noreturn]] void reject(const std::string& text, const std::string& reason) {
  fail(HM_ERROR_PARSE,
       "cannot parse the architecture " + quoted(text, 40) + ": " + reason + "; " + kAcceptedForms);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!is_digit(c)) return false;
  return true;
}

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool strip_prefix(std::string& s, const std::string& prefix) {
  if (s.compare(0, prefix.size(), prefix) != 0) return false;
  s.erase(0, prefix.size());
  return true;
}

std::string suffix_text(char suffix) { return suffix ? std::string(1, suffix) : std::string(); }

}  // namespace

std::string Arch::name() const {
  return "sm_" + std::to_string(compute_capability()) + suffix_text(suffix);
}

std::string Arch::virtual_name() const {
  return "compute_" + std::to_string(compute_capability()) + suffix_text(suffix);
}

Arch native_arch(int cc_major, int cc_minor) {
  HM_REQUIRE(cc_major >= 1 && cc_major <= 99 && cc_minor >= 0 && cc_minor <= 9,
             HM_ERROR_INVALID_ARGUMENT,
             "invalid compute capability " + std::to_string(cc_major) + "." +
                 std::to_string(cc_minor) + " (major 1..99, minor 0..9)");
  Arch arch{cc_major, cc_minor, '\0'};
  for (int cc : kArchSpecific)
    if (cc == arch.compute_capability()) arch.suffix = 'a';
  return arch;
}

Arch parse_arch(const std::string& text) {
  std::string s;
  for (char c : text)
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') s += lower(c);
  if (s.empty()) reject(text, "it is empty");
  (void)(strip_prefix(s, "compute_") || strip_prefix(s, "compute") || strip_prefix(s, "sm_") ||
         strip_prefix(s, "sm"));

  Arch arch;
  if (!s.empty() && (s.back() == 'a' || s.back() == 'f')) {
    arch.suffix = s.back();
    s.pop_back();
  }
  if (s.empty()) reject(text, "there is no compute capability number");
  const size_t dot = s.find('.');
  if (dot != std::string::npos) {  // "9.0": major.minor
    const std::string major = s.substr(0, dot), minor = s.substr(dot + 1);
    if (!all_digits(major) || major.size() > 2 || !all_digits(minor) || minor.size() != 1)
      reject(text, "expected <major>.<minor> with a one- or two-digit major and a one-digit minor");
    arch.major = std::stoi(major);
    arch.minor = minor[0] - '0';
  } else {
    if (!all_digits(s)) reject(text, quoted(s) + " is not a compute capability number");
    if (s.size() < 2 || s.size() > 3)
      reject(text, "the number needs the major and the minor version (90 for 9.0, 121 for 12.1)");
    const int number = std::stoi(s);
    arch.major = number / 10;
    arch.minor = number % 10;
  }
  if (arch.major < 1) reject(text, "the major version must be at least 1");
  if (arch.suffix == 'a' && arch.compute_capability() < 90)
    reject(text, "arch-specific 'a' targets exist from sm_90a on; use sm_" +
                     std::to_string(arch.compute_capability()));
  if (arch.suffix == 'f' && arch.compute_capability() < 100)
    reject(text, "family 'f' targets exist from sm_100f on");
  return arch;
}

const std::vector<Arch>& known_archs() {
  static const std::vector<Arch> archs = [] {
    std::vector<Arch> out;
    for (int cc : {75, 80, 86, 87, 89, 90, 100, 103, 110, 120, 121})
      out.push_back(native_arch(cc / 10, cc % 10));
    return out;
  }();
  return archs;
}

}  // namespace hm::core
