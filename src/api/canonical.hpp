// Views of the C struct hm_canonical_weight_t as the quantizer's / layout's buffer structs, with
// the struct_size check every entry point needs (hm_quantize, hm_dequantize, hm_pack, hm_unpack).
#pragma once

#include "api/guard.hpp"
#include "quant/quantize.hpp"

namespace hm::api {

// struct_size must cover today's layout, the first released one.
inline quant::CanonicalWeight canonical_view(const hm_canonical_weight_t* w, const char* name) {
  require_not_null(w, name);
  require_struct_size(w->struct_size, sizeof(hm_canonical_weight_t), name);
  quant::CanonicalWeight view;
  view.codes = w->codes;
  view.scales = w->scales;
  view.zero_points = w->zero_points;
  view.global_scale = w->global_scale;
  return view;
}

}  // namespace hm::api
