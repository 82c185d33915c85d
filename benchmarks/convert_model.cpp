// Model-folder conversion throughput: a GPTQ int4 g128 model folder (L layers of N x K in S
// shards, plus an unquantized embedding and a tokenizer file) written to a scratch folder, then
// converted with hm_convert_model at 1 thread and at every usable core; reports GB/s of
// checkpoint (tensor bytes read / wall time, the output written and fsync'ed).
// Usage: bench_convert_model [--layers 16] [--n 4096] [--k 4096] [--shards 2] [--dir D]
//                            [--repeat 2] [--json FILE]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "humming.h"

namespace {

void check(hm_status_t s, const char* what) {
  if (s != HM_SUCCESS) {
    char buf[4096];
    hm_last_error_message(buf, sizeof buf);
    std::fprintf(stderr, "%s: %s: %s\n", what, hm_status_name(s), buf);
    std::exit(1);
  }
}

struct Entry {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// A safetensors file by hand (the benchmark uses the public API only).
void write_safetensors(const std::string& path, const std::vector<Entry>& entries) {
  std::string header = "{";
  uint64_t offset = 0;
  for (const Entry& e : entries) {
    std::string shape;
    for (int64_t d : e.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    header += (header.size() > 1 ? "," : "") + std::string("\"") + e.name + "\":{\"dtype\":\"" +
              e.dtype + "\",\"shape\":[" + shape + "],\"data_offsets\":[" +
              std::to_string(offset) + "," + std::to_string(offset + e.bytes.size()) + "]}";
    offset += e.bytes.size();
  }
  header += "}";
  while (header.size() % 8) header += ' ';
  FILE* f = std::fopen(path.c_str(), "wb");
  const uint64_t len = header.size();
  std::fwrite(&len, 8, 1, f);
  std::fwrite(header.data(), 1, header.size(), f);
  for (const Entry& e : entries) std::fwrite(e.bytes.data(), 1, e.bytes.size(), f);
  std::fclose(f);
}

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  int layers = 16, shards = 2, repeat = 2;
  int64_t n = 4096, k = 4096;
  std::string dir = "/tmp/hm_bench_model_" + std::to_string(::getpid()), json;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--layers") layers = std::atoi(v.c_str());
    else if (a == "--n") n = std::atoll(v.c_str());
    else if (a == "--k") k = std::atoll(v.c_str());
    else if (a == "--shards") shards = std::atoi(v.c_str());
    else if (a == "--repeat") repeat = std::atoi(v.c_str());
    else if (a == "--dir") dir = v;
    else if (a == "--json") json = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  const std::string in = dir + "/in";
  std::system(("rm -rf '" + dir + "' && mkdir -p '" + in + "'").c_str());
  std::mt19937 rng(1);
  const int64_t g = 128, groups = k / g;
  std::string weight_map;
  for (int s = 0; s < shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, shards);
    std::vector<Entry> entries;
    for (int l = s; l < layers; l += shards) {
      const std::string p = "model.layers." + std::to_string(l) + ".mlp.down_proj";
      std::vector<uint32_t> qweight(k / 8 * n), qzeros(groups * n / 8);
      for (auto& w : qweight) w = rng();
      for (auto& z : qzeros) z = rng() & 0x66666666u;
      std::vector<uint16_t> scales(groups * n);
      for (auto& v : scales) v = static_cast<uint16_t>(0x1c00 + (rng() & 0x3ff));
      std::vector<int32_t> g_idx(k);
      for (int64_t i = 0; i < k; ++i) g_idx[i] = static_cast<int32_t>(i / g);
      entries.push_back({p + ".g_idx", "I32", {k}, bytes_of(g_idx)});
      entries.push_back({p + ".qweight", "I32", {k / 8, n}, bytes_of(qweight)});
      entries.push_back({p + ".qzeros", "I32", {groups, n / 8}, bytes_of(qzeros)});
      entries.push_back({p + ".scales", "F16", {groups, n}, bytes_of(scales)});
    }
    if (s == 0)
      entries.push_back({"model.embed_tokens.weight", "BF16", {1024, k},
                         std::vector<uint8_t>(static_cast<size_t>(2048 * k), 1)});
    for (const Entry& e : entries)
      weight_map += (weight_map.empty() ? "" : ",") + std::string("\"") + e.name + "\":\"" +
                    name + "\"";
    write_safetensors(in + "/" + name, entries);
  }
  auto write = [](const std::string& path, const std::string& text) {
    FILE* f = std::fopen(path.c_str(), "w");
    std::fputs(text.c_str(), f);
    std::fclose(f);
  };
  write(in + "/model.safetensors.index.json", "{\"metadata\":{},\"weight_map\":{" + weight_map + "}}");
  write(in + "/config.json",
        "{\"quantization_config\":{\"quant_method\":\"gptq\",\"bits\":4,\"group_size\":128,"
        "\"sym\":false,\"desc_act\":false,\"meta\":{\"quantizer\":[\"gptqmodel:4.0.0\"]}}}");
  write(in + "/tokenizer.json", "{}");

  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  std::string results;
  for (int threads : {1, cores}) {
    double best = 1e30;
    hm_convert_model_summary_t sum;
    hm_convert_model_summary_init(&sum);
    for (int r = 0; r < repeat; ++r) {
      hm_convert_model_options_t o;
      hm_convert_model_options_init(&o);
      o.threads = threads;
      o.flags = HM_CONVERT_MODEL_FORCE;
      check(hm_convert_model(in.c_str(), (dir + "/out").c_str(), &o, &sum), "converting");
      best = std::min(best, sum.seconds);
    }
    const double gbs = static_cast<double>(sum.bytes_in) / 1e9 / best;
    std::printf("GPTQ int4 g128 model: %d layers of %lldx%lld in %d shards, %.3f GB  threads=%d:"
                "  %.2f s  %.2f GB/s (best of %d)\n",
                layers, static_cast<long long>(n), static_cast<long long>(k), shards,
                static_cast<double>(sum.bytes_in) / 1e9, threads, best, gbs, repeat);
    results += (results.empty() ? "" : ",") + std::string("{\"threads\":") +
               std::to_string(threads) + ",\"seconds\":" + std::to_string(best) +
               ",\"gb_per_s\":" + std::to_string(gbs) + "}";
  }
  if (!json.empty()) {
    FILE* out = std::fopen(json.c_str(), "w");
    std::fprintf(out, "{\"benchmark\":\"convert_model_gptq_int4_g128\",\"layers\":%d,\"n\":%lld,"
                      "\"k\":%lld,\"runs\":[%s]}\n",
                 layers, static_cast<long long>(n), static_cast<long long>(k), results.c_str());
    std::fclose(out);
  }
  std::system(("rm -rf '" + dir + "'").c_str());
  return 0;
}
