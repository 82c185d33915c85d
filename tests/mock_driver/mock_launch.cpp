// Modules, functions and launches of the mock CUDA driver (see mock_cuda.cpp).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mock_state.hpp"

using namespace hm::mock;

// ---------------------------------------------------------------------------------------------
// Modules, functions, launches
// ---------------------------------------------------------------------------------------------

HM_MOCK_EXPORT CUresult cuModuleLoadDataEx(CUmodule* module, const void* image,
                                           unsigned int option_count, int* options,
                                           void** option_values) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  if (module == nullptr || image == nullptr || (option_count > 0 && (!options || !option_values)))
    return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Context* context = current();
  if (!live(context)) return CUDA_ERROR_INVALID_CONTEXT;
  const std::string bytes(static_cast<const char*>(image), hm::mock::image_size(image));
  s.last_image = bytes;
  if (bytes.empty()) return CUDA_ERROR_INVALID_IMAGE;

  const size_t marker = bytes.find("HM_MOCK_JIT_ERROR");
  if (marker != std::string::npos) {  // a PTX that "fails to compile", with a JIT log
    const size_t end = bytes.find('\n', marker);
    const std::string log =
        "mock ptxas error: " +
        bytes.substr(marker, end == std::string::npos ? std::string::npos : end - marker);
    char* buffer = nullptr;
    size_t capacity = 0;
    unsigned int size_option = option_count;
    for (unsigned int i = 0; i < option_count; ++i) {
      if (options[i] == CU_JIT_ERROR_LOG_BUFFER) buffer = static_cast<char*>(option_values[i]);
      if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
        capacity = reinterpret_cast<uintptr_t>(option_values[i]);
        size_option = i;
      }
    }
    if (buffer != nullptr && capacity > 0) {
      const size_t written = std::min(log.size(), capacity - 1);
      std::memcpy(buffer, log.data(), written);
      buffer[written] = '\0';
      option_values[size_option] =
          reinterpret_cast<void*>(uintptr_t{written});  // as the driver does
    }
    return CUDA_ERROR_INVALID_PTX;
  }
  auto* m = new Module();
  m->image = bytes;
  m->context = context;
  s.modules.insert(m);
  *module = reinterpret_cast<CUmodule>(m);
  return CUDA_SUCCESS;
}

HM_MOCK_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  HM_MOCK_COUNT_CALL();
  return cuModuleLoadDataEx(module, image, 0, nullptr, nullptr);
}

HM_MOCK_EXPORT CUresult cuModuleUnload(CUmodule module) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto* m = reinterpret_cast<Module*>(module);
  if (!s.modules.erase(m)) return CUDA_ERROR_INVALID_HANDLE;
  retire_module(s, m);
  return CUDA_SUCCESS;
}

HM_MOCK_EXPORT CUresult cuModuleGetFunction(CUfunction* function, CUmodule module,
                                            const char* name) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  if (function == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto* m = reinterpret_cast<Module*>(module);
  if (!s.modules.count(m)) return CUDA_ERROR_INVALID_HANDLE;
  std::unique_ptr<Function>& f = m->functions[name];
  if (!f) {
    if (!hm::mock::image_has_symbol(m->image, name)) {
      m->functions.erase(name);
      return CUDA_ERROR_NOT_FOUND;
    }
    if (s.spare_functions.empty()) {
      f = std::make_unique<Function>();
    } else {
      f = std::move(s.spare_functions.back());
      s.spare_functions.pop_back();
      *f = Function();
    }
    f->name = name;
    f->module = m;
    f->signature = hm::mock::kernel_signature(m->image, name);
  }
  *function = reinterpret_cast<CUfunction>(f.get());
  return CUDA_SUCCESS;
}

HM_MOCK_EXPORT CUresult cuFuncSetAttribute(CUfunction function, int attribute, int value) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Function* f = live_function(s, function);
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  ++s.attribute_sets;
  if (attribute != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) return CUDA_SUCCESS;
  int cc = 0;
  device_cc(f->module->context->ordinal, &cc);
  if (value < 0 || value > smem_optin_of(cc)) return CUDA_ERROR_INVALID_VALUE;
  f->max_dynamic_shared = value;
  return CUDA_SUCCESS;
}

HM_MOCK_EXPORT CUresult cuFuncGetAttribute(int* value, int attribute, CUfunction function) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Function* f = live_function(s, function);
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  switch (attribute) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *value = kMaxThreadsPerBlock;
      break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
      *value = 0;
      break;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
      *value = 0;
      break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
      *value = 32;
      break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      *value = f->max_dynamic_shared;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

namespace {

CUresult launch(Function* function, const unsigned int grid[3], const unsigned int block[3],
                const unsigned int cluster[3], unsigned int shared_bytes, CUstream stream,
                void** params, void** extra) {
  State& s = state();  // the caller holds the lock
  Context* context = current();
  if (!live(context)) return CUDA_ERROR_INVALID_CONTEXT;
  if (function == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (function->module->context != context) return CUDA_ERROR_INVALID_CONTEXT;
  if (!stream_usable(s, stream, context)) return CUDA_ERROR_INVALID_HANDLE;
  const uint64_t threads = uint64_t{block[0]} * block[1] * block[2];
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0 || grid[1] > 65535 || grid[2] > 65535 ||
      threads == 0 || threads > kMaxThreadsPerBlock || block[2] > 64)
    return CUDA_ERROR_INVALID_VALUE;
  if (static_cast<int64_t>(shared_bytes) > function->max_dynamic_shared)
    return CUDA_ERROR_INVALID_VALUE;  // the real driver wants cuFuncSetAttribute first
  if (extra != nullptr) return CUDA_ERROR_NOT_SUPPORTED;  // the mock marshals kernelParams only
  if (env_flag("HM_MOCK_FAIL_LAUNCH")) return CUDA_ERROR_LAUNCH_FAILED;

  hm_mock_launch_t record{};
  std::snprintf(record.function, sizeof(record.function), "%s", function->name.c_str());
  for (int i = 0; i < 3; ++i) {
    record.grid[i] = grid[i];
    record.block[i] = block[i];
    record.cluster[i] = cluster[i];
  }
  record.shared_memory_bytes = shared_bytes;
  record.stream = stream;
  const KernelSignature& signature = function->signature;
  record.param_count = signature.known ? static_cast<int32_t>(signature.params.size()) : -1;
  if (signature.known) {
    if (signature.buffer_size > sizeof(record.arg_bytes)) return CUDA_ERROR_NOT_SUPPORTED;
    if (!signature.params.empty() && params == nullptr) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < signature.params.size(); ++i) {
      if (params[i] == nullptr) return CUDA_ERROR_INVALID_VALUE;
      std::memcpy(record.arg_bytes + signature.params[i].offset, params[i],
                  signature.params[i].size);
    }
    record.arg_bytes_size = static_cast<uint32_t>(signature.buffer_size);
    CUresult result = CUDA_SUCCESS;
    auto check = [&s](uint64_t address, uint64_t bytes) { return in_bounds(s, address, bytes); };
    if (hm::mock::run_host_kernel(function->name, signature, record.arg_bytes, check, &result)) {
      if (result != CUDA_SUCCESS) return result;
      record.executed = 1;
    }
  }
  s.last_launch = record;
  s.has_launch = true;
  ++s.launches;
  return CUDA_SUCCESS;
}

}  // namespace

HM_MOCK_REQUIRED_BUT_DROPPED CUresult cuLaunchKernel(CUfunction function, unsigned int grid_x,
                                                     unsigned int grid_y, unsigned int grid_z,
                                                     unsigned int block_x, unsigned int block_y,
                                                     unsigned int block_z,
                                                     unsigned int shared_bytes, CUstream stream,
                                                     void** params, void** extra) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const unsigned int grid[3] = {grid_x, grid_y, grid_z}, block[3] = {block_x, block_y, block_z};
  const unsigned int cluster[3] = {1, 1, 1};
  return launch(live_function(s, function), grid, block, cluster, shared_bytes, stream, params,
                extra);
}

// Reached only through cuGetProcAddress_v2 (see the top of the file).
HM_MOCK_INTERNAL CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction function,
                                           void** params, void** extra) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  if (config == nullptr || (config->numAttrs > 0 && config->attrs == nullptr))
    return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const unsigned int grid[3] = {config->gridDimX, config->gridDimY, config->gridDimZ};
  const unsigned int block[3] = {config->blockDimX, config->blockDimY, config->blockDimZ};
  unsigned int cluster[3] = {1, 1, 1};
  bool programmatic = false;
  for (unsigned int i = 0; i < config->numAttrs; ++i) {
    const CUlaunchAttribute& a = config->attrs[i];
    if (a.id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION) {
      programmatic = a.value.programmaticStreamSerializationAllowed != 0;
      continue;
    }
    if (a.id != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) return CUDA_ERROR_NOT_SUPPORTED;
    cluster[0] = a.value.clusterDim.x;
    cluster[1] = a.value.clusterDim.y;
    cluster[2] = a.value.clusterDim.z;
  }
  Context* context = current();
  int cc = 0;
  if (live(context)) device_cc(context->ordinal, &cc);
  const bool clustered = cluster[0] * cluster[1] * cluster[2] != 1;
  // Programmatic dependent launch, like clusters, is an sm_90 feature.
  if ((clustered || programmatic) && cc < 90) return CUDA_ERROR_NOT_SUPPORTED;
  for (int i = 0; i < 3; ++i)
    if (cluster[i] == 0 || grid[i] % cluster[i] != 0) return CUDA_ERROR_INVALID_VALUE;
  const CUresult result = launch(live_function(s, function), grid, block, cluster,
                                 config->sharedMemBytes, config->hStream, params, extra);
  if (result == CUDA_SUCCESS) s.last_launch.programmatic = programmatic ? 1 : 0;
  return result;
}

// Clusters of up to HM_MOCK_MAX_CLUSTER (default 8) blocks fit; the answer is how many such
// clusters the device's SMs hold at one block per SM (an estimate: the real driver also counts
// registers, shared memory and the processing clusters).
HM_MOCK_INTERNAL CUresult cuOccupancyMaxActiveClusters(int* clusters, CUfunction function,
                                                       const CUlaunchConfig* config) {
  HM_MOCK_COUNT_CALL();
  HM_MOCK_REQUIRE_INIT();
  if (clusters == nullptr || config == nullptr || (config->numAttrs > 0 && config->attrs == nullptr))
    return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (live_function(s, function) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  unsigned int size = 1;
  for (unsigned int i = 0; i < config->numAttrs; ++i) {
    const CUlaunchAttribute& a = config->attrs[i];
    if (a.id != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) return CUDA_ERROR_NOT_SUPPORTED;
    size = a.value.clusterDim.x * a.value.clusterDim.y * a.value.clusterDim.z;
  }
  Context* context = current();
  int cc = 0;
  if (!live(context) || !device_cc(context->ordinal, &cc)) return CUDA_ERROR_INVALID_CONTEXT;
  if (size > 1 && cc < 90) return CUDA_ERROR_NOT_SUPPORTED;
  const char* limit = std::getenv("HM_MOCK_MAX_CLUSTER");
  const unsigned int max_size = limit ? static_cast<unsigned int>(std::atoi(limit)) : 8u;
  *clusters = size == 0 || size > max_size ? 0 : spec_for(cc).multiprocessors / static_cast<int>(size);
  return CUDA_SUCCESS;
}

// TMA descriptors: checks the arguments as the real driver documents them (cuda.h,
// cuTensorMapEncodeTiled) and writes the address, the shape and the box into the opaque words,
// so a test can read back what the library asked for. Optional, like on a real driver.
HM_MOCK_OPTIONAL CUresult cuTensorMapEncodeTiled(CUtensorMap* map, int data_type, uint32_t rank,
                                                 void* global_address, const uint64_t* global_dim,
                                                 const uint64_t* global_strides,
                                                 const uint32_t* box_dim,
                                                 const uint32_t* element_strides, int interleave,
                                                 int swizzle, int l2_promotion, int oob_fill) {
  HM_MOCK_COUNT_CALL();
  static const int kBytes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};
  HM_MOCK_REQUIRE_INIT();
  if (!live(current())) return CUDA_ERROR_INVALID_CONTEXT;  // as the real driver answers
  if (map == nullptr || global_address == nullptr || global_dim == nullptr ||
      box_dim == nullptr || element_strides == nullptr || (rank > 1 && global_strides == nullptr))
    return CUDA_ERROR_INVALID_VALUE;
  if (data_type < 0 || data_type > 12 || rank < 1 || rank > 5 || interleave != 0 ||
      swizzle < 0 || swizzle > 3 || l2_promotion < 0 || l2_promotion > 3 || oob_fill < 0 ||
      oob_fill > 1)
    return CUDA_ERROR_INVALID_VALUE;
  const int bytes = kBytes[data_type];
  if (reinterpret_cast<uintptr_t>(global_address) % 16 != 0) return CUDA_ERROR_INVALID_VALUE;
  for (uint32_t i = 0; i < rank; ++i) {
    if (global_dim[i] == 0 || global_dim[i] > (uint64_t{1} << 32)) return CUDA_ERROR_INVALID_VALUE;
    if (box_dim[i] == 0 || box_dim[i] > 256 || element_strides[i] == 0 || element_strides[i] > 8)
      return CUDA_ERROR_INVALID_VALUE;
    if (i + 1 < rank && (global_strides[i] % 16 != 0 || global_strides[i] >= (uint64_t{1} << 40)))
      return CUDA_ERROR_INVALID_VALUE;
  }
  if ((uint64_t{box_dim[0]} * bytes) % 16 != 0) return CUDA_ERROR_INVALID_VALUE;
  static const uint32_t kSwizzleSpan[] = {0, 32, 64, 128};
  if (swizzle != 0 && uint64_t{box_dim[0]} * bytes > kSwizzleSpan[swizzle])
    return CUDA_ERROR_INVALID_VALUE;
  std::memset(map, 0, sizeof *map);
  map->opaque[0] = reinterpret_cast<uintptr_t>(global_address);
  map->opaque[1] = (uint64_t(rank) << 32) | uint64_t(data_type) << 8 | uint64_t(swizzle);
  for (uint32_t i = 0; i < rank && i < 2; ++i) {
    map->opaque[2 + i] = global_dim[i];
    map->opaque[4 + i] = box_dim[i];
  }
  if (rank > 1) map->opaque[6] = global_strides[0];
  return CUDA_SUCCESS;
}
