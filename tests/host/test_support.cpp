// The support rules: every rule accepts and rejects at least one format and names itself; real
// checkpoint formats land where they should; the matrix agrees with validate().
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/support.hpp"

namespace hm::core {
namespace {

// Parses a format, adding n=4096 k=4096 unless the text sets the shape itself.
Format fmt(const std::string& text) {
  const bool has_shape = text.find("n=") != std::string::npos || text.find("k=") != std::string::npos;
  return Format::parse(has_shape ? text : "n=4096 k=4096 " + text);
}

std::optional<Arch> target(const char* arch) {
  if (arch == nullptr || *arch == '\0') return std::nullopt;
  return parse_arch(arch);
}

std::string ids(const std::vector<Violation>& violations) {
  std::string out;
  for (const Violation& v : violations) out += std::string(v.rule->id) + " ";
  return out;
}

struct RuleCase {
  const char* id;
  const char* arch;  // "" for no target
  const char* accepted;
  std::vector<const char*> rejected;  // each must break this rule first
};

// clang-format off
const RuleCase kCases[] = {
  {"R1", "", "n=1 k=1", {"n=0 k=4096", "n=4096 k=0", "n=0 k=0 e=3"}},
  {"R2", "", "n=16777216 k=16777216 e=4096 s=f16:g16777216", {"n=16777217 k=16", "n=16 k=16777217", "n=16 k=16 e=4097", "n=16 k=64 s=f16:g16777232", "n=16 k=64 s=f32:b128x16777232"}},
  {"R3", "", "w=e4m3 a=e4m3 s=f32:channel", {"a=e3m2 w=e3m2 s=f32:channel", "a=e4m3ieee w=e4m3 s=f32:channel", "a=f32 w=int4 s=f32:channel", "a=uint8 s=f32:channel"}},
  {"R4", "", "c=bf16", {"c=f32", "c=e4m3", "c=int8"}},
  {"R5", "", "acc=f16 a=f16", {"acc=int8", "acc=bf16", "acc=f16 a=bf16 c=bf16 s=bf16:g128", "acc=f16 a=int8 w=int4 s=f32:channel"}},
  {"R6", "", "w=int1 a=f16 s=none", {"w=ue8m0", "w=f32 a=f16 s=none", "w=int1 s=f16:channel", "w=int1 a=int8 s=tensor"}},
  {"R7", "", "w=int8 a=int8 s=f32:channel", {"w=int8 a=int4 s=f32:channel", "w=bf16 a=e4m3 s=none", "w=e4m3 a=e2m1 s=e4m3:g16"}},
  {"R8", "", "w=uint5b16 a=e4m3 s=f32:channel", {"w=uint6b32 a=e4m3 s=f32:channel", "w=uint5 a=e4m3 s=f32:channel", "w=uint4 zp=uint4 a=e5m2 s=f32:channel", "w=int4 a=e0m3 s=f32:channel"}},
  {"R9", "", "w=e5m2 a=f16 s=f16:channel", {"w=e5m2 a=e4m3 s=f32:channel", "w=e3m4 a=e4m3 s=f32:channel", "w=e5m2fn a=f16", "w=e5m1 a=e5m2 s=f32:channel", "w=e4m3finite a=e4m3 s=f32:channel", "w=bf16 a=f16 s=none"}},
  {"R10", "", "w=uint7 zp=uint7 a=int8 s=f32:channel", {"w=uint8 zp=uint8 a=int8 s=f32:channel", "w=uint8 a=int8 s=f32:channel", "w=uint4 a=int4 s=f32:channel"}},
  {"R11", "", "w=e2m1 a=int8 s=ue8m0:g32", {"w=e2m1 a=int4 s=f32:channel", "w=e3m2 a=int8 s=f32:channel", "w=e4m3 a=int8 s=f32:channel"}},
  {"R12", "", "w=uint4 zp=uint4", {"w=int4 zp=uint4", "w=uint4b8 zp=uint4", "w=e2m1 zp=f16"}},
  {"R13", "", "w=uint8 zp=uint8 s=bf16:g128 a=bf16 c=bf16", {"w=uint4 zp=uint8", "w=uint4 zp=int4", "w=uint4 zp=uint4b8"}},
  {"R14", "", "w=uint4 zp=f16", {"w=uint4 zp=bf16", "w=uint4 zp=e4m3", "w=uint4 zp=f32", "w=uint4 zp=f16 a=int8 s=f32:channel", "w=uint4 zp=ue8m0"}},
  {"R15", "", "w=uint4 zp=uint4 s=f32:channel", {"w=uint4 zp=uint4 s=tensor", "w=uint4 zp=uint4 s=none", "w=uint4 zp=uint4 s=f16:g128+tensor", "w=uint4 zp=uint4 a=e4m3 s=f32:b128x128", "w=uint4 zp=uint4 c=bf16 a=bf16 s=ue8m0:g32"}},
  {"R16", "", "w=e4m3 a=e4m3 s=e5m2:channel", {"s=int8:g128", "s=e2m1:g32", "s=uint8:channel", "s=e3m4:channel"}},
  {"R17", "", "s=f16:g48", {"s=f16:g8", "s=f16:g100", "s=f16:g1", "a=e4m3 w=e4m3 s=f32:b128x8", "a=e4m3 w=e4m3 s=f32:b128x100"}},
  {"R18", "", "a=e4m3 w=uint4b8 c=bf16 s=bf16:g64", {"a=e4m3 w=uint4b8 s=bf16:g48", "a=int4 w=int4 s=f16:g32", "a=int8 w=int4 s=f32:b16x128"}},
  {"R19", "", "a=bf16 c=bf16 w=e2m1 s=ue8m0:g32", {"a=f16 w=e2m1 s=ue8m0:g32", "s=bf16:g128", "a=bf16 c=bf16 s=f16:g128", "a=bf16 c=bf16 s=f32:g128", "s=f32:b128x128"}},
  {"R20", "", "w=e2m1 a=e2m1 c=bf16 s=e4m3:g16+tensor", {"w=e2m1 a=e2m1 s=f16:g16", "w=e2m1 a=e2m1 s=ue8m0:g16", "w=e2m1 a=e2m1 s=f32:g64", "w=e2m1 a=e2m1 s=e5m2:g32"}},
  {"R21", "", "w=e2m1 a=bf16 c=bf16 s=ue8m0:g64", {"w=e2m1 a=bf16 c=bf16 s=ue8m0:g48", "w=e2m1 a=bf16 c=bf16 s=ue8m0:g16+tensor"}},
  {"R22", "", "a=e4m3:g128 w=e4m3 s=f32:b128x128", {"a=f16:g128", "a=e4m3:g16 w=e4m3 s=f32:channel", "a=int8:g48 w=int8 s=f32:channel", "a=e2m1:g8 w=e2m1 c=bf16 s=e4m3:g16+tensor", "a=e2m1:g40 w=e2m1 c=bf16 s=e4m3:g16+tensor"}},
  {"R23", "sm_75", "", {}},
  {"R24", "sm_86", "a=int4 w=int4 s=f32:channel", {}},
  {"R25", "sm_80", "c=bf16", {}},
};
// The architecture rules take the target from the case: (rule, arch, format) that must break.
struct ArchCase { const char* id; const char* arch; const char* format; };
const ArchCase kArchCases[] = {
  {"R23", "sm_70", ""},
  {"R23", "sm_61", "a=int8 w=int4 s=f32:channel"},
  {"R24", "sm_90a", "a=int4 w=int4 s=f32:channel"},
  {"R24", "sm_100a", "a=int4 w=int4 s=f32:channel"},
  {"R24", "sm_75", "a=bf16 c=bf16 s=bf16:g128"},
  {"R24", "sm_86", "a=e4m3 w=e4m3 s=f32:channel"},
  {"R24", "sm_120", "a=e2m1 w=e2m1 s=e4m3:g16+tensor"},
  {"R24", "sm_90a", "a=e2m1 w=e2m1 s=e4m3:g16+tensor"},
  {"R24", "sm_107a", "a=e3m4 w=e3m4 s=f32:channel"},
  {"R25", "sm_75", "c=bf16"},
};
// clang-format on

TEST(SupportRules, IdsAreUniqueAndSequentialWithSentences) {
  const std::vector<Rule>& rules = support_rules();
  ASSERT_FALSE(rules.empty());
  std::set<std::string> names;
  bool arch_part = false;
  for (size_t i = 0; i < rules.size(); ++i) {
    EXPECT_EQ(std::string(rules[i].id), "R" + std::to_string(i + 1));
    EXPECT_TRUE(names.insert(rules[i].name).second) << rules[i].name;
    EXPECT_GT(std::string(rules[i].sentence).size(), 40u) << rules[i].id;
    EXPECT_EQ(std::string(rules[i].sentence).find('|'), std::string::npos) << "breaks the docs table";
    EXPECT_TRUE(rules[i].status == HM_ERROR_UNSUPPORTED_FORMAT || rules[i].status == HM_ERROR_UNSUPPORTED_ARCH);
    // Format rules first, then the target rules: the first violation decides the status.
    if (rules[i].status == HM_ERROR_UNSUPPORTED_ARCH) arch_part = true;
    else EXPECT_FALSE(arch_part) << rules[i].id << " comes after an arch rule";
    EXPECT_EQ(&support_rule(rules[i].id), &rules[i]);
  }
  EXPECT_THROW(support_rule("R0"), Error);
}

TEST(SupportRules, EveryRuleAcceptsAndRejectsAndNamesItself) {
  std::set<std::string> accepted, rejected;
  for (const RuleCase& c : kCases) {
    SCOPED_TRACE(c.id);
    const Format ok = fmt(c.accepted);
    EXPECT_NO_THROW(validate(ok, target(c.arch))) << ok.to_string();
    EXPECT_TRUE(check(ok, target(c.arch)).empty()) << ids(check(ok, target(c.arch)));
    accepted.insert(c.id);
    for (const char* text : c.rejected) {
      const Format bad = fmt(text);
      const std::vector<Violation> v = check(bad, std::nullopt);
      ASSERT_FALSE(v.empty()) << text;
      EXPECT_EQ(std::string(v[0].rule->id), c.id) << text << " broke " << ids(v);
      try {
        validate(bad, std::nullopt);
        ADD_FAILURE() << text;
      } catch (const Error& e) {
        EXPECT_EQ(e.status(), support_rule(c.id).status);
        EXPECT_NE(e.message().find(std::string("rule ") + c.id + " " + support_rule(c.id).name + ":"),
                  std::string::npos) << e.message();
        EXPECT_NE(e.message().find("Here: "), std::string::npos) << e.message();
      }
      rejected.insert(c.id);
    }
  }
  for (const ArchCase& c : kArchCases) {
    SCOPED_TRACE(std::string(c.id) + " on " + c.arch);
    const Format f = fmt(c.format);
    EXPECT_NO_THROW(validate(f, std::nullopt)) << "the format itself is fine: " << f.to_string();
    const std::vector<Violation> v = check(f, target(c.arch));
    ASSERT_FALSE(v.empty()) << f.to_string();
    EXPECT_EQ(std::string(v[0].rule->id), c.id) << ids(v);
    try {
      validate(f, target(c.arch));
      ADD_FAILURE() << f.to_string();
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), HM_ERROR_UNSUPPORTED_ARCH);
      EXPECT_NE(e.message().find(std::string("rule ") + c.id), std::string::npos) << e.message();
      EXPECT_NE(e.message().find(c.arch), std::string::npos) << e.message();
    }
    rejected.insert(c.id);
  }
  for (const Rule& r : support_rules()) {
    EXPECT_TRUE(accepted.count(r.id)) << r.id << " has no accepted case";
    EXPECT_TRUE(rejected.count(r.id)) << r.id << " has no rejected case";
  }
}

TEST(SupportRules, MessageNamesTheOffendingValuesAndTheOtherBrokenRules) {
  try {
    validate(fmt("w=e5m2 a=e4m3 c=f32 s=f32:channel"), std::nullopt);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_UNSUPPORTED_FORMAT);
    EXPECT_NE(e.message().find("rule R4 output-dtype"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("c=f32"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("Also broken: R9"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("w=e5m2 a=e4m3 c=f32"), std::string::npos) << "the format is quoted";
  }
  const std::vector<Violation> v = check(fmt("w=e5m2 a=e4m3 s=f32:channel"), std::nullopt);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].detail, "w=e5m2 is e5m2, a=e4m3 is e4m3");
}

// Formats real checkpoints convert to (humming-facts §4), on the targets that run them.
TEST(SupportRules, CheckpointFormats) {
  struct Case {
    const char* format;
    const char* supported_on;  // space separated
    const char* unsupported_on;
  };
  const Case cases[] = {
      {"w=uint4b8 a=f16 c=f16 s=f16:g128", "sm_75 sm_80 sm_90a sm_120a", ""},                     // GPTQ
      {"w=uint4 zp=uint4 a=f16 c=f16 s=f16:g128", "sm_75 sm_90a", ""},                              // AWQ
      {"w=uint4 zp=bf16 a=bf16 c=bf16 s=bf16:g64", "sm_80", "sm_75"},                               // HQQ-style
      {"w=e4m3 a=e4m3 c=bf16 s=f32:channel", "sm_89 sm_90a sm_100a sm_120", "sm_80 sm_86"},           // FP8
      {"w=e4m3 a=e4m3 c=bf16 s=f32:b128x128", "sm_90a", "sm_80"},                                   // DeepSeek FP8
      {"w=e4m3 a=bf16 c=bf16 s=bf16:channel", "sm_80", "sm_75"},                                    // FP8 W8A16
      {"w=e2m1 a=bf16 c=bf16 s=ue8m0:g32", "sm_80 sm_90a", ""},                                     // MXFP4 W4A16
      {"w=e2m1 a=e4m3 c=bf16 s=ue8m0:g32", "sm_89 sm_90a", "sm_80"},                                // MXFP4 W4A8
      {"w=e2m1 a=int8 c=bf16 s=ue8m0:g32", "sm_80 sm_90a", ""},                                     // MXFP4 -> INT8
      {"w=e2m1 a=bf16 c=bf16 s=e4m3:g16+tensor", "sm_80", ""},                                      // NVFP4 W4A16
      {"w=e2m1 a=e2m1 c=bf16 s=e4m3:g16+tensor", "sm_100a sm_103a sm_120a sm_121a sm_120f", "sm_90a sm_120 sm_100"},  // NVFP4 W4A4
      {"w=e2m1 a=e2m1 c=bf16 s=ue8m0:g32", "sm_100a sm_120a", "sm_89"},                             // MXFP4 W4A4
      {"w=uint4b8 a=int8 c=f16 s=f16:g128", "sm_75 sm_90a", ""},                                    // W4A8 int
      {"w=uint4b8 a=e4m3 c=bf16 s=bf16:g128", "sm_89 sm_90a", "sm_80"},                             // W4A8 fp8
      {"w=int4 a=int4 c=f16 s=f16:channel", "sm_80 sm_86 sm_89", "sm_75 sm_90a sm_100a sm_120a"},   // W4A4 int
      {"w=uint2b2 a=int8 c=bf16 s=f32:channel", "sm_80", ""},                                       // BitNet
      {"w=int8 a=int8 c=bf16 s=f32:channel", "sm_80", ""},                                          // W8A8
      {"w=e3m4 a=f16 c=f16 s=f16:channel", "sm_75 sm_90a", ""},                                     // e3m4 weights: any arch
      {"w=e3m4 a=e3m4 c=bf16 s=f32:channel", "sm_100a sm_120a sm_110a", "sm_90a sm_100 sm_107a"},   // native e3m4 MMA
      {"w=e0m3 a=e0m3 c=bf16 s=f32:channel", "sm_100a sm_121a", "sm_89 sm_120"},                    // native e0m3 MMA
      {"w=bf16 a=bf16 c=bf16 s=none", "sm_80", ""},                                                 // unquantized
      {"w=uint4b8 a=f16 c=f16 s=f16:g128 e=256 bias=1", "sm_75", ""},                               // MoE
  };
  auto split = [](const std::string& s) {
    std::vector<std::string> out;
    size_t i = 0;
    while (i < s.size()) {
      size_t j = s.find(' ', i);
      if (j == std::string::npos) j = s.size();
      if (j > i) out.push_back(s.substr(i, j - i));
      i = j + 1;
    }
    return out;
  };
  for (const Case& c : cases) {
    const Format f = fmt(c.format);
    EXPECT_TRUE(check(f, std::nullopt).empty()) << c.format << ": " << ids(check(f, std::nullopt));
    for (const std::string& a : split(c.supported_on))
      EXPECT_TRUE(check(f, parse_arch(a)).empty()) << c.format << " on " << a << ": " << ids(check(f, parse_arch(a)));
    for (const std::string& a : split(c.unsupported_on)) {
      const std::vector<Violation> v = check(f, parse_arch(a));
      ASSERT_FALSE(v.empty()) << c.format << " on " << a;
      EXPECT_EQ(v[0].rule->status, HM_ERROR_UNSUPPORTED_ARCH) << c.format << " on " << a;
    }
  }
}

TEST(SupportRules, TargetlessValidationMeansSomeKnownTarget) {
  for (const Dtype w : all_named_dtypes()) {
    for (const ActivationSupport& act : supported_activations()) {
      Format f = fmt("s=f32:channel");
      f.weight = w;
      f.activation = act.dtype;
      f.output = Dtype::from_code(HM_DTYPE_BF16);
      const bool anywhere = check(f, std::nullopt).empty();
      bool some = false;
      for (const Arch& a : known_archs()) some = some || check(f, a).empty();
      EXPECT_EQ(anywhere, some) << f.to_string();
    }
  }
  for (const ActivationSupport& act : supported_activations()) {
    int runs = 0;
    for (const Arch& a : known_archs()) runs += act.runs_on(a) ? 1 : 0;
    EXPECT_GT(runs, 0) << act.dtype.name() << " runs on no target of the compile matrix";
  }
}

}  // namespace
}  // namespace hm::core
