// The safetensors reader and writers: round trips, and malformed, truncated and randomly mutated
// files, which must fail with HM_ERROR_PARSE / HM_ERROR_IO naming the problem, never crash or
// read outside the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/safetensors.hpp"

namespace {

using hm::io::Header;
using hm::io::parse_header;

std::string temp_path(const std::string& name) {
  return std::string(HM_TEST_BINARY_DIR) + "/safetensors_" + name + "_" +
         std::to_string(::getpid());
}

std::vector<uint8_t> sample_image() {
  hm::io::SafetensorsWriter w;
  std::vector<uint8_t> a(24), b(2 * 3 * 2);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i * 7);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(200 - i);
  w.add_owned("model.a", "F32", {2, 3}, a);
  w.add_owned("model.b", "BF16", {2, 3}, b);
  w.add_owned("scalar", "I64", {}, std::vector<uint8_t>(8, 1));
  w.set_metadata("format", "pt");
  return w.to_bytes();
}

// Parses; on success every view must lie inside the image.
hm_status_t try_parse(const std::vector<uint8_t>& image, std::string* message = nullptr) {
  try {
    const Header h = parse_header(image.data(), image.size(), "test");
    for (const auto& t : h.tensors) {
      EXPECT_GE(t.data, image.data());
      EXPECT_LE(t.data + t.bytes, image.data() + image.size()) << t.name;
    }
    return HM_SUCCESS;
  } catch (const hm::Error& e) {
    if (message) *message = e.message();
    return e.status();
  }
}

std::vector<uint8_t> with_header(const std::string& json, size_t data_bytes) {
  std::vector<uint8_t> out;
  out.reserve(8 + json.size() + data_bytes);
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<uint8_t>(static_cast<uint64_t>(json.size()) >> (8 * i)));
  out.insert(out.end(), json.begin(), json.end());
  out.resize(out.size() + data_bytes, 0);
  return out;
}

TEST(Safetensors, RoundTripInMemory) {
  const std::vector<uint8_t> image = sample_image();
  EXPECT_EQ((image[0] | (image[1] << 8)) % 8, 0) << "the data section starts 8-byte aligned";
  const Header h = parse_header(image.data(), image.size(), "sample");
  ASSERT_EQ(h.tensors.size(), 3u);
  EXPECT_EQ(h.tensors[0].name, "model.a");
  EXPECT_EQ(h.tensors[0].dtype, "F32");
  EXPECT_EQ(h.tensors[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(h.tensors[0].data[5], 35);
  EXPECT_EQ(h.tensors[1].data[0], 200);
  EXPECT_TRUE(h.tensors[2].shape.empty());
  EXPECT_EQ(h.tensors[2].numel(), 1);
  EXPECT_EQ(h.metadata.at("format"), "pt");
}

TEST(Safetensors, RoundTripThroughFilesAndStreaming) {
  const std::string path = temp_path("stream");
  {
    hm::io::SafetensorsStreamWriter w(path, 4096);
    std::vector<float> x = {1.5f, -2.0f, 3.25f};
    w.append("x", "F32", {3}, x.data(), 12);
    std::vector<uint8_t> y(1000, 9);
    w.append("y.weight", "U8", {10, 100}, y.data(), y.size());
    w.set_metadata("humming.format.y", "w=uint4b8 a=f16");
    w.finish();
  }
  const hm::io::SafetensorsFile f(path);
  ASSERT_NE(f.find("x"), nullptr);
  ASSERT_NE(f.find("y.weight"), nullptr);
  EXPECT_EQ(f.find("nope"), nullptr);
  float x1;
  std::memcpy(&x1, f.find("x")->data + 4, 4);
  EXPECT_EQ(x1, -2.0f);
  EXPECT_EQ(f.find("y.weight")->data[999], 9);
  EXPECT_EQ(f.metadata().at("humming.format.y"), "w=uint4b8 a=f16");
  std::remove(path.c_str());

  // A writer abandoned before finish() leaves nothing behind.
  { hm::io::SafetensorsStreamWriter w(path, 64); }
  EXPECT_EQ(std::fopen((path + ".tmp").c_str(), "rb"), nullptr);
  EXPECT_EQ(std::fopen(path.c_str(), "rb"), nullptr);
}

TEST(Safetensors, WriterRefusesInconsistentTensors) {
  hm::io::SafetensorsWriter w;
  w.add_owned("a", "F16", {2}, std::vector<uint8_t>(4));
  EXPECT_THROW(w.add_owned("a", "F16", {2}, std::vector<uint8_t>(4)), hm::Error);
  EXPECT_THROW(w.add_owned("b", "F16", {3}, std::vector<uint8_t>(4)), hm::Error);
  EXPECT_THROW(w.add_owned("c", "Q4", {1}, std::vector<uint8_t>(1)), hm::Error);
}

TEST(Safetensors, FilesThatCannotBeReadAreIoErrors) {
  try {
    hm::io::SafetensorsFile f("/nonexistent/dir/model.safetensors");
    FAIL() << "opened a missing file";
  } catch (const hm::Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_IO);
    EXPECT_NE(e.message().find("model.safetensors"), std::string::npos) << e.message();
  }
  try {
    hm::io::SafetensorsFile f(HM_TEST_BINARY_DIR);
    FAIL() << "opened a directory";
  } catch (const hm::Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_IO);
  }
  const std::string empty = temp_path("empty");
  std::ofstream(empty).close();
  try {
    hm::io::SafetensorsFile f(empty);
    FAIL() << "parsed an empty file";
  } catch (const hm::Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_PARSE);
  }
  std::remove(empty.c_str());
}

TEST(Safetensors, EveryTruncationFailsCleanly) {
  const std::vector<uint8_t> image = sample_image();
  for (size_t len = 0; len < image.size(); ++len) {
    std::vector<uint8_t> cut(image.begin(), image.begin() + len);
    std::string message;
    ASSERT_EQ(try_parse(cut, &message), HM_ERROR_PARSE) << "length " << len;
  }
  // Through a real file as well (the mmap path).
  const std::string path = temp_path("trunc");
  {
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(image.data()), image.size() - 3);
  }
  try {
    hm::io::SafetensorsFile f(path);
    FAIL() << "parsed a truncated file";
  } catch (const hm::Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_PARSE);
    EXPECT_NE(e.message().find("'scalar'"), std::string::npos)
        << "names the cut tensor: " << e.message();
  }
  std::remove(path.c_str());
}

TEST(Safetensors, MalformedHeadersNameTheProblem) {
  struct Case {
    std::string json;
    size_t data;
    const char* expect;
  };
  const Case cases[] = {
      {"[1,2]", 0, "not an object"},
      {"{\"a\":", 0, "does not parse"},
      {"{\"a\":5}", 0, "not a JSON object"},
      {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "no string 'dtype'"},
      {"{\"a\":{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "non-negative"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, "non-negative"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, "backwards"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,8]}}", 4, "ends at byte 8"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, "needs 8"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4,
       "overflows"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, "data_offsets"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
       "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
       8, "overlaps"},
      {"{\"__metadata__\":{\"k\":1}}", 0, "not a string"},
      {"{\"__metadata__\":[]}", 0, "not an object"},
  };
  for (const Case& c : cases) {
    std::string message;
    EXPECT_EQ(try_parse(with_header(c.json, c.data), &message), HM_ERROR_PARSE) << c.json;
    EXPECT_NE(message.find(c.expect), std::string::npos) << c.json << " -> " << message;
  }
  // A header length beyond the file, and one beyond any sane header.
  std::vector<uint8_t> image = sample_image();
  image[0] = 0xff, image[1] = 0xff;
  std::string message;
  EXPECT_EQ(try_parse(image, &message), HM_ERROR_PARSE);
  EXPECT_NE(message.find("only"), std::string::npos) << message;
  for (int i = 0; i < 8; ++i) image[i] = 0xff;
  EXPECT_EQ(try_parse(image, &message), HM_ERROR_PARSE);
  EXPECT_NE(message.find("100 MB"), std::string::npos) << message;
}

TEST(Safetensors, RandomMutationsNeverReadOutOfBounds) {
  const std::vector<uint8_t> image = sample_image();
  const size_t header_end = 8 + (image[0] | (image[1] << 8));
  std::mt19937 rng(1234);
  int parsed = 0, refused = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> m = image;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      const size_t at = rng() % header_end;
      switch (rng() % 3) {
        case 0:
          m[at] = static_cast<uint8_t>(rng());
          break;
        case 1:
          m[at] = static_cast<uint8_t>("0123456789[]{}\",:-e."[rng() % 20]);
          break;
        default:
          m[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
          break;
      }
    }
    if (rng() % 4 == 0) m.resize(rng() % m.size());
    const hm_status_t s = try_parse(m);
    ASSERT_TRUE(s == HM_SUCCESS || s == HM_ERROR_PARSE) << "status " << s;
    (s == HM_SUCCESS ? parsed : refused)++;
  }
  EXPECT_GT(refused, 100);  // the mutations do reach the checks
}

TEST(Safetensors, RandomStructuredHeadersNeverReadOutOfBounds) {
  // Headers that are valid JSON but with random field values: the checks, not the JSON parser,
  // must catch them.
  std::mt19937 rng(99);
  const char* dtypes[] = {"F32", "F16", "U8", "I64", "BOOL", "F8_E4M3", "X", ""};
  auto number = [&]() -> std::string {
    switch (rng() % 6) {
      case 0:
        return "0";
      case 1:
        return std::to_string(rng() % 64);
      case 2:
        return std::to_string(static_cast<int64_t>(rng()) - (1ll << 31));
      case 3:
        return "18446744073709551615";
      case 4:
        return "1e300";
      default:
        return std::to_string(rng());
    }
  };
  for (int iter = 0; iter < 2000; ++iter) {
    std::string json = "{";
    const int tensors = 1 + static_cast<int>(rng() % 3);
    for (int t = 0; t < tensors; ++t) {
      json += (t ? "," : "") + std::string("\"t") + std::to_string(t) + "\":{\"dtype\":\"" +
              dtypes[rng() % 8] + "\",\"shape\":[";
      const int dims = static_cast<int>(rng() % 3);
      for (int d = 0; d < dims; ++d) json += (d ? "," : "") + number();
      json += "],\"data_offsets\":[" + number() + "," + number() + "]}";
    }
    json += "}";
    const hm_status_t s = try_parse(with_header(json, rng() % 80));
    ASSERT_TRUE(s == HM_SUCCESS || s == HM_ERROR_PARSE) << json;
  }
}

}  // namespace
