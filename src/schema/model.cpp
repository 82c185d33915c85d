// Model-folder conversion (model.hpp): plan every shard (which layers, which scheme and options
// from the config), group the experts to stack when asked, then convert shard by shard into a
// staging directory, layers on a pool of threads while the calling thread writes them in file
// order, copy the other files, write the index and config, and publish the directory atomically.
#include "schema/model.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/quote.hpp"
#include "io/directory.hpp"
#include "schema/file.hpp"
#include "schema/model_config.hpp"
#include "schema/tensors.hpp"

namespace hm::schema {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kIndexName = "model.safetensors.index.json";
// Files that describe the source quantization: replaced by the new config.json, not copied.
const std::set<std::string> kSourceConfigs = {"config.json", "quantize_config.json",
                                              "hf_quant_config.json", kIndexName};

struct PlannedLayer {
  FoundLayer found;
  const LayerRule* rule = nullptr;
  // With stacking: the StackGroup this layer is a part of (-1: written as itself) and its place
  // in the group's order.
  int group = -1;
  size_t slot = 0;
};

// Layers joined into one output layer (docs/convert.md "Stacking experts"): the experts
// <base>.experts.<i>.<proj>, i = 0 .. E-1, as <base>.experts.<proj>; with gate and up joined,
// the E gate experts then the E up experts as <base>.experts.gate_up_proj (w1 and w3: w13).
struct StackGroup {
  std::string prefix;                // the output layer
  std::vector<std::string> members;  // the layers, in stacking order
  int64_t experts = 0;
  bool gate_up = false;  // members hold E gate experts, then E up experts, joined by rows
  size_t shard = 0;      // written into the shard of its last member (where it completes)
  // Filled while writing.
  std::vector<std::optional<Layer>> parts;
  size_t taken = 0;
  uint64_t bytes = 0;  // input bytes of the members
};

// A shard and what is written into its output: the layers whose first tensor (in the model's
// order) it holds, each with all its tensors, wherever the checkpoint's writer put them.
struct ShardPlan {
  std::string name;  // file name inside the folder
  std::unique_ptr<io::SafetensorsFile> file;
  std::vector<PlannedLayer> layers;  // in the order the file reaches them
  std::map<const io::TensorView*, size_t> layer_of;  // this file's tensors of those layers
  std::set<const io::TensorView*> elsewhere;  // this file's tensors of layers written elsewhere
  uint64_t bytes = 0;
};

json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(HM_ERROR_IO, "cannot read " + core::quoted(path, 200));
  std::stringstream text;
  text << in.rdbuf();
  try {
    return json::parse(text.str());
  } catch (const json::exception& e) {
    fail(HM_ERROR_PARSE, core::quoted(path, 200) + " is not valid JSON: " + e.what());
  }
}

// The shards: the index's files, else model.safetensors, else every *.safetensors.
std::vector<std::string> shard_names(const std::string& dir, json& index) {
  std::set<std::string> names;
  if (fs::exists(dir + "/" + kIndexName)) {
    index = read_json_file(dir + "/" + kIndexName);
    if (!index.contains("weight_map") || !index["weight_map"].is_object())
      fail(HM_ERROR_PARSE, std::string(kIndexName) + " has no weight_map object");
    for (const auto& [tensor, file] : index["weight_map"].items()) {
      if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos)
        fail(HM_ERROR_PARSE, std::string(kIndexName) + ": the file of tensor " +
                                 core::quoted(tensor, 120) + " is " + file.dump() +
                                 ", not a file name in the folder");
      names.insert(file.get<std::string>());
    }
  } else if (fs::exists(dir + "/model.safetensors")) {
    names.insert("model.safetensors");
  } else {
    for (const fs::directory_entry& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".safetensors") names.insert(e.path().filename().string());
  }
  if (names.empty())
    fail(HM_ERROR_INVALID_ARGUMENT,
         core::quoted(dir, 200) + " holds no .safetensors weights (nor an index naming them)");
  return {names.begin(), names.end()};
}

// Opens every shard (checking the index against what each holds), finds the config's layers
// across the whole model, and gives each layer to the shard of its first tensor: a layer the
// checkpoint's writer split between two shards (Hugging Face shards by size, tensor by tensor)
// is converted whole and written there.
std::vector<ShardPlan> plan_model(const std::string& dir, const std::vector<std::string>& names,
                                  const ModelQuant& quant, const json& index) {
  std::vector<ShardPlan> plans;
  TensorIndex all;
  std::map<const io::TensorView*, size_t> shard_of;
  for (const std::string& name : names) {
    ShardPlan sp;
    sp.name = name;
    sp.file = std::make_unique<io::SafetensorsFile>(dir + "/" + name);
    if (index.is_object())
      for (const auto& [tensor, where] : index["weight_map"].items())
        if (where == name && !sp.file->find(tensor))
          fail(HM_ERROR_PARSE, std::string(kIndexName) + " puts tensor " +
                                   core::quoted(tensor, 120) + " in " + core::quoted(name, 120) +
                                   ", which does not hold it");
    all.add(*sp.file);
    for (const io::TensorView& t : sp.file->tensors()) {
      sp.bytes += t.bytes;
      shard_of[&t] = plans.size();
    }
    plans.push_back(std::move(sp));
  }
  std::set<Scheme> schemes;
  for (const LayerRule& r : quant.rules) schemes.insert(r.scheme);
  std::set<const io::TensorView*> claimed;
  std::map<std::string, PlannedLayer> by_prefix;
  for (Scheme s : schemes) {
    std::set<const io::TensorView*> seen;
    for (FoundLayer& l : find_layers(s, all, seen)) {
      const LayerRule* rule = rule_for(quant, l.prefix);
      if (!rule || rule->scheme != s || by_prefix.count(l.prefix)) continue;
      for (const io::TensorView* m : l.members) claimed.insert(m);
      const std::string prefix = l.prefix;
      by_prefix[prefix] = {std::move(l), rule};
    }
  }
  if (const std::string list =
          unclaimed_quantized(all, claimed, std::vector<Scheme>(schemes.begin(), schemes.end()));
      !list.empty()) {
    fail(HM_ERROR_UNSUPPORTED,
         core::quoted(dir, 200) + " holds quantized tensors that no layer of the config (" +
             quant.source + ") claims: " + list +
             "; a layer the config ignores or does not target, or a missing companion tensor "
             "(docs/convert.md)");
  }
  // Each layer to the shard of its first tensor, in the order the shards reach them.
  std::map<const io::TensorView*, std::string> prefix_of;
  for (const auto& [prefix, layer] : by_prefix)
    for (const io::TensorView* m : layer.found.members) prefix_of[m] = prefix;
  std::set<std::string> out_names;
  for (size_t si = 0; si < plans.size(); ++si) {
    ShardPlan& sp = plans[si];
    for (const io::TensorView& t : sp.file->tensors()) {
      const auto p = prefix_of.find(&t);
      if (p == prefix_of.end()) continue;
      const auto l = by_prefix.find(p->second);
      if (l == by_prefix.end()) continue;  // already placed
      for (const io::TensorView* m : l->second.found.members) {
        if (shard_of.at(m) == si)
          sp.layer_of[m] = sp.layers.size();
        else
          plans[shard_of.at(m)].elsewhere.insert(m);
      }
      for (const char* suffix : kOutputSuffixes) out_names.insert(l->first + suffix);
      sp.layers.push_back(std::move(l->second));
      by_prefix.erase(l);
    }
  }
  for (const io::TensorView* t : all.tensors())
    if (!claimed.count(t) && out_names.count(t->name))
      fail(HM_ERROR_UNSUPPORTED,
           "tensor " + core::quoted(t->name, 120) +
               " would collide with a converted layer's output tensor of the same name");
  return plans;
}

// "<base>.experts.<i>.<proj>" (i decimal, no leading zero; proj one name component) as
// {"<base>.experts", proj, i}; nullopt for any other prefix (a shared expert, a stacked layer).
struct ExpertName {
  std::string base, proj;
  int64_t index = 0;
};
std::optional<ExpertName> expert_name(const std::string& prefix) {
  static const std::string kMark = ".experts.";
  const size_t at = prefix.rfind(kMark);
  if (at == std::string::npos) return std::nullopt;
  const size_t first = at + kMark.size(), dot = prefix.find('.', first);
  if (dot == std::string::npos) return std::nullopt;
  const std::string digits = prefix.substr(first, dot - first), proj = prefix.substr(dot + 1);
  if (digits.empty() || digits.size() > 9 || (digits.size() > 1 && digits[0] == '0') ||
      digits.find_first_not_of("0123456789") != std::string::npos || proj.empty() ||
      proj.find('.') != std::string::npos)
    return std::nullopt;
  return ExpertName{prefix.substr(0, at + kMark.size() - 1), proj, std::stoll(digits)};
}

// The groups to stack (ModelRequest::stack_experts), their members marked in the plans. Every
// <base>.experts.<i>.<proj> layer of the model belongs to one; a group must hold experts
// 0 .. E-1, E >= 2, and with join_gate_up, gate_proj and up_proj (w1 and w3) of one base as many.
std::vector<StackGroup> plan_groups(std::vector<ShardPlan>& plans, bool join_gate_up) {
  struct Place {
    size_t shard, layer;
  };
  std::map<std::pair<std::string, std::string>, std::map<int64_t, Place>> found;
  std::set<std::string> outputs;   // output names that are not the groups'
  std::set<std::string> prefixes;  // the groups' output layers
  for (size_t si = 0; si < plans.size(); ++si) {
    for (size_t li = 0; li < plans[si].layers.size(); ++li) {
      const std::string& prefix = plans[si].layers[li].found.prefix;
      const std::optional<ExpertName> e = expert_name(prefix);
      if (!e) {
        for (const char* suffix : kOutputSuffixes) outputs.insert(prefix + suffix);
        continue;
      }
      // Layer names are unique: tensor names are across the model (TensorIndex).
      const bool fresh = found[{e->base, e->proj}].emplace(e->index, Place{si, li}).second;
      HM_REQUIRE(fresh, HM_ERROR_INTERNAL, "layer " + prefix + " planned twice");
    }
    for (const io::TensorView& t : plans[si].file->tensors())
      if (!plans[si].layer_of.count(&t) && !plans[si].elsewhere.count(&t)) outputs.insert(t.name);
  }
  if (found.empty())
    fail(HM_ERROR_UNSUPPORTED,
         "stacking experts was asked for, but no converted layer is named "
         "<...>.experts.<i>.<proj> (experts stored one layer each); convert without it");
  std::vector<StackGroup> groups;
  auto member = [&](const std::string& base, const std::string& proj, int64_t i) {
    return base + "." + std::to_string(i) + "." + proj;
  };
  auto add = [&](const std::string& prefix, const std::string& base,
                 const std::vector<std::string>& projs) {
    StackGroup g;
    g.prefix = prefix;
    g.experts = static_cast<int64_t>(found[{base, projs[0]}].size());
    g.gate_up = projs.size() == 2;
    // What can be known before converting (a dry run stops here): one rule (scheme and
    // parameters) for every part, and a size the format can hold. Formats and K orders that
    // differ after conversion are refused when the group is joined.
    const PlannedLayer* first = nullptr;
    for (const std::string& proj : projs) {
      for (const auto& [i, place] : found[{base, proj}]) {
        PlannedLayer& l = plans[place.shard].layers[place.layer];
        if (first == nullptr) first = &l;
        if (l.rule != first->rule)
          fail(HM_ERROR_UNSUPPORTED,
               core::quoted(l.found.prefix, 120) + " is converted with " + l.rule->description +
                   ", but " + core::quoted(first->found.prefix, 120) + " with " +
                   first->rule->description + "; the layers stacked into " +
                   core::quoted(prefix, 120) + " need one scheme and one set of parameters");
        l.group = static_cast<int>(groups.size());
        l.slot = g.members.size();
        g.members.push_back(l.found.prefix);
        g.shard = std::max(g.shard, place.shard);
      }
      found.erase({base, proj});
    }
    g.parts.resize(g.members.size());
    if (g.experts > HM_MAX_EXPERTS)
      fail(HM_ERROR_UNSUPPORTED, core::quoted(g.prefix, 120) + " would hold " +
                                     std::to_string(g.experts) + " experts; a layer holds at "
                                     "most HM_MAX_EXPERTS = " + std::to_string(HM_MAX_EXPERTS));
    if (!prefixes.insert(g.prefix).second)
      fail(HM_ERROR_UNSUPPORTED, "two groups of experts would both be written as " +
                                     core::quoted(g.prefix, 120) +
                                     " (a model with both fused and separate projections?)");
    for (const char* suffix : kOutputSuffixes)
      if (outputs.count(g.prefix + suffix))
        fail(HM_ERROR_UNSUPPORTED, "the stacked layer " + core::quoted(g.prefix, 120) +
                                       " would write " + core::quoted(g.prefix + suffix, 120) +
                                       ", which the model already has");
    groups.push_back(std::move(g));
  };
  for (const auto& [key, experts] : found) {
    const int64_t count = static_cast<int64_t>(experts.size());
    const std::string name = member(key.first, key.second, 0);
    if (count < 2)
      fail(HM_ERROR_UNSUPPORTED, core::quoted(name, 120) + " is the only expert of its kind; "
                                 "stacking needs at least two");
    for (int64_t i = 0; i < count; ++i)
      if (!experts.count(i))
        fail(HM_ERROR_UNSUPPORTED,
             core::quoted(member(key.first, key.second, i), 120) + " is missing: " +
                 std::to_string(count) + " experts were found, numbered up to " +
                 std::to_string(experts.rbegin()->first) +
                 "; stacking needs experts 0 .. E-1 (a model split by expert is not joined)");
  }
  static const std::pair<const char*, const char*> kGateUp[] = {{"gate_proj", "up_proj"},
                                                               {"w1", "w3"}};
  static const char* const kJoined[] = {"gate_up_proj", "w13"};
  if (join_gate_up) {
    for (size_t j = 0; j < 2; ++j) {
      std::set<std::string> bases;
      for (const auto& [key, experts] : found)
        if (key.second == kGateUp[j].first && found.count({key.first, kGateUp[j].second}))
          bases.insert(key.first);
      for (const std::string& base : bases) {
        const size_t gate = found[{base, kGateUp[j].first}].size(),
                     up = found[{base, kGateUp[j].second}].size();
        if (gate != up)
          fail(HM_ERROR_UNSUPPORTED, core::quoted(base, 120) + " has " + std::to_string(gate) +
                                         " " + kGateUp[j].first + " experts but " +
                                         std::to_string(up) + " " + kGateUp[j].second +
                                         " experts; they cannot be joined");
        add(base + "." + kJoined[j], base, {kGateUp[j].first, kGateUp[j].second});
      }
    }
  }
  while (!found.empty()) {
    const auto [base, proj] = found.begin()->first;
    add(base + "." + proj, base, {proj});
  }
  return groups;
}

class Reporter {
 public:
  Reporter(const ModelRequest& r, uint64_t total) : r_(r), total_(total) {}
  void operator()(ModelEvent kind, const std::string& name, const std::string& detail,
                  uint64_t bytes) {
    done_ += bytes;
    if (r_.progress &&
        r_.progress(r_.user, static_cast<int32_t>(kind), name.c_str(),
                    detail.empty() ? nullptr : detail.c_str(), done_, total_) != 0)
      fail(HM_ERROR_INVALID_STATE,
           "cancelled by the progress callback; nothing was written to " +
               core::quoted(r_.out_dir, 200));
  }

 private:
  const ModelRequest& r_;
  uint64_t total_, done_ = 0;
};

Options layer_options(const PlannedLayer& l) {
  Options o = l.rule->options;
  // gate/up de-interleaving only applies to the fused gate_up projection (as in files).
  if (l.found.prefix.find("gate_up") == std::string::npos) o.split_gate_up = false;
  return o;
}

// A converted layer as the writer takes it: packed when written as itself, canonical (to be
// stacked with the rest of its group) otherwise.
struct Converted {
  std::optional<PackedLayer> packed;
  std::optional<Layer> layer;
};

Converted convert_planned(const PlannedLayer& l, int pack_threads) {
  std::vector<io::TensorView> members;
  for (const io::TensorView* m : l.found.members) members.push_back(*m);
  Layer layer = convert_layer(l.rule->scheme, members, layer_options(l));
  Converted c;
  if (l.group >= 0)
    c.layer = std::move(layer);
  else
    c.packed = pack_layer(l.found.prefix, layer, pack_threads);
  return c;
}

// Converts layers on `workers` threads, at most `window` ahead of the writer, and hands them
// out in plan order. Stops the threads (after their current layer) when destroyed.
class LayerPipeline {
 public:
  LayerPipeline(const ShardPlan& sp, int threads)
      : sp_(sp), slots_(sp.layers.size()), errors_(sp.layers.size()) {
    const int workers = static_cast<int>(std::min<size_t>(threads, sp.layers.size()));
    inner_ = std::max(1, threads / std::max(1, workers));
    window_ = static_cast<size_t>(2 * std::max(1, workers));
    // A process out of threads keeps the workers it got (none: take() converts on the calling
    // thread); an exception here would leave joinable threads behind and end the process.
    if (workers > 1) {
      for (int w = 0; w < workers; ++w) {
        try {
          pool_.emplace_back([this] { work(); });
        } catch (const std::system_error&) {
          break;
        }
      }
    }
  }
  ~LayerPipeline() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : pool_) t.join();
  }

  Converted take(size_t i) {
    if (pool_.empty()) return convert_planned(sp_.layers[i], inner_);
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return slots_[i].has_value() || errors_[i]; });
    if (errors_[i]) std::rethrow_exception(errors_[i]);
    Converted p = std::move(*slots_[i]);
    slots_[i].reset();
    ++taken_;
    lock.unlock();
    cv_.notify_all();
    return p;
  }

 private:
  void work() {
    ThreadLimit limit(inner_);
    for (;;) {
      size_t i;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return stop_ || next_ >= slots_.size() || next_ < taken_ + window_; });
        if (stop_ || next_ >= slots_.size()) return;
        i = next_++;
      }
      std::optional<Converted> p;
      std::exception_ptr error;
      try {
        p = convert_planned(sp_.layers[i], inner_);
      } catch (...) {
        error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        slots_[i] = std::move(p);
        errors_[i] = error;
      }
      cv_.notify_all();
    }
  }

  const ShardPlan& sp_;
  int inner_ = 1;
  size_t window_ = 2, next_ = 0, taken_ = 0;
  bool stop_ = false;
  std::vector<std::optional<Converted>> slots_;
  std::vector<std::exception_ptr> errors_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::thread> pool_;
};

// What the writer of every shard shares: the request, the progress, the summary, the index and
// config being built, and the stack groups, whose parts can come from several shards.
struct Output {
  const ModelRequest& request;
  int threads;
  Reporter& report;
  ModelResult& result;
  json& weight_map;
  json& formats;
  std::vector<StackGroup>& groups;
};

// Joins a complete group's parts (experts, then gate and up by rows), freeing each part once it
// is copied: a group holds at most twice its parts' canonical bytes (joining gate and up too).
Layer stack_group(StackGroup& g) {
  auto stack = [&](size_t first, size_t count) {
    std::vector<const Layer*> parts;
    for (size_t i = first; i < first + count; ++i) parts.push_back(&*g.parts[i]);
    Layer joined = stack_layers(parts, StackAxis::kExperts);
    for (size_t i = first; i < first + count; ++i) g.parts[i].reset();
    return joined;
  };
  try {
    Layer out;
    if (g.gate_up) {
      const Layer gate = stack(0, g.experts), up = stack(g.experts, g.experts);
      out = stack_layers({&gate, &up}, StackAxis::kRows);
    } else {
      out = stack(0, g.members.size());
    }
    return out;
  } catch (const Error& e) {
    // The parts are numbered; say which layers they are.
    fail(e.status(), "stacking " + core::quoted(g.members.front(), 120) + " ... " +
                         core::quoted(g.members.back(), 120) + " into " +
                         core::quoted(g.prefix, 120) + ": " + e.what());
  }
}

void write_layer(io::SafetensorsStreamWriter& writer, const PackedLayer& p, const ShardPlan& sp,
                 Output& o, std::string& detail, const char* scheme) {
  write_packed(writer, p);
  for (const PackedLayer::Tensor& pt : p.tensors) o.weight_map[pt.name] = sp.name;
  o.formats[p.prefix] = p.format;
  o.result.bytes_out += p.bytes();
  detail = std::string(scheme) + ": " + p.format;
  if (!p.note.empty()) detail += "; " + p.note;
}

void write_shard(const ShardPlan& sp, size_t shard, const std::string& out_path, Output& o) {
  const ModelRequest& r = o.request;
  const io::SafetensorsFile& file = *sp.file;
  std::map<std::string, std::string> metadata;
  for (const auto& [k, v] : file.metadata())
    if (k.rfind("humming.", 0) != 0) metadata[k] = v;
  std::set<std::string> schemes;
  for (const PlannedLayer& l : sp.layers) schemes.insert(scheme_name(l.rule->scheme));
  std::string scheme_list;
  for (const std::string& s : schemes) scheme_list += (scheme_list.empty() ? "" : ",") + s;
  metadata["humming.scheme"] = scheme_list;
  metadata["humming.layout"] = "1";
  uint64_t reserve = 64;
  for (const auto& [k, v] : metadata) reserve += io::SafetensorsStreamWriter::metadata_bound(k, v);
  for (const PlannedLayer& l : sp.layers)
    if (l.group < 0) reserve += packed_header_bound(l.found.prefix);
  for (const StackGroup& g : o.groups)
    if (g.shard == shard) reserve += packed_header_bound(g.prefix);
  for (const io::TensorView& t : file.tensors())
    if (!sp.layer_of.count(&t) && !sp.elsewhere.count(&t))
      reserve += io::SafetensorsStreamWriter::entry_bound(t.name, t.shape.size());

  std::optional<io::SafetensorsStreamWriter> writer;
  std::optional<LayerPipeline> pipeline;
  if (!r.dry_run) {
    writer.emplace(out_path, reserve);
    for (const auto& [k, v] : metadata) writer->set_metadata(k, v);
    pipeline.emplace(sp, o.threads);
  }
  std::vector<bool> written(sp.layers.size(), false);
  for (const io::TensorView& t : file.tensors()) {
    if (sp.elsewhere.count(&t)) continue;  // converted with its layer, in another shard
    auto it = sp.layer_of.find(&t);
    if (it == sp.layer_of.end()) {
      if (writer) writer->append(t.name, t.dtype, t.shape, t.data, t.bytes);
      o.weight_map[t.name] = sp.name;
      ++o.result.tensors;
      o.result.bytes_out += t.bytes;
      o.report(ModelEvent::kTensor, t.name, "", t.bytes);
      continue;
    }
    if (written[it->second]) continue;
    written[it->second] = true;
    const PlannedLayer& l = sp.layers[it->second];
    uint64_t bytes = 0;
    for (const io::TensorView* m : l.found.members) bytes += m->bytes;
    const char* scheme = scheme_name(l.rule->scheme);
    std::string detail = l.rule->description;
    if (l.group < 0) {
      if (writer) write_layer(*writer, *pipeline->take(it->second).packed, sp, o, detail, scheme);
      ++o.result.layers;
      o.report(ModelEvent::kLayer, l.found.prefix, detail, bytes);
      continue;
    }
    // A part of a stack group: kept until the group's last part, then written as one layer.
    StackGroup& g = o.groups[l.group];
    g.bytes += bytes;
    if (writer) g.parts[l.slot] = std::move(pipeline->take(it->second).layer);
    if (++g.taken < g.members.size()) continue;
    if (writer) write_layer(*writer, pack_layer(g.prefix, stack_group(g), o.threads), sp, o,
                            detail, scheme);
    else
      detail += "; " + std::to_string(g.members.size()) + " layers stacked";
    ++o.result.layers;
    o.report(ModelEvent::kLayer, g.prefix, detail, g.bytes);
  }
  if (writer) writer->finish();
}

// Regular files and folders of the input other than the weights and the quantization configs,
// in name order. Hidden entries (".git", ".cache") are left out.
std::vector<fs::path> other_entries(const std::string& dir, const std::set<std::string>& shards) {
  std::vector<fs::path> out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name[0] == '.' || shards.count(name) || kSourceConfigs.count(name))
      continue;
    if (e.path().extension() == ".safetensors") continue;  // not in the index: not the model's
    out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Walks one entry of the input folder, following symlinks: a regular file, or a folder whose
// entries it walks in name order. Copies it to `to` unless `to` is empty; returns its bytes.
// Whatever cannot be copied fails naming it (a dangling symlink, a socket or device, a symlink
// back into a folder being walked): a model copied without its tokenizer or with half its assets
// must not look complete. `walking` holds the canonical paths of the folders above `from`.
uint64_t walk_entry(const fs::path& from, const fs::path& to, std::vector<fs::path>& walking) {
  std::error_code ec;
  const fs::file_status st = fs::status(from, ec);  // through symlinks
  if (!fs::exists(st)) {
    std::error_code link_ec;
    if (fs::is_symlink(fs::symlink_status(from, link_ec)))
      fail(HM_ERROR_IO, "cannot copy " + core::quoted(from.string(), 200) +
                            ": it is a symlink to " +
                            core::quoted(fs::read_symlink(from, link_ec).string(), 200) +
                            ", which does not exist (a missing blob?); restore or remove it");
    fail(HM_ERROR_IO, "cannot copy " + core::quoted(from.string(), 200) + ": " +
                          (ec ? ec.message() : std::string("it does not exist")));
  }
  if (fs::is_regular_file(st)) {
    if (!to.empty()) return io::copy_file_synced(from.string(), to.string());
    return fs::file_size(from);
  }
  if (!fs::is_directory(st))
    fail(HM_ERROR_IO, "cannot copy " + core::quoted(from.string(), 200) +
                          ": it is neither a file nor a folder (a socket, pipe or device); "
                          "remove it from the model folder");
  const fs::path canonical = fs::canonical(from);
  if (std::find(walking.begin(), walking.end(), canonical) != walking.end())
    fail(HM_ERROR_IO, "cannot copy " + core::quoted(from.string(), 200) +
                          ": it leads back to " + core::quoted(canonical.string(), 200) +
                          ", a folder that contains it (a symlink loop: the copy would never end); "
                          "remove the symlink");
  walking.push_back(canonical);
  if (!to.empty()) fs::create_directories(to);
  std::vector<fs::path> children;
  for (const fs::directory_entry& e : fs::directory_iterator(from)) children.push_back(e.path());
  std::sort(children.begin(), children.end());
  uint64_t total = 0;
  for (const fs::path& c : children)
    total += walk_entry(c, to.empty() ? to : to / c.filename(), walking);
  walking.pop_back();
  return total;
}

uint64_t entry_bytes(const fs::path& p) {
  std::vector<fs::path> walking;
  return walk_entry(p, fs::path(), walking);
}

uint64_t copy_entry(const fs::path& from, const fs::path& to) {
  std::vector<fs::path> walking;
  return walk_entry(from, to, walking);
}

void check_paths(const ModelRequest& r, std::string& in, std::string& out) {
  in = io::absolute_path(r.in_dir);
  out = io::absolute_path(r.out_dir);
  if (!fs::is_directory(in))
    fail(HM_ERROR_IO, core::quoted(r.in_dir, 200) + " is not a folder; for one .safetensors file "
                                                     "use --scheme with --in/--out");
  if (io::path_within(out, in) || io::path_within(in, out))
    fail(HM_ERROR_INVALID_ARGUMENT,
         "the output folder " + core::quoted(out, 200) + " and the input " +
             core::quoted(in, 200) + " overlap; write the model somewhere else");
  if (!r.dry_run && !r.force && fs::exists(fs::symlink_status(out)))
    fail(HM_ERROR_IO, core::quoted(out, 200) + " exists; choose a new folder or pass --force");
}

}  // namespace

std::vector<std::string> shard_files(const std::string& dir) {
  json index;
  return shard_names(dir, index);
}

ModelResult convert_model(const ModelRequest& r) {
  const auto start = std::chrono::steady_clock::now();
  if (r.join_gate_up && !r.stack_experts)
    fail(HM_ERROR_INVALID_ARGUMENT, "joining gate and up works on stacked experts; ask for "
                                    "stacking experts too (--stack-experts)");
  std::string in, out;
  check_paths(r, in, out);
  ModelQuant quant = read_model_quant(in, r.scheme);
  apply_overrides(quant, r.overrides, r.scheme);
  json index;
  const std::vector<std::string> names = shard_names(in, index);
  std::vector<ShardPlan> plans = plan_model(in, names, quant, index);
  size_t layers = 0;
  for (const ShardPlan& sp : plans) layers += sp.layers.size();
  if (layers == 0)
    fail(HM_ERROR_UNSUPPORTED, core::quoted(in, 200) + " holds no layer that the config (" +
                                   quant.source + ") describes; check the config or --scheme");
  std::vector<StackGroup> groups;
  if (r.stack_experts) groups = plan_groups(plans, r.join_gate_up);

  const std::vector<fs::path> others =
      other_entries(in, std::set<std::string>(names.begin(), names.end()));
  uint64_t total = 0;
  for (const ShardPlan& sp : plans) total += sp.bytes;
  for (const fs::path& p : others) total += entry_bytes(p);
  Reporter report(r, total);
  ModelResult result;
  result.shards = static_cast<int32_t>(plans.size());
  const int threads = r.threads > 0 ? r.threads : usable_threads();

  std::optional<io::StagingDirectory> staging;
  if (!r.dry_run) staging.emplace(out);
  const std::string stage = staging ? staging->path() : std::string();
  json weight_map = json::object(), formats = json::object();
  Output output{r, threads, report, result, weight_map, formats, groups};
  for (size_t i = 0; i < plans.size(); ++i) {
    write_shard(plans[i], i, stage + "/" + plans[i].name, output);
    result.bytes_in += plans[i].bytes;
  }
  for (const fs::path& p : others) {
    const std::string name = p.filename().string();
    const uint64_t bytes = staging ? copy_entry(p, fs::path(stage) / name) : entry_bytes(p);
    ++result.files;
    report(ModelEvent::kFile, name, "", bytes);
  }
  if (staging) {
    if (index.is_object() || plans.size() > 1) {
      json new_index = json::object();
      new_index["metadata"] = index.is_object() && index.contains("metadata") &&
                                      index["metadata"].is_object()
                                  ? index["metadata"]
                                  : json::object();
      new_index["metadata"]["total_size"] = result.bytes_out;
      new_index["weight_map"] = weight_map;
      io::write_file_synced(stage + "/" + kIndexName, new_index.dump(2) + "\n");
    }
    json config = json::object();
    if (fs::exists(in + "/config.json")) config = read_json_file(in + "/config.json");
    json q = json::object();
    q["quant_method"] = "humming";
    q["layout"] = 1;
    q["source_file"] = quant.source;
    q["source"] = quant.config;
    q["layers"] = formats;
    if (r.stack_experts) {
      q["stacked_experts"] = true;
      q["joined_gate_up"] = r.join_gate_up;
    }
    config["quantization_config"] = q;
    io::write_file_synced(stage + "/config.json", config.dump(2) + "\n");
    staging->publish(r.force);
  }
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace hm::schema
