// Reading the standard layout back (hm_stored_model_*): a folder written by convert_model or a
// file written by convert_file, each converted layer found by its format key in the header
// metadata (file.hpp kFormatKey) and its tensors by kOutputSuffixes, copied out of the
// memory-mapped shards and checked against the format's packed sizes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/format.hpp"
#include "io/safetensors.hpp"

namespace hm::schema {

// A converted layer as stored: the standard layout's buffers (quant::packed_shape sizes), the
// bias widened to f32 ([E][N]), the K permutation and the conversion's note.
struct StoredLayer {
  core::Format format;
  std::string format_text, note;
  std::vector<uint8_t> weight, scales, zero_points;
  std::vector<float> global_scale, bias;
  std::vector<int32_t> k_permutation;
};

// Reads layer `name` from a file's header metadata and its tensors (`find`: a tensor by name,
// nullptr when absent; the views must be valid); `where` names the file in messages.
// StoredModel::read's checks on any image (the fuzz target feeds it hostile ones).
using TensorLookup = std::function<const io::TensorView*(const std::string&)>;
StoredLayer read_stored_layer(const std::map<std::string, std::string>& metadata,
                              const TensorLookup& find, const std::string& where,
                              const std::string& name);

class StoredModel {
 public:
  // path: a converted folder (its shards as shard_files finds them) or one converted file.
  // Throws hm::Error: HM_ERROR_IO / HM_ERROR_PARSE for what cannot be read, HM_ERROR_INVALID_
  // ARGUMENT for a layer stored in two shards or a folder without converted layers.
  explicit StoredModel(const std::string& path);
  // The converted layers' names (prefixes), sorted.
  const std::vector<std::string>& layer_names() const { return names_; }
  // Reads one layer; HM_ERROR_INVALID_ARGUMENT naming it when there is none such, and naming the
  // tensor when one is missing, unexpected or of the wrong size or dtype. Safe to call from
  // several threads at once (the mapped files are only read).
  StoredLayer read(const std::string& name) const;
  // The layer's format from the header alone (validated as read() does).
  core::Format format(const std::string& name) const;

 private:
  // The file that holds layer `name`; HM_ERROR_INVALID_ARGUMENT naming it when none does.
  const io::SafetensorsFile& file_of(const std::string& name) const;

  std::string path_;
  std::vector<std::unique_ptr<io::SafetensorsFile>> files_;
  std::map<std::string, size_t> file_of_;  // layer name -> files_ index
  std::vector<std::string> names_;
};

}  // namespace hm::schema
