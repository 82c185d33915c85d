// The hm_format_* C functions, hm_format_validate, hm_support_matrix and the canonical sizes:
// results, and misuse (NULL, bad enums, wrong struct_size, short buffers) with its message.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>

#include "humming.h"
#include "support/last_error.hpp"

namespace {

using hm::test::last_error;

// Expects `status` and a thread-local message that contains `piece`.
#define EXPECT_STATUS(call, status, piece)                                                \
  do {                                                                                    \
    hm_clear_last_error();                                                                \
    EXPECT_EQ((call), (status)) << #call;                                                 \
    EXPECT_NE(last_error().find(piece), std::string::npos) << #call << ": " << last_error(); \
  } while (0)

struct Format {
  hm_format_t* f = nullptr;
  explicit Format(const char* text) { EXPECT_EQ(hm_format_parse(text, &f), HM_SUCCESS) << last_error(); }
  ~Format() { hm_format_destroy(f); }
  std::string str() const {
    char buf[256];
    EXPECT_EQ(hm_format_to_string(f, buf, sizeof buf, nullptr), HM_SUCCESS);
    return buf;
  }
};

TEST(FormatApi, CreateParseCloneDestroy) {
  hm_format_t* f = nullptr;
  ASSERT_EQ(hm_format_create(&f), HM_SUCCESS);
  char buf[128];
  size_t length = 0;
  ASSERT_EQ(hm_format_to_string(f, buf, sizeof buf, &length), HM_SUCCESS);
  EXPECT_STREQ(buf, "w=uint4b8 a=f16 c=f16 s=f16:g128 zp=none bias=0 acc=f32 n=0 k=0 e=1");
  EXPECT_EQ(length, std::string(buf).size());

  hm_format_t* copy = nullptr;
  ASSERT_EQ(hm_format_clone(f, &copy), HM_SUCCESS);
  EXPECT_EQ(hm_format_equal(f, copy), 1);
  ASSERT_EQ(hm_format_set_shape(copy, 1, 2, 1), HM_SUCCESS);
  EXPECT_EQ(hm_format_equal(f, copy), 0);
  EXPECT_EQ(hm_format_equal(f, nullptr), 0);
  EXPECT_EQ(hm_format_equal(nullptr, nullptr), 0);
  hm_format_destroy(copy);
  hm_format_destroy(f);
  hm_format_destroy(nullptr);  // a no-op
}

TEST(FormatApi, OutputHandleIsNullOnFailure) {
  hm_format_t* f = reinterpret_cast<hm_format_t*>(0x1);
  EXPECT_STATUS(hm_format_parse("w=int4 q=1", &f), HM_ERROR_PARSE, "hm_format_parse: ");
  EXPECT_EQ(f, nullptr);
  EXPECT_NE(last_error().find("unknown field 'q'"), std::string::npos) << last_error();
  f = reinterpret_cast<hm_format_t*>(0x1);
  EXPECT_STATUS(hm_format_parse(nullptr, &f), HM_ERROR_INVALID_ARGUMENT, "'text' is NULL");
  EXPECT_EQ(f, nullptr);
  EXPECT_STATUS(hm_format_parse("", nullptr), HM_ERROR_INVALID_ARGUMENT, "'out' is NULL");
  EXPECT_STATUS(hm_format_create(nullptr), HM_ERROR_INVALID_ARGUMENT, "'out' is NULL");
  f = reinterpret_cast<hm_format_t*>(0x1);
  EXPECT_STATUS(hm_format_clone(nullptr, &f), HM_ERROR_INVALID_ARGUMENT, "'format' is NULL");
  EXPECT_EQ(f, nullptr);
}

TEST(FormatApi, ToStringFollowsTheSnprintfRule) {
  Format f("n=4096 k=4096");
  const std::string full = f.str();
  size_t length = 0;
  EXPECT_STATUS(hm_format_to_string(f.f, nullptr, 0, &length), HM_ERROR_BUFFER_TOO_SMALL, "bytes");
  EXPECT_EQ(length, full.size());
  char small[10];
  length = 0;
  EXPECT_STATUS(hm_format_to_string(f.f, small, sizeof small, &length), HM_ERROR_BUFFER_TOO_SMALL,
                std::to_string(full.size() + 1));
  EXPECT_EQ(length, full.size());
  EXPECT_EQ(std::string(small), full.substr(0, 9));  // truncated, NUL-terminated
  std::string exact(full.size() + 1, 'x');
  EXPECT_EQ(hm_format_to_string(f.f, &exact[0], exact.size(), nullptr), HM_SUCCESS);
  EXPECT_EQ(exact.c_str(), full);
  EXPECT_STATUS(hm_format_to_string(f.f, nullptr, 5, &length), HM_ERROR_INVALID_ARGUMENT, "'buf' is NULL");
  EXPECT_STATUS(hm_format_to_string(nullptr, small, sizeof small, &length), HM_ERROR_INVALID_ARGUMENT,
                "'format' is NULL");
}

TEST(FormatApi, Dtypes) {
  Format f("");
  const int32_t roles[] = {HM_ROLE_WEIGHT, HM_ROLE_ACTIVATION, HM_ROLE_OUTPUT, HM_ROLE_SCALE,
                           HM_ROLE_ZERO_POINT, HM_ROLE_ACCUMULATOR};
  const hm_dtype_t before[] = {HM_DTYPE_UINT4B8, HM_DTYPE_F16, HM_DTYPE_F16, HM_DTYPE_F16, HM_DTYPE_NONE, HM_DTYPE_F32};
  for (int i = 0; i < 6; ++i) {
    hm_dtype_t d = 12345;
    ASSERT_EQ(hm_format_get_dtype(f.f, roles[i], &d), HM_SUCCESS);
    EXPECT_EQ(d, before[i]) << roles[i];
  }
  ASSERT_EQ(hm_format_set_dtype(f.f, HM_ROLE_WEIGHT, HM_DTYPE_UINT4), HM_SUCCESS);
  ASSERT_EQ(hm_format_set_dtype(f.f, HM_ROLE_ZERO_POINT, HM_DTYPE_UINT4), HM_SUCCESS);
  ASSERT_EQ(hm_format_set_dtype(f.f, HM_ROLE_ACTIVATION, HM_DTYPE_BF16), HM_SUCCESS);
  ASSERT_EQ(hm_format_set_dtype(f.f, HM_ROLE_OUTPUT, HM_DTYPE_BF16), HM_SUCCESS);
  ASSERT_EQ(hm_format_set_dtype(f.f, HM_ROLE_SCALE, HM_DTYPE_BF16), HM_SUCCESS);
  EXPECT_EQ(f.str(), "w=uint4 a=bf16 c=bf16 s=bf16:g128 zp=uint4 bias=0 acc=f32 n=0 k=0 e=1");
  ASSERT_EQ(hm_format_set_dtype(f.f, HM_ROLE_ZERO_POINT, HM_DTYPE_NONE), HM_SUCCESS);

  EXPECT_STATUS(hm_format_set_dtype(f.f, 6, HM_DTYPE_F16), HM_ERROR_INVALID_ARGUMENT, "'role' is 6");
  EXPECT_STATUS(hm_format_set_dtype(f.f, -1, HM_DTYPE_F16), HM_ERROR_INVALID_ARGUMENT, "HM_ROLE_WEIGHT (0)");
  EXPECT_STATUS(hm_format_set_dtype(f.f, HM_ROLE_WEIGHT, 0xdeadbeef), HM_ERROR_INVALID_ARGUMENT, "0xdeadbeef");
  EXPECT_STATUS(hm_format_set_dtype(f.f, HM_ROLE_WEIGHT, HM_DTYPE_NONE), HM_ERROR_INVALID_ARGUMENT, "none");
  EXPECT_STATUS(hm_format_set_dtype(nullptr, HM_ROLE_WEIGHT, HM_DTYPE_F16), HM_ERROR_INVALID_ARGUMENT, "'format' is NULL");
  EXPECT_STATUS(hm_format_get_dtype(f.f, 9, nullptr), HM_ERROR_INVALID_ARGUMENT, "'out' is NULL");
  hm_dtype_t d = 0;
  EXPECT_STATUS(hm_format_get_dtype(f.f, 9, &d), HM_ERROR_INVALID_ARGUMENT, "'role' is 9");
  EXPECT_STATUS(hm_format_get_dtype(nullptr, HM_ROLE_WEIGHT, &d), HM_ERROR_INVALID_ARGUMENT, "'format' is NULL");
  EXPECT_EQ(f.str(), "w=uint4 a=bf16 c=bf16 s=bf16:g128 zp=none bias=0 acc=f32 n=0 k=0 e=1");  // unchanged
}

TEST(FormatApi, Scales) {
  Format f("");
  struct Case {
    int32_t kind, group_k, group_n;
    const char* scale;
  };
  const Case cases[] = {
      {HM_SCALE_GROUP, 64, 0, "s=f16:g64"},          {HM_SCALE_CHANNEL, 0, 0, "s=f16:channel"},
      {HM_SCALE_BLOCK, 128, 256, "s=f16:b128x256"}, {HM_SCALE_GROUP_TENSOR, 16, 0, "s=f16:g16+tensor"},
      {HM_SCALE_TENSOR, 0, 0, "s=tensor"},          {HM_SCALE_NONE, 0, 0, "s=none"},
  };
  for (const Case& c : cases) {
    ASSERT_EQ(hm_format_set_scale(f.f, c.kind, c.group_k, c.group_n), HM_SUCCESS) << last_error();
    if (c.kind != HM_SCALE_TENSOR && c.kind != HM_SCALE_NONE) {
      ASSERT_EQ(hm_format_set_dtype(f.f, HM_ROLE_SCALE, HM_DTYPE_F16), HM_SUCCESS) << last_error();
    }
    EXPECT_NE(f.str().find(c.scale), std::string::npos) << f.str();
    int32_t kind = -1, gk = -1, gn = -1;
    ASSERT_EQ(hm_format_get_scale(f.f, &kind, &gk, &gn), HM_SUCCESS);
    EXPECT_EQ(kind, c.kind);
    EXPECT_EQ(gk, c.group_k);
    EXPECT_EQ(gn, c.group_n);
  }
  // s=none carries no scale dtype: setting one is out of order, and the scale role reads none.
  hm_dtype_t d = 1;
  ASSERT_EQ(hm_format_get_dtype(f.f, HM_ROLE_SCALE, &d), HM_SUCCESS);
  EXPECT_EQ(d, HM_DTYPE_NONE);
  EXPECT_STATUS(hm_format_set_dtype(f.f, HM_ROLE_SCALE, HM_DTYPE_F16), HM_ERROR_INVALID_STATE, "hm_format_set_scale");

  EXPECT_STATUS(hm_format_set_scale(f.f, 6, 0, 0), HM_ERROR_INVALID_ARGUMENT, "'kind' is 6");
  EXPECT_STATUS(hm_format_set_scale(f.f, -1, 0, 0), HM_ERROR_INVALID_ARGUMENT, "'kind' is -1");
  EXPECT_STATUS(hm_format_set_scale(f.f, HM_SCALE_GROUP, 0, 0), HM_ERROR_INVALID_ARGUMENT, "'group_k' is 0");
  EXPECT_STATUS(hm_format_set_scale(f.f, HM_SCALE_GROUP, -128, 0), HM_ERROR_INVALID_ARGUMENT, "'group_k' is -128");
  EXPECT_STATUS(hm_format_set_scale(f.f, HM_SCALE_GROUP, 128, 128), HM_ERROR_INVALID_ARGUMENT, "'group_n' is 128");
  EXPECT_STATUS(hm_format_set_scale(f.f, HM_SCALE_BLOCK, 128, 0), HM_ERROR_INVALID_ARGUMENT, "'group_n' is 0");
  EXPECT_STATUS(hm_format_set_scale(f.f, HM_SCALE_CHANNEL, 128, 0), HM_ERROR_INVALID_ARGUMENT, "pass 0");
  EXPECT_STATUS(hm_format_set_scale(nullptr, HM_SCALE_CHANNEL, 0, 0), HM_ERROR_INVALID_ARGUMENT, "'format' is NULL");
  int32_t kind, gk, gn;
  EXPECT_STATUS(hm_format_get_scale(f.f, nullptr, &gk, &gn), HM_ERROR_INVALID_ARGUMENT, "'kind' is NULL");
  EXPECT_STATUS(hm_format_get_scale(f.f, &kind, nullptr, &gn), HM_ERROR_INVALID_ARGUMENT, "'group_k' is NULL");
  EXPECT_STATUS(hm_format_get_scale(f.f, &kind, &gk, nullptr), HM_ERROR_INVALID_ARGUMENT, "'group_n' is NULL");
  EXPECT_EQ(f.str().find("s=none"), f.str().find("s=")) << "failed calls change nothing: " << f.str();
}

TEST(FormatApi, ShapeAndBias) {
  Format f("");
  ASSERT_EQ(hm_format_set_shape(f.f, 7168, 2048, 256), HM_SUCCESS);
  ASSERT_EQ(hm_format_set_bias(f.f, 1), HM_SUCCESS);
  int64_t n = 0, k = 0;
  int32_t e = 0, bias = 0;
  ASSERT_EQ(hm_format_get_shape(f.f, &n, &k, &e), HM_SUCCESS);
  ASSERT_EQ(hm_format_get_bias(f.f, &bias), HM_SUCCESS);
  EXPECT_EQ(n, 7168);
  EXPECT_EQ(k, 2048);
  EXPECT_EQ(e, 256);
  EXPECT_EQ(bias, 1);
  EXPECT_STATUS(hm_format_set_shape(f.f, -1, 2, 1), HM_ERROR_INVALID_ARGUMENT, "'n' is -1");
  EXPECT_STATUS(hm_format_set_shape(f.f, 1, -2, 1), HM_ERROR_INVALID_ARGUMENT, "'k' is -2");
  EXPECT_STATUS(hm_format_set_shape(f.f, 1, 2, 0), HM_ERROR_INVALID_ARGUMENT, "'experts' is 0");
  EXPECT_STATUS(hm_format_set_bias(f.f, 2), HM_ERROR_INVALID_ARGUMENT, "'has_bias' is 2");
  EXPECT_STATUS(hm_format_get_shape(f.f, nullptr, &k, &e), HM_ERROR_INVALID_ARGUMENT, "'n' is NULL");
  EXPECT_STATUS(hm_format_get_shape(f.f, &n, nullptr, &e), HM_ERROR_INVALID_ARGUMENT, "'k' is NULL");
  EXPECT_STATUS(hm_format_get_shape(f.f, &n, &k, nullptr), HM_ERROR_INVALID_ARGUMENT, "'experts' is NULL");
  EXPECT_STATUS(hm_format_get_bias(f.f, nullptr), HM_ERROR_INVALID_ARGUMENT, "'has_bias' is NULL");
  EXPECT_STATUS(hm_format_get_bias(nullptr, &bias), HM_ERROR_INVALID_ARGUMENT, "'format' is NULL");
  EXPECT_EQ(f.str(), "w=uint4b8 a=f16 c=f16 s=f16:g128 zp=none bias=1 acc=f32 n=7168 k=2048 e=256");
}

// Activation scales per token and K group: set, read back, printed, validated (rule R22).
TEST(FormatApi, ActivationGroups) {
  Format f("w=e4m3 a=e4m3 c=bf16 s=f32:b128x128 n=256 k=512");
  int32_t group_k = -1;
  ASSERT_EQ(hm_format_get_activation_groups(f.f, &group_k), HM_SUCCESS);
  EXPECT_EQ(group_k, 0);
  ASSERT_EQ(hm_format_set_activation_groups(f.f, 128), HM_SUCCESS);
  ASSERT_EQ(hm_format_get_activation_groups(f.f, &group_k), HM_SUCCESS);
  EXPECT_EQ(group_k, 128);
  EXPECT_EQ(f.str(), "w=e4m3 a=e4m3:g128 c=bf16 s=f32:b128x128 zp=none bias=0 acc=f32 n=256 k=512 e=1");
  EXPECT_EQ(hm_format_validate(f.f, "sm_90a"), HM_SUCCESS);
  EXPECT_STATUS(hm_format_set_activation_groups(f.f, -1), HM_ERROR_INVALID_ARGUMENT, "'group_k' is -1");
  EXPECT_STATUS(hm_format_get_activation_groups(f.f, nullptr), HM_ERROR_INVALID_ARGUMENT, "'group_k' is NULL");
  EXPECT_STATUS(hm_format_get_activation_groups(nullptr, &group_k), HM_ERROR_INVALID_ARGUMENT, "'format' is NULL");
  ASSERT_EQ(hm_format_set_activation_groups(f.f, 48), HM_SUCCESS);
  EXPECT_STATUS(hm_format_validate(f.f, nullptr), HM_ERROR_UNSUPPORTED_FORMAT, "rule R22 activation-groups");
  Format a16("w=uint4b8 a=f16:g128 c=f16 s=f16:g128 n=256 k=512");
  EXPECT_STATUS(hm_format_validate(a16.f, nullptr), HM_ERROR_UNSUPPORTED_FORMAT, "rule R22 activation-groups");
}

TEST(FormatApi, Validate) {
  Format gptq("w=uint4b8 a=f16 c=f16 s=f16:g128 n=4096 k=4096");
  EXPECT_EQ(hm_format_validate(gptq.f, nullptr), HM_SUCCESS);
  EXPECT_EQ(hm_format_validate(gptq.f, "sm_75"), HM_SUCCESS);
  EXPECT_EQ(hm_format_validate(gptq.f, "sm_120a"), HM_SUCCESS);
  EXPECT_STATUS(hm_format_validate(gptq.f, "sm_70"), HM_ERROR_UNSUPPORTED_ARCH, "rule R23 arch-minimum");
  EXPECT_STATUS(hm_format_validate(gptq.f, "turing"), HM_ERROR_PARSE, "cannot parse the architecture 'turing'");
  EXPECT_STATUS(hm_format_validate(nullptr, nullptr), HM_ERROR_INVALID_ARGUMENT, "'format' is NULL");

  Format w4a4("w=int4 a=int4 c=f16 s=f16:channel n=64 k=64");
  EXPECT_STATUS(hm_format_validate(w4a4.f, "sm_90a"), HM_ERROR_UNSUPPORTED_ARCH, "rule R24 activation-arch");
  EXPECT_NE(last_error().find("hm_format_validate: "), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("sm_90a"), std::string::npos) << last_error();

  Format unset("");  // n = k = 0: not a usable layer
  EXPECT_STATUS(hm_format_validate(unset.f, nullptr), HM_ERROR_UNSUPPORTED_FORMAT, "rule R1 shape-positive");
  Format mxfp4_f16("w=e2m1 a=f16 s=ue8m0:g32 n=64 k=64");
  EXPECT_STATUS(hm_format_validate(mxfp4_f16.f, nullptr), HM_ERROR_UNSUPPORTED_FORMAT, "rule R19");
}

TEST(FormatApi, SupportMatrix) {
  size_t length = 0;
  EXPECT_EQ(hm_support_matrix(nullptr, 0, &length), HM_ERROR_BUFFER_TOO_SMALL);
  ASSERT_GT(length, 1000u);
  std::string text(length + 1, '\0');
  size_t again = 0;
  ASSERT_EQ(hm_support_matrix(&text[0], text.size(), &again), HM_SUCCESS);
  EXPECT_EQ(again, length);
  text.resize(length);
  EXPECT_NE(text.find("\na=f16 "), std::string::npos);
  EXPECT_NE(text.find("\na=e2m1 "), std::string::npos);
  EXPECT_STATUS(hm_support_matrix(nullptr, 3, nullptr), HM_ERROR_INVALID_ARGUMENT, "'buf' is NULL");
}

TEST(FormatApi, CanonicalSizes) {
  hm_canonical_sizes_t sizes;
  std::memset(&sizes, 0xff, sizeof sizes);
  hm_canonical_sizes_init(&sizes);
  EXPECT_EQ(sizes.struct_size, sizeof sizes);
  EXPECT_EQ(sizes.codes, 0u);
  EXPECT_EQ(sizes.global_scale, 0u);
  hm_canonical_sizes_init(nullptr);  // a no-op

  Format nvfp4("w=e2m1 a=bf16 c=bf16 s=e4m3:g16+tensor n=512 k=7168 e=8");
  ASSERT_EQ(hm_format_canonical_sizes(nvfp4.f, &sizes), HM_SUCCESS) << last_error();
  EXPECT_EQ(sizes.codes, 8ull * 512 * 7168);
  EXPECT_EQ(sizes.scales, 8ull * 512 * 448);
  EXPECT_EQ(sizes.zero_points, 0u);
  EXPECT_EQ(sizes.global_scale, 8u);
  Format awq("w=uint4 zp=uint4 s=f16:g128 n=4096 k=4100");
  ASSERT_EQ(hm_format_canonical_sizes(awq.f, &sizes), HM_SUCCESS);
  EXPECT_EQ(sizes.scales, 4096ull * 33);  // the partial last group counts
  EXPECT_EQ(sizes.zero_points, sizes.scales);
  Format block("w=e4m3 a=e4m3 s=f32:b128x128 n=300 k=1000");
  ASSERT_EQ(hm_format_canonical_sizes(block.f, &sizes), HM_SUCCESS);
  EXPECT_EQ(sizes.scales, 3u * 8u);

  hm_canonical_sizes_t bad;
  hm_canonical_sizes_init(&bad);
  bad.struct_size = 0;
  EXPECT_STATUS(hm_format_canonical_sizes(awq.f, &bad), HM_ERROR_INVALID_STRUCT_SIZE, "'out->struct_size' is 0");
  bad.struct_size = sizeof bad - 1;
  EXPECT_STATUS(hm_format_canonical_sizes(awq.f, &bad), HM_ERROR_INVALID_STRUCT_SIZE, "_init()");
  EXPECT_STATUS(hm_format_canonical_sizes(awq.f, nullptr), HM_ERROR_INVALID_ARGUMENT, "'out' is NULL");
  EXPECT_STATUS(hm_format_canonical_sizes(nullptr, &sizes), HM_ERROR_INVALID_ARGUMENT, "'format' is NULL");
  Format huge("n=9223372036854775807 k=3");
  EXPECT_STATUS(hm_format_canonical_sizes(huge.f, &sizes), HM_ERROR_INVALID_ARGUMENT, "64 bits");
}

// The last-error message belongs to the thread whose call failed.
TEST(FormatApi, ErrorMessagesAreThreadLocal) {
  hm_format_t* f = nullptr;
  ASSERT_EQ(hm_format_parse("w=int4 bogus=1", &f), HM_ERROR_PARSE);
  const std::string mine = last_error();
  std::string theirs;
  std::thread other([&] {
    hm_clear_last_error();
    hm_format_t* g = nullptr;
    EXPECT_EQ(hm_format_parse("s=f16:g0", &g), HM_ERROR_PARSE);
    theirs = last_error();
  });
  other.join();
  EXPECT_NE(mine.find("bogus"), std::string::npos) << mine;
  EXPECT_NE(theirs.find("group size"), std::string::npos) << theirs;
  EXPECT_EQ(last_error(), mine) << "another thread's failure changed this thread's message";
}

}  // namespace
