// The support matrix is derived from the rules: it agrees with validate(), and docs/support.md is
// exactly what the rules render (regenerate it with the cp command the failure prints).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "core/support.hpp"
#include "gemm/family.hpp"

namespace hm::core {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(SupportDocs, MatchesRules) {
  std::string root = HM_TEST_SOURCE_DIR;  // <repo>/tests
  root.resize(root.size() - std::string("/tests").size());
  const std::string committed_path = root + "/docs/support.md";
  const std::string fresh_path = std::string(HM_TEST_BINARY_DIR) + "/support.md";
  const std::string fresh = render_support_markdown(hm::gemm::family_names);
  if (read_file(committed_path) == fresh) return;
  std::ofstream(fresh_path, std::ios::binary) << fresh;
  FAIL() << "docs/support.md is not what the rules in src/core/support.cpp render. If the rule "
            "change is intended, update the doc:\n  cp "
         << fresh_path << " " << committed_path;
}

TEST(SupportMatrix, IsStableAndNamesEveryActivation) {
  const std::string text = render_support_matrix(hm::gemm::family_names);
  EXPECT_EQ(text, render_support_matrix(hm::gemm::family_names));
  for (const ActivationSupport& a : supported_activations()) {
    EXPECT_NE(text.find("\na=" + a.dtype.name() + " "), std::string::npos) << a.dtype.name();
    EXPECT_NE(text.find(a.arch_text()), std::string::npos) << a.arch_text();
  }
  // Biased integers from uint2b2 (uint1b1, like int1, holds no positive value, so no scales: rule R6).
  EXPECT_NE(text.find("uint2b2..uint8b128"), std::string::npos);
}

// Every (weight, activation) pair of named dtypes: what validate() accepts has a row in the
// matrix, and an activation without a row accepts nothing.
TEST(SupportMatrix, EveryAcceptedPairHasARow) {
  const std::string text = render_support_matrix(hm::gemm::family_names);
  int accepted = 0;
  for (Dtype a : all_named_dtypes()) {
    const bool has_row = find_activation(a) != nullptr;
    EXPECT_EQ(has_row, text.find("\na=" + a.name() + " ") != std::string::npos) << a.name();
    int accepted_here = 0;
    for (Dtype w : all_named_dtypes()) {
      Format f = Format::parse("s=f32:channel n=64 k=64");
      f.weight = w;
      f.activation = a;
      if (check(f, std::nullopt).empty()) ++accepted_here;
    }
    if (has_row) EXPECT_GT(accepted_here, 0) << a.name() << " has a row but accepts no weight";
    else EXPECT_EQ(accepted_here, 0) << a.name() << " has no row but accepts weights";
    accepted += accepted_here;
  }
  EXPECT_GT(accepted, 200);
}

// The matrix prints "dtype/G" for group scales meaning "group_k a multiple of G"; that claim
// must hold for every group size, and for block scales the same way.
TEST(SupportMatrix, GroupSizesAreExactlyMultiplesOfTheSmallest) {
  for (const ActivationSupport& act : supported_activations()) {
    for (hm_dtype_t code : {HM_DTYPE_F16, HM_DTYPE_BF16, HM_DTYPE_F32, HM_DTYPE_E4M3, HM_DTYPE_E5M2, HM_DTYPE_UE8M0}) {
      for (ScaleKind kind : {ScaleKind::kGroup, ScaleKind::kBlock, ScaleKind::kGroupTensor}) {
        Format f = Format::parse("n=256 k=4096 s=f16:g16");
        f.activation = act.dtype;
        f.weight = Dtype::integer(true, 2);  // passes on every activation
        f.output = Dtype::from_code(HM_DTYPE_BF16);
        f.scale = Dtype::from_code(code);
        f.scale_kind = kind;
        f.group_n = kind == ScaleKind::kBlock ? 128 : 0;
        int smallest = 0;
        for (int g = 1; g <= 256; ++g) {
          f.group_k = g;
          const bool ok = check(f, std::nullopt).empty();
          if (ok && smallest == 0) smallest = g;
          EXPECT_EQ(ok, smallest != 0 && g % smallest == 0)
              << act.dtype.name() << " " << f.to_string();
        }
      }
    }
  }
}

}  // namespace
}  // namespace hm::core
