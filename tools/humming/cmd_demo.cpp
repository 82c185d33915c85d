// `humming demo`: the main job end to end — quantize a weight to a format, pack it into the
// standard layout (and check the packing is lossless), compile a kernel through the JIT cache, run
// it on the GPU when there is one and check the result against the f64 host reference.
//
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cli.hpp"

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
// for rounding).
std::vector<uint16_t> encode16(hm_dtype_t dtype, const std::vector<float>& values) {
  std::vector<uint16_t> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t code = 0;
    check(hm_dtype_encode(dtype, values[i], &code), "encoding a value");
    out[i] = static_cast<uint16_t>(code);
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

struct FormatHandle {
  hm_format_t* f = nullptr;
  ~FormatHandle() { hm_format_destroy(f); }
};
struct ContextHandle {
  hm_context_t* c = nullptr;
  ~ContextHandle() { hm_context_destroy(c); }
};

}  // namespace

int cmd_demo(Args& args) {
  const std::string text =
      args.get("format", "w=uint4b8 a=f16 c=f16 s=f16:g128 zp=none n=4096 k=4096");
  const std::string arch = args.get("arch", "sm_90a");
  const int64_t m = std::stoll(args.get("m", "16"));
  const unsigned seed = static_cast<unsigned>(std::stoul(args.get("seed", "1")));
  args.finish();
  if (m <= 0) throw Failure{"--m must be positive"};

  FormatHandle format;
  check(hm_format_parse(text.c_str(), &format.f), "parsing --format");
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
  int32_t has_bias = 0;
  check(hm_format_get_bias(format.f, &has_bias), "reading the bias flag");
  if (has_bias) throw Failure{"the demo does not make up a bias: use a format with bias=0"};
  std::printf("format:      %s\n", canonical);

  // 1. A random weight, quantized, packed, unpacked (must be lossless), dequantized.
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const uint64_t nk = static_cast<uint64_t>(experts) * n * k;
  std::vector<float> weight(nk);
  for (auto& w : weight) w = normal(rng) * 0.02f;

  hm_canonical_sizes_t cs;
  hm_canonical_sizes_init(&cs);
  check(hm_format_canonical_sizes(format.f, &cs), "querying canonical sizes");
  std::vector<uint8_t> codes(cs.codes), codes2(cs.codes);
  std::vector<float> scales(cs.scales), zps(cs.zero_points), global(cs.global_scale);
  std::vector<float> scales2(cs.scales), zps2(cs.zero_points), global2(cs.global_scale);
  hm_canonical_weight_t q, q2;
  hm_canonical_weight_init(&q);
  hm_canonical_weight_init(&q2);
  q.codes = codes.data();
  q.scales = cs.scales ? scales.data() : nullptr;
  q.zero_points = cs.zero_points ? zps.data() : nullptr;
  q.global_scale = cs.global_scale ? global.data() : nullptr;
  q2.codes = codes2.data();
  q2.scales = cs.scales ? scales2.data() : nullptr;
  q2.zero_points = cs.zero_points ? zps2.data() : nullptr;
  q2.global_scale = cs.global_scale ? global2.data() : nullptr;

  auto t0 = std::chrono::steady_clock::now();
  check(hm_quantize(format.f, weight.data(), HM_DTYPE_F32, &q), "quantizing");
  auto t1 = std::chrono::steady_clock::now();
  hm_packed_sizes_t ps;
  hm_packed_sizes_init(&ps);
  check(hm_format_packed_sizes(format.f, &ps), "querying packed sizes");
  std::vector<uint8_t> pw(ps.weight), pscales(ps.scales), pzps(ps.zero_points);  // packed
  std::vector<float> pglobal(ps.global_scale / sizeof(float));
  hm_packed_weight_t packed;
  hm_packed_weight_init(&packed);
  packed.weight = pw.data();
  packed.scales = ps.scales ? pscales.data() : nullptr;
  packed.zero_points = ps.zero_points ? pzps.data() : nullptr;
  packed.global_scale = ps.global_scale ? pglobal.data() : nullptr;
  check(hm_pack(format.f, &q, &packed), "packing");
  auto t2 = std::chrono::steady_clock::now();
  check(hm_unpack(format.f, &packed, &q2), "unpacking");
  const bool lossless = codes == codes2 && scales == scales2 && zps == zps2 && global == global2;
  std::vector<float> deq(nk);
  check(hm_dequantize(format.f, &q, deq.data()), "dequantizing");
  double qnum = 0, qden = 0;
  for (uint64_t i = 0; i < nk; ++i) {
    qnum += (deq[i] - weight[i]) * static_cast<double>(deq[i] - weight[i]);
    qden += static_cast<double>(weight[i]) * weight[i];
  }
  std::printf("quantize:    %.1f ms, weight rel. error %.4f\n",
              std::chrono::duration<double, std::milli>(t1 - t0).count(), std::sqrt(qnum / qden));
  std::printf("pack:        %.1f ms, %.2f MiB of weights (N %lld -> %lld, K %lld -> %lld), unpack %s\n",
              std::chrono::duration<double, std::milli>(t2 - t1).count(),
              static_cast<double>(ps.weight) / (1024.0 * 1024.0), static_cast<long long>(n),
              static_cast<long long>(ps.n_padded), static_cast<long long>(k),
              static_cast<long long>(ps.k_padded), lossless ? "exact" : "MISMATCH");
  if (!lossless) throw Failure{"pack -> unpack did not give back the canonical buffers"};
  if (experts != 1) {
    std::printf("(MoE formats: the demo stops after packing)\n");
    return 0;
  }

  // 2. Activations, and the f64 host reference on the dequantized weight (the activations are
  //    rounded to the activation dtype first, so the reference sees what the GPU sees).
  std::vector<float> a(static_cast<size_t>(m * k));
  for (auto& x : a) x = normal(rng);
  const bool act16 = (act == HM_DTYPE_F16 || act == HM_DTYPE_BF16);
  if (!act16) throw Failure{"the demo runs 16-bit activations for now (a=f16 or a=bf16)"};
  auto a_codes = encode16(act, a);
  a = decode16(act, a_codes);
  std::vector<float> ref_f(static_cast<size_t>(m * n));
  auto t3 = std::chrono::steady_clock::now();
  check(hm_reference_gemm_f32(a.data(), deq.data(), nullptr, ref_f.data(), m, n, k),
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
  char desc[256];
  check(hm_plan_describe(plan, m, desc, sizeof desc, nullptr), "describing the plan");
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
  hm_launch_params_set_pointer(params, HM_ARG_A, upload(a_codes.data(), a_bytes));
  hm_launch_params_set_pointer(params, HM_ARG_B, upload(pw.data(), pw.size()));
  const uint64_t d_c = upload(zeros.data(), c_bytes);
  hm_launch_params_set_pointer(params, HM_ARG_C, d_c);
  if (ps.scales) hm_launch_params_set_pointer(params, HM_ARG_SCALES, upload(pscales.data(), pscales.size()));
  if (ps.zero_points) hm_launch_params_set_pointer(params, HM_ARG_ZEROS, upload(pzps.data(), pzps.size()));
  if (ps.global_scale) hm_launch_params_set_pointer(params, HM_ARG_GLOBAL, upload(pglobal.data(), ps.global_scale));
  if (ws_bytes) {
    hm_launch_params_set_pointer(params, HM_ARG_WORKSPACE, upload(zeros.data(), ws_bytes));
    hm_launch_params_set_int(params, HM_ARG_WORKSPACE_BYTES, static_cast<int64_t>(ws_bytes));
  }
  hm_launch_params_set_int(params, HM_ARG_M, m);
  check(hm_plan_gemm(plan, params, nullptr), "running the GEMM");
  check(hm_stream_synchronize(ctx.c, nullptr), "synchronizing");
  std::vector<uint16_t> c_codes(static_cast<size_t>(m * n));
  check(hm_copy_to_host(ctx.c, c_codes.data(), d_c, c_bytes), "copying C back");
  const int iters = 50;
  auto t7 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) check(hm_plan_gemm(plan, params, nullptr), "running the GEMM");
  check(hm_stream_synchronize(ctx.c, nullptr), "synchronizing");
  auto t8 = std::chrono::steady_clock::now();
  hm_launch_params_destroy(params);
  for (uint64_t p : owned) hm_device_free(ctx.c, p);
  const double err = rel_error(decode16(out_dtype, c_codes), ref);
  const double bound = act == HM_DTYPE_F16 ? 2e-3 : 1.5e-2;
  std::printf("gpu:         %s: %.1f us/call (host clock over %d back-to-back calls, weights in L2)\n",
              dev.name, std::chrono::duration<double, std::micro>(t8 - t7).count() / iters, iters);
  std::printf("check:       rel. Frobenius error vs f64 host reference %.2e (%s output, bound %.0e) -> %s\n",
              err, dtype_name(out_dtype).c_str(), bound, err <= bound ? "OK" : "FAIL");
  std::printf("note:        cuBLAS timing is in benchmarks/cublas_baseline.py (not in this command yet)\n");
  return err <= bound ? 0 : 1;
}

}  // namespace cli
