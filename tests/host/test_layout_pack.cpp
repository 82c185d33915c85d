// Host pack / unpack of the standard layout (src/quant/layout.*): exact round trips over every
// weight width, activation width and scale kind on ragged shapes, agreement of the fast packer
// with the spec's element mapping, padding, sizes and every rejection.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "quant/layout.hpp"
#include "quant/scalar_codec.hpp"

namespace hm::quant {
namespace {

using core::Dtype;
using core::Format;
using core::ScaleKind;

Format make_format(const std::string& w, const std::string& a, ScaleKind kind, int group_k,
                   int group_n, const std::string& scale, const std::string& zp, int64_t n,
                   int64_t k, int experts) {
  Format f;
  f.weight = Dtype::parse(w);
  f.activation = Dtype::parse(a);
  f.scale_kind = kind;
  f.group_k = group_k;
  f.group_n = group_n;
  f.scale = scale.empty() ? Dtype() : Dtype::parse(scale);
  f.zero_point = zp.empty() ? Dtype() : Dtype::parse(zp);
  f.n = n;
  f.k = k;
  f.experts = experts;
  return f;
}

// Fills `out` with finite values of `dtype` chosen at random (exactly representable by
// construction).
void fill_random_values(Dtype dtype, std::mt19937& rng, std::vector<float>* out) {
  const ScalarCodec codec(dtype);
  for (float& x : *out) {
    do {
      const uint32_t bits = dtype.bits() >= 32 ? rng() : rng() & ((1u << dtype.bits()) - 1u);
      x = codec.decode(bits);
    } while (!std::isfinite(x) || (x == 0 && std::signbit(x)));
  }
}

// Canonical buffers with random contents, and packed buffers with guard bytes after their end.
struct Buffers {
  std::vector<uint8_t> codes;
  std::vector<float> scales, zero_points, global_scale;
  std::vector<uint8_t> weight, packed_scales, packed_zero_points;
  std::vector<float> packed_global;
  static constexpr size_t kGuard = 64;
  static constexpr uint8_t kGuardByte = 0xA5;

  Buffers(const Format& f, uint32_t seed) {
    std::mt19937 rng(seed);
    const CanonicalShape c = canonical_shape(f);
    const PackedShape s = packed_shape(f);
    codes.resize(c.codes);
    for (auto& x : codes) x = uint8_t(rng() & ((1u << f.weight.bits()) - 1u));
    scales.resize(c.scales);
    if (!scales.empty()) fill_random_values(f.scale, rng, &scales);
    zero_points.resize(c.zero_points);
    if (!zero_points.empty()) fill_random_values(f.zero_point, rng, &zero_points);
    global_scale.resize(c.global_scale);
    for (auto& x : global_scale) x = std::ldexp(float(rng() % 1000 + 1), -7);
    weight.assign(s.weight_bytes + kGuard, kGuardByte);
    packed_scales.assign(s.scale_bytes + kGuard, kGuardByte);
    packed_zero_points.assign(s.zero_point_bytes + kGuard, kGuardByte);
    packed_global.assign(c.global_scale + 16, -1.0f);
  }
  ConstCanonicalWeight canonical() const {
    ConstCanonicalWeight w;
    w.codes = codes.data();
    w.scales = scales.empty() ? nullptr : scales.data();
    w.zero_points = zero_points.empty() ? nullptr : zero_points.data();
    w.global_scale = global_scale.empty() ? nullptr : global_scale.data();
    return w;
  }
  PackedWeight packed() {
    PackedWeight w;
    w.weight = weight.data();
    w.scales = packed_scales.data();
    w.zero_points = packed_zero_points.data();
    w.global_scale = packed_global.data();
    return w;
  }
  bool guards_intact(const PackedShape& s) const {
    for (size_t i = 0; i < kGuard; ++i) {
      if (weight[s.weight_bytes + i] != kGuardByte) return false;
      if (packed_scales[s.scale_bytes + i] != kGuardByte) return false;
      if (packed_zero_points[s.zero_point_bytes + i] != kGuardByte) return false;
    }
    return packed_global[s.global_scale_bytes / 4] == -1.0f;
  }
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

// Packs, checks the packed weight element by element against the spec's mapping (padding
// included), unpacks into fresh buffers and compares everything exactly.
void expect_round_trip(const Format& f, uint32_t seed, int threads = 1) {
  SCOPED_TRACE(f.to_string());
  Buffers buf(f, seed);
  const PackedShape s = packed_shape(f);
  pack(f, buf.canonical(), buf.packed(), threads);
  ASSERT_TRUE(buf.guards_intact(s)) << "pack wrote past the sizes it reports";

  const uint32_t pad = (f.weight.kind() == core::DtypeKind::kBiasedUnsignedInt ||
                        f.weight.kind() == core::DtypeKind::kSignedInt)
                           ? 1u << (s.weight_bits - 1)
                           : 0u;
  for (int64_t e = 0; e < s.experts; ++e) {
    for (int64_t n = 0; n < s.n_padded; ++n) {
      for (int64_t k = 0; k < s.k_padded; ++k) {
        const bool real = n < s.n && k < s.k;
        const uint32_t want = real ? buf.codes[(e * s.n + n) * s.k + k] ^ s.code_xor : pad;
        const uint32_t got = packed_code_at(s, buf.weight.data(), e, n, k);
        if (got != want) {
          FAIL() << "packed code at e=" << e << " n=" << n << " k=" << k << " is " << got
                 << ", expected " << want << (real ? "" : " (padding)");
        }
      }
    }
  }

  // Pack is deterministic and writes every byte: a second pack over different garbage agrees.
  Buffers again(f, seed);
  std::fill(again.weight.begin(), again.weight.begin() + s.weight_bytes, 0x3C);
  std::fill(again.packed_scales.begin(), again.packed_scales.begin() + s.scale_bytes, 0x3C);
  std::fill(again.packed_zero_points.begin(), again.packed_zero_points.begin() + s.zero_point_bytes,
            0x3C);
  pack(f, again.canonical(), again.packed(), 2);
  EXPECT_EQ(again.weight, buf.weight);
  EXPECT_EQ(again.packed_scales, buf.packed_scales);
  EXPECT_EQ(again.packed_zero_points, buf.packed_zero_points);

  std::vector<uint8_t> codes(buf.codes.size(), 0xEE);
  std::vector<float> scales(buf.scales.size(), NAN), zps(buf.zero_points.size(), NAN);
  std::vector<float> global(buf.global_scale.size(), NAN);
  CanonicalWeight out;
  out.codes = codes.data();
  out.scales = scales.empty() ? nullptr : scales.data();
  out.zero_points = zps.empty() ? nullptr : zps.data();
  out.global_scale = global.empty() ? nullptr : global.data();
  unpack(f, ConstPackedWeight(buf.packed()), out, threads);
  EXPECT_EQ(codes, buf.codes);
  EXPECT_TRUE(same_bits(scales, buf.scales));
  EXPECT_EQ(zps, buf.zero_points);
  EXPECT_TRUE(same_bits(global, buf.global_scale));
}

const char* const kActivations[] = {"f16", "e4m3", "int4"};

std::vector<std::string> weight_dtypes() {
  std::vector<std::string> out;
  for (int b = 1; b <= 8; ++b) {
    out.push_back("int" + std::to_string(b));
    out.push_back("uint" + std::to_string(b));
    out.push_back("uint" + std::to_string(b) + "b" + std::to_string(1 << (b - 1)));
  }
  for (const char* fl : {"e2m1", "e3m2", "e2m3", "e4m3", "e5m2"}) out.push_back(fl);
  return out;
}

TEST(LayoutPack, RoundTripsEveryWeightAndActivationWidth) {
  uint32_t seed = 1;
  for (const std::string& w : weight_dtypes()) {
    for (const char* a : kActivations) {
      const Format probe = make_format(w, a, ScaleKind::kGroup, 32, 0, "f16", "", 1, 1, 1);
      if (probe.weight.bits() > probe.activation.bits()) continue;
      // int1 (-1, 0) and uint1b1 have no positive value: they exist only unscaled (or with
      // zero points).
      const bool scaled = probe.weight.max_value() > 0;
      // Ragged in every direction: n not a multiple of 16 or 64, k not of 64 nor of the group.
      expect_round_trip(make_format(w, a, scaled ? ScaleKind::kGroup : ScaleKind::kNone, 32, 0,
                                    "f16", "", 70, 100, 1),
                        seed++);
      expect_round_trip(make_format(w, a, scaled ? ScaleKind::kChannel : ScaleKind::kNone, 0, 0,
                                    "bf16", "", 17, 200, 3),
                        seed++);
    }
  }
}

TEST(LayoutPack, RoundTripsEveryScaleKindAndZeroPoint) {
  struct Scales {
    ScaleKind kind;
    int group_k, group_n;
    const char* scale;
  };
  const Scales kinds[] = {
      {ScaleKind::kNone, 0, 0, ""},         {ScaleKind::kChannel, 0, 0, "f16"},
      {ScaleKind::kGroup, 128, 0, "f16"},   {ScaleKind::kGroup, 96, 0, "bf16"},
      {ScaleKind::kGroup, 16, 0, "e4m3"},   {ScaleKind::kGroup, 32, 0, "ue8m0"},
      {ScaleKind::kBlock, 128, 128, "f32"}, {ScaleKind::kBlock, 64, 16, "bf16"},
      {ScaleKind::kTensor, 0, 0, ""},       {ScaleKind::kGroupTensor, 16, 0, "e4m3"},
  };
  uint32_t seed = 1000;
  for (const Scales& sk : kinds) {
    for (const char* w : {"uint4", "int3", "uint8", "e2m1"}) {
      for (const char* zp : {"", "int", "f16"}) {  // "int": unsigned of the weight's width
        Format f = make_format(w, "f16", sk.kind, sk.group_k, sk.group_n, sk.scale, "", 90, 130, 2);
        if (*zp) {
          const bool row_scales = sk.kind != ScaleKind::kNone && sk.kind != ScaleKind::kTensor;
          if (!row_scales || !f.weight.is_integer() || f.scale.code() == HM_DTYPE_UE8M0) continue;
          f.zero_point =
              std::string(zp) == "int" ? Dtype::integer(false, f.weight.bits()) : Dtype::parse(zp);
        }
        const uint32_t sd = seed++;
        expect_round_trip(f, sd, sd % 2 ? 1 : 2);
      }
    }
  }
}

TEST(LayoutPack, PaddedShapesAndSizes) {
  // int4 g128, 4096 x 4096: 8 MiB of weight, 32 groups x 4096 f16 scales.
  Format f = make_format("uint4b8", "f16", ScaleKind::kGroup, 128, 0, "f16", "", 4096, 4096, 1);
  PackedShape s = packed_shape(f);
  EXPECT_EQ(s.n_padded, 4096);
  EXPECT_EQ(s.k_padded, 4096);
  EXPECT_EQ(s.weight_bytes, 4096u * 4096u / 2u);
  EXPECT_EQ(s.groups, 32);
  EXPECT_EQ(s.scale_bytes, 32u * 4096u * 2u);
  EXPECT_EQ(s.zero_point_bytes, 0u);
  EXPECT_EQ(s.global_scale_bytes, 0u);

  // Ragged MoE with zero points: n 100 -> 128, k 100 -> 192 (a multiple of 64 and of 96).
  f = make_format("uint3", "e4m3", ScaleKind::kGroup, 96, 0, "bf16", "uint3", 100, 100, 3);
  s = packed_shape(f);
  EXPECT_EQ(s.n_padded, 128);
  EXPECT_EQ(s.k_padded, 192);
  EXPECT_EQ(s.groups, 2);
  EXPECT_EQ(s.weight_bytes, 3u * 128u * 192u * 3u / 8u);
  EXPECT_EQ(s.scale_bytes, 3u * 2u * 128u * 2u);
  EXPECT_EQ(s.zero_point_bytes, 3u * 2u * 128u * 1u);

  // Block scales: ceil(n_padded / group_n) columns; NVFP4-style group+tensor has a global scale.
  f = make_format("e4m3", "e4m3", ScaleKind::kBlock, 128, 128, "f32", "", 1000, 512, 2);
  s = packed_shape(f);
  EXPECT_EQ(s.n_padded, 1024);
  EXPECT_EQ(s.scale_columns, 8);
  EXPECT_EQ(s.scale_bytes, 2u * 4u * 8u * 4u);
  f = make_format("e2m1", "e2m1", ScaleKind::kGroupTensor, 16, 0, "e4m3", "", 64, 64, 1);
  s = packed_shape(f);
  EXPECT_EQ(s.scale_bytes, 4u * 64u);
  EXPECT_EQ(s.global_scale_bytes, 4u);
  EXPECT_EQ(s.code_xor, 0u);
  EXPECT_EQ(
      packed_shape(make_format("int4", "f16", ScaleKind::kChannel, 0, 0, "f16", "", 64, 64, 1))
          .code_xor,
      8u);
}

// The caller's buffers need no alignment: a packed weight at an odd address holds the same bytes.
TEST(LayoutPack, UnalignedBuffersPackAndUnpackTheSameBytes) {
  const Format f = make_format("uint5", "e4m3", ScaleKind::kChannel, 0, 0, "f16", "", 40, 100, 1);
  Buffers b(f, 21);
  const PackedShape s = packed_shape(f);
  pack(f, b.canonical(), b.packed());
  std::vector<uint8_t> shifted(s.weight_bytes + 1);
  PackedWeight out = b.packed();
  out.weight = shifted.data() + 1;
  pack(f, b.canonical(), out);
  EXPECT_TRUE(std::equal(b.weight.begin(), b.weight.begin() + s.weight_bytes, shifted.begin() + 1));
  std::vector<uint8_t> codes(b.codes.size());
  std::vector<float> scales(b.scales.size());
  CanonicalWeight back;
  back.codes = codes.data();
  back.scales = scales.data();
  unpack(f, ConstPackedWeight(out), back);
  EXPECT_EQ(codes, b.codes);
}

// The scale / zero-point codec behind pack: every f16 code round-trips, and its value is the
// dtype table's; a float between two f16 values is refused rather than rounded.
TEST(LayoutPack, ScalarCodecIsExactForEveryHalfCode) {
  const Dtype f16 = Dtype::parse("f16");
  const ScalarCodec codec(f16);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float x = float_from_half(uint16_t(h));
    if (std::isnan(x)) continue;
    ASSERT_EQ(double(x), f16.decode(h)) << std::hex << h;
    uint32_t code = 0;
    if (std::isinf(x)) {
      EXPECT_EQ(codec.encode_exact(x, &code), ScalarCodec::kNonFinite);
      continue;
    }
    ASSERT_EQ(codec.encode_exact(x, &code), ScalarCodec::kExact) << std::hex << h;
    ASSERT_EQ(code, h);
    if (x != 0 && std::fabs(x) < 65504.0f) {
      uint32_t ignored;
      EXPECT_EQ(codec.encode_exact(std::nextafter(x, 1e9f), &ignored),
                ScalarCodec::kNotRepresentable)
          << std::hex << h;
    }
  }
  const ScalarCodec bf16(Dtype::parse("bf16"));
  uint32_t code = 0;
  EXPECT_EQ(bf16.encode_exact(1.5f, &code), ScalarCodec::kExact);
  EXPECT_EQ(code, 0x3FC0u);
  EXPECT_EQ(bf16.encode_exact(1.0f + 1.0f / 256, &code), ScalarCodec::kNotRepresentable);
  const ScalarCodec ue8m0(Dtype::parse("ue8m0"));
  EXPECT_EQ(ue8m0.encode_exact(0.25f, &code), ScalarCodec::kExact);
  EXPECT_EQ(code, 125u);
  EXPECT_EQ(ue8m0.encode_exact(0.0f, &code), ScalarCodec::kNotRepresentable);
  EXPECT_EQ(ue8m0.encode_exact(-2.0f, &code), ScalarCodec::kNotRepresentable);
  const ScalarCodec uint4(Dtype::parse("uint4"));
  EXPECT_EQ(uint4.encode_exact(15.0f, &code), ScalarCodec::kExact);
  EXPECT_EQ(code, 15u);
  EXPECT_EQ(uint4.encode_exact(16.0f, &code), ScalarCodec::kNotRepresentable);
  EXPECT_EQ(uint4.encode_exact(2.5f, &code), ScalarCodec::kNotRepresentable);
}

// ---- rejections ---------------------------------------------------------------------------

template <typename Body>
void expect_error(hm_status_t status, const std::string& needle, Body body) {
  try {
    body();
    ADD_FAILURE() << "no error; expected status " << status << " mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    EXPECT_NE(e.message().find(needle), std::string::npos) << e.what();
  }
}

TEST(LayoutPack, RejectsFormatsTheLayoutCannotHold) {
  expect_error(HM_ERROR_UNSUPPORTED_FORMAT, "a=f32", [] {
    packed_shape(make_format("uint4", "f32", ScaleKind::kChannel, 0, 0, "f16", "", 64, 64, 1));
  });
  expect_error(HM_ERROR_UNSUPPORTED_FORMAT, "w=int8", [] {
    packed_shape(make_format("int8", "int4", ScaleKind::kChannel, 0, 0, "f16", "", 64, 64, 1));
  });
  expect_error(HM_ERROR_INVALID_ARGUMENT, "shape", [] {
    packed_shape(make_format("int4", "f16", ScaleKind::kChannel, 0, 0, "f16", "", 0, 64, 1));
  });
}

TEST(LayoutPack, RejectsBadCanonicalDataNamingTheElementAndWritesNothing) {
  const Format f = make_format("int4", "f16", ScaleKind::kGroup, 32, 0, "f16", "", 20, 70, 2);
  const PackedShape s = packed_shape(f);
  const CanonicalShape c = canonical_shape(f);
  auto untouched = [&](Buffers& b) {
    for (size_t i = 0; i < s.weight_bytes; ++i)
      if (b.weight[i] != Buffers::kGuardByte) return false;
    for (size_t i = 0; i < s.scale_bytes; ++i)
      if (b.packed_scales[i] != Buffers::kGuardByte) return false;
    return true;
  };
  {
    Buffers b(f, 1);
    b.codes[(1 * 20 + 2) * 70 + 3] = 16;
    expect_error(HM_ERROR_INVALID_ARGUMENT, "in->codes[1][2][3] = 16",
                 [&] { pack(f, b.canonical(), b.packed()); });
    EXPECT_TRUE(untouched(b));
  }
  {
    Buffers b(f, 2);
    b.scales[(0 * c.scale_rows + 5) * c.groups_k + 1] = 0.1f;
    expect_error(HM_ERROR_INVALID_ARGUMENT, "in->scales[0][5][1]",
                 [&] { pack(f, b.canonical(), b.packed()); });
    EXPECT_TRUE(untouched(b));
  }
  {
    Buffers b(f, 3);
    b.scales[(1 * c.scale_rows + 19) * c.groups_k + 2] = INFINITY;
    expect_error(HM_ERROR_NON_FINITE, "in->scales[1][19][2]",
                 [&] { pack(f, b.canonical(), b.packed()); });
    EXPECT_TRUE(untouched(b));
  }
  {
    const Format z =
        make_format("uint4", "f16", ScaleKind::kChannel, 0, 0, "f16", "uint4", 20, 70, 1);
    Buffers b(z, 4);
    b.zero_points[7] = 2.5f;
    expect_error(HM_ERROR_INVALID_ARGUMENT, "in->zero_points[0][7][0]",
                 [&] { pack(z, b.canonical(), b.packed()); });
    b.zero_points[7] = 16.0f;  // an integer, but not a uint4
    expect_error(HM_ERROR_INVALID_ARGUMENT, "in->zero_points[0][7][0]",
                 [&] { pack(z, b.canonical(), b.packed()); });
  }
  {
    const Format g =
        make_format("e2m1", "e4m3", ScaleKind::kGroupTensor, 16, 0, "e4m3", "", 20, 70, 2);
    Buffers b(g, 5);
    b.global_scale[1] = NAN;
    expect_error(HM_ERROR_NON_FINITE, "in->global_scale[1]",
                 [&] { pack(g, b.canonical(), b.packed()); });
  }
}

TEST(LayoutPack, RejectsMissingBuffersByName) {
  const Format f =
      make_format("uint4", "f16", ScaleKind::kGroupTensor, 32, 0, "f16", "uint4", 20, 70, 1);
  Buffers b(f, 9);
  auto try_pack = [&](ConstCanonicalWeight in, PackedWeight out) { pack(f, in, out); };
  ConstCanonicalWeight in = b.canonical();
  PackedWeight out = b.packed();
  in.codes = nullptr;
  expect_error(HM_ERROR_INVALID_ARGUMENT, "in->codes is NULL", [&] { try_pack(in, out); });
  in = b.canonical();
  in.scales = nullptr;
  expect_error(HM_ERROR_INVALID_ARGUMENT, "in->scales is NULL but the format has",
               [&] { try_pack(in, out); });
  in = b.canonical();
  out.zero_points = nullptr;
  expect_error(HM_ERROR_INVALID_ARGUMENT, "out->zero_points is NULL", [&] { try_pack(in, out); });
  out = b.packed();
  out.global_scale = nullptr;
  expect_error(HM_ERROR_INVALID_ARGUMENT, "out->global_scale is NULL", [&] { try_pack(in, out); });
  out = b.packed();
  out.weight = nullptr;
  expect_error(HM_ERROR_INVALID_ARGUMENT, "out->weight is NULL", [&] { try_pack(in, out); });

  CanonicalWeight back;
  std::vector<uint8_t> codes(20 * 70);
  back.codes = codes.data();
  expect_error(HM_ERROR_INVALID_ARGUMENT, "out->scales is NULL",
               [&] { unpack(f, ConstPackedWeight(b.packed()), back); });
}

// Scales that are not row scales need no buffers: a format with only a global scale packs with
// NULL scale pointers.
TEST(LayoutPack, TensorScaleNeedsOnlyTheGlobalScale) {
  const Format f = make_format("e4m3", "e4m3", ScaleKind::kTensor, 0, 0, "", "", 64, 64, 2);
  Buffers b(f, 3);
  PackedWeight out = b.packed();
  out.scales = nullptr;
  out.zero_points = nullptr;
  pack(f, b.canonical(), out);
  EXPECT_EQ(b.packed_global[0], b.global_scale[0]);
  EXPECT_EQ(b.packed_global[1], b.global_scale[1]);
}

}  // namespace
}  // namespace hm::quant
