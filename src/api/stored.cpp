// C entry points for reading converted layers back (hm_stored_model_*, hm_stored_layer_*): the
// reader is src/schema/stored.cpp.
#include "schema/stored.hpp"

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>

#include "api/format.hpp"
#include "api/guard.hpp"

static_assert(offsetof(hm_stored_layer_info_t, struct_size) == 0, "struct_size comes first");

struct hm_stored_model {
  explicit hm_stored_model(const std::string& path) : model(path) {}
  hm::schema::StoredModel model;
};

struct hm_stored_layer {
  hm::schema::StoredLayer layer;
};

namespace {

using hm::api::require_not_null;
using hm::api::require_struct_size;

constexpr size_t kStoredInfoSize = sizeof(hm_stored_layer_info_t);  // the first release's

}  // namespace

extern "C" {

HM_API hm_status_t hm_stored_model_open(const char* path, hm_stored_model_t** out) {
  if (out != nullptr) *out = nullptr;
  return HM_API_CALL({
    require_not_null(out, "out");
    require_not_null(path, "path");
    *out = std::make_unique<hm_stored_model>(path).release();
  });
}

HM_API void hm_stored_model_destroy(hm_stored_model_t* model) { delete model; }

HM_API hm_status_t hm_stored_model_layer_count(const hm_stored_model_t* model, size_t* count) {
  if (count != nullptr) *count = 0;
  return HM_API_CALL({
    require_not_null(model, "model");
    require_not_null(count, "count");
    *count = model->model.layer_names().size();
  });
}

HM_API hm_status_t hm_stored_model_layer_name(const hm_stored_model_t* model, size_t index,
                                              const char** name) {
  if (name != nullptr) *name = nullptr;
  return HM_API_CALL({
    require_not_null(model, "model");
    require_not_null(name, "name");
    const auto& names = model->model.layer_names();
    if (index >= names.size())
      hm::fail(HM_ERROR_INVALID_ARGUMENT, "'index' is " + std::to_string(index) +
                                              "; the model has " +
                                              std::to_string(names.size()) + " layers");
    *name = names[index].c_str();
  });
}

HM_API hm_status_t hm_stored_model_layer_format(const hm_stored_model_t* model, const char* name,
                                                hm_format_t** out) {
  if (out != nullptr) *out = nullptr;
  return HM_API_CALL({
    require_not_null(model, "model");
    require_not_null(name, "name");
    require_not_null(out, "out");
    auto f = std::make_unique<hm_format>();
    f->value = model->model.format(name);
    *out = f.release();
  });
}

HM_API hm_status_t hm_stored_model_read(const hm_stored_model_t* model, const char* name,
                                        hm_stored_layer_t** out) {
  if (out != nullptr) *out = nullptr;
  return HM_API_CALL({
    require_not_null(model, "model");
    require_not_null(name, "name");
    require_not_null(out, "out");
    auto layer = std::make_unique<hm_stored_layer>();
    layer->layer = model->model.read(name);
    *out = layer.release();
  });
}

HM_API void hm_stored_layer_destroy(hm_stored_layer_t* layer) { delete layer; }

HM_API hm_status_t hm_stored_layer_format(const hm_stored_layer_t* layer, hm_format_t** out) {
  if (out != nullptr) *out = nullptr;
  return HM_API_CALL({
    require_not_null(layer, "layer");
    require_not_null(out, "out");
    auto f = std::make_unique<hm_format>();
    f->value = layer->layer.format;
    *out = f.release();
  });
}

HM_API void hm_stored_layer_info_init(hm_stored_layer_info_t* info) {
  if (info == nullptr) return;
  std::memset(info, 0, sizeof *info);
  info->struct_size = sizeof *info;
  info->packed.struct_size = sizeof info->packed;
}

HM_API hm_status_t hm_stored_layer_info(const hm_stored_layer_t* layer,
                                        hm_stored_layer_info_t* info) {
  return HM_API_CALL({
    require_not_null(layer, "layer");
    require_not_null(info, "info");
    require_struct_size(info->struct_size, kStoredInfoSize, "info");
    // The buffers belong to the layer; the C struct has non-const pointers so that it passes
    // straight to hm_unpack (which only reads them).
    auto& l = const_cast<hm::schema::StoredLayer&>(layer->layer);
    auto data = [](auto& v) { return v.empty() ? nullptr : v.data(); };
    hm_packed_weight_t p;
    std::memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.weight = data(l.weight);
    p.scales = data(l.scales);
    p.zero_points = data(l.zero_points);
    p.global_scale = data(l.global_scale);
    info->packed = p;
    info->bias = data(l.bias);
    info->k_permutation = data(l.k_permutation);
    info->note = l.note.empty() ? nullptr : l.note.c_str();
    hm::api::report_filled(info);
  });
}

}  // extern "C"
