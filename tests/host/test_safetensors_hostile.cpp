// The safetensors reader against files the usual writers do not make (issue 16): zero-byte
// tensors placed where other tensors' bytes are (legal, and what the converter writes), duplicate
// names (refused, naming the tensor), and paths that are not regular files (a FIFO must not
// block the reader, a device must not be read).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/safetensors.hpp"

namespace {

using hm::io::Header;
using hm::io::parse_header;

std::vector<uint8_t> with_header(const std::string& json, size_t data_bytes) {
  std::vector<uint8_t> out;
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<uint8_t>(static_cast<uint64_t>(json.size()) >> (8 * i)));
  out.insert(out.end(), json.begin(), json.end());
  out.resize(out.size() + data_bytes, 0);
  return out;
}

Header parse(const std::string& json, size_t data_bytes) {
  const std::vector<uint8_t> image = with_header(json, data_bytes);
  Header h = parse_header(image.data(), image.size(), "test");
  for (auto& t : h.tensors) t.data = nullptr;  // the image dies here
  return h;
}

std::string parse_error(const std::string& json, size_t data_bytes) {
  try {
    parse(json, data_bytes);
  } catch (const hm::Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_PARSE);
    return e.message();
  }
  ADD_FAILURE() << "parsed: " << json;
  return "";
}

std::string entry(const std::string& name, uint64_t begin, uint64_t end) {
  return "\"" + name + "\":{\"dtype\":\"U8\",\"shape\":[" + std::to_string(end - begin) +
         "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(end) + "]}";
}

TEST(SafetensorsHostile, ZeroByteTensorsMayShareOffsetsWithOtherTensors) {
  // Zero-byte tensors own no bytes, so they overlap nothing: at the start of the next tensor
  // (what the writers produce), inside another tensor, or at the end of the data.
  const std::vector<std::string> headers = {
      "{" + entry("a", 0, 8) + "," + entry("z", 8, 8) + "," + entry("b", 8, 16) + "}",
      "{" + entry("b", 8, 16) + "," + entry("z", 8, 8) + "," + entry("a", 0, 8) + "}",
      "{" + entry("a", 0, 16) + "," + entry("z", 4, 4) + "}",
      "{" + entry("a", 0, 16) + "," + entry("z", 0, 0) + "," + entry("y", 0, 0) + "}",
      "{" + entry("a", 0, 16) + "," + entry("z", 16, 16) + "}",
  };
  for (const std::string& h : headers) {
    Header parsed;
    ASSERT_NO_THROW(parsed = parse(h, 16)) << h;
    EXPECT_GE(parsed.tensors.size(), 2u);
  }
  // Real overlaps are still refused.
  EXPECT_NE(parse_error("{" + entry("a", 0, 8) + "," + entry("b", 4, 12) + "}", 16).find("overlaps"),
            std::string::npos);
  EXPECT_NE(parse_error("{" + entry("a", 0, 16) + "," + entry("z", 4, 4) + "," + entry("b", 8, 12) +
                            "}",
                        16)
                .find("overlaps"),
            std::string::npos);
}

TEST(SafetensorsHostile, TheStreamWriterOutputWithEmptyTensorsReadsBack) {
  const std::string path =
      std::string(HM_TEST_BINARY_DIR) + "/hostile_empty_" + std::to_string(::getpid());
  {
    hm::io::SafetensorsStreamWriter w(path, 1024);
    std::vector<uint8_t> a(8, 1), b(8, 2);
    w.append("a", "U8", {8}, a.data(), a.size());
    w.append("empty", "F16", {0, 4096}, nullptr, 0);
    w.append("b", "U8", {8}, b.data(), b.size());
    w.finish();
  }
  {
    const hm::io::SafetensorsFile f(path);
    ASSERT_NE(f.find("empty"), nullptr);
    EXPECT_EQ(f.find("empty")->bytes, 0u);
    EXPECT_EQ(f.find("b")->data[7], 2);
  }
  std::remove(path.c_str());
}

TEST(SafetensorsHostile, DuplicateNamesAreRefusedNamingThem) {
  const std::string message =
      parse_error("{" + entry("model.w", 0, 8) + "," + entry("model.w", 8, 16) + "}", 16);
  EXPECT_NE(message.find("'model.w'"), std::string::npos) << message;
  EXPECT_NE(message.find("more than once"), std::string::npos) << message;
  // A repeated field inside an entry, and a repeated metadata key, are just as ambiguous.
  EXPECT_NE(parse_error("{\"a\":{\"dtype\":\"U8\",\"dtype\":\"I8\",\"shape\":[8],"
                        "\"data_offsets\":[0,8]}}",
                        8)
                .find("'dtype'"),
            std::string::npos);
  EXPECT_NE(parse_error("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}," + entry("a", 0, 8) + "}", 8)
                .find("'k'"),
            std::string::npos);
  EXPECT_NE(parse_error("{\"__metadata__\":{},\"__metadata__\":{}," + entry("a", 0, 8) + "}", 8)
                .find("__metadata__"),
            std::string::npos);
}

// Opens `path` with the reader on another thread; when it is still blocked after two seconds,
// unblocks it by opening the FIFO for writing and fails.
std::string open_without_blocking(const std::string& path) {
  auto opened = std::async(std::launch::async, [&]() -> std::string {
    try {
      hm::io::SafetensorsFile f(path);
      return "opened";
    } catch (const hm::Error& e) {
      return std::to_string(e.status()) + " " + e.message();
    }
  });
  if (opened.wait_for(std::chrono::seconds(2)) == std::future_status::timeout) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
    ADD_FAILURE() << "the reader blocked opening " << path;
    if (fd >= 0) ::close(fd);
  }
  return opened.get();
}

TEST(SafetensorsHostile, AFifoIsRefusedWithoutBlocking) {
  const std::string fifo =
      std::string(HM_TEST_BINARY_DIR) + "/hostile_fifo_" + std::to_string(::getpid());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string result = open_without_blocking(fifo);
  ::unlink(fifo.c_str());
  EXPECT_EQ(result.rfind(std::to_string(HM_ERROR_IO) + " ", 0), 0u) << result;
  EXPECT_NE(result.find("not a regular file"), std::string::npos) << result;
}

TEST(SafetensorsHostile, DevicesAreRefused) {
  const std::string result = open_without_blocking("/dev/zero");
  EXPECT_NE(result.find("not a regular file"), std::string::npos) << result;
}

}  // namespace
