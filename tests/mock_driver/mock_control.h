/* Control and inspection functions exported by the mock CUDA driver (libhumming_mock_cuda*.so)
 * next to the cu* entry points. Tests dlopen the mock they loaded and dlsym these by name
 * (each mock library has its own state). Environment switches are documented in mock_cuda.cpp. */
#ifndef HUMMING_TESTS_MOCK_CONTROL_H_
#define HUMMING_TESTS_MOCK_CONTROL_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HM_MOCK_MAX_ARG_BYTES 4096

/* The last successful cuLaunchKernel / cuLaunchKernelEx. */
typedef struct hm_mock_launch {
  char function[256]; /* kernel name, as looked up with cuModuleGetFunction */
  uint32_t grid[3], block[3];
  uint32_t cluster[3]; /* {1, 1, 1} unless launched with a cluster attribute */
  uint32_t shared_memory_bytes;
  void *stream;
  int32_t param_count;     /* -1 when the mock does not know the kernel's parameters */
  uint32_t arg_bytes_size; /* the parameter buffer: each argument at its aligned offset */
  unsigned char arg_bytes[HM_MOCK_MAX_ARG_BYTES];
  int32_t executed; /* 1 when the mock ran a host implementation of the kernel */
  int32_t programmatic; /* 1: launched with programmatic stream serialization allowed */
} hm_mock_launch_t;

/* Forgets the last launch and zeroes the counters (not the live objects). */
typedef void (*hm_mock_reset_fn)(void);
/* Copies the last launch into *out; returns 0, or -1 when there was none since the reset. */
typedef int (*hm_mock_last_launch_fn)(hm_mock_launch_t *out);
/* Launches (successful ones) since the reset. */
typedef int64_t (*hm_mock_launch_count_fn)(void);
/* Live objects: allocations, modules, streams; the primary context's retain count. */
typedef int64_t (*hm_mock_live_allocations_fn)(void);
typedef int64_t (*hm_mock_live_modules_fn)(void);
typedef int64_t (*hm_mock_live_streams_fn)(void);
typedef int (*hm_mock_primary_ctx_refcount_fn)(int ordinal);
/* cuGetProcAddress_v2 calls, cuFuncSetAttribute calls since the reset. */
typedef int64_t (*hm_mock_proc_address_calls_fn)(void);
typedef int64_t (*hm_mock_func_attribute_sets_fn)(void);
/* Calls into entry points of a newer ABI than the runtime declares (cuStreamGetCtx_v2): a
 * non-zero count means an entry point was resolved at the wrong version. */
typedef int64_t (*hm_mock_newer_abi_calls_fn)(void);
/* Creates a stream (destroy it with cuStreamDestroy_v2) in device `ordinal`'s primary context,
 * which must be retained, or with own_context != 0 in a new context of that device that is not
 * its primary one (as cuCtxCreate makes). Needs no current context: a test makes "a stream of
 * another context" with it. Returns 0, or -1 (not initialized, bad ordinal, context not live). */
typedef int (*hm_mock_stream_create_fn)(int ordinal, int own_context, void **out);
/* Driver calls since the reset: to the entry point exported as `name` ("cuCtxPushCurrent_v2",
 * "cuPointerGetAttribute"), or with name NULL to all of them (cuGetProcAddress_v2 included). An
 * entry point that calls another counts once, under its own name. */
typedef int64_t (*hm_mock_driver_calls_fn)(const char *name);
/* "cuCtxPopCurrent_v2=1 cuCtxPushCurrent_v2=1 ...", by name: copies up to size - 1 bytes and a
 * NUL, returns the full length. */
typedef int64_t (*hm_mock_driver_call_summary_fn)(char *buf, int64_t size);
/* The last image given to cuModuleLoadData(Ex): copies up to `size` bytes, returns its length. */
typedef int64_t (*hm_mock_last_image_fn)(void *buf, int64_t size);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HUMMING_TESTS_MOCK_CONTROL_H_ */
