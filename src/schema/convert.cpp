// The scheme registry: names, tensor roles, and dispatch to the per-scheme converters.
#include "schema/convert.hpp"

#include "core/checked.hpp"
#include "core/error.hpp"
#include "core/quote.hpp"
#include "schema/common.hpp"
#include "schema/tensors.hpp"

namespace hm::schema {

// Per-scheme converters (one file each).
Layer convert_gptq(const LayerTensors& t, const Options& options);
Layer convert_awq(const LayerTensors& t, const Options& options);
Layer convert_ct_pack(const LayerTensors& t, const Options& options);
Layer convert_ct_int8(const LayerTensors& t, const Options& options);
Layer convert_ct_fp8(const LayerTensors& t, const Options& options);
Layer convert_ct_nvfp4(const LayerTensors& t, const Options& options);
Layer convert_fp8(const LayerTensors& t, const Options& options);
Layer convert_mxfp4(const LayerTensors& t, const Options& options);
Layer convert_nvfp4(const LayerTensors& t, const Options& options);
Layer convert_bitnet(const LayerTensors& t, const Options& options);

namespace {

struct SchemeInfo {
  Scheme scheme;
  const char* name;
  std::vector<const char*> aliases;
  SchemeRoles roles;
  Layer (*convert)(const LayerTensors&, const Options&);
};

const std::vector<SchemeInfo>& registry() {
  static const std::vector<SchemeInfo> table = {
      {Scheme::kGptq,
       "gptq",
       {"gptq_v2", "autogptq", "gptqmodel"},
       {{"qweight", "qzeros", "scales", "g_idx", "bias"}, "qweight", '.'},
       convert_gptq},
      {Scheme::kAwq,
       "awq",
       {"autoawq"},
       {{"qweight", "qzeros", "scales", "bias"}, "qweight", '.'},
       convert_awq},
      {Scheme::kCtPack,
       "ct-pack",
       {"pack-quantized", "compressed-tensors-pack"},
       {{"weight_packed", "weight_scale", "weight_zero_point", "weight_g_idx", "weight_shape",
         "bias"},
        "weight_packed",
        '.'},
       convert_ct_pack},
      {Scheme::kCtInt8,
       "ct-int8",
       {"int-quantized", "compressed-tensors-int8", "w8a8"},
       {{"weight", "weight_scale", "weight_zero_point", "input_scale", "input_zero_point", "bias"},
        "weight",
        '.'},
       convert_ct_int8},
      {Scheme::kCtFp8,
       "ct-fp8",
       {"float-quantized", "compressed-tensors-fp8"},
       {{"weight", "weight_scale", "input_scale", "bias"}, "weight", '.'},
       convert_ct_fp8},
      {Scheme::kCtNvfp4,
       "ct-nvfp4",
       {"nvfp4-pack-quantized", "compressed-tensors-nvfp4"},
       {{"weight_packed", "weight_scale", "weight_global_scale", "input_global_scale", "bias"},
        "weight_packed",
        '.'},
       convert_ct_nvfp4},
      {Scheme::kFp8,
       "fp8",
       {"hf-fp8", "modelopt-fp8"},
       {{"weight", "weight_scale_inv", "weight_scale", "input_scale", "bias"}, "weight", '.'},
       convert_fp8},
      {Scheme::kMxfp4,
       "mxfp4",
       {"gpt-oss", "gpt_oss_mxfp4"},
       {{"blocks", "scales", "bias"}, "blocks", '_'},
       convert_mxfp4},
      {Scheme::kNvfp4,
       "nvfp4",
       {"modelopt", "modelopt-nvfp4"},
       {{"weight", "weight_scale", "weight_scale_2", "input_scale", "bias"}, "weight", '.'},
       convert_nvfp4},
      {Scheme::kBitnet,
       "bitnet",
       {"bitnet-b1.58"},
       {{"weight", "weight_scale", "bias"}, "weight", '.'},
       convert_bitnet},
  };
  return table;
}

const SchemeInfo& info(Scheme scheme) {
  for (const SchemeInfo& i : registry())
    if (i.scheme == scheme) return i;
  fail(HM_ERROR_INVALID_ARGUMENT, "unknown scheme " + std::to_string(static_cast<int32_t>(scheme)));
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

Scheme parse_scheme(const std::string& name) {
  const std::string n = lower(name);
  std::string names;
  for (const SchemeInfo& i : registry()) {
    if (n == i.name) return i.scheme;
    for (const char* a : i.aliases)
      if (n == a) return i.scheme;
    names += (names.empty() ? "" : ", ") + std::string(i.name);
  }
  fail(HM_ERROR_PARSE,
       "unknown checkpoint scheme " + core::quoted(name) + "; the schemes are " + names);
}

Scheme scheme_from_int(int32_t value) {
  for (const SchemeInfo& i : registry())
    if (static_cast<int32_t>(i.scheme) == value) return i.scheme;
  fail(HM_ERROR_INVALID_ARGUMENT, "'scheme' is " + std::to_string(value) +
                                      "; use an HM_SCHEME_* constant (1.." +
                                      std::to_string(registry().size()) + ")");
}

const char* scheme_name(Scheme scheme) { return info(scheme).name; }

const SchemeRoles& scheme_roles(Scheme scheme) { return info(scheme).roles; }

quant::CanonicalWeight Layer::canonical() {
  quant::CanonicalWeight w;
  w.codes = codes.data();
  w.scales = scales.empty() ? nullptr : scales.data();
  w.zero_points = zero_points.empty() ? nullptr : zero_points.data();
  w.global_scale = global_scale.empty() ? nullptr : global_scale.data();
  return w;
}

quant::ConstCanonicalWeight Layer::canonical() const {
  quant::ConstCanonicalWeight w;
  w.codes = codes.data();
  w.scales = scales.empty() ? nullptr : scales.data();
  w.zero_points = zero_points.empty() ? nullptr : zero_points.data();
  w.global_scale = global_scale.empty() ? nullptr : global_scale.data();
  return w;
}

static std::string rounding_note(const Layer& layer);  // the re-rounding part of the note

std::string conversion_note(const Layer& layer) {
  std::string widened;
  for (const std::string& what : layer.widened_to_bf16)
    widened += (widened.empty() ? "" : " and ") + what;
  if (!widened.empty())
    widened = "values of the " + widened + " that f16 would saturate or flush to 0 made the "
              "layer bf16 (" + layer.format.activation.name() + " activations, " +
              layer.format.output.name() + " output) in place of the default f16";
  const std::string lossy = rounding_note(layer);
  if (widened.empty() || lossy.empty()) return widened + lossy;
  return widened + "; " + lossy;
}

static std::string rounding_note(const Layer& layer) {
  const core::Format& f = layer.format;
  if (layer.rerounded_weights > 0)
    return "the group scales cannot be applied exactly with " + f.activation.name() +
           " activations, so the weights became " + f.weight.name() +
           " with f32 channel scales: " + std::to_string(layer.rerounded_weights) + " of " +
           std::to_string(f.experts * f.n * f.k) +
           " weights were re-rounded (lossy, docs/convert.md)";
  if (layer.rerounded_groups <= 0) return "";
  return std::to_string(layer.rerounded_groups) + " of " +
         std::to_string(f.experts * f.n * ((f.k + f.group_k - 1) / f.group_k)) +
         " scale groups lay below the " + f.activation.name() +
         " exponent window: their codes were re-rounded (lossy, docs/convert.md)";
}

Layer convert_layer(Scheme scheme, const std::vector<io::TensorView>& tensors,
                    const Options& options) {
  const SchemeInfo& i = info(scheme);
  for (const io::TensorView& t : tensors) {
    const int elem = io::dtype_size(t.dtype);
    if (elem == 0) bad_tensor(t, "the dtype is not a safetensors dtype this library reads");
    uint64_t bytes = static_cast<uint64_t>(elem);
    for (int64_t d : t.shape) {
      if (d < 0) bad_tensor(t, "has a negative dimension");
      if (!core::checked_mul(bytes, static_cast<uint64_t>(d), &bytes))
        bad_tensor(t, "is too large");
    }
    if (bytes != t.bytes)
      bad_tensor(t, std::to_string(t.bytes) + " bytes do not match the dtype and shape (" +
                        std::to_string(bytes) + " bytes)");
    if (t.bytes > 0 && t.data == nullptr) bad_tensor(t, "has no data");
  }
  const LayerTensors lt(scheme, tensors);
  // Messages name the layer as well as the tensor: a whole model has hundreds of them.
  try {
    Layer layer = i.convert(lt, options);
    fit_bias_to_output(layer, lt.find("bias"), options);
    finish(layer);
    return layer;
  } catch (const Error& e) {
    if (lt.prefix().empty()) throw;
    fail(e.status(), "layer " + core::quoted(lt.prefix(), 120) + ": " + e.message());
  }
}

}  // namespace hm::schema
