// Publishing output files (issue 16): hm_convert_file and the safetensors writers write a
// temporary file of their own next to the output (created exclusively, under a unique name),
// fsync it and rename it into place. So two writers of one path each publish a whole file, an
// input named like a temporary file is never truncated, a symlink planted where a temporary file
// used to go is not followed, and an output path that names the input file is refused.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "humming.h"
#include "io/safetensors.hpp"
#include "support/last_error.hpp"

namespace {

namespace fs = std::filesystem;
using hm::test::last_error;

// A fresh directory, removed with its contents at the end of the test.
class SafeOutput : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = fs::temp_directory_path().string() + "/hm-safe-output-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  // Every entry of the directory but the ones named: no temporary file may be left behind.
  std::vector<std::string> others(const std::vector<std::string>& expected) const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      const std::string name = e.path().filename().string();
      bool known = false;
      for (const std::string& x : expected) known |= name == x;
      if (!known) out.push_back(name);
    }
    return out;
  }

  std::string dir_;
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A one-layer FP8 checkpoint (e4m3 [16, 64], one f32 per-tensor scale) and an unquantized
// tensor: the smallest file hm_convert_file converts.
void write_fp8_checkpoint(const std::string& path) {
  std::vector<uint8_t> weight(16 * 64);
  for (size_t i = 0; i < weight.size(); ++i) weight[i] = static_cast<uint8_t>(i % 0x70);
  const float scale = 0.5f;
  std::vector<uint8_t> scale_bytes(4);
  std::memcpy(scale_bytes.data(), &scale, 4);
  hm::io::SafetensorsWriter w;
  w.add_owned("layer.weight", "F8_E4M3", {16, 64}, weight);
  w.add_owned("layer.weight_scale", "F32", {}, scale_bytes);
  w.add_owned("norm", "F32", {1}, scale_bytes);
  w.write(path);
}

hm_status_t convert(const std::string& in, const std::string& out) {
  hm_convert_options_t o;
  hm_convert_options_init(&o);
  return hm_convert_file("fp8", in.c_str(), out.c_str(), &o);
}

TEST_F(SafeOutput, TwoWritersOfOnePathEachPublishAWholeFile) {
  // Interleaved in one thread, which is what two processes may do: both create their file
  // before either finishes. The last to finish wins, with its own bytes only.
  const std::string out = path("out.safetensors");
  std::vector<uint8_t> a(64, 0xaa), b(32, 0xbb), c(32, 0xcc);
  hm::io::SafetensorsStreamWriter first(out, 1024), second(out, 1024);
  first.append("a", "U8", {64}, a.data(), a.size());
  second.append("b", "U8", {32}, b.data(), b.size());
  second.append("c", "U8", {32}, c.data(), c.size());
  ASSERT_NO_THROW(first.finish());
  ASSERT_NO_THROW(second.finish());
  const hm::io::SafetensorsFile file(out);
  ASSERT_EQ(file.tensors().size(), 2u);
  ASSERT_NE(file.find("b"), nullptr);
  ASSERT_NE(file.find("c"), nullptr);
  EXPECT_EQ(std::vector<uint8_t>(file.find("b")->data, file.find("b")->data + 32), b);
  EXPECT_EQ(std::vector<uint8_t>(file.find("c")->data, file.find("c")->data + 32), c);
  EXPECT_EQ(others({"out.safetensors"}), std::vector<std::string>{});
}

TEST_F(SafeOutput, AnUnfinishedWriterLeavesNothingBehind) {
  {
    hm::io::SafetensorsStreamWriter w(path("out.safetensors"), 256);
    std::vector<uint8_t> a(8, 1);
    w.append("a", "U8", {8}, a.data(), a.size());
  }
  EXPECT_EQ(others({}), std::vector<std::string>{});
}

TEST_F(SafeOutput, AnInputNamedLikeATemporaryFileIsNotTouched) {
  // `humming convert --in X.tmp --out X` used to truncate its own input (and die of SIGBUS).
  const std::string in = path("model.tmp");
  write_fp8_checkpoint(in);
  const std::string before = read_all(in);
  ASSERT_EQ(convert(in, path("model")), HM_SUCCESS) << last_error();
  EXPECT_EQ(read_all(in), before);
  EXPECT_NO_THROW(hm::io::SafetensorsFile{path("model")});
  EXPECT_EQ(others({"model.tmp", "model"}), std::vector<std::string>{});
}

TEST_F(SafeOutput, ASymlinkWhereTheTemporaryFileUsedToGoIsNotFollowed) {
  const std::string in = path("in.safetensors"), out = path("out.safetensors");
  write_fp8_checkpoint(in);
  {
    std::ofstream(path("victim"), std::ios::binary) << "precious";
  }
  ASSERT_EQ(::symlink(path("victim").c_str(), (out + ".tmp").c_str()), 0);
  ASSERT_EQ(convert(in, out), HM_SUCCESS) << last_error();
  EXPECT_EQ(read_all(path("victim")), "precious");
  struct stat st {};
  ASSERT_EQ(::lstat(out.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode)) << "the output must be a new regular file, not the symlink";
  EXPECT_NO_THROW(hm::io::SafetensorsFile{out});
}

TEST_F(SafeOutput, AnOutputThatIsTheInputFileIsRefused) {
  const std::string in = path("m.safetensors");
  write_fp8_checkpoint(in);
  const std::string before = read_all(in);
  ASSERT_EQ(::link(in.c_str(), path("hard.safetensors").c_str()), 0);
  ASSERT_EQ(::symlink(in.c_str(), path("soft.safetensors").c_str()), 0);
  // The same file under other names: a different spelling, a hard link, a symlink.
  for (const std::string& out : {dir_ + "/./m.safetensors", dir_ + "//m.safetensors", in,
                                 path("hard.safetensors"), path("soft.safetensors")}) {
    EXPECT_EQ(convert(in, out), HM_ERROR_INVALID_ARGUMENT) << out;
    EXPECT_NE(last_error().find("is the input file"), std::string::npos) << last_error();
    EXPECT_EQ(read_all(in), before) << out;
  }
  EXPECT_EQ(others({"m.safetensors", "hard.safetensors", "soft.safetensors"}),
            std::vector<std::string>{});
}

TEST_F(SafeOutput, OutputFilesGetTheUsualPermissions) {
  // Like any new file: 0666 less the umask (a temporary file made by mkstemp would be 0600).
  const std::string in = path("in.safetensors");
  write_fp8_checkpoint(in);
  for (const mode_t mask : {mode_t{022}, mode_t{077}}) {
    const mode_t old = ::umask(mask);
    const std::string out = path("out" + std::to_string(mask));
    const hm_status_t status = convert(in, out);
    ::umask(old);
    ASSERT_EQ(status, HM_SUCCESS) << last_error();
    struct stat st {};
    ASSERT_EQ(::stat(out.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask) << std::oct << mask;
  }
}

}  // namespace
