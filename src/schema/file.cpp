// Whole-file conversion (hm_convert_file, `humming convert`): find the scheme's layers in a
// safetensors file, convert and pack each one, copy every other tensor, and stream the result
// to a new safetensors file with each layer's format string in the metadata (docs/convert.md).
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "core/error.hpp"
#include "core/file.hpp"
#include "core/quote.hpp"
#include "quant/layout.hpp"
#include "schema/common.hpp"
#include "schema/convert.hpp"
#include "schema/file.hpp"

namespace hm::schema {

// A tensor only a quantized checkpoint has: if no layer claims it, the file holds something the
// scheme does not describe, and converting the rest would silently drop it.
bool looks_quantized(const io::TensorView& t) {
  static const std::set<std::string> kRoles = {
      "qweight",           "qzeros",           "g_idx",          "weight_packed",
      "weight_scale",      "weight_scale_inv", "weight_scale_2", "weight_global_scale",
      "weight_zero_point", "weight_shape",     "weight_g_idx",   "input_global_scale"};
  const size_t dot = t.name.rfind('.');
  const std::string last = dot == std::string::npos ? t.name : t.name.substr(dot + 1);
  if (kRoles.count(last)) return true;
  if (last == "scales" && t.dtype != "F32") return true;  // GPTQ/AWQ scales, MXFP4 "_scales" below
  auto ends = [&](const char* s) {
    const size_t n = std::strlen(s);
    return t.name.size() >= n && t.name.compare(t.name.size() - n, n, s) == 0;
  };
  if (ends("_blocks") || (ends("_scales") && t.dtype == "U8")) return true;
  if (t.dtype.rfind("F8_", 0) == 0) return true;
  if (last == "weight" &&
      (t.dtype == "I32" || t.dtype == "U32" || t.dtype == "I8" || t.dtype == "U8"))
    return true;
  return false;
}

namespace {

// Companion roles: a layer is claimed when its anchor and one of these exist (so an unquantized
// "...weight" of a bf16 embedding is not taken for an FP8 weight).
std::vector<std::string> companions(Scheme scheme) {
  switch (scheme) {
    case Scheme::kGptq:
    case Scheme::kAwq:
      return {"scales"};
    case Scheme::kFp8:
      return {"weight_scale_inv", "weight_scale"};
    case Scheme::kMxfp4:
      return {"scales"};
    case Scheme::kNvfp4:
      return {"weight_scale_2"};
    default:
      return {"weight_scale"};
  }
}

}  // namespace

void TensorIndex::add(const io::SafetensorsFile& file) {
  for (const io::TensorView& t : file.tensors()) {
    const auto [it, fresh] = by_name_.emplace(t.name, &t);
    if (!fresh)
      fail(HM_ERROR_PARSE, "tensor " + core::quoted(t.name, 120) + " is in both " +
                               core::quoted(file_of_.at(it->second), 160) + " and " +
                               core::quoted(file.path(), 160));
    tensors_.push_back(&t);
    file_of_.emplace(&t, file.path());
  }
}

const io::TensorView* TensorIndex::find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

namespace {

// Why a tensor no layer claimed is a layer's loose end under `schemes`: an anchor without its
// companion scales, or a companion (of any dtype: GPTQ's F32 scales look unquantized) without
// its anchor. "" when it is neither.
std::string missing_partner(const io::TensorView& t, const TensorIndex& tensors,
                            const std::vector<Scheme>& schemes, bool quantized) {
  for (Scheme scheme : schemes) {
    const SchemeRoles& r = scheme_roles(scheme);
    auto prefix_of = [&](const std::string& role) -> std::optional<std::string> {
      const std::string suffix = std::string(1, r.separator) + role;
      if (t.name.size() <= suffix.size() ||
          t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) != 0)
        return std::nullopt;
      return t.name.substr(0, t.name.size() - suffix.size());
    };
    const std::vector<std::string> partners = companions(scheme);
    if (const auto prefix = prefix_of(r.anchor); prefix && quantized) {
      std::string names;
      for (const std::string& c : partners)
        names += (names.empty() ? "" : " or ") +
                 core::quoted(*prefix + std::string(1, r.separator) + c, 120);
      return "its " + std::string(scheme_name(scheme)) + " companion " + names + " is missing";
    }
    for (const std::string& c : partners)
      if (const auto prefix = prefix_of(c)) {
        const std::string anchor = *prefix + std::string(1, r.separator) + r.anchor;
        if (!tensors.find(anchor))
          return "its " + std::string(scheme_name(scheme)) + " anchor " +
                 core::quoted(anchor, 120) + " is missing";
      }
  }
  return "";
}

}  // namespace

std::string unclaimed_quantized(const TensorIndex& tensors,
                                const std::set<const io::TensorView*>& claimed,
                                const std::vector<Scheme>& schemes) {
  std::vector<std::string> refused;
  for (const io::TensorView* t : tensors.tensors()) {
    if (claimed.count(t)) continue;
    // An unquantized anchor ("weight" of a bf16 layer) is no loose end; a companion is.
    const bool quantized = looks_quantized(*t);
    const std::string why = missing_partner(*t, tensors, schemes, quantized);
    if (!quantized && why.empty()) continue;
    refused.push_back(core::quoted(t->name, 120) + " (" + t->dtype +
                      (why.empty() ? "" : "; " + why) + ")");
  }
  std::string list;
  for (size_t i = 0; i < refused.size() && i < 5; ++i) list += (i ? ", " : "") + refused[i];
  if (refused.size() > 5) list += " and " + std::to_string(refused.size() - 5) + " more";
  return list;
}

std::vector<FoundLayer> find_layers(Scheme scheme, const TensorIndex& file,
                                    std::set<const io::TensorView*>& claimed) {
  const SchemeRoles& r = scheme_roles(scheme);
  const std::string anchor_suffix = std::string(1, r.separator) + r.anchor;
  std::vector<FoundLayer> layers;
  for (const io::TensorView* tp : file.tensors()) {
    const io::TensorView& t = *tp;
    if (t.name.size() <= anchor_suffix.size() ||
        t.name.compare(t.name.size() - anchor_suffix.size(), anchor_suffix.size(), anchor_suffix) !=
            0)
      continue;
    FoundLayer layer;
    layer.prefix = t.name.substr(0, t.name.size() - anchor_suffix.size());
    bool has_companion = false;
    for (const std::string& c : companions(scheme))
      has_companion |= file.find(layer.prefix + r.separator + c) != nullptr;
    if (!has_companion) continue;
    for (const std::string& role : r.roles)
      if (const io::TensorView* m = file.find(layer.prefix + r.separator + role))
        layer.members.push_back(m);
    for (const io::TensorView* m : layer.members) claimed.insert(m);
    layers.push_back(std::move(layer));
  }
  return layers;
}

std::string safetensors_dtype(core::Dtype d) {
  switch (d.code()) {
    case HM_DTYPE_F16:
      return "F16";
    case HM_DTYPE_BF16:
      return "BF16";
    case HM_DTYPE_F32:
      return "F32";
    case HM_DTYPE_E4M3:
      return "F8_E4M3";
    case HM_DTYPE_E5M2:
      return "F8_E5M2";
    default:
      return "U8";
  }
}

std::string stored_scale_dtype(const core::Format& f, int scale_element_bytes) {
  const std::string dt = safetensors_dtype(f.scale);
  return io::dtype_size(dt) == scale_element_bytes && dt != "U8" ? dt : "U8";
}

namespace {

// The bias in the output dtype (f16, bf16 or f32), little-endian.
std::vector<uint8_t> encode_bias(const Layer& layer) {
  const core::Dtype out = layer.format.output;
  const size_t width = static_cast<size_t>(out.bits() / 8);
  std::vector<uint8_t> bytes(layer.bias.size() * width);
  for (size_t i = 0; i < layer.bias.size(); ++i) {
    const uint32_t code = out.encode(layer.bias[i]);
    for (size_t b = 0; b < width; ++b) bytes[width * i + b] = static_cast<uint8_t>(code >> (8 * b));
  }
  return bytes;
}

}  // namespace

PackedLayer pack_layer(const std::string& prefix, const Layer& layer, int threads) {
  const core::Format& f = layer.format;
  const quant::PackedShape ps = quant::packed_shape(f);
  std::vector<uint8_t> weight(ps.weight_bytes), scales(ps.scale_bytes), zeros(ps.zero_point_bytes);
  std::vector<float> global(ps.global_scale_bytes / 4);
  quant::PackedWeight out;
  out.weight = weight.data();
  out.scales = scales.empty() ? nullptr : scales.data();
  out.zero_points = zeros.empty() ? nullptr : zeros.data();
  out.global_scale = global.empty() ? nullptr : global.data();
  quant::pack(f, layer.canonical(), out, threads);

  PackedLayer p;
  p.prefix = prefix;
  p.format = f.to_string();
  p.note = conversion_note(layer);
  auto add = [&](const char* suffix, std::string dtype, std::vector<int64_t> shape,
                 std::vector<uint8_t> bytes) {
    p.tensors.push_back({prefix + suffix, std::move(dtype), std::move(shape), std::move(bytes)});
  };
  const int64_t e = f.experts;
  const int64_t weight_bytes = static_cast<int64_t>(weight.size());
  add(".weight", "U8", {weight_bytes}, std::move(weight));
  if (!scales.empty()) {
    const std::string dt = stored_scale_dtype(f, ps.scale_element_bytes);
    const int64_t bytes = static_cast<int64_t>(scales.size());
    if (dt != "U8")
      add(".weight_scale", dt, {e, ps.groups, ps.scale_columns}, std::move(scales));
    else
      add(".weight_scale", "U8", {bytes}, std::move(scales));
  }
  if (!zeros.empty()) {
    const int64_t bytes = static_cast<int64_t>(zeros.size());
    add(".weight_zero_point", "U8", {bytes}, std::move(zeros));
  }
  if (!global.empty()) {
    std::vector<uint8_t> bytes(global.size() * 4);
    std::memcpy(bytes.data(), global.data(), bytes.size());
    add(".global_scale", "F32", {e}, std::move(bytes));
  }
  if (f.has_bias)
    add(".bias", safetensors_dtype(f.output),
        e > 1 ? std::vector<int64_t>{e, f.n} : std::vector<int64_t>{f.n}, encode_bias(layer));
  if (!layer.k_permutation.empty()) {
    std::vector<uint8_t> bytes(layer.k_permutation.size() * 4);
    std::memcpy(bytes.data(), layer.k_permutation.data(), bytes.size());
    add(".k_permutation", "I32", {f.k}, std::move(bytes));
  }
  return p;
}

namespace {
// Upper bounds on a format string and a note (pack_layer's, with 20-digit counts).
constexpr size_t kFormatBound = 400, kNoteBound = 240;
}  // namespace

void write_packed(io::SafetensorsStreamWriter& w, const PackedLayer& p) {
  // packed_header_bound reserved the header space from these bounds.
  HM_REQUIRE(p.format.size() <= kFormatBound && p.note.size() <= kNoteBound, HM_ERROR_INTERNAL,
             "layer " + p.prefix + ": its format string or note is longer than the header "
             "space reserved for it");
  for (const PackedLayer::Tensor& t : p.tensors)
    w.append(t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size());
  w.set_metadata(kFormatKey + p.prefix, p.format);
  if (!p.note.empty()) w.set_metadata(kNoteKey + p.prefix, p.note);
}

uint64_t packed_header_bound(const std::string& prefix) {
  uint64_t bound =
      io::SafetensorsStreamWriter::metadata_bound(kFormatKey + prefix,
                                                  std::string(kFormatBound, 'x')) +
      io::SafetensorsStreamWriter::metadata_bound(kNoteKey + prefix,
                                                  std::string(kNoteBound, 'x'));
  for (const char* s : kOutputSuffixes)
    bound += io::SafetensorsStreamWriter::entry_bound(prefix + s, 3);
  return bound;
}

const char* const kOutputSuffixes[6] = {".weight",       ".weight_scale", ".weight_zero_point",
                                       ".global_scale", ".bias",         ".k_permutation"};
const char* const kFormatKey = "humming.format.";
const char* const kNoteKey = "humming.note.";

FileResult convert_file(Scheme scheme, const std::string& in_path, const std::string& out_path,
                        const Options& options, FileProgress progress, void* user,
                        FileCancel cancel, void* cancel_user) {
  const io::SafetensorsFile file(in_path);
  // The same file under another name (./m.safetensors, a hard link, a symlink) is found by its
  // device and inode, not by comparing strings: renaming the output over it would replace the
  // checkpoint being read.
  core::FileId out_id;
  if (core::file_id(out_path, &out_id) && out_id == file.file_id())
    fail(HM_ERROR_INVALID_ARGUMENT, "the output " + core::quoted(out_path, core::kQuotedPathBytes) +
                                        " is the input file " +
                                        core::quoted(in_path, core::kQuotedPathBytes) +
                                        " (the same file under another name); write a new file");
  std::set<const io::TensorView*> claimed;
  const TensorIndex index(file);
  const std::vector<FoundLayer> layers = find_layers(scheme, index, claimed);

  if (const std::string list = unclaimed_quantized(index, claimed, {scheme}); !list.empty()) {
    fail(HM_ERROR_UNSUPPORTED,
         core::quoted(in_path, 200) + " holds quantized tensors that the " + scheme_name(scheme) +
             " scheme does not describe: " + list +
             "; check --scheme (docs/convert.md lists each scheme's tensors)");
  }
  if (layers.empty())
    fail(HM_ERROR_UNSUPPORTED, core::quoted(in_path, 200) + " holds no " + scheme_name(scheme) +
                                   " layer (no '" + std::string(1, scheme_roles(scheme).separator) +
                                   scheme_roles(scheme).anchor +
                                   "' tensor with its scales); check --scheme");

  // Which layer each claimed tensor belongs to, and the output names (to refuse collisions).
  std::map<const io::TensorView*, size_t> layer_of;
  std::set<std::string> out_names;
  for (size_t i = 0; i < layers.size(); ++i) {
    for (const io::TensorView* m : layers[i].members) layer_of[m] = i;
    for (const char* s : kOutputSuffixes) out_names.insert(layers[i].prefix + s);
  }
  for (const io::TensorView& t : file.tensors())
    if (!claimed.count(&t) && out_names.count(t.name))
      fail(HM_ERROR_UNSUPPORTED,
           "tensor " + core::quoted(t.name, 120) +
               " would collide with a converted layer's output tensor of the same name");

  // The header is written last, into space reserved now from bounds on every entry.
  std::map<std::string, std::string> metadata;
  for (const auto& [k, v] : file.metadata())
    if (k.rfind("humming.", 0) != 0) metadata[k] = v;
  metadata["humming.scheme"] = scheme_name(scheme);
  metadata["humming.layout"] = "1";
  uint64_t reserve = 64;
  for (const auto& [k, v] : metadata) reserve += io::SafetensorsStreamWriter::metadata_bound(k, v);
  for (const FoundLayer& l : layers) reserve += packed_header_bound(l.prefix);
  for (const io::TensorView& t : file.tensors())
    if (!claimed.count(&t))
      reserve += io::SafetensorsStreamWriter::entry_bound(t.name, t.shape.size());

  io::SafetensorsStreamWriter writer(out_path, reserve);
  for (const auto& [k, v] : metadata) writer.set_metadata(k, v);
  uint64_t total = 0, done = 0;
  for (const io::TensorView& t : file.tensors()) total += t.bytes;
  // After each item: progress, then the caller's cancel (throwing leaves `writer` unfinished,
  // which removes its temporary file).
  auto reached = [&](const std::string& name) {
    if (progress) progress(user, name.c_str(), done, total);
    if (cancel && cancel(cancel_user) != 0)
      fail(HM_ERROR_INVALID_STATE, "cancelled by the cancel callback; nothing was written to " +
                                       core::quoted(out_path, core::kQuotedPathBytes));
  };
  std::vector<bool> written(layers.size(), false);
  FileResult result;
  for (const io::TensorView& t : file.tensors()) {
    auto it = layer_of.find(&t);
    if (it == layer_of.end()) {
      writer.append(t.name, t.dtype, t.shape, t.data, t.bytes);
      ++result.copied;
      done += t.bytes;
      reached(t.name);
      continue;
    }
    if (written[it->second]) continue;
    written[it->second] = true;
    const FoundLayer& fl = layers[it->second];
    std::vector<io::TensorView> members;
    for (const io::TensorView* m : fl.members) members.push_back(*m);
    Options layer_options = options;
    // gate/up de-interleaving only applies to the fused gate_up projection.
    if (fl.prefix.find("gate_up") == std::string::npos) layer_options.split_gate_up = false;
    const Layer layer = convert_layer(scheme, members, layer_options);  // names the layer
    write_packed(writer, pack_layer(fl.prefix, layer));
    ++result.layers;
    for (const io::TensorView* m : fl.members) done += m->bytes;
    reached(fl.prefix);
  }
  writer.finish();
  return result;
}

}  // namespace hm::schema
