// Times hm_quantize_activation_device in the benchmarks' protocol (CUDA-graph replay, the L2
// flushed before every timed replay, median of --iters), and reports:
//   quant  the quantizer alone (f16 in; e4m3 per token, e4m3 per 1x128 group, int8 per token) for
//          M = 1, 16, 128, 2048, 16384 at K = 8192 and 7168, with the achieved GB/s (bytes read +
//          written: 2 + 1 per element, 4 per scale);
//   empty  an empty kernel launched in the same protocol: the floor a tiny kernel cannot beat;
//   e2e    quantize (bf16 -> e4m3, per token) + the W4A8 GEMM "w=e2m1 a=e4m3 c=bf16
//          s=bf16:channel n=8192 k=8192" reading its codes and scales (HM_ARG_ACT_SCALES), both
//          captured in one graph, against the GEMM alone, at M = 1, 16, 128, 2048: "added_us" is
//          what quantizing costs a layer (issue 17's bound: at most 3 us at M <= 128).
// Every row is printed as one line of "key=value" fields; --json FILE writes them all.
// --e2e-only skips the quantizer-alone rows; --no-graph times plain stream launches instead of
// graph replays (each call between two events, the L2 still flushed before it).
// --ms LIST (comma-separated) runs those M values instead of each section's own list (those up to
// its buffers: 16384 rows alone, 2048 end to end), e.g. one cell for a profiler or a sweep of M.
//   bench_activation_quant [--device N] [--iters N] [--warmup N] [--json FILE] [--no-e2e]
//                          [--ms LIST]
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dlfcn.h>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu_timing.hpp"
#include "humming.h"

namespace {

using gpu_timing::CUgraphExec;
using gpu_timing::CUstream;
using gpu_timing::Launch;
using gpu_timing::Stats;

std::string last_error() {
  char buf[2048];
  hm_last_error_message(buf, sizeof buf);
  return buf;
}

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "bench_activation_quant: %s\n", message.c_str());
  std::exit(1);
}

void check(hm_status_t s, const char* call) {
  if (s != HM_SUCCESS) die(std::string(call) + ": " + hm_status_name(s) + ": " + last_error());
}
#define HM_CHECK(call) check((call), #call)

struct Options {
  int device = 0, iters = 200, warmup = 10;
  std::string json;
  bool e2e = true;
  bool graph = true;  // --no-graph: time plain stream launches (event, calls, event)
  bool e2e_only = false;
  std::vector<int64_t> ms;  // --ms: these M instead of a section's list (each up to its buffers)
  std::vector<int64_t> ms_or(std::vector<int64_t> defaults, int64_t max_m) const {
    if (ms.empty()) return defaults;
    std::vector<int64_t> picked;
    for (int64_t m : ms)
      if (m <= max_m) picked.push_back(m);
    return picked;
  }
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--device") o.device = std::atoi(value().c_str());
    else if (arg == "--iters") o.iters = std::atoi(value().c_str());
    else if (arg == "--warmup") o.warmup = std::atoi(value().c_str());
    else if (arg == "--json") o.json = value();
    else if (arg == "--no-e2e") o.e2e = false;
    else if (arg == "--e2e-only") o.e2e_only = true;
    else if (arg == "--no-graph") o.graph = false;
    else if (arg == "--ms") {
      const std::string list = value();
      for (size_t at = 0; at < list.size();) {
        size_t end = list.find(',', at);
        if (end == std::string::npos) end = list.size();
        const int64_t m = std::atoll(list.substr(at, end - at).c_str());
        if (m < 1) die("--ms takes positive integers, got " + list);
        o.ms.push_back(m);
        at = end + 1;
      }
    } else
      die("unknown option " + arg +
          " (--device N --iters N --warmup N --json FILE --no-e2e --e2e-only --no-graph --ms LIST)");
  }
  if (o.iters < 1) die("--iters must be >= 1");
  return o;
}

// One result row: the fields in print order, as strings (numbers already formatted).
struct Row {
  std::vector<std::pair<std::string, std::string>> fields;
  void add(const std::string& key, const std::string& value) { fields.emplace_back(key, value); }
  void add(const std::string& key, double value, int decimals = 2) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
    add(key, std::string(buf));
  }
};

std::vector<Row> g_rows;

void emit(const Row& row) {
  std::string line;
  for (const auto& [k, v] : row.fields) line += (line.empty() ? "" : " ") + k + "=" + v;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  g_rows.push_back(row);
}

bool is_number(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out + "\"";
}

void write_json(const Options& o, const std::string& device) {
  FILE* f = std::fopen(o.json.c_str(), "w");
  if (f == nullptr) die("cannot write " + o.json + ": " + std::strerror(errno));
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::fprintf(f, "{\n  \"benchmark\": \"activation_quant\",\n  \"date\": \"%s\",\n", date);
  std::fprintf(f, "  \"device\": %s,\n  \"humming_version\": %s,\n", json_string(device).c_str(),
               json_string(hm_version_string()).c_str());
  std::fprintf(f, "  \"timing\": \"graph replay, L2 flushed before each replay, median of %d after "
                  "%d warm-up\",\n  \"rows\": [\n", o.iters, o.warmup);
  for (size_t r = 0; r < g_rows.size(); ++r) {
    std::string obj = "{";
    for (size_t i = 0; i < g_rows[r].fields.size(); ++i) {
      const auto& [k, v] = g_rows[r].fields[i];
      obj += (i ? ", " : "") + json_string(k) + ": " + (is_number(v) ? v : json_string(v));
    }
    std::fprintf(f, "    %s%s\n", obj.c_str(), r + 1 < g_rows.size() ? "}," : "}");
  }
  std::fprintf(f, "  ]\n}\n");
  if (std::fclose(f) != 0) die("writing " + o.json + " failed");
  std::printf("wrote %s\n", o.json.c_str());
}

uint64_t alloc(hm_context_t* ctx, size_t bytes) {
  uint64_t p = 0;
  HM_CHECK(hm_device_alloc(ctx, bytes, &p));
  return p;
}

// ---- an empty kernel, from PTX through the driver library gpu_timing already loaded

using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using ModuleLoadData = int (*)(CUmodule*, const void*);
using ModuleGetFunction = int (*)(CUfunction*, CUmodule, const char*);
using LaunchKernel = int (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, CUstream, void**, void**);
using ModuleUnload = int (*)(CUmodule);

constexpr const char* kEmptyPtx =
    ".version 6.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry hm_bench_empty()\n{\n  ret;\n}\n";

struct EmptyKernel {
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  LaunchKernel launch = nullptr;
  ModuleUnload unload = nullptr;
  std::string error;

  explicit EmptyKernel(const gpu_timing::Driver& cu) {
    const auto load = reinterpret_cast<ModuleLoadData>(dlsym(cu.handle, "cuModuleLoadData"));
    const auto get = reinterpret_cast<ModuleGetFunction>(dlsym(cu.handle, "cuModuleGetFunction"));
    launch = reinterpret_cast<LaunchKernel>(dlsym(cu.handle, "cuLaunchKernel"));
    unload = reinterpret_cast<ModuleUnload>(dlsym(cu.handle, "cuModuleUnload"));
    if (!load || !get || !launch || !unload) {
      error = "the driver lacks cuModuleLoadData / cuModuleGetFunction / cuLaunchKernel";
    } else if (int r = load(&module, kEmptyPtx); r != 0) {
      error = "cuModuleLoadData failed: " + cu.describe(r);
    } else if (int r2 = get(&function, module, "hm_bench_empty"); r2 != 0) {
      error = "cuModuleGetFunction failed: " + cu.describe(r2);
    }
  }
  ~EmptyKernel() {
    if (module != nullptr) unload(module);
  }
  std::string operator()(CUstream stream) const {
    const int r = launch(function, 1, 1, 1, 32, 1, 1, 0, stream, nullptr, nullptr);
    return r == 0 ? "" : "cuLaunchKernel failed";
  }
};

// ---- the protocol

// One plain call (one-time work outside the capture), a global-mode capture, timed replays; or,
// with --no-graph, the calls themselves timed on the stream (each between two events).
Stats time_call(const gpu_timing::Driver& cu, gpu_timing::Timer& timer, CUstream stream,
                const Options& o, const Launch& call) {
  if (!o.graph) return timer.run(call, o.warmup, o.iters);
  return gpu_timing::time_graph(cu, timer, stream, gpu_timing::CU_STREAM_CAPTURE_MODE_GLOBAL, call,
                                o.warmup, o.iters);
}

void add_stats(Row& row, const std::string& prefix, const Stats& st) {
  row.add(prefix + "us", st.median);
  row.add(prefix + "us_p10", st.p10);
  row.add(prefix + "us_p90", st.p90);
}

const char* dtype_name(hm_dtype_t d) {
  return d == HM_DTYPE_E4M3 ? "e4m3" : d == HM_DTYPE_INT8 ? "int8" : "?";
}

// Random bf16 / f16 bits of normal values (the values only matter for not being all equal).
std::vector<uint16_t> random_activations(size_t count, hm_dtype_t dtype) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> out(count);
  for (auto& h : out) {
    uint32_t code = 0;
    if (hm_dtype_encode(dtype, normal(rng), &code) != HM_SUCCESS) die("hm_dtype_encode failed");
    h = static_cast<uint16_t>(code);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  hm_context_options_t co;
  hm_context_options_init(&co);
  co.device = o.device;
  hm_context_t* ctx = nullptr;
  if (hm_context_create(&co, &ctx) != HM_SUCCESS) {
    std::fprintf(stderr, "no GPU context: %s\n", last_error().c_str());
    return 77;
  }
  hm_device_info_t info;
  hm_device_info_init(&info);
  HM_CHECK(hm_context_device_info(ctx, &info));
  const std::string device = info.name;
  try {
    const gpu_timing::Driver cu = gpu_timing::load_driver();
    gpu_timing::DeviceStream device_stream(cu, o.device);
    const CUstream stream = device_stream.stream();
    const size_t flush_bytes = size_t{256} << 20;
    const uint64_t scratch = alloc(ctx, flush_bytes);
    auto timer = std::make_unique<gpu_timing::Timer>(cu, stream, scratch, flush_bytes, o.iters);
    std::printf("# device %s; %s, L2 flush %zu MiB before each, median of %d\n", device.c_str(),
                o.graph ? "graph replay" : "plain stream launches", flush_bytes >> 20, o.iters);

    const int64_t max_m = 16384, max_k = 8192;
    const uint64_t a = alloc(ctx, max_m * max_k * 2), codes = alloc(ctx, max_m * max_k);
    const uint64_t scales = alloc(ctx, max_m * (max_k / 128) * 4);
    {
      const std::vector<uint16_t> values = random_activations(max_m * max_k, HM_DTYPE_F16);
      HM_CHECK(hm_copy_to_device(ctx, a, values.data(), values.size() * 2));
    }

    // (b) the protocol's floor.
    {
      EmptyKernel empty(cu);
      Row row;
      row.add("kind", "empty");
      if (!empty.error.empty()) {
        row.add("error", empty.error);
      } else {
        const Stats st = time_call(cu, *timer, stream, o, [&] { return empty(stream); });
        if (st.ok) add_stats(row, "", st);
        else row.add("error", st.error);
      }
      emit(row);
    }

    // (a) the quantizer alone (not with --e2e-only).
    struct Variant {
      hm_dtype_t out;
      int32_t group_k;
    };
    const std::vector<Variant> variants =
        o.e2e_only ? std::vector<Variant>{}
                   : std::vector<Variant>{{HM_DTYPE_E4M3, 0}, {HM_DTYPE_E4M3, 128}, {HM_DTYPE_INT8, 0}};
    for (const Variant v : variants) {
      for (int64_t k : {8192, 7168}) {
        for (int64_t m : o.ms_or({1, 16, 128, 2048, 16384}, max_m)) {
          hm_activation_quant_args_t args;
          hm_activation_quant_args_init(&args);
          args.in_dtype = HM_DTYPE_F16;
          args.out_dtype = v.out;
          args.group_k = v.group_k;
          args.m = m;
          args.k = k;
          args.a = a;
          args.codes = codes;
          args.scales = scales;
          const Stats st = time_call(cu, *timer, stream, o, [&]() -> std::string {
            return hm_quantize_activation_device(ctx, &args, stream) == HM_SUCCESS ? ""
                                                                                  : last_error();
          });
          const int64_t groups = v.group_k ? (k + v.group_k - 1) / v.group_k : 1;
          const double bytes = double(m) * k * 3 + double(m) * groups * 4;
          Row row;
          row.add("kind", "quant");
          row.add("out", dtype_name(v.out));
          row.add("group", v.group_k ? std::to_string(v.group_k) : "token");
          row.add("m", std::to_string(m));
          row.add("k", std::to_string(k));
          if (st.ok) {
            add_stats(row, "", st);
            row.add("gbps", bytes / (st.median * 1e3), 1);
          } else {
            row.add("error", st.error);
          }
          emit(row);
        }
      }
    }

    // (c) quantize + W4A8 GEMM in one graph, against the GEMM alone.
    if (o.e2e) {
      const char* text = "w=e2m1 a=e4m3 c=bf16 s=bf16:channel n=8192 k=8192";
      hm_format_t* format = nullptr;
      HM_CHECK(hm_format_parse(text, &format));
      hm_packed_sizes_t packed;
      hm_packed_sizes_init(&packed);
      HM_CHECK(hm_format_packed_sizes(format, &packed));
      const int64_t n = 8192, k = 8192, e2e_max_m = 2048;
      // Weights: random bytes (every e2m1 code is finite); weight scales bf16 2^-7.
      std::mt19937_64 rng(1);
      std::vector<uint8_t> wbytes(packed.weight);
      for (auto& b : wbytes) b = static_cast<uint8_t>(rng());
      const uint64_t w = alloc(ctx, packed.weight);
      HM_CHECK(hm_copy_to_device(ctx, w, wbytes.data(), wbytes.size()));
      std::vector<uint16_t> wscales(packed.scales / 2, 0x3C00);  // bf16 2^-7
      const uint64_t ws = alloc(ctx, packed.scales);
      HM_CHECK(hm_copy_to_device(ctx, ws, wscales.data(), packed.scales));
      const uint64_t act = alloc(ctx, e2e_max_m * k * 2);
      {
        const std::vector<uint16_t> values = random_activations(e2e_max_m * k, HM_DTYPE_BF16);
        HM_CHECK(hm_copy_to_device(ctx, act, values.data(), values.size() * 2));
      }
      const uint64_t c = alloc(ctx, e2e_max_m * n * 2);
      hm_plan_t* plan = nullptr;
      HM_CHECK(hm_plan_create(ctx, format, nullptr, &plan));
      HM_CHECK(hm_plan_prepare(plan));
      uint64_t ws_bytes = 0;
      HM_CHECK(hm_plan_workspace_size(plan, e2e_max_m, &ws_bytes));
      uint64_t workspace = 0;
      if (ws_bytes) {
        workspace = alloc(ctx, ws_bytes);
        const std::vector<uint8_t> zeros(ws_bytes, 0);  // the plan leaves it zeroed again
        HM_CHECK(hm_copy_to_device(ctx, workspace, zeros.data(), zeros.size()));
      }
      hm_launch_params_t* p = nullptr;
      HM_CHECK(hm_launch_params_create(&p));
      for (int64_t m : o.ms_or({1, 16, 128, 2048}, e2e_max_m)) {
        HM_CHECK(hm_launch_params_clear(p));
        HM_CHECK(hm_launch_params_set_pointer(p, HM_ARG_A, codes));
        HM_CHECK(hm_launch_params_set_pointer(p, HM_ARG_B, w));
        HM_CHECK(hm_launch_params_set_pointer(p, HM_ARG_C, c));
        HM_CHECK(hm_launch_params_set_pointer(p, HM_ARG_SCALES, ws));
        HM_CHECK(hm_launch_params_set_pointer(p, HM_ARG_ACT_SCALES, scales));
        if (workspace) {
          HM_CHECK(hm_launch_params_set_pointer(p, HM_ARG_WORKSPACE, workspace));
          HM_CHECK(hm_launch_params_set_int(p, HM_ARG_WORKSPACE_BYTES,
                                            static_cast<int64_t>(ws_bytes)));
        }
        HM_CHECK(hm_launch_params_set_int(p, HM_ARG_M, m));
        hm_activation_quant_args_t args;
        hm_activation_quant_args_init(&args);
        args.in_dtype = HM_DTYPE_BF16;
        args.out_dtype = HM_DTYPE_E4M3;
        args.group_k = 0;
        args.m = m;
        args.k = k;
        args.a = act;
        args.codes = codes;
        args.scales = scales;
        const auto gemm = [&]() -> std::string {
          return hm_plan_gemm(plan, p, stream) == HM_SUCCESS ? "" : last_error();
        };
        const auto quant = [&]() -> std::string {
          return hm_quantize_activation_device(ctx, &args, stream) == HM_SUCCESS ? ""
                                                                                : last_error();
        };
        const Stats alone = time_call(cu, *timer, stream, o, gemm);
        const Stats both = time_call(cu, *timer, stream, o, [&]() -> std::string {
          const std::string e = quant();
          return e.empty() ? gemm() : e;
        });
        const Stats quant_only = time_call(cu, *timer, stream, o, quant);
        Row row;
        row.add("kind", "e2e");
        row.add("format", text);
        row.add("m", std::to_string(m));
        if (alone.ok && both.ok && quant_only.ok) {
          add_stats(row, "gemm_", alone);
          add_stats(row, "quant_gemm_", both);
          add_stats(row, "quant_", quant_only);
          row.add("added_us", both.median - alone.median);
        } else {
          row.add("error", !alone.ok ? alone.error : !both.ok ? both.error : quant_only.error);
        }
        emit(row);
      }
      hm_launch_params_destroy(p);
      hm_plan_destroy(plan);
      hm_format_destroy(format);
      for (uint64_t ptr : {w, ws, act, c, workspace})
        if (ptr) hm_device_free(ctx, ptr);
    }

    timer->destroy();
    timer.reset();
    device_stream.close();
    for (uint64_t ptr : {scratch, a, codes, scales}) hm_device_free(ctx, ptr);
  } catch (const gpu_timing::Error& e) {
    die(e.what());
  }
  if (!o.json.empty()) write_json(o, device);
  hm_context_destroy(ctx);
  return 0;
}
