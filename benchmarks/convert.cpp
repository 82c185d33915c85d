// Conversion benchmark: converting one int4 g128 GPTQ layer (N = K = 8192 by default) on the host,
// through the public API: hm_convert_layer (checkpoint tensors -> canonical buffers), and hm_pack
// of the result into the standard layout. Target (issue #6): the conversion <= 0.5 s on 2 cores.
// Usage: bench_convert [--n 8192] [--k 8192] [--repeat 3] [--act-order 0|1] [--json FILE]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "humming.h"

static std::string last_error() {
  char buf[4096];
  hm_last_error_message(buf, sizeof buf);
  return buf;
}

static void check(hm_status_t s, const char* what) {
  if (s != HM_SUCCESS) {
    std::fprintf(stderr, "%s: %s: %s\n", what, hm_status_name(s), last_error().c_str());
    std::exit(1);
  }
}

static double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

static hm_checkpoint_tensor_t tensor(const char* name, const char* dtype, int64_t d0, int64_t d1,
                                     const void* data, uint64_t bytes) {
  hm_checkpoint_tensor_t t;
  hm_checkpoint_tensor_init(&t);
  t.name = name;
  t.dtype = dtype;
  t.ndim = d1 > 0 ? 2 : 1;
  t.shape[0] = d0;
  t.shape[1] = d1;
  t.data = data;
  t.bytes = bytes;
  return t;
}

int main(int argc, char** argv) {
  int64_t n = 8192, k = 8192;
  int repeat = 3, act_order = 0;
  std::string json;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--n"))
      n = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--k"))
      k = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeat"))
      repeat = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--act-order"))
      act_order = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--json"))
      json = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  const int64_t g = 128, groups = k / g;
  std::mt19937 rng(1);
  std::vector<uint32_t> qweight(static_cast<size_t>(k / 8 * n));
  for (auto& w : qweight) w = rng();
  std::vector<uint32_t> qzeros(static_cast<size_t>(groups * n / 8));
  for (auto& z : qzeros) z = rng() & 0x66666666u;  // asymmetric, zeros below 15 (v1: real <= 15)
  std::vector<uint16_t> scales(static_cast<size_t>(groups * n));
  for (auto& s : scales)
    s = static_cast<uint16_t>(0x1c00 + (rng() & 0x3ff));  // f16 in [2^-8, 2^-7)
  std::vector<int32_t> g_idx(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) g_idx[i] = static_cast<int32_t>(i / g);
  if (act_order) std::shuffle(g_idx.begin(), g_idx.end(), rng);
  const hm_checkpoint_tensor_t tensors[] = {
      tensor("qweight", "I32", k / 8, n, qweight.data(), qweight.size() * 4),
      tensor("qzeros", "I32", groups, n / 8, qzeros.data(), qzeros.size() * 4),
      tensor("scales", "F16", groups, n, scales.data(), scales.size() * 2),
      tensor("g_idx", "I32", k, 0, g_idx.data(), g_idx.size() * 4)};

  std::vector<double> convert_s, pack_s;
  std::string format_text;
  for (int r = 0; r < repeat; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    hm_converted_layer_t* layer = nullptr;
    check(hm_convert_layer(HM_SCHEME_GPTQ, tensors, 4, nullptr, &layer), "converting");
    convert_s.push_back(seconds_since(t0));

    hm_format_t* f = nullptr;
    check(hm_converted_layer_format(layer, &f), "format");
    char buf[256];
    hm_format_to_string(f, buf, sizeof buf, nullptr);
    format_text = buf;
    hm_converted_layer_info_t info;
    hm_converted_layer_info_init(&info);
    check(hm_converted_layer_info(layer, &info), "info");
    hm_packed_sizes_t ps;
    hm_packed_sizes_init(&ps);
    check(hm_format_packed_sizes(f, &ps), "packed sizes");
    std::vector<uint8_t> w(ps.weight), s(ps.scales), z(ps.zero_points);
    hm_packed_weight_t packed;
    hm_packed_weight_init(&packed);
    packed.weight = w.data();
    packed.scales = s.empty() ? nullptr : s.data();
    packed.zero_points = z.empty() ? nullptr : z.data();
    t0 = std::chrono::steady_clock::now();
    check(hm_pack(f, &info.weight, &packed), "packing");
    pack_s.push_back(seconds_since(t0));
    hm_format_destroy(f);
    hm_converted_layer_destroy(layer);
  }
  const double best_convert = *std::min_element(convert_s.begin(), convert_s.end());
  const double best_pack = *std::min_element(pack_s.begin(), pack_s.end());
  std::printf("GPTQ int4 g128%s  N=%lld K=%lld  (%s)\n", act_order ? " act-order" : "",
              static_cast<long long>(n), static_cast<long long>(k), format_text.c_str());
  std::printf("  hm_convert_layer  %8.3f s  (best of %d; target <= 0.5 s on 2 cores)\n",
              best_convert, repeat);
  std::printf("  hm_pack           %8.3f s\n", best_pack);
  std::printf("  total             %8.3f s\n", best_convert + best_pack);
  if (!json.empty()) {
    FILE* out = std::fopen(json.c_str(), "w");
    if (!out) {
      std::perror(json.c_str());
      return 1;
    }
    std::fprintf(out,
                 "{\"benchmark\":\"convert_gptq_int4_g128\",\"n\":%lld,\"k\":%lld,\"act_order\":%d,"
                 "\"convert_s\":%.6f,\"pack_s\":%.6f,\"format\":\"%s\"}\n",
                 static_cast<long long>(n), static_cast<long long>(k), act_order, best_convert,
                 best_pack, format_text.c_str());
    std::fclose(out);
  }
  return 0;
}
