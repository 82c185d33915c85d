// SHA-256 against the FIPS 180-2 / NIST CAVP vectors, plus padding boundaries and incremental
// updates (the cache hashes files in chunks, so every split must give the same digest). Each
// test runs on the portable code and, where the CPU has them, on the SHA extensions.
#include <gtest/gtest.h>

#include <string>

#include "jit/sha256.hpp"

namespace {

using hm::jit::Sha256;

class Sha256Test : public ::testing::TestWithParam<bool> {
 protected:
  std::string sha256_hex(const std::string& data) const {
    Sha256 h(GetParam());
    h.update(data);
    return h.hex_digest();
  }
};

TEST_P(Sha256Test, FipsVectors) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnop"
                       "jklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST_P(Sha256Test, OneMillionA) {
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Lengths around the 56-byte point where the length field no longer fits in the last block.
TEST_P(Sha256Test, PaddingBoundaries) {
  const struct {
    size_t n;
    const char* hex;
  } cases[] = {
      {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
      {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
      {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
      {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
      {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
      {120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"},
  };
  for (const auto& c : cases)
    EXPECT_EQ(sha256_hex(std::string(c.n, 'a')), c.hex) << c.n << " bytes";
}

TEST_P(Sha256Test, EverySplitGivesTheSameDigest) {
  std::string data;
  for (int i = 0; i < 300; ++i) data.push_back(static_cast<char>((i * 131 + 7) & 0xff));
  for (size_t len : {0u, 1u, 63u, 64u, 65u, 127u, 128u, 200u, 300u}) {
    const std::string msg = data.substr(0, len);
    const std::string expected = sha256_hex(msg);
    for (size_t split = 0; split <= len; split += (len < 70 ? 1 : 7)) {
      Sha256 h(GetParam());
      h.update(msg.data(), split);
      h.update(msg.data() + split, len - split);
      EXPECT_EQ(h.hex_digest(), expected) << "len " << len << " split " << split;
    }
    Sha256 bytewise(GetParam());
    for (char c : msg) bytewise.update(&c, 1);
    EXPECT_EQ(bytewise.hex_digest(), expected) << "len " << len << " byte by byte";
  }
}

TEST_P(Sha256Test, BinaryDataWithZeros) {
  const std::string zeros(3, '\0');
  EXPECT_NE(sha256_hex(zeros), sha256_hex(""));
  EXPECT_EQ(sha256_hex(zeros), "709e80c88487a2411e1ee4dfb9f22a861492d20c4765150c0c794abd70f8147c");
}

TEST_P(Sha256Test, DigestTwiceIsALogicError) {
  Sha256 h(GetParam());
  h.update("x");
  h.digest();
  EXPECT_THROW(h.digest(), std::logic_error);
  EXPECT_THROW(h.update("y"), std::logic_error);
}

// Many lengths and contents: both implementations must agree everywhere.
TEST(Sha256, HardwareAndPortableAgree) {
  if (!Sha256::hardware_available()) GTEST_SKIP() << "no SHA extensions on this CPU";
  std::string data;
  uint32_t x = 12345;
  for (int i = 0; i < 5000; ++i) {
    x = x * 1664525u + 1013904223u;
    data.push_back(static_cast<char>(x >> 24));
  }
  for (size_t len = 0; len <= data.size(); len += 37) {
    Sha256 hw(true), sw(false);
    hw.update(data.data(), len);
    sw.update(data.data(), len);
    ASSERT_EQ(hw.hex_digest(), sw.hex_digest()) << len;
  }
  EXPECT_EQ(hm::jit::sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

INSTANTIATE_TEST_SUITE_P(Implementations, Sha256Test, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "hardware_if_available" : "portable");
                         });

}  // namespace
