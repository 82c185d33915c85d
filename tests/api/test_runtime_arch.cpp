// Architecture naming as the runtime uses it (compute capability -> compile target, and back
// through the parser); the parser's full grammar is tested in tests/host/test_format_arch.cpp.
#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"
#include "runtime/arch.hpp"

namespace hm::runtime {
namespace {

TEST(RuntimeArch, NamesTheTargetOfEveryKnownComputeCapability) {
  const struct {
    int major, minor;
    const char* arch;
  } cases[] = {
      {7, 5, "sm_75"},
      {8, 0, "sm_80"},
      {8, 6, "sm_86"},
      {8, 7, "sm_87"},
      {8, 9, "sm_89"},
      {9, 0, "sm_90a"},
      {10, 0, "sm_100a"},
      {10, 3, "sm_103a"},
      {11, 0, "sm_110a"},
      {12, 0, "sm_120a"},
      {12, 1, "sm_121a"},
      {13, 0, "sm_130"},  // unknown future arch: the plain, forward-compatible target
  };
  for (const auto& c : cases) {
    EXPECT_EQ(arch_for_compute_capability(c.major, c.minor), c.arch) << c.major << "." << c.minor;
    const Arch arch = native_arch(c.major, c.minor);
    EXPECT_EQ(arch.major, c.major);
    EXPECT_EQ(arch.minor, c.minor);
    EXPECT_EQ(parse_arch(c.arch), arch) << c.arch << " must parse back to itself";
  }
}

TEST(RuntimeArch, RejectsBadStringsWithAClearMessage) {
  const struct {
    const char* text;
    const char* reason;  // a piece of the message that says what is wrong
  } cases[] = {
      {"", "empty"},
      {"sm_", "no compute capability number"},
      {"sm_9", "major and the minor"},
      {"sm_1000", "major and the minor"},
      {"sm_90x", "not a compute capability number"},
      {"sm_90aa", "not a compute capability number"},
      {"gfx90a", "not a compute capability number"},
      {"sm_-90", "not a compute capability number"},
      {"sm_09", "major version must be at least 1"},
      {"9.10", "one-digit minor"},
      {"sm_80a", "from sm_90a on"},
      {"sm_90f", "from sm_100f on"},
  };
  for (const auto& c : cases) {
    try {
      parse_arch(c.text);
      ADD_FAILURE() << "'" << c.text << "' was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), HM_ERROR_PARSE) << c.text;
      const std::string message = e.message();
      EXPECT_NE(message.find(std::string("'") + c.text + "'"), std::string::npos) << message;
      EXPECT_NE(message.find(c.reason), std::string::npos) << message;
      EXPECT_NE(message.find("expected sm_<major><minor>"), std::string::npos) << message;
    }
  }
}

}  // namespace
}  // namespace hm::runtime
