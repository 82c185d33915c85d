// Loading the CUDA driver library and resolving its entry points (see driver.hpp).
#include "runtime/driver.hpp"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/error.hpp"
#include "core/quote.hpp"

namespace hm::runtime {
namespace {

constexpr const char* kPathVariable = "HUMMING_CUDA_DRIVER_PATH";

struct KnownError {
  CUresult code;
  const char* name;
  const char* text;
};

// Names for the codes we declare, used when the driver cannot name an error itself (no
// cuGetErrorName, or a stub library that answers every call with an error).
constexpr KnownError kKnownErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU",
     "no kernel image is available for execution on the device"},
    {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
     "the provided PTX was compiled with an unsupported toolchain"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
     "too many resources requested for launch"},
    {CUDA_ERROR_LAUNCH_TIMEOUT, "CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out"},
    {CUDA_ERROR_ASSERT, "CUDA_ERROR_ASSERT", "device-side assert triggered"},
    {CUDA_ERROR_ILLEGAL_INSTRUCTION, "CUDA_ERROR_ILLEGAL_INSTRUCTION",
     "an illegal instruction was encountered"},
    {CUDA_ERROR_MISALIGNED_ADDRESS, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     "system has unsupported display driver / cuda driver combination"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const KnownError* find_known_error(CUresult result) {
  for (const KnownError& e : kKnownErrors)
    if (e.code == result) return &e;
  return nullptr;
}

// Errors after which the context is corrupt: every later call on it fails too.
bool is_sticky(CUresult result) {
  return result == CUDA_ERROR_ILLEGAL_ADDRESS || result == CUDA_ERROR_ASSERT ||
         (result >= CUDA_ERROR_HARDWARE_STACK_ERROR && result <= CUDA_ERROR_LAUNCH_FAILED);
}

void* open_library(const std::string& path, std::string* error) {
  dlerror();  // clear a stale message
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* message = dlerror();
    *error = message ? message : "dlopen failed without a message";
  }
  return handle;
}

// The full path of a loaded library when the loader knows it ("libcuda.so.1" -> "/usr/lib/...").
std::string loaded_path(void* handle, const std::string& requested) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      map->l_name[0] != '\0')
    return map->l_name;
  return requested;
}

template <typename Fn>
Fn symbol(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

}  // namespace

hm_status_t status_for_cuda_error(CUresult result) {
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      return HM_ERROR_DEVICE_OUT_OF_MEMORY;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
      return HM_ERROR_NO_DEVICE;
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE:
      return HM_ERROR_LAUNCH;
    default:
      return HM_ERROR_CUDA;
  }
}

std::vector<std::string> Driver::candidate_paths() {
  const char* configured = std::getenv(kPathVariable);
  if (configured != nullptr && configured[0] != '\0') return {configured};
  return {"libcuda.so.1", "libcuda.so"};
}

std::shared_ptr<const Driver> Driver::shared() {
  static std::mutex mutex;
  static std::shared_ptr<const Driver> driver;
  std::lock_guard<std::mutex> lock(mutex);
  if (driver) return driver;

  const char* configured = std::getenv(kPathVariable);
  const bool from_variable = configured != nullptr && configured[0] != '\0';
  std::string tried;
  for (const std::string& path : candidate_paths()) {
    std::string error;
    void* handle = open_library(path, &error);
    if (handle != nullptr) {
      // A library that loads but fails to initialize is reported as such; trying the next
      // name would only find the same driver (or the toolkit's stub) again.
      driver = initialize(handle, path);
      return driver;
    }
    if (!tried.empty()) tried += "; ";
    tried +=
        core::quoted(path, core::kQuotedPathBytes) + (from_variable ? std::string(" (from ") + kPathVariable + ")" : "") + ": " + error;
  }
  fail(HM_ERROR_DRIVER_NOT_FOUND,
       "no CUDA driver library could be loaded; tried " + tried +
           ". Install the NVIDIA driver, or set " + kPathVariable +
           " to the driver library (libcuda.so.1 or a CUDA-compatible one)");
}

std::shared_ptr<const Driver> Driver::load(const std::string& path) {
  HM_REQUIRE(!path.empty(), HM_ERROR_INVALID_ARGUMENT, "the CUDA driver path is empty");
  std::string error;
  void* handle = open_library(path, &error);
  if (handle == nullptr)
    fail(HM_ERROR_DRIVER_NOT_FOUND, "cannot load the CUDA driver library; tried " + core::quoted(path, core::kQuotedPathBytes) + ": " +
                                        error + ". Check that the file is the driver library");
  return initialize(handle, path);
}

void* Driver::resolve(const char* base_name, const char* versioned_name, int abi_version) const {
  if (get_proc_address_ != nullptr) {
    void* function = nullptr;
    int status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult result = get_proc_address_(base_name, &function, abi_version,
                                        CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status);
    if (result == CUDA_SUCCESS && status == CU_GET_PROC_ADDRESS_SUCCESS && function != nullptr)
      return function;
    // Not found (or not at this version): a compatible runtime may still export the symbol.
  }
  if (void* function = dlsym(handle_, versioned_name)) return function;
  // Plain names last: only CUDA-compatible runtimes that never versioned their symbols get here
  // (an NVIDIA driver that has a plain name also has the versioned one).
  if (std::strcmp(base_name, versioned_name) != 0) return dlsym(handle_, base_name);
  return nullptr;
}

std::shared_ptr<const Driver> Driver::initialize(void* handle, const std::string& path) {
  std::shared_ptr<Driver> driver(new Driver());
  driver->handle_ = handle;
  driver->path_ = loaded_path(handle, path);
  DriverApi& api = driver->api_;

  // These few never changed ABI and are needed before anything else resolves.
  api.cuInit = symbol<PFN_cuInit_v2000>(handle, "cuInit");
  api.cuDriverGetVersion = symbol<PFN_cuDriverGetVersion_v2020>(handle, "cuDriverGetVersion");
  api.cuGetErrorName = symbol<PFN_cuGetErrorName_v6000>(handle, "cuGetErrorName");
  api.cuGetErrorString = symbol<PFN_cuGetErrorString_v6000>(handle, "cuGetErrorString");
  // The CUDA 12 signature (with the query result) is exported as cuGetProcAddress_v2; the plain
  // name is the CUDA 11.3 one with four parameters, which we do not use.
  driver->get_proc_address_ = symbol<PFN_cuGetProcAddress_v12000>(handle, "cuGetProcAddress_v2");
  if (api.cuInit == nullptr || api.cuDriverGetVersion == nullptr)
    fail(HM_ERROR_DRIVER_SYMBOL, driver->path_ + " is not a CUDA driver library: it lacks " +
                                     (api.cuInit == nullptr ? "cuInit" : "cuDriverGetVersion"));

  const CUresult init = api.cuInit(0);
  if (init == CUDA_ERROR_STUB_LIBRARY)
    driver->fail_call(
        init, "cuInit",
        driver->path_ +
            " is the CUDA toolkit's stub library, not the driver; install "
            "the NVIDIA driver, or set HUMMING_CUDA_DRIVER_PATH to the real libcuda.so.1");
  if (init != CUDA_SUCCESS && init != CUDA_ERROR_NO_DEVICE)
    driver->fail_call(init, "cuInit", "initializing the CUDA driver " + driver->path_);
  driver->check(api.cuDriverGetVersion(&driver->version_), "cuDriverGetVersion");

  std::string missing;
#define HM_RESOLVE_REQUIRED(name, suffix, version)                                               \
  api.name =                                                                                     \
      reinterpret_cast<PFN_##name##_v##version>(driver->resolve(#name, #name #suffix, version)); \
  if (api.name == nullptr) missing += std::string(missing.empty() ? "" : ", ") + #name #suffix;
  HM_DRIVER_REQUIRED_ENTRY_POINTS(HM_RESOLVE_REQUIRED)
#undef HM_RESOLVE_REQUIRED
  if (!missing.empty())
    fail(HM_ERROR_DRIVER_SYMBOL, "the CUDA driver library " + driver->path_ + " (version " +
                                     std::to_string(driver->version_) +
                                     ") lacks required entry points: " + missing +
                                     "; it is too old or not a complete CUDA driver");
#define HM_RESOLVE_OPTIONAL(name, suffix, version) \
  api.name =                                       \
      reinterpret_cast<PFN_##name##_v##version>(driver->resolve(#name, #name #suffix, version));
  HM_DRIVER_OPTIONAL_ENTRY_POINTS(HM_RESOLVE_OPTIONAL)
#undef HM_RESOLVE_OPTIONAL

  // With no device cuInit says so and every later call would fail: report zero devices.
  if (init == CUDA_SUCCESS)
    driver->check(api.cuDeviceGetCount(&driver->device_count_), "cuDeviceGetCount");
  return driver;
}

std::string Driver::error_name(CUresult result) const {
  const char* text = nullptr;
  if (api_.cuGetErrorName != nullptr && api_.cuGetErrorName(result, &text) == CUDA_SUCCESS &&
      text != nullptr)
    return text;
  if (const KnownError* known = find_known_error(result)) return known->name;
  return "CUDA error " + std::to_string(result);
}

std::string Driver::error_string(CUresult result) const {
  const char* text = nullptr;
  if (api_.cuGetErrorString != nullptr && api_.cuGetErrorString(result, &text) == CUDA_SUCCESS &&
      text != nullptr)
    return text;
  if (const KnownError* known = find_known_error(result)) return known->text;
  return "no description";
}

void Driver::fail_call(CUresult result, const char* call, const std::string& detail) const {
  std::string message =
      std::string(call) + " failed: " + error_name(result) + " (" + error_string(result) + ")";
  if (!detail.empty()) message += ": " + detail;
  if (is_sticky(result))
    message += ". The CUDA context is now unusable; the process must be restarted";
  throw Error(status_for_cuda_error(result), message);
}

}  // namespace hm::runtime
