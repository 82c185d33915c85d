// hm_converted_layer_stack: experts converted one by one (AutoAWQ tensors here) joined into one
// MoE layer (HM_STACK_EXPERTS) and gate / up joined into gate_up (HM_STACK_ROWS), checked element
// for element against the parts' canonical buffers and against packing (a stacked layer packs to
// the parts' packed buffers end to end, which is what the MoE GEMM reads per expert); and every
// refusal names what differs.
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "test_schema_support.hpp"

namespace {

using namespace schema_test;

struct LayerDeleter {
  void operator()(hm_converted_layer_t* l) const { hm_converted_layer_destroy(l); }
};
using LayerPtr = std::unique_ptr<hm_converted_layer_t, LayerDeleter>;

// The converted layer of `tensors` (which must convert).
LayerPtr converted(int32_t scheme, const std::vector<Tensor>& tensors) {
  const std::vector<hm_checkpoint_tensor_t> c = checkpoint_structs(tensors);
  hm_converted_layer_t* out = nullptr;
  EXPECT_EQ(hm_convert_layer(scheme, c.data(), c.size(), nullptr, &out), HM_SUCCESS)
      << last_error();
  return LayerPtr(out);
}

// An AutoAWQ layer of random words (every nibble is a valid code) with f16 scales per group_k.
LayerPtr awq(int64_t n, int64_t k, int64_t group_k, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t groups = k / group_k;
  std::vector<uint32_t> q(static_cast<size_t>(k * n / 8)), z(static_cast<size_t>(groups * n / 8));
  for (auto& w : q) w = rng();
  for (auto& w : z) w = rng();
  std::vector<double> s(static_cast<size_t>(groups * n));
  for (auto& v : s)
    v = round_to(HM_DTYPE_F16, std::uniform_real_distribution<double>(1e-3, 0.03)(rng));
  const std::vector<Tensor> t = {
      make_tensor("model.layers.0.mlp.experts.0.up_proj.qweight", "I32", {k, n / 8}, q),
      make_tensor("model.layers.0.mlp.experts.0.up_proj.qzeros", "I32", {groups, n / 8}, z),
      f16_tensor("model.layers.0.mlp.experts.0.up_proj.scales", {groups, n}, s)};
  return converted(HM_SCHEME_AWQ, t);
}

LayerPtr stack(const std::vector<const hm_converted_layer_t*>& parts, int32_t axis,
               hm_status_t expect = HM_SUCCESS) {
  hm_converted_layer_t* out = nullptr;
  EXPECT_EQ(hm_converted_layer_stack(parts.data(), parts.size(), axis, &out), expect)
      << last_error();
  return LayerPtr(out);
}

std::string format_of(const hm_converted_layer_t* l) {
  hm_format_t* f = nullptr;
  EXPECT_EQ(hm_converted_layer_format(l, &f), HM_SUCCESS) << last_error();
  char text[256] = {};
  EXPECT_EQ(hm_format_to_string(f, text, sizeof text, nullptr), HM_SUCCESS);
  hm_format_destroy(f);
  return text;
}

// A layer's canonical buffers as vectors (element counts from its format).
struct Canonical {
  std::vector<uint8_t> codes;
  std::vector<float> scales, zeros;
};
Canonical canonical(const hm_converted_layer_t* l) {
  hm_format_t* f = nullptr;
  EXPECT_EQ(hm_converted_layer_format(l, &f), HM_SUCCESS) << last_error();
  hm_canonical_sizes_t cs;
  hm_canonical_sizes_init(&cs);
  EXPECT_EQ(hm_format_canonical_sizes(f, &cs), HM_SUCCESS) << last_error();
  hm_format_destroy(f);
  hm_converted_layer_info_t info;
  hm_converted_layer_info_init(&info);
  EXPECT_EQ(hm_converted_layer_info(l, &info), HM_SUCCESS) << last_error();
  Canonical c;
  c.codes.assign(info.weight.codes, info.weight.codes + cs.codes);
  c.scales.assign(info.weight.scales, info.weight.scales + cs.scales);
  c.zeros.assign(info.weight.zero_points, info.weight.zero_points + cs.zero_points);
  return c;
}

// hm_pack of a converted layer: its packed weight, scales and zero points, end to end.
std::vector<uint8_t> packed(const hm_converted_layer_t* l) {
  hm_format_t* f = nullptr;
  EXPECT_EQ(hm_converted_layer_format(l, &f), HM_SUCCESS) << last_error();
  hm_packed_sizes_t ps;
  hm_packed_sizes_init(&ps);
  EXPECT_EQ(hm_format_packed_sizes(f, &ps), HM_SUCCESS) << last_error();
  std::vector<uint8_t> w(ps.weight), s(ps.scales), z(ps.zero_points);
  hm_packed_weight_t pw;
  hm_packed_weight_init(&pw);
  pw.weight = w.data();
  pw.scales = s.data();
  pw.zero_points = z.data();
  hm_converted_layer_info_t info;
  hm_converted_layer_info_init(&info);
  EXPECT_EQ(hm_converted_layer_info(l, &info), HM_SUCCESS) << last_error();
  EXPECT_EQ(hm_pack(f, &info.weight, &pw), HM_SUCCESS) << last_error();
  hm_format_destroy(f);
  std::vector<uint8_t> all = w;
  all.insert(all.end(), s.begin(), s.end());
  all.insert(all.end(), z.begin(), z.end());
  return all;
}

TEST(StackConverted, ExpertsJoinInOrderAndPackLikeTheirParts) {
  const int64_t n = 64, k = 256;
  std::vector<LayerPtr> experts;
  for (uint32_t e = 0; e < 3; ++e) experts.push_back(awq(n, k, 128, 90 + e));
  const LayerPtr moe = stack({experts[0].get(), experts[1].get(), experts[2].get()},
                             HM_STACK_EXPERTS);
  ASSERT_NE(moe, nullptr);
  const std::string one = format_of(experts[0].get());
  const std::string three = format_of(moe.get());
  EXPECT_NE(three.find(" e=3"), std::string::npos) << three;
  EXPECT_EQ(three.substr(0, three.find(" e=")), one.substr(0, one.find(" e="))) << three;
  const Canonical all = canonical(moe.get());
  Canonical want;
  for (const LayerPtr& x : experts) {
    const Canonical c = canonical(x.get());
    want.codes.insert(want.codes.end(), c.codes.begin(), c.codes.end());
    want.scales.insert(want.scales.end(), c.scales.begin(), c.scales.end());
    want.zeros.insert(want.zeros.end(), c.zeros.begin(), c.zeros.end());
  }
  EXPECT_EQ(all.codes, want.codes);
  EXPECT_EQ(all.scales, want.scales);
  EXPECT_EQ(all.zeros, want.zeros);
  // Packed, expert e of the stack is expert e's own packing: weights, then scales, then zero
  // points, each [E][...] (docs/layout.md), as the MoE GEMM steps through them per expert.
  hm_format_t* f = nullptr;
  ASSERT_EQ(hm_converted_layer_format(experts[0].get(), &f), HM_SUCCESS);
  hm_packed_sizes_t ps;
  hm_packed_sizes_init(&ps);
  ASSERT_EQ(hm_format_packed_sizes(f, &ps), HM_SUCCESS);
  hm_format_destroy(f);
  const std::vector<uint8_t> joined = packed(moe.get());
  ASSERT_EQ(joined.size(), 3 * (ps.weight + ps.scales + ps.zero_points));
  for (size_t e = 0; e < 3; ++e) {
    const std::vector<uint8_t> own = packed(experts[e].get());
    const uint64_t parts[3][2] = {{0, ps.weight},
                                  {ps.weight, ps.scales},
                                  {ps.weight + ps.scales, ps.zero_points}};
    for (const auto& [offset, bytes] : parts)
      EXPECT_EQ(0, std::memcmp(joined.data() + 3 * offset + e * bytes, own.data() + offset, bytes))
          << "expert " << e << ", buffer at " << offset;
  }
  // Stacked layers stack again (E adds up).
  const LayerPtr four = stack({moe.get(), experts[0].get()}, HM_STACK_EXPERTS);
  ASSERT_NE(four, nullptr);
  EXPECT_NE(format_of(four.get()).find(" e=4"), std::string::npos);
}

TEST(StackConverted, RowsJoinGateAndUpExpertByExpert) {
  const int64_t n = 64, k = 256, e = 2;
  std::vector<LayerPtr> gates, ups;
  for (uint32_t i = 0; i < e; ++i) {
    gates.push_back(awq(n, k, 128, 100 + i));
    ups.push_back(awq(n, k, 128, 200 + i));
  }
  const LayerPtr gate = stack({gates[0].get(), gates[1].get()}, HM_STACK_EXPERTS);
  const LayerPtr up = stack({ups[0].get(), ups[1].get()}, HM_STACK_EXPERTS);
  const LayerPtr gate_up = stack({gate.get(), up.get()}, HM_STACK_ROWS);
  ASSERT_NE(gate_up, nullptr);
  const std::string text = format_of(gate_up.get());
  EXPECT_NE(text.find(" n=128 k=256 e=2"), std::string::npos) << text;
  const Canonical c = canonical(gate_up.get());
  const int64_t groups = k / 128;
  for (int64_t x = 0; x < e; ++x) {
    const Canonical g = canonical(gates[x].get()), u = canonical(ups[x].get());
    for (int64_t r = 0; r < 2 * n; ++r) {
      const Canonical& src = r < n ? g : u;
      const int64_t sr = r % n;
      EXPECT_EQ(0, std::memcmp(&c.codes[(x * 2 * n + r) * k], &src.codes[sr * k], k))
          << "expert " << x << " row " << r;
      for (int64_t j = 0; j < groups; ++j) {
        EXPECT_EQ(c.scales[(x * 2 * n + r) * groups + j], src.scales[sr * groups + j]);
        EXPECT_EQ(c.zeros[(x * 2 * n + r) * groups + j], src.zeros[sr * groups + j]);
      }
    }
  }
}

TEST(StackConverted, RefusalsNameWhatDiffers) {
  const LayerPtr a = awq(64, 256, 128, 1), b = awq(64, 256, 64, 2), c = awq(32, 256, 128, 3);
  // Another group size: not one format.
  stack({a.get(), b.get()}, HM_STACK_EXPERTS, HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("layer 1 has the format"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("g64"), std::string::npos) << last_error();
  // Another N: fine for rows, not for experts.
  stack({a.get(), c.get()}, HM_STACK_EXPERTS, HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("in more than e"), std::string::npos) << last_error();
  const LayerPtr rows = stack({a.get(), c.get()}, HM_STACK_ROWS);
  ASSERT_NE(rows, nullptr);
  EXPECT_NE(format_of(rows.get()).find(" n=96 "), std::string::npos);
  // Another E: not for rows.
  const LayerPtr two = stack({a.get(), a.get()}, HM_STACK_EXPERTS);
  stack({two.get(), a.get()}, HM_STACK_ROWS, HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("in more than n"), std::string::npos) << last_error();
  // The call's own arguments.
  stack({a.get()}, HM_STACK_EXPERTS, HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("at least two"), std::string::npos) << last_error();
  stack({a.get(), nullptr}, HM_STACK_EXPERTS, HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("layer 1 is NULL"), std::string::npos) << last_error();
  stack({a.get(), b.get()}, 7, HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("HM_STACK_EXPERTS or HM_STACK_ROWS"), std::string::npos)
      << last_error();
  hm_converted_layer_t* out = reinterpret_cast<hm_converted_layer_t*>(1);
  EXPECT_EQ(hm_converted_layer_stack(nullptr, 2, HM_STACK_EXPERTS, &out), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(out, nullptr);
  const hm_converted_layer_t* both[] = {a.get(), a.get()};
  EXPECT_EQ(hm_converted_layer_stack(both, 2, HM_STACK_EXPERTS, nullptr), HM_ERROR_INVALID_ARGUMENT);
}

// NVFP4 (ModelOpt): one global scale per layer. Joining rows of layers whose globals differ would
// need two per expert; refused, naming both. Equal globals join.
TEST(StackConverted, RowsNeedOneGlobalScalePerExpert) {
  auto nvfp4 = [](float global, uint32_t seed) {
    std::mt19937 rng(seed);
    const int64_t n = 48, k = 128;
    std::vector<uint8_t> w(static_cast<size_t>(n * k / 2)), s(static_cast<size_t>(n * k / 16));
    for (auto& x : w) x = static_cast<uint8_t>(rng());
    for (auto& x : s) x = static_cast<uint8_t>(std::uniform_int_distribution<int>(0x08, 0x7e)(rng));
    const std::vector<Tensor> t = {make_tensor("m.weight", "U8", {n, k / 2}, w),
                                   make_tensor("m.weight_scale", "F8_E4M3", {n, k / 16}, s),
                                   f32_tensor("m.weight_scale_2", {}, {global})};
    return converted(HM_SCHEME_NVFP4, t);
  };
  const LayerPtr a = nvfp4(0.5f, 1), b = nvfp4(0.25f, 2), c = nvfp4(0.5f, 3);
  stack({a.get(), b.get()}, HM_STACK_ROWS, HM_ERROR_UNSUPPORTED);
  EXPECT_NE(last_error().find("global scale of expert 0"), std::string::npos) << last_error();
  const LayerPtr ok = stack({a.get(), c.get()}, HM_STACK_ROWS);
  EXPECT_NE(ok, nullptr);
  // Experts keep their own globals.
  EXPECT_NE(stack({a.get(), b.get()}, HM_STACK_EXPERTS), nullptr);
}

}  // namespace
