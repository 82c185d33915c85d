// `humming compile`: ahead-of-time compilation into the kernel cache, with or without a GPU, so a
// GPU host (or a container image) starts with every kernel it needs already built.
#include <chrono>
#include <string>
#include <vector>

#include "cli.hpp"

namespace cli {
namespace {

// The line of a load-only failure that says why: "Why it missed: ..." for a miss, else the
// first line (a corrupt entry names its defect there).
std::string why_not_loaded(hm_status_t status, const std::string& message) {
  std::string why = message;
  const std::string marker = "\nWhy it missed: ";
  if (const size_t at = why.find(marker); at != std::string::npos) why = why.substr(at + marker.size());
  why = why.substr(0, why.find('\n'));
  return std::string(hm_status_name(status)) + ": " + why;
}

}  // namespace

int cmd_compile(Args& args) {
  std::string arch = args.get("arch", "");
  std::string cache = args.get("cache-dir", "");
  std::string compiler = args.get("compiler", "");
  std::string format_text = args.get("format", "");
  args.finish();
  if (arch.empty()) throw Failure{"--arch is required (e.g. --arch sm_90a)"};

  hm_context_options_t options;
  hm_context_options_init(&options);
  options.device = HM_NO_DEVICE;
  options.target_arch = arch.c_str();
  if (!cache.empty()) options.cache_dir = cache.c_str();
  if (compiler == "nvrtc") options.compiler = HM_COMPILER_NVRTC;
  else if (compiler == "nvcc") options.compiler = HM_COMPILER_NVCC;
  else if (!compiler.empty()) throw Failure{"--compiler must be nvrtc or nvcc, got " + quoted(compiler)};
  hm_context_t* ctx = nullptr;
  check(hm_context_create(&options, &ctx), "creating the context");
  // What was built, to be looked up again load-only at the end.
  std::vector<std::pair<hm_dtype_t, hm_dtype_t>> built;
  std::vector<std::string> names;

  if (!format_text.empty()) {
    // Every kernel a plan for this format can choose (all M ranges).
    hm_format_t* format = nullptr;
    hm_status_t s = hm_format_parse(format_text.c_str(), &format);
    hm_plan_t* plan = nullptr;
    if (s == HM_SUCCESS) s = hm_plan_create(ctx, format, nullptr, &plan);
    auto t0 = std::chrono::steady_clock::now();
    if (s == HM_SUCCESS) s = hm_plan_prepare(plan);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::string err = s == HM_SUCCESS ? "" : last_error();
    hm_plan_destroy(plan);
    hm_format_destroy(format);
    if (s != HM_SUCCESS) {
      hm_context_destroy(ctx);
      throw Failure{std::string("preparing a plan: ") + hm_status_name(s) + ": " + err};
    }
    std::printf("plan for %s on %s: prepared in %.1f ms\n", quoted(format_text).c_str(),
                arch.c_str(), ms);
  }

  // The reference GEMM for every (input, output) pair it supports.
  const hm_dtype_t types[] = {HM_DTYPE_F16, HM_DTYPE_BF16, HM_DTYPE_F32};
  for (hm_dtype_t in : types) {
    for (hm_dtype_t out : types) {
      auto t0 = std::chrono::steady_clock::now();
      hm_kernel_t* kernel = nullptr;
      hm_status_t s = hm_kernel_create_reference_gemm(ctx, in, out, &kernel);
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (s != HM_SUCCESS) {
        std::string err = last_error();
        hm_context_destroy(ctx);
        throw Failure{std::string("compiling a reference GEMM: ") + hm_status_name(s) + ": " + err};
      }
      char name[128], key[80];
      check(hm_kernel_name(kernel, name, sizeof name, nullptr), "reading the kernel name");
      check(hm_kernel_cache_key(kernel, key, sizeof key, nullptr), "reading the cache key");
      std::printf("%-32s %-10s %8.1f ms  key %.16s\n", name, arch.c_str(), ms, key);
      hm_kernel_destroy(kernel);
      built.emplace_back(in, out);
      names.emplace_back(name);
    }
  }
  hm_context_destroy(ctx);

  // A kernel that compiled may still not be in the cache: a write that fails (read-only or full
  // directory) is not an error for the library, which just uses the kernel, and the reason stays
  // inside it (the C API has no way to return it). So every kernel is looked up again the way
  // the hosts this command prepares will load it: from a load-only context (HM_CONTEXT_DISABLE_JIT,
  // as HUMMING_DISABLE_JIT). That also catches entries saved but not readable back.
  options.flags |= HM_CONTEXT_DISABLE_JIT;
  check(hm_context_create(&options, &ctx), "creating a load-only context to check the cache");
  std::vector<std::string> missing;
  if (!format_text.empty()) {
    hm_format_t* format = nullptr;
    hm_plan_t* plan = nullptr;
    hm_status_t s = hm_format_parse(format_text.c_str(), &format);
    if (s == HM_SUCCESS) s = hm_plan_create(ctx, format, nullptr, &plan);
    if (s == HM_SUCCESS) s = hm_plan_prepare(plan);
    if (s != HM_SUCCESS)
      missing.push_back("kernels of the plan for " + quoted(format_text) + ": " +
                        why_not_loaded(s, last_error()));
    hm_plan_destroy(plan);
    hm_format_destroy(format);
  }
  for (size_t i = 0; i < built.size(); ++i) {
    hm_kernel_t* kernel = nullptr;
    const hm_status_t s =
        hm_kernel_create_reference_gemm(ctx, built[i].first, built[i].second, &kernel);
    if (s != HM_SUCCESS) missing.push_back(names[i] + ": " + why_not_loaded(s, last_error()));
    hm_kernel_destroy(kernel);
  }
  hm_context_destroy(ctx);
  if (!missing.empty()) {
    std::string list;
    for (const std::string& m : missing) list += "\n  " + m;
    throw Failure{"these compiled but cannot be loaded back from the kernel cache, so a "
                  "load-only host (HUMMING_DISABLE_JIT) would fail:" +
                  list +
                  "\nMake the cache directory (--cache-dir or HUMMING_CACHE_DIR) writable by this "
                  "user, with space left, and run `humming compile` again."};
  }
  std::printf("%zu kernels ready in the cache for %s\n", built.size(), arch.c_str());
  return 0;
}

}  // namespace cli
