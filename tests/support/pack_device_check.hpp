// Shared by the api (mock driver) and gpu tests of hm_pack_device: random canonical data for a
// format, packed once by hm_pack on the host and once by hm_pack_device on a context's device,
// compared byte for byte (weight, scales, zero points, global scale), through the C API only.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "humming.h"
#include "support/last_error.hpp"

namespace hm::test {

// Bytes of one packed element of `dtype` (docs/layout.md §9).
inline int packed_element_bytes(hm_dtype_t dtype) {
  const int bits = int(dtype & 0xFF);
  return bits <= 8 ? 1 : bits <= 16 ? 2 : 4;
}

// `count` random codes of `dtype` whose values are finite and not -0 (hm_pack refuses non-finite
// scales; -0 would round-trip but says nothing), with the values.
inline void random_side(hm_dtype_t dtype, std::mt19937& rng, size_t count,
                        std::vector<uint32_t>* codes, std::vector<float>* values) {
  const int bits = int(dtype & 0xFF);
  codes->resize(count);
  values->resize(count);
  for (size_t i = 0; i < count; ++i) {
    if (bits == 32) {  // hm_dtype_decode covers 16 bits and fewer; f32 codes are the float bits
      const float v = std::ldexp(float(rng() % 4096 + 1), -int(rng() % 24));
      std::memcpy(&(*codes)[i], &v, 4);
      (*values)[i] = v;
      continue;
    }
    for (;;) {
      const uint32_t code = bits >= 32 ? uint32_t(rng()) : uint32_t(rng()) & ((1u << bits) - 1u);
      double v = 0;
      if (hm_dtype_decode(dtype, code, &v) != HM_SUCCESS || !std::isfinite(v) ||
          (v == 0 && std::signbit(v)) || std::fabs(v) > 3e38)
        continue;
      (*codes)[i] = code;
      (*values)[i] = float(v);
      break;
    }
  }
}

// Little-endian bytes of codes of `bytes` each.
inline std::vector<uint8_t> code_bytes(const std::vector<uint32_t>& codes, int bytes) {
  std::vector<uint8_t> out(codes.size() * size_t(bytes));
  for (size_t i = 0; i < codes.size(); ++i)
    for (int b = 0; b < bytes; ++b) out[i * bytes + b] = uint8_t(codes[i] >> (8 * b));
  return out;
}

struct DeviceBuffer {
  hm_context_t* ctx = nullptr;
  uint64_t ptr = 0;
  size_t bytes = 0;
  DeviceBuffer(hm_context_t* c, size_t n) : ctx(c), bytes(n) {
    if (n == 0) return;
    EXPECT_EQ(hm_device_alloc(ctx, n, &ptr), HM_SUCCESS) << last_error();
  }
  ~DeviceBuffer() {
    if (ptr) hm_device_free(ctx, ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void upload(const void* src) const { ASSERT_EQ(hm_copy_to_device(ctx, ptr, src, bytes), HM_SUCCESS); }
  std::vector<uint8_t> download() const {
    std::vector<uint8_t> out(bytes);
    if (bytes) {
      EXPECT_EQ(hm_copy_to_host(ctx, out.data(), ptr, bytes), HM_SUCCESS);
    }
    return out;
  }
};

// The first differing byte of a and b, as a message, or "" when they are equal.
inline std::string first_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                                    const char* what) {
  if (a.size() != b.size())
    return std::string(what) + ": sizes " + std::to_string(a.size()) + " vs " +
           std::to_string(b.size());
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i])
      return std::string(what) + ": byte " + std::to_string(i) + " is " + std::to_string(b[i]) +
             " on the device, " + std::to_string(a[i]) + " from hm_pack";
  return "";
}

// Packs random data for `format_text` both ways and compares. The output buffers start filled
// with 0xA5 so padding the device packer fails to write shows up. With codes_only the side
// tensors are left out of hm_pack_device (both addresses 0) and must stay untouched.
inline void expect_device_pack_matches_host(hm_context_t* ctx, const std::string& format_text,
                                            uint32_t seed, bool codes_only = false) {
  SCOPED_TRACE(format_text);
  hm_format_t* f = nullptr;
  ASSERT_EQ(hm_format_parse(format_text.c_str(), &f), HM_SUCCESS) << last_error();
  hm_canonical_sizes_t cs;
  hm_canonical_sizes_init(&cs);
  ASSERT_EQ(hm_format_canonical_sizes(f, &cs), HM_SUCCESS) << last_error();
  hm_packed_sizes_t ps;
  hm_packed_sizes_init(&ps);
  ASSERT_EQ(hm_format_packed_sizes(f, &ps), HM_SUCCESS) << last_error();
  hm_dtype_t w = 0, sd = 0, zd = 0;
  hm_format_get_dtype(f, HM_ROLE_WEIGHT, &w);
  hm_format_get_dtype(f, HM_ROLE_SCALE, &sd);
  hm_format_get_dtype(f, HM_ROLE_ZERO_POINT, &zd);

  std::mt19937 rng(seed);
  const int bits = int(w & 0xFF);
  std::vector<uint8_t> codes(cs.codes);
  for (auto& c : codes) c = uint8_t(rng() & ((1u << bits) - 1u));
  std::vector<uint32_t> scale_codes, zp_codes;
  std::vector<float> scales, zps, global(cs.global_scale);
  if (cs.scales) random_side(sd, rng, cs.scales, &scale_codes, &scales);
  if (cs.zero_points) random_side(zd, rng, cs.zero_points, &zp_codes, &zps);
  for (auto& g : global) g = std::ldexp(float(rng() % 1000 + 1), -7);

  // Host reference.
  std::vector<uint8_t> weight(ps.weight), pscales(ps.scales), pzps(ps.zero_points);
  std::vector<uint8_t> pglobal(ps.global_scale);
  hm_canonical_weight_t hin;
  hm_canonical_weight_init(&hin);
  hin.codes = codes.data();
  hin.scales = scales.empty() ? nullptr : scales.data();
  hin.zero_points = zps.empty() ? nullptr : zps.data();
  hin.global_scale = global.empty() ? nullptr : global.data();
  hm_packed_weight_t hout;
  hm_packed_weight_init(&hout);
  hout.weight = weight.data();
  hout.scales = pscales.empty() ? nullptr : pscales.data();
  hout.zero_points = pzps.empty() ? nullptr : pzps.data();
  hout.global_scale = pglobal.empty() ? nullptr : reinterpret_cast<float*>(pglobal.data());
  ASSERT_EQ(hm_pack(f, &hin, &hout), HM_SUCCESS) << last_error();

  // Device copies of the canonical data, side tensors as codes.
  const std::vector<uint8_t> sbytes = code_bytes(scale_codes, packed_element_bytes(sd));
  const std::vector<uint8_t> zbytes = code_bytes(zp_codes, packed_element_bytes(zd));
  DeviceBuffer d_codes(ctx, codes.size()), d_scales(ctx, sbytes.size()),
      d_zps(ctx, zbytes.size()), d_global(ctx, global.size() * 4);
  DeviceBuffer o_weight(ctx, weight.size()), o_scales(ctx, pscales.size()),
      o_zps(ctx, pzps.size()), o_global(ctx, pglobal.size());
  d_codes.upload(codes.data());
  if (!sbytes.empty()) d_scales.upload(sbytes.data());
  if (!zbytes.empty()) d_zps.upload(zbytes.data());
  if (!global.empty()) d_global.upload(global.data());
  for (const DeviceBuffer* o : {&o_weight, &o_scales, &o_zps, &o_global}) {
    const std::vector<uint8_t> fill(o->bytes, 0xA5);
    if (o->bytes) o->upload(fill.data());
  }

  hm_device_canonical_t din;
  hm_device_canonical_init(&din);
  din.codes = d_codes.ptr;
  hm_device_packed_t dout;
  hm_device_packed_init(&dout);
  dout.weight = o_weight.ptr;
  if (!codes_only) {
    din.scales = d_scales.ptr;
    din.zero_points = d_zps.ptr;
    din.global_scale = d_global.ptr;
    dout.scales = o_scales.ptr;
    dout.zero_points = o_zps.ptr;
    dout.global_scale = o_global.ptr;
  }
  ASSERT_EQ(hm_pack_device(ctx, f, &din, &dout, nullptr), HM_SUCCESS) << last_error();
  ASSERT_EQ(hm_stream_synchronize(ctx, nullptr), HM_SUCCESS) << last_error();

  EXPECT_EQ(first_difference(weight, o_weight.download(), "weight"), "");
  if (codes_only) {
    for (const DeviceBuffer* o : {&o_scales, &o_zps, &o_global})
      EXPECT_EQ(first_difference(std::vector<uint8_t>(o->bytes, 0xA5), o->download(),
                                 "an untouched side tensor"),
                "");
  } else {
    EXPECT_EQ(first_difference(pscales, o_scales.download(), "scales"), "");
    EXPECT_EQ(first_difference(pzps, o_zps.download(), "zero_points"), "");
    EXPECT_EQ(first_difference(pglobal, o_global.download(), "global_scale"), "");
  }
  hm_format_destroy(f);
}

}  // namespace hm::test
