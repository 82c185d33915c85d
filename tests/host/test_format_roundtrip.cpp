// Every format the typed setters can build prints a string that hm_format_parse reads back to
// the same format (issue 16: a scale dtype set to none under group scales printed "s=none:g128",
// which the parser refuses). Random sequences of setter calls, checked after every call.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "humming.h"
#include "support/last_error.hpp"

namespace {

using hm::test::last_error;

std::string to_string(const hm_format_t* f) {
  size_t length = 0;
  EXPECT_EQ(hm_format_to_string(f, nullptr, 0, &length), HM_ERROR_BUFFER_TOO_SMALL);
  std::string s(length, '\0');
  EXPECT_EQ(hm_format_to_string(f, &s[0], length + 1, nullptr), HM_SUCCESS) << last_error();
  return s;
}

// Named dtypes, raw codes of every kind and variant, and random codes (which the setters may
// refuse; what they accept must round-trip).
std::vector<hm_dtype_t> dtype_pool(std::mt19937& rng) {
  std::vector<hm_dtype_t> pool = {HM_DTYPE_NONE};
  for (const char* name :
       {"f16", "bf16", "f32", "int1", "int2", "int3", "int4", "int8", "uint1", "uint4", "uint7",
        "uint8", "uint4b8", "uint8b128", "uint2b2", "e2m1", "e4m3", "e5m2", "e3m2", "e2m3",
        "ue8m0", "e0m3", "e3m4", "e4m3ieee", "e5m2fn", "e2m1fn"}) {
    hm_dtype_t d = 0;
    if (hm_dtype_parse(name, &d) == HM_SUCCESS) pool.push_back(d);
  }
  for (uint32_t kind = 0; kind <= 6; ++kind)
    for (uint32_t bits : {1u, 4u, 6u, 8u, 16u, 32u})
      for (uint32_t e = 0; e <= 8; e += 2)
        for (uint32_t variant = 0; variant <= 3; ++variant)
          pool.push_back(HM_DTYPE_MAKE(kind, bits, e, bits > e + 1 ? bits - e - 1 : 0, variant));
  for (int i = 0; i < 64; ++i) pool.push_back(rng());
  return pool;
}

TEST(FormatRoundTrip, EverySetterBuiltFormatParsesBack) {
  std::mt19937 rng(16);
  const std::vector<hm_dtype_t> dtypes = dtype_pool(rng);
  const int32_t groups[] = {0, 1, 16, 32, 128, 4096, INT32_MAX, -1};
  const int64_t dims[] = {0, 1, 64, 4096, int64_t{1} << 40, INT64_MAX, -1};
  const int32_t experts[] = {1, 8, INT32_MAX, 0};
  auto pick = [&](const auto& v) { return v[rng() % (sizeof(v) / sizeof(v[0]))]; };
  int accepted = 0;
  for (int sequence = 0; sequence < 3000; ++sequence) {
    hm_format_t* f = nullptr;
    ASSERT_EQ(hm_format_create(&f), HM_SUCCESS);
    std::string history;
    for (int step = 0; step < 10; ++step) {
      hm_status_t s = HM_SUCCESS;
      switch (rng() % 4) {
        case 0: {
          const int32_t role = static_cast<int32_t>(rng() % 6);
          const hm_dtype_t d = dtypes[rng() % dtypes.size()];
          s = hm_format_set_dtype(f, role, d);
          history += " dtype(" + std::to_string(role) + "," + std::to_string(d) + ")";
          break;
        }
        case 1: {
          const int32_t kind = static_cast<int32_t>(rng() % 6);
          const int32_t gk = pick(groups), gn = pick(groups);
          s = hm_format_set_scale(f, kind, gk, gn);
          history += " scale(" + std::to_string(kind) + "," + std::to_string(gk) + "," +
                     std::to_string(gn) + ")";
          break;
        }
        case 2: {
          const int64_t n = pick(dims), k = pick(dims);
          const int32_t e = pick(experts);
          s = hm_format_set_shape(f, n, k, e);
          history += " shape(" + std::to_string(n) + "," + std::to_string(k) + "," +
                     std::to_string(e) + ")";
          break;
        }
        default: {
          const int32_t b = static_cast<int32_t>(rng() % 3);
          s = hm_format_set_bias(f, b);
          history += " bias(" + std::to_string(b) + ")";
        }
      }
      if (s != HM_SUCCESS) continue;
      ++accepted;
      const std::string text = to_string(f);
      hm_format_t* back = nullptr;
      ASSERT_EQ(hm_format_parse(text.c_str(), &back), HM_SUCCESS)
          << "'" << text << "' after" << history << ": " << last_error();
      EXPECT_EQ(hm_format_equal(f, back), 1) << text << " after" << history;
      EXPECT_EQ(to_string(back), text) << "after" << history;
      hm_format_destroy(back);
    }
    hm_format_destroy(f);
  }
  EXPECT_GT(accepted, 10000);
}

}  // namespace
