// Host quantize + pack benchmark (issue #3 target: an 8192 x 8192 f16 weight in int4 g128 in
// <= 1 s on 2 cores), through the public C API. Usage: bench_quantize_pack [--format F] [--json FILE]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "humming.h"

static void check(hm_status_t s, const char* what) {
  if (s != HM_SUCCESS) {
    char buf[4096];
    hm_last_error_message(buf, sizeof buf);
    std::fprintf(stderr, "%s: %s: %s\n", what, hm_status_name(s), buf);
    std::exit(1);
  }
}

int main(int argc, char** argv) {
  std::string text = "w=uint4b8 a=f16 c=f16 s=f16:g128 n=8192 k=8192";
  std::string json;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--format")) text = argv[i + 1];
    else if (!std::strcmp(argv[i], "--json")) json = argv[i + 1];
    else { std::fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
  }
  hm_format_t* f = nullptr;
  check(hm_format_parse(text.c_str(), &f), "format");
  int64_t n = 0, k = 0;
  int32_t e = 0;
  check(hm_format_get_shape(f, &n, &k, &e), "shape");
  // An f16 weight (the usual checkpoint dtype), encoded once up front.
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<uint16_t> weight(static_cast<size_t>(e) * n * k);
  for (auto& w : weight) {
    uint32_t code = 0;
    check(hm_dtype_encode(HM_DTYPE_F16, normal(rng), &code), "encode");
    w = static_cast<uint16_t>(code);
  }
  hm_canonical_sizes_t cs;
  hm_canonical_sizes_init(&cs);
  check(hm_format_canonical_sizes(f, &cs), "canonical sizes");
  std::vector<uint8_t> codes(cs.codes);
  std::vector<float> scales(cs.scales), zps(cs.zero_points), global(cs.global_scale);
  hm_canonical_weight_t q;
  hm_canonical_weight_init(&q);
  q.codes = codes.data();
  q.scales = cs.scales ? scales.data() : nullptr;
  q.zero_points = cs.zero_points ? zps.data() : nullptr;
  q.global_scale = cs.global_scale ? global.data() : nullptr;
  hm_packed_sizes_t ps;
  hm_packed_sizes_init(&ps);
  check(hm_format_packed_sizes(f, &ps), "packed sizes");
  std::vector<uint8_t> pw(ps.weight), pscales(ps.scales), pzps(ps.zero_points);
  std::vector<float> pglobal(ps.global_scale / 4);
  hm_packed_weight_t p;
  hm_packed_weight_init(&p);
  p.weight = pw.data();
  p.scales = ps.scales ? pscales.data() : nullptr;
  p.zero_points = ps.zero_points ? pzps.data() : nullptr;
  p.global_scale = ps.global_scale ? pglobal.data() : nullptr;

  double best_q = 1e30, best_p = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    check(hm_quantize(f, weight.data(), HM_DTYPE_F16, &q), "quantize");
    auto t1 = std::chrono::steady_clock::now();
    check(hm_pack(f, &q, &p), "pack");
    auto t2 = std::chrono::steady_clock::now();
    best_q = std::min(best_q, std::chrono::duration<double>(t1 - t0).count());
    best_p = std::min(best_p, std::chrono::duration<double>(t2 - t1).count());
  }
  const unsigned cores = std::thread::hardware_concurrency();
  std::printf("%s, %u cores (best of 3): quantize %.3f s + pack %.3f s = %.3f s (target <= 1 s on 2 cores)\n",
              text.c_str(), cores, best_q, best_p, best_q + best_p);
  if (!json.empty()) {
    FILE* out = std::fopen(json.c_str(), "w");
    std::fprintf(out, "{\"benchmark\": \"quantize_pack\", \"format\": \"%s\", \"cores\": %u, "
                 "\"quantize_s\": %.4f, \"pack_s\": %.4f}\n", text.c_str(), cores, best_q, best_p);
    std::fclose(out);
  }
  hm_format_destroy(f);
  return 0;
}
