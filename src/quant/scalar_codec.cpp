#include "quant/scalar_codec.hpp"

#include <cmath>
#include <cstring>

#include "core/error.hpp"
#include "quant/code_table.hpp"

namespace hm::quant {
namespace {

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

}  // namespace

bool half_from_float_exact(float x, uint16_t* half) {
  const uint32_t u = bits_of(x);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const int exp = int((u >> 23) & 0xFFu);
  const uint32_t mantissa = u & 0x7FFFFFu;
  if (exp == 0xFF) return false;  // Inf / NaN
  if (exp == 0) {                 // f32 subnormals lie far below f16's smallest value
    if (mantissa != 0) return false;
    *half = uint16_t(sign);
    return true;
  }
  const int e = exp - 127;
  if (e > 15) return false;
  if (e >= -14) {  // an f16 normal: the 13 low mantissa bits must be zero
    if (mantissa & 0x1FFFu) return false;
    *half = uint16_t(sign | uint32_t(e + 15) << 10 | mantissa >> 13);
    return true;
  }
  if (e < -24) return false;
  // An f16 subnormal m * 2^-24: x = significand * 2^(e - 23), so m = significand >> -(e + 1).
  const uint32_t significand = mantissa | 0x800000u;
  const int shift = -(e + 1);
  if (significand & ((1u << shift) - 1u)) return false;
  *half = uint16_t(sign | significand >> shift);
  return true;
}

float float_from_half(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
  if (exp == 0x1F) return float_of(sign | 0x7F800000u | mantissa << 13);
  if (exp == 0) {  // zero or subnormal: exact in f32
    const float m = std::ldexp(float(mantissa), -24);
    return sign ? -m : m;
  }
  return float_of(sign | (exp + 112) << 23 | mantissa << 13);
}

ScalarCodec::ScalarCodec(core::Dtype dtype) {
  if (dtype.code() == HM_DTYPE_F32) {
    kind_ = Kind::kF32;
  } else if (dtype.code() == HM_DTYPE_F16) {
    kind_ = Kind::kF16;
  } else if (dtype.code() == HM_DTYPE_BF16) {
    kind_ = Kind::kBf16;
  } else if (!dtype.is_none() && dtype.bits() <= 8) {
    kind_ = Kind::kTable;
    table_ = std::make_unique<CodeTable>(dtype);
  } else {
    fail(HM_ERROR_UNSUPPORTED_FORMAT,
         "dtype " + dtype.name() +
             " cannot hold scales or zero points (use f32, f16, bf16 or a "
             "dtype of at most 8 bits)");
  }
}

ScalarCodec::~ScalarCodec() = default;

ScalarCodec::Status ScalarCodec::encode_exact(float x, uint32_t* code) const {
  if (!std::isfinite(x)) return kNonFinite;
  switch (kind_) {
    case Kind::kF32:
      *code = bits_of(x);
      return kExact;
    case Kind::kF16: {
      uint16_t h;
      if (!half_from_float_exact(x, &h)) return kNotRepresentable;
      *code = h;
      return kExact;
    }
    case Kind::kBf16: {
      const uint32_t u = bits_of(x);
      if (u & 0xFFFFu) return kNotRepresentable;
      *code = u >> 16;
      return kExact;
    }
    case Kind::kTable: {
      const core::Dtype d = table_->dtype();
      if (d.kind() == core::DtypeKind::kUnsignedFloat && !(x > 0)) return kNotRepresentable;
      if (x < table_->min_value() || x > table_->max_value()) return kNotRepresentable;
      const uint32_t c = table_->encode(x);
      const float back = table_->decode(c);
      if (!(back == x)) return kNotRepresentable;
      // Integers have no -0 and take -0.0 as 0; a float dtype must keep the sign.
      if (std::signbit(back) != std::signbit(x) && !d.is_integer()) return kNotRepresentable;
      *code = c;
      return kExact;
    }
  }
  return kNotRepresentable;
}

float ScalarCodec::decode(uint32_t code) const {
  switch (kind_) {
    case Kind::kF32:
      return float_of(code);
    case Kind::kF16:
      return float_from_half(uint16_t(code));
    case Kind::kBf16:
      return float_of(code << 16);
    case Kind::kTable:
      break;
  }
  return table_->decode(code);
}

}  // namespace hm::quant
