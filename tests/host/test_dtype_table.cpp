// quant::CodeTable (the quantizer's fast codec) against core::Dtype: same decode for every code,
// same encode for every midpoint, its neighbours, random values and out-of-range values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "quant/code_table.hpp"

namespace hm::quant {
namespace {

using core::Dtype;

TEST(CodeTable, MatchesDtypeEverywhere) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  for (Dtype d : core::all_named_dtypes()) {
    if (d.bits() > 8) continue;
    SCOPED_TRACE(d.name());
    const CodeTable table(d);
    std::vector<double> xs;
    for (uint32_t c = 0; c < (1u << d.bits()); ++c) {
      const double v = d.decode(c);
      if (std::isnan(v)) {
        EXPECT_TRUE(std::isnan(table.decode(c)));
        continue;
      }
      EXPECT_EQ(static_cast<double>(table.decode(c)), v) << c;
      if (std::isinf(v)) continue;
      xs.push_back(v);
      const double next = c + 1 < (1u << d.bits()) ? d.decode(c + 1) : v;
      if (std::isfinite(next)) {
        const double mid = 0.5 * (v + next);
        xs.insert(xs.end(), {mid, std::nextafter(mid, -1e300), std::nextafter(mid, 1e300)});
      }
    }
    for (int i = 0; i < 300; ++i) xs.push_back(uniform(rng) * d.max_value() * 1.2);
    xs.insert(xs.end(), {d.max_value() * 3, -d.max_value() * 3, 1e30, -1e30, 0.0, -0.0});
    for (double x : xs) {
      if (d.code() == HM_DTYPE_UE8M0 && !(x > 0)) continue;
      ASSERT_EQ(table.encode(x), d.encode(x)) << "x = " << x;
    }
  }
}

TEST(CodeTable, RejectsWideDtypes) {
  try {
    CodeTable table(Dtype::from_code(HM_DTYPE_F16));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_INVALID_ARGUMENT);
  }
}

}  // namespace
}  // namespace hm::quant
