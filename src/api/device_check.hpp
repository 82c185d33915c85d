// Per-call device checks of hm_plan_gemm: every pointer argument and the stream must be usable by
// a launch on the plan's device, or the call fails with a status that names the argument.
#pragma once

#include "runtime/device.hpp"

struct hm_launch_params;

namespace hm::api {

// Throws, naming the slot (HM_ARG_A ... HM_ARG_WORKSPACE) or the stream:
//   HM_ERROR_WRONG_DEVICE      memory of another device (not managed, not host memory mapped for
//                              this device), or a stream of another CUDA context;
//   HM_ERROR_INVALID_ARGUMENT  host memory the device cannot reach (unknown to the driver on a
//                              device without pageable memory access, or registered but not
//                              mapped here, or passed by its host address where the device
//                              address differs), or an allocation that ends before the bytes
//                              the call uses from the pointer (extents[slot], below).
// Accepts device memory of this device, managed memory, host memory mapped for this device and
// the default stream handles. A value set in several slots is checked once (a refusal names the
// first of them). A check whose driver entry point is missing (old drivers, the minimal mock) is
// skipped. Driver queries only: legal during stream capture, no device work. The device's
// context is pushed for the checks unless the caller has made it current (Device::Scope).
// extents (null: none): per pointer slot, the bytes the call reads or writes from its address
// (0: not checked; gemm::Family::extents). The allocation range comes with the same driver
// query; memory the driver has no range for (pageable host memory) is not size-checked.
void check_launch_device(const runtime::Device& device, const hm_launch_params& params,
                         runtime::CUstream stream, const uint64_t* extents = nullptr);

// The same checks for one named device address (0 is skipped; extent bytes from it, 0: not
// size-checked) and for a stream, for the utility calls that take addresses rather than launch
// parameters (hm_quantize_activation_device).
void check_device_pointer(const runtime::Device& device, const char* name, uint64_t pointer,
                          uint64_t extent = 0);
void check_stream(const runtime::Device& device, runtime::CUstream stream);

}  // namespace hm::api
