// Whole model folders (hm_convert_model, `humming convert IN_DIR OUT_DIR`), built in the test:
// a GPTQModel-style GPTQ model in two shards (act-order and asymmetric layers, zero points of 0),
// an AWQ one, a compressed-tensors one with a different scheme per layer group, and an FP8
// block one. Every converted layer, read back from the output shards, must equal the
// checkpoint's own dequantization formula; the index, config and copied files must be right;
// and failures, cancellation, an existing or overlapping output leave nothing behind.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/safetensors.hpp"
#include "test_schema_support.hpp"

namespace {

using namespace schema_test;
namespace fs = std::filesystem;
using nlohmann::json;

std::vector<uint32_t> pack_stream(const std::vector<uint32_t>& values, int bits) {
  std::vector<uint32_t> words((values.size() * bits + 31) / 32, 0);
  for (size_t i = 0; i < values.size(); ++i)
    for (int b = 0; b < bits; ++b)
      if ((values[i] >> b) & 1u) words[(i * bits + b) / 32] |= 1u << ((i * bits + b) % 32);
  return words;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A scratch folder per test, removed at the end.
struct Scratch {
  fs::path root;
  explicit Scratch(const std::string& name) {
    root = fs::path(HM_TEST_BINARY_DIR) / ("model_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(root);
    fs::create_directories(root / "in");
  }
  ~Scratch() { fs::remove_all(root); }
  fs::path in() const { return root / "in"; }
  fs::path out() const { return root / "out"; }
  // Nothing but "in" (and "out" when expected) in the scratch folder: no temporary folder left.
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(root)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }
};

void write_text(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

void write_shards(const fs::path& dir, const std::vector<std::vector<Tensor>>& shards) {
  json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
  for (size_t s = 0; s < shards.size(); ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
    hm::io::SafetensorsWriter w;
    for (const Tensor& t : shards[s]) {
      w.add_borrowed(t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size());
      index["weight_map"][t.name] = name;
    }
    w.set_metadata("format", "pt");
    w.write((dir / name).string());
  }
  if (shards.size() > 1) write_text(dir / "model.safetensors.index.json", index.dump(2));
}

// The checkpoint's own dequantization of each layer, [N][K] in checkpoint column order.
using References = std::map<std::string, std::vector<float>>;

// Reads every converted layer of an output folder back through the library's reader
// (hm_stored_model_*: shards from the index, format from each shard's header), unpacks and
// dequantizes it, undoes the K permutation, and compares with the reference; the config names
// the same layers with the same formats.
void check_layers(const fs::path& out, const References& refs) {
  const json config = json::parse(slurp(out / "config.json"));
  ASSERT_EQ(config["quantization_config"]["quant_method"], "humming");
  const json& layers = config["quantization_config"]["layers"];
  EXPECT_EQ(layers.size(), refs.size());
  hm_stored_model_t* model = nullptr;
  ASSERT_EQ(hm_stored_model_open(out.c_str(), &model), HM_SUCCESS) << last_error();
  size_t count = 0;
  ASSERT_EQ(hm_stored_model_layer_count(model, &count), HM_SUCCESS);
  EXPECT_EQ(count, refs.size());
  for (size_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    ASSERT_EQ(hm_stored_model_layer_name(model, i, &name), HM_SUCCESS);
    EXPECT_TRUE(refs.count(name)) << name;
  }
  for (const auto& [prefix, want] : refs) {
    SCOPED_TRACE(prefix);
    ASSERT_TRUE(layers.contains(prefix));
    const std::string text = layers[prefix];
    hm_stored_layer_t* layer = nullptr;
    ASSERT_EQ(hm_stored_model_read(model, prefix.c_str(), &layer), HM_SUCCESS) << last_error();
    hm_format_t* format = nullptr;
    ASSERT_EQ(hm_stored_layer_format(layer, &format), HM_SUCCESS) << last_error();
    char buf[512];
    ASSERT_EQ(hm_format_to_string(format, buf, sizeof buf, nullptr), HM_SUCCESS);
    EXPECT_EQ(std::string(buf), text);
    hm_stored_layer_info_t info;
    hm_stored_layer_info_init(&info);
    ASSERT_EQ(hm_stored_layer_info(layer, &info), HM_SUCCESS) << last_error();
    hm_canonical_sizes_t cs;
    hm_canonical_sizes_init(&cs);
    hm_format_canonical_sizes(format, &cs);
    std::vector<uint8_t> codes(cs.codes);
    std::vector<float> scales(cs.scales), zeros(cs.zero_points), gs(cs.global_scale);
    hm_canonical_weight_t c;
    hm_canonical_weight_init(&c);
    c.codes = codes.data();
    c.scales = scales.empty() ? nullptr : scales.data();
    c.zero_points = zeros.empty() ? nullptr : zeros.data();
    c.global_scale = gs.empty() ? nullptr : gs.data();
    ASSERT_EQ(hm_unpack(format, &info.packed, &c), HM_SUCCESS) << last_error();
    std::vector<float> got(cs.codes);
    ASSERT_EQ(hm_dequantize(format, &c, got.data()), HM_SUCCESS) << last_error();
    if (info.k_permutation != nullptr) {
      int64_t n = 0, k = 0;
      int32_t e = 0;
      hm_format_get_shape(format, &n, &k, &e);
      std::vector<float> ordered(got.size());
      for (int64_t r = 0; r < n * e; ++r)
        for (int64_t i = 0; i < k; ++i) ordered[r * k + info.k_permutation[i]] = got[r * k + i];
      got = ordered;
    }
    expect_bitwise(got, want, prefix + " (" + text + ")");
    hm_format_destroy(format);
    hm_stored_layer_destroy(layer);
  }
  hm_stored_model_destroy(model);
}

// ---- GPTQ as GPTQModel writes it: v1 qzeros by whole-word subtraction --------------------------

void add_gptq_layer(std::vector<Tensor>& shard, References& refs, const std::string& prefix,
                    int64_t n, int64_t k, int64_t group, bool act_order, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t groups = k / group;
  std::vector<uint32_t> q(n * k), z(groups * n);
  for (auto& v : q) v = rng() & 15u;
  for (auto& v : z) v = rng() & 15u;
  z[0] = z[1] = z[n - 1] = 0;  // zero points of 0, which GPTQModel's v1 borrows for
  std::vector<double> s(groups * n);
  for (auto& v : s) v = round_to(HM_DTYPE_F16, std::uniform_real_distribution<double>(1e-3, 0.05)(rng));
  std::vector<int32_t> g_idx(k);
  for (int64_t i = 0; i < k; ++i) g_idx[i] = static_cast<int32_t>(i / group);
  if (act_order) std::shuffle(g_idx.begin(), g_idx.end(), rng);
  std::vector<uint32_t> qweight(k / 8 * n);
  for (int64_t c = 0; c < n; ++c) {
    std::vector<uint32_t> col(q.begin() + c * k, q.begin() + (c + 1) * k);
    const auto w = pack_stream(col, 4);
    for (size_t r = 0; r < w.size(); ++r) qweight[r * n + c] = w[r];
  }
  std::vector<uint32_t> qzeros;
  for (int64_t g = 0; g < groups; ++g) {
    auto w = pack_stream(std::vector<uint32_t>(z.begin() + g * n, z.begin() + (g + 1) * n), 4);
    for (auto& word : w) word -= 0x11111111u;
    qzeros.insert(qzeros.end(), w.begin(), w.end());
  }
  shard.push_back(make_tensor(prefix + ".g_idx", "I32", {k}, g_idx));
  shard.push_back(make_tensor(prefix + ".qweight", "I32", {k / 8, n}, qweight));
  shard.push_back(make_tensor(prefix + ".qzeros", "I32", {groups, n / 8}, qzeros));
  shard.push_back(f16_tensor(prefix + ".scales", {groups, n}, s));
  std::vector<float>& ref = refs[prefix];
  ref.resize(n * k);
  for (int64_t c = 0; c < n; ++c)
    for (int64_t i = 0; i < k; ++i)
      ref[c * k + i] = f32((double(q[c * k + i]) - z[g_idx[i] * n + c]) * s[g_idx[i] * n + c]);
}

const char* kGptqConfig = R"({"model_type": "llama", "hidden_size": 64,
  "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 32, "sym": false,
    "desc_act": true, "checkpoint_format": "gptq",
    "meta": {"quantizer": ["gptqmodel:4.0.0"]}}})";

References gptq_model(const fs::path& dir) {
  References refs;
  std::vector<Tensor> a, b;
  std::vector<uint16_t> embed(256 * 64);
  for (size_t i = 0; i < embed.size(); ++i) embed[i] = static_cast<uint16_t>(i * 7);
  a.push_back(make_tensor("model.embed_tokens.weight", "BF16", {256, 64}, embed));
  add_gptq_layer(a, refs, "model.layers.0.self_attn.q_proj", 64, 128, 32, true, 1);
  add_gptq_layer(a, refs, "model.layers.0.mlp.down_proj", 64, 128, 32, false, 2);
  add_gptq_layer(b, refs, "model.layers.1.self_attn.q_proj", 64, 128, 32, true, 3);
  b.push_back(make_tensor("model.norm.weight", "F32", {64}, std::vector<float>(64, 1.0f)));
  write_shards(dir, {a, b});
  write_text(dir / "config.json", kGptqConfig);
  write_text(dir / "tokenizer.json", R"({"version": "1.0", "model": {}})");
  write_text(dir / "generation_config.json", R"({"do_sample": false})");
  return refs;
}

struct Log {
  int layers = 0, tensors = 0, files = 0, cancel_after = -1;
  uint64_t last_done = 0, total = 0;
  std::vector<std::string> details;
};
int32_t on_event(void* user, int32_t kind, const char* name, const char* detail, uint64_t done,
                 uint64_t total) {
  auto* log = static_cast<Log*>(user);
  EXPECT_GE(done, log->last_done) << name;
  log->last_done = done;
  log->total = total;
  if (kind == HM_CONVERT_EVENT_LAYER) {
    ++log->layers;
    log->details.push_back(std::string(name) + " " + (detail ? detail : ""));
  }
  if (kind == HM_CONVERT_EVENT_TENSOR) ++log->tensors;
  if (kind == HM_CONVERT_EVENT_FILE) ++log->files;
  return log->cancel_after >= 0 && log->layers >= log->cancel_after ? 1 : 0;
}

hm_convert_model_options_t model_options(Log* log, uint32_t flags = 0, int threads = 2) {
  hm_convert_model_options_t o;
  hm_convert_model_options_init(&o);
  o.flags = flags;
  o.threads = threads;
  o.progress = on_event;
  o.progress_user_data = log;
  return o;
}

TEST(ConvertModel, GptqModelFolderWithActOrderAndAsymmetricLayers) {
  Scratch s("gptq");
  const References refs = gptq_model(s.in());
  const std::string before = slurp(s.in() / "model-00001-of-00002.safetensors");
  Log log;
  hm_convert_model_options_t o = model_options(&log);
  hm_convert_model_summary_t sum;
  hm_convert_model_summary_init(&sum);
  ASSERT_EQ(hm_convert_model(s.in().c_str(), s.out().c_str(), &o, &sum), HM_SUCCESS)
      << last_error();
  EXPECT_EQ(sum.layers, 3);
  EXPECT_EQ(sum.tensors, 2);
  EXPECT_EQ(sum.files, 2);
  EXPECT_EQ(sum.shards, 2);
  EXPECT_EQ(log.layers, 3);
  EXPECT_EQ(log.last_done, log.total);
  check_layers(s.out(), refs);
  EXPECT_EQ(slurp(s.out() / "tokenizer.json"), slurp(s.in() / "tokenizer.json"));
  EXPECT_TRUE(fs::exists(s.out() / "generation_config.json"));
  EXPECT_EQ(slurp(s.in() / "model-00001-of-00002.safetensors"), before) << "input modified";
  const json config = json::parse(slurp(s.out() / "config.json"));
  EXPECT_EQ(config["model_type"], "llama");
  EXPECT_EQ(config["quantization_config"]["source"]["meta"]["quantizer"][0], "gptqmodel:4.0.0");
  const json index = json::parse(slurp(s.out() / "model.safetensors.index.json"));
  EXPECT_EQ(index["weight_map"]["model.norm.weight"], "model-00002-of-00002.safetensors");
  EXPECT_EQ(index["weight_map"]["model.layers.0.mlp.down_proj.weight"],
            "model-00001-of-00002.safetensors");
  EXPECT_FALSE(index["weight_map"].contains("model.layers.0.mlp.down_proj.qweight"));
  EXPECT_EQ(s.entries(), (std::vector<std::string>{"in", "out"}));

  // An existing output is refused, and replaced with FORCE; one thread gives the same bytes.
  EXPECT_EQ(hm_convert_model(s.in().c_str(), s.out().c_str(), &o, nullptr), HM_ERROR_IO);
  EXPECT_NE(last_error().find("--force"), std::string::npos) << last_error();
  const std::string shard = slurp(s.out() / "model-00001-of-00002.safetensors");
  Log again;
  hm_convert_model_options_t force = model_options(&again, HM_CONVERT_MODEL_FORCE, 1);
  ASSERT_EQ(hm_convert_model(s.in().c_str(), s.out().c_str(), &force, nullptr), HM_SUCCESS)
      << last_error();
  EXPECT_EQ(slurp(s.out() / "model-00001-of-00002.safetensors"), shard);
  EXPECT_EQ(s.entries(), (std::vector<std::string>{"in", "out"}));
}

// Hugging Face shards a checkpoint by size, tensor by tensor, so one layer's tensors can end up
// in two shards: the layer is converted whole and written into the shard of its first tensor.
TEST(ConvertModel, ALayerSplitBetweenShardsConvertsWhole) {
  Scratch s("split");
  References refs;
  std::vector<Tensor> layer, a, b;
  add_gptq_layer(layer, refs, "model.layers.0.mlp.down_proj", 64, 128, 32, true, 7);
  add_gptq_layer(b, refs, "model.layers.1.mlp.down_proj", 64, 128, 32, false, 8);
  a.push_back(layer[0]);  // g_idx and qweight in the first shard, qzeros and scales in the second
  a.push_back(layer[1]);
  add_gptq_layer(a, refs, "model.layers.0.mlp.up_proj", 64, 128, 32, false, 9);  // two layers:
  b.insert(b.begin(), layer.begin() + 2, layer.end());  // the first shard's run on the pool
  write_shards(s.in(), {a, b});
  write_text(s.in() / "config.json", kGptqConfig);
  Log dry;
  hm_convert_model_options_t o = model_options(&dry, HM_CONVERT_MODEL_DRY_RUN);
  ASSERT_EQ(hm_convert_model(s.in().c_str(), s.out().c_str(), &o, nullptr), HM_SUCCESS)
      << last_error();
  EXPECT_EQ(dry.layers, 3);
  EXPECT_EQ(dry.last_done, dry.total);
  Log log;
  o = model_options(&log, 0, 2);
  hm_convert_model_summary_t sum;
  hm_convert_model_summary_init(&sum);
  ASSERT_EQ(hm_convert_model(s.in().c_str(), s.out().c_str(), &o, &sum), HM_SUCCESS)
      << last_error();
  EXPECT_EQ(sum.layers, 3);
  EXPECT_EQ(sum.tensors, 0);
  EXPECT_EQ(log.last_done, log.total);
  check_layers(s.out(), refs);
  const json index = json::parse(slurp(s.out() / "model.safetensors.index.json"));
  EXPECT_EQ(index["weight_map"]["model.layers.0.mlp.down_proj.weight"],
            "model-00001-of-00002.safetensors");
  EXPECT_EQ(index["weight_map"]["model.layers.1.mlp.down_proj.weight"],
            "model-00002-of-00002.safetensors");
  EXPECT_FALSE(index["weight_map"].contains("model.layers.0.mlp.down_proj.scales"));
  // One name in two shards is refused, naming both.
  std::vector<Tensor> again = {make_tensor("model.norm.weight", "F32", {4}, std::vector<float>(4)),
                               make_tensor("model.norm.weight", "F32", {4}, std::vector<float>(4))};
  b.push_back(again[0]);
  a.push_back(again[1]);
  fs::remove_all(s.in());
  fs::create_directories(s.in());
  write_shards(s.in(), {a, b});
  write_text(s.in() / "config.json", kGptqConfig);
  EXPECT_EQ(hm_convert_model(s.in().c_str(), (s.root / "other").c_str(), nullptr, nullptr),
            HM_ERROR_PARSE);
  EXPECT_NE(last_error().find("'model.norm.weight' is in both"), std::string::npos)
      << last_error();
}

TEST(ConvertModel, DryRunFailuresAndCancellationWriteNothing) {
  Scratch s("atomic");
  gptq_model(s.in());
  Log dry;
  hm_convert_model_options_t o = model_options(&dry, HM_CONVERT_MODEL_DRY_RUN);
  ASSERT_EQ(hm_convert_model(s.in().c_str(), s.out().c_str(), &o, nullptr), HM_SUCCESS)
      << last_error();
  EXPECT_EQ(dry.layers, 3);
  EXPECT_NE(dry.details[0].find("sym=false"), std::string::npos) << dry.details[0];
  EXPECT_EQ(s.entries(), (std::vector<std::string>{"in"}));

  Log cancel;
  cancel.cancel_after = 1;
  o = model_options(&cancel);
  EXPECT_EQ(hm_convert_model(s.in().c_str(), s.out().c_str(), &o, nullptr),
            HM_ERROR_INVALID_STATE);
  EXPECT_EQ(s.entries(), (std::vector<std::string>{"in"}));

  // The output inside the input, or the input itself.
  const std::string inner = (s.in() / "converted").string();
  EXPECT_EQ(hm_convert_model(s.in().c_str(), inner.c_str(), nullptr, nullptr),
            HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(hm_convert_model(s.in().c_str(), s.in().c_str(), nullptr, nullptr),
            HM_ERROR_INVALID_ARGUMENT);

  // A layer of an asymmetric model without its qzeros: the whole conversion fails, naming the
  // tensor (through the command line too), and leaves no output.
  hm::io::SafetensorsFile shard((s.in() / "model-00002-of-00002.safetensors").string());
  std::vector<Tensor> kept;
  for (const auto& t : shard.tensors())
    if (t.name.find("qzeros") == std::string::npos)
      kept.push_back({t.name, t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.bytes)});
  hm::io::SafetensorsWriter w;
  for (const Tensor& t : kept) w.add_borrowed(t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size());
  w.write((s.in() / "model-00002-of-00002.safetensors.new").string());
  fs::rename(s.in() / "model-00002-of-00002.safetensors.new",
             s.in() / "model-00002-of-00002.safetensors");
  // The index still names the tensor: refused, naming it.
  EXPECT_EQ(hm_convert_model(s.in().c_str(), s.out().c_str(), nullptr, nullptr), HM_ERROR_PARSE);
  EXPECT_NE(last_error().find("'model.layers.1.self_attn.q_proj.qzeros'"), std::string::npos)
      << last_error();
  json index = json::parse(slurp(s.in() / "model.safetensors.index.json"));
  index["weight_map"].erase("model.layers.1.self_attn.q_proj.qzeros");
  write_text(s.in() / "model.safetensors.index.json", index.dump());
  EXPECT_EQ(hm_convert_model(s.in().c_str(), s.out().c_str(), nullptr, nullptr),
            HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("'model.layers.1.self_attn.q_proj.qzeros'"), std::string::npos)
      << last_error();
  const std::string log_path = (s.root / "cli.log").string();
  const std::string cmd = std::string(HM_CLI_PATH) + " convert " + s.in().string() + " " +
                          s.out().string() + " --quiet 2> " + log_path;
  EXPECT_NE(std::system(cmd.c_str()), 0);
  EXPECT_NE(slurp(log_path).find("model.layers.1.self_attn.q_proj.qzeros"), std::string::npos)
      << slurp(log_path);
  fs::remove(log_path);
  EXPECT_EQ(s.entries(), (std::vector<std::string>{"in"}));
}

// ---- MoE experts stored one layer each, stacked (HM_CONVERT_MODEL_STACK_EXPERTS) ------------

// A Qwen3-MoE-like GPTQ model: a dense q_proj and four experts of gate/up (64 x 128) and down
// (128 x 64), experts 0-1 in the first shard and 2-3 in the second, so every group is completed
// in another shard than it starts in. refs get each expert as its own layer.
References gptq_moe_model(const fs::path& dir, bool act_order = false, int skip_expert = -1) {
  References refs;
  std::vector<Tensor> a, b;
  add_gptq_layer(a, refs, "model.layers.0.self_attn.q_proj", 64, 128, 32, false, 1);
  for (int e = 0; e < 4; ++e) {
    if (e == skip_expert) continue;
    const std::string x = "model.layers.0.mlp.experts." + std::to_string(e);
    std::vector<Tensor>& shard = e < 2 ? a : b;
    add_gptq_layer(shard, refs, x + ".gate_proj", 64, 128, 32, act_order, 10 + e);
    add_gptq_layer(shard, refs, x + ".up_proj", 64, 128, 32, act_order, 20 + e);
    add_gptq_layer(shard, refs, x + ".down_proj", 128, 64, 32, act_order, 30 + e);
  }
  b.push_back(make_tensor("model.norm.weight", "F32", {64}, std::vector<float>(64, 1.0f)));
  write_shards(dir, {a, b});
  write_text(dir / "config.json", kGptqConfig);
  return refs;
}

// refs[base + ".<e>." + proj] for e = 0 .. 3, one after the other (the [E][N][K] of a stacked
// layer); with two projs, expert by expert the first's rows then the second's (gate_up).
std::vector<float> stacked(const References& refs, const std::string& base,
                           const std::vector<std::string>& projs) {
  std::vector<float> out;
  for (int e = 0; e < 4; ++e)
    for (const std::string& proj : projs) {
      const std::vector<float>& r = refs.at(base + "." + std::to_string(e) + "." + proj);
      out.insert(out.end(), r.begin(), r.end());
    }
  return out;
}

TEST(ConvertModel, MoeExpertsStackedAndGateUpJoinedAcrossShards) {
  Scratch s("moe");
  const References experts = gptq_moe_model(s.in());
  const std::string base = "model.layers.0.mlp.experts";
  for (bool join : {true, false}) {
    SCOPED_TRACE(join ? "gate and up joined" : "experts stacked");
    References refs = {{"model.layers.0.self_attn.q_proj",
                        experts.at("model.layers.0.self_attn.q_proj")},
                       {base + ".down_proj", stacked(experts, base, {"down_proj"})}};
    if (join) {
      refs[base + ".gate_up_proj"] = stacked(experts, base, {"gate_proj", "up_proj"});
    } else {
      refs[base + ".gate_proj"] = stacked(experts, base, {"gate_proj"});
      refs[base + ".up_proj"] = stacked(experts, base, {"up_proj"});
    }
    const uint32_t flags = HM_CONVERT_MODEL_FORCE | HM_CONVERT_MODEL_STACK_EXPERTS |
                           (join ? HM_CONVERT_MODEL_JOIN_GATE_UP : 0u);
    Log dry;
    hm_convert_model_options_t o = model_options(&dry, flags | HM_CONVERT_MODEL_DRY_RUN);
    ASSERT_EQ(hm_convert_model(s.in().c_str(), s.out().c_str(), &o, nullptr), HM_SUCCESS)
        << last_error();
    EXPECT_EQ(dry.layers, static_cast<int>(refs.size()));
    Log log;
    o = model_options(&log, flags);
    hm_convert_model_summary_t sum;
    hm_convert_model_summary_init(&sum);
    ASSERT_EQ(hm_convert_model(s.in().c_str(), s.out().c_str(), &o, &sum), HM_SUCCESS)
        << last_error();
    EXPECT_EQ(sum.layers, static_cast<int>(refs.size()));
    EXPECT_EQ(log.layers, sum.layers);
    EXPECT_EQ(log.last_done, log.total);
    check_layers(s.out(), refs);
    const json config = json::parse(slurp(s.out() / "config.json"));
    const json& q = config["quantization_config"];
    EXPECT_EQ(q["stacked_experts"], true);
    EXPECT_EQ(q["joined_gate_up"], join);
    const std::string down = q["layers"][base + ".down_proj"];
    EXPECT_NE(down.find("e=4"), std::string::npos) << down;
    if (join) {
      const std::string gate_up = q["layers"][base + ".gate_up_proj"];
      EXPECT_NE(gate_up.find("n=128"), std::string::npos) << gate_up;
    }
    // Written into the second shard, where its last experts are; no expert layer is left.
    const json index = json::parse(slurp(s.out() / "model.safetensors.index.json"));
    EXPECT_EQ(index["weight_map"][base + ".down_proj.weight"], "model-00002-of-00002.safetensors");
    for (const auto& [name, file] : index["weight_map"].items())
      EXPECT_EQ(name.find(".experts.0."), std::string::npos) << name;
  }
  // The command line takes the flags (a dry run lists the stacked layers).
  const std::string log_path = (s.root / "cli.log").string();
  const std::string cmd = std::string(HM_CLI_PATH) + " convert " + s.in().string() + " " +
                          s.out().string() + " --stack-experts --join-gate-up --dry-run > " +
                          log_path + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << slurp(log_path);
  EXPECT_NE(slurp(log_path).find(base + ".gate_up_proj"), std::string::npos) << slurp(log_path);
  fs::remove(log_path);
}

TEST(ConvertModel, StackingExpertsRefusesWhatItCannotJoin) {
  Scratch s("moe_refused");
  auto convert = [&](uint32_t flags) {
    hm_convert_model_options_t o;
    hm_convert_model_options_init(&o);
    o.flags = flags | HM_CONVERT_MODEL_FORCE;
    return hm_convert_model(s.in().c_str(), s.out().c_str(), &o, nullptr);
  };
  auto expect_refused = [&](uint32_t flags, hm_status_t status, const std::string& needle) {
    EXPECT_EQ(convert(flags), status);
    EXPECT_NE(last_error().find(needle), std::string::npos) << last_error();
    EXPECT_EQ(s.entries(), (std::vector<std::string>{"in"}));
  };
  // Joining gate and up needs stacked experts; a dense model has none to stack.
  gptq_model(s.in());
  expect_refused(HM_CONVERT_MODEL_JOIN_GATE_UP, HM_ERROR_INVALID_ARGUMENT, "--stack-experts");
  expect_refused(HM_CONVERT_MODEL_STACK_EXPERTS, HM_ERROR_UNSUPPORTED, "<...>.experts.<i>.<proj>");
  // An expert missing (a model split by expert).
  fs::remove_all(s.in());
  fs::create_directories(s.in());
  gptq_moe_model(s.in(), false, 2);
  expect_refused(HM_CONVERT_MODEL_STACK_EXPERTS, HM_ERROR_UNSUPPORTED,
                 "'model.layers.0.mlp.experts.2.down_proj' is missing");
  // A model with per-expert gate_up_proj layers besides gate_proj and up_proj: joining would
  // write two layers named experts.gate_up_proj.
  {
    std::vector<Tensor> extra;
    References unused;
    for (int e = 0; e < 2; ++e)
      add_gptq_layer(extra, unused,
                     "model.layers.0.mlp.experts." + std::to_string(e) + ".gate_up_proj", 128, 128,
                     32, false, 40 + e);
    fs::remove_all(s.in());
    fs::create_directories(s.in());
    gptq_moe_model(s.in());
    hm::io::SafetensorsWriter w;
    for (const Tensor& t : extra) w.add_borrowed(t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size());
    w.write((s.in() / "extra.safetensors").string());
    json index = json::parse(slurp(s.in() / "model.safetensors.index.json"));
    for (const Tensor& t : extra) index["weight_map"][t.name] = "extra.safetensors";
    write_text(s.in() / "model.safetensors.index.json", index.dump());
    expect_refused(HM_CONVERT_MODEL_STACK_EXPERTS | HM_CONVERT_MODEL_JOIN_GATE_UP,
                   HM_ERROR_UNSUPPORTED, "would both be written as");
  }
  // Act-order experts each reorder K their own way: refused when the group is joined, and the
  // output is left as it was (here: not there).
  fs::remove_all(s.in());
  fs::create_directories(s.in());
  gptq_moe_model(s.in(), true);
  expect_refused(HM_CONVERT_MODEL_STACK_EXPERTS, HM_ERROR_UNSUPPORTED, "reorders K");
  EXPECT_NE(last_error().find("into 'model.layers.0.mlp.experts."), std::string::npos)
      << last_error();
  // Unstacked, the same model converts.
  EXPECT_EQ(convert(0), HM_SUCCESS) << last_error();
}

// ---- Reading converted layers back (hm_stored_model_*) ---------------------------------------

TEST(StoredModel, AFileWithBiasReadsBackAndBrokenFilesAreRefused) {
  Scratch s("stored");
  // One converted file (hm_convert_file): a GPTQ layer with an f16 bias, read back as f32.
  std::vector<Tensor> t;
  References refs;
  const std::string p = "model.layers.0.mlp.down_proj";
  add_gptq_layer(t, refs, p, 64, 128, 32, true, 5);
  std::vector<double> bias(64);
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = (static_cast<double>(i) - 20.0) / 8.0;
  t.push_back(f16_tensor(p + ".bias", {64}, bias));
  write_shards(s.in(), {t});
  const std::string file = (s.root / "converted.safetensors").string();
  hm_convert_options_t gptqmodel;  // add_gptq_layer writes zeros as GPTQModel does
  hm_convert_options_init(&gptqmodel);
  gptqmodel.flags = HM_CONVERT_GPTQ_V1_GPTQMODEL;
  ASSERT_EQ(hm_convert_file("gptq", (s.in() / "model-00001-of-00001.safetensors").c_str(),
                            file.c_str(), &gptqmodel),
            HM_SUCCESS)
      << last_error();
  hm_stored_model_t* model = nullptr;
  ASSERT_EQ(hm_stored_model_open(file.c_str(), &model), HM_SUCCESS) << last_error();
  const char* name = nullptr;
  ASSERT_EQ(hm_stored_model_layer_name(model, 0, &name), HM_SUCCESS);
  EXPECT_EQ(std::string(name), p);
  EXPECT_EQ(hm_stored_model_layer_name(model, 1, &name), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(name, nullptr);
  hm_stored_layer_t* layer = nullptr;
  ASSERT_EQ(hm_stored_model_read(model, p.c_str(), &layer), HM_SUCCESS) << last_error();
  hm_stored_layer_info_t info;
  hm_stored_layer_info_init(&info);
  ASSERT_EQ(hm_stored_layer_info(layer, &info), HM_SUCCESS) << last_error();
  ASSERT_NE(info.bias, nullptr);
  for (size_t i = 0; i < bias.size(); ++i) EXPECT_EQ(info.bias[i], bias[i]) << i;
  ASSERT_NE(info.k_permutation, nullptr);  // act-order
  EXPECT_EQ(info.note, nullptr);
  hm_stored_layer_destroy(layer);
  // `humming demo` runs a converted layer (here its host half: the reference with the bias, and
  // the plan compiled for sm_90a; on a GPU it also runs and checks the kernel).
  const std::string log_path = (s.root / "demo.log").string();
  const std::string demo = std::string(HM_CLI_PATH) + " demo --arch sm_90a --m 3 --converted " +
                           file + " --layer " + p + " > " + log_path + " 2>&1";
  EXPECT_EQ(std::system(demo.c_str()), 0) << slurp(log_path);
  EXPECT_NE(slurp(log_path).find("layer:       " + p), std::string::npos) << slurp(log_path);
  EXPECT_NE(slurp(log_path).find("bias=1"), std::string::npos) << slurp(log_path);
  // `humming support --converted` names the kernels of each layer, from its format alone.
  const std::string support = std::string(HM_CLI_PATH) + " support --arch sm_90a --converted " +
                              file + " > " + log_path + " 2>&1";
  EXPECT_EQ(std::system(support.c_str()), 0) << slurp(log_path);
  EXPECT_NE(slurp(log_path).find(p + ": dense_wgmma"), std::string::npos) << slurp(log_path);
  EXPECT_NE(slurp(log_path).find("1 layers, 0 without a kernel on sm_90a"), std::string::npos)
      << slurp(log_path);
  hm_format_t* listed = nullptr;
  ASSERT_EQ(hm_stored_model_layer_format(model, p.c_str(), &listed), HM_SUCCESS) << last_error();
  hm_format_destroy(listed);
  EXPECT_EQ(hm_stored_model_layer_format(model, "nope", &listed), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(listed, nullptr);
  fs::remove(log_path);
  EXPECT_EQ(hm_stored_model_read(model, "model.layers.9.mlp.down_proj", &layer),
            HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("no converted layer 'model.layers.9.mlp.down_proj'"),
            std::string::npos)
      << last_error();
  EXPECT_EQ(layer, nullptr);
  EXPECT_EQ(hm_stored_model_read(model, nullptr, &layer), HM_ERROR_INVALID_ARGUMENT);
  hm_stored_model_destroy(model);
  hm_stored_model_destroy(nullptr);
  hm_stored_layer_destroy(nullptr);
  EXPECT_EQ(hm_stored_model_open(nullptr, &model), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(hm_stored_model_open((s.root / "missing").c_str(), &model), HM_ERROR_IO);
  // A checkpoint that was never converted.
  EXPECT_EQ(hm_stored_model_open((s.in() / "model-00001-of-00001.safetensors").c_str(), &model),
            HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("holds no converted layer"), std::string::npos) << last_error();

  // Hand-made files: a format key with tensors that do not fit it.
  const std::string fmt = "w=uint4b8 a=f16 c=f16 s=f16:g32 n=64 k=64";
  hm_format_t* f = nullptr;
  ASSERT_EQ(hm_format_parse(fmt.c_str(), &f), HM_SUCCESS);
  hm_packed_sizes_t sizes;
  hm_packed_sizes_init(&sizes);
  ASSERT_EQ(hm_format_packed_sizes(f, &sizes), HM_SUCCESS);
  hm_format_destroy(f);
  auto refused = [&](std::vector<Tensor> tensors, const std::string& needle) {
    hm::io::SafetensorsWriter w;
    for (const Tensor& x : tensors)
      w.add_borrowed(x.name, x.dtype, x.shape, x.bytes.data(), x.bytes.size());
    w.set_metadata("humming.format.x", fmt);
    const std::string path = (s.root / "broken.safetensors").string();
    w.write(path);
    hm_stored_model_t* m = nullptr;
    ASSERT_EQ(hm_stored_model_open(path.c_str(), &m), HM_SUCCESS) << last_error();
    hm_stored_layer_t* l = nullptr;
    EXPECT_EQ(hm_stored_model_read(m, "x", &l), HM_ERROR_INVALID_ARGUMENT) << needle;
    EXPECT_NE(last_error().find(needle), std::string::npos) << last_error();
    EXPECT_EQ(l, nullptr);
    hm_stored_model_destroy(m);
  };
  const Tensor weight = make_tensor("x.weight", "U8", {int64_t(sizes.weight)},
                                    std::vector<uint8_t>(sizes.weight, 0x11));
  const Tensor scale = make_tensor("x.weight_scale", "F16", {int64_t(sizes.scales / 2)},
                                   std::vector<uint8_t>(sizes.scales, 0));
  refused({scale}, "'x.weight' must hold " + std::to_string(sizes.weight) + " bytes");
  refused({make_tensor("x.weight", "U8", {8}, std::vector<uint8_t>(8, 0)), scale},
          "it holds 8");
  refused({weight, scale, make_tensor("x.weight_zero_point", "U8", {4}, std::vector<uint8_t>(4))},
          "'x.weight_zero_point', which the layer's format");
  std::vector<int32_t> perm(64);
  for (int32_t i = 0; i < 64; ++i) perm[i] = 63 - i;
  perm[5] = perm[6];
  refused({weight, scale, make_tensor("x.k_permutation", "I32", {64}, perm)},
          "is no permutation of [0, 64)");
  perm[5] = 64;
  refused({weight, scale, make_tensor("x.k_permutation", "I32", {64}, perm)}, "holds 64");
  std::vector<int32_t> ok(64);
  for (int32_t i = 0; i < 64; ++i) ok[i] = i;
  refused({weight, scale, make_tensor("x.k_permutation", "F32", {64}, ok)}, "is F32, not I32");
  // A format the writer never writes: a 4-bit output (its bias would be 0 bytes per value).
  hm::io::SafetensorsWriter w;
  w.add_borrowed(weight.name, weight.dtype, weight.shape, weight.bytes.data(), weight.bytes.size());
  w.set_metadata("humming.format.x", "w=uint4b8 a=f16 c=e2m1 s=f16:channel bias=1 n=64 k=64");
  const std::string odd = (s.root / "odd.safetensors").string();
  w.write(odd);
  hm_stored_model_t* m = nullptr;
  ASSERT_EQ(hm_stored_model_open(odd.c_str(), &m), HM_SUCCESS) << last_error();
  hm_stored_layer_t* l = nullptr;
  EXPECT_EQ(hm_stored_model_read(m, "x", &l), HM_ERROR_UNSUPPORTED_FORMAT) << last_error();
  EXPECT_NE(last_error().find("R4"), std::string::npos) << last_error();
  hm_stored_model_destroy(m);
  // A path the file system cannot even look at is an I/O error.
  EXPECT_EQ(hm_stored_model_open(std::string(5000, 'x').c_str(), &m), HM_ERROR_IO);
}

// A stored layer must be what pack writes for its own values. The byte counts alone let through
// padding that is not the converter's (the kernels read K padding: NaN scales there made the
// GPU output NaN while the host reference, which skips padding, was clean), a format edited
// within the padding, and values pack refuses (a NaN global scale, a NaN bias).
TEST(StoredModel, PaddingAndValuesMustBeWhatTheConverterWrites) {
  Scratch s("stored_padding");
  auto read = [&](const std::string& fmt, const std::vector<Tensor>& tensors) {
    hm::io::SafetensorsWriter w;
    for (const Tensor& x : tensors)
      w.add_borrowed(x.name, x.dtype, x.shape, x.bytes.data(), x.bytes.size());
    w.set_metadata("humming.format.x", fmt);
    const std::string path = (s.root / "layer.safetensors").string();
    w.write(path);
    hm_stored_model_t* m = nullptr;
    EXPECT_EQ(hm_stored_model_open(path.c_str(), &m), HM_SUCCESS) << last_error();
    hm_stored_layer_t* l = nullptr;
    const hm_status_t status = hm_stored_model_read(m, "x", &l);
    hm_stored_layer_destroy(l);
    hm_stored_model_destroy(m);
    return status;
  };
  // k = 32 with groups of 32: K is padded to 64, so half of every chunk and the second scale
  // group are padding. Packed by the library, the layer reads back.
  const std::string fmt = "w=uint4b8 a=f16 c=f16 s=f16:g32 n=64 k=32";
  hm_format_t* f = nullptr;
  ASSERT_EQ(hm_format_parse(fmt.c_str(), &f), HM_SUCCESS);
  hm_canonical_sizes_t cs;
  HM_INIT(hm_canonical_sizes, &cs);
  ASSERT_EQ(hm_format_canonical_sizes(f, &cs), HM_SUCCESS);
  hm_packed_sizes_t ps;
  HM_INIT(hm_packed_sizes, &ps);
  ASSERT_EQ(hm_format_packed_sizes(f, &ps), HM_SUCCESS);
  std::vector<uint8_t> codes(cs.codes, 9);
  std::vector<float> scales(cs.scales, 0.5f);
  hm_canonical_weight_t in;
  HM_INIT(hm_canonical_weight, &in);
  in.codes = codes.data();
  in.scales = scales.data();
  std::vector<uint8_t> weight(ps.weight), side(ps.scales);
  hm_packed_weight_t out;
  HM_INIT(hm_packed_weight, &out);
  out.weight = weight.data();
  out.scales = side.data();
  ASSERT_EQ(hm_pack(f, &in, &out), HM_SUCCESS) << last_error();
  hm_format_destroy(f);
  const auto tensors = [&](const std::vector<uint8_t>& w, const std::vector<uint8_t>& sc) {
    return std::vector<Tensor>{make_tensor("x.weight", "U8", {int64_t(w.size())}, w),
                               make_tensor("x.weight_scale", "F16", {int64_t(sc.size() / 2)}, sc)};
  };
  EXPECT_EQ(read(fmt, tensors(weight, side)), HM_SUCCESS) << last_error();

  // NaN (f16 0x7e00) in the scale group that is all K padding.
  std::vector<uint8_t> nan_pad = side;
  const size_t second_group = size_t(ps.n_padded) * 2;  // [groups][columns] of 2-byte codes
  nan_pad[second_group] = 0x00;
  nan_pad[second_group + 1] = 0x7e;
  EXPECT_EQ(read(fmt, tensors(weight, nan_pad)), HM_ERROR_INVALID_ARGUMENT);
  // (its low byte, 0x00, is what pack writes: the first byte that differs is the high one)
  EXPECT_NE(last_error().find("'x.weight_scale' differs at byte " +
                              std::to_string(second_group + 1)),
            std::string::npos)
      << last_error();
  // Nonzero weight codes in the K padding, as a format edited from k = 64 to k = 32 leaves them.
  std::vector<uint8_t> full(weight.size(), 0x99);
  EXPECT_EQ(read(fmt, tensors(full, side)), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("'x.weight' differs at byte"), std::string::npos) << last_error();
  // A NaN scale inside the layer: pack would refuse it, so the reader does.
  std::vector<uint8_t> nan_scale = side;
  nan_scale[0] = 0x00;
  nan_scale[1] = 0x7e;
  EXPECT_EQ(read(fmt, tensors(weight, nan_scale)), HM_ERROR_NON_FINITE) << last_error();
  // Scales labelled with another dtype than the format's (bf16 bytes read as f16) are refused.
  EXPECT_EQ(read(fmt, {make_tensor("x.weight", "U8", {int64_t(weight.size())}, weight),
                       make_tensor("x.weight_scale", "BF16", {int64_t(side.size() / 2)}, side)}),
            HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("is BF16, not F16"), std::string::npos) << last_error();

  // A layer name with a NUL byte would be handed out cut short, as another layer's name.
  hm::io::SafetensorsWriter w;
  w.add_borrowed("x.weight", "U8", {int64_t(weight.size())}, weight.data(), weight.size());
  w.set_metadata(std::string("humming.format.x\0y", 18), fmt);
  const std::string path = (s.root / "nul.safetensors").string();
  w.write(path);
  hm_stored_model_t* m = nullptr;
  EXPECT_EQ(hm_stored_model_open(path.c_str(), &m), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("NUL byte"), std::string::npos) << last_error();
}

// ---- AWQ --------------------------------------------------------------------------------------

TEST(ConvertModel, AwqFolder) {
  Scratch s("awq");
  const int64_t n = 64, k = 128, g = 32, groups = k / g;
  constexpr int kOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  std::mt19937 rng(5);
  std::vector<uint32_t> q(n * k), z(groups * n);
  for (auto& v : q) v = rng() & 15u;
  for (auto& v : z) v = rng() & 15u;
  std::vector<double> sc(groups * n);
  for (auto& v : sc) v = round_to(HM_DTYPE_F16, std::uniform_real_distribution<double>(1e-3, 0.05)(rng));
  auto pack_row = [&](const std::vector<uint32_t>& row) {  // AutoAWQ's nibble order
    std::vector<uint32_t> words(n / 8, 0);
    for (int64_t w = 0; w < n / 8; ++w)
      for (int j = 0; j < 8; ++j) words[w] |= row[8 * w + kOrder[j]] << (4 * j);
    return words;
  };
  std::vector<uint32_t> qweight, qzeros;
  for (int64_t i = 0; i < k; ++i) {
    std::vector<uint32_t> row(n);
    for (int64_t c = 0; c < n; ++c) row[c] = q[c * k + i];
    const auto w = pack_row(row);
    qweight.insert(qweight.end(), w.begin(), w.end());
  }
  for (int64_t gi = 0; gi < groups; ++gi) {
    const auto w = pack_row(std::vector<uint32_t>(z.begin() + gi * n, z.begin() + (gi + 1) * n));
    qzeros.insert(qzeros.end(), w.begin(), w.end());
  }
  const std::string p = "model.layers.0.mlp.gate_proj";
  write_shards(s.in(), {{make_tensor(p + ".qweight", "I32", {k, n / 8}, qweight),
                         make_tensor(p + ".qzeros", "I32", {groups, n / 8}, qzeros),
                         f16_tensor(p + ".scales", {groups, n}, sc)}});
  fs::rename(s.in() / "model-00001-of-00001.safetensors", s.in() / "model.safetensors");
  write_text(s.in() / "config.json", R"({"quantization_config": {"quant_method": "awq",
    "bits": 4, "group_size": 32, "zero_point": true, "version": "gemm"}})");
  References refs;
  refs[p].resize(n * k);
  for (int64_t c = 0; c < n; ++c)
    for (int64_t i = 0; i < k; ++i)
      refs[p][c * k + i] = f32((double(q[c * k + i]) - z[(i / g) * n + c]) * sc[(i / g) * n + c]);
  ASSERT_EQ(hm_convert_model(s.in().c_str(), s.out().c_str(), nullptr, nullptr), HM_SUCCESS)
      << last_error();
  EXPECT_FALSE(fs::exists(s.out() / "model.safetensors.index.json"));
  check_layers(s.out(), refs);
}

// ---- compressed-tensors, a scheme per layer group ---------------------------------------------

// compressed-tensors int-quantized (W8A8): int8 weights with channel scales.
void add_ct_int8_layer(std::vector<Tensor>& shard, References& refs, const std::string& p,
                       int64_t n, int64_t k, std::mt19937& rng) {
  std::vector<int8_t> w(n * k);
  for (auto& v : w) v = static_cast<int8_t>(rng());
  std::vector<double> sc(n);
  for (auto& v : sc) v = round_to(HM_DTYPE_BF16, std::uniform_real_distribution<double>(0.001, 0.1)(rng));
  shard.push_back(make_tensor(p + ".weight", "I8", {n, k}, w));
  shard.push_back(f16_tensor(p + ".weight_scale", {n, 1}, sc, HM_DTYPE_BF16));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < k; ++i) refs[p].push_back(f32(double(w[r * k + i]) * sc[r]));
}

// compressed-tensors pack-quantized, g32, `bits` wide (dense packing: version 0.20), with zero
// points when asymmetric.
void add_ct_pack_layer(std::vector<Tensor>& shard, References& refs, const std::string& p,
                       int64_t n, int64_t k, int bits, bool asym, std::mt19937& rng) {
  const int64_t groups = k / 32, mid = 1 << (bits - 1);
  std::vector<uint32_t> q(n * k), z(n * groups, mid);
  for (auto& v : q) v = rng() & ((1u << bits) - 1);
  if (asym)
    for (auto& v : z) v = rng() & ((1u << bits) - 1);
  std::vector<double> sc(n * groups);
  for (auto& v : sc) v = round_to(HM_DTYPE_BF16, std::uniform_real_distribution<double>(0.01, 1)(rng));
  std::vector<uint32_t> packed;
  for (int64_t r = 0; r < n; ++r) {
    const auto w = pack_stream(std::vector<uint32_t>(q.begin() + r * k, q.begin() + (r + 1) * k), bits);
    packed.insert(packed.end(), w.begin(), w.end());
  }
  shard.push_back(make_tensor(p + ".weight_packed", "I32", {n, (k * bits + 31) / 32}, packed));
  shard.push_back(f16_tensor(p + ".weight_scale", {n, groups}, sc, HM_DTYPE_BF16));
  shard.push_back(make_tensor(p + ".weight_shape", "I64", {2}, std::vector<int64_t>{n, k}));
  if (asym) {
    std::vector<uint32_t> zp(((n * bits + 31) / 32) * groups);
    for (int64_t gi = 0; gi < groups; ++gi) {
      std::vector<uint32_t> col(n);
      for (int64_t r = 0; r < n; ++r) col[r] = z[r * groups + gi];
      const auto w = pack_stream(col, bits);
      for (size_t i = 0; i < w.size(); ++i) zp[i * groups + gi] = w[i];
    }
    shard.push_back(make_tensor(p + ".weight_zero_point", "I32", {(n * bits + 31) / 32, groups}, zp));
  }
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < k; ++i)
      refs[p].push_back(f32((double(q[r * k + i]) - z[r * groups + i / 32]) * sc[r * groups + i / 32]));
}

TEST(ConvertModel, CompressedTensorsMixedSchemes) {
  Scratch s("ct");
  std::mt19937 rng(7);
  References refs;
  std::vector<Tensor> shard;
  const int64_t n = 32, k = 128;
  // down_proj: int-quantized W8A8, channel scales; o_proj: pack-quantized 3-bit asymmetric g32,
  // dense (the config's version is 0.20); q_proj: pack-quantized 4-bit symmetric g32 (class-name
  // target "Linear").
  add_ct_int8_layer(shard, refs, "model.layers.0.mlp.down_proj", n, k, rng);
  add_ct_pack_layer(shard, refs, "model.layers.0.self_attn.o_proj", n, k, 3, true, rng);
  add_ct_pack_layer(shard, refs, "model.layers.0.self_attn.q_proj", n, k, 4, false, rng);
  std::vector<uint16_t> head(16 * 32, 0x3f80);
  shard.push_back(make_tensor("lm_head.weight", "BF16", {16, 32}, head));
  write_shards(s.in(), {shard});
  write_text(s.in() / "config.json", R"({"quantization_config": {
    "quant_method": "compressed-tensors", "format": "mixed-precision", "version": "0.20.1",
    "ignore": ["lm_head"],
    "config_groups": {
      "group_0": {"targets": ["re:.*down_proj$"], "format": "int-quantized",
                  "weights": {"num_bits": 8, "type": "int", "symmetric": true, "strategy": "channel"}},
      "group_1": {"targets": ["re:.*o_proj$"], "format": "pack-quantized",
                  "weights": {"num_bits": 3, "type": "int", "symmetric": false, "strategy": "group", "group_size": 32}},
      "group_2": {"targets": ["Linear"], "format": "pack-quantized",
                  "weights": {"num_bits": 4, "type": "int", "symmetric": true, "strategy": "group", "group_size": 32}}}}})");
  Log log;
  hm_convert_model_options_t o = model_options(&log);
  ASSERT_EQ(hm_convert_model(s.in().c_str(), s.out().c_str(), &o, nullptr), HM_SUCCESS)
      << last_error();
  check_layers(s.out(), refs);
  const std::string all = log.details[0] + log.details[1] + log.details[2];
  EXPECT_NE(all.find("ct-int8"), std::string::npos) << all;
  EXPECT_NE(all.find("ct-pack"), std::string::npos) << all;
}

// Experts that the config converts by different rules cannot be one layer: refused up front, so
// a dry run says so too.
TEST(ConvertModel, StackingRefusesExpertsOfDifferentRules) {
  Scratch s("ct_experts");
  std::mt19937 rng(9);
  References refs;
  std::vector<Tensor> shard;
  add_ct_int8_layer(shard, refs, "model.layers.0.mlp.experts.0.down_proj", 32, 128, rng);
  add_ct_pack_layer(shard, refs, "model.layers.0.mlp.experts.1.down_proj", 32, 128, 4, false, rng);
  write_shards(s.in(), {shard});
  write_text(s.in() / "config.json", R"({"quantization_config": {
    "quant_method": "compressed-tensors", "format": "mixed-precision", "version": "0.20.1",
    "config_groups": {
      "group_0": {"targets": ["re:.*experts\\.0\\..*"], "format": "int-quantized",
                  "weights": {"num_bits": 8, "type": "int", "symmetric": true, "strategy": "channel"}},
      "group_1": {"targets": ["Linear"], "format": "pack-quantized",
                  "weights": {"num_bits": 4, "type": "int", "symmetric": true, "strategy": "group", "group_size": 32}}}}})");
  for (uint32_t dry : {uint32_t{HM_CONVERT_MODEL_DRY_RUN}, 0u}) {
    Log log;
    hm_convert_model_options_t o = model_options(&log, dry | HM_CONVERT_MODEL_STACK_EXPERTS);
    EXPECT_EQ(hm_convert_model(s.in().c_str(), s.out().c_str(), &o, nullptr), HM_ERROR_UNSUPPORTED);
    EXPECT_NE(last_error().find("need one scheme and one set of parameters"), std::string::npos)
        << last_error();
    EXPECT_EQ(log.layers, 0);
  }
  // Unstacked, each converts by its own rule.
  Log log;
  hm_convert_model_options_t o = model_options(&log);
  ASSERT_EQ(hm_convert_model(s.in().c_str(), s.out().c_str(), &o, nullptr), HM_SUCCESS)
      << last_error();
  check_layers(s.out(), refs);
}

// ---- FP8 with 128 x 128 block scales ----------------------------------------------------------

TEST(ConvertModel, Fp8BlockFolder) {
  Scratch s("fp8");
  const int64_t n = 256, k = 384;
  std::mt19937 rng(9);
  std::vector<uint8_t> w(n * k);
  for (auto& v : w) {
    v = static_cast<uint8_t>(rng());
    if ((v & 0x7f) == 0x7f) v ^= 1;  // no NaN codes
  }
  std::vector<double> sc(2 * 3);
  for (auto& v : sc) v = std::ldexp(1.0 + (rng() % 8) / 8.0, -int(rng() % 6));  // exact in bf16
  const std::string p = "model.layers.0.mlp.up_proj";
  write_shards(s.in(), {{make_tensor(p + ".weight", "F8_E4M3", {n, k}, w),
                         f32_tensor(p + ".weight_scale_inv", {2, 3}, sc)}});
  write_text(s.in() / "config.json", R"({"quantization_config": {"quant_method": "fp8",
    "activation_scheme": "dynamic", "weight_block_size": [128, 128]}})");
  References refs;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < k; ++i)
      refs[p].push_back(f32(decode(HM_DTYPE_E4M3, w[r * k + i]) * sc[(r / 128) * 3 + i / 128]));
  ASSERT_EQ(hm_convert_model(s.in().c_str(), s.out().c_str(), nullptr, nullptr), HM_SUCCESS)
      << last_error();
  check_layers(s.out(), refs);
}

// gpt-oss MXFP4 experts converted for e4m3 activations: an expert whose group exponents span
// more than the exponent window loses values, and the layer's report says how many groups.
TEST(ConvertModel, Mxfp4ForE4m3ReportsTheGroupsRoundedIntoTheWindow) {
  Scratch s("mxfp4");
  const int64_t e = 2, n = 64, k = 64, groups = k / 32;
  std::vector<uint8_t> blocks(e * n * k / 2, 0x77);  // every code 6.0 (0b0111): all nonzero
  std::vector<uint8_t> scales(e * n * groups, 127);
  // Expert 1, row 0, group 0: 2^-20, 20 below the others' 2^0 and the e4m3 window is 12 wide:
  // 6 * 2^-20 becomes a code at 2^-11 (6 * 2^-9 = 0.0117 > 6 at 2^-11): rounded to 0.
  scales[(1 * n + 0) * groups + 0] = 107;
  // Expert 0, row 3, group 1: 2^-12, one below the window: 6 * 2^-12 = 3 * 2^-11, exact.
  scales[(0 * n + 3) * groups + 1] = 115;
  const std::string p = "model.layers.0.mlp.experts.gate_up_proj";
  write_shards(s.in(), {{make_tensor(p + "_blocks", "U8", {e, n, groups, 16}, blocks),
                         make_tensor(p + "_scales", "U8", {e, n, groups}, scales)}});
  write_text(s.in() / "config.json", R"({"quantization_config": {"quant_method": "mxfp4"}})");
  hm_convert_options_t layer;
  hm_convert_options_init(&layer);
  layer.activation = HM_DTYPE_E4M3;
  Log log;
  hm_convert_model_options_t o = model_options(&log);
  o.layer_options = &layer;
  ASSERT_EQ(hm_convert_model(s.in().c_str(), s.out().c_str(), &o, nullptr), HM_SUCCESS)
      << last_error();
  ASSERT_EQ(log.details.size(), 1u);
  EXPECT_NE(log.details[0].find("s=ue8m0:g32+tensor"), std::string::npos) << log.details[0];
  EXPECT_NE(log.details[0].find("1 of 256 scale groups"), std::string::npos) << log.details[0];
  EXPECT_NE(log.details[0].find("e4m3 exponent window"), std::string::npos) << log.details[0];
  // The note is kept with the layer in the output's metadata, by hm_convert_model and by
  // hm_convert_file alike.
  std::vector<fs::path> written;
  for (const auto& entry : fs::directory_iterator(s.out()))
    if (entry.path().extension() == ".safetensors") written.push_back(entry.path());
  ASSERT_EQ(written.size(), 1u);
  const fs::path single = s.root / "single.safetensors";
  std::vector<fs::path> inputs;
  for (const auto& entry : fs::directory_iterator(s.in()))
    if (entry.path().extension() == ".safetensors") inputs.push_back(entry.path());
  ASSERT_EQ(inputs.size(), 1u);
  ASSERT_EQ(hm_convert_file("mxfp4", inputs[0].c_str(), single.c_str(), &layer), HM_SUCCESS)
      << last_error();
  for (const fs::path& out : {written[0], single}) {
    const hm::io::SafetensorsFile f(out.string());
    const auto note = f.metadata().find("humming.note." + p);
    ASSERT_NE(note, f.metadata().end()) << out;
    EXPECT_EQ(note->second.rfind("1 of 256 scale groups lay below the e4m3 exponent window", 0), 0u)
        << note->second;
  }
}

// The other files of a model folder: a dangling symlink (an HF cache entry whose blob is gone) was
// skipped and a symlinked folder left out, yet both counted as copied. Symlinked folders are now
// followed (a loop is refused), and whatever cannot be copied fails the conversion naming it.
// The published folder has a new folder's mode, not mkdtemp's 0700.
TEST(ConvertModel, SymlinkedFilesAndFoldersAreCopiedOrRefused) {
  Scratch s("symlink");
  gptq_model(s.in());
  fs::create_directories(s.root / "assets" / "sub");
  write_text(s.root / "assets" / "sub" / "a.txt", "x");
  write_text(s.root / "assets" / "b.txt", "y");
  fs::create_directories(s.in() / "extras");
  fs::create_directory_symlink(s.root / "assets", s.in() / "extras" / "assets");
  fs::create_symlink(s.root / "assets" / "b.txt", s.in() / "linked.txt");
  Log log;
  hm_convert_model_options_t o = model_options(&log);
  ASSERT_EQ(hm_convert_model(s.in().c_str(), s.out().c_str(), &o, nullptr), HM_SUCCESS)
      << last_error();
  EXPECT_EQ(slurp(s.out() / "extras" / "assets" / "sub" / "a.txt"), "x");
  EXPECT_EQ(slurp(s.out() / "extras" / "assets" / "b.txt"), "y");
  EXPECT_EQ(slurp(s.out() / "linked.txt"), "y");
  const mode_t mask = ::umask(0022);
  ::umask(mask);
  struct stat st {};
  ASSERT_EQ(::stat(s.out().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0777 & ~mask);
  fs::remove_all(s.out());

  // A symlink back into its own folder would copy forever.
  fs::create_directory_symlink(s.in() / "extras", s.in() / "extras" / "loop");
  EXPECT_EQ(hm_convert_model(s.in().c_str(), s.out().c_str(), &o, nullptr), HM_ERROR_IO);
  EXPECT_NE(last_error().find("loop"), std::string::npos) << last_error();
  EXPECT_EQ(s.entries(), (std::vector<std::string>{"assets", "in"}));
  fs::remove(s.in() / "extras" / "loop");

  // A dangling symlink: refused, also in a dry run, before anything is written.
  fs::create_symlink(s.root / "missing_blob", s.in() / "tokenizer_config.json");
  EXPECT_EQ(hm_convert_model(s.in().c_str(), s.out().c_str(), &o, nullptr), HM_ERROR_IO);
  EXPECT_NE(last_error().find("tokenizer_config.json"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("does not exist"), std::string::npos) << last_error();
  EXPECT_EQ(s.entries(), (std::vector<std::string>{"assets", "in"}));
  Log dry;
  hm_convert_model_options_t d = model_options(&dry, HM_CONVERT_MODEL_DRY_RUN);
  EXPECT_EQ(hm_convert_model(s.in().c_str(), s.out().c_str(), &d, nullptr), HM_ERROR_IO);
}

// Config values of the wrong JSON type were internal errors, and out-of-range integers were cut
// to int32 (bits = 4294967300 read as 4).
TEST(ConvertModel, ConfigValuesOfTheWrongTypeOrRangeAreParseErrors) {
  Scratch s("cfg");
  gptq_model(s.in());
  Log log;
  hm_convert_model_options_t o = model_options(&log, HM_CONVERT_MODEL_DRY_RUN);
  struct Case {
    std::string config;  // quantization_config, or "" for hf_quant_config.json alone
    std::string key;
  };
  const Case cases[] = {
      {R"({"quant_method": "gptq", "bits": 4294967300, "group_size": 32})", "bits"},
      {R"({"quant_method": "gptq", "bits": 4, "group_size": 1e3})", "group_size"},
      {R"({"quant_method": "gptq", "bits": 4, "checkpoint_format": 2})", "checkpoint_format"},
      {R"({"quant_method": "awq", "w_bit": -4})", "w_bit"},
      {R"({"quant_method": "fp8", "weight_block_size": [4294967424, 4294967424]})",
       "weight_block_size"},
      {R"({"quant_method": "compressed-tensors", "format": "float-quantized", "config_groups":
          {"g": {"targets": ["Linear"], "weights": {"num_bits": 8, "strategy": "block",
          "block_structure": ["a", "a"]}}}})",
       "block_structure"},
      {"", "quantization"},
  };
  for (const Case& c : cases) {
    if (c.config.empty()) {
      write_text(s.in() / "config.json", R"({"model_type": "llama"})");
      write_text(s.in() / "hf_quant_config.json", R"({"quantization": "nvfp4"})");
    } else {
      write_text(s.in() / "config.json",
                 R"({"model_type": "llama", "quantization_config": )" + c.config + "}");
    }
    EXPECT_EQ(hm_convert_model(s.in().c_str(), s.out().c_str(), &o, nullptr), HM_ERROR_PARSE)
        << c.config << ": " << last_error();
    EXPECT_NE(last_error().find("'" + c.key + "'"), std::string::npos) << last_error();
  }
}

}  // namespace
