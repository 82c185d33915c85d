// Dense GEMM benchmark through the public plan API: C[M,N] = A[M,K] * dequant(W)^T.
// Usage: bench_gemm [--format F] [--ms 1,16,...] [--iters 200] [--json FILE]
// Timing: host clock around `iters` back-to-back launches and one synchronization, rotating over
// enough weight copies to exceed the L2 (so weights come from HBM); reported as the mean per call.
// This includes any launch gap the GPU cannot hide; CUDA-event timing, graph replay and the
// cuBLAS baseline in the same process are still to come (benchmarks/NOTES.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "humming.h"

static std::string last_error() {
  char buf[8192];
  hm_last_error_message(buf, sizeof buf);
  return buf;
}
#define CHECK(call)                                                                          \
  do {                                                                                       \
    hm_status_t s_ = (call);                                                                 \
    if (s_ != HM_SUCCESS) {                                                                  \
      std::fprintf(stderr, "%s: %s: %s\n", #call, hm_status_name(s_), last_error().c_str()); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

int main(int argc, char** argv) {
  std::string text = "w=uint4b8 a=f16 c=f16 s=f16:g128 n=8192 k=8192";
  std::string ms_text = "1,16,64,128,512,2048,8192,16384";
  std::string json;
  int iters = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--format")) text = argv[i + 1];
    else if (!std::strcmp(argv[i], "--ms")) ms_text = argv[i + 1];
    else if (!std::strcmp(argv[i], "--iters")) iters = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--json")) json = argv[i + 1];
    else { std::fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
  }
  std::vector<int64_t> ms;
  std::stringstream ss(ms_text);
  for (std::string item; std::getline(ss, item, ',');) ms.push_back(std::stoll(item));

  hm_context_options_t o;
  hm_context_options_init(&o);
  hm_context_t* ctx = nullptr;
  CHECK(hm_context_create(&o, &ctx));
  hm_device_info_t dev;
  hm_device_info_init(&dev);
  CHECK(hm_context_device_info(ctx, &dev));
  hm_format_t* f = nullptr;
  CHECK(hm_format_parse(text.c_str(), &f));
  int64_t n = 0, k = 0;
  int32_t e = 0;
  CHECK(hm_format_get_shape(f, &n, &k, &e));
  hm_packed_sizes_t ps;
  hm_packed_sizes_init(&ps);
  CHECK(hm_format_packed_sizes(f, &ps));

  // Random packed bytes are valid codes for every integer format; scales set to small values.
  const uint64_t l2_rotate = 4;
  std::mt19937 rng(1);
  std::vector<uint8_t> wbytes(ps.weight);
  for (auto& b : wbytes) b = static_cast<uint8_t>(rng());
  std::vector<uint8_t> sbytes(ps.scales);
  for (size_t i = 0; i + 1 < sbytes.size(); i += 2) { sbytes[i] = 0x00; sbytes[i + 1] = 0x20; }
  std::vector<uint64_t> w(l2_rotate), s(l2_rotate);
  for (uint64_t r = 0; r < l2_rotate; ++r) {
    CHECK(hm_device_alloc(ctx, ps.weight, &w[r]));
    CHECK(hm_copy_to_device(ctx, w[r], wbytes.data(), ps.weight));
    if (ps.scales) {
      CHECK(hm_device_alloc(ctx, ps.scales, &s[r]));
      CHECK(hm_copy_to_device(ctx, s[r], sbytes.data(), ps.scales));
    }
  }
  const int64_t max_m = *std::max_element(ms.begin(), ms.end());
  std::vector<uint16_t> a(static_cast<size_t>(max_m * k), 0x3c00);
  uint64_t da = 0, dc = 0, ws = 0;
  CHECK(hm_device_alloc(ctx, a.size() * 2, &da));
  CHECK(hm_copy_to_device(ctx, da, a.data(), a.size() * 2));
  CHECK(hm_device_alloc(ctx, static_cast<size_t>(max_m * n * 2), &dc));

  hm_plan_t* plan = nullptr;
  CHECK(hm_plan_create(ctx, f, nullptr, &plan));
  auto t0 = std::chrono::steady_clock::now();
  CHECK(hm_plan_prepare(plan));
  const double prepare_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  uint64_t ws_bytes = 0;
  CHECK(hm_plan_workspace_size(plan, max_m, &ws_bytes));
  if (ws_bytes) {
    CHECK(hm_device_alloc(ctx, ws_bytes, &ws));
    std::vector<uint8_t> zeros(ws_bytes, 0);
    CHECK(hm_copy_to_device(ctx, ws, zeros.data(), ws_bytes));
  }
  std::printf("device %s (%s, %d SMs); format %s; prepare %.0f ms\n", dev.name, dev.arch,
              dev.multiprocessors, text.c_str(), prepare_ms);
  std::printf("%8s %10s %10s %10s  %s\n", "M", "us/call", "GB/s", "TFLOP/s", "kernel");
  std::string rows;
  hm_launch_params_t* p = nullptr;
  CHECK(hm_launch_params_create(&p));
  for (int64_t m : ms) {
    hm_launch_params_clear(p);
    hm_launch_params_set_pointer(p, HM_ARG_A, da);
    hm_launch_params_set_pointer(p, HM_ARG_C, dc);
    if (ws) {
      hm_launch_params_set_pointer(p, HM_ARG_WORKSPACE, ws);
      hm_launch_params_set_int(p, HM_ARG_WORKSPACE_BYTES, static_cast<int64_t>(ws_bytes));
    }
    hm_launch_params_set_int(p, HM_ARG_M, m);
    auto call = [&](int i) {
      hm_launch_params_set_pointer(p, HM_ARG_B, w[i % l2_rotate]);
      if (ps.scales) hm_launch_params_set_pointer(p, HM_ARG_SCALES, s[i % l2_rotate]);
      CHECK(hm_plan_gemm(plan, p, nullptr));
    };
    for (int i = 0; i < 10; ++i) call(i);
    CHECK(hm_stream_synchronize(ctx, nullptr));
    const int reps = m >= 4096 ? std::max(5, iters / 20) : iters;
    auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) call(i);
    CHECK(hm_stream_synchronize(ctx, nullptr));
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t1).count() / reps;
    const double bytes = static_cast<double>(ps.weight + ps.scales) + 2.0 * m * k + 2.0 * m * n;
    const double flops = 2.0 * m * n * k;
    char desc[256];
    hm_plan_describe(plan, m, desc, sizeof desc, nullptr);
    std::printf("%8lld %10.1f %10.0f %10.1f  %s\n", static_cast<long long>(m), us, bytes / us / 1e3,
                flops / us / 1e6, desc);
    char row[512];
    std::snprintf(row, sizeof row, "%s    {\"m\": %lld, \"us\": %.2f, \"gbps\": %.1f, \"tflops\": %.2f, \"kernel\": \"%s\"}",
                  rows.empty() ? "" : ",\n", static_cast<long long>(m), us, bytes / us / 1e3, flops / us / 1e6, desc);
    rows += row;
  }
  if (!json.empty()) {
    FILE* out = std::fopen(json.c_str(), "w");
    std::fprintf(out, "{\n  \"benchmark\": \"dense_gemm\",\n  \"device\": \"%s\",\n  \"format\": \"%s\",\n"
                 "  \"timing\": \"host clock over back-to-back launches, weights rotated over %llu copies\",\n"
                 "  \"prepare_ms\": %.1f,\n  \"results\": [\n%s\n  ]\n}\n",
                 dev.name, text.c_str(), static_cast<unsigned long long>(l2_rotate), prepare_ms, rows.c_str());
    std::fclose(out);
  }
  hm_launch_params_destroy(p);
  hm_plan_destroy(plan);
  hm_format_destroy(f);
  hm_context_destroy(ctx);
  return 0;
}
