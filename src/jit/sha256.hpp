// SHA-256 (FIPS 180-4), our own small implementation: the kernel cache names entries by it and
// checks images against it, and the library must not depend on a crypto library for that.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hm::jit {

class Sha256 {
 public:
  // allow_hardware: use the x86 SHA extensions when the CPU has them (about 10x faster, which
  // keeps verifying a large cached image within the cache-hit budget). Tests turn it off to
  // check the portable code on machines that have them.
  explicit Sha256(bool allow_hardware = true);
  // Whether this CPU has the SHA extensions we use.
  static bool hardware_available();
  void update(const void* data, size_t size);
  void update(std::string_view data) { update(data.data(), data.size()); }
  // Finishes the hash; the object must not be updated afterwards.
  std::array<uint8_t, 32> digest();
  std::string hex_digest();  // 64 lowercase hex digits

 private:
  void compress(const uint8_t* blocks, size_t count);

  uint32_t state_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
  bool finished_ = false;
  bool use_hardware_;
};

// The lowercase hex SHA-256 of `data`.
std::string sha256_hex(std::string_view data);

}  // namespace hm::jit
