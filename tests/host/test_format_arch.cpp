// Architecture names: every accepted spelling, the printer, the native target per device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/arch.hpp"
#include "core/error.hpp"

namespace hm::core {
namespace {

TEST(Arch, ParsesEverySpelling) {
  struct Case {
    const char* text;
    int major, minor;
    char suffix;
  };
  const Case cases[] = {
      {"sm_90a", 9, 0, 'a'},    {"SM_90A", 9, 0, 'a'},  {"sm90a", 9, 0, 'a'},   {"90a", 9, 0, 'a'},
      {"compute_90a", 9, 0, 'a'}, {"sm_80", 8, 0, 0},  {"86", 8, 6, 0},        {"sm_120a", 12, 0, 'a'},
      {"sm_121a", 12, 1, 'a'},  {"sm_100f", 10, 0, 'f'}, {"8.6", 8, 6, 0},      {"9.0a", 9, 0, 'a'},
      {" sm_75 ", 7, 5, 0},     {"12.1f", 12, 1, 'f'},  {"sm_110a", 11, 0, 'a'},
  };
  for (const Case& c : cases) {
    const Arch a = parse_arch(c.text);
    EXPECT_EQ(a.major, c.major) << c.text;
    EXPECT_EQ(a.minor, c.minor) << c.text;
    EXPECT_EQ(a.suffix, c.suffix) << c.text;
    EXPECT_EQ(parse_arch(a.name()), a) << c.text;
  }
  EXPECT_EQ(parse_arch("sm_90a").name(), "sm_90a");
  EXPECT_EQ(parse_arch("8.6").name(), "sm_86");
  EXPECT_EQ(parse_arch("sm_120a").virtual_name(), "compute_120a");
  EXPECT_EQ(parse_arch("sm_121a").compute_capability(), 121);
  EXPECT_TRUE(parse_arch("sm_100f").has_specific_features());
  EXPECT_FALSE(parse_arch("sm_100").has_specific_features());
}

TEST(Arch, RejectsWithTheAcceptedForms) {
  for (const std::string& text : std::vector<std::string>{"", "sm_", "sm_9", "sm_1000", "sm_80a", "sm_90f", "gfx90a", "9.",
                                 ".0", "9.10", "123.4", "sm_9x", "sm_0.5", "0.5", "sm_05", "a", "\x01"}) {
    try {
      const Arch a = parse_arch(text);
      ADD_FAILURE() << "'" << text << "' parsed as " << a.name();
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), HM_ERROR_PARSE) << text;
      EXPECT_NE(e.message().find("sm_90a"), std::string::npos) << e.message();
    }
  }
}

TEST(Arch, NativeTargetHasTheArchSpecificSuffixWhereOneExists) {
  EXPECT_EQ(native_arch(7, 5).name(), "sm_75");
  EXPECT_EQ(native_arch(8, 9).name(), "sm_89");
  EXPECT_EQ(native_arch(9, 0).name(), "sm_90a");
  EXPECT_EQ(native_arch(10, 0).name(), "sm_100a");
  EXPECT_EQ(native_arch(10, 3).name(), "sm_103a");
  EXPECT_EQ(native_arch(12, 1).name(), "sm_121a");
  EXPECT_EQ(native_arch(13, 0).name(), "sm_130");  // unknown future device: plain, forward PTX
  EXPECT_THROW(native_arch(0, 0), Error);
  EXPECT_THROW(native_arch(9, 10), Error);
}

TEST(Arch, KnownArchsAreTheCompileMatrixInOrder) {
  std::string names;
  int previous = 0;
  for (const Arch& a : known_archs()) {
    names += a.name() + " ";
    EXPECT_GT(a.compute_capability(), previous);
    previous = a.compute_capability();
  }
  EXPECT_EQ(names, "sm_75 sm_80 sm_86 sm_87 sm_89 sm_90a sm_100a sm_103a sm_110a sm_120a sm_121a ");
}

}  // namespace
}  // namespace hm::core
