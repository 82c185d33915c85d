// FP4 checkpoints: ModelOpt NVFP4 (global multiplies), compressed-tensors nvfp4-pack-quantized
// (global divides; both conventions tested in both directions), and gpt-oss MXFP4 experts with
// e8m0 scales, bias and the optional gate/up de-interleaving.
#include <algorithm>

#include "test_schema_support.hpp"

namespace {

using namespace schema_test;

double e2m1(uint32_t code) { return decode(HM_DTYPE_E2M1, code); }

// codes [rows][k] -> uint8 [rows][k/2], even k in the low nibble.
std::vector<uint8_t> pack_fp4(const std::vector<uint8_t>& codes) {
  std::vector<uint8_t> out(codes.size() / 2);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<uint8_t>(codes[2 * i] | (codes[2 * i + 1] << 4));
  return out;
}

struct Nvfp4 {
  int64_t n = 48, k = 128;
  std::vector<uint8_t> codes, scales;  // [N][K], e4m3 [N][K/16]
};

Nvfp4 make_nvfp4(uint32_t seed) {
  std::mt19937 rng(seed);
  Nvfp4 l;
  l.codes.resize(static_cast<size_t>(l.n * l.k));
  for (auto& c : l.codes) c = rng() & 15u;
  l.scales.resize(static_cast<size_t>(l.n * l.k / 16));
  for (auto& s : l.scales)
    s = static_cast<uint8_t>(
        std::uniform_int_distribution<int>(0x08, 0x7e)(rng));  // positive, finite
  return l;
}

// A ModelOpt NVFP4 layer's tensors: the packed codes, the e4m3 block scales and `global`
// (weight_scale_2).
std::vector<Tensor> modelopt_tensors(const Nvfp4& l, const Tensor& global) {
  return {make_tensor("m.weight", "U8", {l.n, l.k / 2}, pack_fp4(l.codes)),
          make_tensor("m.weight_scale", "F8_E4M3", {l.n, l.k / 16}, l.scales), global};
}

std::vector<float> nvfp4_reference(const Nvfp4& l, double global, bool divide) {
  std::vector<float> ref(l.codes.size());
  for (int64_t r = 0; r < l.n; ++r)
    for (int64_t i = 0; i < l.k; ++i) {
      const double v =
          e2m1(l.codes[r * l.k + i]) * decode(HM_DTYPE_E4M3, l.scales[r * (l.k / 16) + i / 16]);
      ref[r * l.k + i] = f32(divide ? v / global : v * global);
    }
  return ref;
}

TEST(Nvfp4Convert, ModelOptMultipliesTheGlobalScale) {
  const Nvfp4 l = make_nvfp4(60);
  const double g = f32(0.000173);
  std::vector<Tensor> t = modelopt_tensors(l, f32_tensor("m.weight_scale_2", {}, {g}));
  t.push_back(f32_tensor("m.input_scale", {}, {0.5}));
  Converted out = convert(HM_SCHEME_NVFP4, t);
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  EXPECT_EQ(out.weight_dtype, HM_DTYPE_E2M1);
  EXPECT_EQ(out.scale_kind, HM_SCALE_GROUP_TENSOR);
  EXPECT_EQ(out.scale_dtype, HM_DTYPE_E4M3);
  EXPECT_EQ(out.group_k, 16);
  expect_bitwise(out.weight, nvfp4_reference(l, g, false), out.format);

  // Also servable with e2m1 activations (W4A4).
  hm_convert_options_t options;
  hm_convert_options_init(&options);
  options.activation = HM_DTYPE_E2M1;
  out = convert(HM_SCHEME_NVFP4, t, &options);
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;

  // The other direction: asked to divide, it divides.
  options.activation = HM_DTYPE_NONE;
  options.global_scale_convention = HM_GLOBAL_SCALE_DIVIDE;
  out = convert(HM_SCHEME_NVFP4, t, &options);
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  expect_within_ulps(out.weight, nvfp4_reference(l, g, true), 1, out.format);
}

TEST(Nvfp4Convert, CompressedTensorsDividesByTheGlobalScale) {
  const Nvfp4 l = make_nvfp4(61);
  for (double gs :
       {448.0 * 6.0 / 3.7, 1024.0}) {  // a general value (1/gs rounds) and a power of two
    const std::vector<Tensor> t = {
        make_tensor("m.weight_packed", "U8", {l.n, l.k / 2}, pack_fp4(l.codes)),
        make_tensor("m.weight_scale", "F8_E4M3", {l.n, l.k / 16}, l.scales),
        f32_tensor("m.weight_global_scale", {1}, {f32(gs)}),
        f32_tensor("m.input_global_scale", {1}, {100.0})};
    Converted out = convert(HM_SCHEME_CT_NVFP4, t);
    ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
    const std::vector<float> ref = nvfp4_reference(l, f32(gs), true);
    if (gs == 1024.0)
      expect_bitwise(out.weight, ref, out.format);
    else
      expect_within_ulps(out.weight, ref, 1, out.format);

    // And the ModelOpt direction when asked.
    hm_convert_options_t options;
    hm_convert_options_init(&options);
    options.global_scale_convention = HM_GLOBAL_SCALE_MULTIPLY;
    out = convert(HM_SCHEME_CT_NVFP4, t, &options);
    ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
    expect_bitwise(out.weight, nvfp4_reference(l, f32(gs), false), out.format);
  }
}

// With 8-bit activations NVFP4's e4m3 scales per 16 k have no exact kernel path (too small a
// group to fold between MMA steps; e2m1 times an e4m3 scale needs up to 6 significant bits), so
// the weights become the activation's 8-bit type with f32 channel scales: a power of two putting
// the row's largest |w| at or below the type's top (float types), or largest / 127 (int8); each
// weight rounded once to nearest even, within half a step of the checkpoint's value, and the
// loss is counted in the layer's note.
TEST(Nvfp4Convert, EightBitActivationsTakeChannelScaledEightBitWeights) {
  const Nvfp4 l = make_nvfp4(63);
  const double g = f32(0.000173);
  const std::vector<Tensor> t = modelopt_tensors(l, f32_tensor("m.weight_scale_2", {}, {g}));
  for (hm_dtype_t act : {HM_DTYPE_E4M3, HM_DTYPE_E5M2, HM_DTYPE_INT8}) {
    hm_convert_options_t options;
    hm_convert_options_init(&options);
    options.activation = act;
    const Converted out = convert(HM_SCHEME_NVFP4, t, &options);
    ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
    EXPECT_EQ(out.weight_dtype, act) << out.format;
    EXPECT_EQ(out.scale_kind, HM_SCALE_CHANNEL) << out.format;
    EXPECT_EQ(out.scale_dtype, HM_DTYPE_F32) << out.format;
    const double top_code = act == HM_DTYPE_INT8 ? 127.0 : act == HM_DTYPE_E4M3 ? 448.0 : 57344.0;
    int64_t changed = 0;
    for (int64_t r = 0; r < l.n; ++r) {
      std::vector<double> v(static_cast<size_t>(l.k));
      double top = 0;
      for (int64_t i = 0; i < l.k; ++i) {
        v[i] = e2m1(l.codes[r * l.k + i]) *
               decode(HM_DTYPE_E4M3, l.scales[r * (l.k / 16) + i / 16]) * g;
        top = std::max(top, std::fabs(v[i]));
      }
      const double c = act == HM_DTYPE_INT8
                           ? static_cast<double>(f32(top / 127.0))
                           : std::ldexp(1.0, static_cast<int>(std::ceil(std::log2(top / top_code))));
      for (int64_t i = 0; i < l.k; ++i) {
        uint32_t code = 0;
        double q = 0;
        ASSERT_EQ(hm_dtype_encode(act, v[i] / c, &code), HM_SUCCESS);
        ASSERT_EQ(hm_dtype_decode(act, code, &q), HM_SUCCESS);
        const double got = out.weight[r * l.k + i];
        EXPECT_EQ(got, f32(q * c)) << "row " << r << " k " << i << " of " << out.format;
        // Within half a step of the value: 2^-4 relative (e4m3) or 2^-3 (e5m2) above the type's
        // subnormals, half a code times c for int8 and below the normals.
        const double step = act == HM_DTYPE_INT8 ? c
                            : act == HM_DTYPE_E4M3 ? std::max(std::fabs(v[i]) / 8, c * std::ldexp(1.0, -9))
                                                   : std::max(std::fabs(v[i]) / 4, c * std::ldexp(1.0, -16));
        // (plus the f32 rounding of the dequantized value itself)
        EXPECT_LE(std::fabs(got - v[i]), step / 2 + std::fabs(got) * std::ldexp(1.0, -23))
            << "row " << r << " k " << i;
        changed += f32(q * c) != f32(v[i]);
      }
    }
    EXPECT_GT(changed, 0) << "random NVFP4 blocks lose bits in 8 bits";
    EXPECT_NE(out.note.find("weights were re-rounded"), std::string::npos) << out.note;
  }
}

TEST(Nvfp4Convert, UnequalShardGlobalsAreRefused) {
  const Nvfp4 l = make_nvfp4(62);
  const Converted out = convert(
      HM_SCHEME_NVFP4, modelopt_tensors(l, f32_tensor("m.weight_scale_2", {2}, {0.5, 0.25})));
  EXPECT_EQ(out.status, HM_ERROR_UNSUPPORTED);
  EXPECT_NE(out.error.find("weight_scale_2"), std::string::npos) << out.error;
}

// ---------------------------------------------------------------------------------------------
// MXFP4 (gpt-oss)

struct Mxfp4 {
  int64_t e = 3, n = 32, k = 128;  // n = 2 * intermediate for gate_up
  std::vector<uint8_t> codes, scales;
  std::vector<double> bias;
};

Mxfp4 make_mxfp4(uint32_t seed) {
  std::mt19937 rng(seed);
  Mxfp4 m;
  m.codes.resize(static_cast<size_t>(m.e * m.n * m.k));
  for (auto& c : m.codes) c = rng() & 15u;
  m.scales.resize(static_cast<size_t>(m.e * m.n * m.k / 32));
  for (auto& s : m.scales)
    s = static_cast<uint8_t>(std::uniform_int_distribution<int>(110, 135)(rng));
  m.bias.resize(static_cast<size_t>(m.e * m.n));
  for (auto& b : m.bias)
    b = round_to(HM_DTYPE_BF16, std::uniform_real_distribution<double>(-1, 1)(rng));
  return m;
}

std::vector<Tensor> mxfp4_tensors(const Mxfp4& m) {
  return {make_tensor("model.layers.0.mlp.experts.gate_up_proj_blocks", "U8",
                      {m.e, m.n, m.k / 32, 16}, pack_fp4(m.codes)),
          make_tensor("model.layers.0.mlp.experts.gate_up_proj_scales", "U8", {m.e, m.n, m.k / 32},
                      m.scales),
          f16_tensor("model.layers.0.mlp.experts.gate_up_proj_bias", {m.e, m.n}, m.bias,
                     HM_DTYPE_BF16)};
}

double mxfp4_value(const Mxfp4& m, int64_t row, int64_t i) {  // row over [E * N]
  return e2m1(m.codes[row * m.k + i]) * std::ldexp(1.0, m.scales[row * (m.k / 32) + i / 32] - 127);
}

TEST(Mxfp4Convert, ExpertsWithBias) {
  const Mxfp4 m = make_mxfp4(70);
  const Converted out = convert(HM_SCHEME_MXFP4, mxfp4_tensors(m));
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  EXPECT_EQ(out.experts, m.e);
  EXPECT_EQ(out.scale_dtype, HM_DTYPE_UE8M0);
  EXPECT_EQ(out.group_k, 32);
  EXPECT_EQ(out.activation, HM_DTYPE_BF16) << "ue8m0 scales need bf16's range";
  std::vector<float> ref(m.codes.size()), bias(m.bias.begin(), m.bias.end());
  for (int64_t r = 0; r < m.e * m.n; ++r)
    for (int64_t i = 0; i < m.k; ++i) ref[r * m.k + i] = f32(mxfp4_value(m, r, i));
  expect_bitwise(out.weight, ref, out.format);
  expect_bitwise(out.bias, bias, "bias");
}

TEST(Mxfp4Convert, SplitGateUpDeinterleavesRows) {
  const Mxfp4 m = make_mxfp4(71);
  hm_convert_options_t options;
  hm_convert_options_init(&options);
  options.flags = HM_CONVERT_SPLIT_GATE_UP;
  const Converted out = convert(HM_SCHEME_MXFP4, mxfp4_tensors(m), &options);
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  // Row r < N/2 is gate row r (checkpoint row 2r); row N/2 + r is up row r (checkpoint row 2r+1).
  std::vector<float> ref(m.codes.size()), bias(m.bias.size());
  for (int64_t x = 0; x < m.e; ++x)
    for (int64_t r = 0; r < m.n; ++r) {
      const int64_t src = x * m.n + (r < m.n / 2 ? 2 * r : 2 * (r - m.n / 2) + 1);
      for (int64_t i = 0; i < m.k; ++i) ref[(x * m.n + r) * m.k + i] = f32(mxfp4_value(m, src, i));
      bias[x * m.n + r] = f32(m.bias[src]);
    }
  expect_bitwise(out.weight, ref, out.format);
  expect_bitwise(out.bias, bias, "bias");
}

// With 8-bit activations the e8m0 group scales become group x tensor scales inside the kernel's
// exponent window (core::scale_exponent_window; `width` exponents: e4m3 [2^-5, 2^6], 12; int8
// [2^0, 2^3], 4): an expert whose group exponents span at most the window converts exactly (the
// global scale takes the difference); one that spans more has its lowest groups raised to the
// window's bottom and their codes re-rounded.
void expect_scales_fold_into_the_window(hm_dtype_t act, int width, const char* act_name) {
  Mxfp4 m = make_mxfp4(73);
  std::mt19937 rng(74);
  // Expert 0: exponents 118..129 (12 values, exact). Expert 1: 100..135, wider than the window.
  // Expert 2: all groups of row 0 zero-coded with a huge scale, which must not move the window.
  const int64_t groups = m.k / 32;
  for (int64_t x = 0; x < m.e; ++x)
    for (int64_t i = 0; i < m.n * groups; ++i)
      m.scales[x * m.n * groups + i] = static_cast<uint8_t>(
          x == 1 ? std::uniform_int_distribution<int>(100, 135)(rng)
                 : std::uniform_int_distribution<int>(118, 129)(rng));
  for (int64_t i = 0; i < m.k; ++i) m.codes[2 * m.n * m.k + i] = (i & 1) ? 8 : 0;  // +-0
  for (int64_t g = 0; g < groups; ++g) m.scales[2 * m.n * groups + g] = 200;
  hm_convert_options_t options;
  hm_convert_options_init(&options);
  options.activation = act;
  const Converted out = convert(HM_SCHEME_MXFP4, mxfp4_tensors(m), &options);
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  EXPECT_EQ(out.scale_kind, HM_SCALE_GROUP_TENSOR) << out.format;
  EXPECT_EQ(out.scale_dtype, HM_DTYPE_UE8M0);
  EXPECT_EQ(out.activation, act);
  std::vector<float> ref(m.codes.size());
  int64_t raised = 0;
  for (int64_t x = 0; x < m.e; ++x) {
    int top = INT32_MIN;  // the expert's largest exponent among groups with a nonzero code
    for (int64_t r = 0; r < m.n; ++r)
      for (int64_t g = 0; g < groups; ++g) {
        bool any = false;
        for (int64_t i = g * 32; i < (g + 1) * 32; ++i) any |= (m.codes[(x * m.n + r) * m.k + i] & 7) != 0;
        if (any) top = std::max(top, m.scales[(x * m.n + r) * groups + g] - 127);
      }
    const int bottom = top - (width - 1);
    for (int64_t r = 0; r < m.n; ++r)
      for (int64_t i = 0; i < m.k; ++i) {
        const int64_t row = x * m.n + r;
        const int e = m.scales[row * groups + i / 32] - 127;
        double v = e2m1(m.codes[row * m.k + i]);
        if (e < bottom && v != 0.0) {  // re-rounded at the window's bottom
          v = round_to(HM_DTYPE_E2M1, std::ldexp(v, e - bottom));
          ref[row * m.k + i] = f32(std::ldexp(v, bottom));
          ++raised;
        } else {
          ref[row * m.k + i] = f32(std::ldexp(v, e));
        }
      }
  }
  EXPECT_GT(raised, 0) << "expert 1 spans more than the window";
  expect_bitwise(out.weight, ref, out.format);
  // The loss is reported with the layer; a lossless conversion has no note.
  EXPECT_NE(out.note.find(std::string("scale groups lay below the ") + act_name +
                          " exponent window"),
            std::string::npos)
      << out.note;
  const Converted plain = convert(HM_SCHEME_MXFP4, mxfp4_tensors(m));
  ASSERT_EQ(plain.status, HM_SUCCESS) << plain.error;
  EXPECT_EQ(plain.note, "");
}

TEST(Mxfp4Convert, E4m3ActivationsFoldTheScalesIntoTheExponentWindow) {
  expect_scales_fold_into_the_window(HM_DTYPE_E4M3, 12, "e4m3");
}

// int8 activations (MXFP4 -> INT8): the same fold into a window of 4 exponents, where the kernel
// shifts the weights' counts of half steps (12 << 3 = 96 fits an int8 lane).
TEST(Mxfp4Convert, Int8ActivationsFoldTheScalesIntoTheirNarrowerWindow) {
  expect_scales_fold_into_the_window(HM_DTYPE_INT8, 4, "int8");
}

TEST(Mxfp4Convert, NanScaleIsRefused) {
  Mxfp4 m = make_mxfp4(72);
  m.scales[5] = 0xff;
  const Converted out = convert(HM_SCHEME_MXFP4, mxfp4_tensors(m));
  EXPECT_EQ(out.status, HM_ERROR_NON_FINITE);
  EXPECT_NE(out.error.find("gate_up_proj_scales"), std::string::npos) << out.error;
}

}  // namespace
