// Inputs people type (issue 16): boolean environment variables read one way everywhere, user
// text quoted (control bytes escaped) wherever it lands in a message, and integers in the tuning
// JSON and on the command line refused when out of range instead of truncated.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "core/error.hpp"
#include "humming.h"
#include "jit/cache.hpp"
#include "jit/compiler.hpp"
#include "jit/kernel_sources.hpp"
#include "support/last_error.hpp"
#include "test_cache_support.hpp"
#include "gemm/family.hpp"

namespace {

using hm::test::last_error;
using hm::jit::test::EnvGuard;

// No raw control byte (the hostile strings below carry ESC, BEL, DEL and a NUL-free newline
// stand-in) may reach a message; multi-line messages keep their own newlines.
void expect_escaped(const std::string& message, const std::string& context) {
  for (unsigned char c : message)
    if ((c < 0x20 && c != '\n') || c == 0x7f) {
      ADD_FAILURE() << context << ": raw byte 0x" << std::hex << int(c) << " in: " << message;
      return;
    }
}

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const hm::Error& e) {
    return e.message();
  }
  ADD_FAILURE() << "expected an hm::Error";
  return "";
}

const char kHostile[] = "x\x1b[31m\x07\x7f\x01y";

TEST(EnvironmentFlags, OneParserForEveryBooleanVariable) {
  const std::string dir = hm::jit::make_temp_directory(hm::jit::temp_root(), "hm-env-test-");
  for (const char* on : {"1", "true", "TRUE", "yes", "Yes", "on", "ON"}) {
    EnvGuard env("HUMMING_DISABLE_JIT", on);
    EXPECT_TRUE(hm::jit::Cache(dir, false, false).jit_disabled()) << on;
  }
  for (const char* off : {"0", "", "false", "False", "no", "NO", "off", "Off"}) {
    EnvGuard env("HUMMING_DISABLE_JIT", off);
    EXPECT_FALSE(hm::jit::Cache(dir, false, false).jit_disabled()) << off;
  }
  for (const char* junk : {"2", "maybe", "enabled", " 1", "1 ", kHostile}) {
    EnvGuard env("HUMMING_DISABLE_JIT", junk);
    try {
      hm::jit::Cache cache(dir, false, false);
      ADD_FAILURE() << "HUMMING_DISABLE_JIT='" << junk << "' was accepted";
    } catch (const hm::Error& e) {
      EXPECT_EQ(e.status(), HM_ERROR_INVALID_ARGUMENT);
      EXPECT_NE(e.message().find("HUMMING_DISABLE_JIT"), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("off"), std::string::npos) << e.message();
      expect_escaped(e.message(), junk);
    }
  }
  hm::jit::remove_tree(dir);
}

TEST(Messages, UserTextIsQuotedEverywhere) {
  hm_dtype_t d = 0;
  EXPECT_EQ(hm_dtype_parse(kHostile, &d), HM_ERROR_PARSE);
  expect_escaped(last_error(), "hm_dtype_parse");
  EXPECT_NE(last_error().find("\\x1b"), std::string::npos) << last_error();

  hm_format_t* f = nullptr;
  EXPECT_EQ(hm_format_parse((std::string("w=") + kHostile).c_str(), &f), HM_ERROR_PARSE);
  expect_escaped(last_error(), "hm_format_parse");
  EXPECT_EQ(hm_format_parse((std::string("s=f16:") + kHostile).c_str(), &f), HM_ERROR_PARSE);
  expect_escaped(last_error(), "hm_format_parse scale");

  int32_t scheme = 0;
  EXPECT_EQ(hm_scheme_parse(kHostile, &scheme), HM_ERROR_PARSE);
  expect_escaped(last_error(), "hm_scheme_parse");

  const std::string path = std::string("/nonexistent/") + kHostile;
  EXPECT_EQ(hm_convert_file("gptq", path.c_str(), (path + ".out").c_str(), nullptr), HM_ERROR_IO);
  expect_escaped(last_error(), "hm_convert_file");

  expect_escaped(error_of([] { hm::gemm::parse_ranges("{\"dense\":[{\"\\u001b[2J\":1}]}"); }),
                 "tuning JSON key");
  expect_escaped(error_of([&] { hm::jit::KernelSources::from_directory(path); }),
                 "kernel source directory");
  {
    EnvGuard env("HUMMING_COMPILER", kHostile);
    expect_escaped(error_of([] { hm::jit::make_compiler(HM_COMPILER_DEFAULT); }),
                   "HUMMING_COMPILER");
  }
  expect_escaped(error_of([] { hm::jit::require_valid_arch(kHostile); }), "arch");
}

TEST(TuningJson, IntegersOutOfRangeAreRefusedNotTruncated) {
  // 4294967312 is 2^32 + 16: as an int it was 16, a valid block_m.
  for (const char* json : {
           R"({"dense":[{"block_m":4294967312}]})",
           R"({"dense":[{"warps":-4294967292}]})",
           R"({"dense":[{"max_m":18446744073709551615}]})",
           R"({"dense":[{"blocks_per_sm":4294967297}]})",
           R"({"dense":[{"kernel":"wgmma","stages":4294967300}]})",
       }) {
    try {
      hm::gemm::parse_ranges(json);
      ADD_FAILURE() << "accepted " << json;
    } catch (const hm::Error& e) {
      EXPECT_EQ(e.status(), HM_ERROR_PARSE) << json;
      EXPECT_NE(e.message().find("range"), std::string::npos) << json << ": " << e.message();
    }
  }
}

// Runs the humming command with `args` (a shell fragment); returns its exit status and stderr.
std::pair<int, std::string> run_cli(const std::string& args) {
  const std::string err = std::string(HM_TEST_BINARY_DIR) + "/cli_stderr_" +
                          std::to_string(::getpid());
  const std::string command = std::string(HM_CLI_PATH) + " " + args + " >/dev/null 2>" + err;
  const int status = std::system(command.c_str());
  std::string text;
  if (FILE* f = std::fopen(err.c_str(), "rb")) {
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
    std::fclose(f);
  }
  std::remove(err.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), text};
}

TEST(CommandLine, IntegersOutOfRangeAreRefused) {
  for (const std::string& args : {
           std::string("convert --scheme gptq --in a --out b --bits 4294967312"),
           std::string("convert --scheme gptq --in a --out b --group-size -4294967297"),
           std::string("convert --scheme gptq --in a --out b --shard-rows 1,99999999999999999999"),
           std::string("demo --m 99999999999999999999"),
           std::string("demo --seed 4294967296"),
       }) {
    const auto [status, err] = run_cli(args);
    EXPECT_EQ(status, 1) << args << ": " << err;
    EXPECT_NE(err.find("range"), std::string::npos) << args << ": " << err;
  }
}

TEST(CommandLine, UserTextIsQuoted) {
  // /bin/sh has no $'...': printf makes the control bytes.
  for (const std::string& args : {std::string("convert --bogus\"$(printf 'x\\033[2J')\""),
                                  std::string("\"$(printf '\\033[2J')\""),
                                  std::string("info \"$(printf '\\007x')\""),
                                  std::string("convert --bits \"$(printf '\\033')\"")}) {
    const auto [status, err] = run_cli(args);
    EXPECT_NE(status, 0) << args;
    expect_escaped(err, args);
  }
}

}  // namespace
