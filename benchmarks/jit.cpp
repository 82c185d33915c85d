// JIT benchmark: how long one kernel takes to compile (a cache miss) and to load from the disk cache
// (a hit), through the public API. Targets (issue #2): compile <= 1 s on a 2-core machine, a cache
// hit <= 5 ms. Usage: bench_jit [--arch sm_90a] [--compiler nvrtc|nvcc] [--repeat 5] [--json FILE]
// With a GPU the hit includes loading the module into the device; without one it is the disk read
// and verification only (an ahead-of-time context for --arch).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

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

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char** argv) {
  std::string arch = "sm_90a", compiler = "", json;
  int repeat = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--arch")) arch = argv[i + 1];
    else if (!std::strcmp(argv[i], "--compiler")) compiler = argv[i + 1];
    else if (!std::strcmp(argv[i], "--repeat")) repeat = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--json")) json = argv[i + 1];
    else { std::fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
  }
  hm_runtime_info_t info;
  hm_runtime_info_init(&info);
  check(hm_runtime_info(&info), "runtime info");
  const bool gpu = info.device_count > 0;

  std::vector<double> compile_ms, hit_ms;
  for (int r = 0; r < repeat; ++r) {
    char dir[] = "/tmp/humming-bench-XXXXXX";
    if (!mkdtemp(dir)) { std::perror("mkdtemp"); return 1; }
    for (int pass = 0; pass < 2; ++pass) {  // pass 0 compiles (empty cache), pass 1 hits
      hm_context_options_t o;
      hm_context_options_init(&o);
      o.device = gpu ? 0 : HM_NO_DEVICE;
      o.target_arch = gpu ? nullptr : arch.c_str();
      o.cache_dir = dir;
      if (compiler == "nvcc") o.compiler = HM_COMPILER_NVCC;
      if (compiler == "nvrtc") o.compiler = HM_COMPILER_NVRTC;
      hm_context_t* ctx = nullptr;
      check(hm_context_create(&o, &ctx), "context");
      auto t0 = std::chrono::steady_clock::now();
      hm_kernel_t* k = nullptr;
      check(hm_kernel_create_reference_gemm(ctx, HM_DTYPE_F16, HM_DTYPE_F16, &k), "kernel");
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      (pass == 0 ? compile_ms : hit_ms).push_back(ms);
      hm_kernel_destroy(k);
      hm_context_destroy(ctx);
    }
    std::string rm = std::string("rm -rf ") + dir;
    if (std::system(rm.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir);
  }
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  std::printf("reference GEMM f16, %s, %s, %ld cores, %d runs (median)\n",
              gpu ? "GPU (hit includes module load)" : ("no GPU, arch " + arch).c_str(),
              compiler.empty() ? "default compiler" : compiler.c_str(), cores, repeat);
  std::printf("  compile (cache miss): %8.1f ms   target <= 1000 ms\n", median(compile_ms));
  std::printf("  load (cache hit):     %8.2f ms   target <= 5 ms\n", median(hit_ms));
  if (!json.empty()) {
    FILE* f = std::fopen(json.c_str(), "w");
    if (!f) { std::perror("json"); return 1; }
    std::fprintf(f,
                 "{\n  \"benchmark\": \"jit\",\n  \"kernel\": \"reference_gemm_f16_f16\",\n"
                 "  \"gpu\": %s,\n  \"arch\": \"%s\",\n  \"compiler\": \"%s\",\n  \"cores\": %ld,\n"
                 "  \"compile_ms_median\": %.2f,\n  \"cache_hit_ms_median\": %.3f,\n  \"runs\": %d\n}\n",
                 gpu ? "true" : "false", arch.c_str(), compiler.empty() ? "default" : compiler.c_str(),
                 cores, median(compile_ms), median(hit_ms), repeat);
    std::fclose(f);
  }
  return 0;
}
