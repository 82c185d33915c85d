// Checked size arithmetic: the one place where counts and byte sizes are multiplied (issue 16).
// Every product of shapes, element counts and element sizes goes through size_product (or
// checked_mul where the caller words its own error), so no size ever wraps silently.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace hm::core {

// a * b into *out, or false (and *out unspecified) when the product does not fit 64 bits.
inline bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

// The product of the factors, or UINT64_MAX when it does not fit 64 bits: for byte counts that
// are compared with an allocation's size, which no such product can fit.
inline uint64_t saturating_product(std::initializer_list<uint64_t> factors) {
  uint64_t p = 1;
  for (uint64_t f : factors)
    if (!checked_mul(p, f, &p)) return std::numeric_limits<uint64_t>::max();
  return p;
}

// a + b into *out, or false when the sum does not fit 64 bits.
inline bool checked_add(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}

// The product of factors[0..count) (each >= 0) as an int64: sizes are int64 throughout the C
// ABI, so a product above INT64_MAX is as much an error as one above 2^64. Otherwise throws
// `status` with "<what> (a x b x ...) does not fit 63 bits"; a negative factor is
// HM_ERROR_INVALID_ARGUMENT. A zero factor makes the product 0 whatever the others are.
inline int64_t size_product(const int64_t* factors, size_t count, const std::string& what,
                            hm_status_t status = HM_ERROR_INVALID_ARGUMENT) {
  uint64_t p = 1;
  bool fits = true, zero = false;
  for (size_t i = 0; i < count; ++i) {
    if (factors[i] < 0) {
      std::string text;
      for (size_t j = 0; j < count; ++j) text += (j ? " x " : "") + std::to_string(factors[j]);
      fail(HM_ERROR_INVALID_ARGUMENT, what + " has a negative factor (" + text + ")");
    }
    zero = zero || factors[i] == 0;
    fits = fits && checked_mul(p, static_cast<uint64_t>(factors[i]), &p) &&
           p <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  }
  if (zero) return 0;
  if (!fits) {
    std::string text;
    for (size_t j = 0; j < count; ++j) text += (j ? " x " : "") + std::to_string(factors[j]);
    fail(status, what + " (" + text + ") does not fit 63 bits");
  }
  return static_cast<int64_t>(p);
}
inline int64_t size_product(std::initializer_list<int64_t> factors, const std::string& what,
                            hm_status_t status = HM_ERROR_INVALID_ARGUMENT) {
  return size_product(factors.begin(), factors.size(), what, status);
}
inline int64_t size_product(const std::vector<int64_t>& factors, const std::string& what,
                            hm_status_t status = HM_ERROR_INVALID_ARGUMENT) {
  return size_product(factors.data(), factors.size(), what, status);
}

}  // namespace hm::core
