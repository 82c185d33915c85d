// The canonical format string: defaults, round trips, every parse error, derived sizes.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/format.hpp"
#include "core/support.hpp"

namespace hm::core {
namespace {

// Parses `text`, expecting HM_ERROR_PARSE whose message contains every piece of `expected`.
void expect_parse_error(const std::string& text, const std::vector<std::string>& expected) {
  try {
    Format f = Format::parse(text);
    ADD_FAILURE() << "parsed '" << text << "' as " << f.to_string();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_PARSE) << text;
    for (const std::string& piece : expected)
      EXPECT_NE(e.message().find(piece), std::string::npos)
          << "message for '" << text << "' lacks '" << piece << "': " << e.message();
  }
}

TEST(Format, DefaultsAreTheDocumentedOnes) {
  const Format f;
  EXPECT_EQ(f.to_string(), "w=uint4b8 a=f16 c=f16 s=f16:g128 zp=none bias=0 acc=f32 n=0 k=0 e=1");
  EXPECT_EQ(Format::parse(""), f);
  EXPECT_EQ(Format::parse(" \t\n "), f);
  EXPECT_EQ(Format::parse("n=0").to_string(), f.to_string());
}

TEST(Format, OmittedFieldsKeepTheirDefaults) {
  const Format f = Format::parse("n=4096 k=11008");
  EXPECT_EQ(f.to_string(), "w=uint4b8 a=f16 c=f16 s=f16:g128 zp=none bias=0 acc=f32 n=4096 k=11008 e=1");
}

TEST(Format, FieldsInAnyOrderAliasesAndWhitespace) {
  const Format f = Format::parse("e=8\tk=7168\n n=512  zp=uint4 bias=1 s=bf16:g64 acc=f32 c=bfloat16 a=BF16 w=uint4");
  EXPECT_EQ(f.to_string(), "w=uint4 a=bf16 c=bf16 s=bf16:g64 zp=uint4 bias=1 acc=f32 n=512 k=7168 e=8");
  EXPECT_EQ(Format::parse("w=fp4 a=fp8 s=e8m0:g32").to_string(),
            "w=e2m1 a=e4m3 c=f16 s=ue8m0:g32 zp=none bias=0 acc=f32 n=0 k=0 e=1");
}

TEST(Format, ScaleForms) {
  struct Case {
    const char* text;
    ScaleKind kind;
    int32_t group_k, group_n;
    const char* scale;
  };
  const Case cases[] = {
      {"none", ScaleKind::kNone, 0, 0, "none"},
      {"tensor", ScaleKind::kTensor, 0, 0, "none"},
      {"f32:channel", ScaleKind::kChannel, 0, 0, "f32"},
      {"bf16:g32", ScaleKind::kGroup, 32, 0, "bf16"},
      {"f32:b128x64", ScaleKind::kBlock, 128, 64, "f32"},
      {"e4m3:g16+tensor", ScaleKind::kGroupTensor, 16, 0, "e4m3"},
  };
  for (const Case& c : cases) {
    const Format f = Format::parse(std::string("s=") + c.text);
    EXPECT_EQ(f.scale_kind, c.kind) << c.text;
    EXPECT_EQ(f.group_k, c.group_k) << c.text;
    EXPECT_EQ(f.group_n, c.group_n) << c.text;
    EXPECT_EQ(f.scale.name(), c.scale) << c.text;
    EXPECT_EQ(scale_to_string(f), c.text);
  }
}

// Activation scales per token (the default) or per token and K group: "a=<dtype>:g<K>", printed
// only when grouped, so every per-token format keeps its string.
TEST(Format, ActivationGroups) {
  Format f = Format::parse("w=e4m3 a=e4m3:g128 s=f32:b128x128 n=256 k=1000");
  EXPECT_EQ(f.activation.name(), "e4m3");
  EXPECT_EQ(f.act_group_k, 128);
  EXPECT_EQ(f.activation_groups(), 8);  // ceil(1000 / 128)
  EXPECT_NE(f.to_string().find(" a=e4m3:g128 "), std::string::npos) << f.to_string();
  EXPECT_EQ(Format::parse(f.to_string()), f);
  EXPECT_NE(f, Format::parse("w=e4m3 a=e4m3 s=f32:b128x128 n=256 k=1000"));
  f = Format::parse("a=int8 w=int8 s=f32:channel k=64");
  EXPECT_EQ(f.act_group_k, 0);
  EXPECT_EQ(f.activation_groups(), 1);
  EXPECT_NE(f.to_string().find(" a=int8 "), std::string::npos) << f.to_string();
  expect_parse_error("a=e4m3:", {"field 'a'", "<dtype>:g<K>"});
  expect_parse_error("a=e4m3:b128", {"field 'a'", "<dtype>:g<K>"});
  expect_parse_error("a=e4m3:g0", {"group size in 'a'", "at least 1"});
  expect_parse_error("a=e4m3:gx", {"group size in 'a'", "not a decimal number"});
  expect_parse_error("a=nope:g128", {"field 'a'", "nope"});
}

TEST(Format, RoundTripOverEveryDtypeAndScaleForm) {
  const char* const scales[] = {"none", "tensor", "f16:channel", "bf16:g128", "e4m3:g16+tensor",
                                "f32:b128x128", "ue8m0:g32", "e5m2:g48"};
  int count = 0;
  for (Dtype d : all_named_dtypes()) {
    for (const char* s : scales) {
      for (const std::string& zp : {std::string("none"), d.name()}) {
        const std::string text = "w=" + d.name() + " a=" + d.name() + " c=" + d.name() + " s=" + s +
                                 " zp=" + zp + " bias=1 acc=" + d.name() + " n=4096 k=14336 e=256";
        const Format f = Format::parse(text);
        EXPECT_EQ(f.to_string(), text);
        EXPECT_EQ(Format::parse(f.to_string()), f);
        ++count;
      }
    }
  }
  EXPECT_GT(count, 500);
}

TEST(Format, EqualityIgnoresFieldsTheScaleKindDoesNotUse) {
  Format a = Format::parse("s=tensor"), b = a;
  b.scale = Dtype::from_code(HM_DTYPE_F16);  // not printed for tensor scales: same layer
  b.group_k = 64;
  EXPECT_EQ(a, b);
  b.scale_kind = ScaleKind::kGroup;
  EXPECT_NE(a, b);
}

TEST(Format, ParseErrorsNameTheProblem) {
  expect_parse_error("w=int4 x=1", {"unknown field 'x'", "w, a, c, s, zp, bias, acc, n, k, e"});
  expect_parse_error("W=int4", {"unknown field 'W'"});
  expect_parse_error("w=int4 w=int8", {"'w' appears more than once"});
  expect_parse_error("int4", {"'int4' is not a key=value field"});
  expect_parse_error("w=", {"'w' has no value"});
  expect_parse_error("=int4", {"unknown field ''"});
  expect_parse_error("w=int9", {"field 'w'", "int9"});
  expect_parse_error("a=nope", {"field 'a'", "nope"});
  expect_parse_error("w=none", {"'w' cannot be none"});
  expect_parse_error("acc=none", {"'acc' cannot be none"});
  expect_parse_error("c=none", {"'c' cannot be none"});
  expect_parse_error("zp=uint99", {"field 'zp'"});
  expect_parse_error("s=f16", {"field 's'", "<dtype>:g<K>"});
  expect_parse_error("s=Tensor", {"field 's'"});
  expect_parse_error("s=none:g128", {"'s' cannot be none"});
  expect_parse_error("s=f16:", {"scale layout ''"});
  expect_parse_error("s=f16:group", {"the group size", "not a decimal number"});
  expect_parse_error("s=f16:x128", {"scale layout 'x128'"});
  expect_parse_error("s=f16:g0", {"group size", "at least 1"});
  expect_parse_error("s=f16:g", {"group size", "not a number"});
  expect_parse_error("s=f16:g-128", {"not a decimal number"});
  expect_parse_error("s=f16:g2147483648", {"larger than 2147483647"});
  expect_parse_error("s=f16:g128+tensor+tensor", {"not a decimal number"});
  expect_parse_error("s=f16:+tensor", {"scale layout"});
  expect_parse_error("s=f32:b128", {"<dtype>:b<K>x<N>"});
  expect_parse_error("s=f32:b128x", {"block size along N", "not a number"});
  expect_parse_error("s=f32:bx128", {"block size along K"});
  expect_parse_error("s=f32:b128x0", {"block size along N", "at least 1"});
  expect_parse_error("s=bogus:g128", {"field 's'", "bogus"});
  expect_parse_error("bias=2", {"'bias'", "larger than 1"});
  expect_parse_error("bias=yes", {"'bias'"});
  expect_parse_error("n=-1", {"field 'n'", "not a decimal number"});
  expect_parse_error("n=+1", {"field 'n'"});
  expect_parse_error("n=4k", {"field 'n'"});
  expect_parse_error("k=99999999999999999999", {"field 'k'"});
  expect_parse_error("k=9223372036854775808", {"field 'k'", "larger than"});
  expect_parse_error("e=0", {"field 'e'", "at least 1"});
  expect_parse_error("e=2147483648", {"field 'e'", "larger than"});
  // Binary garbage is quoted, not copied raw into the message.
  expect_parse_error(std::string("w=int4 \x01\x02=3", 11), {"\\x01\\x02"});
}

TEST(Format, LargestNumbersParse) {
  const Format f = Format::parse("n=9223372036854775807 k=1 e=2147483647 s=f16:g2147483647");
  EXPECT_EQ(f.n, INT64_MAX);
  EXPECT_EQ(f.experts, INT32_MAX);
  EXPECT_EQ(f.group_k, INT32_MAX);
  EXPECT_EQ(Format::parse(f.to_string()), f);
}

// Any input gives a Format or HM_ERROR_PARSE; never a crash, another exception, or a Format
// that does not survive its own round trip. Seeded: failures reproduce.
TEST(Format, FuzzedInputIsParsedOrRejected) {
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&state] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  };
  const std::vector<std::string> seeds = {
      "w=uint4b8 a=f16 c=f16 s=f16:g128 zp=none bias=0 acc=f32 n=4096 k=4096 e=1",
      "w=e2m1 a=e2m1 c=bf16 s=e4m3:g16+tensor n=7168 k=2048 e=256",
      "w=e4m3 a=e4m3 s=f32:b128x128 zp=uint8 bias=1 acc=f16",
      "s=tensor s=none w=float8_e4m3fn a=fp8_e5m2 k=1",
  };
  const std::string alphabet = "wacszpbiaenk=:+x0123456789gtuf.e m-_\t\n\x01\xff";
  int parsed = 0, rejected = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string text;
    if (i % 3 == 0) {
      const size_t n = next() % 48;
      for (size_t j = 0; j < n; ++j) text += alphabet[next() % alphabet.size()];
    } else {
      text = seeds[next() % seeds.size()];
      const int edits = 1 + static_cast<int>(next() % 4);
      for (int e = 0; e < edits && !text.empty(); ++e) {
        const size_t at = next() % text.size();
        switch (next() % 4) {
          case 0: text.erase(at, 1 + next() % 3); break;
          case 1: text.insert(at, 1, alphabet[next() % alphabet.size()]); break;
          case 2: text[at] = static_cast<char>(next() & 0xff); break;
          default: text.insert(at, text.substr(next() % text.size(), next() % 12)); break;
        }
      }
    }
    try {
      const Format f = Format::parse(text);
      ++parsed;
      ASSERT_EQ(Format::parse(f.to_string()).to_string(), f.to_string()) << "input: " << text;
    } catch (const Error& e) {
      ++rejected;
      ASSERT_EQ(e.status(), HM_ERROR_PARSE) << "input: " << text << " message: " << e.message();
      ASSERT_FALSE(e.message().empty());
    }
  }
  EXPECT_GT(parsed, 100);  // the mutations keep some inputs valid: both paths are exercised
  EXPECT_GT(rejected, 1000);
}

TEST(Format, GroupsAlongK) {
  Format f = Format::parse("s=f16:g128 n=4096 k=4096");
  EXPECT_EQ(f.groups_k(), 32);
  EXPECT_EQ(f.k_grouped(), 4096);
  f.k = 4100;  // the last group is partial
  EXPECT_EQ(f.groups_k(), 33);
  EXPECT_EQ(f.k_grouped(), 4224);
  f.k = 1;
  EXPECT_EQ(f.groups_k(), 1);
  EXPECT_EQ(f.k_grouped(), 128);
  f.k = 0;
  EXPECT_EQ(f.groups_k(), 0);
  EXPECT_EQ(f.k_grouped(), 0);
  f.k = INT64_MAX;  // no overflow in the rounding
  EXPECT_EQ(f.groups_k(), INT64_MAX / 128 + 1);
  EXPECT_EQ(f.k_grouped(), INT64_MAX);

  for (const char* s : {"f16:channel", "none", "tensor"}) {
    Format g = Format::parse(std::string("k=4100 n=10 s=") + s);
    EXPECT_EQ(g.groups_k(), 1) << s;
    EXPECT_EQ(g.k_grouped(), 4100) << s;
    EXPECT_EQ(g.groups_n(), 10) << s;
  }
  Format b = Format::parse("s=f32:b128x128 n=300 k=1000");
  EXPECT_EQ(b.groups_k(), 8);
  EXPECT_EQ(b.k_grouped(), 1024);
  EXPECT_EQ(b.groups_n(), 3);
  Format gt = Format::parse("s=e4m3:g16+tensor n=300 k=40");
  EXPECT_EQ(gt.groups_k(), 3);
  EXPECT_EQ(gt.k_grouped(), 48);
  EXPECT_EQ(gt.groups_n(), 300);
}

TEST(Format, CanonicalCounts) {
  struct Case {
    const char* text;
    uint64_t codes, scales, zero_points, global_scale;
  };
  const Case cases[] = {
      {"s=f16:g128 n=4096 k=4096", 4096ull * 4096, 4096ull * 32, 0, 0},
      {"w=uint4 zp=uint4 s=f16:g128 n=4096 k=4100", 4096ull * 4100, 4096ull * 33, 4096ull * 33, 0},
      {"s=f32:channel n=10 k=20 e=3", 600, 30, 0, 0},
      {"s=f32:b128x128 n=300 k=1000 e=2", 600000, 2 * 3 * 8, 0, 0},
      {"s=tensor n=10 k=20 e=4", 800, 0, 0, 4},
      {"s=none n=10 k=20", 200, 0, 0, 0},
      {"s=e4m3:g16+tensor n=512 k=7168 e=256", 256ull * 512 * 7168, 256ull * 512 * 448, 0, 256},
      {"n=0 k=0", 0, 0, 0, 0},
  };
  for (const Case& c : cases) {
    const CanonicalCounts got = canonical_counts(Format::parse(c.text));
    EXPECT_EQ(got.codes, c.codes) << c.text;
    EXPECT_EQ(got.scales, c.scales) << c.text;
    EXPECT_EQ(got.zero_points, c.zero_points) << c.text;
    EXPECT_EQ(got.global_scale, c.global_scale) << c.text;
  }
}

TEST(Format, CanonicalCountsRejectWhatHasNoSize) {
  auto expect_invalid = [](const Format& f, const std::string& piece) {
    try {
      canonical_counts(f);
      ADD_FAILURE() << f.to_string();
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), HM_ERROR_INVALID_ARGUMENT);
      EXPECT_NE(e.message().find(piece), std::string::npos) << e.message();
    }
  };
  Format f = Format::parse("n=10 k=10");
  f.n = -1;
  expect_invalid(f, "negative");
  f = Format::parse("n=10 k=10");
  f.experts = 0;
  expect_invalid(f, "experts");
  f = Format::parse("n=10 k=10");
  f.group_k = 0;
  expect_invalid(f, "group_k > 0");
  f = Format::parse("n=10 k=10 s=f32:b128x128");
  f.group_n = -5;
  expect_invalid(f, "group_n > 0");
  expect_invalid(Format::parse("n=9223372036854775807 k=3"), "64 bits");
  expect_invalid(Format::parse("n=4294967296 k=4294967296 e=2"), "64 bits");
}

// The examples in docs/format.md are canonical strings of supported formats.
TEST(FormatDocs, ExamplesAreCanonicalAndSupported) {
  std::string root = HM_TEST_SOURCE_DIR;  // <repo>/tests
  root.resize(root.size() - std::string("/tests").size());
  std::ifstream in(root + "/docs/format.md");
  ASSERT_TRUE(in) << "cannot read docs/format.md";
  std::string line;
  bool in_block = false;
  int examples = 0;
  while (std::getline(in, line)) {
    if (line.rfind("```", 0) == 0) {
      in_block = !in_block;
      continue;
    }
    if (!in_block || line.rfind("w=", 0) != 0) continue;
    const Format f = Format::parse(line);
    EXPECT_EQ(f.to_string(), line);
    EXPECT_NO_THROW(validate(f, std::nullopt)) << line;
    ++examples;
  }
  EXPECT_GE(examples, 5);
}

}  // namespace
}  // namespace hm::core
