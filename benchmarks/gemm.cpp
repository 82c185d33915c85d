// Dense GEMM benchmark through the public plan API: C[M,N] = A[M,K] * dequant(W)^T, against cuBLAS
// on unquantized weights in the same process. Measures the way ../shared/DESIGN.md §7 asks and the
// H200 anchors were measured: each timed call is one CUDA-graph replay, the L2 is flushed before it
// (a 256 MiB memset on the same stream, outside the timed event pair), warm-up first, and the
// median of CUDA-event times over many calls is reported. `bench_gemm --help` lists the options;
// benchmarks/README.md describes the output and benchmarks/report.py renders it.
//
// The CUDA driver is reached through our own dlopen of libcuda (the library loads it too, but does
// not export it), and cuBLAS through dlopen as well, both in tools/gpu_timing (shared with `humming
// demo`), so this program builds without the toolkit and runs without cuBLAS (the baseline fields
// are then null).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gpu_timing.hpp"
#include "humming.h"

namespace {

// ---------------------------------------------------------------------------------------------
// Errors: this is a measuring program, so a failed Humming or driver call ends it with a message
// naming the call. Only the cuBLAS baseline fails softly (its fields become null).

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "bench_gemm: %s\n", message.c_str());
  std::exit(1);
}

std::string hm_error() {
  char buf[8192];
  hm_last_error_message(buf, sizeof buf);
  return buf;
}

std::string hm_failure(const char* call, hm_status_t s) {
  return std::string(call) + ": " + hm_status_name(s) + ": " + hm_error();
}

#define HM_CHECK(call)                                   \
  do {                                                   \
    hm_status_t s_ = (call);                             \
    if (s_ != HM_SUCCESS) die(hm_failure(#call, s_));    \
  } while (0)

// ---------------------------------------------------------------------------------------------
// The CUDA driver, the event timer, graph capture and cuBLAS come from tools/gpu_timing (shared
// with `humming demo`). Its driver failures throw gpu_timing::Error, which main() reports like
// any other failure here.

using gpu_timing::Cublas;
using gpu_timing::Driver;
using gpu_timing::CUdevice;
using gpu_timing::CUdeviceptr;
using gpu_timing::CUgraphExec;
using gpu_timing::CUstream;
using gpu_timing::Launch;
using gpu_timing::Stats;
using gpu_timing::Timer;
using gpu_timing::capture;
using gpu_timing::cublas_bind;
using gpu_timing::cublas_gemm;
using gpu_timing::CU_STREAM_CAPTURE_MODE_GLOBAL;
using gpu_timing::CU_STREAM_CAPTURE_MODE_RELAXED;
using gpu_timing::CUDA_R_16BF;
using gpu_timing::CUDA_R_16F;
using gpu_timing::kCublasWorkspaceBytes;

// ---------------------------------------------------------------------------------------------
// Host data.

uint32_t dtype_bits(hm_dtype_t d) { return d & 0xffu; }

std::string dtype_name(hm_dtype_t d) {
  char buf[64];
  if (hm_dtype_name(d, buf, sizeof buf, nullptr) != HM_SUCCESS) return "?";
  return buf;
}

// Elements of `dtype` (16, 8 or 4 bits) holding values uniform in [-1, 1], `count` elements, as
// bytes (4-bit: two per byte, even element in the low nibble). Random data, not constants:
// tensor cores draw less power (and may clock higher) on constant or zero inputs.
std::vector<uint8_t> random_elements(hm_dtype_t dtype, size_t count, uint64_t seed) {
  const uint32_t bits = dtype_bits(dtype);
  if (bits != 16 && bits != 8 && bits != 4)
    die("activation dtype " + dtype_name(dtype) + " (" + std::to_string(bits) +
        " bits) is not handled by this benchmark");
  // A table of encoded values, then a cheap generator picks from it (encoding every element
  // through the C API would take seconds for M = 16384).
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::vector<uint32_t> table(4096);
  for (uint32_t& code : table) HM_CHECK(hm_dtype_encode(dtype, uni(rng), &code));
  std::vector<uint8_t> out((count * bits + 7) / 8, 0);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < count; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const uint32_t code = table[x & 4095];
    if (bits == 16) {
      out[2 * i] = static_cast<uint8_t>(code);
      out[2 * i + 1] = static_cast<uint8_t>(code >> 8);
    } else if (bits == 8) {
      out[i] = static_cast<uint8_t>(code);
    } else {
      out[i / 2] |= static_cast<uint8_t>((code & 0xf) << (i % 2 ? 4 : 0));
    }
  }
  return out;
}

// `bytes` filled with one value of `dtype` repeated (for scales).
std::vector<uint8_t> repeated_value(hm_dtype_t dtype, double value, size_t bytes) {
  std::vector<uint8_t> out(bytes, 0);
  const uint32_t bits = dtype_bits(dtype);
  uint32_t code = 0;
  if (dtype == HM_DTYPE_F32) {
    const float f = static_cast<float>(value);
    std::memcpy(&code, &f, 4);
  } else if (hm_dtype_encode(dtype, value, &code) != HM_SUCCESS) {
    die("cannot encode " + std::to_string(value) + " as scale dtype " + dtype_name(dtype) + ": " +
        hm_error());
  }
  if (bits == 32 || bits == 16 || bits == 8) {
    const size_t size = bits / 8;
    for (size_t i = 0; i + size <= bytes; i += size)
      for (size_t b = 0; b < size; ++b) out[i + b] = static_cast<uint8_t>(code >> (8 * b));
  } else if (bits == 4) {
    std::fill(out.begin(), out.end(), static_cast<uint8_t>((code & 0xf) | (code & 0xf) << 4));
  } else {
    die("scale dtype " + dtype_name(dtype) + " is not handled by this benchmark");
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) die("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// A finite number, or null (JSON has no NaN).
std::string json_number(double v, int decimals = 3) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// ---------------------------------------------------------------------------------------------
// Options.

struct Options {
  std::string format = "w=uint4b8 a=f16 c=f16 s=f16:g128 n=8192 k=8192";
  std::string ms = "1,16,64,128,512,2048,8192,16384";
  std::string json;
  std::string tuning;
  std::string label;
  int device = 0;
  int iters = 200;
  int warmup = 10;
  bool graph = true;
  bool flush = true;
  int64_t flush_mib = 256;
  bool cublas = true;
  bool selftest = false;
  bool dry_run = false;
  double copy_tbps = 4.27;
  double peak_tflops = 705.0;
};

const char* kUsage =
    "usage: bench_gemm [options]\n"
    "Times C[M,N] = A[M,K] * dequant(W)^T through hm_plan_gemm, and cuBLAS on unquantized\n"
    "weights, for each M. Each timed call is one CUDA-graph replay, preceded (outside the timed\n"
    "CUDA-event pair) by a memset of a scratch buffer that flushes the L2; reports the median.\n"
    "\n"
    "  --format F         layer format (default \"w=uint4b8 a=f16 c=f16 s=f16:g128 n=8192 k=8192\")\n"
    "  --ms LIST          comma-separated M values (default 1,16,64,128,512,2048,8192,16384)\n"
    "  --iters N          timed calls per M, >= 1; the median wants >= 100 (default 200)\n"
    "  --warmup N         untimed calls per M before timing (default 10)\n"
    "  --json FILE        write every number, the device, format, plans and options as JSON\n"
    "  --tuning FILE      a tuning JSON (docs/tuning.md) passed as hm_plan_options_t.tuning_json\n"
    "  --label TEXT       a name for this variant in reports (stored in the JSON)\n"
    "  --device N         CUDA device ordinal (default 0)\n"
    "  --no-graph         time plain launches instead of graph replays (includes launch cost)\n"
    "  --no-flush         do not flush the L2 between calls (warm-cache numbers)\n"
    "  --flush-mib N      scratch buffer for the flush, raised to 2x the L2 if smaller (default 256)\n"
    "  --no-cublas        skip the cuBLAS baseline (its fields are null)\n"
    "  --copy-tbps X      copy bandwidth ceiling for GB/s and the floor, TB/s (default 4.27)\n"
    "  --peak-tflops X    dense tensor-core peak for TFLOP/s and the floor (default 705)\n"
    "  --selftest         check the cuBLAS call and graph path against a small host product, exit\n"
    "  --dry-run          no GPU: synthetic timings through the table and JSON path (for tests)\n"
    "  -h, --help         this text\n"
    "Environment: HUMMING_CUBLAS_PATH (the cuBLAS library to load), HUMMING_CUDA_DRIVER_PATH.\n";

int64_t parse_int(const char* option, const std::string& text, int64_t lo, int64_t hi) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < lo || v > hi) {
    std::fprintf(stderr, "bench_gemm: %s wants an integer in [%lld, %lld], got \"%s\"\n", option,
                 static_cast<long long>(lo), static_cast<long long>(hi), text.c_str());
    std::exit(2);
  }
  return v;
}

double parse_positive(const char* option, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v > 0) || !std::isfinite(v)) {
    std::fprintf(stderr, "bench_gemm: %s wants a positive number, got \"%s\"\n", option,
                 text.c_str());
    std::exit(2);
  }
  return v;
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_gemm: %s needs a value\n%s", arg.c_str(), kUsage);
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "--format") o.format = value();
    else if (arg == "--ms") o.ms = value();
    else if (arg == "--json") o.json = value();
    else if (arg == "--tuning") o.tuning = value();
    else if (arg == "--label") o.label = value();
    else if (arg == "--device") o.device = static_cast<int>(parse_int("--device", value(), 0, 1023));
    else if (arg == "--iters") o.iters = static_cast<int>(parse_int("--iters", value(), 1, 100000));
    else if (arg == "--warmup") o.warmup = static_cast<int>(parse_int("--warmup", value(), 0, 100000));
    else if (arg == "--flush-mib") o.flush_mib = parse_int("--flush-mib", value(), 1, 1 << 20);
    else if (arg == "--copy-tbps") o.copy_tbps = parse_positive("--copy-tbps", value());
    else if (arg == "--peak-tflops") o.peak_tflops = parse_positive("--peak-tflops", value());
    else if (arg == "--no-graph") o.graph = false;
    else if (arg == "--no-flush") o.flush = false;
    else if (arg == "--no-cublas") o.cublas = false;
    else if (arg == "--selftest") o.selftest = true;
    else if (arg == "--dry-run") o.dry_run = true;
    else {
      std::fprintf(stderr, "bench_gemm: unknown option %s\n%s", arg.c_str(), kUsage);
      std::exit(2);
    }
  }
  return o;
}

std::vector<int64_t> parse_ms(const std::string& text) {
  std::vector<int64_t> ms;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    ms.push_back(parse_int("--ms", item, 1, int64_t{1} << 31));
  if (ms.empty()) die("--ms lists no M");
  return ms;
}

// ---------------------------------------------------------------------------------------------
// Results.

struct Row {
  int64_t m = 0;
  Stats hm;
  Stats cb;
  double bytes = 0, flops = 0;
  std::string plan;
  std::string note;  // anything unusual about how this row was measured
  double host_us = -1;  // host time of one hm_plan_gemm call (enqueue only), median; -1: not run
};

struct Run {
  Options opt;
  std::string date, device = "none", arch = "none", format;
  int sms = 0;
  int64_t l2_bytes = 0;
  int driver_version = 0;
  int64_t n = 0, k = 0;
  double prepare_ms = 0;
  size_t flush_bytes = 0;
  std::string cublas_library, cublas_error, cublas_dtype;
  int cublas_version = 0;
  std::string tuning_json;
  std::vector<Row> rows;
};

double floor_us(const Run& r, const Row& row) {
  return std::max(row.bytes / (r.opt.copy_tbps * 1e6), row.flops / (r.opt.peak_tflops * 1e6));
}

const double kNaN = std::nan("");

void print_table(const Run& r) {
  std::printf("%7s %9s %9s %9s %8s %8s %9s %7s %9s %7s  %s\n", "M", "us", "p10", "p90", "GB/s",
              "TFLOP/s", "floor us", "xfloor", "cuBLAS", "x cuBL", "plan");
  for (const Row& row : r.rows) {
    const double fl = floor_us(r, row);
    auto cell = [](double v, const char* fmt) {
      char buf[32];
      if (std::isfinite(v)) std::snprintf(buf, sizeof buf, fmt, v);
      else std::snprintf(buf, sizeof buf, "-");
      return std::string(buf);
    };
    const double us = row.hm.ok ? row.hm.median : kNaN;
    const double cb = row.cb.ok ? row.cb.median : kNaN;
    std::printf("%7lld %9s %9s %9s %8s %8s %9s %7s %9s %7s  %s\n", static_cast<long long>(row.m),
                cell(us, "%.1f").c_str(), cell(row.hm.ok ? row.hm.p10 : kNaN, "%.1f").c_str(),
                cell(row.hm.ok ? row.hm.p90 : kNaN, "%.1f").c_str(),
                cell(row.bytes / us / 1e3, "%.0f").c_str(), cell(row.flops / us / 1e6, "%.1f").c_str(),
                cell(fl, "%.1f").c_str(), cell(us / fl, "%.2f").c_str(), cell(cb, "%.1f").c_str(),
                cell(us / cb, "%.2f").c_str(), row.plan.c_str());
    if (!row.hm.ok) std::printf("        humming failed: %s\n", row.hm.error.c_str());
    if (!row.note.empty()) std::printf("        note: %s\n", row.note.c_str());
    if (row.host_us >= 0)
      std::printf("        host: %.2f us per hm_plan_gemm call (enqueue, median)\n", row.host_us);
    if (!row.cb.ok && !row.cb.error.empty())
      std::printf("        cuBLAS failed: %s\n", row.cb.error.c_str());
  }
}

void write_json(const Run& r) {
  std::string s = "{\n";
  auto field = [&](const char* name, const std::string& value, bool last = false) {
    s += std::string("  \"") + name + "\": " + value + (last ? "\n" : ",\n");
  };
  const Options& o = r.opt;
  field("benchmark", json_string("dense_gemm"));
  field("schema", "2");
  field("date", json_string(r.date));
  field("label", o.label.empty() ? "null" : json_string(o.label));
  field("device", json_string(r.device));
  field("arch", json_string(r.arch));
  field("multiprocessors", std::to_string(r.sms));
  field("l2_cache_bytes", std::to_string(r.l2_bytes));
  field("driver_version", std::to_string(r.driver_version));
  field("humming_version", json_string(hm_version_string()));
  field("format", json_string(r.format));
  field("n", std::to_string(r.n));
  field("k", std::to_string(r.k));
  std::string timing = o.graph ? "CUDA events around one CUDA-graph replay per call"
                               : "CUDA events around one plain launch per call";
  timing += o.flush ? ", L2 flushed by a " + std::to_string(r.flush_bytes >> 20) +
                          " MiB memset before each call (outside the events)"
                    : ", L2 not flushed";
  timing += ", median of " + std::to_string(o.iters) + " after " + std::to_string(o.warmup) +
            " warm-up calls";
  field("timing", json_string(timing));
  field("floor_model", json_string("max(bytes / copy_tbps, flops / peak_tflops); bytes = packed "
                                   "weight + scales + zero points + global scales + bias + A + C"));
  field("prepare_ms", json_number(r.prepare_ms, 1));
  std::string opts = "{";
  opts += "\"ms\": " + json_string(o.ms) + ", \"iters\": " + std::to_string(o.iters) +
          ", \"warmup\": " + std::to_string(o.warmup) + ", \"graph\": " + (o.graph ? "true" : "false") +
          ", \"flush\": " + (o.flush ? "true" : "false") +
          ", \"flush_bytes\": " + std::to_string(r.flush_bytes) +
          ", \"cublas\": " + (o.cublas ? "true" : "false") +
          ", \"copy_tbps\": " + json_number(o.copy_tbps, 4) +
          ", \"peak_tflops\": " + json_number(o.peak_tflops, 2) +
          ", \"device\": " + std::to_string(o.device) +
          ", \"tuning_file\": " + (o.tuning.empty() ? "null" : json_string(o.tuning)) +
          ", \"tuning_json\": " + (o.tuning.empty() ? "null" : json_string(r.tuning_json)) +
          ", \"dry_run\": " + (o.dry_run ? "true" : "false") + "}";
  field("options", opts);
  std::string cb = "{\"library\": " + (r.cublas_library.empty() ? "null" : json_string(r.cublas_library)) +
                   ", \"version\": " + (r.cublas_version ? std::to_string(r.cublas_version) : "null") +
                   ", \"dtype\": " + (r.cublas_dtype.empty() ? "null" : json_string(r.cublas_dtype)) +
                   ", \"error\": " + (r.cublas_error.empty() ? "null" : json_string(r.cublas_error)) +
                   "}";
  field("cublas", cb);
  s += "  \"results\": [\n";
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const Row& row = r.rows[i];
    const double us = row.hm.ok ? row.hm.median : kNaN;
    const double cbus = row.cb.ok ? row.cb.median : kNaN;
    const double fl = floor_us(r, row);
    s += "    {\"m\": " + std::to_string(row.m) + ", \"us\": " + json_number(us) +
         ", \"us_p10\": " + json_number(row.hm.ok ? row.hm.p10 : kNaN) +
         ", \"us_p90\": " + json_number(row.hm.ok ? row.hm.p90 : kNaN) +
         ", \"us_min\": " + json_number(row.hm.ok ? row.hm.min : kNaN) +
         ", \"samples\": " + std::to_string(row.hm.count) +
         ", \"bytes\": " + json_number(row.bytes, 0) + ", \"flops\": " + json_number(row.flops, 0) +
         ", \"gbps\": " + json_number(row.bytes / us / 1e3, 1) +
         ", \"tflops\": " + json_number(row.flops / us / 1e6, 2) +
         ", \"floor_us\": " + json_number(fl) + ", \"ratio_to_floor\": " + json_number(us / fl) +
         ", \"cublas_us\": " + json_number(cbus) +
         ", \"cublas_us_p10\": " + json_number(row.cb.ok ? row.cb.p10 : kNaN) +
         ", \"cublas_us_p90\": " + json_number(row.cb.ok ? row.cb.p90 : kNaN) +
         ", \"cublas_tflops\": " + json_number(row.flops / cbus / 1e6, 2) +
         ", \"ratio_to_cublas\": " + json_number(us / cbus) +
         ", \"kernel\": " + json_string(row.plan) +
         ", \"error\": " + (row.hm.ok ? "null" : json_string(row.hm.error)) +
         ", \"note\": " + (row.note.empty() ? "null" : json_string(row.note)) +
         ", \"host_us\": " + (row.host_us >= 0 ? json_number(row.host_us) : "null") +
         ", \"cublas_error\": " + (row.cb.error.empty() ? "null" : json_string(row.cb.error)) + "}" +
         (i + 1 < r.rows.size() ? ",\n" : "\n");
  }
  s += "  ]\n}\n";
  FILE* out = std::fopen(o.json.c_str(), "w");
  if (out == nullptr) die("cannot write " + o.json + ": " + std::strerror(errno));
  const bool ok = std::fwrite(s.data(), 1, s.size(), out) == s.size();
  if (std::fclose(out) != 0 || !ok) die("writing " + o.json + " failed");
  std::printf("wrote %s\n", o.json.c_str());
}

// ---------------------------------------------------------------------------------------------
// The layer: format, sizes, and a plan.

struct Layer {
  hm_format_t* format = nullptr;
  int64_t n = 0, k = 0;
  hm_dtype_t act = 0, out = 0, scale = 0;
  int32_t bias = 0;
  int64_t act_groups = 1;  // activation scales per row: ceil(K / group_k) with a=<dtype>:g<K>
  hm_packed_sizes_t packed{};
  std::string canonical;

  // Bytes one call moves at least once: weights and their metadata, A in, C out.
  double bytes(int64_t m) const {
    const double fixed = static_cast<double>(packed.weight + packed.scales + packed.zero_points +
                                             packed.global_scale) +
                         (bias ? n * dtype_bits(out) / 8.0 : 0.0);
    return fixed + m * k * dtype_bits(act) / 8.0 + m * n * dtype_bits(out) / 8.0;
  }
};

Layer make_layer(const std::string& text) {
  Layer l;
  HM_CHECK(hm_format_parse(text.c_str(), &l.format));
  int32_t experts = 0;
  HM_CHECK(hm_format_get_shape(l.format, &l.n, &l.k, &experts));
  if (experts != 1) die("bench_gemm times dense layers; the format has e=" + std::to_string(experts));
  HM_CHECK(hm_format_get_dtype(l.format, HM_ROLE_ACTIVATION, &l.act));
  HM_CHECK(hm_format_get_dtype(l.format, HM_ROLE_OUTPUT, &l.out));
  HM_CHECK(hm_format_get_dtype(l.format, HM_ROLE_SCALE, &l.scale));
  HM_CHECK(hm_format_get_bias(l.format, &l.bias));
  int32_t act_group_k = 0;
  HM_CHECK(hm_format_get_activation_groups(l.format, &act_group_k));
  HM_CHECK(hm_activation_scale_groups(l.k, act_group_k, &l.act_groups));
  hm_packed_sizes_init(&l.packed);
  HM_CHECK(hm_format_packed_sizes(l.format, &l.packed));
  char buf[1024];
  HM_CHECK(hm_format_to_string(l.format, buf, sizeof buf, nullptr));
  l.canonical = buf;
  return l;
}

std::string describe_plan(const hm_plan_t* plan, int64_t m) {
  char buf[1024];
  const hm_status_t s = hm_plan_describe(plan, m, buf, sizeof buf, nullptr);
  return s == HM_SUCCESS ? std::string(buf) : "(hm_plan_describe failed: " + hm_error() + ")";
}

hm_plan_t* make_plan(hm_context_t* ctx, const Layer& l, const std::string& tuning_json) {
  hm_plan_options_t po;
  hm_plan_options_init(&po);
  po.tuning_json = tuning_json.empty() ? nullptr : tuning_json.c_str();
  hm_plan_t* plan = nullptr;
  HM_CHECK(hm_plan_create(ctx, l.format, &po, &plan));
  return plan;
}

// The cuBLAS dtype for a layer: its activation dtype when 16-bit, else f16.
int cublas_dtype(hm_dtype_t act, std::string* name) {
  if (act == HM_DTYPE_BF16) {
    *name = "bf16";
    return CUDA_R_16BF;
  }
  *name = "f16";
  return CUDA_R_16F;
}

// ---------------------------------------------------------------------------------------------
// --dry-run: the whole reporting path with made-up times and no device (the plan is made for
// sm_90a with no device, which is enough for hm_plan_describe when the library allows it).

int dry_run(Run& run, const std::vector<int64_t>& ms) {
  Layer l = make_layer(run.opt.format);
  run.format = l.canonical;
  run.n = l.n;
  run.k = l.k;
  run.device = "dry run (no GPU)";
  run.arch = "sm_90a";
  run.cublas_dtype = "f16";
  run.cublas_library = "(dry run: not loaded)";
  run.flush_bytes = run.opt.flush ? static_cast<size_t>(run.opt.flush_mib) << 20 : 0;
  hm_context_options_t co;
  hm_context_options_init(&co);
  co.device = HM_NO_DEVICE;
  co.target_arch = "sm_90a";
  hm_context_t* ctx = nullptr;
  hm_plan_t* plan = nullptr;
  if (hm_context_create(&co, &ctx) == HM_SUCCESS) {
    hm_plan_options_t po;
    hm_plan_options_init(&po);
    po.tuning_json = run.tuning_json.empty() ? nullptr : run.tuning_json.c_str();
    if (hm_plan_create(ctx, l.format, &po, &plan) != HM_SUCCESS) plan = nullptr;
  }
  for (int64_t m : ms) {
    Row row;
    row.m = m;
    row.bytes = l.bytes(m);
    row.flops = 2.0 * m * l.n * l.k;
    // Synthetic: 1.5x the floor, cuBLAS 2x; only the plumbing is real.
    const double fl = floor_us(run, row);
    row.hm.ok = true;
    row.hm.count = run.opt.iters;
    row.hm.median = 1.5 * fl;
    row.hm.p10 = 1.45 * fl;
    row.hm.p90 = 1.6 * fl;
    row.hm.min = 1.4 * fl;
    row.cb.ok = run.opt.cublas;
    row.cb.count = run.opt.cublas ? run.opt.iters : 0;
    row.cb.median = 2.0 * fl;
    row.cb.p10 = 1.9 * fl;
    row.cb.p90 = 2.1 * fl;
    row.plan = plan ? describe_plan(plan, m) : "(no plan in dry run)";
    run.rows.push_back(row);
  }
  hm_plan_destroy(plan);
  hm_context_destroy(ctx);
  hm_format_destroy(l.format);
  std::printf("DRY RUN: synthetic times, no GPU used; format %s\n", run.format.c_str());
  print_table(run);
  if (!run.opt.json.empty()) write_json(run);
  return 0;
}

// ---------------------------------------------------------------------------------------------
// --selftest: the cuBLAS operand mapping and the capture/replay path, on a product small enough
// to check exactly (integers in [-2, 2], K = 7: every partial sum is exact in f16, bf16 and f32).

struct Device {
  hm_context_t* ctx = nullptr;
  std::vector<uint64_t> owned;
  uint64_t alloc(size_t bytes) {
    uint64_t p = 0;
    HM_CHECK(hm_device_alloc(ctx, bytes, &p));
    owned.push_back(p);
    return p;
  }
  uint64_t upload(const std::vector<uint8_t>& data) {
    const uint64_t p = alloc(data.size());
    HM_CHECK(hm_copy_to_device(ctx, p, data.data(), data.size()));
    return p;
  }
  void free_all() {
    for (uint64_t p : owned) HM_CHECK(hm_device_free(ctx, p));
    owned.clear();
  }
};

int selftest(const Driver& cu, CUstream stream, Device& dev, Cublas& cb, CUdeviceptr cb_workspace) {
  if (!cb.usable()) {
    std::printf("selftest: cuBLAS unavailable: %s\n", cb.error.c_str());
    return 1;
  }
  const std::string bind = cublas_bind(cb, stream, cb_workspace);
  if (!bind.empty()) die(bind);
  const int64_t m = 3, n = 5, k = 7;
  int failures = 0;
  for (hm_dtype_t dt : {HM_DTYPE_F16, HM_DTYPE_BF16}) {
    std::string name;
    const int cuda_type = cublas_dtype(dt, &name);
    std::vector<double> a(m * k), w(n * k);
    std::vector<uint8_t> a16(2 * m * k), w16(2 * n * k);
    auto fill = [&](std::vector<double>& v, std::vector<uint8_t>& bytes, int salt) {
      for (size_t i = 0; i < v.size(); ++i) {
        v[i] = static_cast<double>(static_cast<int>((i * 7 + salt * 3 + i / 3) % 5) - 2);
        uint32_t code = 0;
        HM_CHECK(hm_dtype_encode(dt, v[i], &code));
        bytes[2 * i] = static_cast<uint8_t>(code);
        bytes[2 * i + 1] = static_cast<uint8_t>(code >> 8);
      }
    };
    fill(a, a16, 1);
    fill(w, w16, 2);
    const uint64_t da = dev.upload(a16), dw = dev.upload(w16);
    const uint64_t dc = dev.alloc(2 * m * n);
    for (int via_graph = 0; via_graph < 2; ++via_graph) {
      HM_CHECK(hm_copy_to_device(dev.ctx, dc, std::vector<uint8_t>(2 * m * n, 0xff).data(), 2 * m * n));
      const Launch call = [&] { return cublas_gemm(cb, cuda_type, da, dw, dc, m, n, k); };
      std::string err;
      if (via_graph) {
        CUgraphExec exec = nullptr;
        err = capture(cu, stream, CU_STREAM_CAPTURE_MODE_RELAXED, call, &exec);
        if (err.empty()) {
          HM_CU_CHECK(cu, cuGraphLaunch(exec, stream));
          HM_CU_CHECK(cu, cuGraphExecDestroy(exec));
        }
      } else {
        err = call();
      }
      HM_CU_CHECK(cu, cuStreamSynchronize(stream));
      if (!err.empty()) die("selftest: " + err);
      std::vector<uint8_t> c16(2 * m * n);
      HM_CHECK(hm_copy_to_host(dev.ctx, c16.data(), dc, c16.size()));
      int bad = 0;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double want = 0;
          for (int64_t kk = 0; kk < k; ++kk) want += a[i * k + kk] * w[j * k + kk];
          double got = 0;
          const uint32_t code = c16[2 * (i * n + j)] | c16[2 * (i * n + j) + 1] << 8;
          HM_CHECK(hm_dtype_decode(dt, code, &got));
          if (got != want) {
            if (bad++ < 5)
              std::printf("  %s %s: C[%lld][%lld] = %g, want %g\n", name.c_str(),
                          via_graph ? "graph" : "plain", static_cast<long long>(i),
                          static_cast<long long>(j), got, want);
          }
        }
      std::printf("selftest: cuBLAS %s %s C[%lld,%lld] = A * W^T: %s\n", name.c_str(),
                  via_graph ? "graph replay" : "plain call", static_cast<long long>(m),
                  static_cast<long long>(n), bad ? "WRONG" : "exact");
      failures += bad != 0;
    }
  }
  dev.free_all();
  return failures ? 1 : 0;
}

// ---------------------------------------------------------------------------------------------

int bench(Run& run, const std::vector<int64_t>& ms) {
  const Options& o = run.opt;
  hm_context_options_t co;
  hm_context_options_init(&co);
  co.device = o.device;
  Device dev;
  HM_CHECK(hm_context_create(&co, &dev.ctx));
  hm_device_info_t info;
  hm_device_info_init(&info);
  HM_CHECK(hm_context_device_info(dev.ctx, &info));
  run.device = info.name;
  run.arch = info.arch;
  run.sms = info.multiprocessors;
  run.l2_bytes = info.l2_cache_bytes;
  hm_runtime_info_t rt;
  hm_runtime_info_init(&rt);
  if (hm_runtime_info(&rt) == HM_SUCCESS) run.driver_version = rt.driver_version;

  // The library retains the device's primary context and makes it current only inside its own
  // calls; our driver calls (streams, events, graphs) need it current on this thread.
  const Driver cu = gpu_timing::load_driver();
  gpu_timing::DeviceStream device_stream(cu, o.device);
  const CUstream stream = device_stream.stream();

  Cublas cb;
  if (o.cublas || o.selftest) gpu_timing::load_cublas(cb);
  else cb.error = "disabled by --no-cublas";
  if (!cb.error.empty()) std::printf("cuBLAS baseline unavailable: %s\n", cb.error.c_str());
  run.cublas_library = cb.library;
  run.cublas_error = cb.error;
  run.cublas_version = cb.version;
  const CUdeviceptr cb_workspace = cb.usable() ? dev.alloc(kCublasWorkspaceBytes) : 0;

  if (o.selftest) {
    const int rc = selftest(cu, stream, dev, cb, cb_workspace);
    std::printf("selftest %s\n", rc ? "FAILED" : "passed");
    return rc;
  }

  Layer l = make_layer(o.format);
  run.format = l.canonical;
  run.n = l.n;
  run.k = l.k;
  const int64_t max_m = *std::max_element(ms.begin(), ms.end());

  // Weights: random packed bytes (valid codes for every integer format; for float weights a few
  // NaN codes are possible, which costs the kernel nothing), scales 2^-7 (ue8m0: 1), zero points 0, global
  // scales 1. Values do not matter for timing; only their sizes and addresses do.
  std::mt19937_64 rng(1);
  std::vector<uint8_t> wbytes(l.packed.weight);
  for (auto& b : wbytes) b = static_cast<uint8_t>(rng());
  const uint64_t w = dev.upload(wbytes);
  wbytes = {};
  // (ue8m0 scales: 1, inside the exponent window of the MXFP4 -> FP8 path, docs/activations.md.)
  const double scale_value = l.scale == HM_DTYPE_UE8M0 ? 1.0 : 1.0 / 128;
  const uint64_t s = l.packed.scales ? dev.upload(repeated_value(l.scale, scale_value, l.packed.scales)) : 0;
  const uint64_t zp = l.packed.zero_points ? dev.upload(std::vector<uint8_t>(l.packed.zero_points, 0)) : 0;
  const uint64_t gs =
      l.packed.global_scale ? dev.upload(repeated_value(HM_DTYPE_F32, 1.0, l.packed.global_scale)) : 0;
  const uint64_t bias = l.bias ? dev.upload(std::vector<uint8_t>(l.n * dtype_bits(l.out) / 8, 0)) : 0;
  const uint64_t a = dev.upload(random_elements(l.act, static_cast<size_t>(max_m * l.k), 2));
  // 8-bit activations come with per-token (or per token and K group) f32 scales
  // (HM_ARG_ACT_SCALES).
  const uint64_t act_scales =
      dtype_bits(l.act) == 8
          ? dev.upload(repeated_value(HM_DTYPE_F32, 1.0 / 64,
                                      static_cast<size_t>(max_m * l.act_groups) * 4))
          : 0;
  const uint64_t c = dev.alloc(static_cast<size_t>(max_m * l.n * dtype_bits(l.out) / 8));

  // cuBLAS operands: unquantized [N,K] weights and, unless the activations already are 16-bit
  // floats of the same kind, its own A.
  const int cb_type = cublas_dtype(l.act, &run.cublas_dtype);
  const hm_dtype_t cb_dtype = cb_type == CUDA_R_16BF ? HM_DTYPE_BF16 : HM_DTYPE_F16;
  uint64_t cb_w = 0, cb_a = 0, cb_c = 0;
  if (cb.usable() && o.cublas) {
    const std::string err = cublas_bind(cb, stream, cb_workspace);
    if (!err.empty()) {
      run.cublas_error = err;
      std::printf("cuBLAS baseline unavailable: %s\n", err.c_str());
    } else {
      cb_w = dev.upload(random_elements(cb_dtype, static_cast<size_t>(l.n * l.k), 3));
      cb_a = l.act == cb_dtype ? a : dev.upload(random_elements(cb_dtype, static_cast<size_t>(max_m * l.k), 4));
      cb_c = dev.alloc(static_cast<size_t>(max_m * l.n * 2));
    }
  }
  const bool with_cublas = cb_w != 0;

  hm_plan_t* plan = make_plan(dev.ctx, l, run.tuning_json);
  const auto t0 = std::chrono::steady_clock::now();
  HM_CHECK(hm_plan_prepare(plan));
  run.prepare_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  uint64_t ws_bytes = 0;
  HM_CHECK(hm_plan_workspace_size(plan, max_m, &ws_bytes));
  // Zeroed once; the kernels leave it zeroed again.
  const uint64_t ws = ws_bytes ? dev.upload(std::vector<uint8_t>(ws_bytes, 0)) : 0;

  // At least 2x the L2, so that nothing of the previous call survives the flush.
  run.flush_bytes = o.flush ? std::max<size_t>(static_cast<size_t>(o.flush_mib) << 20,
                                               2 * static_cast<size_t>(std::max<int64_t>(run.l2_bytes, 0)))
                            : 0;
  const CUdeviceptr scratch = run.flush_bytes ? dev.alloc(run.flush_bytes) : 0;
  // Its events belong to the primary context: destroyed before the context is released below.
  auto timer = std::make_unique<Timer>(cu, stream, scratch, run.flush_bytes, o.iters);

  std::printf("device %s (%s, %d SMs, L2 %lld MiB); format %s; prepare %.0f ms\n", run.device.c_str(),
              run.arch.c_str(), run.sms, static_cast<long long>(run.l2_bytes >> 20), run.format.c_str(),
              run.prepare_ms);
  std::printf("timing: %s, %s, median of %d after %d warm-up; cuBLAS %s\n",
              o.graph ? "graph replay" : "plain launches",
              o.flush ? ("L2 flush " + std::to_string(run.flush_bytes >> 20) + " MiB").c_str() : "no L2 flush",
              o.iters, o.warmup,
              with_cublas ? (run.cublas_dtype + " via " + cb.library).c_str() : "off");
  if (o.iters < 100) std::printf("note: --iters %d is below the 100 the protocol asks for\n", o.iters);

  hm_launch_params_t* p = nullptr;
  HM_CHECK(hm_launch_params_create(&p));
  for (int64_t m : ms) {
    Row row;
    row.m = m;
    row.bytes = l.bytes(m);
    row.flops = 2.0 * m * l.n * l.k;
    row.plan = describe_plan(plan, m);

    HM_CHECK(hm_launch_params_clear(p));
    HM_CHECK(hm_launch_params_set_pointer(p, HM_ARG_A, a));
    HM_CHECK(hm_launch_params_set_pointer(p, HM_ARG_B, w));
    HM_CHECK(hm_launch_params_set_pointer(p, HM_ARG_C, c));
    if (s) HM_CHECK(hm_launch_params_set_pointer(p, HM_ARG_SCALES, s));
    if (zp) HM_CHECK(hm_launch_params_set_pointer(p, HM_ARG_ZEROS, zp));
    if (gs) HM_CHECK(hm_launch_params_set_pointer(p, HM_ARG_GLOBAL, gs));
    if (bias) HM_CHECK(hm_launch_params_set_pointer(p, HM_ARG_BIAS, bias));
    if (act_scales) HM_CHECK(hm_launch_params_set_pointer(p, HM_ARG_ACT_SCALES, act_scales));
    if (ws) {
      HM_CHECK(hm_launch_params_set_pointer(p, HM_ARG_WORKSPACE, ws));
      HM_CHECK(hm_launch_params_set_int(p, HM_ARG_WORKSPACE_BYTES, static_cast<int64_t>(ws_bytes)));
    }
    HM_CHECK(hm_launch_params_set_int(p, HM_ARG_M, m));
    const Launch hm_call = [&]() -> std::string {
      const hm_status_t st = hm_plan_gemm(plan, p, stream);
      return st == HM_SUCCESS ? "" : hm_failure("hm_plan_gemm", st);
    };
    // One plain call first: any one-time work (module loading, attributes) happens outside the
    // capture, and a failure here is reported as the library's own error.
    {
      const std::string err = hm_call();
      if (!err.empty()) die(err);
      HM_CU_CHECK(cu, cuStreamSynchronize(stream));
    }
    // The host's share of a call (argument checks, pointer queries, tensor maps, the launch), as
    // an engine that does not use graphs pays it: each call timed alone on the host clock, the
    // GPU left to run behind (few enough calls that the launch queue never fills).
    {
      std::vector<double> host;
      for (int i = 0; i < 101; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        const hm_status_t st = hm_plan_gemm(plan, p, stream);
        const auto t1 = std::chrono::steady_clock::now();
        if (st != HM_SUCCESS) die(hm_failure("hm_plan_gemm", st));
        host.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
      HM_CU_CHECK(cu, cuStreamSynchronize(stream));
      std::nth_element(host.begin(), host.begin() + 50, host.end());
      row.host_us = host[50];
    }
    CUgraphExec hm_exec = nullptr;
    if (o.graph) {
      // Global mode: the plan promises nothing unsafe (no allocation, no sync) while capturing.
      // If that promise breaks, say so loudly but still measure (relaxed mode): a benchmark run
      // on a borrowed GPU should not be lost to it; the GPU tests are where it must fail.
      std::string err = capture(cu, stream, CU_STREAM_CAPTURE_MODE_GLOBAL, hm_call, &hm_exec);
      if (!err.empty()) {
        row.note = "global-mode capture failed (" + err + "); captured in relaxed mode";
        std::printf("WARNING: M=%lld: %s\n", static_cast<long long>(m), row.note.c_str());
        const std::string again = capture(cu, stream, CU_STREAM_CAPTURE_MODE_RELAXED, hm_call, &hm_exec);
        if (!again.empty())
          die("capturing hm_plan_gemm for M=" + std::to_string(m) + ": " + err + "; relaxed: " + again);
      }
      row.hm = timer->replay(hm_exec, o.warmup, o.iters);
      HM_CU_CHECK(cu, cuGraphExecDestroy(hm_exec));
    } else {
      row.hm = timer->run(hm_call, o.warmup, o.iters);
    }
    if (!row.hm.ok) die("timing hm_plan_gemm for M=" + std::to_string(m) + ": " + row.hm.error);

    if (with_cublas) {
      const Launch cb_call = [&] { return cublas_gemm(cb, cb_type, cb_a, cb_w, cb_c, m, l.n, l.k); };
      // Relaxed capture mode: cuBLAS is only the baseline; what it does inside is its own business.
      if (o.graph) {
        row.cb = gpu_timing::time_graph(cu, *timer, stream, CU_STREAM_CAPTURE_MODE_RELAXED, cb_call,
                                        o.warmup, o.iters);
      } else {
        const std::string err = cb_call();  // heuristics and kernel loading outside the timing
        HM_CU_CHECK(cu, cuStreamSynchronize(stream));
        if (err.empty()) row.cb = timer->run(cb_call, o.warmup, o.iters);
        else row.cb.error = err;
      }
    }
    run.rows.push_back(row);
    std::fflush(stdout);
  }
  hm_launch_params_destroy(p);
  timer->destroy();
  timer.reset();

  print_table(run);
  if (!o.json.empty()) write_json(run);

  const std::string unload = gpu_timing::cublas_unload(cb);
  if (!unload.empty()) std::fprintf(stderr, "warning: %s\n", unload.c_str());
  hm_plan_destroy(plan);
  hm_format_destroy(l.format);
  dev.free_all();
  hm_context_destroy(dev.ctx);
  device_stream.close();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Run run;
  run.opt = parse_options(argc, argv);
  run.date = utc_now();
  const std::vector<int64_t> ms = parse_ms(run.opt.ms);
  if (!run.opt.tuning.empty()) run.tuning_json = read_file(run.opt.tuning);
  if (run.opt.dry_run) return dry_run(run, ms);
  try {
    return bench(run, ms);
  } catch (const gpu_timing::Error& e) {
    die(e.what());  // a failed driver call, named as written
  }
}
