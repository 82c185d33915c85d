// Model-folder conversion (model.hpp): plan every shard (which layers, which scheme and options
// from the config), then convert shard by shard into a staging directory, layers on a pool of
// threads while the calling thread writes them in file order, copy the other files, write the
// index and config, and publish the directory atomically.
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
};

struct ShardPlan {
  std::string name;  // file name inside the folder
  std::unique_ptr<io::SafetensorsFile> file;
  std::vector<PlannedLayer> layers;  // in the order the file reaches them
  std::map<const io::TensorView*, size_t> layer_of;
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

ShardPlan plan_shard(const std::string& dir, const std::string& name, const ModelQuant& quant,
                     const json& index) {
  ShardPlan sp;
  sp.name = name;
  sp.file = std::make_unique<io::SafetensorsFile>(dir + "/" + name);
  const io::SafetensorsFile& file = *sp.file;
  if (index.is_object())
    for (const auto& [tensor, where] : index["weight_map"].items())
      if (where == name && !file.find(tensor))
        fail(HM_ERROR_PARSE, std::string(kIndexName) + " puts tensor " +
                                 core::quoted(tensor, 120) + " in " + core::quoted(name, 120) +
                                 ", which does not hold it");
  std::set<Scheme> schemes;
  for (const LayerRule& r : quant.rules) schemes.insert(r.scheme);
  std::set<const io::TensorView*> claimed;
  std::map<std::string, PlannedLayer> by_prefix;
  for (Scheme s : schemes) {
    std::set<const io::TensorView*> seen;
    for (FoundLayer& l : find_layers(s, file, seen)) {
      const LayerRule* rule = rule_for(quant, l.prefix);
      if (!rule || rule->scheme != s || by_prefix.count(l.prefix)) continue;
      for (const io::TensorView* m : l.members) claimed.insert(m);
      const std::string prefix = l.prefix;
      by_prefix[prefix] = {std::move(l), rule};
    }
  }
  if (const std::string list = unclaimed_quantized(file, claimed); !list.empty()) {
    fail(HM_ERROR_UNSUPPORTED,
         core::quoted(name, 120) + " holds quantized tensors that no layer of the config (" +
             quant.source + ") claims: " + list +
             "; a layer the config ignores or does not target, a tensor of a layer split "
             "across shards, or a missing companion tensor (docs/convert.md)");
  }
  // The order in which the file reaches each layer (its first member), for the writer.
  std::map<const io::TensorView*, std::string> prefix_of;
  for (const auto& [prefix, layer] : by_prefix)
    for (const io::TensorView* m : layer.found.members) prefix_of[m] = prefix;
  std::set<std::string> out_names;
  for (const io::TensorView& t : file.tensors()) {
    sp.bytes += t.bytes;
    const auto p = prefix_of.find(&t);
    if (p == prefix_of.end()) continue;
    const auto l = by_prefix.find(p->second);
    if (l == by_prefix.end()) continue;  // already placed
    for (const io::TensorView* m : l->second.found.members) sp.layer_of[m] = sp.layers.size();
    for (const char* s : kOutputSuffixes) out_names.insert(l->first + s);
    sp.layers.push_back(std::move(l->second));
    by_prefix.erase(l);
  }
  for (const io::TensorView& t : file.tensors())
    if (!sp.layer_of.count(&t) && out_names.count(t.name))
      fail(HM_ERROR_UNSUPPORTED,
           "tensor " + core::quoted(t.name, 120) +
               " would collide with a converted layer's output tensor of the same name");
  return sp;
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

PackedLayer convert_planned(const PlannedLayer& l, int pack_threads) {
  std::vector<io::TensorView> members;
  for (const io::TensorView* m : l.found.members) members.push_back(*m);
  return pack_layer(l.found.prefix, convert_layer(l.rule->scheme, members, layer_options(l)),
                    pack_threads);
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
    if (workers > 1)
      for (int w = 0; w < workers; ++w) pool_.emplace_back([this] { work(); });
  }
  ~LayerPipeline() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : pool_) t.join();
  }

  PackedLayer take(size_t i) {
    if (pool_.empty()) return convert_planned(sp_.layers[i], inner_);
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return slots_[i].has_value() || errors_[i]; });
    if (errors_[i]) std::rethrow_exception(errors_[i]);
    PackedLayer p = std::move(*slots_[i]);
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
      std::optional<PackedLayer> p;
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
  std::vector<std::optional<PackedLayer>> slots_;
  std::vector<std::exception_ptr> errors_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::thread> pool_;
};

void write_shard(const ShardPlan& sp, const std::string& out_path, const ModelRequest& r,
                 int threads, Reporter& report, ModelResult& result, json& weight_map,
                 json& formats) {
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
  for (const PlannedLayer& l : sp.layers) reserve += packed_header_bound(l.found.prefix);
  for (const io::TensorView& t : file.tensors())
    if (!sp.layer_of.count(&t))
      reserve += io::SafetensorsStreamWriter::entry_bound(t.name, t.shape.size());

  std::optional<io::SafetensorsStreamWriter> writer;
  std::optional<LayerPipeline> pipeline;
  if (!r.dry_run) {
    writer.emplace(out_path, reserve);
    for (const auto& [k, v] : metadata) writer->set_metadata(k, v);
    pipeline.emplace(sp, threads);
  }
  std::vector<bool> written(sp.layers.size(), false);
  for (const io::TensorView& t : file.tensors()) {
    auto it = sp.layer_of.find(&t);
    if (it == sp.layer_of.end()) {
      if (writer) writer->append(t.name, t.dtype, t.shape, t.data, t.bytes);
      weight_map[t.name] = sp.name;
      ++result.tensors;
      result.bytes_out += t.bytes;
      report(ModelEvent::kTensor, t.name, "", t.bytes);
      continue;
    }
    if (written[it->second]) continue;
    written[it->second] = true;
    const PlannedLayer& l = sp.layers[it->second];
    uint64_t bytes = 0;
    for (const io::TensorView* m : l.found.members) bytes += m->bytes;
    std::string detail = l.rule->description;
    if (writer) {
      const PackedLayer p = pipeline->take(it->second);
      write_packed(*writer, p);
      for (const PackedLayer::Tensor& pt : p.tensors) weight_map[pt.name] = sp.name;
      formats[l.found.prefix] = p.format;
      result.bytes_out += p.bytes();
      detail = std::string(scheme_name(l.rule->scheme)) + ": " + p.format;
      if (!p.note.empty()) detail += "; " + p.note;
    }
    ++result.layers;
    report(ModelEvent::kLayer, l.found.prefix, detail, bytes);
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

uint64_t entry_bytes(const fs::path& p) {
  uint64_t total = 0;
  if (fs::is_regular_file(p)) return fs::file_size(p);
  if (fs::is_directory(p))
    for (const fs::directory_entry& e : fs::recursive_directory_iterator(p))
      if (e.is_regular_file()) total += e.file_size();
  return total;
}

void copy_entry(const fs::path& from, const fs::path& to) {
  if (fs::is_regular_file(from)) {
    io::copy_file_synced(from.string(), to.string());
    return;
  }
  if (!fs::is_directory(from)) return;  // sockets, devices: nothing a model needs
  fs::create_directories(to);
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(from)) {
    const fs::path target = to / fs::relative(e.path(), from);
    if (e.is_directory())
      fs::create_directories(target);
    else if (e.is_regular_file())
      io::copy_file_synced(e.path().string(), target.string());
  }
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

ModelResult convert_model(const ModelRequest& r) {
  const auto start = std::chrono::steady_clock::now();
  std::string in, out;
  check_paths(r, in, out);
  ModelQuant quant = read_model_quant(in, r.scheme);
  apply_overrides(quant, r.overrides, r.scheme);
  json index;
  const std::vector<std::string> names = shard_names(in, index);
  std::vector<ShardPlan> plans;
  for (const std::string& n : names) plans.push_back(plan_shard(in, n, quant, index));
  size_t layers = 0;
  for (const ShardPlan& sp : plans) layers += sp.layers.size();
  if (layers == 0)
    fail(HM_ERROR_UNSUPPORTED, core::quoted(in, 200) + " holds no layer that the config (" +
                                   quant.source + ") describes; check the config or --scheme");

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
  for (const ShardPlan& sp : plans) {
    write_shard(sp, stage + "/" + sp.name, r, threads, report, result, weight_map, formats);
    result.bytes_in += sp.bytes;
  }
  for (const fs::path& p : others) {
    const std::string name = p.filename().string();
    if (staging) copy_entry(p, fs::path(stage) / name);
    ++result.files;
    report(ModelEvent::kFile, name, "", entry_bytes(p));
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
    config["quantization_config"] = q;
    io::write_file_synced(stage + "/config.json", config.dump(2) + "\n");
    staging->publish(r.force);
  }
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace hm::schema
