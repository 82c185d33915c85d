// Size limits (issue 16): every size the C ABI computes fits its type. Shapes beyond the limits
// in humming.h (HM_MAX_N, HM_MAX_K, HM_MAX_EXPERTS, HM_MAX_M) are refused by the validation rules
// and by every size function, instead of wrapping into a small size that a caller then allocates
// and hm_pack overflows.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "humming.h"
#include "support/last_error.hpp"

namespace {

using hm::test::last_error;

struct Format {
  explicit Format(const std::string& text) {
    EXPECT_EQ(hm_format_parse(text.c_str(), &f), HM_SUCCESS) << text << ": " << last_error();
  }
  ~Format() { hm_format_destroy(f); }
  hm_format_t* f = nullptr;
};

hm_status_t packed_sizes(const Format& format, hm_packed_sizes_t* s) {
  hm_packed_sizes_init(s);
  return hm_format_packed_sizes(format.f, s);
}

hm_status_t canonical_sizes(const Format& format, hm_canonical_sizes_t* s) {
  hm_canonical_sizes_init(s);
  return hm_format_canonical_sizes(format.f, s);
}

// The issue's format: group size 2043931472 pads K to 4 x 2043931472, and 17627204 experts of
// that wrapped to 81920 bytes.
const char kIssueFormat[] = "w=uint8b128 a=f16 c=f16 s=f16:g2043931472 n=1 k=1 e=17627204";

TEST(SizeLimits, TheIssuesFormatIsRefusedByValidationAndBySizeQueries) {
  const Format f(kIssueFormat);
  EXPECT_EQ(hm_format_validate(f.f, nullptr), HM_ERROR_UNSUPPORTED_FORMAT);
  EXPECT_NE(last_error().find("R2"), std::string::npos) << last_error();
  hm_packed_sizes_t s;
  EXPECT_EQ(packed_sizes(f, &s), HM_ERROR_INVALID_ARGUMENT) << "weight bytes " << s.weight;
  EXPECT_NE(last_error().find("e=17627204 (limit 4096)"), std::string::npos) << last_error();
}

// hm_pack of canonical codes and scales into a packed weight and packed scales.
hm_status_t pack(const Format& f, uint8_t* codes, float* scales, void* weight,
                 void* packed_scales) {
  hm_canonical_weight_t in;
  hm_canonical_weight_init(&in);
  in.codes = codes;
  in.scales = scales;
  hm_packed_weight_t out;
  hm_packed_weight_init(&out);
  out.weight = weight;
  out.scales = packed_scales;
  return hm_pack(f.f, &in, &out);
}

TEST(SizeLimits, PackRefusesWhatItCannotSize) {
  // hm_pack trusted packed_shape: with the wrapped size it wrote past the caller's buffers.
  const Format f(kIssueFormat);
  std::vector<uint8_t> codes(64), packed(1 << 17);
  std::vector<float> scales(64);
  EXPECT_EQ(pack(f, codes.data(), scales.data(), packed.data(), packed.data()),
            HM_ERROR_INVALID_ARGUMENT)
      << last_error();
}

TEST(SizeLimits, PackWithBuffersOfTheReportedSizesStaysInThem) {
  // What a careful caller does: canonical and packed buffers of exactly the reported sizes. With
  // the wrapped packed size, hm_pack wrote far past the packed buffers.
  const Format f(kIssueFormat);
  hm_canonical_sizes_t c;
  hm_packed_sizes_t p;
  if (canonical_sizes(f, &c) != HM_SUCCESS || packed_sizes(f, &p) != HM_SUCCESS) {
    SUCCEED() << "refused by the size queries: " << last_error();
    return;
  }
  ASSERT_LT(c.codes + 4 * c.scales, uint64_t{1} << 30) << "the test would need too much memory";
  std::vector<uint8_t> codes(c.codes), weight(p.weight), packed_scales(p.scales);
  std::vector<float> scales(c.scales, 1.0f);
  EXPECT_NE(pack(f, codes.data(), scales.data(), weight.data(), packed_scales.data()), HM_SUCCESS)
      << "sizes " << p.weight << ", " << p.scales;
}

TEST(SizeLimits, HugeShapesNeverWrap) {
  for (const char* text : {
           "w=uint4b8 a=f16 c=f16 s=f16:g128 n=1099511627776 k=1099511627776",
           "w=uint4b8 a=f16 c=f16 s=f16:g128 n=9223372036854775807 k=64",
           "w=uint4b8 a=f16 c=f16 s=f16:g128 n=64 k=9223372036854775807",
           "w=uint4b8 a=f16 c=f16 s=f16:b128x2147483647 n=4611686018427387904 k=128",
           "w=uint4b8 a=f16 c=f16 s=f16:channel n=4294967296 k=4294967296 e=2147483647",
       }) {
    const Format f(text);
    hm_packed_sizes_t p;
    EXPECT_EQ(packed_sizes(f, &p), HM_ERROR_INVALID_ARGUMENT) << text << ": " << p.weight;
    hm_canonical_sizes_t c;
    EXPECT_EQ(canonical_sizes(f, &c), HM_ERROR_INVALID_ARGUMENT) << text << ": " << c.codes;
    EXPECT_EQ(hm_format_validate(f.f, nullptr), HM_ERROR_UNSUPPORTED_FORMAT) << text;
  }
}

TEST(SizeLimits, ReferenceGemmChecksPointersWithoutOverflow) {
  // m * k wrapped to 0, so a NULL `a` passed the check and the loop read through it.
  const int64_t big = int64_t{1} << 62;
  std::vector<float> w(16), c(16);
  EXPECT_EQ(hm_reference_gemm_f32(nullptr, w.data(), nullptr, c.data(), big, 4, 4),
            HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(hm_reference_gemm_f32(nullptr, nullptr, nullptr, nullptr, 4, big, big),
            HM_ERROR_INVALID_ARGUMENT);
}

TEST(SizeLimits, ActivationQuantizationRefusesHugeShapes) {
  std::vector<float> a(16), scales(16);
  std::vector<uint8_t> codes(16);
  EXPECT_EQ(hm_quantize_activation(HM_DTYPE_INT8, a.data(), int64_t{1} << 62, 4, 0, codes.data(),
                                   scales.data()),
            HM_ERROR_INVALID_ARGUMENT);
}

}  // namespace
