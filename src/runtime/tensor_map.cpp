// TMA descriptors (see tensor_map.hpp).
#include "runtime/tensor_map.hpp"

#include <string>

#include "core/error.hpp"

namespace hm::runtime {
namespace {

// cuda.h's enumerators (CUtensorMapDataType, ...Interleave, ...Swizzle, ...L2promotion,
// ...FloatOOBfill), by value: this file does not include cuda.h.
constexpr int kDataTypeUint8 = 0, kDataTypeUint16 = 1, kDataTypeUint32 = 2, kDataTypeUint64 = 4;
constexpr int kInterleaveNone = 0;
constexpr int kSwizzleNone = 0, kSwizzle128B = 3;
constexpr int kL2Promotion256B = 3;
constexpr int kOobFillZeros = 0;

}  // namespace

void encode_tensor_map(const Device& device, const TensorMap2d& t, CUtensorMap* out,
                       const char* what) {
  const Driver& driver = device.driver();
  if (!driver.has_tensor_map_encode_tiled())
    fail(HM_ERROR_UNSUPPORTED, std::string(what) +
                                   ": this tile copies with TMA, and the CUDA driver has no "
                                   "cuTensorMapEncodeTiled (CUDA 12.0 or newer needed)");
  const auto base = reinterpret_cast<uintptr_t>(t.base);
  HM_REQUIRE(t.element_bytes == 1 || t.element_bytes == 2 || t.element_bytes == 4 ||
                 t.element_bytes == 8,
             HM_ERROR_INTERNAL, std::string(what) + ": TMA element size must be 1, 2, 4 or 8 bytes");
  if (base % 16 != 0 || t.row_stride_bytes % 16 != 0)
    fail(HM_ERROR_INVALID_ARGUMENT,
         std::string(what) + ": TMA needs the address and the row stride to be multiples of 16 "
                             "bytes (address " + std::to_string(base) + ", row stride " +
             std::to_string(t.row_stride_bytes) + ")");
  const uint64_t dims[2] = {t.cols, t.rows};
  const uint64_t strides[1] = {t.row_stride_bytes};
  const uint32_t box[2] = {t.box_cols, t.box_rows};
  const uint32_t element_strides[2] = {1, 1};
  Device::Scope scope(device);
  driver.check(driver.api().cuTensorMapEncodeTiled(
                   out,
                   t.element_bytes == 1   ? kDataTypeUint8
                   : t.element_bytes == 2 ? kDataTypeUint16
                   : t.element_bytes == 4 ? kDataTypeUint32
                                          : kDataTypeUint64,
                   2,
                   const_cast<void*>(t.base), dims, strides, box, element_strides,
                   kInterleaveNone, t.swizzle_128b ? kSwizzle128B : kSwizzleNone,
                   kL2Promotion256B, kOobFillZeros),
               "cuTensorMapEncodeTiled", what);
}

bool same_tensor(const TensorMap2d& a, const TensorMap2d& b) {
  return a.base == b.base && a.element_bytes == b.element_bytes && a.rows == b.rows &&
         a.cols == b.cols && a.row_stride_bytes == b.row_stride_bytes &&
         a.box_rows == b.box_rows && a.box_cols == b.box_cols && a.swizzle_128b == b.swizzle_128b;
}

TensorMapCache::Entry* TensorMapCache::find(CUcontext context, const TensorMap2d& tensor) {
  for (Entry& e : entries_)
    if (e.last_use != 0 && e.context == context && same_tensor(e.tensor, tensor)) return &e;
  return nullptr;
}

void TensorMapCache::encode(const Device& device, const TensorMap2d& tensor, CUtensorMap* out,
                            const char* what) {
  const CUcontext context = device.context();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (Entry* e = find(context, tensor)) {
      e->last_use = ++clock_;
      *out = e->map;
      return;
    }
  }
  CUtensorMap map;
  encode_tensor_map(device, tensor, &map, what);  // throws: nothing kept
  *out = map;
  std::lock_guard<std::mutex> lock(mutex_);
  Entry* e = find(context, tensor);  // another thread may have added it meanwhile
  if (e == nullptr) {
    e = &entries_[0];
    for (Entry& candidate : entries_)
      if (candidate.last_use < e->last_use) e = &candidate;
    e->map = map;
    e->context = context;
    e->tensor = tensor;
  }
  e->last_use = ++clock_;
}

void encode_tensor_map(const Device& device, TensorMapCache* cache, const TensorMap2d& tensor,
                       CUtensorMap* out, const char* what) {
  if (cache != nullptr)
    cache->encode(device, tensor, out, what);
  else
    encode_tensor_map(device, tensor, out, what);
}

}  // namespace hm::runtime
