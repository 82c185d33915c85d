// C entry points for layer formats (hm_format_*), validation and the support matrix. Argument
// checks live here; the format itself is hm::core::Format and the rules are in core/support.
#include "api/format.hpp"

#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "api/guard.hpp"
#include "core/arch.hpp"
#include "core/support.hpp"
#include "gemm/family.hpp"

namespace hm::api {

const core::Format& format_of(const hm_format_t* format, const char* name) {
  require_not_null(format, name);
  return format->value;
}

namespace {

core::Format& mutable_format_of(hm_format_t* format) {
  require_not_null(format, "format");
  return format->value;
}

const char kRoles[] =
    "HM_ROLE_WEIGHT (0), HM_ROLE_ACTIVATION (1), HM_ROLE_OUTPUT (2), HM_ROLE_SCALE (3), "
    "HM_ROLE_ZERO_POINT (4) or HM_ROLE_ACCUMULATOR (5)";

core::Dtype& dtype_of_role(core::Format& f, int32_t role) {
  switch (role) {
    case HM_ROLE_WEIGHT:
      return f.weight;
    case HM_ROLE_ACTIVATION:
      return f.activation;
    case HM_ROLE_OUTPUT:
      return f.output;
    case HM_ROLE_SCALE:
      return f.scale;
    case HM_ROLE_ZERO_POINT:
      return f.zero_point;
    case HM_ROLE_ACCUMULATOR:
      return f.accumulator;
    default:
      fail(HM_ERROR_INVALID_ARGUMENT, "'role' is " + std::to_string(role) + "; expected " + kRoles);
  }
}

bool scale_kind_uses_dtype(core::ScaleKind kind) {
  return kind != core::ScaleKind::kNone && kind != core::ScaleKind::kTensor;
}

// Returns a new handle through `out`, which is NULL until the very end (the ABI's rule).
template <typename Make>
hm_status_t create_handle(const char* function, hm_format_t** out, Make&& make) {
  if (out != nullptr) *out = nullptr;
  return api_call(function, [&] {
    require_not_null(out, "out");
    auto handle = std::make_unique<hm_format>();
    handle->value = make();
    *out = handle.release();
  });
}

const std::string& support_matrix_text() {
  static const std::string text = core::render_support_matrix(gemm::family_names);  // fixed per build
  return text;
}

}  // namespace
}  // namespace hm::api

using hm::fail;
using hm::api::format_of;
using hm::api::mutable_format_of;
using hm::api::require_not_null;

extern "C" {

HM_API hm_status_t hm_format_create(hm_format_t** out) {
  return hm::api::create_handle(__func__, out, [] { return hm::core::Format(); });
}

HM_API hm_status_t hm_format_parse(const char* text, hm_format_t** out) {
  return hm::api::create_handle(__func__, out, [&] {
    require_not_null(text, "text");
    return hm::core::Format::parse(text);
  });
}

HM_API hm_status_t hm_format_clone(const hm_format_t* format, hm_format_t** out) {
  return hm::api::create_handle(__func__, out, [&] { return format_of(format); });
}

HM_API void hm_format_destroy(hm_format_t* format) { delete format; }

HM_API hm_status_t hm_format_to_string(const hm_format_t* format, char* buf, size_t size,
                                       size_t* length) {
  return HM_API_CALL(hm::api::copy_out_string(format_of(format).to_string(), buf, size, length));
}

HM_API int32_t hm_format_equal(const hm_format_t* a, const hm_format_t* b) {
  if (a == nullptr || b == nullptr) return 0;
  try {
    return a->value == b->value ? 1 : 0;
  } catch (...) {  // only out of memory can get here; "not known to be equal"
    return 0;
  }
}

HM_API hm_status_t hm_format_set_dtype(hm_format_t* format, int32_t role, hm_dtype_t dtype) {
  return HM_API_CALL({
    hm::core::Format& f = mutable_format_of(format);
    hm::core::Dtype& slot = hm::api::dtype_of_role(f, role);
    const hm::core::Dtype d = hm::core::Dtype::from_code(dtype);
    if (d.is_none() && role != HM_ROLE_SCALE && role != HM_ROLE_ZERO_POINT)
      fail(HM_ERROR_INVALID_ARGUMENT,
           "'dtype' is HM_DTYPE_NONE; only HM_ROLE_SCALE and HM_ROLE_ZERO_POINT may be none");
    if (role == HM_ROLE_SCALE && !d.is_none() && !hm::api::scale_kind_uses_dtype(f.scale_kind))
      fail(HM_ERROR_INVALID_STATE,
           "the scale kind is " + hm::core::scale_to_string(f) +
               ", which has no scale dtype; call hm_format_set_scale() with a channel, group or "
               "block kind first");
    // A channel, group or block kind without a dtype has no canonical string ("s=none:g128"
    // does not parse): no scales at all is a kind of its own.
    if (role == HM_ROLE_SCALE && d.is_none() && hm::api::scale_kind_uses_dtype(f.scale_kind))
      fail(HM_ERROR_INVALID_STATE,
           "the scale kind is " + hm::core::scale_to_string(f) +
               ", which needs a scale dtype; for no scales call hm_format_set_scale() with "
               "HM_SCALE_NONE (or HM_SCALE_TENSOR for one f32 scale per tensor)");
    slot = d;
  });
}

HM_API hm_status_t hm_format_get_dtype(const hm_format_t* format, int32_t role, hm_dtype_t* out) {
  return HM_API_CALL({
    hm::core::Format f = format_of(format);
    require_not_null(out, "out");
    *out = hm::api::dtype_of_role(f, role).code();
  });
}

HM_API hm_status_t hm_format_set_scale(hm_format_t* format, int32_t kind, int32_t group_k,
                                       int32_t group_n) {
  return HM_API_CALL({
    hm::core::Format& f = mutable_format_of(format);
    if (kind < HM_SCALE_NONE || kind > HM_SCALE_GROUP_TENSOR)
      fail(HM_ERROR_INVALID_ARGUMENT,
           "'kind' is " + std::to_string(kind) +
               "; expected HM_SCALE_NONE (0), _CHANNEL (1), _GROUP (2), _BLOCK (3), _TENSOR (4) or "
               "_GROUP_TENSOR (5)");
    const bool uses_k = kind == HM_SCALE_GROUP || kind == HM_SCALE_BLOCK || kind == HM_SCALE_GROUP_TENSOR;
    const bool uses_n = kind == HM_SCALE_BLOCK;
    if (uses_k && group_k <= 0)
      fail(HM_ERROR_INVALID_ARGUMENT, "'group_k' is " + std::to_string(group_k) +
                                          "; grouped and block scales need a group size > 0 (e.g. 128)");
    if (!uses_k && group_k != 0)
      fail(HM_ERROR_INVALID_ARGUMENT, "'group_k' is " + std::to_string(group_k) +
                                          "; pass 0 for scale kinds without groups along K");
    if (uses_n && group_n <= 0)
      fail(HM_ERROR_INVALID_ARGUMENT, "'group_n' is " + std::to_string(group_n) +
                                          "; block scales need a block size along N > 0 (e.g. 128)");
    if (!uses_n && group_n != 0)
      fail(HM_ERROR_INVALID_ARGUMENT,
           "'group_n' is " + std::to_string(group_n) + "; pass 0 for scale kinds other than HM_SCALE_BLOCK");
    f.scale_kind = static_cast<hm::core::ScaleKind>(kind);
    f.group_k = group_k;
    f.group_n = group_n;
    if (!hm::api::scale_kind_uses_dtype(f.scale_kind))
      f.scale = hm::core::Dtype();
    else if (f.scale.is_none())  // coming from NONE / TENSOR: the default format's scale dtype
      f.scale = hm::core::Format().scale;
  });
}

HM_API hm_status_t hm_format_get_scale(const hm_format_t* format, int32_t* kind, int32_t* group_k,
                                       int32_t* group_n) {
  return HM_API_CALL({
    const hm::core::Format& f = format_of(format);
    require_not_null(kind, "kind");
    require_not_null(group_k, "group_k");
    require_not_null(group_n, "group_n");
    *kind = static_cast<int32_t>(f.scale_kind);
    *group_k = f.group_k;
    *group_n = f.group_n;
  });
}

HM_API hm_status_t hm_format_set_shape(hm_format_t* format, int64_t n, int64_t k, int32_t experts) {
  return HM_API_CALL({
    hm::core::Format& f = mutable_format_of(format);
    if (n < 0) fail(HM_ERROR_INVALID_ARGUMENT, "'n' is " + std::to_string(n) + "; it must be >= 0");
    if (k < 0) fail(HM_ERROR_INVALID_ARGUMENT, "'k' is " + std::to_string(k) + "; it must be >= 0");
    if (experts < 1)
      fail(HM_ERROR_INVALID_ARGUMENT,
           "'experts' is " + std::to_string(experts) + "; it must be >= 1 (1 for a dense layer)");
    f.n = n;
    f.k = k;
    f.experts = experts;
  });
}

HM_API hm_status_t hm_format_get_shape(const hm_format_t* format, int64_t* n, int64_t* k,
                                       int32_t* experts) {
  return HM_API_CALL({
    const hm::core::Format& f = format_of(format);
    require_not_null(n, "n");
    require_not_null(k, "k");
    require_not_null(experts, "experts");
    *n = f.n;
    *k = f.k;
    *experts = f.experts;
  });
}

HM_API hm_status_t hm_format_set_bias(hm_format_t* format, int32_t has_bias) {
  return HM_API_CALL({
    hm::core::Format& f = mutable_format_of(format);
    if (has_bias != 0 && has_bias != 1)
      fail(HM_ERROR_INVALID_ARGUMENT, "'has_bias' is " + std::to_string(has_bias) + "; pass 0 or 1");
    f.has_bias = has_bias == 1;
  });
}

HM_API hm_status_t hm_format_get_bias(const hm_format_t* format, int32_t* has_bias) {
  return HM_API_CALL({
    const hm::core::Format& f = format_of(format);
    require_not_null(has_bias, "has_bias");
    *has_bias = f.has_bias ? 1 : 0;
  });
}

HM_API hm_status_t hm_format_set_activation_groups(hm_format_t* format, int32_t group_k) {
  return HM_API_CALL({
    hm::core::Format& f = mutable_format_of(format);
    if (group_k < 0)
      fail(HM_ERROR_INVALID_ARGUMENT, "'group_k' is " + std::to_string(group_k) +
                                          "; pass 0 (one scale per token) or a group size");
    f.act_group_k = group_k;
  });
}

HM_API hm_status_t hm_format_get_activation_groups(const hm_format_t* format, int32_t* group_k) {
  return HM_API_CALL({
    const hm::core::Format& f = format_of(format);
    require_not_null(group_k, "group_k");
    *group_k = f.act_group_k;
  });
}

HM_API hm_status_t hm_format_validate(const hm_format_t* format, const char* arch) {
  return HM_API_CALL({
    const hm::core::Format& f = format_of(format);
    std::optional<hm::core::Arch> target;
    if (arch != nullptr) target = hm::core::parse_arch(arch);
    hm::core::validate(f, target);
  });
}

HM_API hm_status_t hm_format_kernels(const hm_format_t* format, const char* arch, char* buf,
                                     size_t size, size_t* length) {
  return HM_API_CALL({
    const hm::core::Format& f = format_of(format);
    std::optional<hm::core::Arch> target;
    if (arch != nullptr) target = hm::core::parse_arch(arch);
    std::string names;
    for (const std::string& name : hm::gemm::families_running(f, target))
      names += (names.empty() ? "" : " ") + name;
    hm::api::copy_out_string(names, buf, size, length);
  });
}

HM_API hm_status_t hm_support_matrix(char* buf, size_t size, size_t* length) {
  return HM_API_CALL(hm::api::copy_out_string(hm::api::support_matrix_text(), buf, size, length));
}

HM_API void hm_canonical_sizes_init(hm_canonical_sizes_t* sizes) {
  if (sizes == nullptr) return;
  std::memset(sizes, 0, sizeof *sizes);
  sizes->struct_size = sizeof *sizes;
}

HM_API hm_status_t hm_format_canonical_sizes(const hm_format_t* format, hm_canonical_sizes_t* out) {
  return HM_API_CALL({
    const hm::core::Format& f = format_of(format);
    require_not_null(out, "out");
    // Every field is in the first released layout, which is today's.
    hm::api::require_struct_size(out->struct_size, sizeof(hm_canonical_sizes_t), "out");
    const hm::core::CanonicalCounts c = hm::core::canonical_counts(f);
    out->codes = c.codes;
    out->scales = c.scales;
    out->zero_points = c.zero_points;
    out->global_scale = c.global_scale;
    hm::api::report_filled(out);
  });
}

}  // extern "C"
