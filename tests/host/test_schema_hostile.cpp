// Hostile checkpoints (issue 16): tensors with a zero dimension, scale tensors with no groups
// and shapes whose products overflow must be refused with a message naming the tensor, before
// the converters divide by a dimension or allocate from one.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "io/safetensors.hpp"
#include "test_schema_support.hpp"

namespace {

using namespace schema_test;

hm_convert_options_t options_with_bits(int bits) {
  hm_convert_options_t o;
  hm_convert_options_init(&o);
  o.bits = bits;
  return o;
}

std::vector<uint32_t> words(size_t count) { return std::vector<uint32_t>(count, 0x88888888u); }

// A scale tensor with no groups used to reach `k % groups` (SIGFPE) in every integer scheme.
TEST(SchemaHostile, ScaleTensorsWithoutGroupsAreRefusedNamingTheTensor) {
  const hm_convert_options_t bits4 = options_with_bits(4);
  struct Case {
    const char* what;
    int32_t scheme;
    std::vector<Tensor> tensors;
    const char* named;
  };
  const std::vector<Case> cases = {
      {"gptq",
       HM_SCHEME_GPTQ,
       {make_tensor("l.qweight", "I32", {8, 64}, words(8 * 64)),
        make_tensor("l.scales", "F16", {0, 64}, std::vector<uint16_t>{})},
       "l.scales"},
      {"awq",
       HM_SCHEME_AWQ,
       {make_tensor("l.qweight", "I32", {64, 8}, words(64 * 8)),
        make_tensor("l.qzeros", "I32", {0, 8}, std::vector<uint32_t>{}),
        make_tensor("l.scales", "F16", {0, 64}, std::vector<uint16_t>{})},
       "l.qzeros"},  // the first of the two tensors without groups
      {"ct-pack",
       HM_SCHEME_CT_PACK,
       {make_tensor("l.weight_packed", "I32", {64, 8}, words(64 * 8)),
        make_tensor("l.weight_shape", "I64", {2}, std::vector<int64_t>{64, 64}),
        make_tensor("l.weight_scale", "F16", {64, 0}, std::vector<uint16_t>{})},
       "l.weight_scale"},
  };
  for (const Case& c : cases) {
    const Converted r = convert(c.scheme, c.tensors, &bits4);
    EXPECT_EQ(r.status, HM_ERROR_INVALID_ARGUMENT) << c.what << ": " << r.error;
    EXPECT_NE(r.error.find(c.named), std::string::npos) << c.what << ": " << r.error;
  }
}

// Dimensions of an empty tensor are not bounded by its bytes: products of them may overflow
// (qweight [0, 2^61] * 8 columns per word), so empty tensors are refused first.
TEST(SchemaHostile, EmptyTensorsAreRefusedBeforeTheirShapesAreUsed) {
  const hm_convert_options_t bits4 = options_with_bits(4);
  const int64_t huge = int64_t{1} << 61;
  struct Case {
    const char* what;
    int32_t scheme;
    std::vector<Tensor> tensors;
    const char* named;
  };
  const std::vector<Case> cases = {
      {"awq",
       HM_SCHEME_AWQ,
       {make_tensor("l.qweight", "I32", {0, huge}, std::vector<uint32_t>{}),
        make_tensor("l.qzeros", "I32", {1, 8}, words(8)),
        make_tensor("l.scales", "F16", {1, 64}, std::vector<uint16_t>(64, 0x3c00))},
       "l.qweight"},
      {"gptq",
       HM_SCHEME_GPTQ,
       {make_tensor("l.qweight", "I32", {huge, 0}, std::vector<uint32_t>{}),
        make_tensor("l.scales", "F16", {1, 64}, std::vector<uint16_t>(64, 0x3c00))},
       "l.qweight"},
      {"fp8",
       HM_SCHEME_FP8,
       {make_tensor("l.weight", "F8_E4M3", {huge, 0}, std::vector<uint8_t>{}),
        make_tensor("l.weight_scale", "F32", {}, std::vector<float>{1.0f})},
       "l.weight"},
  };
  for (const Case& c : cases) {
    const Converted r = convert(c.scheme, c.tensors, &bits4);
    EXPECT_EQ(r.status, HM_ERROR_INVALID_ARGUMENT) << c.what << ": " << r.error;
    EXPECT_NE(r.error.find(c.named), std::string::npos) << c.what << ": " << r.error;
    EXPECT_NE(r.error.find("no elements"), std::string::npos) << c.what << ": " << r.error;
  }
}

// A 160-byte FP8 file whose weight is [2^31, 0] with two different per-shard scales made
// `humming convert` allocate 2^31 per-row scales (twice: 16 GiB) before noticing that the weight
// holds nothing. Run in a child with its address space capped at 1 GiB, so a regression fails
// (out of memory) instead of taking the machine's memory.
TEST(SchemaHostile, AnEmptyWeightWithAHugeShapeAllocatesNothing) {
  char dir_template[] = "/tmp/hm-hostile-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template, in = dir + "/in.safetensors", out = dir + "/out.safetensors";
  {
    hm::io::SafetensorsWriter w;
    w.add_owned("l.weight", "F8_E4M3", {int64_t{1} << 31, 0}, {});
    std::vector<uint8_t> scales(8);
    const float s[2] = {1.0f, 2.0f};
    std::memcpy(scales.data(), s, 8);
    w.add_owned("l.weight_scale", "F32", {2}, scales);
    w.write(in);
  }
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(fds[0]);
#if !defined(__SANITIZE_ADDRESS__)  // ASan reserves terabytes of address space up front
    const rlimit cap{rlim_t{1} << 30, rlim_t{1} << 30};
    ::setrlimit(RLIMIT_AS, &cap);
#endif
    const hm_status_t status = hm_convert_file("fp8", in.c_str(), out.c_str(), nullptr);
    const std::string report = std::to_string(status) + " " + last_error();
    if (::write(fds[1], report.data(), report.size()) < 0) ::_exit(3);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string report;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) report.append(buf, size_t(n));
  ::close(fds[0]);
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  std::remove(in.c_str());
  std::remove(out.c_str());
  ::rmdir(dir.c_str());
  ASSERT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << "the converter crashed";
  EXPECT_EQ(report.rfind(std::to_string(HM_ERROR_INVALID_ARGUMENT) + " ", 0), 0u) << report;
  EXPECT_NE(report.find("l.weight"), std::string::npos) << report;
  EXPECT_NE(report.find("no elements"), std::string::npos) << report;
}

}  // namespace
