// The C entry points of the standard layout (src/api/pack.cpp): sizes, a pack/unpack round trip
// through the ABI, and argument checks that name the bad field.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "humming.h"
#include "support/last_error.hpp"

namespace {

using hm::test::last_error;

struct FormatHandle {
  hm_format_t* f = nullptr;
  explicit FormatHandle(const char* text) {
    EXPECT_EQ(hm_format_parse(text, &f), HM_SUCCESS) << last_error();
  }
  ~FormatHandle() { hm_format_destroy(f); }
};

TEST(LayoutApi, InitHelpersSetStructSize) {
  hm_packed_sizes_t sizes;
  std::memset(&sizes, 0xFF, sizeof sizes);
  hm_packed_sizes_init(&sizes);
  EXPECT_EQ(sizes.struct_size, sizeof sizes);
  EXPECT_EQ(sizes.weight, 0u);
  hm_packed_weight_t w;
  std::memset(&w, 0xFF, sizeof w);
  hm_packed_weight_init(&w);
  EXPECT_EQ(w.struct_size, sizeof w);
  EXPECT_EQ(w.weight, nullptr);
  EXPECT_EQ(w.global_scale, nullptr);
  hm_packed_sizes_init(nullptr);  // no-ops
  hm_packed_weight_init(nullptr);
}

TEST(LayoutApi, PackedSizes) {
  FormatHandle f("w=uint4 a=f16 c=f16 s=f16:g128 zp=uint4 n=100 k=300 e=2");
  hm_packed_sizes_t s;
  hm_packed_sizes_init(&s);
  ASSERT_EQ(hm_format_packed_sizes(f.f, &s), HM_SUCCESS) << last_error();
  EXPECT_EQ(s.n_padded, 128);
  EXPECT_EQ(s.k_padded, 384);
  EXPECT_EQ(s.weight, 2u * 128u * 384u / 2u);
  EXPECT_EQ(s.scales, 2u * 3u * 128u * 2u);
  EXPECT_EQ(s.zero_points, 2u * 3u * 128u);
  EXPECT_EQ(s.global_scale, 0u);

  EXPECT_EQ(hm_format_packed_sizes(f.f, nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("'out'"), std::string::npos) << last_error();
  s.struct_size = 4;
  EXPECT_EQ(hm_format_packed_sizes(f.f, &s), HM_ERROR_INVALID_STRUCT_SIZE);
  hm_packed_sizes_init(&s);
  EXPECT_EQ(hm_format_packed_sizes(nullptr, &s), HM_ERROR_INVALID_ARGUMENT);

  FormatHandle wide("w=int8 a=int4 c=f16 s=f16:channel n=64 k=64");
  EXPECT_EQ(hm_format_packed_sizes(wide.f, &s), HM_ERROR_UNSUPPORTED_FORMAT);
  EXPECT_NE(last_error().find("hm_format_packed_sizes"), std::string::npos) << last_error();
}

TEST(LayoutApi, PackUnpackRoundTripAndChecks) {
  FormatHandle f("w=int4 a=f16 c=f16 s=f16:g32 n=40 k=96 e=1");
  hm_canonical_sizes_t cs;
  hm_canonical_sizes_init(&cs);
  ASSERT_EQ(hm_format_canonical_sizes(f.f, &cs), HM_SUCCESS) << last_error();
  hm_packed_sizes_t ps;
  hm_packed_sizes_init(&ps);
  ASSERT_EQ(hm_format_packed_sizes(f.f, &ps), HM_SUCCESS) << last_error();

  std::vector<uint8_t> codes(cs.codes);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = uint8_t((i * 7 + i / 96) % 16);
  std::vector<float> scales(cs.scales);
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = 0.25f * float(i % 9 + 1);
  hm_canonical_weight_t in;
  std::memset(&in, 0, sizeof in);
  in.struct_size = sizeof in;
  in.codes = codes.data();
  in.scales = scales.data();

  std::vector<uint8_t> weight(ps.weight), packed_scales(ps.scales);
  hm_packed_weight_t out;
  hm_packed_weight_init(&out);
  out.weight = weight.data();
  out.scales = packed_scales.data();
  ASSERT_EQ(hm_pack(f.f, &in, &out), HM_SUCCESS) << last_error();

  std::vector<uint8_t> codes_back(cs.codes, 0xFF);
  std::vector<float> scales_back(cs.scales, -1.0f);
  hm_canonical_weight_t back = in;
  back.codes = codes_back.data();
  back.scales = scales_back.data();
  ASSERT_EQ(hm_unpack(f.f, &out, &back), HM_SUCCESS) << last_error();
  EXPECT_EQ(codes_back, codes);
  EXPECT_EQ(scales_back, scales);

  // NULL buffers are named, with the reason.
  hm_packed_weight_t no_scales = out;
  no_scales.scales = nullptr;
  EXPECT_EQ(hm_pack(f.f, &in, &no_scales), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("hm_pack: out->scales is NULL but the format has"), std::string::npos)
      << last_error();
  EXPECT_EQ(hm_pack(f.f, nullptr, &out), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(hm_pack(f.f, &in, nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(hm_pack(nullptr, &in, &out), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(hm_unpack(f.f, &out, nullptr), HM_ERROR_INVALID_ARGUMENT);
  hm_canonical_weight_t small = in;
  small.struct_size = 8;
  EXPECT_EQ(hm_pack(f.f, &small, &out), HM_ERROR_INVALID_STRUCT_SIZE);

  // A code outside int4's 16 codes is named by its index.
  codes[1 * 96 + 5] = 200;
  EXPECT_EQ(hm_pack(f.f, &in, &out), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("in->codes[0][1][5] = 200"), std::string::npos) << last_error();
}

}  // namespace
