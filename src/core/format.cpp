// The layer format's canonical string (docs/format.md): a robust parser (any input gives a Format
// or HM_ERROR_PARSE) and the printer, plus the derived sizes. Whether a format is *supported* is
// not decided here but by the rules in support.cpp.
#include "core/format.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/checked.hpp"
#include "core/error.hpp"
#include "core/quote.hpp"

namespace hm::core {
namespace {

const char kValidKeys[] = "w, a, c, s, zp, bias, acc, n, k, e";
const char kScaleForms[] =
    "none, tensor, <dtype>:channel, <dtype>:g<K>, <dtype>:b<K>x<N> or <dtype>:g<K>+tensor "
    "(e.g. f16:g128, e4m3:g16+tensor, f32:b128x128)";

class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  [[noreturn]] void error(const std::string& why) const {
    fail(HM_ERROR_PARSE, "cannot parse the format " + quoted(text_, 120) + ": " + why +
                             " (the syntax is in docs/format.md)");
  }

  // A decimal number without sign in [min, max]; `what` names the field for the message.
  int64_t number(const std::string& value, const std::string& what, int64_t min, int64_t max) const {
    if (value.empty() || value.size() > 19) error(what + " " + quoted(value) + " is not a number");
    int64_t n = 0;
    for (char c : value) {
      if (c < '0' || c > '9') error(what + " " + quoted(value) + " is not a decimal number");
      const int digit = c - '0';
      if (digit > max || n > (max - digit) / 10) error(what + " " + quoted(value) + " is larger than " + std::to_string(max));
      n = n * 10 + digit;
    }
    if (n < min) error(what + " " + quoted(value) + " must be at least " + std::to_string(min));
    return n;
  }

  Dtype dtype(const std::string& value, const std::string& key, bool allow_none) const {
    Dtype d;
    try {
      d = Dtype::parse(value);
    } catch (const Error& e) {
      error("field '" + key + "': " + e.message());
    }
    if (d.is_none() && !allow_none) error("field '" + key + "' cannot be none");
    return d;
  }

  void scale(const std::string& value, Format& f) const {
    f.group_k = 0;
    f.group_n = 0;
    if (value == "none" || value == "tensor") {
      f.scale_kind = value == "none" ? ScaleKind::kNone : ScaleKind::kTensor;
      f.scale = Dtype();
      return;
    }
    const size_t colon = value.find(':');
    if (colon == std::string::npos)
      error("field 's' is " + quoted(value) + "; expected " + kScaleForms);
    f.scale = dtype(value.substr(0, colon), "s", false);
    std::string layout = value.substr(colon + 1);
    const int64_t kMax = std::numeric_limits<int32_t>::max();
    if (layout == "channel") {
      f.scale_kind = ScaleKind::kChannel;
    } else if (!layout.empty() && layout[0] == 'g') {
      static const std::string kTensorSuffix = "+tensor";
      f.scale_kind = ScaleKind::kGroup;
      if (layout.size() > kTensorSuffix.size() &&
          layout.compare(layout.size() - kTensorSuffix.size(), kTensorSuffix.size(), kTensorSuffix) == 0) {
        f.scale_kind = ScaleKind::kGroupTensor;
        layout.resize(layout.size() - kTensorSuffix.size());
      }
      f.group_k = static_cast<int32_t>(number(layout.substr(1), "the group size in 's'", 1, kMax));
    } else if (!layout.empty() && layout[0] == 'b') {
      const size_t x = layout.find('x');
      if (x == std::string::npos)
        error("field 's': block scales are written <dtype>:b<K>x<N>, got " + quoted(value));
      f.scale_kind = ScaleKind::kBlock;
      f.group_k = static_cast<int32_t>(number(layout.substr(1, x - 1), "the block size along K in 's'", 1, kMax));
      f.group_n = static_cast<int32_t>(number(layout.substr(x + 1), "the block size along N in 's'", 1, kMax));
    } else {
      error("field 's' has the scale layout " + quoted(layout) + "; expected " + kScaleForms);
    }
  }

  // "e4m3" (one scale per token) or "e4m3:g128" (per token and group of 128 along K).
  void activation(const std::string& value, Format& f) const {
    const size_t colon = value.find(':');
    f.activation = dtype(value.substr(0, colon), "a", false);
    f.act_group_k = 0;
    if (colon == std::string::npos) return;
    const std::string groups = value.substr(colon + 1);
    if (groups.empty() || groups[0] != 'g')
      error("field 'a' is " + quoted(value) +
            "; activation scales are written <dtype>:g<K> (per token and K group, e.g. e4m3:g128)"
            " or left out (per token)");
    f.act_group_k = static_cast<int32_t>(number(groups.substr(1), "the group size in 'a'", 1,
                                                std::numeric_limits<int32_t>::max()));
  }

  Format parse() const {
    Format f;
    std::vector<std::string> seen;
    size_t i = 0;
    while (i < text_.size()) {
      while (i < text_.size() && is_space(text_[i])) ++i;
      size_t end = i;
      while (end < text_.size() && !is_space(text_[end])) ++end;
      if (end == i) break;
      field(text_.substr(i, end - i), f, seen);
      i = end;
    }
    return f;
  }

 private:
  static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
  }

  void field(const std::string& token, Format& f, std::vector<std::string>& seen) const {
    const size_t eq = token.find('=');
    if (eq == std::string::npos)
      error(quoted(token) + " is not a key=value field; fields are " + kValidKeys);
    const std::string key = token.substr(0, eq), value = token.substr(eq + 1);
    static const char* const kKeys[] = {"w", "a", "c", "s", "zp", "bias", "acc", "n", "k", "e"};
    bool known = false;
    for (const char* k : kKeys) known = known || key == k;
    if (!known) error("unknown field " + quoted(key) + "; valid fields are " + kValidKeys);
    for (const std::string& s : seen)
      if (s == key) error("field '" + key + "' appears more than once");
    seen.push_back(key);
    if (value.empty()) error("field '" + key + "' has no value");

    const int64_t kInt64Max = std::numeric_limits<int64_t>::max();
    if (key == "w") f.weight = dtype(value, key, false);
    else if (key == "a") activation(value, f);
    else if (key == "c") f.output = dtype(value, key, false);
    else if (key == "acc") f.accumulator = dtype(value, key, false);
    else if (key == "zp") f.zero_point = dtype(value, key, true);
    else if (key == "s") scale(value, f);
    else if (key == "bias") f.has_bias = number(value, "field 'bias'", 0, 1) == 1;
    else if (key == "n") f.n = number(value, "field 'n'", 0, kInt64Max);
    else if (key == "k") f.k = number(value, "field 'k'", 0, kInt64Max);
    else f.experts = static_cast<int32_t>(number(value, "field 'e'", 1, std::numeric_limits<int32_t>::max()));
  }

  const std::string& text_;
};

}  // namespace

std::string scale_to_string(const Format& f) {
  const std::string dtype = f.scale.name();
  switch (f.scale_kind) {
    case ScaleKind::kNone:
      return "none";
    case ScaleKind::kTensor:
      return "tensor";
    case ScaleKind::kChannel:
      return dtype + ":channel";
    case ScaleKind::kGroup:
      return dtype + ":g" + std::to_string(f.group_k);
    case ScaleKind::kBlock:
      return dtype + ":b" + std::to_string(f.group_k) + "x" + std::to_string(f.group_n);
    case ScaleKind::kGroupTensor:
      return dtype + ":g" + std::to_string(f.group_k) + "+tensor";
  }
  return "invalid(" + std::to_string(static_cast<int>(f.scale_kind)) + ")";
}

std::string Format::to_string() const {
  const std::string act_groups = act_group_k > 0 ? ":g" + std::to_string(act_group_k) : "";
  return "w=" + weight.name() + " a=" + activation.name() + act_groups + " c=" + output.name() +
         " s=" + scale_to_string(*this) + " zp=" + zero_point.name() +
         " bias=" + (has_bias ? "1" : "0") + " acc=" + accumulator.name() +
         " n=" + std::to_string(n) + " k=" + std::to_string(k) + " e=" + std::to_string(experts);
}

Format Format::parse(const std::string& text) { return Parser(text).parse(); }

int64_t Format::k_grouped() const {
  if (!has_group_scales() || group_k <= 0 || k <= 0) return k;
  int64_t out = 0;
  // Only a k within group_k of INT64_MAX overflows; no usable layer is near (rule R2).
  if (__builtin_mul_overflow(groups_k(), static_cast<int64_t>(group_k), &out))
    return std::numeric_limits<int64_t>::max();
  return out;
}

int64_t Format::groups_k() const {
  if (!has_group_scales() || group_k <= 0) return 1;
  if (k <= 0) return 0;
  return k / group_k + (k % group_k != 0 ? 1 : 0);  // no k + group_k - 1: it may overflow
}

int64_t Format::groups_n() const {
  if (scale_kind != ScaleKind::kBlock || group_n <= 0) return n;
  if (n <= 0) return 0;
  return n / group_n + (n % group_n != 0 ? 1 : 0);
}

int64_t Format::activation_groups() const {
  if (act_group_k <= 0) return 1;
  if (k <= 0) return 0;
  return k / act_group_k + (k % act_group_k != 0 ? 1 : 0);
}

std::string shape_limit_problem(const Format& f) {
  std::string out;
  auto over = [&](const char* name, int64_t value, int64_t limit) {
    if (value <= limit) return;
    out += (out.empty() ? "" : ", ") + std::string(name) + "=" + std::to_string(value) +
           " (limit " + std::to_string(limit) + ")";
  };
  over("n", f.n, HM_MAX_N);
  over("k", f.k, HM_MAX_K);
  over("e", f.experts, HM_MAX_EXPERTS);
  if (f.has_group_scales()) over("group_k", f.group_k, HM_MAX_K);
  if (f.scale_kind == ScaleKind::kBlock) over("group_n", f.group_n, HM_MAX_N);
  over("the activation group_k", f.act_group_k, HM_MAX_K);
  return out;
}

CanonicalCounts canonical_counts(const Format& f) {
  HM_REQUIRE(f.n >= 0 && f.k >= 0, HM_ERROR_INVALID_ARGUMENT,
             "the shape n=" + std::to_string(f.n) + " k=" + std::to_string(f.k) + " is negative");
  HM_REQUIRE(f.experts >= 1, HM_ERROR_INVALID_ARGUMENT,
             "experts is " + std::to_string(f.experts) + ", must be at least 1 (1 for a dense layer)");
  HM_REQUIRE(!f.has_group_scales() || f.group_k > 0, HM_ERROR_INVALID_ARGUMENT,
             "the scale kind " + scale_to_string(f) + " needs a group size group_k > 0");
  HM_REQUIRE(f.scale_kind != ScaleKind::kBlock || f.group_n > 0, HM_ERROR_INVALID_ARGUMENT,
             "block scales need a block size group_n > 0, got " + std::to_string(f.group_n));
  const std::string limits = shape_limit_problem(f);
  HM_REQUIRE(limits.empty(), HM_ERROR_INVALID_ARGUMENT,
             "the format is beyond the size limits of humming.h: " + limits +
                 " (its buffer sizes would not fit 64 bits)");
  // Within the limits these products are far below 2^63; they are checked all the same.
  const int64_t e = f.experts;
  CanonicalCounts c;
  c.codes = static_cast<uint64_t>(size_product({e, f.n, f.k}, "the number of codes"));
  switch (f.scale_kind) {
    case ScaleKind::kNone:
    case ScaleKind::kTensor:
      c.scales = 0;
      break;
    case ScaleKind::kChannel:
      c.scales = static_cast<uint64_t>(size_product({e, f.n}, "the number of scales"));
      break;
    case ScaleKind::kGroup:
    case ScaleKind::kBlock:
    case ScaleKind::kGroupTensor:
      c.scales = static_cast<uint64_t>(
          size_product({e, f.groups_n(), f.groups_k()}, "the number of scales"));
      break;
  }
  c.zero_points = f.has_zero_point() ? c.scales : 0;
  c.global_scale = f.has_global_scale() ? e : 0;
  return c;
}

}  // namespace hm::core
