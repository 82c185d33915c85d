// Whole files: a small multi-layer GPTQ checkpoint (an act-order layer with bias, a plain layer,
// an unquantized embedding) through hm_convert_file and `humming convert`; the output read back
// with the safetensors reader, unpacked and dequantized must equal the per-layer conversion.
// Files with tensors the scheme does not describe are refused, leaving no output behind.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "io/safetensors.hpp"
#include "test_schema_support.hpp"

namespace {

using namespace schema_test;

std::string temp_path(const std::string& name) {
  return std::string(HM_TEST_BINARY_DIR) + "/convert_" + name + "_" + std::to_string(::getpid()) +
         ".safetensors";
}

bool exists(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f) std::fclose(f);
  return f != nullptr;
}

// A GPTQ layer (4-bit, g32, symmetric v1) with optional act-order and bias, named prefix.*.
std::vector<Tensor> gptq_layer(const std::string& prefix, int64_t n, int64_t k, bool act_order,
                               bool bias, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t g = 32, groups = k / g;
  std::vector<uint32_t> qweight(static_cast<size_t>(k / 8 * n));
  for (auto& w : qweight) w = rng();
  std::vector<uint32_t> qzeros(static_cast<size_t>(groups * n / 8), 0x77777777u);  // v1 sym: 8 - 1
  std::vector<double> scales(static_cast<size_t>(groups * n));
  for (auto& s : scales)
    s = round_to(HM_DTYPE_F16, std::uniform_real_distribution<double>(1e-3, 0.02)(rng));
  std::vector<int32_t> g_idx(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) g_idx[i] = static_cast<int32_t>(i / g);
  if (act_order) std::shuffle(g_idx.begin(), g_idx.end(), rng);
  std::vector<Tensor> t = {make_tensor(prefix + ".qweight", "I32", {k / 8, n}, qweight),
                           make_tensor(prefix + ".qzeros", "I32", {groups, n / 8}, qzeros),
                           f16_tensor(prefix + ".scales", {groups, n}, scales),
                           make_tensor(prefix + ".g_idx", "I32", {k}, g_idx)};
  if (bias) {
    std::vector<double> b(static_cast<size_t>(n));
    for (auto& v : b)
      v = round_to(HM_DTYPE_F16, std::uniform_real_distribution<double>(-1, 1)(rng));
    t.push_back(f16_tensor(prefix + ".bias", {n}, b));
  }
  return t;
}

void write_file(const std::string& path, const std::vector<Tensor>& tensors) {
  hm::io::SafetensorsWriter w;
  for (const Tensor& t : tensors)
    w.add_borrowed(t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size());
  w.set_metadata("format", "pt");
  w.write(path);
}

struct ProgressLog {
  int calls = 0;
  uint64_t last_done = 0, total = 0;
};
void on_progress(void* user, const char*, uint64_t done, uint64_t total) {
  auto* p = static_cast<ProgressLog*>(user);
  EXPECT_GE(done, p->last_done);
  p->calls++;
  p->last_done = done;
  p->total = total;
}

std::vector<Tensor> sample_model() {
  std::vector<Tensor> all;
  std::vector<uint16_t> embed(128 * 64);
  for (size_t i = 0; i < embed.size(); ++i) embed[i] = static_cast<uint16_t>(i * 31);
  all.push_back(make_tensor("model.embed_tokens.weight", "BF16", {128, 64}, embed));
  for (const Tensor& t : gptq_layer("model.layers.0.self_attn.q_proj", 64, 128, true, true, 1))
    all.push_back(t);
  for (const Tensor& t : gptq_layer("model.layers.0.mlp.down_proj", 128, 64, false, false, 2))
    all.push_back(t);
  all.push_back(make_tensor("model.norm.weight", "F32", {64}, std::vector<float>(64, 1.0f)));
  return all;
}

// Reads a converted layer back: format from the metadata, unpack, dequantize.
std::vector<float> read_back(const hm::io::SafetensorsFile& f, const std::string& prefix,
                             std::string* format_text) {
  auto it = f.metadata().find("humming.format." + prefix);
  EXPECT_NE(it, f.metadata().end()) << prefix;
  if (it == f.metadata().end()) return {};
  *format_text = it->second;
  hm_format_t* format = nullptr;
  EXPECT_EQ(hm_format_parse(it->second.c_str(), &format), HM_SUCCESS) << last_error();
  hm_packed_sizes_t ps;
  hm_packed_sizes_init(&ps);
  EXPECT_EQ(hm_format_packed_sizes(format, &ps), HM_SUCCESS) << last_error();
  const hm::io::TensorView* w = f.find(prefix + ".weight");
  const hm::io::TensorView* s = f.find(prefix + ".weight_scale");
  EXPECT_NE(w, nullptr);
  EXPECT_EQ(w->bytes, ps.weight);
  if (ps.scales) {
    EXPECT_EQ(s->bytes, ps.scales);
  }
  hm_packed_weight_t packed;
  hm_packed_weight_init(&packed);
  packed.weight = const_cast<uint8_t*>(w->data);
  packed.scales = s ? const_cast<uint8_t*>(s->data) : nullptr;
  hm_canonical_sizes_t cs;
  hm_canonical_sizes_init(&cs);
  hm_format_canonical_sizes(format, &cs);
  std::vector<uint8_t> codes(cs.codes);
  std::vector<float> scales(cs.scales), zeros(cs.zero_points), global(cs.global_scale);
  hm_canonical_weight_t c;
  hm_canonical_weight_init(&c);
  c.codes = codes.data();
  c.scales = scales.empty() ? nullptr : scales.data();
  c.zero_points = zeros.empty() ? nullptr : zeros.data();
  c.global_scale = global.empty() ? nullptr : global.data();
  EXPECT_EQ(hm_unpack(format, &packed, &c), HM_SUCCESS) << last_error();
  std::vector<float> out(cs.codes);
  EXPECT_EQ(hm_dequantize(format, &c, out.data()), HM_SUCCESS) << last_error();
  hm_format_destroy(format);
  return out;
}

TEST(ConvertFile, MultiLayerRoundTrip) {
  const std::string in = temp_path("in"), out = temp_path("out");
  const std::vector<Tensor> model = sample_model();
  write_file(in, model);

  hm_convert_options_t options;
  hm_convert_options_init(&options);
  ProgressLog log;
  options.progress = on_progress;
  options.progress_user_data = &log;
  ASSERT_EQ(hm_convert_file("gptq", in.c_str(), out.c_str(), &options), HM_SUCCESS) << last_error();
  EXPECT_EQ(log.calls, 4) << "two copied tensors and two layers";
  EXPECT_EQ(log.last_done, log.total);
  EXPECT_FALSE(exists(out + ".tmp"));

  const hm::io::SafetensorsFile f(out);
  EXPECT_EQ(f.metadata().at("format"), "pt") << "the checkpoint's own metadata is kept";
  EXPECT_EQ(f.metadata().at("humming.scheme"), "gptq");
  // Unquantized tensors are copied byte for byte; the checkpoint's quantized tensors are gone.
  for (const char* name : {"model.embed_tokens.weight", "model.norm.weight"}) {
    const hm::io::TensorView* t = f.find(name);
    ASSERT_NE(t, nullptr) << name;
    const Tensor* src = nullptr;
    for (const Tensor& m : model)
      if (m.name == name) src = &m;
    EXPECT_EQ(std::vector<uint8_t>(t->data, t->data + t->bytes), src->bytes) << name;
  }
  EXPECT_EQ(f.find("model.layers.0.mlp.down_proj.qweight"), nullptr);
  EXPECT_EQ(f.find("model.layers.0.mlp.down_proj.g_idx"), nullptr);

  // Each layer equals the per-layer conversion, through pack -> file -> unpack.
  const struct {
    const char* prefix;
    size_t first, count;
  } layers[] = {{"model.layers.0.self_attn.q_proj", 1, 5}, {"model.layers.0.mlp.down_proj", 6, 4}};
  for (const auto& l : layers) {
    const std::vector<Tensor> tensors(model.begin() + l.first, model.begin() + l.first + l.count);
    const Converted direct = convert(HM_SCHEME_GPTQ, tensors);
    ASSERT_EQ(direct.status, HM_SUCCESS) << direct.error;
    std::string format;
    const std::vector<float> back = read_back(f, l.prefix, &format);
    EXPECT_EQ(format, direct.format);
    expect_bitwise(back, direct.weight, l.prefix);
    const hm::io::TensorView* perm = f.find(std::string(l.prefix) + ".k_permutation");
    EXPECT_EQ(perm != nullptr, !direct.permutation.empty()) << l.prefix;
    if (perm) {
      std::vector<int32_t> p(perm->bytes / 4);
      std::memcpy(p.data(), perm->data, perm->bytes);
      EXPECT_EQ(p, direct.permutation);
    }
    const hm::io::TensorView* bias = f.find(std::string(l.prefix) + ".bias");
    EXPECT_EQ(bias != nullptr, !direct.bias.empty());
    if (bias) {
      ASSERT_EQ(bias->dtype, "F16");
      for (size_t i = 0; i < direct.bias.size(); ++i) {
        uint16_t h;
        std::memcpy(&h, bias->data + 2 * i, 2);
        EXPECT_EQ(decode(HM_DTYPE_F16, h), direct.bias[i]);
      }
    }
  }
  std::remove(in.c_str());
  std::remove(out.c_str());
}

// The cancel callback: asked after each item; nonzero stops the call with
// HM_ERROR_INVALID_STATE, and nothing is left at the output path (no file, no temporary). A
// caller whose struct ends before the cancel fields (built against an older humming.h) has none.
TEST(ConvertFile, CancelStopsAndLeavesNothing) {
  const std::string in = temp_path("in"), out = temp_path("out");
  write_file(in, sample_model());
  struct Countdown {
    int left;
    int asked = 0;
  };
  auto cancel = [](void* user) -> int32_t {
    auto* c = static_cast<Countdown*>(user);
    ++c->asked;
    return --c->left < 0 ? 1 : 0;
  };
  auto leftovers = [&] {
    int n = 0;
    const std::filesystem::path o(out);
    for (const auto& e : std::filesystem::directory_iterator(o.parent_path()))
      n += e.path().filename().string().rfind(o.filename().string(), 0) == 0;
    return n;
  };
  for (int after : {0, 2}) {  // cancelled at the first item, and at the third
    hm_convert_options_t options;
    hm_convert_options_init(&options);
    Countdown countdown{after};
    options.cancel = cancel;
    options.cancel_user_data = &countdown;
    EXPECT_EQ(hm_convert_file("gptq", in.c_str(), out.c_str(), &options), HM_ERROR_INVALID_STATE);
    EXPECT_NE(last_error().find("cancelled by the cancel callback"), std::string::npos)
        << last_error();
    EXPECT_EQ(countdown.asked, after + 1);
    EXPECT_EQ(leftovers(), 0) << "neither the output nor its temporary file";
  }
  // Never cancelling: four items asked, the file written.
  hm_convert_options_t options;
  hm_convert_options_init(&options);
  Countdown never{1000};
  options.cancel = cancel;
  options.cancel_user_data = &never;
  ASSERT_EQ(hm_convert_file("gptq", in.c_str(), out.c_str(), &options), HM_SUCCESS) << last_error();
  EXPECT_EQ(never.asked, 4);
  std::remove(out.c_str());
  // An older caller's struct: the cancel fields are past its end and are not read.
  Countdown unread{0};
  options.cancel_user_data = &unread;
  options.struct_size = offsetof(hm_convert_options_t, cancel);
  ASSERT_EQ(hm_convert_file("gptq", in.c_str(), out.c_str(), &options), HM_SUCCESS) << last_error();
  EXPECT_EQ(unread.asked, 0);
  options.struct_size = offsetof(hm_convert_options_t, cancel) - 1;
  EXPECT_EQ(hm_convert_file("gptq", in.c_str(), out.c_str(), &options),
            HM_ERROR_INVALID_STRUCT_SIZE);
  std::remove(in.c_str());
  std::remove(out.c_str());
}

TEST(ConvertFile, RefusesWhatTheSchemeDoesNotDescribe) {
  const std::string in = temp_path("refuse_in"), out = temp_path("refuse_out");
  write_file(in, sample_model());
  // fp8 finds no layer, and the GPTQ tensors look quantized: refused, naming one.
  EXPECT_EQ(hm_convert_file("fp8", in.c_str(), out.c_str(), nullptr), HM_ERROR_UNSUPPORTED);
  EXPECT_NE(last_error().find("qweight"), std::string::npos) << last_error();
  EXPECT_FALSE(exists(out));
  // AWQ recognizes qweight + scales, but the shapes are GPTQ's: the error names the layer.
  EXPECT_NE(hm_convert_file("awq", in.c_str(), out.c_str(), nullptr), HM_SUCCESS);
  EXPECT_NE(last_error().find("model.layers.0"), std::string::npos) << last_error();
  EXPECT_FALSE(exists(out));
  EXPECT_FALSE(exists(out + ".tmp"));
  // A stray quantization tensor no layer claims.
  std::vector<Tensor> model = sample_model();
  model.push_back(
      make_tensor("model.layers.9.mlp.orphan.g_idx", "I32", {4}, std::vector<int32_t>{0, 0, 0, 0}));
  write_file(in, model);
  EXPECT_EQ(hm_convert_file("gptq", in.c_str(), out.c_str(), nullptr), HM_ERROR_UNSUPPORTED);
  EXPECT_NE(last_error().find("orphan.g_idx"), std::string::npos) << last_error();
  // Unknown scheme; same path in and out; a missing input.
  EXPECT_EQ(hm_convert_file("gguf", in.c_str(), out.c_str(), nullptr), HM_ERROR_PARSE);
  EXPECT_EQ(hm_convert_file("gptq", in.c_str(), in.c_str(), nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(hm_convert_file("gptq", "/nonexistent/x.safetensors", out.c_str(), nullptr),
            HM_ERROR_IO);
  std::remove(in.c_str());
}

TEST(ConvertFile, CommandLine) {
  const std::string in = temp_path("cli_in"), out = temp_path("cli_out");
  write_file(in, sample_model());
  const std::string cli = HM_CLI_PATH;
  const std::string ok =
      cli + " convert --scheme gptq --in " + in + " --out " + out + " --act f16 > /dev/null";
  EXPECT_EQ(std::system(ok.c_str()), 0) << ok;
  EXPECT_TRUE(exists(out));
  const hm::io::SafetensorsFile f(out);
  EXPECT_NE(f.metadata().count("humming.format.model.layers.0.mlp.down_proj"), 0u);
  // An existing output is replaced only with --force, as a model folder is.
  const std::string again =
      cli + " convert --scheme gptq --in " + in + " --out " + out + " > /dev/null 2> " + out +
      ".err";
  EXPECT_NE(std::system(again.c_str()), 0) << again;
  {
    std::ifstream err(out + ".err");
    const std::string text((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("exists; choose a new file or pass --force"), std::string::npos) << text;
  }
  std::remove((out + ".err").c_str());
  EXPECT_EQ(std::system((ok + " --force").c_str()), 0) << ok;
  std::remove(out.c_str());
  const std::string bad =
      cli + " convert --scheme nope --in " + in + " --out " + out + " 2> /dev/null";
  EXPECT_NE(std::system(bad.c_str()), 0);
  EXPECT_FALSE(exists(out));
  std::remove(in.c_str());
}

// SIGINT / SIGTERM in single-file mode killed the command and left its `.tmp` output behind; now
// the conversion stops at the next layer and removes it, as a model folder's does.
TEST(ConvertFile, CommandLineInterruptLeavesNothing) {
  std::string dir = std::string(HM_TEST_BINARY_DIR) + "/convert_sigint_XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const std::string in = dir + "/in.safetensors", out = dir + "/out.safetensors";
  std::vector<Tensor> model;
  for (int i = 0; i < 48; ++i)
    for (const Tensor& t : gptq_layer("l" + std::to_string(i), 512, 2048, false, false, i))
      model.push_back(t);
  write_file(in, model);
  const std::string cli = HM_CLI_PATH;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::execl(cli.c_str(), cli.c_str(), "convert", "--scheme", "gptq", "--quiet", "--in", in.c_str(),
            "--out", out.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Wait for the temporary output to appear (the converter is then in its layer loop).
  bool started = false;
  for (int i = 0; i < 20000 && !started; ++i) {
    for (const auto& e : std::filesystem::directory_iterator(dir))
      started |= e.path().extension() == ".tmp";
    if (!started) ::usleep(500);
  }
  ::kill(child, SIGINT);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    left.push_back(e.path().filename().string());
  std::filesystem::remove_all(dir);
  if (!started || (WIFEXITED(status) && WEXITSTATUS(status) == 0))
    GTEST_SKIP() << "the conversion finished before the signal could interrupt it";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130) << "status " << status;
  EXPECT_EQ(left, std::vector<std::string>{"in.safetensors"});
}

// An anchor without its companion (a GPTQ qweight without scales), or the companion without the
// anchor, was refused without saying what was missing; F32 scales without a qweight (they look
// unquantized) were even copied through as a plain tensor.
TEST(ConvertFile, AMissingCompanionIsNamed) {
  const std::string in = temp_path("companion_in"), out = temp_path("companion_out");
  const std::vector<Tensor> layer = gptq_layer("l", 64, 128, false, false, 5);
  const std::vector<Tensor> other = gptq_layer("m", 64, 128, false, false, 6);
  write_file(in, {layer[0], layer[1]});  // qweight, qzeros
  EXPECT_EQ(hm_convert_file("gptq", in.c_str(), out.c_str(), nullptr), HM_ERROR_UNSUPPORTED);
  EXPECT_NE(last_error().find("companion 'l.scales' is missing"), std::string::npos)
      << last_error();
  std::vector<Tensor> orphan = other;
  orphan.push_back(layer[2]);  // l.scales without l.qweight
  write_file(in, orphan);
  EXPECT_EQ(hm_convert_file("gptq", in.c_str(), out.c_str(), nullptr), HM_ERROR_UNSUPPORTED);
  EXPECT_NE(last_error().find("anchor 'l.qweight' is missing"), std::string::npos)
      << last_error();
  orphan.back() = f32_tensor("l.scales", {4, 64}, std::vector<double>(4 * 64, 0.01));
  write_file(in, orphan);
  EXPECT_EQ(hm_convert_file("gptq", in.c_str(), out.c_str(), nullptr), HM_ERROR_UNSUPPORTED);
  EXPECT_NE(last_error().find("anchor 'l.qweight' is missing"), std::string::npos)
      << last_error();
  EXPECT_FALSE(exists(out));
  std::remove(in.c_str());
}

}  // namespace
