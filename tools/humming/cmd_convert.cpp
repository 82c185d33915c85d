// `humming convert`: a quantized checkpoint (one safetensors file) into the standard layout,
// through hm_convert_file. Options map one to one onto hm_convert_options_t; docs/convert.md has
// the rest.
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli.hpp"

namespace cli {

namespace {

struct Progress {
  bool enabled = false;
  int last_percent = -1;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};

// Big files report every 5%; small ones convert before anyone could read a progress line.
void on_progress(void* user, const char* tensor, uint64_t done, uint64_t total) {
  auto* p = static_cast<Progress*>(user);
  if (total == 0) return;
  if (!p->enabled && total >= (uint64_t{256} << 20)) p->enabled = true;
  if (!p->enabled) return;
  const int percent = static_cast<int>(done * 100 / total);
  if (percent / 5 == p->last_percent / 5 && percent != 100) return;
  p->last_percent = percent;
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - p->start).count();
  std::fprintf(stderr, "  %3d%%  %7.1f s  %s\n", percent, s, tensor);
}

hm_dtype_t parse_dtype(const std::string& text, const char* option) {
  if (text.empty()) return HM_DTYPE_NONE;
  hm_dtype_t d = HM_DTYPE_NONE;
  if (hm_dtype_parse(text.c_str(), &d) != HM_SUCCESS)
    throw Failure{std::string("--") + option + ": " + last_error()};  // the library quotes text
  return d;
}

std::vector<int64_t> parse_rows(const std::string& text) {
  std::vector<int64_t> rows;
  size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    const size_t comma = text.find(',', start);
    rows.push_back(parse_integer(text.substr(start, comma - start), "shard-rows", 1, INT64_MAX));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return rows;
}

}  // namespace

int cmd_convert(Args& args) {
  const std::string scheme = args.get("scheme", "");
  const std::string in = args.get("in", "");
  const std::string out = args.get("out", "");
  const std::string act = args.get("act", "");
  const std::string output = args.get("output-dtype", "");
  const std::string bits = args.get("bits", "0");
  const std::string group = args.get("group-size", "0");
  const std::string global = args.get("global-scale", "");
  const std::string shard_rows = args.get("shard-rows", "");
  const bool v2 = args.flag("gptq-v2");
  const bool split = args.flag("split-gate-up");
  const bool keep = args.flag("keep-k-order");
  const bool quiet = args.flag("quiet");
  args.finish();
  if (scheme.empty() || in.empty() || out.empty())
    throw Failure{
        "--scheme, --in and --out are required, e.g. humming convert --scheme gptq --in "
        "model.safetensors "
        "--out humming.safetensors (schemes: gptq awq ct-pack ct-int8 ct-fp8 ct-nvfp4 fp8 mxfp4 "
        "nvfp4 "
        "bitnet)"};

  hm_convert_options_t options;
  hm_convert_options_init(&options);
  options.activation = parse_dtype(act, "act");
  options.output = parse_dtype(output, "output-dtype");
  // The option structs take int32; the converters check the values they accept.
  options.bits = static_cast<int32_t>(parse_integer(bits, "bits", 0, INT32_MAX));
  options.group_size = static_cast<int32_t>(parse_integer(group, "group-size", -1, INT32_MAX));
  if (v2) options.flags |= HM_CONVERT_GPTQ_V2;
  if (split) options.flags |= HM_CONVERT_SPLIT_GATE_UP;
  if (keep) options.flags |= HM_CONVERT_KEEP_K_ORDER;
  if (global == "multiply")
    options.global_scale_convention = HM_GLOBAL_SCALE_MULTIPLY;
  else if (global == "divide")
    options.global_scale_convention = HM_GLOBAL_SCALE_DIVIDE;
  else if (!global.empty())
    throw Failure{"--global-scale must be multiply or divide, got " + quoted(global)};
  const std::vector<int64_t> rows = parse_rows(shard_rows);
  options.shard_rows = rows.empty() ? nullptr : rows.data();
  options.shard_count = static_cast<int32_t>(rows.size());
  Progress progress;
  if (!quiet) {
    options.progress = on_progress;
    options.progress_user_data = &progress;
  }

  const auto t0 = std::chrono::steady_clock::now();
  check(hm_convert_file(scheme.c_str(), in.c_str(), out.c_str(), &options), "converting");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!quiet)
    std::printf("wrote %s (%s layers, standard layout) in %.2f s\n", quoted(out).c_str(),
                quoted(scheme).c_str(), s);
  return 0;
}

}  // namespace cli
