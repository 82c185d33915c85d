// `humming demo`: the main job end to end — quantize a weight to a format, pack it into the
// standard layout (and check the packing is lossless), compile a kernel through the JIT cache, run
// it on the GPU when there is one and check the result against the f64 host reference.
//
// The quantized GEMM kernels arrive with the dense-GEMM work (issue #4); until then the GPU step
// runs the reference GEMM kernel on the dequantized weights, and the demo says so.
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
struct KernelHandle {
  hm_kernel_t* k = nullptr;
  ~KernelHandle() { hm_kernel_destroy(k); }
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
  std::vector<uint8_t> pw(ps.weight), pscales(ps.scales), pzps(ps.zero_points);
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
  auto w_codes = encode16(act, deq);
  auto w_act = decode16(act, w_codes);
  std::vector<float> ref_f(static_cast<size_t>(m * n));
  auto t3 = std::chrono::steady_clock::now();
  check(hm_reference_gemm_f32(a.data(), w_act.data(), nullptr, ref_f.data(), m, n, k),
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

  auto t5 = std::chrono::steady_clock::now();
  KernelHandle kernel;
  check(hm_kernel_create_reference_gemm(ctx.c, act, out_dtype, &kernel.k), "compiling the kernel");
  auto t6 = std::chrono::steady_clock::now();
  char kname[128];
  check(hm_kernel_name(kernel.k, kname, sizeof kname, nullptr), "naming the kernel");
  std::printf("compile:     %s for %s in %.1f ms (through the kernel cache)\n", kname, dev.arch,
              std::chrono::duration<double, std::milli>(t6 - t5).count());

  if (!gpu) {
    std::printf("gpu:         none found (%s): compiled for %s only; the check above ran on the host\n",
                info.driver_error[0] ? info.driver_error : "no device", dev.arch);
    std::printf("note:        quantized GEMM kernels are not implemented yet (issue #4)\n");
    return 0;
  }

  // 4. Run on the GPU: the reference GEMM on the dequantized weights.
  const size_t a_bytes = a_codes.size() * 2, w_bytes = w_codes.size() * 2;
  const size_t c_bytes = static_cast<size_t>(m * n) * 2;
  uint64_t d_a = 0, d_w = 0, d_c = 0;
  check(hm_device_alloc(ctx.c, a_bytes, &d_a), "allocating A");
  check(hm_device_alloc(ctx.c, w_bytes, &d_w), "allocating W");
  check(hm_device_alloc(ctx.c, c_bytes, &d_c), "allocating C");
  check(hm_copy_to_device(ctx.c, d_a, a_codes.data(), a_bytes), "copying A");
  check(hm_copy_to_device(ctx.c, d_w, w_codes.data(), w_bytes), "copying W");
  hm_launch_params_t* params = nullptr;
  check(hm_launch_params_create(&params), "creating launch params");
  hm_launch_params_set_pointer(params, HM_ARG_A, d_a);
  hm_launch_params_set_pointer(params, HM_ARG_B, d_w);
  hm_launch_params_set_pointer(params, HM_ARG_C, d_c);
  hm_launch_params_set_int(params, HM_ARG_M, m);
  hm_launch_params_set_int(params, HM_ARG_N, n);
  hm_launch_params_set_int(params, HM_ARG_K, k);
  check(hm_kernel_launch(kernel.k, params, nullptr), "launching");
  check(hm_stream_synchronize(ctx.c, nullptr), "synchronizing");
  const int iters = 20;
  auto t7 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) check(hm_kernel_launch(kernel.k, params, nullptr), "launching");
  check(hm_stream_synchronize(ctx.c, nullptr), "synchronizing");
  auto t8 = std::chrono::steady_clock::now();
  std::vector<uint16_t> c_codes(static_cast<size_t>(m * n));
  check(hm_copy_to_host(ctx.c, c_codes.data(), d_c, c_bytes), "copying C back");
  hm_launch_params_destroy(params);
  hm_device_free(ctx.c, d_a);
  hm_device_free(ctx.c, d_w);
  hm_device_free(ctx.c, d_c);
  const double err = rel_error(decode16(out_dtype, c_codes), ref);
  std::printf("gpu:         %s: reference GEMM on dequantized weights, %.1f us/call (host-timed, %d calls)\n",
              dev.name, std::chrono::duration<double, std::micro>(t8 - t7).count() / iters, iters);
  std::printf("check:       rel. Frobenius error vs f64 host reference %.2e (%s output) -> %s\n", err,
              dtype_name(out_dtype).c_str(), err < 1e-2 ? "OK" : "FAIL");
  std::printf("note:        quantized GEMM kernels are not implemented yet (issue #4)\n");
  return err < 1e-2 ? 0 : 1;
}

}  // namespace cli
