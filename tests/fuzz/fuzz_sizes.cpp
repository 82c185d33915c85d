// Fuzz target: the C ABI's size functions on formats built with the typed setters from raw
// integers (any n, k, experts, group sizes, dtype codes), and the host functions that take
// sizes directly (the reference GEMM and activation quantization with NULL buffers). Every
// size reported must equal the exact product (computed here in 128 bits), and no call may
// crash; with NULL buffers nothing may be touched.
#include <cstring>

#include "fuzz_target.hpp"
#include "humming.h"

namespace {

// Reads fixed-width little-endian integers from the input, zeros past its end.
struct Reader {
  const uint8_t* data;
  size_t size, at = 0;
  template <typename T>
  T next() {
    T v{};
    uint8_t bytes[sizeof(T)] = {};
    for (size_t i = 0; i < sizeof(T); ++i) bytes[i] = at < size ? data[at++] : 0;
    std::memcpy(&v, bytes, sizeof(T));
    return v;
  }
};

using u128 = unsigned __int128;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader r{data, size};
  hm_format_t* f = nullptr;
  if (hm_format_create(&f) != HM_SUCCESS) return 0;
  for (int32_t role = HM_ROLE_WEIGHT; role <= HM_ROLE_ACCUMULATOR; ++role)
    (void)hm_format_set_dtype(f, role, r.next<uint32_t>() % 2 ? r.next<uint32_t>() : 0);
  const int32_t kind = r.next<int32_t>(), group_k = r.next<int32_t>(), group_n = r.next<int32_t>();
  (void)hm_format_set_scale(f, kind, group_k, group_n);
  const int64_t n = r.next<int64_t>(), k = r.next<int64_t>();
  const int32_t experts = r.next<int32_t>();
  (void)hm_format_set_shape(f, n, k, experts);

  int64_t fn = 0, fk = 0;
  int32_t fe = 0;
  hm_format_get_shape(f, &fn, &fk, &fe);
  hm_canonical_sizes_t c;
  hm_canonical_sizes_init(&c);
  if (hm_format_canonical_sizes(f, &c) == HM_SUCCESS)
    HM_FUZZ_CHECK(u128(c.codes) == u128(fe) * u128(fn) * u128(fk), "codes = E x N x K");
  hm_packed_sizes_t p;
  hm_packed_sizes_init(&p);
  if (hm_format_packed_sizes(f, &p) == HM_SUCCESS) {
    HM_FUZZ_CHECK(p.n_padded >= fn && p.k_padded >= fk, "padding only grows");
    HM_FUZZ_CHECK(u128(p.weight) * 8 >= u128(fe) * u128(p.n_padded) * u128(p.k_padded),
                  "at least one bit per padded weight");
  }
  hm_format_destroy(f);

  // Sizes straight from the input, with NULL buffers: refused (or empty), never dereferenced.
  const int64_t m = r.next<int64_t>() >> (r.next<uint8_t>() % 64);
  const int64_t gn = r.next<int64_t>() >> (r.next<uint8_t>() % 64);
  const int64_t gk = r.next<int64_t>() >> (r.next<uint8_t>() % 64);
  if (hm_reference_gemm_f32(nullptr, nullptr, nullptr, nullptr, m, gn, gk) == HM_SUCCESS)
    HM_FUZZ_CHECK(m == 0 || gn == 0, "a GEMM with no output buffer has no output");
  HM_FUZZ_CHECK(hm_quantize_activation(HM_DTYPE_INT8, nullptr, m, gk, r.next<int32_t>(), nullptr,
                                       nullptr) != HM_SUCCESS,
                "activation quantization with NULL buffers fails");
  return 0;
}
