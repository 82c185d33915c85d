// Pieces of whole-file conversion (file.cpp) that the model-folder converter (model.cpp) shares:
// finding a scheme's layers in a safetensors file, spotting quantized tensors nothing claims,
// and a converted layer packed into the tensors it is written as.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "io/safetensors.hpp"
#include "schema/convert.hpp"

namespace hm::schema {

struct FoundLayer {
  std::string prefix;
  std::vector<const io::TensorView*> members;
};

// The tensors a layer search runs over: one file's, or a whole model's (its shards in order, so a
// layer whose tensors the checkpoint's writer split between two shards is found whole). Names
// are unique: a name in two files is refused (HM_ERROR_PARSE, naming both).
class TensorIndex {
 public:
  TensorIndex() = default;
  explicit TensorIndex(const io::SafetensorsFile& file) { add(file); }
  void add(const io::SafetensorsFile& file);
  const std::vector<const io::TensorView*>& tensors() const { return tensors_; }
  const io::TensorView* find(const std::string& name) const;

 private:
  std::vector<const io::TensorView*> tensors_;
  std::map<std::string, const io::TensorView*> by_name_;
  std::map<const io::TensorView*, std::string> file_of_;  // for the duplicate-name message
};

// The layers of `scheme` among `tensors`: an anchor tensor with a companion scale
// (docs/convert.md). Adds every member to `claimed`.
std::vector<FoundLayer> find_layers(Scheme scheme, const TensorIndex& tensors,
                                    std::set<const io::TensorView*>& claimed);

// A tensor only a quantized checkpoint has (refused when no layer claims it).
bool looks_quantized(const io::TensorView& t);

// The quantized-looking tensors of `tensors` that no layer claimed, listed for a message (the
// first five, then a count), or "" when there are none. With the `schemes` converted, a loose end
// of one of their layers is listed too (whatever its dtype), naming the tensor it lacks: an
// anchor without companion scales, or companion scales without the anchor.
std::string unclaimed_quantized(const TensorIndex& tensors,
                                const std::set<const io::TensorView*>& claimed,
                                const std::vector<Scheme>& schemes = {});

// The safetensors dtype a buffer of dtype d is stored as ("F16", "BF16", "F32", "F8_E4M3", ...;
// "U8" for dtypes safetensors has no name for).
std::string safetensors_dtype(core::Dtype d);

// The safetensors dtype of a stored layer's scale tensor (".weight_scale"): the scale dtype's
// own name when its codes fill whole elements of it, else "U8" (the writer's choice; the reader
// holds files to it).
std::string stored_scale_dtype(const core::Format& f, int scale_element_bytes);

// The output tensor names of a layer are its prefix plus these.
extern const char* const kOutputSuffixes[6];
// The header metadata keys of a layer's format string and note are these plus its prefix.
extern const char* const kFormatKey;  // "humming.format."
extern const char* const kNoteKey;    // "humming.note."

// A converted layer in its written form: the standard layout's tensors and its format string.
struct PackedLayer {
  struct Tensor {
    std::string name, dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::string prefix, format;
  // What the conversion changed beyond the layout, for the layer's report (empty: nothing).
  std::string note;
  std::vector<Tensor> tensors;
  uint64_t bytes() const {
    uint64_t b = 0;
    for (const Tensor& t : tensors) b += t.bytes.size();
    return b;
  }
};
// threads: quant::pack's (0: it chooses).
PackedLayer pack_layer(const std::string& prefix, const Layer& layer, int threads = 0);
// Appends the tensors and sets "humming.format.<prefix>" (and "humming.note.<prefix>" when the
// layer has a note).
void write_packed(io::SafetensorsStreamWriter& writer, const PackedLayer& layer);
// The header bytes write_packed may use for a layer's entries and metadata, before the layer is
// converted (its tensors have at most 3 dimensions; its format and note fit their bounds).
uint64_t packed_header_bound(const std::string& prefix);

}  // namespace hm::schema
