// Quantization configs of the tools that write checkpoints -> per-layer rules (model_config.hpp).
// Only what decides the conversion is read; docs/convert.md lists the keys per tool.
#include "schema/model_config.hpp"

#include <climits>
#include <cstdint>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/error.hpp"
#include "core/quote.hpp"

namespace hm::schema {

namespace {

using nlohmann::json;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool read_json(const std::string& path, json& out) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream text;
  text << in.rdbuf();
  try {
    out = json::parse(text.str());
  } catch (const json::exception& e) {
    fail(HM_ERROR_PARSE, core::quoted(path, 200) + " is not valid JSON: " + e.what());
  }
  if (!out.is_object()) fail(HM_ERROR_PARSE, core::quoted(path, 200) + " is not a JSON object");
  return true;
}

// A JSON value as an integer in [lo, hi]: one of another type or out of range fails naming the
// key and the file (a cast would turn bits = 4294967300 into 4).
int32_t checked_int(const json& v, const std::string& key, int64_t lo, int64_t hi,
                    const ModelQuant& q) {
  if (!v.is_number_integer())
    fail(HM_ERROR_PARSE, q.source + ": '" + key + "' is " + v.dump() + ", not an integer");
  const bool in_range =
      v.is_number_unsigned()
          ? v.get<uint64_t>() <= static_cast<uint64_t>(hi) &&
                (lo <= 0 || v.get<uint64_t>() >= static_cast<uint64_t>(lo))
          : v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
  if (!in_range)
    fail(HM_ERROR_PARSE, q.source + ": '" + key + "' is " + v.dump() + ", outside " +
                             std::to_string(lo) + ".." + std::to_string(hi));
  return static_cast<int32_t>(v.get<int64_t>());
}

// config[key] as an integer in [lo, hi] / bool / string, or `fallback` when absent or null. A
// value of the wrong type or range fails naming the key and the file.
int32_t get_int(const json& c, const char* key, int32_t fallback, const ModelQuant& q,
                int64_t lo = -1, int64_t hi = INT32_MAX) {
  if (!c.contains(key) || c[key].is_null()) return fallback;
  return checked_int(c[key], key, lo, hi, q);
}
// Bit widths: 0 (derive) or 1..8; a converter refuses the widths its scheme has no packing for.
int32_t get_bits(const json& c, const char* key, int32_t fallback, const ModelQuant& q) {
  return get_int(c, key, fallback, q, 0, 8);
}
bool get_bool(const json& c, const char* key, bool fallback, const ModelQuant& q) {
  if (!c.contains(key) || c[key].is_null()) return fallback;
  if (!c[key].is_boolean())
    fail(HM_ERROR_PARSE, q.source + ": '" + key + "' is " + c[key].dump() + ", not true/false");
  return c[key].get<bool>();
}
std::string get_string(const json& c, const char* key, const std::string& fallback,
                       const ModelQuant& q) {
  if (!c.contains(key) || c[key].is_null()) return fallback;
  if (!c[key].is_string())
    fail(HM_ERROR_PARSE, q.source + ": '" + key + "' is " + c[key].dump() + ", not a string");
  return c[key].get<std::string>();
}

[[noreturn]] void unsupported(const ModelQuant& q, const std::string& what) {
  fail(HM_ERROR_UNSUPPORTED, q.source + ": " + what +
                                 "; docs/convert.md lists the configs humming convert reads "
                                 "(or pass --scheme and the parameters yourself)");
}

// GPTQ (AutoGPTQ / GPTQModel / transformers): bits, group_size, sym, desc_act,
// checkpoint_format (or format), meta.quantizer.
LayerRule gptq_rule(const json& c, const ModelQuant& q) {
  LayerRule r;
  r.scheme = Scheme::kGptq;
  Options& o = r.options;
  o.bits = get_bits(c, "bits", 0, q);
  o.group_size = get_int(c, "group_size", 0, q);  // absent: derive
  o.asymmetric = !get_bool(c, "sym", true, q);
  const std::string format =
      lower(get_string(c, "checkpoint_format", get_string(c, "format", "gptq", q), q));
  if (format == "gptq_v2")
    o.gptq_v2 = true;
  else if (format != "gptq")
    unsupported(q, "GPTQ checkpoint_format '" + format + "' (only gptq and gptq_v2 are read)");
  std::string writer = "unknown";
  if (c.contains("meta") && c["meta"].is_object() && c["meta"].contains("quantizer")) {
    const json& who = c["meta"]["quantizer"];
    const std::string text = lower(who.is_string() ? who.get<std::string>() : who.dump());
    if (text.find("gptqmodel") != std::string::npos) {
      o.gptq_v1_zeros = GptqV1Zeros::kGptqModel;
      writer = "gptqmodel";
    } else if (text.find("autogptq") != std::string::npos ||
               text.find("auto_gptq") != std::string::npos) {
      o.gptq_v1_zeros = GptqV1Zeros::kAutoGptq;
      writer = "autogptq";
    }
  }
  r.description = "gptq bits=" + std::to_string(o.bits) +
                  " group=" + std::to_string(o.group_size) +
                  (o.asymmetric ? " sym=false" : " sym=true") +
                  (get_bool(c, "desc_act", false, q) ? " desc_act" : "") +
                  (o.gptq_v2 ? " v2" : " v1 writer=" + writer);
  return r;
}

// AutoAWQ / transformers AWQ: bits (w_bit), group_size (q_group_size), zero_point, version.
LayerRule awq_rule(const json& c, const ModelQuant& q) {
  LayerRule r;
  r.scheme = Scheme::kAwq;
  Options& o = r.options;
  o.bits = get_bits(c, "bits", get_bits(c, "w_bit", 4, q), q);
  o.group_size = get_int(c, "group_size", get_int(c, "q_group_size", 0, q), q);
  o.asymmetric = get_bool(c, "zero_point", true, q);
  const std::string version = lower(get_string(c, "version", "gemm", q));
  if (version != "gemm") unsupported(q, "AWQ version '" + version + "' (only GEMM is read)");
  r.description = "awq bits=" + std::to_string(o.bits) + " group=" + std::to_string(o.group_size);
  return r;
}

// compressed-tensors: the version decides the packing of bit widths that do not divide 32
// (dense across words from 0.20 on).
CtPacking ct_packing_of(const std::string& version) {
  int major = 0, minor = 0;
  if (std::sscanf(version.c_str(), "%d.%d", &major, &minor) != 2) return CtPacking::kUnknown;
  return (major > 0 || minor >= 20) ? CtPacking::kDense : CtPacking::kWordAligned;
}

LayerRule ct_rule(const json& group, const std::string& name, const std::string& global_format,
                  CtPacking packing, const ModelQuant& q) {
  LayerRule r;
  const std::string format = lower(get_string(group, "format", global_format, q));
  if (format == "pack-quantized")
    r.scheme = Scheme::kCtPack;
  else if (format == "int-quantized")
    r.scheme = Scheme::kCtInt8;
  else if (format == "float-quantized")
    r.scheme = Scheme::kCtFp8;
  else if (format == "nvfp4-pack-quantized")
    r.scheme = Scheme::kCtNvfp4;
  else
    unsupported(q, "compressed-tensors group '" + name + "' has format '" + format + "'");
  if (group.contains("targets") && group["targets"].is_array())
    for (const json& t : group["targets"])
      if (t.is_string()) r.targets.push_back(t.get<std::string>());
  Options& o = r.options;
  o.ct_packing = packing;
  const json w = group.contains("weights") && group["weights"].is_object() ? group["weights"]
                                                                          : json::object();
  o.bits = get_bits(w, "num_bits", 0, q);
  if (r.scheme != Scheme::kCtPack) o.bits = 0;  // only ct-pack takes a bit width
  o.asymmetric = !get_bool(w, "symmetric", true, q);
  const std::string strategy = lower(get_string(w, "strategy", "", q));
  if (strategy == "group" || strategy == "tensor_group") {
    o.group_size = get_int(w, "group_size", 0, q);
  } else if (strategy == "channel") {
    o.group_size = -1;
  } else if (strategy == "block") {
    const json& b = w.contains("block_structure") ? w["block_structure"] : json();
    if (!b.is_array() || b.size() != 2 || b[0] != b[1])
      unsupported(q, "compressed-tensors group '" + name + "' has block_structure " + b.dump() +
                         " (square blocks only)");
    o.group_size = checked_int(b[0], "block_structure", 1, INT32_MAX, q);
  }
  if (r.scheme == Scheme::kCtNvfp4) o.group_size = 0;  // fixed g16; nothing to choose
  r.description = std::string(scheme_name(r.scheme)) + " group '" + name + "'" +
                  (o.bits ? " bits=" + std::to_string(o.bits) : "") +
                  (strategy.empty() ? "" : " " + strategy) +
                  (o.group_size > 0 ? "=" + std::to_string(o.group_size) : "") +
                  (o.asymmetric ? " sym=false" : "");
  return r;
}

void compressed_tensors(const json& c, ModelQuant& q) {
  const std::string format = get_string(c, "format", "", q);
  const CtPacking packing = ct_packing_of(get_string(c, "version", "", q));
  if (!c.contains("config_groups") || !c["config_groups"].is_object() ||
      c["config_groups"].empty())
    unsupported(q, "a compressed-tensors config without config_groups");
  for (const auto& [name, group] : c["config_groups"].items())
    q.rules.push_back(ct_rule(group, name, format, packing, q));
  if (c.contains("ignore") && c["ignore"].is_array())
    for (const json& t : c["ignore"])
      if (t.is_string()) q.ignore.push_back(t.get<std::string>());
}

LayerRule simple_rule(Scheme scheme, const std::string& description) {
  LayerRule r;
  r.scheme = scheme;
  r.description = description;
  return r;
}

void modelopt(const json& c, ModelQuant& q) {
  const std::string algo = lower(get_string(c, "quant_algo", "", q));
  if (algo == "fp8")
    q.rules.push_back(simple_rule(Scheme::kFp8, "fp8 (modelopt per-tensor)"));
  else if (algo == "nvfp4")
    q.rules.push_back(simple_rule(Scheme::kNvfp4, "nvfp4 (modelopt)"));
  else
    unsupported(q, "ModelOpt quant_algo '" + algo + "'");
  for (const char* key : {"exclude_modules", "ignore"})
    if (c.contains(key) && c[key].is_array())
      for (const json& t : c[key])
        if (t.is_string()) q.ignore.push_back(t.get<std::string>());
}

void read_config(const json& c, ModelQuant& q) {
  q.config = c;
  q.method = lower(get_string(c, "quant_method", "", q));
  if (q.method == "gptq") {
    q.rules.push_back(gptq_rule(c, q));
  } else if (q.method == "awq") {
    q.rules.push_back(awq_rule(c, q));
  } else if (q.method == "compressed-tensors") {
    compressed_tensors(c, q);
  } else if (q.method == "fp8") {
    LayerRule r = simple_rule(Scheme::kFp8, "fp8");
    if (c.contains("weight_block_size") && !c["weight_block_size"].is_null()) {
      const json& b = c["weight_block_size"];
      if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || b[0] != b[1])
        unsupported(q, "fp8 weight_block_size " + b.dump() + " (square blocks only)");
      r.options.group_size = checked_int(b[0], "weight_block_size", 1, INT32_MAX, q);
      r.description += " block=" + std::to_string(r.options.group_size);
    }
    q.rules.push_back(r);
  } else if (q.method == "modelopt") {
    modelopt(c, q);
  } else if (q.method == "mxfp4") {
    q.rules.push_back(simple_rule(Scheme::kMxfp4, "mxfp4"));
  } else if (q.method == "bitnet") {
    q.rules.push_back(simple_rule(Scheme::kBitnet, "bitnet"));
  } else {
    unsupported(q, "quant_method '" + q.method + "'");
  }
  if (q.method != "compressed-tensors" && c.contains("modules_to_not_convert") &&
      c["modules_to_not_convert"].is_array())
    for (const json& t : c["modules_to_not_convert"])
      if (t.is_string()) q.ignore.push_back(t.get<std::string>());
}

// The getters above name the key of a mistyped value; any other JSON access that a config of
// an unexpected shape trips is still the config's fault, not an internal error.
void from_config(const json& c, ModelQuant& q) {
  try {
    read_config(c, q);
  } catch (const json::exception& e) {
    fail(HM_ERROR_PARSE, q.source + ": a value has an unexpected type (" + e.what() + ")");
  }
}

// A target matches a layer: "re:" regex from the start, the exact name, a dotted suffix of it
// ("lm_head"), or a class name (capitalized, e.g. "Linear": every layer).
int target_match(const std::string& target, const std::string& layer) {
  if (target.rfind("re:", 0) == 0) {
    try {
      const std::regex re(target.substr(3));
      return std::regex_search(layer, re, std::regex_constants::match_continuous) ? 2 : 0;
    } catch (const std::regex_error&) {
      fail(HM_ERROR_PARSE, "the target " + core::quoted(target, 200) + " is not a valid regex");
    }
  }
  if (target == layer) return 2;
  if (layer.size() > target.size() &&
      layer.compare(layer.size() - target.size(), target.size(), target) == 0 &&
      layer[layer.size() - target.size() - 1] == '.')
    return 2;
  if (!target.empty() && std::isupper(static_cast<unsigned char>(target[0]))) return 1;
  return 0;
}

}  // namespace

ModelQuant read_model_quant(const std::string& dir, const Scheme* forced_scheme) {
  ModelQuant q;
  json config, other;
  const bool has_config = read_json(dir + "/config.json", config);
  if (has_config && config.contains("quantization_config") &&
      config["quantization_config"].is_object()) {
    q.source = "config.json quantization_config";
    from_config(config["quantization_config"], q);
  } else if (read_json(dir + "/quantize_config.json", other)) {
    q.source = "quantize_config.json";
    if (!other.contains("quant_method")) other["quant_method"] = "gptq";  // AutoGPTQ's file
    from_config(other, q);
  } else if (read_json(dir + "/hf_quant_config.json", other) && other.contains("quantization")) {
    q.source = "hf_quant_config.json";
    json c = other["quantization"];
    if (!c.is_object())
      fail(HM_ERROR_PARSE, q.source + ": 'quantization' is " + c.dump() + ", not an object");
    c["quant_method"] = "modelopt";
    from_config(c, q);
  } else if (forced_scheme) {
    q.source = "--scheme";
    q.method = scheme_name(*forced_scheme);
    q.rules.push_back(simple_rule(*forced_scheme, scheme_name(*forced_scheme)));
  } else {
    fail(HM_ERROR_INVALID_ARGUMENT,
         core::quoted(dir, 200) +
             " has no quantization config (config.json quantization_config, "
             "quantize_config.json or hf_quant_config.json); pass the scheme (--scheme)");
  }
  return q;
}

void apply_overrides(ModelQuant& quant, const Options& u, const Scheme* forced_scheme) {
  for (LayerRule& r : quant.rules) {
    Options& o = r.options;
    if (forced_scheme) r.scheme = *forced_scheme;
    if (!u.activation.is_none()) o.activation = u.activation;
    if (!u.output.is_none()) o.output = u.output;
    if (u.bits != 0) o.bits = u.bits;
    if (u.group_size != 0) o.group_size = u.group_size;
    o.gptq_v2 |= u.gptq_v2;
    o.split_gate_up |= u.split_gate_up;
    o.keep_k_order |= u.keep_k_order;
    o.asymmetric |= u.asymmetric;
    if (u.gptq_v1_zeros != GptqV1Zeros::kUnknown) o.gptq_v1_zeros = u.gptq_v1_zeros;
    if (u.ct_packing != CtPacking::kUnknown) o.ct_packing = u.ct_packing;
    if (u.global_scale != GlobalScaleConvention::kDefault) o.global_scale = u.global_scale;
    if (!u.shard_rows.empty()) o.shard_rows = u.shard_rows;
  }
}

const LayerRule* rule_for(const ModelQuant& quant, const std::string& layer) {
  for (const std::string& t : quant.ignore)
    if (target_match(t, layer) == 2) return nullptr;
  // An exact or regex target outranks a class name (as the engines that load these do).
  const LayerRule* best = nullptr;
  int best_rank = 0;
  for (const LayerRule& r : quant.rules) {
    int rank = r.targets.empty() ? 1 : 0;
    for (const std::string& t : r.targets) rank = std::max(rank, target_match(t, layer));
    if (rank > best_rank) best = &r, best_rank = rank;
  }
  return best;
}

}  // namespace hm::schema
