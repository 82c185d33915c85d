// Host pack / unpack of the Humming standard layout (docs/layout.md). The chunk kernels are
// templates over (weight bits, activation bits) so the per-value work is a few constant shifts;
// the positions come from humming/layout/spec.h, and unpack extracts registers with the very recipe a
// GPU kernel runs (extract_register).
#include "quant/layout.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/checked.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"
#include "quant/scalar_codec.hpp"

namespace hm::quant {
namespace {

using core::Format;
using core::ScaleKind;

int activation_bits_of(const Format& f) {
  const int a = f.activation.bits();
  if (a == 16 || a == 8 || a == 4) return a;
  fail(HM_ERROR_UNSUPPORTED_FORMAT,
       "the standard layout needs 16-, 8- or 4-bit activations (an MMA operand), but a=" +
           f.activation.name() + " has " + std::to_string(a) + " bits");
}

int element_bytes(core::Dtype d, const char* role) {
  const int bits = d.bits();
  if (bits <= 8) return 1;
  if (bits == 16) return 2;
  if (bits == 32) return 4;
  fail(HM_ERROR_UNSUPPORTED_FORMAT, std::string("the ") + role + " dtype " + d.name() +
                                        " has no packed encoding (8, 16 or 32 bits, or fewer)");
}

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
int64_t gcd64(int64_t a, int64_t b) { return b == 0 ? a : gcd64(b, a % b); }

bool has_row_scales(const Format& f) {
  return f.scale_kind == ScaleKind::kChannel || f.has_group_scales();
}

// ---------------------------------------------------------------------------------------------
// Chunk kernels. A tile is 16 rows x 64 bytes (row stride kChunkK) of stored codes.

// The F = 32/A bytes at `p` (one register's values, consecutive k) as the register's fields.
template <int A>
inline uint32_t spread_fields(const uint8_t* p) {
  if constexpr (A == 16) {
    uint16_t x;
    std::memcpy(&x, p, 2);
    return (x & 0xFFu) | (uint32_t(x & 0xFF00u) << 8);
  } else if constexpr (A == 8) {
    uint32_t x;
    std::memcpy(&x, p, 4);
    return x;
  } else {
    uint64_t x;  // 8 bytes each < 16 -> 8 nibbles
    std::memcpy(&x, p, 8);
    x = (x | (x >> 4)) & 0x00FF00FF00FF00FFull;
    x = (x | (x >> 8)) & 0x0000FFFF0000FFFFull;
    x = (x | (x >> 16)) & 0x00000000FFFFFFFFull;
    return uint32_t(x);
  }
}

// Inverse of spread_fields for a register whose fields hold values < 2^A.
template <int A>
inline void gather_fields(uint32_t r, uint8_t* p) {
  if constexpr (A == 16) {
    p[0] = uint8_t(r);
    p[1] = uint8_t(r >> 16);
  } else if constexpr (A == 8) {
    std::memcpy(p, &r, 4);
  } else {
    uint64_t x = r;
    x = (x | (x << 16)) & 0x0000FFFF0000FFFFull;
    x = (x | (x << 8)) & 0x00FF00FF00FF00FFull;
    x = (x | (x << 4)) & 0x0F0F0F0F0F0F0F0Full;
    std::memcpy(p, &x, 8);
  }
}

template <int B, int A>
struct ChunkCodec {
  static constexpr int kP = slot_bits(B);  // slot bits
  static constexpr int kS = A / kP;        // slots per field
  static constexpr int kRegs = registers_per_chunk(A);

  // `chunk` may be unaligned (it is the caller's buffer): words go through memcpy.
  static void pack(const uint8_t* tile, uint8_t* chunk) {
    for (int lane = 0; lane < kLanes; ++lane) {
      uint32_t virt[kP] = {};
#pragma GCC unroll 16
      for (int reg = 0; reg < kRegs; ++reg) {
        const ChunkElement e = element_of(A, lane, reg, 0);
        virt[reg / kS] |= spread_fields<A>(tile + e.row * kChunkK + e.k) << ((reg % kS) * kP);
      }
      uint32_t words[B] = {};
#pragma GCC unroll 8
      for (int v = 0; v < kP; ++v) {
        const int t = v * B, i = t / kP, r = t % kP;
        if (r + B <= kP) {
          words[i] |= virt[v] << r;
        } else {  // high `left` bits to the top of word i's slots, low `right` bits to word i+1
          const int right = B - (kP - r);
          const uint32_t low = replicate(low_bits(right), kP);
          words[i] |= (virt[v] & ~low) << (kP - B);
          words[i + 1] |= virt[v] & low;
        }
      }
#pragma GCC unroll 8
      for (int w = 0; w < B; ++w)
        std::memcpy(chunk + 4 * lane_word_offset(B, lane, w), &words[w], 4);
    }
  }

  static void unpack(const uint8_t* chunk, uint8_t* tile) {
    for (int lane = 0; lane < kLanes; ++lane) {
      uint32_t words[B];
#pragma GCC unroll 8
      for (int w = 0; w < B; ++w)
        std::memcpy(&words[w], chunk + 4 * lane_word_offset(B, lane, w), 4);
#pragma GCC unroll 16
      for (int reg = 0; reg < kRegs; ++reg) {
        const ChunkElement e = element_of(A, lane, reg, 0);
        gather_fields<A>(extract_register(words, B, A, reg), tile + e.row * kChunkK + e.k);
      }
    }
  }
};

using PackChunkFn = void (*)(const uint8_t*, uint8_t*);
using UnpackChunkFn = void (*)(const uint8_t*, uint8_t*);

template <int A, int... Bs>
struct CodecTable {
  static constexpr PackChunkFn pack[8] = {ChunkCodec<Bs, A>::pack...};
  static constexpr UnpackChunkFn unpack[8] = {ChunkCodec<Bs, A>::unpack...};
};

PackChunkFn pack_fn(int b, int a) {
  if (a == 16) return CodecTable<16, 1, 2, 3, 4, 5, 6, 7, 8>::pack[b - 1];
  if (a == 8) return CodecTable<8, 1, 2, 3, 4, 5, 6, 7, 8>::pack[b - 1];
  return CodecTable<4, 1, 2, 3, 4, 4, 4, 4, 4>::pack[b - 1];  // b <= 4 (checked)
}
UnpackChunkFn unpack_fn(int b, int a) {
  if (a == 16) return CodecTable<16, 1, 2, 3, 4, 5, 6, 7, 8>::unpack[b - 1];
  if (a == 8) return CodecTable<8, 1, 2, 3, 4, 5, 6, 7, 8>::unpack[b - 1];
  return CodecTable<4, 1, 2, 3, 4, 4, 4, 4, 4>::unpack[b - 1];
}

// Runs body(begin, end) over [0, count) on up to `threads` threads (core::parallel_ranges: a
// range that throws no longer ends the process from a worker thread).
template <typename Body>
void parallel_for(int64_t count, int threads, Body body) {
  core::parallel_ranges(count, threads, body);
}

int choose_threads(int requested, uint64_t bytes) {
  if (requested > 0) return requested;
  if (bytes < (8u << 20)) return 1;  // thread start-up outweighs the work below ~8 MB
  return std::min(core::usable_cpus(), 2);
}

std::string index3(int64_t a, int64_t b, int64_t c) {
  return "[" + std::to_string(a) + "][" + std::to_string(b) + "][" + std::to_string(c) + "]";
}

// The canonical code that pack writes into the padding: the weight dtype's code of 0 where it has
// one (biased / signed integers: 2^(b-1) after the stored-code flip; unsigned integers and floats:
// 0), so padded rows decode to exactly 0 without zero points.
uint8_t padding_code(const Format& f) {
  return f.weight.kind() == core::DtypeKind::kBiasedUnsignedInt
             ? uint8_t(1u << (f.weight.bits() - 1))
             : 0;
}

// ---------------------------------------------------------------------------------------------
// Weights.

void check_codes(const Format& f, const PackedShape& s, const uint8_t* codes) {
  const uint64_t limit = uint64_t(1) << s.weight_bits;
  if (s.weight_bits == 8) return;
  const uint64_t bad_bits = 0x0101010101010101ull * uint8_t(~(limit - 1));
  const int64_t total = s.experts * s.n * s.k;
  uint64_t acc = 0;
  int64_t i = 0;
  for (; i + 8 <= total; i += 8) {
    uint64_t x;
    std::memcpy(&x, codes + i, 8);
    acc |= x;
  }
  for (; i < total; ++i) acc |= codes[i];
  if ((acc & bad_bits) == 0) return;
  for (i = 0; i < total; ++i) {
    if (codes[i] < limit) continue;
    const int64_t e = i / (s.n * s.k), n = i / s.k % s.n, k = i % s.k;
    fail(HM_ERROR_INVALID_ARGUMENT,
         "in->codes" + index3(e, n, k) + " = " + std::to_string(codes[i]) + " is not a code of " +
             f.weight.name() + " (codes of " + std::to_string(s.weight_bits) +
             "-bit dtypes are 0.." + std::to_string(limit - 1) + ")");
  }
}

// Copies the 16 x 64 tile of chunk (e, strip, k_chunk) into `tile` in stored form.
void load_tile(const PackedShape& s, const uint8_t* codes, uint8_t pad, int64_t e, int64_t strip,
               int64_t kc, uint8_t* tile) {
  const int64_t k0 = kc * kChunkK, kn = std::max<int64_t>(0, std::min<int64_t>(kChunkK, s.k - k0));
  for (int r = 0; r < kChunkRows; ++r) {
    uint8_t* dst = tile + r * kChunkK;
    const int64_t n = strip * kChunkRows + r;
    if (n < s.n && kn > 0) {
      std::memcpy(dst, codes + (e * s.n + n) * s.k + k0, size_t(kn));
      if (kn < kChunkK) std::memset(dst + kn, pad, size_t(kChunkK - kn));
    } else {
      std::memset(dst, pad, kChunkK);
    }
  }
  if (s.code_xor != 0) {
    const uint64_t flip = 0x0101010101010101ull * s.code_xor;
    for (int i = 0; i < kChunkRows * kChunkK; i += 8) {
      uint64_t x;
      std::memcpy(&x, tile + i, 8);
      x ^= flip;
      std::memcpy(tile + i, &x, 8);
    }
  }
}

// Calls chunk(e, strip, kc, tile, offset) for chunks kc < k_chunks of every strip of every
// expert, strips split over `threads`; `tile` is the thread's 16 x 64 scratch tile and `offset`
// the chunk's byte offset in the packed weight. Pack and unpack walk the chunks the same way.
template <typename ChunkFn>
void for_each_chunk(const PackedShape& s, int64_t k_chunks, int threads, ChunkFn chunk) {
  parallel_for(s.experts * s.strips, threads, [&](int64_t begin, int64_t end) {
    alignas(16) uint8_t tile[kChunkRows * kChunkK];
    for (int64_t es = begin; es < end; ++es) {
      const int64_t e = es / s.strips, strip = es % s.strips;
      for (int64_t kc = 0; kc < k_chunks; ++kc)
        chunk(e, strip, kc, tile,
              chunk_offset_bytes(s.weight_bits, s.n_padded, s.k_padded, e, strip, kc));
    }
  });
}

void pack_weight(const Format& f, const PackedShape& s, const uint8_t* codes, void* out,
                 int threads) {
  const PackChunkFn fn = pack_fn(s.weight_bits, s.act_bits);
  const uint8_t pad = padding_code(f);
  // Every chunk, padding included, so that every byte of the output is written.
  for_each_chunk(s, s.k_chunks, threads,
                 [&](int64_t e, int64_t strip, int64_t kc, uint8_t* tile, int64_t offset) {
                   load_tile(s, codes, pad, e, strip, kc, tile);
                   fn(tile, static_cast<uint8_t*>(out) + offset);
                 });
}

void unpack_weight(const PackedShape& s, const void* in, uint8_t* codes, int threads) {
  const UnpackChunkFn fn = unpack_fn(s.weight_bits, s.act_bits);
  // Only the chunks that hold real columns: those wholly in the K padding have nothing to give.
  const int64_t real_k_chunks = (s.k + kChunkK - 1) / kChunkK;
  for_each_chunk(s, real_k_chunks, threads,
                 [&](int64_t e, int64_t strip, int64_t kc, uint8_t* tile, int64_t offset) {
                   fn(static_cast<const uint8_t*>(in) + offset, tile);
                   const int64_t k0 = kc * kChunkK;
                   const int64_t kn = std::min<int64_t>(kChunkK, s.k - k0);
                   for (int r = 0; r < kChunkRows; ++r) {
                     const int64_t n = strip * kChunkRows + r;
                     if (n >= s.n) break;
                     uint8_t* dst = codes + (e * s.n + n) * s.k + k0;
                     for (int64_t i = 0; i < kn; ++i)
                       dst[i] = tile[r * kChunkK + i] ^ uint8_t(s.code_xor);
                   }
                 });
}

// ---------------------------------------------------------------------------------------------
// Scales and zero points: canonical float [E][rows][G] -> packed codes [E][groups][columns].

struct SideTensor {
  const char* name;  // "scales" / "zero_points", for messages
  core::Dtype dtype;
  int element_bytes;
  int64_t rows;    // canonical rows (ceil(n / group_n))
  int64_t groups;  // canonical groups
};

// Encodes every canonical element (checking it) and, when `out` is set, writes the packed tensor.
void pack_side(const PackedShape& s, const SideTensor& t, const float* in, uint8_t* out) {
  const ScalarCodec codec(t.dtype);
  const int64_t columns = s.scale_columns, bytes = t.element_bytes;
  if (out != nullptr) std::memset(out, 0, size_t(s.experts * s.groups * columns * bytes));
  for (int64_t e = 0; e < s.experts; ++e) {
    for (int64_t row = 0; row < t.rows; ++row) {
      for (int64_t g = 0; g < t.groups; ++g) {
        const float x = in[(e * t.rows + row) * t.groups + g];
        uint32_t code = 0;
        const ScalarCodec::Status st = codec.encode_exact(x, &code);
        if (st != ScalarCodec::kExact) {
          const std::string where = std::string("in->") + t.name + index3(e, row, g);
          if (st == ScalarCodec::kNonFinite) fail(HM_ERROR_NON_FINITE, where + " is not finite");
          fail(HM_ERROR_INVALID_ARGUMENT, where + " = " + std::to_string(x) +
                                              " is not exactly representable in " + t.dtype.name() +
                                              " (quantize with the format's " + t.name + " dtype)");
        }
        if (out == nullptr) continue;
        uint8_t* dst = out + ((e * s.groups + g) * columns + row) * bytes;
        for (int64_t i = 0; i < bytes; ++i) dst[i] = uint8_t(code >> (8 * i));
      }
    }
  }
}

void unpack_side(const PackedShape& s, const SideTensor& t, const uint8_t* in, float* out) {
  const ScalarCodec codec(t.dtype);
  const int64_t columns = s.scale_columns, bytes = t.element_bytes;
  for (int64_t e = 0; e < s.experts; ++e) {
    for (int64_t row = 0; row < t.rows; ++row) {
      for (int64_t g = 0; g < t.groups; ++g) {
        const uint8_t* src = in + ((e * s.groups + g) * columns + row) * bytes;
        uint32_t code = 0;
        for (int64_t i = 0; i < bytes; ++i) code |= uint32_t(src[i]) << (8 * i);
        out[(e * t.rows + row) * t.groups + g] = codec.decode(code);
      }
    }
  }
}

void require_buffer(const void* p, const char* name, const std::string& why) {
  if (p == nullptr) fail(HM_ERROR_INVALID_ARGUMENT, std::string(name) + " is NULL but " + why);
}

}  // namespace

PackedShape packed_shape(const Format& f) {
  PackedShape s;
  canonical_shape(f);  // the canonical buffers' rules (shape, dtypes, groups) apply here too
  s.act_bits = activation_bits_of(f);
  s.weight_bits = f.weight.bits();
  if (!layout_defined(s.weight_bits, s.act_bits))
    fail(HM_ERROR_UNSUPPORTED_FORMAT,
         "the standard layout holds weights of 1..8 bits and no wider than the activation; w=" +
             f.weight.name() + " (" + std::to_string(s.weight_bits) + " bits) with a=" +
             f.activation.name() + " (" + std::to_string(s.act_bits) + " bits) does not fit");
  s.experts = f.experts;
  s.n = f.n;
  s.k = f.k;
  s.n_padded = round_up(f.n, kPadN);
  const bool grouped = f.has_group_scales();
  // K is padded to a whole number of chunks and of scale groups, so every padded k has a group.
  const int64_t k_unit = grouped ? kPadK / gcd64(kPadK, f.group_k) * f.group_k : kPadK;
  s.k_padded = round_up(f.k, k_unit);  // k, k_unit <= 64 x HM_MAX_K: no overflow
  s.strips = s.n_padded / kChunkRows;
  s.k_chunks = s.k_padded / kChunkK;
  s.code_xor = f.weight.kind() == core::DtypeKind::kSignedInt ? 1u << (s.weight_bits - 1) : 0u;
  s.pad_code = padding_code(f);
  // n, k and the group sizes are within the limits (canonical_shape checked them), so the
  // padding cannot overflow; the products below are checked all the same (a group size that is
  // not a multiple of 16 can pad K to 64 x group_k).
  // Bits per row of chunks are a whole number of bytes: k_padded is a multiple of 64.
  s.weight_bytes = static_cast<uint64_t>(core::size_product(
      {s.experts, s.n_padded, s.k_padded / 8, s.weight_bits}, "the packed weight's bytes"));
  if (has_row_scales(f)) {
    s.groups = grouped ? s.k_padded / f.group_k : 1;
    s.scale_columns =
        f.scale_kind == ScaleKind::kBlock ? (s.n_padded + f.group_n - 1) / f.group_n : s.n_padded;
    s.scale_element_bytes = element_bytes(f.scale, "scale");
    s.scale_bytes = static_cast<uint64_t>(
        core::size_product({s.experts, s.groups, s.scale_columns, s.scale_element_bytes},
                           "the packed scales' bytes"));
    if (f.has_zero_point()) {
      s.zero_point_element_bytes = element_bytes(f.zero_point, "zero-point");
      s.zero_point_bytes = static_cast<uint64_t>(
          core::size_product({s.experts, s.groups, s.scale_columns, s.zero_point_element_bytes},
                             "the packed zero points' bytes"));
    }
  }
  if (f.has_global_scale()) s.global_scale_bytes = uint64_t(s.experts) * 4;
  return s;
}

// The scales, zero points and global scale the format needs, present on both sides (pack and
// unpack take the canonical and packed views in opposite directions).
template <class In, class Out>
void require_side_buffers(const PackedShape& s, const In& in, const Out& out) {
  if (s.scale_element_bytes > 0) {
    require_buffer(in.scales, "in->scales", "the format has per-row scales");
    require_buffer(out.scales, "out->scales", "the format has per-row scales");
  }
  if (s.zero_point_element_bytes > 0) {
    require_buffer(in.zero_points, "in->zero_points", "the format has zero points");
    require_buffer(out.zero_points, "out->zero_points", "the format has zero points");
  }
  if (s.global_scale_bytes > 0) {
    require_buffer(in.global_scale, "in->global_scale", "the format has a global scale");
    require_buffer(out.global_scale, "out->global_scale", "the format has a global scale");
  }
}

void pack(const Format& f, const ConstCanonicalWeight& in, const PackedWeight& out, int threads) {
  const PackedShape s = packed_shape(f);
  const CanonicalShape c = canonical_shape(f);
  require_buffer(in.codes, "in->codes", "every format has weight codes");
  require_buffer(out.weight, "out->weight", "every format has a packed weight");
  const bool zp = s.zero_point_element_bytes > 0, row_scales = s.scale_element_bytes > 0;
  const SideTensor scales{"scales", f.scale, s.scale_element_bytes, c.scale_rows, c.groups_k};
  const SideTensor zeros{"zero_points", f.zero_point, s.zero_point_element_bytes, c.scale_rows,
                         c.groups_k};
  require_side_buffers(s, in, out);

  // Check everything, then write: a failed pack leaves the outputs untouched.
  check_codes(f, s, in.codes);
  if (row_scales) pack_side(s, scales, in.scales, nullptr);
  if (zp) pack_side(s, zeros, in.zero_points, nullptr);
  for (int64_t e = 0; s.global_scale_bytes > 0 && e < s.experts; ++e)
    if (!std::isfinite(in.global_scale[e]))
      fail(HM_ERROR_NON_FINITE, "in->global_scale[" + std::to_string(e) + "] is not finite");

  pack_weight(f, s, in.codes, out.weight, choose_threads(threads, s.weight_bytes));
  if (row_scales) pack_side(s, scales, in.scales, static_cast<uint8_t*>(out.scales));
  if (zp) pack_side(s, zeros, in.zero_points, static_cast<uint8_t*>(out.zero_points));
  if (s.global_scale_bytes > 0)
    std::memcpy(out.global_scale, in.global_scale, size_t(s.global_scale_bytes));
}

void unpack(const Format& f, const ConstPackedWeight& in, const CanonicalWeight& out, int threads) {
  const PackedShape s = packed_shape(f);
  const CanonicalShape c = canonical_shape(f);
  require_buffer(in.weight, "in->weight", "every format has a packed weight");
  require_buffer(out.codes, "out->codes", "every format has weight codes");
  const bool zp = s.zero_point_element_bytes > 0, row_scales = s.scale_element_bytes > 0;
  require_side_buffers(s, in, out);
  unpack_weight(s, in.weight, out.codes, choose_threads(threads, s.weight_bytes));
  if (row_scales)
    unpack_side(s, {"scales", f.scale, s.scale_element_bytes, c.scale_rows, c.groups_k},
                static_cast<const uint8_t*>(in.scales), out.scales);
  if (zp)
    unpack_side(s,
                {"zero_points", f.zero_point, s.zero_point_element_bytes, c.scale_rows, c.groups_k},
                static_cast<const uint8_t*>(in.zero_points), out.zero_points);
  if (s.global_scale_bytes > 0)
    std::memcpy(out.global_scale, in.global_scale, size_t(s.global_scale_bytes));
}

uint32_t packed_code_at(const PackedShape& s, const void* packed_weight, int64_t expert, int64_t n,
                        int64_t k) {
  const auto* chunk = static_cast<const uint8_t*>(packed_weight) +
                      chunk_offset_bytes(s.weight_bits, s.n_padded, s.k_padded, expert,
                                         n / kChunkRows, k / kChunkK);
  const LaneField lf = lane_field_of(s.act_bits, int(n % kChunkRows), int(k % kChunkK));
  const ValueBits vb = value_bits(s.weight_bits, s.act_bits, lf.reg, lf.field);
  uint32_t value = 0;
  for (int i = 0; i < vb.runs; ++i) {
    const BitRun& run = vb.run[i];
    uint32_t word;
    std::memcpy(&word, chunk + 4 * lane_word_offset(s.weight_bits, lf.lane, run.word), 4);
    value |= ((word >> run.bit) & low_bits(run.width)) << run.value_bit;
  }
  return value;
}

}  // namespace hm::quant
