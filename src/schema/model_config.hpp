// A Hugging Face model folder's quantization config (config.json "quantization_config", or
// quantize_config.json / hf_quant_config.json) read into per-layer rules: which scheme converts
// a layer and with which options (bits, group size, symmetry, the tool that wrote it). The
// mapping from each tool's keys is in docs/convert.md ("Model folders").
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "schema/convert.hpp"

namespace hm::schema {

struct LayerRule {
  Scheme scheme = Scheme::kGptq;
  Options options;
  // compressed-tensors targets: "re:<regex>" (matched from the start of the layer name), an
  // exact layer name, or a module class ("Linear", which matches every layer). Empty: all.
  std::vector<std::string> targets;
  std::string description;  // "gptq bits=4 group=128 sym=false writer=gptqmodel"
};

struct ModelQuant {
  std::string method;  // the config's quant_method ("gptq", "compressed-tensors", ...)
  std::string source;  // the file it came from ("config.json", "quantize_config.json", ...)
  nlohmann::json config = nlohmann::json::object();  // the quantization config as read
  std::vector<LayerRule> rules;
  std::vector<std::string> ignore;  // layers left as they are (same target syntax)
};

// Reads the folder's quantization config. No config: a single rule for `forced_scheme` (or
// HM_ERROR_INVALID_ARGUMENT asking for --scheme when there is none). A quant_method or format
// this library does not convert: HM_ERROR_UNSUPPORTED naming it.
ModelQuant read_model_quant(const std::string& dir, const Scheme* forced_scheme);

// What the user passed overrides what the config says (a field at its default leaves it).
void apply_overrides(ModelQuant& quant, const Options& overrides, const Scheme* forced_scheme);

// The rule for a layer, or nullptr when it is ignored or no rule targets it.
const LayerRule* rule_for(const ModelQuant& quant, const std::string& layer);

}  // namespace hm::schema
