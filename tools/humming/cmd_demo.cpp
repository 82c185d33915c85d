// `humming demo`: the main job end to end — quantize a weight to a format, pack it into the
// standard layout (and check the packing is lossless), compile a kernel through the JIT cache, run
// it on the GPU when there is one and check the result against the f64 host reference, then time
// it and cuBLAS on the dequantized weight the way bench_gemm does (tools/gpu_timing). With
// --converted PATH --layer NAME the layer is a converted checkpoint's (hm_stored_model_read)
// instead of a random weight quantized here: its packed buffers and bias run as stored.
//
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cli.hpp"
#include "gpu_timing.hpp"

namespace cli {
namespace {

double rel_error(const std::vector<float>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double d = static_cast<double>(got[i]) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// Encodes host floats into a 16-bit dtype's bit patterns through the library (one source of truth
// for rounding). A call costs ~0.2 us, seconds for a whole weight; a dequantized weight has few
// distinct values per scale group, so a small direct-mapped memo of exact values skips most calls.
std::vector<uint16_t> encode16(hm_dtype_t dtype, const std::vector<float>& values) {
  constexpr size_t kMemo = 4096;
  std::vector<uint32_t> memo_bits(kMemo);
  std::vector<int32_t> memo_code(kMemo, -1);  // -1: empty
  std::vector<uint16_t> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, &values[i], sizeof bits);
    const size_t slot = (bits * 2654435761u) >> 20;  // Knuth's multiplicative hash, 12 bits
    if (memo_code[slot] < 0 || memo_bits[slot] != bits) {
      uint32_t code = 0;
      check(hm_dtype_encode(dtype, values[i], &code), "encoding a value");
      memo_bits[slot] = bits;
      memo_code[slot] = static_cast<int32_t>(code & 0xffffu);
    }
    out[i] = static_cast<uint16_t>(memo_code[slot]);
  }
  return out;
}

std::vector<float> decode16(hm_dtype_t dtype, const std::vector<uint16_t>& codes) {
  std::vector<float> out(codes.size());
  for (size_t i = 0; i < codes.size(); ++i) {
    double v = 0;
    check(hm_dtype_decode(dtype, codes[i], &v), "decoding a value");
    out[i] = static_cast<float>(v);
  }
  return out;
}

std::string dtype_name(hm_dtype_t d) {
  char buf[64];
  check(hm_dtype_name(d, buf, sizeof buf, nullptr), "naming a dtype");
  return buf;
}

// Timed calls per measurement: enough for a stable median in a demo (bench_gemm uses 200).
constexpr int kTimedCalls = 50;
constexpr int kWarmupCalls = 5;

// What the GPU part of the demo works on: the plan's launch parameters and the host data the
// cuBLAS baseline needs. Device memory comes from the library (hm_device_alloc) and is freed by
// the caller.
struct TimingInputs {
  hm_context_t* ctx;
  const hm_plan_t* plan;
  const hm_launch_params_t* params;
  hm_dtype_t act;                      // cuBLAS's dtype: f16 or bf16
  uint64_t d_a;                        // cuBLAS's activations on the device, [M][K] in `act`
  const std::vector<float>* deq;       // the dequantized weight [N][K]
  const std::vector<double>* ref;      // the f64 host reference [M][N]
  int64_t m, n, k;
  int64_t l2_bytes;
};

// The device side of the timing: the driver, a stream in the library's context, and an event
// timer whose L2 flush overwrites a scratch buffer of >= 2x the L2 before every timed call.
struct TimingSession {
  gpu_timing::Driver cu;
  gpu_timing::DeviceStream ds;
  size_t flush_bytes;
  gpu_timing::Timer timer;
  TimingSession(int64_t l2_bytes, const std::function<uint64_t(size_t)>& alloc)
      : cu(gpu_timing::load_driver()),
        ds(cu, 0),  // the demo's context is on device 0
        flush_bytes(std::max<size_t>(size_t{256} << 20,
                                     2 * static_cast<size_t>(std::max<int64_t>(l2_bytes, 0)))),
        timer(cu, ds.stream(), alloc(flush_bytes), flush_bytes, kTimedCalls) {}
  // One untimed call, CUDA-graph capture in `mode`, warm-up, then the median of timed replays.
  gpu_timing::Stats time(int mode, const gpu_timing::Launch& call) {
    return gpu_timing::time_graph(cu, timer, ds.stream(), mode, call, kWarmupCalls, kTimedCalls);
  }
};

struct CublasResult {
  gpu_timing::Stats stats;
  std::string why_not;  // why there is no time ("" when stats.ok)
  std::string library;
  double error = 0;     // against the f64 host reference
};

// cublasGemmEx (f16 or bf16 as the activations, f32 accumulation) on the dequantized weight,
// timed like hm_plan_gemm. cuBLAS that cannot be loaded or fails is reported, not an error.
CublasResult time_cublas(const TimingInputs& in, TimingSession& ts,
                         const std::function<uint64_t(size_t)>& alloc) {
  CublasResult r;
  gpu_timing::Cublas cb;
  gpu_timing::load_cublas(cb);
  r.library = cb.library;
  r.why_not = cb.error;
  if (r.why_not.empty())
    r.why_not =
        gpu_timing::cublas_bind(cb, ts.ds.stream(), alloc(gpu_timing::kCublasWorkspaceBytes));
  if (r.why_not.empty()) {
    // The weight cuBLAS multiplies is the one Humming dequantizes, rounded to the activation
    // dtype, so both compute the same product and cuBLAS's error is a cross-check of the call.
    const std::vector<uint16_t> w16 = encode16(in.act, *in.deq);
    const uint64_t d_w = alloc(w16.size() * 2);
    check(hm_copy_to_device(in.ctx, d_w, w16.data(), w16.size() * 2), "copying the cuBLAS weight");
    const size_t c_bytes = static_cast<size_t>(in.m * in.n) * 2;
    const uint64_t d_c = alloc(c_bytes);
    const int type = in.act == HM_DTYPE_BF16 ? gpu_timing::CUDA_R_16BF : gpu_timing::CUDA_R_16F;
    const gpu_timing::Launch call = [&] {
      return gpu_timing::cublas_gemm(cb, type, in.d_a, d_w, d_c, in.m, in.n, in.k);
    };
    r.why_not = call();
    HM_CU_CHECK(ts.cu, cuStreamSynchronize(ts.ds.stream()));
    if (r.why_not.empty()) {
      std::vector<uint16_t> c16(static_cast<size_t>(in.m * in.n));
      check(hm_copy_to_host(in.ctx, c16.data(), d_c, c_bytes), "copying cuBLAS's C back");
      r.error = rel_error(decode16(in.act, c16), *in.ref);
      // Relaxed capture mode: cuBLAS is only the baseline; what it does inside is its own business.
      r.stats = ts.time(gpu_timing::CU_STREAM_CAPTURE_MODE_RELAXED, call);
      r.why_not = r.stats.error;
    }
  }
  const std::string unload = gpu_timing::cublas_unload(cb);
  if (!unload.empty()) std::printf("cublas:      %s\n", unload.c_str());
  return r;
}

// Times hm_plan_gemm and cuBLAS with the same protocol (bench_gemm's: CUDA-graph replays, the L2
// flushed outside the CUDA-event pair, median) and prints both and their ratio. Driver failures
// throw gpu_timing::Error.
void time_gpu(const TimingInputs& in, std::vector<uint64_t>& owned) {
  const std::function<uint64_t(size_t)> alloc = [&](size_t bytes) {
    uint64_t p = 0;
    check(hm_device_alloc(in.ctx, bytes, &p), "allocating device memory");
    owned.push_back(p);
    return p;
  };
  TimingSession ts(in.l2_bytes, alloc);
  // Global capture mode: hm_plan_gemm promises nothing unsafe (no allocation, no sync) in a graph.
  const gpu_timing::Launch call = [&]() -> std::string {
    const hm_status_t st = hm_plan_gemm(in.plan, in.params, ts.ds.stream());
    if (st == HM_SUCCESS) return "";
    return std::string("hm_plan_gemm failed: ") + hm_status_name(st) + ": " + last_error();
  };
  const gpu_timing::Stats hm = ts.time(gpu_timing::CU_STREAM_CAPTURE_MODE_GLOBAL, call);
  if (!hm.ok) throw Failure{"timing hm_plan_gemm: " + hm.error};
  std::printf("humming:     %.1f us (median of %d CUDA-graph replays, p10 %.1f, p90 %.1f; "
              "L2 flushed by a %zu MiB memset before each)\n",
              hm.median, hm.count, hm.p10, hm.p90, ts.flush_bytes >> 20);

  const char* cb_name = in.act == HM_DTYPE_BF16 ? "bf16" : "f16";
  const CublasResult cb = time_cublas(in, ts, alloc);
  if (cb.stats.ok) {
    std::printf("cublas:      %.1f us (%s cublasGemmEx via %s on the dequantized weight, same "
                "protocol; rel. error %.2e)\n",
                cb.stats.median, cb_name, cb.library.c_str(), cb.error);
    std::printf("ratio:       humming / cuBLAS %s = %.2f (below 1: humming is faster)\n", cb_name,
                hm.median / cb.stats.median);
  } else {
    std::printf("cublas:      not timed: %s\n", cb.why_not.c_str());
  }
  ts.timer.destroy();
  ts.ds.close();
}

struct FormatHandle {
  hm_format_t* f = nullptr;
  ~FormatHandle() { hm_format_destroy(f); }
};
struct ContextHandle {
  hm_context_t* c = nullptr;
  ~ContextHandle() { hm_context_destroy(c); }
};

// Canonical buffers sized for a format, owned; view() is the C struct over them.
struct Canonical {
  std::vector<uint8_t> codes;
  std::vector<float> scales, zero_points, global;
  explicit Canonical(const hm_format_t* f) {
    hm_canonical_sizes_t cs;
    hm_canonical_sizes_init(&cs);
    check(hm_format_canonical_sizes(f, &cs), "querying canonical sizes");
    codes.resize(cs.codes);
    scales.resize(cs.scales);
    zero_points.resize(cs.zero_points);
    global.resize(cs.global_scale);
  }
  hm_canonical_weight_t view() {
    hm_canonical_weight_t w;
    hm_canonical_weight_init(&w);
    w.codes = codes.data();
    w.scales = scales.empty() ? nullptr : scales.data();
    w.zero_points = zero_points.empty() ? nullptr : zero_points.data();
    w.global_scale = global.empty() ? nullptr : global.data();
    return w;
  }
  bool operator==(const Canonical& o) const {
    return codes == o.codes && scales == o.scales && zero_points == o.zero_points &&
           global == o.global;
  }
};

// The layer the demo runs: the standard layout's buffers, the dequantized weight [E][N][K] the
// host reference multiplies, and the bias (f32 [N]; empty without one).
struct DemoLayer {
  std::vector<uint8_t> weight, scales, zero_points;
  std::vector<float> global, deq, bias;
  hm_packed_weight_t packed() {
    hm_packed_weight_t p;
    hm_packed_weight_init(&p);
    p.weight = weight.data();
    p.scales = scales.empty() ? nullptr : scales.data();
    p.zero_points = zero_points.empty() ? nullptr : zero_points.data();
    p.global_scale = global.empty() ? nullptr : global.data();
    return p;
  }
};

// Unpacks the packed buffers and dequantizes them into layer.deq; returns whether the unpacked
// canonical buffers equal `q` (when given: the ones that were packed).
bool dequantize_packed(const hm_format_t* f, DemoLayer& layer, const Canonical* q) {
  const hm_packed_weight_t packed = layer.packed();
  Canonical back(f);
  hm_canonical_weight_t view = back.view();
  check(hm_unpack(f, &packed, &view), "unpacking");
  layer.deq.assign(back.codes.size(), 0.0f);
  check(hm_dequantize(f, &view, layer.deq.data()), "dequantizing");
  return q == nullptr || back == *q;
}

// A random weight (N(0, 0.02)), quantized to the format and packed; pack -> unpack must be exact.
DemoLayer random_layer(const hm_format_t* f, int64_t n, int64_t k, uint64_t nk, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> weight(nk);
  for (auto& w : weight) w = normal(rng) * 0.02f;
  Canonical canonical(f);
  hm_canonical_weight_t q = canonical.view();
  auto t0 = std::chrono::steady_clock::now();
  check(hm_quantize(f, weight.data(), HM_DTYPE_F32, &q), "quantizing");
  auto t1 = std::chrono::steady_clock::now();
  hm_packed_sizes_t ps;
  hm_packed_sizes_init(&ps);
  check(hm_format_packed_sizes(f, &ps), "querying packed sizes");
  DemoLayer layer;
  layer.weight.resize(ps.weight);
  layer.scales.resize(ps.scales);
  layer.zero_points.resize(ps.zero_points);
  layer.global.resize(ps.global_scale / sizeof(float));
  hm_packed_weight_t packed = layer.packed();
  check(hm_pack(f, &q, &packed), "packing");
  auto t2 = std::chrono::steady_clock::now();
  const bool lossless = dequantize_packed(f, layer, &canonical);
  double qnum = 0, qden = 0;
  for (uint64_t i = 0; i < nk; ++i) {
    qnum += (layer.deq[i] - weight[i]) * static_cast<double>(layer.deq[i] - weight[i]);
    qden += static_cast<double>(weight[i]) * weight[i];
  }
  std::printf("quantize:    %.1f ms, weight rel. error %.4f\n",
              std::chrono::duration<double, std::milli>(t1 - t0).count(), std::sqrt(qnum / qden));
  std::printf("pack:        %.1f ms, %.2f MiB of weights (N %lld -> %lld, K %lld -> %lld), unpack %s\n",
              std::chrono::duration<double, std::milli>(t2 - t1).count(),
              static_cast<double>(ps.weight) / (1024.0 * 1024.0), static_cast<long long>(n),
              static_cast<long long>(ps.n_padded), static_cast<long long>(k),
              static_cast<long long>(ps.k_padded),
              lossless ? "exact" : "MISMATCH");
  if (!lossless) throw Failure{"pack -> unpack did not give back the canonical buffers"};
  return layer;
}

// Layer `name` of a converted folder or file, as stored; its format replaces format.f.
DemoLayer stored_layer(const std::string& path, const std::string& name, hm_format_t** format) {
  struct Model {
    hm_stored_model_t* m = nullptr;
    ~Model() { hm_stored_model_destroy(m); }
  } model;
  check(hm_stored_model_open(path.c_str(), &model.m), "opening --converted");
  struct Layer {
    hm_stored_layer_t* l = nullptr;
    ~Layer() { hm_stored_layer_destroy(l); }
  } stored;
  check(hm_stored_model_read(model.m, name.c_str(), &stored.l), "reading --layer");
  check(hm_stored_layer_format(stored.l, format), "reading the layer's format");
  hm_stored_layer_info_t info;
  hm_stored_layer_info_init(&info);
  check(hm_stored_layer_info(stored.l, &info), "reading the layer");
  hm_packed_sizes_t ps;
  hm_packed_sizes_init(&ps);
  check(hm_format_packed_sizes(*format, &ps), "querying packed sizes");
  auto bytes = [](const void* p, uint64_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    return p ? std::vector<uint8_t>(b, b + n) : std::vector<uint8_t>();
  };
  DemoLayer layer;
  layer.weight = bytes(info.packed.weight, ps.weight);
  layer.scales = bytes(info.packed.scales, ps.scales);
  layer.zero_points = bytes(info.packed.zero_points, ps.zero_points);
  if (info.packed.global_scale)
    layer.global.assign(info.packed.global_scale, info.packed.global_scale + ps.global_scale / 4);
  int64_t n = 0, k = 0;
  int32_t e = 0;
  check(hm_format_get_shape(*format, &n, &k, &e), "reading the shape");
  if (info.bias) layer.bias.assign(info.bias, info.bias + e * n);
  if (e == 1) dequantize_packed(*format, layer, nullptr);  // the demo stops before MoE GEMMs
  std::printf("layer:       %s of %s, %.2f MiB of weights%s%s\n", name.c_str(), path.c_str(),
              static_cast<double>(ps.weight) / (1024.0 * 1024.0),
              info.k_permutation ? " (K reordered: random activations need no gather)" : "",
              info.note ? (std::string("; ") + info.note).c_str() : "");
  return layer;
}

}  // namespace

int cmd_demo(Args& args) {
  const std::string text = args.get("format", "");
  const std::string converted = args.get("converted", "");
  const std::string layer_name = args.get("layer", "");
  const std::string arch = args.get("arch", "sm_90a");
  const int64_t m = parse_integer(args.get("m", "16"), "m", 1, HM_MAX_M);
  const auto seed = static_cast<unsigned>(parse_integer(args.get("seed", "1"), "seed", 0, UINT32_MAX));
  args.finish();
  if (converted.empty() != layer_name.empty())
    throw Failure{"--converted PATH and --layer NAME go together (a layer of a converted folder "
                  "or file; humming convert writes them)"};
  if (!converted.empty() && !text.empty())
    throw Failure{"--format and --converted exclude each other: a converted layer has its format"};

  FormatHandle format;
  DemoLayer layer;
  if (!converted.empty())
    layer = stored_layer(converted, layer_name, &format.f);
  else
    check(hm_format_parse(text.empty() ? "w=uint4b8 a=f16 c=f16 s=f16:g128 zp=none n=4096 k=4096"
                                       : text.c_str(),
                          &format.f),
          "parsing --format");
  char canonical[512];
  check(hm_format_to_string(format.f, canonical, sizeof canonical, nullptr), "printing the format");
  int64_t n = 0, k = 0;
  int32_t experts = 0;
  check(hm_format_get_shape(format.f, &n, &k, &experts), "reading the shape");
  if (n <= 0 || k <= 0) throw Failure{"the format needs n= and k= (e.g. n=4096 k=4096)"};
  check(hm_format_validate(format.f, nullptr), "validating the format");
  hm_dtype_t act = 0, out_dtype = 0;
  check(hm_format_get_dtype(format.f, HM_ROLE_ACTIVATION, &act), "reading the activation dtype");
  check(hm_format_get_dtype(format.f, HM_ROLE_OUTPUT, &out_dtype), "reading the output dtype");
  int32_t act_group_k = 0;  // a=e4m3:g128: activation scales per token and K group
  check(hm_format_get_activation_groups(format.f, &act_group_k), "reading the activation groups");
  int32_t has_bias = 0;
  check(hm_format_get_bias(format.f, &has_bias), "reading the bias flag");
  if (has_bias && converted.empty())
    throw Failure{"the demo does not make up a bias: use a format with bias=0"};
  std::printf("format:      %s\n", canonical);

  // 1. A random weight, quantized, packed, unpacked (must be lossless), dequantized; or the
  //    converted layer, unpacked and dequantized.
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const uint64_t nk = static_cast<uint64_t>(experts) * n * k;
  if (converted.empty()) layer = random_layer(format.f, n, k, nk, rng);
  hm_packed_sizes_t ps;
  hm_packed_sizes_init(&ps);
  check(hm_format_packed_sizes(format.f, &ps), "querying packed sizes");
  const std::vector<float>& deq = layer.deq;
  if (experts != 1) {
    std::printf("(MoE formats: the demo stops after packing)\n");
    return 0;
  }

  // 2. Activations, and the f64 host reference on the dequantized weight (the activations are
  //    rounded to the activation dtype first, so the reference sees what the GPU sees).
  std::vector<float> a(static_cast<size_t>(m * k));
  for (auto& x : a) x = normal(rng);
  const bool act16 = (act == HM_DTYPE_F16 || act == HM_DTYPE_BF16);
  const bool act8 = (act == HM_DTYPE_E4M3 || act == HM_DTYPE_E5M2 || act == HM_DTYPE_INT8);
  if (!act16 && !act8)
    throw Failure{"the demo runs f16, bf16, e4m3, e5m2 or int8 activations, not " +
                  dtype_name(act)};
  // 8-bit activations are quantized per token (or per token and K group) by the host rule (the
  // one the GPU quantizer follows bit for bit): codes + f32 scales; the reference sees codes x
  // scale, and cuBLAS gets the same values in f16.
  std::vector<uint8_t> a8;
  std::vector<float> a_scales;
  std::vector<uint16_t> a_codes;  // 16-bit activations (or cuBLAS's f16 copy of the 8-bit ones)
  if (act8) {
    a8.resize(a.size());
    int64_t groups = 1;
    check(hm_activation_scale_groups(k, act_group_k, &groups), "counting activation groups");
    a_scales.resize(static_cast<size_t>(m * groups));
    check(hm_quantize_activation(act, a.data(), m, k, act_group_k, a8.data(), a_scales.data()),
          "quantizing the activations");
    check(hm_dequantize_activation(act, a8.data(), a_scales.data(), m, k, act_group_k, a.data()),
          "dequantizing the activations");
    a_codes = encode16(HM_DTYPE_F16, a);
  } else {
    a_codes = encode16(act, a);
    a = decode16(act, a_codes);
  }
  std::vector<float> ref_f(static_cast<size_t>(m * n));
  auto t3 = std::chrono::steady_clock::now();
  check(hm_reference_gemm_f32(a.data(), deq.data(), layer.bias.empty() ? nullptr : layer.bias.data(),
                              ref_f.data(), m, n, k),
        "running the host reference GEMM");
  auto t4 = std::chrono::steady_clock::now();
  std::vector<double> ref(ref_f.begin(), ref_f.end());
  std::printf("host ref:    %.1f ms (f64 accumulation, M=%lld)\n",
              std::chrono::duration<double, std::milli>(t4 - t3).count(), static_cast<long long>(m));

  // 3. A context: the first GPU if there is one, else ahead-of-time for --arch.
  hm_runtime_info_t info;
  hm_runtime_info_init(&info);
  check(hm_runtime_info(&info), "reading runtime info");
  const bool gpu = info.device_count > 0;
  hm_context_options_t options;
  hm_context_options_init(&options);
  options.device = gpu ? 0 : HM_NO_DEVICE;
  options.target_arch = gpu ? nullptr : arch.c_str();
  ContextHandle ctx;
  check(hm_context_create(&options, &ctx.c), "creating the context");
  hm_device_info_t dev;
  hm_device_info_init(&dev);
  check(hm_context_device_info(ctx.c, &dev), "reading device info");

  // 4. The plan: every kernel the layer needs, compiled up front through the cache.
  hm_plan_t* plan = nullptr;
  auto t5 = std::chrono::steady_clock::now();
  check(hm_plan_create(ctx.c, format.f, nullptr, &plan), "creating the plan");
  struct PlanGuard {
    hm_plan_t* p;
    ~PlanGuard() { hm_plan_destroy(p); }
  } plan_guard{plan};
  check(hm_plan_prepare(plan), "preparing the plan (compiling its kernels)");
  auto t6 = std::chrono::steady_clock::now();
  size_t desc_length = 0;  // the snprintf rule: ask for the length, then fill
  const hm_status_t sized = hm_plan_describe(plan, m, nullptr, 0, &desc_length);
  if (sized != HM_ERROR_BUFFER_TOO_SMALL) check(sized, "describing the plan");
  std::string desc_text(desc_length + 1, '\0');
  check(hm_plan_describe(plan, m, desc_text.data(), desc_text.size(), nullptr),
        "describing the plan");
  const char* desc = desc_text.c_str();
  std::printf("prepare:     %.1f ms for %s (all M ranges, through the kernel cache)\n",
              std::chrono::duration<double, std::milli>(t6 - t5).count(), dev.arch);
  std::printf("kernel:      M=%lld -> %s\n", static_cast<long long>(m), desc);

  if (!gpu) {
    std::printf("gpu:         none found (%s): compiled for %s only; the check above ran on the host\n",
                info.driver_error[0] ? info.driver_error : "no device", dev.arch);
    return 0;
  }

  // 5. Run on the GPU and compare with the host reference.
  const size_t a_bytes = a_codes.size() * 2, c_bytes = static_cast<size_t>(m * n) * 2;
  std::vector<uint64_t> owned;
  auto upload = [&](const void* data, size_t bytes) {
    uint64_t p = 0;
    check(hm_device_alloc(ctx.c, bytes, &p), "allocating device memory");
    owned.push_back(p);
    check(hm_copy_to_device(ctx.c, p, data, bytes), "copying to the device");
    return p;
  };
  uint64_t ws_bytes = 0;
  check(hm_plan_workspace_size(plan, m, &ws_bytes), "querying the workspace size");
  std::vector<uint8_t> zeros(std::max<uint64_t>(ws_bytes, c_bytes), 0);
  hm_launch_params_t* params = nullptr;
  check(hm_launch_params_create(&params), "creating launch params");
  const uint64_t d_a = upload(a_codes.data(), a_bytes);
  if (act8) {
    hm_launch_params_set_pointer(params, HM_ARG_A, upload(a8.data(), a8.size()));
    hm_launch_params_set_pointer(params, HM_ARG_ACT_SCALES,
                                 upload(a_scales.data(), a_scales.size() * 4));
  } else {
    hm_launch_params_set_pointer(params, HM_ARG_A, d_a);
  }
  hm_launch_params_set_pointer(params, HM_ARG_B, upload(layer.weight.data(), layer.weight.size()));
  const uint64_t d_c = upload(zeros.data(), c_bytes);
  hm_launch_params_set_pointer(params, HM_ARG_C, d_c);
  if (ps.scales)
    hm_launch_params_set_pointer(params, HM_ARG_SCALES, upload(layer.scales.data(), ps.scales));
  if (ps.zero_points)
    hm_launch_params_set_pointer(params, HM_ARG_ZEROS,
                                 upload(layer.zero_points.data(), ps.zero_points));
  if (ps.global_scale)
    hm_launch_params_set_pointer(params, HM_ARG_GLOBAL,
                                 upload(layer.global.data(), ps.global_scale));
  if (!layer.bias.empty()) {  // [N] in the output dtype
    const std::vector<uint16_t> bias = encode16(out_dtype, layer.bias);
    hm_launch_params_set_pointer(params, HM_ARG_BIAS, upload(bias.data(), bias.size() * 2));
  }
  if (ws_bytes) {
    hm_launch_params_set_pointer(params, HM_ARG_WORKSPACE, upload(zeros.data(), ws_bytes));
    hm_launch_params_set_int(params, HM_ARG_WORKSPACE_BYTES, static_cast<int64_t>(ws_bytes));
  }
  hm_launch_params_set_int(params, HM_ARG_M, m);
  check(hm_plan_gemm(plan, params, nullptr), "running the GEMM");
  check(hm_stream_synchronize(ctx.c, nullptr), "synchronizing");
  std::vector<uint16_t> c_codes(static_cast<size_t>(m * n));
  check(hm_copy_to_host(ctx.c, c_codes.data(), d_c, c_bytes), "copying C back");
  const double err = rel_error(decode16(out_dtype, c_codes), ref);
  // f16 and bf16 rounding of the weight times its scale (16-bit activations), or the output's
  // rounding (8-bit: the activations are exact codes, the weights exact in their type).
  const double bound = (act8 ? out_dtype == HM_DTYPE_F16 : act == HM_DTYPE_F16) ? 2e-3 : 1.5e-2;
  std::printf("gpu:         %s\n", dev.name);
  std::printf("check:       rel. Frobenius error vs f64 host reference %.2e (%s output, bound %.0e) -> %s\n",
              err, dtype_name(out_dtype).c_str(), bound, err <= bound ? "OK" : "FAIL");

  // 6. Timing, only for a kernel that computed the right thing.
  if (err <= bound) {
    const TimingInputs in{ctx.c, plan,  params, act8 ? HM_DTYPE_F16 : act, d_a, &deq, &ref,
                          m,     n,     k,      dev.l2_cache_bytes};
    try {
      time_gpu(in, owned);
    } catch (const gpu_timing::Error& e) {
      throw Failure{std::string("timing: ") + e.what()};
    }
  } else {
    std::printf("timing:      skipped (the check failed)\n");
  }
  hm_launch_params_destroy(params);
  for (uint64_t p : owned) check(hm_device_free(ctx.c, p), "freeing device memory");
  return err <= bound ? 0 : 1;
}

}  // namespace cli
