// Which device memory and which stream a launch may use (see device_check.hpp).
//
// Cost: one driver call per distinct set pointer (a value in several slots is checked once):
// cuPointerGetAttributes asks its memory type, device ordinal and allocation range together, and
// device memory of this device, the usual answer, is accepted on that alone, once the range holds
// the bytes the call uses from the pointer. Anything else (another device's
// memory, host memory, managed memory, memory the driver does not know), or a driver without the
// plural call or failing it, goes through cuPointerGetAttribute one attribute at a time, which
// decides and words every case. A stream other than the default ones costs one cuStreamGetCtx.
// The context is pushed once by the caller (hm_plan_gemm: one push and pop per call, shared
// with its launch; Device::Scope nests for free). These are host-side lookups in the driver's
// address table: no device round trip, no synchronization, no allocation, so a typical call (A,
// B, C, scales, workspace) makes five of them, each far cheaper than the cuLaunchKernel that
// follows. Their answers are not kept from one call to the next: a freed address can come back
// as memory of another device.
//
// CUDA graphs: none of these calls is a stream operation, and none is among the calls that stream
// capture forbids (synchronizing, querying or allocating), so hm_plan_gemm stays capturable.
#include "api/device_check.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "api/context.hpp"
#include "core/address.hpp"
#include "core/error.hpp"

namespace hm::api {
namespace {

const char* const kSlotNames[] = {
    "HM_ARG_A",      "HM_ARG_B",         "HM_ARG_C",          "HM_ARG_BIAS",
    "HM_ARG_SCALES", "HM_ARG_ZEROS",     "HM_ARG_GLOBAL",     "HM_ARG_WORKSPACE",
    "HM_ARG_SORTED_IDS", "HM_ARG_EXPERT_IDS", "HM_ARG_NUM_TOKENS_PADDED", "HM_ARG_ACT_SCALES",
    "HM_ARG_EXPERT_OFFSETS", "HM_ARG_MASKED_M"};
static_assert(sizeof(kSlotNames) / sizeof(kSlotNames[0]) == hm_launch_params::kNamedPointerSlots,
              "one name per pointer slot of humming.h");

std::string named(const char* slot, uint64_t pointer) {
  return std::string(slot) + " (" + core::hex_address(pointer) + ")";
}

// Whether the device can read pageable host memory it was never told about (HMM or ATS): then a
// pointer unknown to the driver may still be valid. Asked only on that (rare) path; a driver
// that does not know the attribute is taken to say no.
bool pageable_memory_access(const runtime::Device& device) {
  const runtime::DriverApi& api = device.driver().api();
  runtime::CUdevice handle = 0;
  int value = 0;
  return api.cuDeviceGet(&handle, device.ordinal()) == runtime::CUDA_SUCCESS &&
         api.cuDeviceGetAttribute(&value, runtime::CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS,
                                  handle) == runtime::CUDA_SUCCESS &&
         value != 0;
}

// A secondary attribute; false when the driver cannot answer (some CUDA-compatible runtimes
// know only the device ordinal), and the caller then decides by the ordinal alone. The buffer is
// 8 zeroed bytes so that a value written as 1, 4 or 8 bytes (bool, unsigned, CUdeviceptr) reads
// the same on this little-endian ABI.
bool query(const runtime::Device& device, int attribute, uint64_t pointer, uint64_t* value) {
  *value = 0;
  return device.driver().api().cuPointerGetAttribute(value, attribute, pointer) ==
         runtime::CUDA_SUCCESS;
}

// The address range of the allocation (or reservation) holding a pointer: {0, 0} when the
// driver cannot say.
struct Range {
  uint64_t start = 0, size = 0;
};

// A pointer's allocation must hold the `extent` bytes the call touches from it (0: not checked).
// The driver's range is the whole allocation (cuMemAlloc, a registered host range, managed
// memory) or, for virtual memory management, the whole address reservation (cuMemAddressReserve,
// which pools and PyTorch's expandable segments use): the driver API documents RANGE_START_ADDR
// / RANGE_SIZE as "the mappable address range", not the mapped chunk that cuMemGetAddressRange
// reports. So a buffer spread over several mapped chunks is not refused (measured on no GPU yet:
// NOTES v39), and a buffer carved out of a larger allocation is checked against that allocation.
void check_extent(const char* slot, uint64_t pointer, uint64_t extent, const Range& range) {
  if (extent == 0 || range.size == 0 || pointer < range.start ||
      pointer - range.start >= range.size)
    return;  // nothing to check, or an answer that does not describe the pointer
  const uint64_t holds = range.size - (pointer - range.start);
  if (extent <= holds) return;
  fail(HM_ERROR_INVALID_ARGUMENT,
       named(slot, pointer) + " is " + std::to_string(holds) +
           " bytes from the end of its allocation (" + core::hex_address(range.start) + ", " +
           std::to_string(range.size) + " bytes), but the call uses " +
           (extent == UINT64_MAX ? std::string("more than 2^64") : std::to_string(extent)) +
           " bytes from it: the buffer is too small for this call (humming.h gives each call's "
           "buffer sizes)");
}

Range queried_range(const runtime::Device& device, uint64_t pointer) {
  Range range;
  if (!query(device, runtime::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, pointer, &range.start) ||
      !query(device, runtime::CU_POINTER_ATTRIBUTE_RANGE_SIZE, pointer, &range.size))
    return Range{};
  return range;
}

// Device memory of this device, asked in one call together with its range: the answer that the
// attribute-by-attribute path below accepts first (its ordinal is ours and its memory type is
// not host memory). False for anything else, and when the driver has no cuPointerGetAttributes
// or it fails (a driver before CUDA 10.2 does not know the range attributes): the caller then
// takes that path, which decides every case. The plural call answers an address it does not
// know with zeros (memory type 0, ordinal 0, which is a real ordinal) rather than an error, so
// the memory type must say device. Values are read from 8 zeroed bytes, as in query(); the
// ordinal is an int, so its low 4 bytes.
bool device_memory_of(const runtime::Device& device, uint64_t pointer, Range* range) {
  using namespace runtime;
  const Driver& driver = device.driver();
  if (!driver.has_pointer_get_attributes()) return false;
  int attributes[4] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                       CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  uint64_t type = 0, ordinal = 0;
  void* data[4] = {&type, &ordinal, &range->start, &range->size};
  range->start = range->size = 0;
  const bool ranges = driver.answers_pointer_ranges();
  CUresult result = driver.api().cuPointerGetAttributes(ranges ? 4 : 2, attributes, data, pointer);
  if (result == CUDA_ERROR_INVALID_VALUE && ranges) {
    // An attribute it does not know (the plural call answers an unknown pointer with zeros, not
    // an error): perhaps a runtime without the range attributes. Ask without them, and if that
    // answers, never ask for them again (sizes then go unchecked with this driver).
    range->start = range->size = 0;
    result = driver.api().cuPointerGetAttributes(2, attributes, data, pointer);
    if (result == CUDA_SUCCESS) driver.note_no_pointer_ranges();
  }
  return result == CUDA_SUCCESS && type == CU_MEMORYTYPE_DEVICE &&
         static_cast<int32_t>(static_cast<uint32_t>(ordinal)) == device.ordinal();
}

// `extent`: the bytes the call uses from the pointer (0: none to check).
void check_pointer(const runtime::Device& device, const char* slot, uint64_t pointer,
                   uint64_t extent) {
  using namespace runtime;
  Range range;
  if (device_memory_of(device, pointer, &range))
    return check_extent(slot, pointer, extent, range);
  // Memory the checks below accept other than through the final return, range-checked too.
  auto accept = [&] {
    if (extent > 0) check_extent(slot, pointer, extent, queried_range(device, pointer));
  };
  const Driver& driver = device.driver();
  const int ours = device.ordinal();
  int ordinal = -1;
  const CUresult result =
      driver.api().cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, pointer);
  if (result == CUDA_ERROR_INVALID_VALUE) {  // not allocated, registered or mapped by CUDA
    // Unless the driver has no ordinal for memory it does know (managed or mapped host memory
    // on some drivers): ask what it is before calling it unknown.
    uint64_t managed = 0, type = 0, mapped = 0;
    if (query(device, CU_POINTER_ATTRIBUTE_IS_MANAGED, pointer, &managed) && managed != 0)
      return accept();
    if (query(device, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, pointer, &type) &&
        type == CU_MEMORYTYPE_HOST &&
        query(device, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, pointer, &mapped) && mapped == pointer)
      return accept();
    if (pageable_memory_access(device)) return;  // plain host memory: no range to check
    fail(HM_ERROR_INVALID_ARGUMENT,
         named(slot, pointer) + " is not memory device " + std::to_string(ours) +
             " can access: the CUDA driver does not know the address (plain host memory from "
             "malloc/new, freed memory, or not a pointer). Pass device memory (cuMemAlloc, "
             "hm_device_alloc), managed memory, or host memory pinned with cuMemHostRegister");
  }
  driver.check(result, "cuPointerGetAttribute", slot);

  uint64_t type = 0;
  if (query(device, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, pointer, &type) &&
      type == CU_MEMORYTYPE_HOST) {
    // Pinned host memory: usable when it is mapped into this context, at this very address
    // (registered memory can have a device address different from its host address).
    uint64_t mapped = 0;
    if (!query(device, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, pointer, &mapped)) {
      if (ordinal != ours)
        fail(HM_ERROR_WRONG_DEVICE,
             named(slot, pointer) + " is host memory registered with device " +
                 std::to_string(ordinal) + " and not mapped for device " + std::to_string(ours) +
                 ", the plan's device: register it with CU_MEMHOSTREGISTER_PORTABLE");
      fail(HM_ERROR_INVALID_ARGUMENT,
           named(slot, pointer) + " is host memory that is not mapped for device " +
               std::to_string(ours) + ": register it with CU_MEMHOSTREGISTER_DEVICEMAP");
    }
    if (mapped != pointer)
      fail(HM_ERROR_INVALID_ARGUMENT,
           named(slot, pointer) + " is the host address of registered host memory; kernels " +
               "reach it at " + core::hex_address(mapped) + " (cuMemHostGetDevicePointer): pass that address");
    return accept();
  }
  if (ordinal == ours) return accept();
  uint64_t managed = 0;
  if (query(device, CU_POINTER_ATTRIBUTE_IS_MANAGED, pointer, &managed) && managed != 0)
    return accept();  // managed memory migrates to whichever device touches it
  fail(HM_ERROR_WRONG_DEVICE,
       named(slot, pointer) + " is memory of device " + std::to_string(ordinal) +
           ", but the call runs on device " + std::to_string(ours) +
           " (its context's device): allocate it on device " + std::to_string(ours) +
           " or copy it there; peer memory is refused even with peer access enabled");
}

}  // namespace

void check_launch_device(const runtime::Device& device, const hm_launch_params& params,
                         runtime::CUstream stream, const uint64_t* extents) {
  if (device.driver().has_pointer_get_attribute()) {
    // The plan's context current: DEVICE_POINTER answers for the current context. It pushes
    // nothing when the caller has made it current already (hm_plan_gemm).
    runtime::Device::Scope scope(device);
    // Each value once: a slot holding a value an earlier slot held is checked with it, for the
    // largest extent of them, and the first slot holding it is the one a refusal names.
    constexpr int kSlots = hm_launch_params::kNamedPointerSlots;
    uint64_t checked[kSlots];
    int count = 0;
    for (int slot = HM_ARG_A; slot < kSlots; ++slot) {
      const uint64_t pointer = params.pointers[slot];
      if (pointer == 0 || std::find(checked, checked + count, pointer) != checked + count)
        continue;
      uint64_t extent = 0;
      for (int other = slot; extents != nullptr && other < kSlots; ++other)
        if (params.pointers[other] == pointer) extent = std::max(extent, extents[other]);
      check_pointer(device, kSlotNames[slot], pointer, extent);
      checked[count++] = pointer;
    }
  }
  check_stream(device, stream);
}

void check_device_pointer(const runtime::Device& device, const char* name, uint64_t pointer,
                          uint64_t extent) {
  if (pointer == 0 || !device.driver().has_pointer_get_attribute()) return;
  runtime::Device::Scope scope(device);  // nothing to push when the caller made it current
  check_pointer(device, name, pointer, extent);
}

void check_stream(const runtime::Device& device, runtime::CUstream stream) {
  // nullopt: the driver lacks cuStreamGetCtx, so the stream cannot be checked here (a stream of
  // another context then fails in cuLaunchKernel instead).
  if (device.owns_stream(stream) == false)
    fail(HM_ERROR_WRONG_DEVICE,
         "the stream " + core::hex_address(reinterpret_cast<uintptr_t>(stream)) +
             " belongs to another CUDA context (another device, or a context of device " +
             std::to_string(device.ordinal()) +
             " other than its primary context, which the plan's kernels are loaded in), or is "
             "not a valid stream: use a stream created on device " +
             std::to_string(device.ordinal()) + " (CUDA runtime streams on it qualify)");
}

}  // namespace hm::api
