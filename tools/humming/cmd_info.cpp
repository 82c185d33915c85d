// `humming info`: what the library found on this machine.
#include <cinttypes>

#include "cli.hpp"

namespace cli {

static const char* or_none(const char* s) { return s[0] ? s : "(none)"; }

int cmd_info(Args& args) {
  args.finish();
  std::printf("humming %s (ABI %u)\n", hm_version_string(), hm_abi_version());
  hm_runtime_info_t info;
  hm_runtime_info_init(&info);
  check(hm_runtime_info(&info), "reading runtime info");

  if (info.driver_version > 0)
    std::printf("cuda driver:    %d.%d at %s\n", info.driver_version / 1000,
                (info.driver_version % 1000) / 10, info.driver_path);
  else
    std::printf("cuda driver:    not loaded: %s\n", or_none(info.driver_error));
  if (info.nvrtc_version > 0)
    std::printf("nvrtc:          %d.%d at %s\n", info.nvrtc_version / 1000,
                (info.nvrtc_version % 1000) / 10, info.nvrtc_path);
  else
    std::printf("nvrtc:          not found: %s\n", or_none(info.nvrtc_error));
  if (info.nvcc_path[0])
    std::printf("nvcc:           %s at %s\n", or_none(info.nvcc_version), info.nvcc_path);
  else
    std::printf("nvcc:           not found\n");
  std::printf("kernel sources: %s\n", or_none(info.kernel_sources));
  std::printf("kernel cache:   %s (%" PRIu64 " entries, %.1f MiB)\n", or_none(info.cache_dir),
              info.cache_entries, static_cast<double>(info.cache_bytes) / (1024.0 * 1024.0));
  std::printf("devices:        %d\n", info.device_count);
  for (int i = 0; i < info.device_count; ++i) {
    hm_context_options_t options;
    hm_context_options_init(&options);
    options.device = i;
    hm_context_t* ctx = nullptr;
    if (hm_context_create(&options, &ctx) != HM_SUCCESS) {
      std::printf("  [%d] unavailable: %s\n", i, last_error().c_str());
      continue;
    }
    hm_device_info_t d;
    hm_device_info_init(&d);
    check(hm_context_device_info(ctx, &d), "reading device info");
    std::printf("  [%d] %s, cc %d.%d (%s), %d SMs, %.1f GiB, L2 %.1f MiB, smem/block %" PRId64
                " KiB\n",
                i, d.name, d.cc_major, d.cc_minor, d.arch, d.multiprocessors,
                static_cast<double>(d.total_memory_bytes) / (1024.0 * 1024.0 * 1024.0),
                static_cast<double>(d.l2_cache_bytes) / (1024.0 * 1024.0),
                d.shared_memory_per_block_optin / 1024);
    hm_context_destroy(ctx);
  }
  return 0;
}

}  // namespace cli
