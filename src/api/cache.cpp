// The kernel cache's upkeep through the C ABI (hm_cache_prune): jit::Cache does the work.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>

#include "api/guard.hpp"
#include "core/quote.hpp"
#include "humming.h"
#include "jit/cache.hpp"

extern "C" {

HM_API hm_status_t hm_cache_prune(const char* dir, uint64_t max_age_seconds, uint64_t max_bytes,
                                  uint64_t* removed_entries, uint64_t* removed_bytes) {
  if (removed_entries) *removed_entries = 0;
  if (removed_bytes) *removed_bytes = 0;
  return HM_API_CALL({
    // An age beyond any clock's range means no age limit (so does 0).
    constexpr uint64_t kMaxSeconds = uint64_t{1} << 40;  // ~35000 years
    const std::chrono::seconds age(max_age_seconds > kMaxSeconds ? 0 : max_age_seconds);
    hm::jit::Cache cache(dir ? dir : "", false, false);
    // No cache yet: nothing to prune. Something else at its path is the caller's mistake.
    std::error_code ec;
    const auto type = std::filesystem::status(cache.dir(), ec).type();
    if (type == std::filesystem::file_type::not_found) return;
    if (type != std::filesystem::file_type::directory)
      hm::fail(HM_ERROR_IO, "the kernel cache " +
                                hm::core::quoted(cache.dir(), hm::core::kQuotedPathBytes) +
                                " is not a directory");
    const hm::jit::Cache::Pruned p = cache.prune(age, max_bytes);
    if (removed_entries) *removed_entries = p.entries;
    if (removed_bytes) *removed_bytes = p.bytes;
  });
}

}  // extern "C"
