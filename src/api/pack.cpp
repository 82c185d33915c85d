// C entry points for the standard layout: packed buffer sizes, hm_pack and hm_unpack. Argument
// checks live here; the layout itself is src/quant/layout.* (docs/layout.md).
#include <cstring>

#include "api/canonical.hpp"
#include "api/format.hpp"
#include "api/guard.hpp"
#include "quant/layout.hpp"

namespace {

using hm::api::canonical_view;
using hm::api::format_of;
using hm::api::require_not_null;
using hm::api::require_struct_size;

// The canonical buffers go through the shared view (api/canonical.hpp); packed ones are viewed
// here. struct_size must cover today's layout, the first released one.
hm::quant::PackedWeight packed(const hm_packed_weight_t* p, const char* name) {
  require_not_null(p, name);
  require_struct_size(p->struct_size, sizeof(hm_packed_weight_t), name);
  hm::quant::PackedWeight w;
  w.weight = p->weight;
  w.scales = p->scales;
  w.zero_points = p->zero_points;
  w.global_scale = p->global_scale;
  return w;
}

}  // namespace

extern "C" {

HM_API void hm_packed_sizes_init(hm_packed_sizes_t* sizes) {
  if (sizes == nullptr) return;
  std::memset(sizes, 0, sizeof *sizes);
  sizes->struct_size = sizeof *sizes;
}

HM_API void hm_packed_weight_init(hm_packed_weight_t* weight) {
  if (weight == nullptr) return;
  std::memset(weight, 0, sizeof *weight);
  weight->struct_size = sizeof *weight;
}

HM_API hm_status_t hm_format_packed_sizes(const hm_format_t* format, hm_packed_sizes_t* out) {
  return HM_API_CALL({
    const hm::core::Format& f = format_of(format);
    require_not_null(out, "out");
    require_struct_size(out->struct_size, sizeof(hm_packed_sizes_t), "out");
    const hm::quant::PackedShape s = hm::quant::packed_shape(f);
    out->weight = s.weight_bytes;
    out->scales = s.scale_bytes;
    out->zero_points = s.zero_point_bytes;
    out->global_scale = s.global_scale_bytes;
    out->n_padded = s.n_padded;
    out->k_padded = s.k_padded;
    hm::api::report_filled(out);
  });
}

HM_API hm_status_t hm_pack(const hm_format_t* format, const hm_canonical_weight_t* in,
                           const hm_packed_weight_t* out) {
  return HM_API_CALL({
    const hm::core::Format& f = format_of(format);
    hm::quant::pack(f, hm::quant::ConstCanonicalWeight(canonical_view(in, "in")), packed(out, "out"));
  });
}

HM_API hm_status_t hm_unpack(const hm_format_t* format, const hm_packed_weight_t* in,
                             const hm_canonical_weight_t* out) {
  return HM_API_CALL({
    const hm::core::Format& f = format_of(format);
    const hm::quant::ConstPackedWeight packed_in(packed(in, "in"));
    hm::quant::unpack(f, packed_in, canonical_view(out, "out"));
  });
}

}  // extern "C"
