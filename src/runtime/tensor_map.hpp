// TMA descriptors (CUtensorMap) through the driver's cuTensorMapEncodeTiled: a pure host call,
// cheap enough to make per launch (the pointers change from call to call).
#pragma once

#include <cstdint>

#include "runtime/device.hpp"

namespace hm::runtime {

// A row-major 2-D tensor [rows][cols] of `element_bytes`-byte elements (1, 2 or 4), rows
// `row_stride_bytes` apart, copied in boxes of [box_rows][box_cols]; with `swizzle_128b` the box
// lands in shared memory with the 128-byte swizzle (box_cols * element_bytes must then be 128).
// Elements outside the tensor arrive as zeros. Throws HM_ERROR_UNSUPPORTED when the driver has
// no cuTensorMapEncodeTiled, HM_ERROR_INVALID_ARGUMENT for a shape TMA cannot describe (the
// base and the row stride must be multiples of 16 bytes), the driver's error otherwise.
struct TensorMap2d {
  const void* base;
  int element_bytes;
  uint64_t rows, cols, row_stride_bytes;
  uint32_t box_rows, box_cols;
  bool swizzle_128b;
};
// The driver wants the device's context current (it checks the address against it).
void encode_tensor_map(const Device& device, const TensorMap2d& tensor, CUtensorMap* out,
                       const char* what);

}  // namespace hm::runtime
