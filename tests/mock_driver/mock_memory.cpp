// Device memory and streams of the mock CUDA driver (see mock_cuda.cpp).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "mock_state.hpp"

using namespace hm::mock;

// ---------------------------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------------------------

HM_MOCK_REQUIRED_BUT_DROPPED CUresult cuMemAlloc_v2(CUdeviceptr* pointer, size_t bytes) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  if (pointer == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!live(current())) return CUDA_ERROR_INVALID_CONTEXT;
  if (env_flag("HM_MOCK_FAIL_ALLOC")) return CUDA_ERROR_OUT_OF_MEMORY;
  // 256-byte aligned, like cuMemAlloc.
  void* memory = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (memory == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  *pointer = reinterpret_cast<uintptr_t>(memory);
  s.allocations[*pointer] = {bytes, current()};
  return CUDA_SUCCESS;
}

HM_MOCK_EXPORT CUresult cuMemFree_v2(CUdeviceptr pointer) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!live(current())) return CUDA_ERROR_INVALID_CONTEXT;
  auto it = s.allocations.find(pointer);
  if (it == s.allocations.end() || it->second.kind == MemoryKind::kHostRegistered)
    return CUDA_ERROR_INVALID_VALUE;
  std::free(reinterpret_cast<void*>(pointer));
  s.allocations.erase(it);
  return CUDA_SUCCESS;
}

// Managed memory: an allocation like cuMemAlloc's that any device may use (the mock has no
// migration to model). Freed with cuMemFree.
HM_MOCK_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* pointer, size_t bytes, unsigned int flags) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  constexpr unsigned int kAttachGlobal = 1, kAttachHost = 2;
  if (flags != kAttachGlobal && flags != kAttachHost) return CUDA_ERROR_INVALID_VALUE;
  const CUresult result = cuMemAlloc_v2(pointer, bytes);
  if (result != CUDA_SUCCESS) return result;
  std::lock_guard<std::mutex> lock(state().mutex);
  state().allocations[*pointer].kind = MemoryKind::kManaged;
  return CUDA_SUCCESS;
}

namespace {
constexpr CUresult kAlreadyRegistered = 712;  // CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
constexpr CUresult kNotRegistered = 713;      // CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED
constexpr unsigned int kRegisterPortable = 1;  // CU_MEMHOSTREGISTER_PORTABLE
}  // namespace

// Pinned user memory: mapped for the current context, or for every context with PORTABLE, at
// its own address (the mock has no disjoint device addresses). Copies and kernels may use it.
HM_MOCK_EXPORT CUresult cuMemHostRegister_v2(void* pointer, size_t bytes, unsigned int flags) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  if (pointer == nullptr || bytes == 0 || flags > 15) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!live(current())) return CUDA_ERROR_INVALID_CONTEXT;
  const uint64_t base = reinterpret_cast<uintptr_t>(pointer);
  auto next = s.allocations.lower_bound(base);
  if (next != s.allocations.end() && next->first < base + bytes) return kAlreadyRegistered;
  if (next != s.allocations.begin() && std::prev(next)->first + std::prev(next)->second.bytes > base)
    return kAlreadyRegistered;
  s.allocations[base] = {bytes, current(), MemoryKind::kHostRegistered, flags};
  return CUDA_SUCCESS;
}

HM_MOCK_EXPORT CUresult cuMemHostUnregister(void* pointer) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.allocations.find(reinterpret_cast<uintptr_t>(pointer));
  if (it == s.allocations.end() || it->second.kind != MemoryKind::kHostRegistered)
    return kNotRegistered;
  s.allocations.erase(it);  // the memory stays the caller's
  return CUDA_SUCCESS;
}

namespace {
CUresult copy(void* dst, const void* src, size_t bytes, uint64_t device_address, CUstream stream) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Context* context = current();
  if (!live(context)) return CUDA_ERROR_INVALID_CONTEXT;
  if (!stream_usable(s, stream, context)) return CUDA_ERROR_INVALID_HANDLE;
  if (bytes > 0 && (dst == nullptr || src == nullptr || !in_bounds(s, device_address, bytes)))
    return CUDA_ERROR_INVALID_VALUE;
  if (bytes > 0) std::memmove(dst, src, bytes);
  return CUDA_SUCCESS;
}
}  // namespace

HM_MOCK_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  return copy(reinterpret_cast<void*>(dst), src, bytes, dst, nullptr);
}

HM_MOCK_EXPORT CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  return copy(dst, reinterpret_cast<const void*>(src), bytes, src, nullptr);
}

HM_MOCK_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t bytes,
                                             CUstream stream) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  return copy(reinterpret_cast<void*>(dst), src, bytes, dst, stream);
}

HM_MOCK_EXPORT CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t bytes,
                                             CUstream stream) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  return copy(dst, reinterpret_cast<const void*>(src), bytes, src, stream);
}

namespace {
CUresult set(CUdeviceptr dst, unsigned char value, size_t bytes, CUstream stream) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Context* context = current();
  if (!live(context)) return CUDA_ERROR_INVALID_CONTEXT;
  if (!stream_usable(s, stream, context)) return CUDA_ERROR_INVALID_HANDLE;
  if (!in_bounds(s, dst, bytes)) return CUDA_ERROR_INVALID_VALUE;
  if (bytes > 0) std::memset(reinterpret_cast<void*>(dst), value, bytes);
  return CUDA_SUCCESS;
}
}  // namespace

HM_MOCK_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t bytes) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  return set(dst, value, bytes, nullptr);
}

HM_MOCK_EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t bytes,
                                        CUstream stream) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  return set(dst, value, bytes, stream);
}

HM_MOCK_OPTIONAL CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr pointer) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.allocations.upper_bound(pointer);
  if (it == s.allocations.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  if (pointer >= it->first + it->second.bytes) return CUDA_ERROR_INVALID_VALUE;
  const Allocation& a = it->second;
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = reinterpret_cast<CUcontext>(a.context);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned int*>(data) =
          a.kind == MemoryKind::kHostRegistered ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: {
      // The address kernels of the current context use: registered memory only where mapped.
      if (!live(current())) return CUDA_ERROR_INVALID_CONTEXT;
      if (a.kind == MemoryKind::kHostRegistered && a.context != current() &&
          !(a.flags & kRegisterPortable))
        return CUDA_ERROR_INVALID_VALUE;
      *static_cast<CUdeviceptr*>(data) = pointer;
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *static_cast<unsigned int*>(data) = a.kind == MemoryKind::kManaged ? 1 : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = a.context->ordinal;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:  // the allocation as allocated or registered
      if (env_flag("HM_MOCK_NO_POINTER_RANGE")) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<CUdeviceptr*>(data) = it->first;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      if (env_flag("HM_MOCK_NO_POINTER_RANGE")) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<size_t*>(data) = a.bytes;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

// Several attributes in one call, as the real driver answers them: a pointer the driver does not
// know is no error, every attribute reads as 0 (NULL; note that device ordinal 0 is a real
// ordinal, so a caller must look at the memory type). An attribute a known pointer cannot answer
// (DEVICE_POINTER of memory not mapped for the current context) reads as 0 too. Reached only
// through cuGetProcAddress_v2, like cuLaunchKernelEx, so that HM_MOCK_HIDE_SYMBOLS makes it truly
// absent; HM_MOCK_FAIL_POINTER_GET_ATTRIBUTES=1 makes it fail with CUDA_ERROR_NOT_SUPPORTED (a
// CUDA-compatible runtime that has the symbol but not the query).
HM_MOCK_INTERNAL CUresult cuPointerGetAttributes(unsigned int count, int* attributes, void** data,
                                                 CUdeviceptr pointer) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  if (env_flag("HM_MOCK_FAIL_POINTER_GET_ATTRIBUTES")) return CUDA_ERROR_NOT_SUPPORTED;
  if (count > 0 && (attributes == nullptr || data == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  auto size_of = [](int attribute) -> size_t {
    switch (attribute) {
      case CU_POINTER_ATTRIBUTE_CONTEXT:
        return sizeof(CUcontext);
      case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        return sizeof(CUdeviceptr);
      case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        return sizeof(size_t);
      case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        return sizeof(unsigned int);
      case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        return sizeof(int);
      default:
        return 0;
    }
  };
  for (unsigned int i = 0; i < count; ++i)
    if (data[i] == nullptr || size_of(attributes[i]) == 0) return CUDA_ERROR_INVALID_VALUE;
  if (env_flag("HM_MOCK_PLURAL_WITHOUT_RANGES"))  // a runtime that knows only older attributes
    for (unsigned int i = 0; i < count; ++i)
      if (attributes[i] == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR ||
          attributes[i] == CU_POINTER_ATTRIBUTE_RANGE_SIZE)
        return CUDA_ERROR_INVALID_VALUE;
  CUcontext owner = nullptr;
  const bool known =
      cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, pointer) == CUDA_SUCCESS;
  for (unsigned int i = 0; i < count; ++i) {
    std::memset(data[i], 0, size_of(attributes[i]));
    if (!known) continue;
    const CUresult result = cuPointerGetAttribute(data[i], attributes[i], pointer);
    if (result == CUDA_ERROR_INVALID_VALUE) continue;  // this attribute has no value here: NULL
    if (result != CUDA_SUCCESS) return result;
  }
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// Streams
// ---------------------------------------------------------------------------------------------

HM_MOCK_EXPORT CUresult cuStreamCreate(CUstream* stream, unsigned int flags) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  if (stream == nullptr || flags > CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!live(current())) return CUDA_ERROR_INVALID_CONTEXT;
  auto* st = new Stream{current()};
  s.streams.insert(st);
  *stream = reinterpret_cast<CUstream>(st);
  return CUDA_SUCCESS;
}

HM_MOCK_EXPORT CUresult cuStreamDestroy_v2(CUstream stream) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto* st = reinterpret_cast<Stream*>(stream);
  if (!s.streams.erase(st)) return CUDA_ERROR_INVALID_HANDLE;
  delete st;
  return CUDA_SUCCESS;
}

HM_MOCK_EXPORT CUresult cuStreamSynchronize(CUstream stream) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Context* context = current();
  if (reinterpret_cast<uintptr_t>(stream) <= 2)
    return live(context) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
  return s.streams.count(reinterpret_cast<Stream*>(stream)) ? CUDA_SUCCESS
                                                            : CUDA_ERROR_INVALID_HANDLE;
}

HM_MOCK_OPTIONAL CUresult cuStreamGetCtx(CUstream stream, CUcontext* context) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (reinterpret_cast<uintptr_t>(stream) <= 2) {
    if (!live(current())) return CUDA_ERROR_INVALID_CONTEXT;
    *context = reinterpret_cast<CUcontext>(current());
    return CUDA_SUCCESS;
  }
  auto* st = reinterpret_cast<Stream*>(stream);
  if (!s.streams.count(st)) return CUDA_ERROR_INVALID_HANDLE;
  *context = reinterpret_cast<CUcontext>(st->context);
  return CUDA_SUCCESS;
}

// The CUDA 12.5 variant (with a green context); a runtime that asks cuGetProcAddress for
// "cuStreamGetCtx" at 12050 or later gets this one, and the counter shows it.
HM_MOCK_OPTIONAL CUresult cuStreamGetCtx_v2(CUstream stream, CUcontext* context, void** green) {
  HM_MOCK_COUNT_CALL();
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    ++state().newer_abi_calls;
  }
  if (green != nullptr) *green = nullptr;
  return cuStreamGetCtx(stream, context);
}
