// `humming convert`: a Hugging Face model folder (hm_convert_model) or one safetensors file
// (hm_convert_file) into the standard layout. Options map one to one onto
// hm_convert_options_t / hm_convert_model_options_t; docs/convert.md has the rest.
#include <sys/stat.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli.hpp"

namespace cli {

namespace {

// Set by SIGINT / SIGTERM; the progress callback of a model conversion and the cancel
// callback of a file conversion then stop it, and the library removes what it had written (the
// output is never half-written).
volatile std::sig_atomic_t g_interrupted = 0;
void on_signal(int) { g_interrupted = 1; }
int32_t interrupted(void*) { return g_interrupted ? 1 : 0; }

struct Progress {
  bool quiet = false;
  bool enabled = false;
  int last_percent = -1;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};

// Big files report every 5%; small ones convert before anyone could read a progress line.
void on_progress(void* user, const char* tensor, uint64_t done, uint64_t total) {
  auto* p = static_cast<Progress*>(user);
  if (p->quiet || total == 0) return;
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

struct ModelProgress {
  bool quiet = false, dry_run = false, tty = false;
  int layers = 0, last_decile = -1;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};

double gb(uint64_t bytes) { return static_cast<double>(bytes) / 1e9; }

int32_t on_model_progress(void* user, int32_t kind, const char* name, const char* detail,
                          uint64_t done, uint64_t total) {
  auto* p = static_cast<ModelProgress*>(user);
  if (g_interrupted) return 1;
  if (kind == HM_CONVERT_EVENT_LAYER) ++p->layers;
  if (p->dry_run) {  // the listing: layers and files (copied tensors are only counted)
    if (kind == HM_CONVERT_EVENT_LAYER) std::printf("convert  %s  (%s)\n", name, detail);
    if (kind == HM_CONVERT_EVENT_FILE) std::printf("copy     %s\n", name);
    return 0;
  }
  if (p->quiet || total == 0) return 0;
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - p->start).count();
  const double fraction = static_cast<double>(done) / static_cast<double>(total);
  if (p->tty) {
    const int width = 30, filled = static_cast<int>(fraction * width);
    std::fprintf(stderr, "\r[%s%s] %3d%%  %d layers  %.2f/%.2f GB  %.2f GB/s ",
                 std::string(filled, '#').c_str(), std::string(width - filled, ' ').c_str(),
                 static_cast<int>(fraction * 100), p->layers, gb(done), gb(total),
                 s > 0 ? gb(done) / s : 0.0);
    std::fflush(stderr);
  } else if (static_cast<int>(fraction * 10) != p->last_decile) {
    p->last_decile = static_cast<int>(fraction * 10);
    std::fprintf(stderr, "  %3d%%  %d layers  %.2f/%.2f GB  %.1f s\n",
                 static_cast<int>(fraction * 100), p->layers, gb(done), gb(total), s);
  }
  return 0;
}

uint32_t writer_flag(const std::string& writer) {
  if (writer.empty()) return 0;
  if (writer == "autogptq") return HM_CONVERT_GPTQ_V1_AUTOGPTQ;
  if (writer == "gptqmodel") return HM_CONVERT_GPTQ_V1_GPTQMODEL;
  throw Failure{"--gptq-writer must be autogptq or gptqmodel"};
}

uint32_t packing_flag(const std::string& packing) {
  if (packing.empty()) return 0;
  if (packing == "dense") return HM_CONVERT_CT_PACK_DENSE;
  if (packing == "aligned") return HM_CONVERT_CT_PACK_WORD_ALIGNED;
  throw Failure{"--ct-packing must be dense or aligned"};
}

}  // namespace

int cmd_convert(Args& args) {
  const std::vector<std::string> dirs = args.positionals();
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
  const bool asymmetric = args.flag("asymmetric");
  const std::string writer = args.get("gptq-writer", "");
  const std::string packing = args.get("ct-packing", "");
  const bool model = !dirs.empty();
  const bool force = args.flag("force");
  const bool dry_run = model && args.flag("dry-run");
  const bool stack = model && args.flag("stack-experts");
  const bool join = model && args.flag("join-gate-up");
  const std::string threads = model ? args.get("threads", "0") : "0";
  args.finish();
  if (model && (dirs.size() != 2 || !in.empty() || !out.empty()))
    throw Failure{
        "a model folder is converted with humming convert IN_DIR OUT_DIR [options]; one "
        ".safetensors file with --in FILE --out FILE --scheme S"};
  if (!model && (scheme.empty() || in.empty() || out.empty()))
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
  if (asymmetric) options.flags |= HM_CONVERT_ASYMMETRIC;
  options.flags |= writer_flag(writer) | packing_flag(packing);
  if (global == "multiply")
    options.global_scale_convention = HM_GLOBAL_SCALE_MULTIPLY;
  else if (global == "divide")
    options.global_scale_convention = HM_GLOBAL_SCALE_DIVIDE;
  else if (!global.empty())
    throw Failure{"--global-scale must be multiply or divide, got " + quoted(global)};
  const std::vector<int64_t> rows = parse_rows(shard_rows);
  options.shard_rows = rows.empty() ? nullptr : rows.data();
  options.shard_count = static_cast<int32_t>(rows.size());
  if (model) {
    ModelProgress mp;
    mp.quiet = quiet;
    mp.dry_run = dry_run;
    mp.tty = isatty(STDERR_FILENO) != 0;
    hm_convert_model_options_t mo;
    hm_convert_model_options_init(&mo);
    mo.scheme = scheme.empty() ? nullptr : scheme.c_str();
    mo.layer_options = &options;
    mo.flags = (force ? HM_CONVERT_MODEL_FORCE : 0u) | (dry_run ? HM_CONVERT_MODEL_DRY_RUN : 0u) |
               (stack ? HM_CONVERT_MODEL_STACK_EXPERTS : 0u) |
               (join ? HM_CONVERT_MODEL_JOIN_GATE_UP : 0u);
    mo.threads = static_cast<int32_t>(parse_integer(threads, "threads", 0, 1024));
    mo.progress = on_model_progress;
    mo.progress_user_data = &mp;
    hm_convert_model_summary_t sum;
    hm_convert_model_summary_init(&sum);
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    const hm_status_t status = hm_convert_model(dirs[0].c_str(), dirs[1].c_str(), &mo, &sum);
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    if (mp.tty && !quiet && !dry_run) std::fprintf(stderr, "\n");
    if (g_interrupted) {
      std::fprintf(stderr, "humming convert: interrupted; %s was not written\n", dirs[1].c_str());
      return 130;
    }
    check(status, "converting the model folder");
    if (!quiet)
      std::printf("%s %d layers, copied %d tensors and %d files from %d shards: %.3f GB of "
                  "checkpoint in %.2f s (%.2f GB/s)%s%s\n",
                  dry_run ? "would convert" : "converted", sum.layers, sum.tensors, sum.files,
                  sum.shards, gb(sum.bytes_in), sum.seconds,
                  sum.seconds > 0 ? gb(sum.bytes_in) / sum.seconds : 0.0,
                  dry_run ? "" : " -> ", dry_run ? "" : dirs[1].c_str());
    return 0;
  }
  // As for a folder: an existing output (a symlink too) is replaced only when asked to.
  struct stat existing;
  if (!force && ::lstat(out.c_str(), &existing) == 0)
    throw Failure{quoted(out) + " exists; choose a new file or pass --force"};
  Progress progress;
  progress.quiet = quiet;
  options.progress = on_progress;
  options.progress_user_data = &progress;
  options.cancel = interrupted;  // after each tensor and layer: the library removes its temp file

  const auto t0 = std::chrono::steady_clock::now();
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const hm_status_t status = hm_convert_file(scheme.c_str(), in.c_str(), out.c_str(), &options);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (g_interrupted && status != HM_SUCCESS) {
    std::fprintf(stderr, "humming convert: interrupted; %s was not written\n", out.c_str());
    return 130;
  }
  check(status, "converting");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!quiet)
    std::printf("wrote %s (%s layers, standard layout) in %.2f s\n", quoted(out).c_str(),
                quoted(scheme).c_str(), s);
  return 0;
}

}  // namespace cli
