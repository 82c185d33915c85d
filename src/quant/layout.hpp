// The Humming standard layout at tensor level (docs/layout.md): padded shapes and buffer sizes of a
// format, and the exact host pack (canonical buffers -> the buffers the kernels read) and unpack.
// Positions inside a chunk come from humming/layout/spec.h, which the GPU code shares.
#pragma once

#include <cstdint>

#include "core/format.hpp"
#include <humming/layout/spec.h>
#include "quant/quantize.hpp"

namespace hm::quant {

// Caller-owned standard-layout buffers; pointers the format does not use may be null.
struct PackedWeight {
  void* weight = nullptr;
  void* scales = nullptr;
  void* zero_points = nullptr;
  float* global_scale = nullptr;
};
struct ConstPackedWeight {
  const void* weight = nullptr;
  const void* scales = nullptr;
  const void* zero_points = nullptr;
  const float* global_scale = nullptr;
  ConstPackedWeight() = default;
  ConstPackedWeight(const PackedWeight& w)  // NOLINT: a view of mutable buffers
      : weight(w.weight),
        scales(w.scales),
        zero_points(w.zero_points),
        global_scale(w.global_scale) {}
};

// Every dimension of a format's standard layout.
//   weight        chunks [E][n_padded/16][k_padded/64], chunk_bytes(b) each
//   scales        [E][groups][scale_columns] elements of scale_element_bytes, scale dtype codes
//   zero_points   [E][groups][scale_columns] elements of zero_point_element_bytes, zp dtype codes
//   global_scale  f32 [E]
struct PackedShape {
  int weight_bits = 0;
  int act_bits = 0;
  int64_t experts = 0, n = 0, k = 0;
  int64_t n_padded = 0, k_padded = 0;
  int64_t strips = 0, k_chunks = 0;  // n_padded / 16, k_padded / 64
  int64_t groups = 0;           // K groups in the packed buffers: k_padded / group_k (1: channel)
  int64_t scale_columns = 0;    // n_padded, or ceil(n_padded / group_n) for block scales
  int scale_element_bytes = 0;  // 0: the format has no per-row scales
  int zero_point_element_bytes = 0;  // 0: no zero points
  uint32_t code_xor = 0;  // stored code = canonical code ^ code_xor (signed ints: sign bit)
  uint32_t pad_code = 0;  // canonical code pack writes into the padding (the dtype's zero)
  uint64_t weight_bytes = 0, scale_bytes = 0, zero_point_bytes = 0, global_scale_bytes = 0;
};

// Throws hm::Error: HM_ERROR_INVALID_ARGUMENT for a bad shape, HM_ERROR_UNSUPPORTED_FORMAT when
// the layout has no place for the dtypes (weights wider than 8 bits or than the activation,
// activations other than 16/8/4 bits, scale or zero-point dtypes wider than 32 bits).
PackedShape packed_shape(const core::Format& format);

// Canonical -> standard layout. Checks everything before writing anything: a NULL buffer the
// format needs, a code outside the weight dtype's bit width, a scale or zero point that is not
// exactly representable in its dtype (HM_ERROR_INVALID_ARGUMENT) or not finite
// (HM_ERROR_NON_FINITE) fail naming the element. Every byte of the output buffers is written
// (padding deterministically), so equal inputs give byte-equal outputs. `threads` <= 0: choose.
void pack(const core::Format& format, const ConstCanonicalWeight& in, const PackedWeight& out,
          int threads = 0);

// Standard layout -> canonical: the exact inverse of pack on the unpadded region.
void unpack(const core::Format& format, const ConstPackedWeight& in, const CanonicalWeight& out,
            int threads = 0);

// The stored code of element (expert, n, k) read back from a packed weight buffer one bit run at
// a time (slow; for tests and for checking GPU packers element by element).
uint32_t packed_code_at(const PackedShape& shape, const void* packed_weight, int64_t expert,
                        int64_t n, int64_t k);

}  // namespace hm::quant
