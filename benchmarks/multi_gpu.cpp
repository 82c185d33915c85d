// Per-GPU throughput of one dense layer with every GPU busy (one host thread and one context per
// GPU, all launching at once) against GPU 0 alone (issue #7): the library must add no
// cross-device serialization, so each GPU's time per call should not grow when the others work.
//
// Protocol (simple on purpose, unlike bench_gemm): per device, warm-up calls, then `--iters`
// back-to-back hm_plan_gemm calls on the legacy default stream timed with the host clock from
// just before the first launch to the return of the stream synchronization. The weights are a
// byte pattern (timing does not depend on values). With one GPU it reports the alone numbers and
// says that the comparison needs two. Prints a table; --json FILE writes the numbers.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "humming.h"
#include "start_line.hpp"

namespace {

// Lines the devices' threads up, so the timed loops of all GPUs overlap.
using gpu_timing::StartLine;

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "bench_multi_gpu: %s\n", message.c_str());
  std::exit(1);
}

void check(hm_status_t s, const char* call) {
  if (s == HM_SUCCESS) return;
  char buf[4096];
  hm_last_error_message(buf, sizeof buf);
  die(std::string(call) + ": " + hm_status_name(s) + ": " + buf);
}

#define HM_CHECK(call) check((call), #call)

struct Options {
  std::string format = "w=uint4b8 a=f16 c=f16 s=f16:g128";
  int64_t n = 8192, k = 8192;
  std::vector<int64_t> ms = {1, 16, 128, 2048};
  int iters = 200, warmup = 20;
  int devices = 0;  // 0: all
  std::string json;
};

const char* const kUsage =
    "usage: bench_multi_gpu [--format TEXT] [--n N] [--k K] [--m 1,16,128,2048] [--iters 200]\n"
    "                       [--warmup 20] [--devices D] [--json FILE]\n"
    "  --format  the layer's format without its shape (default w=uint4b8 a=f16 c=f16 s=f16:g128)\n"
    "  --devices how many GPUs to use (default: all)\n";

std::vector<int64_t> parse_list(const char* text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(std::atoll(item.c_str()));
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (i + 1 >= argc) die("option " + arg + " needs a value\n" + kUsage);
    const char* v = argv[++i];
    if (arg == "--format") o.format = v;
    else if (arg == "--n") o.n = std::atoll(v);
    else if (arg == "--k") o.k = std::atoll(v);
    else if (arg == "--m") o.ms = parse_list(v);
    else if (arg == "--iters") o.iters = std::atoi(v);
    else if (arg == "--warmup") o.warmup = std::atoi(v);
    else if (arg == "--devices") o.devices = std::atoi(v);
    else if (arg == "--json") o.json = v;
    else die("unknown option " + arg + "\n" + kUsage);
  }
  if (o.n <= 0 || o.k <= 0 || o.ms.empty() || o.iters <= 0 || o.warmup < 0)
    die("--n, --k, --m and --iters must be positive");
  for (int64_t m : o.ms)
    if (m <= 0) die("every --m must be positive");
  return o;
}

// One GPU: its context, the prepared plan, the layer's buffers sized for the largest M.
class Device {
 public:
  Device(int ordinal, const hm_format_t* format, int64_t max_m) : ordinal_(ordinal) {
    hm_context_options_t o;
    hm_context_options_init(&o);
    o.device = ordinal;
    HM_CHECK(hm_context_create(&o, &ctx_));
    hm_device_info_t info;
    hm_device_info_init(&info);
    HM_CHECK(hm_context_device_info(ctx_, &info));
    name_ = info.name;
    HM_CHECK(hm_plan_create(ctx_, format, nullptr, &plan_));
    HM_CHECK(hm_plan_prepare(plan_));
    hm_packed_sizes_t ps;
    hm_packed_sizes_init(&ps);
    HM_CHECK(hm_format_packed_sizes(format, &ps));
    int64_t n = 0, k = 0;
    int32_t e = 0;
    HM_CHECK(hm_format_get_shape(format, &n, &k, &e));
    weight_bytes_ = ps.weight + ps.scales + ps.zero_points;
    HM_CHECK(hm_launch_params_create(&params_));
    std::mt19937_64 rng(1234);
    std::vector<uint8_t> random(ps.weight);
    for (auto& b : random) b = static_cast<uint8_t>(rng());
    hm_launch_params_set_pointer(params_, HM_ARG_B, upload(random));
    // 0x3C00 is 1.0 in f16 and a small normal number in bf16 (and, doubled, in f32).
    hm_launch_params_set_pointer(params_, HM_ARG_SCALES, upload(pattern16(ps.scales, 0x3C00)));
    hm_launch_params_set_pointer(params_, HM_ARG_ZEROS,
                                 upload(std::vector<uint8_t>(ps.zero_points, 0x88)));
    std::vector<uint8_t> global(ps.global_scale);
    for (size_t i = 0; i + 4 <= global.size(); i += 4) {
      const float one = 1.0f;
      std::memcpy(&global[i], &one, 4);
    }
    hm_launch_params_set_pointer(params_, HM_ARG_GLOBAL, upload(global));
    hm_launch_params_set_pointer(params_, HM_ARG_A,
                                 upload(pattern16(static_cast<size_t>(max_m * k * 2), 0x3C00)));
    hm_launch_params_set_pointer(params_, HM_ARG_C, alloc(static_cast<size_t>(max_m * n * 2)));
    uint64_t ws_bytes = 0;
    HM_CHECK(hm_plan_workspace_size(plan_, max_m, &ws_bytes));
    hm_launch_params_set_pointer(params_, HM_ARG_WORKSPACE,
                                 upload(std::vector<uint8_t>(ws_bytes, 0)));
    hm_launch_params_set_int(params_, HM_ARG_WORKSPACE_BYTES, static_cast<int64_t>(ws_bytes));
  }
  ~Device() {
    hm_launch_params_destroy(params_);
    hm_plan_destroy(plan_);
    for (uint64_t p : owned_) hm_device_free(ctx_, p);
    hm_context_destroy(ctx_);
  }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // Microseconds per call over `iters` calls at M = m, after `warmup` untimed ones. `start` (may
  // be null) lines the devices up before the timed loop.
  double time_calls(int64_t m, int warmup, int iters, StartLine* start) {
    hm_launch_params_set_int(params_, HM_ARG_M, m);
    for (int i = 0; i < warmup; ++i) HM_CHECK(hm_plan_gemm(plan_, params_, nullptr));
    HM_CHECK(hm_stream_synchronize(ctx_, nullptr));
    if (start) start->arrive_and_wait();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) HM_CHECK(hm_plan_gemm(plan_, params_, nullptr));
    HM_CHECK(hm_stream_synchronize(ctx_, nullptr));
    const auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::micro>(t1 - t0).count() / iters;
  }
  const std::string& name() const { return name_; }
  int ordinal() const { return ordinal_; }
  uint64_t weight_bytes() const { return weight_bytes_; }

 private:
  static std::vector<uint8_t> pattern16(size_t bytes, uint16_t value) {
    std::vector<uint8_t> out(bytes);
    for (size_t i = 0; i + 2 <= bytes; i += 2) std::memcpy(&out[i], &value, 2);
    return out;
  }
  uint64_t alloc(size_t bytes) {
    if (bytes == 0) return 0;
    uint64_t p = 0;
    HM_CHECK(hm_device_alloc(ctx_, bytes, &p));
    owned_.push_back(p);
    return p;
  }
  uint64_t upload(const std::vector<uint8_t>& data) {
    const uint64_t p = alloc(data.size());
    if (p) HM_CHECK(hm_copy_to_device(ctx_, p, data.data(), data.size()));
    return p;
  }

  int ordinal_;
  std::string name_;
  hm_context_t* ctx_ = nullptr;
  hm_plan_t* plan_ = nullptr;
  hm_launch_params_t* params_ = nullptr;
  std::vector<uint64_t> owned_;
  uint64_t weight_bytes_ = 0;
};

struct Row {
  int64_t m = 0;
  double alone_us = 0;
  std::vector<double> busy_us;  // per device; empty with one GPU
};

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  hm_runtime_info_t info;
  hm_runtime_info_init(&info);
  HM_CHECK(hm_runtime_info(&info));
  if (info.device_count <= 0)
    die(std::string("needs a CUDA device (") +
        (info.driver_error[0] ? info.driver_error : "device count is 0") + ")");
  const int count = opt.devices > 0 ? std::min(opt.devices, info.device_count) : info.device_count;
  const std::string text =
      opt.format + " n=" + std::to_string(opt.n) + " k=" + std::to_string(opt.k);
  hm_format_t* format = nullptr;
  HM_CHECK(hm_format_parse(text.c_str(), &format));
  const int64_t max_m = *std::max_element(opt.ms.begin(), opt.ms.end());

  // Contexts, plans and buffers are set up one device after another (compiles go through the
  // shared disk cache: device 1 loads what device 0 compiled, when the archs match).
  std::vector<std::unique_ptr<Device>> devices;
  for (int d = 0; d < count; ++d) devices.push_back(std::make_unique<Device>(d, format, max_m));
  hm_format_destroy(format);

  std::vector<Row> rows;
  for (int64_t m : opt.ms) {
    Row row;
    row.m = m;
    row.alone_us = devices[0]->time_calls(m, opt.warmup, opt.iters, nullptr);
    if (count >= 2) {
      row.busy_us.assign(count, 0.0);
      StartLine start(count);
      std::vector<std::thread> threads;
      for (int d = 0; d < count; ++d)
        threads.emplace_back([&, d] {
          row.busy_us[d] = devices[d]->time_calls(m, opt.warmup, opt.iters, &start);
        });
      for (auto& th : threads) th.join();
    }
    rows.push_back(row);
  }

  const double gb = static_cast<double>(devices[0]->weight_bytes()) / 1e9;
  std::printf("bench_multi_gpu: %s, %d GPU(s) (%s), %d calls per point, host clock\n",
              text.c_str(), count, devices[0]->name().c_str(), opt.iters);
  std::printf("%8s %12s %10s", "M", "alone us", "alone TB/s");
  for (int d = 0; d < count && count >= 2; ++d) std::printf("   gpu%d busy us", d);
  if (count >= 2) std::printf(" %12s %14s", "max slowdown", "min busy TB/s");
  std::printf("\n");
  for (const Row& r : rows) {
    std::printf("%8lld %12.2f %10.3f", static_cast<long long>(r.m), r.alone_us,
                gb / (r.alone_us * 1e-6) / 1e3);
    double slowdown = 0;
    for (double us : r.busy_us) {
      std::printf(" %14.2f", us);
      slowdown = std::max(slowdown, us / r.alone_us);
    }
    if (!r.busy_us.empty())
      std::printf(" %11.3fx %14.3f", slowdown, gb / (r.alone_us * slowdown * 1e-6) / 1e3);
    std::printf("\n");
  }
  if (count < 2)
    std::printf("note: one GPU: the busy-vs-alone comparison needs 2 GPUs (only the alone numbers "
                "above were measured)\n");

  if (!opt.json.empty()) {
    FILE* f = std::fopen(opt.json.c_str(), "w");
    if (!f) die("cannot write " + opt.json);
    std::fprintf(f, "{\n  \"benchmark\": \"multi_gpu\",\n  \"format\": %s,\n",
                 json_string(text).c_str());
    std::fprintf(f, "  \"timing\": \"host clock over %d back-to-back calls, default stream\",\n",
                 opt.iters);
    std::fprintf(f, "  \"devices\": [");
    for (int d = 0; d < count; ++d)
      std::fprintf(f, "%s%s", d ? ", " : "", json_string(devices[d]->name()).c_str());
    std::fprintf(f, "],\n  \"weight_bytes\": %llu,\n",
                 static_cast<unsigned long long>(devices[0]->weight_bytes()));
    std::fprintf(f, "  \"note\": %s,\n",
                 count < 2 ? "\"one GPU: the busy comparison needs 2 GPUs\"" : "null");
    std::fprintf(f, "  \"results\": [\n");
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::fprintf(f, "    {\"m\": %lld, \"alone_us\": %.3f, \"busy_us\": ",
                   static_cast<long long>(r.m), r.alone_us);
      if (r.busy_us.empty()) {
        std::fprintf(f, "null");
      } else {
        std::fprintf(f, "[");
        for (size_t d = 0; d < r.busy_us.size(); ++d)
          std::fprintf(f, "%s%.3f", d ? ", " : "", r.busy_us[d]);
        std::fprintf(f, "]");
      }
      std::fprintf(f, "}%s\n", i + 1 < rows.size() ? "," : "");
    }
    std::fprintf(f, "  ]\n}\n");
    std::fclose(f);
  }
  return 0;
}
