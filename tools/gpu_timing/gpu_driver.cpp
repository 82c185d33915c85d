// Loading the CUDA driver for the tools, benchmarks and GPU tests (see gpu_driver.hpp).
#include "gpu_driver.hpp"

#include <dlfcn.h>

#include <cstdlib>

namespace gpu_driver {
namespace {

using PFN_cuInit = CUresult (*)(unsigned);
using PFN_cuGetProcAddress_v12000 = CUresult (*)(const char*, void**, int, uint64_t, int*);
constexpr uint64_t CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1;
constexpr int CU_GET_PROC_ADDRESS_SUCCESS = 0;

}  // namespace

std::string Driver::describe(CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName == nullptr || cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
  if (cuGetErrorString == nullptr || cuGetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
  std::string out = name ? name : "CUDA error " + std::to_string(r);
  if (text) out += std::string(" (") + text + ")";
  return out;
}

std::string Driver::failure(CUresult r, const char* call) const {
  return std::string(call) + " failed: " + describe(r);
}

void Driver::check(CUresult r, const char* call) const {
  if (r != CUDA_SUCCESS) throw Error(failure(r, call));
}

Driver load_driver() {
  Driver cu;
  const char* env = std::getenv("HUMMING_CUDA_DRIVER_PATH");
  const std::string path = env && *env ? env : "libcuda.so.1";
  cu.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (cu.handle == nullptr) throw Error("cannot load the CUDA driver " + path + ": " + dlerror());
  auto init = reinterpret_cast<PFN_cuInit>(dlsym(cu.handle, "cuInit"));
  auto gpa = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(cu.handle, "cuGetProcAddress_v2"));
  cu.cuGetErrorName = reinterpret_cast<PFN_cuGetErrorName>(dlsym(cu.handle, "cuGetErrorName"));
  cu.cuGetErrorString = reinterpret_cast<PFN_cuGetErrorName>(dlsym(cu.handle, "cuGetErrorString"));
  if (init == nullptr) throw Error(path + " has no cuInit: not a CUDA driver library");
  cu.check(init(0), "cuInit");
  auto resolve = [&](const char* base, const char* exported, int version) -> void* {
    if (gpa != nullptr) {
      void* fn = nullptr;
      int found = -1;
      if (gpa(base, &fn, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found) == CUDA_SUCCESS &&
          found == CU_GET_PROC_ADDRESS_SUCCESS && fn != nullptr)
        return fn;
    }
    return dlsym(cu.handle, exported);
  };
  std::string missing;
#define HM_GPU_DRIVER_RESOLVE(name, exported, version)                                     \
  cu.name = reinterpret_cast<PFN_##name##_v##version>(resolve(#name, exported, version)); \
  if (cu.name == nullptr) missing += std::string(missing.empty() ? "" : ", ") + exported;
  HM_GPU_DRIVER_ENTRY_POINTS(HM_GPU_DRIVER_RESOLVE)
#undef HM_GPU_DRIVER_RESOLVE
  if (!missing.empty())
    throw Error("the CUDA driver " + path + " lacks " + missing + " (too old?)");
#define HM_GPU_DRIVER_RESOLVE_OPTIONAL(name, exported, version) \
  cu.name = reinterpret_cast<PFN_##name##_v##version>(resolve(#name, exported, version));
  HM_GPU_DRIVER_OPTIONAL_ENTRY_POINTS(HM_GPU_DRIVER_RESOLVE_OPTIONAL)
#undef HM_GPU_DRIVER_RESOLVE_OPTIONAL
  return cu;
}

}  // namespace gpu_driver
