// `humming cache prune`: trims the kernel cache (hm_cache_prune), which otherwise only grows.
#include <cinttypes>
#include <cstdio>
#include <string>

#include "cli.hpp"

namespace cli {

namespace {

// "500M", "2G", "123456" (bytes; K / M / G / T are powers of 1024) as bytes.
uint64_t parse_size(const std::string& text) {
  std::string digits = text;
  uint64_t unit = 1;
  if (!digits.empty()) {
    const char last = digits.back();
    const std::string units = "KMGT";
    const size_t at = units.find(static_cast<char>(last & ~0x20));
    if (at != std::string::npos) {
      unit = uint64_t{1} << (10 * (at + 1));
      digits.pop_back();
    }
  }
  const int64_t count = parse_integer(digits, "max-size", 0, INT64_MAX / static_cast<int64_t>(unit));
  return static_cast<uint64_t>(count) * unit;
}

}  // namespace

int cmd_cache(Args& args) {
  const std::vector<std::string> words = args.positionals();
  if (words.size() != 1 || words[0] != "prune")
    throw Failure{"usage: humming cache prune [--max-age-days N] [--max-size SIZE] [--dir DIR]"};
  const std::string dir = args.get("dir", "");
  const std::string age_text = args.get("max-age-days", "");
  const std::string size_text = args.get("max-size", "");
  args.finish();
  if (age_text.empty() && size_text.empty())
    throw Failure{"say what to remove: --max-age-days N (entries not used for N days) and / or "
                  "--max-size SIZE (the least recently used ones beyond SIZE, e.g. 2G)"};
  const uint64_t days =
      age_text.empty() ? 0 : static_cast<uint64_t>(parse_integer(age_text, "max-age-days", 1, 100000));
  const uint64_t max_bytes = size_text.empty() ? UINT64_MAX : parse_size(size_text);
  uint64_t entries = 0, bytes = 0;
  check(hm_cache_prune(dir.empty() ? nullptr : dir.c_str(), days * 86400, max_bytes, &entries,
                       &bytes),
        "hm_cache_prune");
  hm_runtime_info_t info;
  HM_INIT(hm_runtime_info, &info);
  const bool described = dir.empty() && hm_runtime_info(&info) == HM_SUCCESS;
  std::printf("removed %" PRIu64 " entries (%.1f MB)", entries, bytes / 1e6);
  if (described)
    std::printf("; %s now holds %" PRIu64 " entries in %.1f MB", info.cache_dir,
                info.cache_entries, info.cache_bytes / 1e6);
  std::printf("\n");
  return 0;
}

}  // namespace cli
