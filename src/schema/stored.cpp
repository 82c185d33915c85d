// Reading converted layers back (stored.hpp).
#include "schema/stored.hpp"

#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "core/quote.hpp"
#include "core/support.hpp"
#include "quant/layout.hpp"
#include "quant/quantize.hpp"
#include "schema/file.hpp"
#include "schema/model.hpp"

namespace hm::schema {

namespace {

namespace fs = std::filesystem;

// The bytes of tensor `name`, which must hold `bytes` bytes (0: must be absent) and, when
// `dtype` is not null, be of that safetensors dtype, as T values.
template <class T>
std::vector<T> tensor(const TensorLookup& find, const std::string& where, const std::string& name,
                      uint64_t bytes, const std::string& format, const char* dtype = nullptr) {
  const io::TensorView* t = find(name);
  if (t != nullptr && bytes != 0 && dtype != nullptr && t->dtype != dtype)
    fail(HM_ERROR_INVALID_ARGUMENT, core::quoted(where, 200) + ": tensor " +
                                        core::quoted(name, 160) + " is " + t->dtype + ", not " +
                                        dtype + " as the standard layout stores it");
  if (bytes == 0) {
    if (t != nullptr)
      fail(HM_ERROR_INVALID_ARGUMENT, core::quoted(where, 200) + " has tensor " +
                                          core::quoted(name, 160) + ", which the layer's format " +
                                          format + " does not have");
    return {};
  }
  if (t == nullptr || t->bytes != bytes)
    fail(HM_ERROR_INVALID_ARGUMENT,
         core::quoted(where, 200) + ": tensor " + core::quoted(name, 160) + " must hold " +
             std::to_string(bytes) + " bytes for the format " + format + "; " +
             (t == nullptr ? std::string("there is no such tensor")
                           : "it holds " + std::to_string(t->bytes)));
  std::vector<T> out(bytes / sizeof(T));
  std::memcpy(out.data(), t->data, bytes);  // the mapping need not be aligned for T
  return out;
}

// A layer's format text, parsed and validated: a format the writer would not have written (e.g.
// an output dtype of 4 bits) is refused before its sizes are trusted.
core::Format stored_format(const std::string& text) {
  core::Format f = core::Format::parse(text);
  core::validate(f, std::nullopt);
  return f;
}

}  // namespace

StoredModel::StoredModel(const std::string& path) : path_(path) {
  std::vector<std::string> paths;
  try {
    if (fs::is_directory(path)) {
      for (const std::string& name : shard_files(path)) paths.push_back(path + "/" + name);
    } else {
      paths.push_back(path);  // SafetensorsFile refuses what is not a regular file
    }
  } catch (const fs::filesystem_error& e) {  // a name too long, no permission, a link loop
    fail(HM_ERROR_IO, "cannot read " + core::quoted(path, 200) + ": " + e.code().message());
  }
  const std::string key = kFormatKey;
  for (const std::string& p : paths) {
    files_.push_back(std::make_unique<io::SafetensorsFile>(p));
    for (const auto& [k, v] : files_.back()->metadata()) {
      if (k.rfind(key, 0) != 0) continue;
      const std::string name = k.substr(key.size());
      // Names and notes go out as C strings: a NUL would cut a name into another layer's.
      if (name.find('\0') != std::string::npos || v.find('\0') != std::string::npos)
        fail(HM_ERROR_INVALID_ARGUMENT, core::quoted(p, 200) + ": converted layer " +
                                            core::quoted(name, 160) +
                                            " has a NUL byte in its name or format");
      if (!file_of_.emplace(name, files_.size() - 1).second)
        fail(HM_ERROR_INVALID_ARGUMENT,
             "converted layer " + core::quoted(name, 160) + " is stored in both " +
                 core::quoted(files_[file_of_[name]]->path(), 200) + " and " +
                 core::quoted(p, 200));
    }
  }
  if (file_of_.empty())
    fail(HM_ERROR_INVALID_ARGUMENT,
         core::quoted(path, 200) + " holds no converted layer (no '" + key +
             "<prefix>' key in its safetensors headers): convert it with humming convert first");
  for (const auto& [name, file] : file_of_) names_.push_back(name);
}

namespace {

// A stored layer must be exactly what pack writes for its own canonical content: unpacked and
// packed again, every byte comes back. That refuses what the byte counts cannot see: padding
// that is not pack's (the kernels read K padding: a NaN there made a layer's output NaN on the
// GPU while the host reference, which skips padding, was clean), a format edited within the
// padding (n or k changed without changing the padded sizes), and scales or global scales that
// pack would refuse (not finite, not exact in their dtype). Costs one unpack and one pack of the
// layer, on the library's threads.
void require_round_trip(const StoredLayer& l, const quant::PackedShape& ps,
                        const std::string& where, const std::string& name) {
  const quant::CanonicalShape cs = quant::canonical_shape(l.format);
  std::vector<uint8_t> codes(cs.codes);
  std::vector<float> scales(cs.scales), zeros(cs.zero_points), global(cs.global_scale);
  const quant::CanonicalWeight canonical{codes.data(), scales.data(), zeros.data(),
                                         global.data()};
  quant::ConstPackedWeight stored;
  stored.weight = l.weight.data();
  stored.scales = l.scales.data();
  stored.zero_points = l.zero_points.data();
  stored.global_scale = l.global_scale.data();
  quant::unpack(l.format, stored, canonical);
  std::vector<uint8_t> weight(ps.weight_bytes), side(ps.scale_bytes), zp(ps.zero_point_bytes);
  std::vector<float> gs(ps.global_scale_bytes / 4);
  const quant::PackedWeight again{weight.data(), side.data(), zp.data(), gs.data()};
  try {
    quant::pack(l.format, canonical, again);
  } catch (const Error& e) {
    fail(e.status(), core::quoted(where, 200) + ": converted layer " + core::quoted(name, 160) +
                         " holds a value its format cannot (the converter never writes one): " +
                         e.message());
  }
  auto same = [&](const void* a, const void* b, uint64_t bytes, const char* tensor) {
    if (bytes == 0 || std::memcmp(a, b, bytes) == 0) return;
    const auto* x = static_cast<const uint8_t*>(a);
    const auto* y = static_cast<const uint8_t*>(b);
    uint64_t at = 0;
    while (x[at] == y[at]) ++at;
    fail(HM_ERROR_INVALID_ARGUMENT,
         core::quoted(where, 200) + ": " + core::quoted(name + tensor, 160) +
             " differs at byte " + std::to_string(at) + " from what its format (" +
             core::quoted(l.format_text, 200) +
             ") packs for the same values: its padding is not the converter's, or the format was "
             "edited; convert the checkpoint again");
  };
  same(l.weight.data(), weight.data(), ps.weight_bytes, ".weight");
  same(l.scales.data(), side.data(), ps.scale_bytes, ".weight_scale");
  same(l.zero_points.data(), zp.data(), ps.zero_point_bytes, ".weight_zero_point");
  same(l.global_scale.data(), gs.data(), ps.global_scale_bytes, ".global_scale");
}

}  // namespace

StoredLayer read_stored_layer(const std::map<std::string, std::string>& metadata,
                              const TensorLookup& find, const std::string& where,
                              const std::string& name) {
  const auto text = metadata.find(kFormatKey + name);
  if (text == metadata.end())
    fail(HM_ERROR_INVALID_ARGUMENT, core::quoted(where, 200) + " has no converted layer " +
                                        core::quoted(name, 160));
  StoredLayer l;
  l.format_text = text->second;
  l.format = stored_format(l.format_text);
  if (const auto note = metadata.find(kNoteKey + name); note != metadata.end()) {
    if (note->second.find('\0') != std::string::npos)
      fail(HM_ERROR_INVALID_ARGUMENT, core::quoted(where, 200) + ": the note of converted layer " +
                                          core::quoted(name, 160) + " has a NUL byte");
    l.note = note->second;
  }
  const core::Format& f = l.format;
  const quant::PackedShape ps = quant::packed_shape(f);
  const std::string& fmt = l.format_text;
  l.weight = tensor<uint8_t>(find, where, name + ".weight", ps.weight_bytes, fmt, "U8");
  l.scales = tensor<uint8_t>(find, where, name + ".weight_scale", ps.scale_bytes, fmt,
                             stored_scale_dtype(f, ps.scale_element_bytes).c_str());
  l.zero_points =
      tensor<uint8_t>(find, where, name + ".weight_zero_point", ps.zero_point_bytes, fmt, "U8");
  l.global_scale =
      tensor<float>(find, where, name + ".global_scale", ps.global_scale_bytes, fmt, "F32");
  // The bias is stored in the output dtype, f16 or bf16 (validate's rule R4).
  const uint64_t width = static_cast<uint64_t>(f.output.bits() / 8);
  HM_REQUIRE(width == 2, HM_ERROR_INTERNAL, "a validated format's output is 16 bits wide");
  const uint64_t bias_count = static_cast<uint64_t>(f.experts * f.n);
  const std::vector<uint8_t> bias =
      tensor<uint8_t>(find, where, name + ".bias", f.has_bias ? bias_count * width : 0, fmt,
                      safetensors_dtype(f.output).c_str());
  for (uint64_t i = 0; i < bias.size() / width; ++i) {
    uint32_t code = 0;
    for (uint64_t b = 0; b < width; ++b) code |= uint32_t{bias[i * width + b]} << (8 * b);
    l.bias.push_back(static_cast<float>(f.output.decode(code)));
    if (!std::isfinite(l.bias.back()))
      fail(HM_ERROR_NON_FINITE, core::quoted(where, 200) + ": " +
                                    core::quoted(name + ".bias", 160) + " element " +
                                    std::to_string(i) + " is not finite");
  }
  require_round_trip(l, ps, where, name);
  const std::string perm = name + ".k_permutation";
  if (find(perm) != nullptr) {
    // A gather index read from a file: each column once, or the GEMM reads the wrong inputs.
    l.k_permutation = tensor<int32_t>(find, where, perm, 4 * uint64_t(f.k), fmt, "I32");
    std::vector<bool> seen(static_cast<size_t>(f.k), false);
    for (int32_t v : l.k_permutation) {
      if (v < 0 || v >= f.k || seen[static_cast<size_t>(v)])
        fail(HM_ERROR_INVALID_ARGUMENT,
             core::quoted(where, 200) + ": " + core::quoted(perm, 160) +
                 " is no permutation of [0, " + std::to_string(f.k) + "): it holds " +
                 std::to_string(v) + (v >= 0 && v < f.k ? " twice" : ""));
      seen[static_cast<size_t>(v)] = true;
    }
  }
  return l;
}

const io::SafetensorsFile& StoredModel::file_of(const std::string& name) const {
  const auto it = file_of_.find(name);
  if (it == file_of_.end())
    fail(HM_ERROR_INVALID_ARGUMENT, core::quoted(path_, 200) + " has no converted layer " +
                                        core::quoted(name, 160));
  return *files_[it->second];
}

core::Format StoredModel::format(const std::string& name) const {
  return stored_format(file_of(name).metadata().at(kFormatKey + name));
}

StoredLayer StoredModel::read(const std::string& name) const {
  const io::SafetensorsFile& file = file_of(name);
  return read_stored_layer(
      file.metadata(), [&](const std::string& n) { return file.find(n); }, file.path(), name);
}

}  // namespace hm::schema
