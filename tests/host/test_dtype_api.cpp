// The hm_dtype_* C entry points: results, argument checks and messages.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "humming.h"
#include "support/last_error.hpp"

namespace {

using hm::test::last_error;

TEST(DtypeApi, ParseNameDecodeEncode) {
  hm_dtype_t d = 0;
  ASSERT_EQ(hm_dtype_parse("mxfp4", &d), HM_SUCCESS);
  EXPECT_EQ(d, HM_DTYPE_E2M1);
  char buf[16];
  size_t length = 0;
  ASSERT_EQ(hm_dtype_name(HM_DTYPE_UINT4B8, buf, sizeof buf, &length), HM_SUCCESS);
  EXPECT_STREQ(buf, "uint4b8");
  EXPECT_EQ(length, 7u);
  double v = 0;
  ASSERT_EQ(hm_dtype_decode(HM_DTYPE_E4M3, 0x7E, &v), HM_SUCCESS);
  EXPECT_EQ(v, 448.0);
  ASSERT_EQ(hm_dtype_decode(HM_DTYPE_BF16, 0x3F80, &v), HM_SUCCESS);
  EXPECT_EQ(v, 1.0);
  uint32_t code = 0;
  ASSERT_EQ(hm_dtype_encode(HM_DTYPE_E2M1, -5.0, &code), HM_SUCCESS);
  EXPECT_EQ(code, 0xEu);
  ASSERT_EQ(hm_dtype_encode(HM_DTYPE_F32, 0.1, &code), HM_SUCCESS);
  EXPECT_EQ(code, 0x3DCCCCCDu);
}

TEST(DtypeApi, Failures) {
  hm_dtype_t d = 77;
  EXPECT_EQ(hm_dtype_parse("float8_e4m3fnuz", &d), HM_ERROR_PARSE);
  EXPECT_EQ(d, HM_DTYPE_NONE) << "out is cleared on failure";
  EXPECT_NE(last_error().find("hm_dtype_parse: cannot parse dtype 'float8_e4m3fnuz'"), std::string::npos)
      << last_error();
  EXPECT_EQ(hm_dtype_parse(nullptr, &d), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("'name'"), std::string::npos);
  EXPECT_EQ(hm_dtype_parse("int4", nullptr), HM_ERROR_INVALID_ARGUMENT);

  char small[4];
  size_t length = 0;
  EXPECT_EQ(hm_dtype_name(HM_DTYPE_UINT4B8, small, sizeof small, &length), HM_ERROR_BUFFER_TOO_SMALL);
  EXPECT_EQ(length, 7u);
  EXPECT_STREQ(small, "uin");
  EXPECT_EQ(hm_dtype_name(HM_DTYPE_UINT4B8, nullptr, 0, &length), HM_ERROR_BUFFER_TOO_SMALL);
  EXPECT_EQ(length, 7u);
  EXPECT_EQ(hm_dtype_name(0x12345678u, small, sizeof small, &length), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("not a valid dtype"), std::string::npos);

  double v = 0;
  EXPECT_EQ(hm_dtype_decode(HM_DTYPE_F32, 0, &v), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(hm_dtype_decode(HM_DTYPE_E2M1, 16, &v), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(hm_dtype_decode(HM_DTYPE_E2M1, 1, nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(hm_dtype_decode(HM_DTYPE_NONE, 0, &v), HM_ERROR_INVALID_ARGUMENT);

  uint32_t code = 0;
  EXPECT_EQ(hm_dtype_encode(HM_DTYPE_E2M1, std::nan(""), &code), HM_ERROR_NON_FINITE);
  EXPECT_NE(last_error().find("e2m1"), std::string::npos);
  EXPECT_EQ(hm_dtype_encode(HM_DTYPE_UE8M0, 0.0, &code), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(hm_dtype_encode(HM_DTYPE_INT4, 1.0, nullptr), HM_ERROR_INVALID_ARGUMENT);
}

}  // namespace
