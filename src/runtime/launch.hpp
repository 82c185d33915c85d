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

// Launches `function` (from a Module of `device`) on `stream` (nullptr: the legacy default
// stream). `args` points to one pointer per kernel parameter, as cuLaunchKernel takes them.
// `kernel_name` (may be null) only names the kernel in error messages.
// Throws HM_ERROR_INVALID_ARGUMENT for an empty grid or block or too many threads, HM_ERROR_LAUNCH
// when the shared memory does not fit the device or the driver rejects the launch.
void launch(const Device& device, CUfunction function, Dim3 grid, Dim3 block,
            uint32_t shared_memory_bytes, CUstream stream, void** args,
            const char* kernel_name = nullptr);

// The same with thread-block clusters (sm_90+), through cuLaunchKernelEx; each grid dimension
// must be a multiple of the cluster's. HM_ERROR_UNSUPPORTED when the driver lacks
// cuLaunchKernelEx.
void launch_with_cluster(const Device& device, CUfunction function, Dim3 grid, Dim3 block,
                         Dim3 cluster, uint32_t shared_memory_bytes, CUstream stream, void** args,
                         const char* kernel_name = nullptr);

// How many clusters of this shape the device can run at once (cuOccupancyMaxActiveClusters):
// 0 when one cluster of `cluster` blocks with this block size and shared memory cannot be
// co-scheduled at all, so that a launch would fail. HM_ERROR_UNSUPPORTED when the driver lacks
// the query.
int max_active_clusters(const Device& device, CUfunction function, Dim3 grid, Dim3 block,
                        Dim3 cluster, uint32_t shared_memory_bytes, const char* kernel_name = nullptr);

}  // namespace hm::runtime
