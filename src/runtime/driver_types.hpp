// The few CUDA driver API types, constants and entry-point signatures we use, declared here so
// that the library builds and loads without <cuda.h> (the driver is reached through dlopen).
// Values and layouts are those of the CUDA 13 cuda.h; each signature is the ABI of the versioned
// entry point named next to it (the version we ask cuGetProcAddress for, see driver.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

// Opaque handle types, declared like cuda.h does so that pointers stay interchangeable with it.
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;

namespace hm::runtime {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = uint64_t;
using CUcontext = ::CUctx_st*;
using CUmodule = ::CUmod_st*;
using CUfunction = ::CUfunc_st*;
using CUstream = ::CUstream_st*;

// CUresult values.
constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
constexpr CUresult CUDA_ERROR_DEINITIALIZED = 4;
constexpr CUresult CUDA_ERROR_STUB_LIBRARY = 34;
constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
constexpr CUresult CUDA_ERROR_INVALID_IMAGE = 200;
constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
constexpr CUresult CUDA_ERROR_NO_BINARY_FOR_GPU = 209;
constexpr CUresult CUDA_ERROR_INVALID_PTX = 218;
constexpr CUresult CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222;
constexpr CUresult CUDA_ERROR_INVALID_HANDLE = 400;
constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
constexpr CUresult CUDA_ERROR_ILLEGAL_ADDRESS = 700;
constexpr CUresult CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701;
constexpr CUresult CUDA_ERROR_LAUNCH_TIMEOUT = 702;
constexpr CUresult CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING = 703;
constexpr CUresult CUDA_ERROR_ASSERT = 710;
constexpr CUresult CUDA_ERROR_HARDWARE_STACK_ERROR = 714;
constexpr CUresult CUDA_ERROR_ILLEGAL_INSTRUCTION = 715;
constexpr CUresult CUDA_ERROR_MISALIGNED_ADDRESS = 716;
constexpr CUresult CUDA_ERROR_INVALID_ADDRESS_SPACE = 717;
constexpr CUresult CUDA_ERROR_INVALID_PC = 718;
constexpr CUresult CUDA_ERROR_LAUNCH_FAILED = 719;
constexpr CUresult CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE = 720;
constexpr CUresult CUDA_ERROR_NOT_SUPPORTED = 801;
constexpr CUresult CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803;
constexpr CUresult CUDA_ERROR_UNKNOWN = 999;

// CUdevice_attribute values.
constexpr int CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8;
constexpr int CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10;
constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
constexpr int CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS = 88;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;

// CUfunction_attribute values.
constexpr int CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;
constexpr int CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1;
constexpr int CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3;
constexpr int CU_FUNC_ATTRIBUTE_NUM_REGS = 4;
constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;

// CUpointer_attribute values.
constexpr int CU_POINTER_ATTRIBUTE_CONTEXT = 1;
constexpr int CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2;
constexpr int CU_POINTER_ATTRIBUTE_DEVICE_POINTER = 3;
constexpr int CU_POINTER_ATTRIBUTE_IS_MANAGED = 8;
constexpr int CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9;
constexpr int CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11;  // CUDA 10.2 on
constexpr int CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12;

// CUmemorytype values (CU_POINTER_ATTRIBUTE_MEMORY_TYPE).
constexpr unsigned int CU_MEMORYTYPE_HOST = 1;
constexpr unsigned int CU_MEMORYTYPE_DEVICE = 2;

// CUjit_option values (cuModuleLoadDataEx), for the driver JIT's logs.
constexpr int CU_JIT_INFO_LOG_BUFFER = 3;
constexpr int CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4;
constexpr int CU_JIT_ERROR_LOG_BUFFER = 5;
constexpr int CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;

// cuGetProcAddress flags (CUdriverProcAddress_flags) and results (CUdriverProcAddressQueryResult).
constexpr uint64_t CU_GET_PROC_ADDRESS_DEFAULT = 0;
constexpr uint64_t CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1;
constexpr int CU_GET_PROC_ADDRESS_SUCCESS = 0;
constexpr int CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1;
constexpr int CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2;

// CUstream flags.
constexpr unsigned int CU_STREAM_DEFAULT = 0;
constexpr unsigned int CU_STREAM_NON_BLOCKING = 1;

// cuLaunchKernelEx configuration (CUlaunchConfig / CUlaunchAttribute).
constexpr int CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4;
constexpr int CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6;

union CUlaunchAttributeValue {
  char pad[64];
  struct {
    unsigned int x, y, z;
  } clusterDim;
  int programmaticStreamSerializationAllowed;
  void* align_as_pointer;  // the real union holds pointers, hence 8-byte alignment
};

struct CUlaunchAttribute {
  int id;
  char pad[8 - sizeof(int)];
  CUlaunchAttributeValue value;
};

struct CUlaunchConfig {
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned int numAttrs;
};

static_assert(sizeof(CUlaunchAttributeValue) == 64, "CUlaunchAttributeValue must match cuda.h");
static_assert(sizeof(CUlaunchAttribute) == 72, "CUlaunchAttribute must match cuda.h");
static_assert(sizeof(CUlaunchConfig) == 56, "CUlaunchConfig must match cuda.h");

// TMA descriptor (cuTensorMapEncodeTiled); CU_TENSOR_MAP_NUM_QWORDS is 16, aligned like cuda.h.
struct alignas(128) CUtensorMap {
  uint64_t opaque[16];
};

// Entry-point signatures. The suffix names the ABI version (cudaTypedefs.h spelling).
using PFN_cuInit_v2000 = CUresult (*)(unsigned int flags);
using PFN_cuDriverGetVersion_v2020 = CUresult (*)(int* version);
using PFN_cuGetProcAddress_v12000 = CUresult (*)(const char* symbol, void** pfn, int cuda_version,
                                                 uint64_t flags, int* symbol_status);
using PFN_cuGetErrorName_v6000 = CUresult (*)(CUresult error, const char** text);
using PFN_cuGetErrorString_v6000 = CUresult (*)(CUresult error, const char** text);

using PFN_cuDeviceGetCount_v2000 = CUresult (*)(int* count);
using PFN_cuDeviceGet_v2000 = CUresult (*)(CUdevice* device, int ordinal);
using PFN_cuDeviceGetName_v2000 = CUresult (*)(char* name, int length, CUdevice device);
using PFN_cuDeviceGetAttribute_v2000 = CUresult (*)(int* value, int attribute, CUdevice device);
using PFN_cuDeviceTotalMem_v3020 = CUresult (*)(size_t* bytes, CUdevice device);
using PFN_cuDevicePrimaryCtxRetain_v7000 = CUresult (*)(CUcontext* context, CUdevice device);
using PFN_cuDevicePrimaryCtxRelease_v11000 = CUresult (*)(CUdevice device);

using PFN_cuCtxPushCurrent_v4000 = CUresult (*)(CUcontext context);
using PFN_cuCtxPopCurrent_v4000 = CUresult (*)(CUcontext* context);
using PFN_cuCtxGetCurrent_v4000 = CUresult (*)(CUcontext* context);
using PFN_cuCtxSetCurrent_v4000 = CUresult (*)(CUcontext context);
using PFN_cuCtxSynchronize_v2000 = CUresult (*)();

using PFN_cuModuleLoadData_v2000 = CUresult (*)(CUmodule* module, const void* image);
using PFN_cuModuleLoadDataEx_v2010 = CUresult (*)(CUmodule* module, const void* image,
                                                  unsigned int option_count, int* options,
                                                  void** option_values);
using PFN_cuModuleUnload_v2000 = CUresult (*)(CUmodule module);
using PFN_cuModuleGetFunction_v2000 = CUresult (*)(CUfunction* function, CUmodule module,
                                                   const char* name);
using PFN_cuFuncSetAttribute_v9000 = CUresult (*)(CUfunction function, int attribute, int value);
using PFN_cuFuncGetAttribute_v2020 = CUresult (*)(int* value, int attribute, CUfunction function);
using PFN_cuLaunchKernel_v4000 = CUresult (*)(CUfunction function, unsigned int grid_x,
                                              unsigned int grid_y, unsigned int grid_z,
                                              unsigned int block_x, unsigned int block_y,
                                              unsigned int block_z, unsigned int shared_bytes,
                                              CUstream stream, void** params, void** extra);
using PFN_cuLaunchKernelEx_v11060 = CUresult (*)(const CUlaunchConfig* config, CUfunction function,
                                                 void** params, void** extra);

using PFN_cuOccupancyMaxActiveClusters_v11070 = CUresult (*)(int* clusters, CUfunction function,
                                                              const CUlaunchConfig* config);

using PFN_cuMemAlloc_v3020 = CUresult (*)(CUdeviceptr* pointer, size_t bytes);
using PFN_cuMemFree_v3020 = CUresult (*)(CUdeviceptr pointer);
using PFN_cuMemcpyHtoD_v3020 = CUresult (*)(CUdeviceptr dst, const void* src, size_t bytes);
using PFN_cuMemcpyDtoH_v3020 = CUresult (*)(void* dst, CUdeviceptr src, size_t bytes);
using PFN_cuMemcpyHtoDAsync_v3020 = CUresult (*)(CUdeviceptr dst, const void* src, size_t bytes,
                                                 CUstream stream);
using PFN_cuMemcpyDtoHAsync_v3020 = CUresult (*)(void* dst, CUdeviceptr src, size_t bytes,
                                                 CUstream stream);
using PFN_cuMemsetD8_v3020 = CUresult (*)(CUdeviceptr dst, unsigned char value, size_t bytes);
using PFN_cuMemsetD8Async_v3020 = CUresult (*)(CUdeviceptr dst, unsigned char value, size_t bytes,
                                               CUstream stream);
using PFN_cuPointerGetAttribute_v4000 = CUresult (*)(void* data, int attribute, CUdeviceptr ptr);
using PFN_cuPointerGetAttributes_v7000 = CUresult (*)(unsigned int count, int* attributes,
                                                      void** data, CUdeviceptr ptr);

using PFN_cuStreamCreate_v2000 = CUresult (*)(CUstream* stream, unsigned int flags);
using PFN_cuStreamDestroy_v4000 = CUresult (*)(CUstream stream);
using PFN_cuStreamSynchronize_v2000 = CUresult (*)(CUstream stream);
using PFN_cuStreamGetCtx_v9020 = CUresult (*)(CUstream stream, CUcontext* context);

using PFN_cuTensorMapEncodeTiled_v12000 = CUresult (*)(
    CUtensorMap* map, int data_type, uint32_t rank, void* global_address,
    const uint64_t* global_dim, const uint64_t* global_strides, const uint32_t* box_dim,
    const uint32_t* element_strides, int interleave, int swizzle, int l2_promotion, int oob_fill);

}  // namespace hm::runtime
