// Times hm_quantize_activation_device (f16 -> e4m3 / int8, per token and 1x128 groups) for
// M = 1, 16, 128, 2048, 16384 at K = 8192 and 7168, launched through a CUDA graph (no host
// overhead), with the L2 flushed before every timed call. Prints µs and the achieved GB/s
// (bytes read + written).
//   bench_activation_quant [--device N] [--iters N]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_timing.hpp"
#include "humming.h"

namespace {

std::string last_error() {
  char buf[1024];
  hm_last_error_message(buf, sizeof buf);
  return buf;
}

uint64_t alloc(hm_context_t* ctx, size_t bytes) {
  uint64_t p = 0;
  if (hm_device_alloc(ctx, bytes, &p) != HM_SUCCESS) {
    std::fprintf(stderr, "hm_device_alloc(%zu): %s\n", bytes, last_error().c_str());
    std::exit(1);
  }
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  int device = 0, iters = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--device")) device = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--iters")) iters = std::atoi(argv[i + 1]);
  }
  hm_context_options_t o;
  hm_context_options_init(&o);
  o.device = device;
  hm_context_t* ctx = nullptr;
  if (hm_context_create(&o, &ctx) != HM_SUCCESS) {
    std::fprintf(stderr, "no GPU context: %s\n", last_error().c_str());
    return 77;
  }
  const gpu_timing::Driver cu = gpu_timing::load_driver();
  gpu_timing::DeviceStream device_stream(cu, device);
  const gpu_timing::CUstream stream = device_stream.stream();
  const size_t flush_bytes = size_t{256} << 20;
  const uint64_t scratch = alloc(ctx, flush_bytes);
  gpu_timing::Timer timer(cu, stream, scratch, flush_bytes, iters);

  const int64_t max_m = 16384, max_k = 8192;
  const uint64_t a = alloc(ctx, max_m * max_k * 2), codes = alloc(ctx, max_m * max_k);
  const uint64_t scales = alloc(ctx, max_m * (max_k / 128) * 4);
  std::vector<uint16_t> ones(max_m * max_k, 0x3C00);  // 1.0 in f16; values do not matter
  hm_copy_to_device(ctx, a, ones.data(), ones.size() * 2);

  std::printf("%-6s %-5s %-6s %6s %6s %10s %10s\n", "out", "group", "M", "K", "", "median_us",
              "GB/s");
  for (hm_dtype_t out : {HM_DTYPE_E4M3, HM_DTYPE_INT8}) {
    for (int32_t group_k : {0, 128}) {
      for (int64_t k : {8192, 7168}) {
        for (int64_t m : {1, 16, 128, 2048, 16384}) {
          hm_activation_quant_args_t args;
          hm_activation_quant_args_init(&args);
          args.in_dtype = HM_DTYPE_F16;
          args.out_dtype = out;
          args.group_k = group_k;
          args.m = m;
          args.k = k;
          args.a = a;
          args.codes = codes;
          args.scales = scales;
          const gpu_timing::Launch call = [&]() -> std::string {
            if (hm_quantize_activation_device(ctx, &args, stream) != HM_SUCCESS)
              return last_error();
            return "";
          };
          const gpu_timing::Stats st = gpu_timing::time_graph(
              cu, timer, stream, gpu_timing::CU_STREAM_CAPTURE_MODE_GLOBAL, call, 10, iters);
          const int64_t groups = group_k ? (k + group_k - 1) / group_k : 1;
          const double bytes = double(m) * k * 3 + double(m) * groups * 4;
          if (!st.ok) {
            std::printf("%-6s %-5d %-6lld %6lld failed: %s\n", out == HM_DTYPE_E4M3 ? "e4m3" : "int8",
                        group_k, (long long)m, (long long)k, st.error.c_str());
            continue;
          }
          std::printf("%-6s %-5d %-6lld %6lld %6s %10.2f %10.1f\n",
                      out == HM_DTYPE_E4M3 ? "e4m3" : "int8", group_k, (long long)m, (long long)k,
                      "", st.median, bytes / (st.median * 1e3));
        }
      }
    }
  }
  timer.destroy();
  device_stream.close();
  for (uint64_t p : {scratch, a, codes, scales}) hm_device_free(ctx, p);
  hm_context_destroy(ctx);
  return 0;
}
