// C entry points for checkpoint conversion (hm_convert_layer, hm_convert_file, ...). Argument
// checks live here; the converters are src/schema/, the file reader/writer src/io/.
#include "schema/convert.hpp"
#include "schema/model.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "api/format.hpp"
#include "api/guard.hpp"

static_assert(offsetof(hm_checkpoint_tensor_t, struct_size) == 0, "struct_size comes first");
static_assert(offsetof(hm_convert_options_t, struct_size) == 0, "struct_size comes first");
static_assert(offsetof(hm_converted_layer_info_t, struct_size) == 0, "struct_size comes first");
static_assert(offsetof(hm_convert_model_options_t, struct_size) == 0, "struct_size comes first");
static_assert(offsetof(hm_convert_model_summary_t, struct_size) == 0, "struct_size comes first");

struct hm_converted_layer {
  hm::schema::Layer layer;
  std::string note;  // hm::schema::conversion_note(layer), kept for hm_converted_layer_info
};

namespace {

using hm::api::require_not_null;
using hm::api::require_struct_size;

// The first released layouts (today's): struct_size must cover them.
constexpr size_t kTensorSize = sizeof(hm_checkpoint_tensor_t);
// Callers built before the cancel fields pass a struct that ends before them.
constexpr size_t kOptionsSize = offsetof(hm_convert_options_t, cancel);
constexpr size_t kInfoSize = offsetof(hm_converted_layer_info_t, note);  // before `note`
constexpr size_t kModelOptionsSize = sizeof(hm_convert_model_options_t);
constexpr size_t kModelSummarySize = sizeof(hm_convert_model_summary_t);
constexpr uint32_t kKnownModelFlags = HM_CONVERT_MODEL_FORCE | HM_CONVERT_MODEL_DRY_RUN |
                                      HM_CONVERT_MODEL_STACK_EXPERTS |
                                      HM_CONVERT_MODEL_JOIN_GATE_UP;

constexpr uint32_t kKnownFlags = HM_CONVERT_GPTQ_V2 | HM_CONVERT_SPLIT_GATE_UP |
                                  HM_CONVERT_KEEP_K_ORDER | HM_CONVERT_GPTQ_V1_AUTOGPTQ |
                                  HM_CONVERT_GPTQ_V1_GPTQMODEL | HM_CONVERT_ASYMMETRIC |
                                  HM_CONVERT_CT_PACK_DENSE | HM_CONVERT_CT_PACK_WORD_ALIGNED;

// Two flags that name opposite answers to one question.
void require_one_of(uint32_t flags, uint32_t a, uint32_t b, const char* what) {
  if ((flags & a) && (flags & b))
    hm::fail(HM_ERROR_INVALID_ARGUMENT,
             std::string("'options->flags' sets both ") + what + "; set at most one");
}

hm::core::Dtype optional_dtype(hm_dtype_t code, const char* name) {
  if (code == HM_DTYPE_NONE) return {};
  try {
    return hm::core::Dtype::from_code(code);
  } catch (const hm::Error& e) {
    hm::fail(HM_ERROR_INVALID_ARGUMENT, std::string("'options->") + name + "': " + e.message());
  }
}

hm::schema::Options options_of(const hm_convert_options_t* o) {
  hm::schema::Options out;
  if (o == nullptr) return out;
  require_struct_size(o->struct_size, kOptionsSize, "options");
  out.activation = optional_dtype(o->activation, "activation");
  out.output = optional_dtype(o->output, "output");
  if (o->bits < 0 || o->bits > 8)
    hm::fail(HM_ERROR_INVALID_ARGUMENT,
             "'options->bits' is " + std::to_string(o->bits) + "; use 0 (derive) or 1..8");
  out.bits = o->bits;
  if (o->group_size < -1)
    hm::fail(HM_ERROR_INVALID_ARGUMENT, "'options->group_size' is " +
                                            std::to_string(o->group_size) +
                                            "; use 0 (derive), -1 (per channel) or a group size");
  out.group_size = o->group_size;
  if (o->flags & ~kKnownFlags)
    hm::fail(HM_ERROR_INVALID_ARGUMENT, "'options->flags' has unknown bits " +
                                            std::to_string(o->flags & ~kKnownFlags) +
                                            "; use HM_CONVERT_* flags");
  out.gptq_v2 = (o->flags & HM_CONVERT_GPTQ_V2) != 0;
  out.split_gate_up = (o->flags & HM_CONVERT_SPLIT_GATE_UP) != 0;
  out.keep_k_order = (o->flags & HM_CONVERT_KEEP_K_ORDER) != 0;
  out.asymmetric = (o->flags & HM_CONVERT_ASYMMETRIC) != 0;
  require_one_of(o->flags, HM_CONVERT_GPTQ_V1_AUTOGPTQ, HM_CONVERT_GPTQ_V1_GPTQMODEL,
                 "HM_CONVERT_GPTQ_V1_AUTOGPTQ and HM_CONVERT_GPTQ_V1_GPTQMODEL");
  require_one_of(o->flags, HM_CONVERT_CT_PACK_DENSE, HM_CONVERT_CT_PACK_WORD_ALIGNED,
                 "HM_CONVERT_CT_PACK_DENSE and HM_CONVERT_CT_PACK_WORD_ALIGNED");
  if (o->flags & HM_CONVERT_GPTQ_V1_AUTOGPTQ) out.gptq_v1_zeros = hm::schema::GptqV1Zeros::kAutoGptq;
  if (o->flags & HM_CONVERT_GPTQ_V1_GPTQMODEL)
    out.gptq_v1_zeros = hm::schema::GptqV1Zeros::kGptqModel;
  if (o->flags & HM_CONVERT_CT_PACK_DENSE) out.ct_packing = hm::schema::CtPacking::kDense;
  if (o->flags & HM_CONVERT_CT_PACK_WORD_ALIGNED)
    out.ct_packing = hm::schema::CtPacking::kWordAligned;
  if (o->global_scale_convention < HM_GLOBAL_SCALE_DEFAULT ||
      o->global_scale_convention > HM_GLOBAL_SCALE_DIVIDE)
    hm::fail(HM_ERROR_INVALID_ARGUMENT, "'options->global_scale_convention' is " +
                                            std::to_string(o->global_scale_convention) +
                                            "; use HM_GLOBAL_SCALE_*");
  out.global_scale = static_cast<hm::schema::GlobalScaleConvention>(o->global_scale_convention);
  if (o->shard_count < 0) hm::fail(HM_ERROR_INVALID_ARGUMENT, "'options->shard_count' is negative");
  if (o->shard_count > 0) {
    require_not_null(o->shard_rows, "options->shard_rows");
    out.shard_rows.assign(o->shard_rows, o->shard_rows + o->shard_count);
  }
  return out;
}

// The array's elements are the caller's structs: its stride is their struct_size (a caller
// compiled against a newer header passes larger ones), which every element must share; only
// the fields this library knows are read.
std::vector<hm::io::TensorView> tensors_of(const hm_checkpoint_tensor_t* tensors, size_t count) {
  if (count > 0) require_not_null(tensors, "tensors");
  const uint32_t stride = count > 0 ? tensors[0].struct_size : 0;
  if (count > 0) {
    require_struct_size(stride, kTensorSize, "tensors[0]");
    if (stride % alignof(hm_checkpoint_tensor_t) != 0)
      hm::fail(HM_ERROR_INVALID_STRUCT_SIZE,
               "'tensors[0].struct_size' is " + std::to_string(stride) +
                   ", not a multiple of the struct's alignment (" +
                   std::to_string(alignof(hm_checkpoint_tensor_t)) +
                   "): initialize each element with hm_checkpoint_tensor_init()");
  }
  std::vector<hm::io::TensorView> out;
  for (size_t i = 0; i < count; ++i) {
    const hm_checkpoint_tensor_t& t = *reinterpret_cast<const hm_checkpoint_tensor_t*>(
        reinterpret_cast<const char*>(tensors) + i * stride);
    const std::string which = "tensors[" + std::to_string(i) + "]";
    if (t.struct_size != stride)
      hm::fail(HM_ERROR_INVALID_STRUCT_SIZE,
               "'" + which + ".struct_size' is " + std::to_string(t.struct_size) +
                   " but tensors[0]'s is " + std::to_string(stride) +
                   ": the elements of one array share one size (the array's stride)");
    require_not_null(t.name, (which + ".name").c_str());
    require_not_null(t.dtype, (which + ".dtype").c_str());
    if (t.ndim < 0 || t.ndim > 8)
      hm::fail(HM_ERROR_INVALID_ARGUMENT,
               "'" + which + ".ndim' is " + std::to_string(t.ndim) + "; use 0..8");
    hm::io::TensorView v;
    v.name = t.name;
    v.dtype = t.dtype;
    v.shape.assign(t.shape, t.shape + t.ndim);
    v.data = static_cast<const uint8_t*>(t.data);
    v.bytes = t.bytes;
    out.push_back(std::move(v));
  }
  return out;
}

const hm::schema::Layer& layer_of(const hm_converted_layer_t* layer) {
  require_not_null(layer, "layer");
  return layer->layer;
}

}  // namespace

extern "C" {

HM_API hm_status_t hm_scheme_parse(const char* name, int32_t* out) {
  return HM_API_CALL({
    require_not_null(name, "name");
    require_not_null(out, "out");
    *out = static_cast<int32_t>(hm::schema::parse_scheme(name));
  });
}

HM_API void hm_checkpoint_tensor_init(hm_checkpoint_tensor_t* tensor) {
  if (tensor == nullptr) return;
  std::memset(tensor, 0, sizeof *tensor);
  tensor->struct_size = sizeof *tensor;
}

HM_API void hm_convert_options_init(hm_convert_options_t* options) {
  if (options == nullptr) return;
  std::memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
}

HM_API void hm_converted_layer_info_init(hm_converted_layer_info_t* info) {
  if (info == nullptr) return;
  std::memset(info, 0, sizeof *info);
  info->struct_size = sizeof *info;
  info->weight.struct_size = sizeof info->weight;
}

HM_API hm_status_t hm_convert_layer(int32_t scheme, const hm_checkpoint_tensor_t* tensors,
                                    size_t count, const hm_convert_options_t* options,
                                    hm_converted_layer_t** out) {
  if (out != nullptr) *out = nullptr;
  return HM_API_CALL({
    require_not_null(out, "out");
    const hm::schema::Scheme s = hm::schema::scheme_from_int(scheme);
    const hm::schema::Options o = options_of(options);
    auto result = std::make_unique<hm_converted_layer>();
    result->layer = hm::schema::convert_layer(s, tensors_of(tensors, count), o);
    result->note = hm::schema::conversion_note(result->layer);
    *out = result.release();
  });
}

HM_API void hm_converted_layer_destroy(hm_converted_layer_t* layer) { delete layer; }

HM_API hm_status_t hm_converted_layer_stack(const hm_converted_layer_t* const* layers,
                                            size_t count, int32_t axis,
                                            hm_converted_layer_t** out) {
  if (out != nullptr) *out = nullptr;
  return HM_API_CALL({
    require_not_null(out, "out");
    require_not_null(layers, "layers");
    if (axis != HM_STACK_EXPERTS && axis != HM_STACK_ROWS)
      hm::fail(HM_ERROR_INVALID_ARGUMENT, "'axis' is " + std::to_string(axis) +
                                              "; use HM_STACK_EXPERTS or HM_STACK_ROWS");
    // Larger than any array of pointers the caller can hold: a bad count, not an allocation
    // failure (std::length_error would report it as an internal error).
    if (count > PTRDIFF_MAX / sizeof(const hm_converted_layer_t*))
      hm::fail(HM_ERROR_INVALID_ARGUMENT,
               "'count' is " + std::to_string(count) + ": not the length of an array of layers");
    std::vector<const hm::schema::Layer*> parts(count);
    for (size_t i = 0; i < count; ++i)
      parts[i] = layers[i] == nullptr ? nullptr : &layers[i]->layer;
    auto result = std::make_unique<hm_converted_layer>();
    result->layer = hm::schema::stack_layers(
        parts, axis == HM_STACK_EXPERTS ? hm::schema::StackAxis::kExperts
                                        : hm::schema::StackAxis::kRows);
    result->note = hm::schema::conversion_note(result->layer);
    *out = result.release();
  });
}

HM_API hm_status_t hm_converted_layer_format(const hm_converted_layer_t* layer, hm_format_t** out) {
  if (out != nullptr) *out = nullptr;
  return HM_API_CALL({
    const hm::schema::Layer& l = layer_of(layer);
    require_not_null(out, "out");
    auto f = std::make_unique<hm_format>();
    f->value = l.format;
    *out = f.release();
  });
}

HM_API hm_status_t hm_converted_layer_info(const hm_converted_layer_t* layer,
                                           hm_converted_layer_info_t* info) {
  return HM_API_CALL({
    const hm::schema::Layer& l = layer_of(layer);
    require_not_null(info, "info");
    require_struct_size(info->struct_size, kInfoSize, "info");
    // The canonical buffers belong to the layer; callers may modify them in place (the C struct
    // has non-const pointers so that it passes straight to hm_pack / hm_dequantize).
    auto& m = const_cast<hm::schema::Layer&>(l);
    hm_canonical_weight_t w;
    std::memset(&w, 0, sizeof w);
    w.struct_size = sizeof w;
    const hm::quant::CanonicalWeight c = m.canonical();
    w.codes = c.codes;
    w.scales = c.scales;
    w.zero_points = c.zero_points;
    w.global_scale = c.global_scale;
    info->weight = w;
    info->bias = l.bias.empty() ? nullptr : l.bias.data();
    info->k_permutation = l.k_permutation.empty() ? nullptr : l.k_permutation.data();
    if (HM_STRUCT_HAS(info, hm_converted_layer_info_t, note))
      info->note = layer->note.empty() ? nullptr : layer->note.c_str();
    hm::api::report_filled(info);
  });
}

HM_API hm_status_t hm_convert_file(const char* scheme, const char* in_path, const char* out_path,
                                   const hm_convert_options_t* options) {
  return HM_API_CALL({
    require_not_null(scheme, "scheme");
    require_not_null(in_path, "in_path");
    require_not_null(out_path, "out_path");
    const hm::schema::Scheme s = hm::schema::parse_scheme(scheme);
    const hm::schema::Options o = options_of(options);
    const bool has_cancel =
        options != nullptr && HM_STRUCT_HAS(options, hm_convert_options_t, cancel_user_data);
    hm::schema::convert_file(s, in_path, out_path, o, options ? options->progress : nullptr,
                             options ? options->progress_user_data : nullptr,
                             has_cancel ? options->cancel : nullptr,
                             has_cancel ? options->cancel_user_data : nullptr);
  });
}

HM_API void hm_convert_model_options_init(hm_convert_model_options_t* options) {
  if (options == nullptr) return;
  std::memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
}

HM_API void hm_convert_model_summary_init(hm_convert_model_summary_t* summary) {
  if (summary == nullptr) return;
  std::memset(summary, 0, sizeof *summary);
  summary->struct_size = sizeof *summary;
}

HM_API hm_status_t hm_convert_model(const char* in_dir, const char* out_dir,
                                    const hm_convert_model_options_t* options,
                                    hm_convert_model_summary_t* summary) {
  return HM_API_CALL({
    require_not_null(in_dir, "in_dir");
    require_not_null(out_dir, "out_dir");
    if (summary) require_struct_size(summary->struct_size, kModelSummarySize, "summary");
    hm::schema::ModelRequest r;
    r.in_dir = in_dir;
    r.out_dir = out_dir;
    hm::schema::Scheme forced{};
    if (options) {
      require_struct_size(options->struct_size, kModelOptionsSize, "options");
      if (options->flags & ~kKnownModelFlags)
        hm::fail(HM_ERROR_INVALID_ARGUMENT, "'options->flags' has unknown bits " +
                                                std::to_string(options->flags & ~kKnownModelFlags) +
                                                "; use HM_CONVERT_MODEL_* flags");
      if (options->threads < 0)
        hm::fail(HM_ERROR_INVALID_ARGUMENT, "'options->threads' is negative; use 0 (all cores)");
      if (options->scheme) {
        forced = hm::schema::parse_scheme(options->scheme);
        r.scheme = &forced;
      }
      r.overrides = options_of(options->layer_options);
      r.force = (options->flags & HM_CONVERT_MODEL_FORCE) != 0;
      r.dry_run = (options->flags & HM_CONVERT_MODEL_DRY_RUN) != 0;
      r.stack_experts = (options->flags & HM_CONVERT_MODEL_STACK_EXPERTS) != 0;
      r.join_gate_up = (options->flags & HM_CONVERT_MODEL_JOIN_GATE_UP) != 0;
      r.threads = options->threads;
      r.progress = options->progress;
      r.user = options->progress_user_data;
    }
    const hm::schema::ModelResult m = hm::schema::convert_model(r);
    if (summary) {
      summary->layers = m.layers;
      summary->tensors = m.tensors;
      summary->files = m.files;
      summary->shards = m.shards;
      summary->bytes_in = m.bytes_in;
      summary->bytes_out = m.bytes_out;
      summary->seconds = m.seconds;
      hm::api::report_filled(summary);
    }
  });
}

}  // extern "C"
