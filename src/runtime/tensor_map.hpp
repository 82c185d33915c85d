// TMA descriptors (CUtensorMap) through the driver's cuTensorMapEncodeTiled: a pure host call
// whose result depends on its arguments only, so a map encoded once serves every later call with
// the same arguments (TensorMapCache); the activations' map changes with their address and M.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

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
// Every field equal: the same map.
bool same_tensor(const TensorMap2d& a, const TensorMap2d& b);

// The driver wants the device's context current (it checks the address against it).
void encode_tensor_map(const Device& device, const TensorMap2d& tensor, CUtensorMap* out,
                       const char* what);

// The maps one kernel's calls encoded, kept while their inputs do not change: the weight's and
// the codes' maps are the same call after call, the activations' as long as their address and M
// are. A hit is a copy of the map an earlier encode_tensor_map returned for identical inputs
// (every field of TensorMap2d, and the device's context), so it is exactly what the driver would
// encode again; failures are not kept, so a bad tensor fails every time. The least recently used
// entry makes room. Thread-safe: one lock, held for a lookup or an insert (a 128-byte copy),
// never across the driver call; two threads missing at once both encode, and both maps are right.
class TensorMapCache {
 public:
  static constexpr int kCapacity = 8;  // a call's 2 to 4 maps, and A's for a few M or addresses

  // encode_tensor_map, or the map kept from an encode of the same inputs.
  void encode(const Device& device, const TensorMap2d& tensor, CUtensorMap* out,
              const char* what);

 private:
  struct Entry {
    CUtensorMap map;
    CUcontext context = nullptr;
    TensorMap2d tensor{};
    uint64_t last_use = 0;  // 0: empty
  };
  // The entry for these inputs, or null (the caller holds the lock).
  Entry* find(CUcontext context, const TensorMap2d& tensor);

  std::mutex mutex_;
  uint64_t clock_ = 0;
  std::array<Entry, kCapacity> entries_{};
};

// cache->encode, or encode_tensor_map when there is no cache.
void encode_tensor_map(const Device& device, TensorMapCache* cache, const TensorMap2d& tensor,
                       CUtensorMap* out, const char* what);

}  // namespace hm::runtime
