// Checkpoint converters: one layer's tensors, exactly as the producing tool wrote them, in; the
// layer's Format plus canonical buffers (quant/quantize.hpp), bias and an optional K permutation
// out. Each scheme lives in its own file (gptq.cpp, awq.cpp, ...); docs/convert.md gives every
// tensor layout and convention. Packing into the standard layout is quant::pack's job.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/format.hpp"
#include "io/safetensors.hpp"
#include "quant/quantize.hpp"

namespace hm::schema {

enum class Scheme : int32_t {
  kGptq = HM_SCHEME_GPTQ,
  kAwq = HM_SCHEME_AWQ,
  kCtPack = HM_SCHEME_CT_PACK,
  kCtInt8 = HM_SCHEME_CT_INT8,
  kCtFp8 = HM_SCHEME_CT_FP8,
  kCtNvfp4 = HM_SCHEME_CT_NVFP4,
  kFp8 = HM_SCHEME_FP8,
  kMxfp4 = HM_SCHEME_MXFP4,
  kNvfp4 = HM_SCHEME_NVFP4,
  kBitnet = HM_SCHEME_BITNET,
};

// Throws HM_ERROR_PARSE naming the text and listing the names.
Scheme parse_scheme(const std::string& name);
// Throws HM_ERROR_INVALID_ARGUMENT for a value that is no HM_SCHEME_* constant.
Scheme scheme_from_int(int32_t value);
const char* scheme_name(Scheme scheme);  // the canonical name: "gptq", "ct-pack", ...

enum class GlobalScaleConvention : int32_t {
  kDefault = HM_GLOBAL_SCALE_DEFAULT,
  kMultiply = HM_GLOBAL_SCALE_MULTIPLY,
  kDivide = HM_GLOBAL_SCALE_DIVIDE,
};

// Who wrote a GPTQ v1 checkpoint: they store a zero point of 0 differently (docs/convert.md).
enum class GptqV1Zeros { kUnknown, kAutoGptq, kGptqModel };
// compressed-tensors pack-quantized for bits that do not divide 32.
enum class CtPacking { kUnknown, kWordAligned, kDense };

struct Options {
  core::Dtype activation;  // none: the scheme's default (docs/convert.md)
  core::Dtype output;      // none: the default
  int32_t bits = 0;        // 0: derive from the shapes
  int32_t group_size = 0;  // 0: derive; -1: per channel
  bool gptq_v2 = false;
  bool split_gate_up = false;
  bool keep_k_order = false;
  bool asymmetric = false;  // the config says sym: false: zero points are required
  GptqV1Zeros gptq_v1_zeros = GptqV1Zeros::kUnknown;
  CtPacking ct_packing = CtPacking::kUnknown;
  GlobalScaleConvention global_scale = GlobalScaleConvention::kDefault;
  std::vector<int64_t> shard_rows;  // fused per-tensor scales; empty: equal shards
};

// One converted layer; owns its buffers.
struct Layer {
  core::Format format;
  std::vector<uint8_t> codes;  // [E][N][K]
  std::vector<float> scales;   // as quant::canonical_shape says
  std::vector<float> zero_points;
  std::vector<float> global_scale;     // [E]
  std::vector<float> bias;             // [E][N], empty without bias
  std::vector<int32_t> k_permutation;  // [K], empty when K keeps its order
  // Groups (of a row) that lost a value when fold_scale_exponents re-rounded their codes into the
  // exponent window of 8-bit activations (docs/convert.md); reported with the layer, never silent.
  int64_t rerounded_groups = 0;
  // Weights that changed value when requantize_per_channel_for_8bit_activations turned group
  // scales no 8-bit kernel applies (NVFP4's) into 8-bit weights with channel scales; reported too.
  int64_t rerounded_weights = 0;
  // What took bf16 in place of a default f16 because f16 would saturate or flush a value of it
  // ("scales", "bias"; set_scale_dtype, fit_bias_to_output): reported with the layer too.
  std::vector<std::string> widened_to_bf16;

  quant::CanonicalWeight canonical();
  quant::ConstCanonicalWeight canonical() const;
};

// What the conversion of `layer` changed beyond the layout, in one sentence ("" when nothing was
// lost): the note written with the layer (humming.note.<prefix>) and returned by
// hm_converted_layer_info.
std::string conversion_note(const Layer& layer);

// Converts one layer. Tensors are matched by role (docs/convert.md: the last component of the
// name); a missing or unexpected tensor, a bad dtype or shape, or a value the format cannot hold
// fails with hm::Error naming the tensor. The result's format passes core::validate.
Layer convert_layer(Scheme scheme, const std::vector<io::TensorView>& tensors,
                    const Options& options);

// How stack_layers joins converted layers (hm_converted_layer_stack, HM_STACK_*).
enum class StackAxis {
  kExperts,  // one layer of the parts' experts in order (E = the sum of theirs)
  kRows,     // expert by expert, the parts' rows in order (gate and up into gate_up: N = sum)
};
// One layer from `parts` (at least two) that share one format but for E (kExperts) or N (kRows),
// and one K permutation: their canonical buffers (and biases) joined, nothing re-quantized.
// kRows also needs equal global scales per expert and, with block scales, every part but the
// last to end on a block. Fails with hm::Error naming the part and what differs.
Layer stack_layers(const std::vector<const Layer*>& parts, StackAxis axis);

// The tensor roles of a scheme, and the one role that marks a layer in a file (its "anchor").
// Roles join the layer prefix with '.' except for MXFP4, which uses '_'
// ("...experts.gate_up_proj" + "_blocks").
struct SchemeRoles {
  std::vector<std::string> roles;
  std::string anchor;
  char separator = '.';
};
const SchemeRoles& scheme_roles(Scheme scheme);

// Converts a whole safetensors file (hm_convert_file): see docs/convert.md for the output.
// `progress` (may be null) is told after each tensor copied and each layer converted; `cancel`
// (may be null) is asked right after: nonzero throws HM_ERROR_INVALID_STATE, and the unfinished
// output is removed (SafetensorsStreamWriter), so out_path is never half-written.
using FileProgress = void (*)(void* user, const char* tensor, uint64_t done, uint64_t total);
using FileCancel = int32_t (*)(void* user);
struct FileResult {
  int layers = 0;  // layers converted
  int copied = 0;  // tensors copied unchanged
};
FileResult convert_file(Scheme scheme, const std::string& in_path, const std::string& out_path,
                        const Options& options, FileProgress progress, void* user,
                        FileCancel cancel = nullptr, void* cancel_user = nullptr);

}  // namespace hm::schema
