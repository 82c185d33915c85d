// Benchmark of the MoE routing helpers (docs/moe.md): hm_moe_align for T = 1 .. 4096 tokens with
// top-8 of 128 and 256 experts, and hm_moe_reduce (bf16, top-8) for N = 2048 / 4096. Each timed
// call is one CUDA-graph replay after an L2 flush (tools/gpu_timing), median of --iters (>= 100).
// Prints a table; --json FILE writes the rows for benchmarks/results/<gpu>/.
//   bench_moe_routing [--iters N] [--warmup N] [--block B] [--json FILE]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu_timing.hpp"
#include "humming.h"

namespace {

using gpu_timing::CU_STREAM_CAPTURE_MODE_GLOBAL;
using gpu_timing::Launch;
using gpu_timing::Stats;
using gpu_timing::Timer;

#define HM_CHECK(call)                                                                    \
  do {                                                                                    \
    const hm_status_t status_ = (call);                                                   \
    if (status_ != HM_SUCCESS) {                                                          \
      std::fprintf(stderr, "%s failed (%d): %s\n", #call, status_, last_error().c_str()); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

std::string last_error() {
  char buf[1024];
  hm_last_error_message(buf, sizeof buf);
  return buf;
}

struct Device {
  hm_context_t* ctx = nullptr;
  std::vector<uint64_t> owned;
  uint64_t alloc(size_t bytes) {
    uint64_t p = 0;
    HM_CHECK(hm_device_alloc(ctx, bytes ? bytes : 4, &p));
    owned.push_back(p);
    return p;
  }
  template <typename T>
  uint64_t upload(const std::vector<T>& v) {
    const uint64_t p = alloc(v.size() * sizeof(T));
    HM_CHECK(hm_copy_to_device(ctx, p, v.data(), v.size() * sizeof(T)));
    return p;
  }
  ~Device() {
    for (uint64_t p : owned) hm_device_free(ctx, p);
    hm_context_destroy(ctx);
  }
};

struct Row {
  std::string what;
  int64_t tokens = 0;
  int32_t experts = 0, n = 0;
  double bytes = 0;  // moved by the kernel (see docs/moe.md), for GB/s
  Stats stats;
};

}  // namespace

int main(int argc, char** argv) {
  int iters = 200, warmup = 20, block = 64;
  const char* json = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--iters" && i + 1 < argc)
      iters = std::atoi(argv[++i]);
    else if (a == "--warmup" && i + 1 < argc)
      warmup = std::atoi(argv[++i]);
    else if (a == "--block" && i + 1 < argc)
      block = std::atoi(argv[++i]);
    else if (a == "--json" && i + 1 < argc)
      json = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--iters N] [--warmup N] [--block B] [--json FILE]\n",
                   argv[0]);
      return 2;
    }
  }
  const gpu_timing::Driver cu = gpu_timing::load_driver();
  gpu_timing::DeviceStream ds(cu, 0);
  const auto stream = ds.stream();
  Device dev;
  hm_context_options_t o;
  hm_context_options_init(&o);
  HM_CHECK(hm_context_create(&o, &dev.ctx));
  const size_t flush_bytes = size_t{256} << 20;  // > 2x the H200's L2
  auto timer = std::make_unique<Timer>(cu, stream, dev.alloc(flush_bytes), flush_bytes, iters);
  std::mt19937 rng(1);
  std::vector<Row> rows;
  const int64_t kTokens[] = {1, 16, 128, 1024, 4096};
  const int32_t top_k = 8;

  for (int32_t experts : {128, 256}) {
    for (int64_t tokens : kTokens) {
      std::vector<int32_t> ids(size_t(tokens * top_k));
      for (auto& id : ids) id = int32_t(rng() % uint32_t(experts));
      hm_moe_routing_t r;
      hm_moe_routing_init(&r);
      r.topk_ids = dev.upload(ids);
      r.num_tokens = tokens;
      r.top_k = top_k;
      r.num_experts = experts;
      hm_moe_align_sizes_t s;
      hm_moe_align_sizes_init(&s);
      HM_CHECK(hm_moe_align_sizes(&r, block, &s));
      hm_moe_align_out_t out;
      hm_moe_align_out_init(&out);
      out.sorted_ids = dev.alloc(size_t(s.sorted_ids) * 4);
      out.expert_ids = dev.alloc(size_t(s.expert_ids) * 4);
      out.num_tokens_padded = dev.alloc(4);
      out.expert_offsets = dev.alloc(size_t(s.expert_offsets) * 4);
      const Launch call = [&]() -> std::string {
        return hm_moe_align(dev.ctx, &r, block, &out, stream) == HM_SUCCESS ? "" : last_error();
      };
      Row row;
      row.what = "align";
      row.tokens = tokens;
      row.experts = experts;
      const int64_t blocks = (tokens * top_k + 4095) / 4096;
      row.bytes =
          4.0 * double(tokens * top_k) * double(blocks) + 4.0 * double(s.sorted_ids + s.expert_ids);
      row.stats = gpu_timing::time_graph(cu, *timer, stream, CU_STREAM_CAPTURE_MODE_GLOBAL, call,
                                         warmup, iters);
      rows.push_back(row);
    }
  }
  for (int32_t n : {2048, 4096}) {
    for (int64_t tokens : kTokens) {
      std::vector<int32_t> ids(size_t(tokens * top_k));
      for (auto& id : ids) id = int32_t(rng() % 256u);
      std::vector<float> weights(ids.size(), 0.125f);
      std::vector<uint16_t> values(size_t(tokens * top_k * n), 0x3f80);
      hm_moe_routing_t r;
      hm_moe_routing_init(&r);
      r.topk_ids = dev.upload(ids);
      r.num_tokens = tokens;
      r.top_k = top_k;
      r.num_experts = 256;
      hm_moe_reduce_args_t a;
      hm_moe_reduce_args_init(&a);
      a.dtype = HM_DTYPE_BF16;
      a.n = n;
      a.input = dev.upload(values);
      a.topk_weights = dev.upload(weights);
      a.out = dev.alloc(size_t(tokens * n * 2));
      const Launch call = [&]() -> std::string {
        return hm_moe_reduce(dev.ctx, &r, &a, stream) == HM_SUCCESS ? "" : last_error();
      };
      Row row;
      row.what = "reduce_bf16";
      row.tokens = tokens;
      row.experts = 256;
      row.n = n;
      row.bytes = 2.0 * n * double(tokens * top_k + tokens) + 8.0 * double(tokens * top_k);
      row.stats = gpu_timing::time_graph(cu, *timer, stream, CU_STREAM_CAPTURE_MODE_GLOBAL, call,
                                         warmup, iters);
      rows.push_back(row);
    }
  }
  timer->destroy();

  std::printf("%-12s %7s %7s %6s %10s %10s %10s %9s\n", "kernel", "tokens", "experts", "n",
              "median_us", "p10_us", "p90_us", "GB/s");
  for (const Row& r : rows) {
    if (!r.stats.ok) {
      std::printf("%-12s %7lld %7d %6d  failed: %s\n", r.what.c_str(), (long long)r.tokens,
                  r.experts, r.n, r.stats.error.c_str());
      continue;
    }
    std::printf("%-12s %7lld %7d %6d %10.2f %10.2f %10.2f %9.1f\n", r.what.c_str(),
                (long long)r.tokens, r.experts, r.n, r.stats.median, r.stats.p10, r.stats.p90,
                r.bytes / (r.stats.median * 1e3));
  }
  if (json) {
    FILE* f = std::fopen(json, "w");
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", json);
      return 1;
    }
    std::fprintf(
        f, "{\"benchmark\": \"moe_routing\", \"block_size\": %d, \"top_k\": %d, \"rows\": [\n",
        block, top_k);
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::fprintf(
          f,
          "  {\"kernel\": \"%s\", \"tokens\": %lld, \"experts\": %d, \"n\": %d, \"ok\": %s, "
          "\"median_us\": %.3f, \"p10_us\": %.3f, \"p90_us\": %.3f, \"bytes\": %.0f}%s\n",
          r.what.c_str(), (long long)r.tokens, r.experts, r.n, r.stats.ok ? "true" : "false",
          r.stats.median, r.stats.p10, r.stats.p90, r.bytes, i + 1 < rows.size() ? "," : "");
    }
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  ds.close();
  return 0;
}
