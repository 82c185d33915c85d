// Role lookup, checks and element readers shared by the converters.
#include "schema/tensors.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "core/quote.hpp"
#include "quant/scalar_codec.hpp"

namespace hm::schema {

namespace {

bool ends_with_role(const std::string& name, const std::string& role, char separator) {
  if (name == role) return true;
  if (name.size() <= role.size()) return false;
  return name.compare(name.size() - role.size(), role.size(), role) == 0 &&
         name[name.size() - role.size() - 1] == separator;
}

std::string role_list(const SchemeRoles& r) {
  std::string s;
  for (const std::string& role : r.roles) s += (s.empty() ? "" : ", ") + role;
  return s;
}

}  // namespace

LayerTensors::LayerTensors(Scheme scheme, const std::vector<io::TensorView>& tensors)
    : scheme_(scheme) {
  const SchemeRoles& r = scheme_roles(scheme);
  const io::TensorView* prefix_from = nullptr;
  for (const io::TensorView& t : tensors) {
    // A layer tensor without elements is never valid, and its dimensions are not bounded by its
    // bytes ([2^31, 0] holds nothing): refused here, before any converter divides by a dimension
    // or allocates from one. Every dimension of what remains is at most its element count.
    if (t.numel() == 0)
      fail(HM_ERROR_INVALID_ARGUMENT, tensor_label(t) + " (" + t.dtype + " " + t.shape_text() +
                                          ") has no elements; a layer's tensors are never empty");
    const std::string* match = nullptr;
    for (const std::string& role : r.roles)
      if (ends_with_role(t.name, role, r.separator) && (!match || role.size() > match->size()))
        match = &role;
    if (!match)
      fail(HM_ERROR_INVALID_ARGUMENT, tensor_label(t) + " is not a tensor of a " +
                                          scheme_name(scheme) +
                                          " layer; its name must end in one of: " + role_list(r));
    for (const auto& [role, other] : by_role_)
      if (role == *match)
        fail(HM_ERROR_INVALID_ARGUMENT, tensor_label(t) + " and " + tensor_label(*other) +
                                            " both have the role '" + role +
                                            "'; pass one layer at a time");
    by_role_.emplace_back(*match, &t);
    if (t.name.size() > match->size()) {
      const std::string prefix = t.name.substr(0, t.name.size() - match->size() - 1);
      if (prefix_from && prefix != prefix_)
        fail(HM_ERROR_INVALID_ARGUMENT,
             tensor_label(t) + " belongs to layer " + core::quoted(prefix, 120) + " but " +
                 tensor_label(*prefix_from) + " to layer " + core::quoted(prefix_, 120) +
                 "; pass the tensors of one layer at a time");
      prefix_ = prefix;
      prefix_from = &t;
    }
  }
}

std::string LayerTensors::full_name(const std::string& role) const {
  if (prefix_.empty()) return role;
  return prefix_ + scheme_roles(scheme_).separator + role;
}

const io::TensorView* LayerTensors::find(const std::string& role) const {
  for (const auto& [r, t] : by_role_)
    if (r == role) return t;
  return nullptr;
}

const io::TensorView& LayerTensors::require(const std::string& role) const {
  const io::TensorView* t = find(role);
  if (!t)
    fail(HM_ERROR_INVALID_ARGUMENT,
         std::string("a ") + scheme_name(scheme_) + " layer needs its '" + role + "' tensor" +
             (prefix_.empty() ? std::string() : " " + core::quoted(full_name(role), 160)) +
             ", and the checkpoint has none");
  return *t;
}

std::string tensor_label(const io::TensorView& t) { return "tensor " + core::quoted(t.name, 120); }

void bad_tensor(const io::TensorView& t, const std::string& detail, hm_status_t status) {
  fail(status, tensor_label(t) + " (" + t.dtype + " " + t.shape_text() + "): " + detail);
}

void expect_dtype(const io::TensorView& t, std::initializer_list<const char*> dtypes) {
  std::string list;
  for (const char* d : dtypes) {
    if (t.dtype == d) return;
    list += (list.empty() ? "" : " or ") + std::string(d);
  }
  bad_tensor(t, "the dtype must be " + list);
}

void expect_ndim(const io::TensorView& t, size_t ndim) {
  if (t.shape.size() != ndim) bad_tensor(t, "expected " + std::to_string(ndim) + " dimensions");
}

void expect_shape(const io::TensorView& t, const std::vector<int64_t>& shape) {
  if (t.shape == shape) return;
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  bad_tensor(t, "expected the shape " + s + "] from the layer's other tensors");
}

core::Dtype float_dtype_of(const io::TensorView& t) {
  if (t.dtype == "F32") return core::Dtype::from_code(HM_DTYPE_F32);
  if (t.dtype == "F16") return core::Dtype::from_code(HM_DTYPE_F16);
  if (t.dtype == "BF16") return core::Dtype::from_code(HM_DTYPE_BF16);
  if (t.dtype == "F8_E4M3") return core::Dtype::from_code(HM_DTYPE_E4M3);
  if (t.dtype == "F8_E5M2") return core::Dtype::from_code(HM_DTYPE_E5M2);
  bad_tensor(t, "expected a float dtype (F32, F16, BF16, F8_E4M3 or F8_E5M2)");
}

std::vector<float> read_floats(const io::TensorView& t) {
  const core::Dtype d = float_dtype_of(t);
  const int64_t n = t.numel();
  std::vector<float> out(static_cast<size_t>(n));
  if (t.dtype == "F32") {
    std::memcpy(out.data(), t.data, static_cast<size_t>(n) * 4);
  } else if (t.dtype == "F16" || t.dtype == "BF16") {
    const bool half = t.dtype == "F16";
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      if (half) {
        out[i] = quant::float_from_half(h);
      } else {
        const uint32_t bits = uint32_t{h} << 16;
        std::memcpy(&out[i], &bits, 4);
      }
    }
  } else {
    float table[256];
    for (uint32_t c = 0; c < 256; ++c) table[c] = static_cast<float>(d.decode(c));
    for (int64_t i = 0; i < n; ++i) out[i] = table[t.data[i]];
  }
  return out;
}

std::string element_label(const io::TensorView& t, int64_t flat) {
  std::string index;
  int64_t rest = flat;
  for (size_t d = t.shape.size(); d-- > 0;) {
    const int64_t extent = std::max<int64_t>(1, t.shape[d]);
    index = std::to_string(rest % extent) + (index.empty() ? "" : ", ") + index;
    rest /= extent;
  }
  return "element " + std::to_string(flat) + (t.shape.size() > 1 ? " ([" + index + "])" : "");
}

std::vector<float> read_scales(const io::TensorView& t) {
  std::vector<float> v = read_floats(t);
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      bad_tensor(t,
                 element_label(t, static_cast<int64_t>(i)) + " is " +
                     (std::isnan(v[i]) ? "NaN" : "infinite") +
                     "; a scale must be finite (a damaged or mis-typed checkpoint)",
                 HM_ERROR_NON_FINITE);
  return v;
}

std::vector<int64_t> read_integers(const io::TensorView& t) {
  int bytes = 0;
  bool is_signed = true;
  if (t.dtype == "I8")
    bytes = 1;
  else if (t.dtype == "I16")
    bytes = 2;
  else if (t.dtype == "I32")
    bytes = 4;
  else if (t.dtype == "I64")
    bytes = 8;
  else if (t.dtype == "U8")
    bytes = 1, is_signed = false;
  else if (t.dtype == "U16")
    bytes = 2, is_signed = false;
  else if (t.dtype == "U32")
    bytes = 4, is_signed = false;
  else
    bad_tensor(t, "expected an integer dtype");
  const int64_t n = t.numel();
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    uint64_t u = 0;
    for (int b = bytes - 1; b >= 0; --b) u = (u << 8) | t.data[i * bytes + b];
    if (is_signed && bytes < 8 && (u >> (8 * bytes - 1)) & 1) u |= ~uint64_t{0} << (8 * bytes);
    out[i] = static_cast<int64_t>(u);
  }
  return out;
}

namespace {
thread_local int t_thread_limit = 0;  // 0: no limit
}  // namespace

ThreadLimit::ThreadLimit(int threads) : previous_(t_thread_limit) {
  t_thread_limit = std::max(1, threads);
}
ThreadLimit::~ThreadLimit() { t_thread_limit = previous_; }

int usable_threads() { return t_thread_limit > 0 ? t_thread_limit : core::usable_cpus(); }

}  // namespace hm::schema
