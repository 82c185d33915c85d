// Kernel launches (see launch.hpp).
#include "runtime/launch.hpp"

#include <string>

#include "core/error.hpp"

namespace hm::runtime {
namespace {

std::string dims(Dim3 d) {
  return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + ")";
}

std::string kernel_label(const char* kernel_name) {
  return kernel_name ? std::string("kernel '") + kernel_name + "'" : std::string("the kernel");
}

// Checks the launch shape and opts the function in to its shared memory size.
void prepare(const Device& device, CUfunction function, Dim3 grid, Dim3 block,
             uint32_t shared_memory_bytes, const char* kernel_name) {
  HM_REQUIRE(function != nullptr, HM_ERROR_INVALID_ARGUMENT, "launch: the function is null");
  if (grid.x == 0 || grid.y == 0 || grid.z == 0)
    fail(HM_ERROR_INVALID_ARGUMENT,
         "launching " + kernel_label(kernel_name) + ": the grid " + dims(grid) + " is empty");
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  const int max_threads = device.properties().max_threads_per_block;
  if (threads == 0 || (max_threads > 0 && threads > static_cast<uint64_t>(max_threads)))
    fail(HM_ERROR_INVALID_ARGUMENT, "launching " + kernel_label(kernel_name) + ": the block " +
                                        dims(block) + " has " + std::to_string(threads) +
                                        " threads; the device allows 1 to " +
                                        std::to_string(max_threads));
  if (shared_memory_bytes > kDefaultDynamicSharedBytes)
    device.ensure_dynamic_shared_memory(function, shared_memory_bytes);
}

// A cuLaunchKernelEx configuration with the cluster attribute (null `cluster`: none) and, when
// `programmatic`, the programmatic stream serialization attribute, in `attributes` (room for
// two).
CUlaunchConfig ex_config(Dim3 grid, Dim3 block, uint32_t shared_memory_bytes, CUstream stream,
                         CUlaunchAttribute* attributes, const Dim3* cluster, bool programmatic) {
  unsigned int count = 0;
  if (cluster != nullptr) {
    attributes[count].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attributes[count].value.clusterDim = {cluster->x, cluster->y, cluster->z};
    ++count;
  }
  if (programmatic) {
    attributes[count].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attributes[count].value.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  CUlaunchConfig config{};
  config.gridDimX = grid.x;
  config.gridDimY = grid.y;
  config.gridDimZ = grid.z;
  config.blockDimX = block.x;
  config.blockDimY = block.y;
  config.blockDimZ = block.z;
  config.sharedMemBytes = shared_memory_bytes;
  config.hStream = stream;
  config.attrs = count > 0 ? attributes : nullptr;
  config.numAttrs = count;
  return config;
}

bool programmatic(const Device& device, Order order) {
  return order == Order::kProgrammatic && programmatic_launch_available(device);
}

}  // namespace

bool programmatic_launch_available(const Device& device) {
  const Driver& driver = device.driver();
  return device.programmatic_launches() && device.properties().cc_major >= 9 &&
         driver.has_launch_kernel_ex() && driver.version() >= 12030;
}

void launch(const Device& device, CUfunction function, Dim3 grid, Dim3 block,
            uint32_t shared_memory_bytes, CUstream stream, void** args, const char* kernel_name,
            Order order) {
  prepare(device, function, grid, block, shared_memory_bytes, kernel_name);
  const Driver& driver = device.driver();
  Device::Scope scope(device);
  if (programmatic(device, order)) {
    CUlaunchAttribute attributes[2]{};
    const CUlaunchConfig config = ex_config(grid, block, shared_memory_bytes, stream, attributes,
                                            nullptr, true);
    driver.check(driver.api().cuLaunchKernelEx(&config, function, args, nullptr),
                 "cuLaunchKernelEx", kernel_name);
    return;
  }
  driver.check(driver.api().cuLaunchKernel(function, grid.x, grid.y, grid.z, block.x, block.y,
                                           block.z, shared_memory_bytes, stream, args, nullptr),
               "cuLaunchKernel", kernel_name);
}

int max_active_clusters(const Device& device, CUfunction function, Dim3 grid, Dim3 block,
                        Dim3 cluster, uint32_t shared_memory_bytes, const char* kernel_name) {
  const Driver& driver = device.driver();
  if (!driver.has_occupancy_max_active_clusters())
    fail(HM_ERROR_UNSUPPORTED, "checking the clusters of " + kernel_label(kernel_name) +
                                   " needs cuOccupancyMaxActiveClusters, which the driver " +
                                   driver.path() + " does not provide (CUDA 11.8 or newer has it)");
  prepare(device, function, grid, block, shared_memory_bytes, kernel_name);
  CUlaunchAttribute attributes[2]{};
  const CUlaunchConfig config =
      ex_config(grid, block, shared_memory_bytes, nullptr, attributes, &cluster, false);
  int clusters = 0;
  Device::Scope scope(device);
  driver.check(driver.api().cuOccupancyMaxActiveClusters(&clusters, function, &config),
               "cuOccupancyMaxActiveClusters", kernel_name);
  return clusters;
}

void launch_with_cluster(const Device& device, CUfunction function, Dim3 grid, Dim3 block,
                         Dim3 cluster, uint32_t shared_memory_bytes, CUstream stream, void** args,
                         const char* kernel_name, Order order) {
  const Driver& driver = device.driver();
  if (!driver.has_launch_kernel_ex())
    fail(HM_ERROR_UNSUPPORTED, "launching " + kernel_label(kernel_name) +
                                   " with clusters needs cuLaunchKernelEx, which the driver " +
                                   driver.path() + " does not provide (CUDA 11.8 or newer has it)");
  if (cluster.x == 0 || cluster.y == 0 || cluster.z == 0 || grid.x % cluster.x != 0 ||
      grid.y % cluster.y != 0 || grid.z % cluster.z != 0)
    fail(HM_ERROR_INVALID_ARGUMENT, "launching " + kernel_label(kernel_name) + ": the grid " +
                                        dims(grid) + " is not a whole number of clusters " +
                                        dims(cluster));
  prepare(device, function, grid, block, shared_memory_bytes, kernel_name);

  CUlaunchAttribute attributes[2]{};
  const CUlaunchConfig config = ex_config(grid, block, shared_memory_bytes, stream, attributes,
                                          &cluster, programmatic(device, order));
  Device::Scope scope(device);
  driver.check(driver.api().cuLaunchKernelEx(&config, function, args, nullptr), "cuLaunchKernelEx",
               kernel_name);
}

}  // namespace hm::runtime
