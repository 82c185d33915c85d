// Kernel launches: explicit grid, block, dynamic shared memory and stream. Asynchronous: no host
// synchronization and no allocation (except the first time a function needs more than 48 KiB of
// shared memory, when its limit is raised and remembered).
#pragma once

#include <cstdint>

#include "runtime/device.hpp"

namespace hm::runtime {

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
};

// Above this a kernel must opt in to more dynamic shared memory (cuFuncSetAttribute).
constexpr uint32_t kDefaultDynamicSharedBytes = 48 * 1024;

// How a launch orders itself after the previous work on its stream. kProgrammatic: the kernel
// may start while the kernel before it still runs (programmatic dependent launch, sm_90+); it
// must then wait (ptx/griddep.cuh) before it touches memory that kernel may use. Honoured only
// where programmatic_launch_available(); elsewhere the launch is in stream order, which is the
// same result later.
enum class Order { kStream, kProgrammatic };

// Whether kProgrammatic launches take effect on `device`: compute capability 9.0 or newer, a
// driver with cuLaunchKernelEx of CUDA 12.3 or newer (programmatic edges in captured graphs), and
// not turned off (Device::programmatic_launches, HUMMING_DISABLE_PROGRAMMATIC_LAUNCH).
bool programmatic_launch_available(const Device& device);

// Launches `function` (from a Module of `device`) on `stream` (nullptr: the legacy default
// stream). `args` points to one pointer per kernel parameter, as cuLaunchKernel takes them.
// `kernel_name` (may be null) only names the kernel in error messages.
// Throws HM_ERROR_INVALID_ARGUMENT for an empty grid or block or too many threads, HM_ERROR_LAUNCH
// when the shared memory does not fit the device or the driver rejects the launch.
void launch(const Device& device, CUfunction function, Dim3 grid, Dim3 block,
            uint32_t shared_memory_bytes, CUstream stream, void** args,
            const char* kernel_name = nullptr, Order order = Order::kStream);

// The same with thread-block clusters (sm_90+), through cuLaunchKernelEx; each grid dimension
// must be a multiple of the cluster's. HM_ERROR_UNSUPPORTED when the driver lacks
// cuLaunchKernelEx.
void launch_with_cluster(const Device& device, CUfunction function, Dim3 grid, Dim3 block,
                         Dim3 cluster, uint32_t shared_memory_bytes, CUstream stream, void** args,
                         const char* kernel_name = nullptr, Order order = Order::kStream);

// How many clusters of this shape the device can run at once (cuOccupancyMaxActiveClusters):
// 0 when one cluster of `cluster` blocks with this block size and shared memory cannot be
// co-scheduled at all, so that a launch would fail. HM_ERROR_UNSUPPORTED when the driver lacks
// the query.
int max_active_clusters(const Device& device, CUfunction function, Dim3 grid, Dim3 block,
                        Dim3 cluster, uint32_t shared_memory_bytes, const char* kernel_name = nullptr);

}  // namespace hm::runtime
