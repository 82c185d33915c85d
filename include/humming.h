/*
 * humming.h — the public C ABI of Humming, JIT-compiled GEMM kernels for quantized inference.
 *
 * This is the only public header. It is C99-clean and stable within one ABI major version
 * (HM_ABI_VERSION, carried in the library's SONAME: libhumming.so.<abi>).
 *
 * Conventions (every function follows them; exceptions are stated where they occur):
 *   - Functions return hm_status_t (int32_t). HM_SUCCESS is 0. Failure codes are banded by
 *     category (HM_STATUS_CATEGORY). On failure a thread-local message names the bad argument or
 *     the failing step and says what to do; read it with hm_last_error_message() on the same
 *     thread before the next Humming call. A successful call does not clear the message.
 *   - No function throws, aborts or prints.
 *   - Handles are pointers to incomplete structs. Every _destroy(NULL) is a no-op.
 *   - Option and info structs start with `uint32_t struct_size`; fill it with sizeof(the struct
 *     you compiled against). The library accepts any size from the first released size up to
 *     its own and ignores trailing fields it does not know. Each struct has two initializers:
 *     hm_X_init_sized(p, sizeof *p) zeroes the caller's sizeof *p bytes, sets the defaults that
 *     lie within them and struct_size = sizeof *p, so it is right whichever library version runs
 *     (HM_INIT(hm_X, p) spells that call); hm_X_init(p) does the same with the size of the struct
 *     in the library that runs, which is right only when that library is this header's version
 *     (a newer library's struct may be larger than the caller's). An info struct the library
 *     fills comes back with struct_size = the bytes it filled (the smaller of the caller's size
 *     and its own): fields past that were not written.
 *   - Output handles (`T **out`) are written only on success; on failure *out is set to NULL.
 *   - Strings returned as `const char *` are owned by the library and live as long as stated;
 *     strings copied out take (buf, size) and follow the snprintf rule: the full length is
 *     reported, at most size-1 bytes plus a NUL are written.
 *   - Thread safety: hm_format_t is safe to read from several threads at once; a context and its
 *     kernels may be used from several threads at once (compilation and loading are serialized
 *     internally); launch params are not thread-safe (use one per thread). A _destroy must not
 *     run while another thread is still inside a call on the same handle (the bindings enforce
 *     this for contexts: their close waits for calls in flight).
 */
#ifndef HUMMING_H_
#define HUMMING_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#  if defined(HUMMING_BUILDING_LIBRARY)
#    define HM_API __declspec(dllexport)
#  else
#    define HM_API __declspec(dllimport)
#  endif
#else
#  define HM_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/* Versions                                                                                    */
/* ------------------------------------------------------------------------------------------ */

#define HM_VERSION_MAJOR 0
#define HM_VERSION_MINOR 1
#define HM_VERSION_PATCH 0
/* major * 10000 + minor * 100 + patch */
#define HM_VERSION (HM_VERSION_MAJOR * 10000 + HM_VERSION_MINOR * 100 + HM_VERSION_PATCH)
/* The ABI major: bumped only on an incompatible change; it is the SONAME suffix. */
#define HM_ABI_VERSION 0

/* Initializes the option or info struct *p of type X_t through X_init_sized with the caller's
 * own sizeof *p: HM_INIT(hm_plan_options, &options). */
#define HM_INIT(X, p) X##_init_sized((p), sizeof *(p))

/* The version of the library actually loaded (compare with HM_VERSION). */
HM_API uint32_t hm_version(void);
/* "0.1.0"; static storage. */
HM_API const char *hm_version_string(void);
/* The ABI major of the loaded library (compare with HM_ABI_VERSION). */
HM_API uint32_t hm_abi_version(void);

/* ------------------------------------------------------------------------------------------ */
/* Status codes and errors                                                                     */
/* ------------------------------------------------------------------------------------------ */

typedef int32_t hm_status_t;

#define HM_SUCCESS 0

/* 1000s: the caller passed something wrong. */
#define HM_ERROR_INVALID_ARGUMENT 1000
#define HM_ERROR_INVALID_STRUCT_SIZE 1001 /* struct_size is 0, too small, or unknown */
#define HM_ERROR_BUFFER_TOO_SMALL 1002    /* the required size was reported; call again */
#define HM_ERROR_PARSE 1003               /* a format or dtype string could not be parsed */
#define HM_ERROR_INVALID_STATE 1004       /* the object is not in a state that allows this */
#define HM_ERROR_MISALIGNED 1005          /* a pointer or size breaks an alignment rule */
#define HM_ERROR_WRONG_DEVICE 1006        /* a pointer, stream or handle of another device */
#define HM_ERROR_NON_FINITE 1007          /* NaN or Inf where a finite number is required */

/* 2000s: well-formed, but not supported (by this build, this device, or at all). */
#define HM_ERROR_UNSUPPORTED 2000
#define HM_ERROR_UNSUPPORTED_ARCH 2001   /* the target architecture cannot run this */
#define HM_ERROR_UNSUPPORTED_FORMAT 2002 /* a validation rule rejected the format */

/* 3000s: the CUDA driver or the device. */
#define HM_ERROR_DRIVER_NOT_FOUND 3000 /* no loadable CUDA driver library */
#define HM_ERROR_DRIVER_SYMBOL 3001    /* a required driver entry point is missing */
#define HM_ERROR_NO_DEVICE 3002        /* no device, or the ordinal is out of range */
#define HM_ERROR_CUDA 3003             /* a driver call failed; the message names it */
#define HM_ERROR_LAUNCH 3004           /* a kernel launch failed */

/* 4000s: compiling kernels. */
#define HM_ERROR_COMPILER_NOT_FOUND 4000 /* neither NVRTC nor NVCC could be loaded / found */
#define HM_ERROR_COMPILE 4001            /* the compiler rejected a kernel; log in the message */
#define HM_ERROR_JIT_DISABLED 4002       /* a cache miss while compiling is forbidden */

/* 5000s: files and the kernel cache. */
#define HM_ERROR_IO 5000
#define HM_ERROR_CACHE_CORRUPT 5001 /* a cache entry failed its checks (it is rebuilt) */

/* 6000s: memory. */
#define HM_ERROR_OUT_OF_MEMORY 6000        /* host memory */
#define HM_ERROR_DEVICE_OUT_OF_MEMORY 6001 /* device memory */

/* 9000s: a bug in Humming; please report it with the message. */
#define HM_ERROR_INTERNAL 9000

/* The band of a status: HM_STATUS_CATEGORY(HM_ERROR_PARSE) == HM_ERROR_INVALID_ARGUMENT. */
#define HM_STATUS_CATEGORY(s) (((s) / 1000) * 1000)

/* The constant's name without the prefix ("SUCCESS", "INVALID_ARGUMENT", ...), or "UNKNOWN".
 * Static storage. */
HM_API const char *hm_status_name(hm_status_t status);

/* Copies the calling thread's last error message into buf (snprintf rule) and returns its full
 * length in bytes, not counting the NUL. buf may be NULL when size is 0 (to ask the length).
 * Returns 0 when this thread has no message. */
HM_API size_t hm_last_error_message(char *buf, size_t size);

/* Clears the calling thread's last error message. */
HM_API void hm_clear_last_error(void);

/* ------------------------------------------------------------------------------------------ */
/* Number formats (dtypes)                                                                     */
/* ------------------------------------------------------------------------------------------ */

/*
 * A dtype is a 32-bit code, stable across releases:
 *   bits  0..7   total bits (1..32)
 *   bits  8..15  exponent bits (floats; 0 for integers)
 *   bits 16..23  mantissa bits (floats; value bits for integers)
 *   bits 24..27  kind: HM_DTYPE_KIND_* (for HM_DTYPE_KIND_UINT_BIASED the implicit zero point is
 *                2^(bits-1))
 *   bits 28..31  float variant (HM_FLOAT_VARIANT_*) for floats; 0 otherwise
 * Build one with hm_dtype_parse() or the HM_DTYPE_* constants; 0 is "no dtype".
 */
typedef uint32_t hm_dtype_t;

#define HM_DTYPE_KIND_SINT 1        /* two's complement integer */
#define HM_DTYPE_KIND_UINT 2        /* unsigned integer */
#define HM_DTYPE_KIND_UINT_BIASED 3 /* unsigned code with implicit zero point 2^(bits-1), "uint4b8" */
#define HM_DTYPE_KIND_FLOAT 4       /* signed float eXmY */
#define HM_DTYPE_KIND_UFLOAT 5      /* unsigned float (scales only: ue8m0) */

#define HM_FLOAT_VARIANT_FINITE 0 /* every code is a finite number (fp4/fp6 style) */
#define HM_FLOAT_VARIANT_FN 1     /* only the all-ones magnitude is NaN (OCP e4m3fn, ue8m0) */
#define HM_FLOAT_VARIANT_IEEE 2   /* the all-ones exponent holds Inf and NaN (f16, bf16, e5m2) */

#define HM_DTYPE_MAKE(kind, bits, ebits, mbits, variant)                                        \
  ((hm_dtype_t)(((uint32_t)(bits)) | ((uint32_t)(ebits) << 8) | ((uint32_t)(mbits) << 16) |    \
                ((uint32_t)(kind) << 24) | ((uint32_t)(variant) << 28)))

#define HM_DTYPE_NONE ((hm_dtype_t)0)
#define HM_DTYPE_F32 HM_DTYPE_MAKE(HM_DTYPE_KIND_FLOAT, 32, 8, 23, HM_FLOAT_VARIANT_IEEE)
#define HM_DTYPE_F16 HM_DTYPE_MAKE(HM_DTYPE_KIND_FLOAT, 16, 5, 10, HM_FLOAT_VARIANT_IEEE)
#define HM_DTYPE_BF16 HM_DTYPE_MAKE(HM_DTYPE_KIND_FLOAT, 16, 8, 7, HM_FLOAT_VARIANT_IEEE)
#define HM_DTYPE_E4M3 HM_DTYPE_MAKE(HM_DTYPE_KIND_FLOAT, 8, 4, 3, HM_FLOAT_VARIANT_FN)
#define HM_DTYPE_E5M2 HM_DTYPE_MAKE(HM_DTYPE_KIND_FLOAT, 8, 5, 2, HM_FLOAT_VARIANT_IEEE)
#define HM_DTYPE_E2M1 HM_DTYPE_MAKE(HM_DTYPE_KIND_FLOAT, 4, 2, 1, HM_FLOAT_VARIANT_FINITE)
#define HM_DTYPE_UE8M0 HM_DTYPE_MAKE(HM_DTYPE_KIND_UFLOAT, 8, 8, 0, HM_FLOAT_VARIANT_FN)
#define HM_DTYPE_INT8 HM_DTYPE_MAKE(HM_DTYPE_KIND_SINT, 8, 0, 8, 0)
#define HM_DTYPE_INT4 HM_DTYPE_MAKE(HM_DTYPE_KIND_SINT, 4, 0, 4, 0)
#define HM_DTYPE_UINT4 HM_DTYPE_MAKE(HM_DTYPE_KIND_UINT, 4, 0, 4, 0)
#define HM_DTYPE_UINT4B8 HM_DTYPE_MAKE(HM_DTYPE_KIND_UINT_BIASED, 4, 0, 4, 0)
#define HM_DTYPE_UINT8 HM_DTYPE_MAKE(HM_DTYPE_KIND_UINT, 8, 0, 8, 0)

/* Parses a dtype name: canonical names ("f16", "bf16", "f32", "int4", "uint4", "uint4b8",
 * "e2m1", "e4m3", "e5m2", "ue8m0", "e3m2", ...) and common aliases ("fp16", "half", "fp8",
 * "float8_e4m3fn", "fp4", "mxfp4", "nvfp4", ...). HM_ERROR_PARSE names the bad text. */
HM_API hm_status_t hm_dtype_parse(const char *name, hm_dtype_t *out);
/* The canonical name of a valid dtype, which hm_dtype_parse() maps back to the same code. */
HM_API hm_status_t hm_dtype_name(hm_dtype_t dtype, char *buf, size_t size, size_t *length);
/* Decodes one code of a dtype of at most 8 bits (or a 16-bit f16/bf16 pattern) exactly into a
 * double: NaN codes give NaN, Inf codes give +-Inf. */
HM_API hm_status_t hm_dtype_decode(hm_dtype_t dtype, uint32_t code, double *value);
/* Encodes a value with round-to-nearest-even and saturation to the largest finite magnitude
 * (NaN maps to the dtype's NaN code, or is HM_ERROR_NON_FINITE where the dtype has none). */
HM_API hm_status_t hm_dtype_encode(hm_dtype_t dtype, double value, uint32_t *code);

/* ------------------------------------------------------------------------------------------ */
/* Layer formats                                                                               */
/* ------------------------------------------------------------------------------------------ */

/*
 * A format describes one linear (or MoE) layer: C[M,N] = A[M,K] * dequant(W)[N,K]^T (+ bias).
 * Its canonical string, which hm_format_to_string() prints and hm_format_parse() reads, is
 *   "w=uint4b8 a=f16 c=f16 s=f16:g128 zp=none bias=0 acc=f32 n=4096 k=4096 e=1"
 * (see docs/format.md). Fields omitted when parsing take their defaults.
 */
typedef struct hm_format hm_format_t;

/* Roles a dtype plays in a format. */
#define HM_ROLE_WEIGHT 0
#define HM_ROLE_ACTIVATION 1
#define HM_ROLE_OUTPUT 2
#define HM_ROLE_SCALE 3
#define HM_ROLE_ZERO_POINT 4 /* HM_DTYPE_NONE: symmetric (no zero points) */
#define HM_ROLE_ACCUMULATOR 5

/* How weight scales are laid out. */
#define HM_SCALE_NONE 0         /* no weight scale (unquantized f16/bf16 weights) */
#define HM_SCALE_CHANNEL 1      /* one per output channel: [N] */
#define HM_SCALE_GROUP 2        /* one per group of group_k along K: [N, K/group_k] */
#define HM_SCALE_BLOCK 3        /* one per group_n x group_k block: [N/group_n, K/group_k] */
#define HM_SCALE_TENSOR 4       /* one f32 per tensor (per expert) */
#define HM_SCALE_GROUP_TENSOR 5 /* group scales times one f32 global scale per tensor (NVFP4) */

/* Size limits. Within them every size the library computes fits int64 (the largest, E x N x K
 * codes or E x N x groups f32 scales, stays below 2^63 bytes) and every kernel grid fits its
 * dimensions. A format beyond them fails validation (rule R2, HM_ERROR_UNSUPPORTED_FORMAT) and
 * every size query, pack and quantize call (HM_ERROR_INVALID_ARGUMENT); an M beyond HM_MAX_M
 * fails hm_plan_gemm and hm_kernel_launch (HM_ERROR_INVALID_ARGUMENT). */
#define HM_MAX_N 16777216     /* 2^24 outputs (rows of W) per expert; also the largest group_n */
#define HM_MAX_K 16777216     /* 2^24 inputs (columns of W); also the largest group_k */
#define HM_MAX_EXPERTS 4096   /* 2^12 experts */
#define HM_MAX_TOP_K 64       /* experts per token (MoE calls: M * top_k below 2^31 as well) */
#define HM_MAX_M 2147483647   /* 2^31 - 1 tokens (rows of A) per call */

/* Creates the default format "w=uint4b8 a=f16 c=f16 s=f16:g128 n=0 k=0"; set the shape. */
HM_API hm_status_t hm_format_create(hm_format_t **out);
HM_API hm_status_t hm_format_parse(const char *text, hm_format_t **out);
HM_API hm_status_t hm_format_clone(const hm_format_t *format, hm_format_t **out);
HM_API void hm_format_destroy(hm_format_t *format);
/* The canonical string (snprintf rule; *length, if not NULL, gets the full length). */
HM_API hm_status_t hm_format_to_string(const hm_format_t *format, char *buf, size_t size,
                                       size_t *length);
/* 1 when both describe the same layer, else 0 (NULLs compare unequal). */
HM_API int32_t hm_format_equal(const hm_format_t *a, const hm_format_t *b);

HM_API hm_status_t hm_format_set_dtype(hm_format_t *format, int32_t role, hm_dtype_t dtype);
HM_API hm_status_t hm_format_get_dtype(const hm_format_t *format, int32_t role, hm_dtype_t *out);
/* group_k applies to GROUP, BLOCK and GROUP_TENSOR; group_n to BLOCK; pass 0 otherwise. NONE and
 * TENSOR have no scale dtype (HM_ROLE_SCALE reads HM_DTYPE_NONE); a kind with one that follows
 * them starts with f16 (set another with hm_format_set_dtype), and its dtype cannot be set to
 * HM_DTYPE_NONE (HM_ERROR_INVALID_STATE): every format the setters build prints a string that
 * hm_format_parse reads back. */
HM_API hm_status_t hm_format_set_scale(hm_format_t *format, int32_t kind, int32_t group_k,
                                       int32_t group_n);
HM_API hm_status_t hm_format_get_scale(const hm_format_t *format, int32_t *kind, int32_t *group_k,
                                       int32_t *group_n);
/* experts = 1 for a dense layer. */
HM_API hm_status_t hm_format_set_shape(hm_format_t *format, int64_t n, int64_t k, int32_t experts);
HM_API hm_status_t hm_format_get_shape(const hm_format_t *format, int64_t *n, int64_t *k,
                                       int32_t *experts);
HM_API hm_status_t hm_format_set_bias(hm_format_t *format, int32_t has_bias);
HM_API hm_status_t hm_format_get_bias(const hm_format_t *format, int32_t *has_bias);
/* Activation scales: group_k 0 gives one f32 scale per token (row of A); group_k > 0 one per
 * token and group of group_k along K, [M][ceil(K / group_k)] (DeepSeek's 1 x 128; the text form
 * is "a=e4m3:g128"), as hm_quantize_activation(_device) writes them with that group_k. Rule R22
 * says where they apply. */
HM_API hm_status_t hm_format_set_activation_groups(hm_format_t *format, int32_t group_k);
HM_API hm_status_t hm_format_get_activation_groups(const hm_format_t *format, int32_t *group_k);

/* Checks the format against the support rules, for a target ("sm_90a", "sm80", ...) or, with
 * arch NULL, for any architecture. HM_ERROR_UNSUPPORTED_FORMAT / _ARCH name the rule. */
HM_API hm_status_t hm_format_validate(const hm_format_t *format, const char *arch);

/* The kernel families that run the format on `arch` ("sm_90a"; NULL: on any target of the
 * compile matrix where the format is valid), space-separated, e.g. "dense_wgmma dense_mma"
 * (snprintf rule). A valid format that no kernel runs yet is HM_ERROR_UNSUPPORTED, the message
 * saying what is missing: exactly the formats hm_plan_create refuses for that reason. An invalid
 * one fails as hm_format_validate does. */
HM_API hm_status_t hm_format_kernels(const hm_format_t *format, const char *arch, char *buf,
                                     size_t size, size_t *length);

/* The support matrix as text (the same table `humming support` prints): per activation dtype,
 * the weights and scales the rules accept and the kernel families that run them. snprintf rule. */
HM_API hm_status_t hm_support_matrix(char *buf, size_t size, size_t *length);

/* ------------------------------------------------------------------------------------------ */
/* Host quantization, the standard layout, packing                                            */
/* ------------------------------------------------------------------------------------------ */

/*
 * Canonical (unpacked) quantized weights, all host memory owned by the caller. Shapes for a
 * format with E experts, N outputs, K inputs, G = K_padded / group_k groups (1 for channel):
 *   codes        uint8  [E][N][K]     one code per byte, the weight dtype's bit pattern
 *   scales       float  [E][N][G]     (block: [E][N/group_n][G]; tensor: unused) values exactly
 *                                     representable in the scale dtype
 *   zero_points  float  [E][N][G]     only with zero points; integer-valued for integer zp
 *   global_scale float  [E]           only for TENSOR and GROUP_TENSOR
 * Query the element counts with hm_format_canonical_sizes().
 */
typedef struct hm_canonical_sizes {
  uint32_t struct_size;
  uint64_t codes;        /* elements of codes */
  uint64_t scales;       /* elements of scales (0 when none) */
  uint64_t zero_points;  /* elements of zero_points (0 when none) */
  uint64_t global_scale; /* elements of global_scale (0 when none) */
} hm_canonical_sizes_t;
HM_API void hm_canonical_sizes_init(hm_canonical_sizes_t *sizes);
HM_API void hm_canonical_sizes_init_sized(hm_canonical_sizes_t *sizes, size_t size);
HM_API hm_status_t hm_format_canonical_sizes(const hm_format_t *format, hm_canonical_sizes_t *out);

/* Byte sizes of the standard-layout buffers the kernels read (docs/layout.md). */
typedef struct hm_packed_sizes {
  uint32_t struct_size;
  uint64_t weight;       /* bytes of packed weight codes */
  uint64_t scales;       /* bytes of packed scales, in the scale dtype */
  uint64_t zero_points;  /* bytes of packed zero points */
  uint64_t global_scale; /* bytes of the f32 global scales */
  int64_t n_padded;      /* N and K after padding to the layout's tiles */
  int64_t k_padded;
} hm_packed_sizes_t;
HM_API void hm_packed_sizes_init(hm_packed_sizes_t *sizes);
HM_API void hm_packed_sizes_init_sized(hm_packed_sizes_t *sizes, size_t size);
HM_API hm_status_t hm_format_packed_sizes(const hm_format_t *format, hm_packed_sizes_t *out);

/* Pointers to canonical buffers (for quantize, pack, unpack and dequantize). */
typedef struct hm_canonical_weight {
  uint32_t struct_size;
  uint8_t *codes;
  float *scales;
  float *zero_points;
  float *global_scale;
} hm_canonical_weight_t;
HM_API void hm_canonical_weight_init(hm_canonical_weight_t *weight);
HM_API void hm_canonical_weight_init_sized(hm_canonical_weight_t *weight, size_t size);

/* Pointers to standard-layout buffers. */
typedef struct hm_packed_weight {
  uint32_t struct_size;
  void *weight;
  void *scales;
  void *zero_points;
  float *global_scale;
} hm_packed_weight_t;
HM_API void hm_packed_weight_init(hm_packed_weight_t *weight);
HM_API void hm_packed_weight_init_sized(hm_packed_weight_t *weight, size_t size);

/* Quantizes a row-major host weight [E][N][K] of dtype src_dtype (F32, F16 or BF16) into
 * canonical buffers. NaN/Inf in the weight fail with HM_ERROR_NON_FINITE naming the element. */
HM_API hm_status_t hm_quantize(const hm_format_t *format, const void *weight, hm_dtype_t src_dtype,
                               const hm_canonical_weight_t *out);
/* Dequantizes canonical buffers back to a row-major f32 weight [E][N][K]. */
HM_API hm_status_t hm_dequantize(const hm_format_t *format, const hm_canonical_weight_t *in,
                                 float *weight);
/* Canonical -> standard layout (exactly invertible by hm_unpack). */
HM_API hm_status_t hm_pack(const hm_format_t *format, const hm_canonical_weight_t *in,
                           const hm_packed_weight_t *out);
/* Standard layout -> canonical. */
HM_API hm_status_t hm_unpack(const hm_format_t *format, const hm_packed_weight_t *in,
                             const hm_canonical_weight_t *out);

/* Host reference GEMM with f64 accumulation: C[M,N] = A[M,K] * W[N,K]^T (+ bias[N]), all f32,
 * row-major. Used to check kernels. bias may be NULL. */
HM_API hm_status_t hm_reference_gemm_f32(const float *a, const float *w, const float *bias,
                                         float *c, int64_t m, int64_t n, int64_t k);

/* Quantizes activations a[M][K] (f32, row-major) for 8- and 4-bit activation formats: dtype is
 * E4M3, E5M2, INT8, INT4 or E2M1; group_k = 0 gives one f32 scale per token, else one per token
 * and group of group_k along K. codes: 8-bit dtypes [M][K] bytes; 4-bit dtypes [M][ceil(K/2)]
 * bytes, even k in the low nibble. scales: f32 [M][G], G = 1 or ceil(K/group_k).
 * Rule (shared with hm_quantize_activation_device): scale = absmax / qmax and q = a / scale, both
 * IEEE f32 divisions rounded to nearest even (qmax: 448 e4m3, 57344 e5m2, 127 int8, 7 int4, 6
 * e2m1); code = the code nearest to q, ties to even, saturating. A group of zeros: scale 1, zero
 * codes. A group holding a NaN or an infinity: scale NaN (0x7FC00000) and zero codes. */
HM_API hm_status_t hm_quantize_activation(hm_dtype_t dtype, const float *a, int64_t m, int64_t k,
                                          int32_t group_k, void *codes, float *scales);
/* The inverse: codes and scales back to f32 [M][K]. */
HM_API hm_status_t hm_dequantize_activation(hm_dtype_t dtype, const void *codes,
                                            const float *scales, int64_t m, int64_t k,
                                            int32_t group_k, float *out);

/* ------------------------------------------------------------------------------------------ */
/* Runtime: driver, compiler, contexts                                                         */
/* ------------------------------------------------------------------------------------------ */

typedef struct hm_context hm_context_t;

/* Which compiler builds kernels. DEFAULT: HUMMING_COMPILER if set, else NVRTC, else NVCC. */
#define HM_COMPILER_DEFAULT 0
#define HM_COMPILER_NVRTC 1
#define HM_COMPILER_NVCC 2

/* Context flags. */
#define HM_CONTEXT_DISABLE_JIT 1u /* load-only: a cache miss is HM_ERROR_JIT_DISABLED */
#define HM_CONTEXT_NO_CACHE 2u    /* neither read nor write the disk cache */

#define HM_NO_DEVICE (-1)

typedef struct hm_context_options {
  uint32_t struct_size;
  /* The CUDA device ordinal, or HM_NO_DEVICE to compile ahead of time for target_arch. */
  int32_t device;
  /* "sm_90a", "sm_80", ... Required with HM_NO_DEVICE; with a device, NULL means the device's
   * own arch (with the "a" suffix where the arch has one). */
  const char *target_arch;
  /* NULL: HUMMING_CACHE_DIR, else $XDG_CACHE_HOME/humming, else ~/.cache/humming. */
  const char *cache_dir;
  int32_t compiler; /* HM_COMPILER_* */
  uint32_t flags;   /* HM_CONTEXT_*; HUMMING_DISABLE_JIT on (1, true, yes, on) in the
                     * environment adds DISABLE_JIT; off is unset, empty, 0, false, no or off
                     * (any case), and any other value fails hm_context_create */
} hm_context_options_t;
HM_API void hm_context_options_init(hm_context_options_t *options);
HM_API void hm_context_options_init_sized(hm_context_options_t *options, size_t size);

/* Creates a context: loads the CUDA driver (unless HM_NO_DEVICE) and the compiler lazily,
 * reads device properties, and retains the device's primary CUDA context. */
HM_API hm_status_t hm_context_create(const hm_context_options_t *options, hm_context_t **out);
HM_API void hm_context_destroy(hm_context_t *context);

typedef struct hm_device_info {
  uint32_t struct_size;
  int32_t device;             /* ordinal, or HM_NO_DEVICE */
  int32_t cc_major, cc_minor; /* compute capability (of target_arch when there is no device) */
  char name[256];             /* device name, or "none" */
  char arch[16];              /* the compile target, e.g. "sm_90a" */
  int32_t multiprocessors;
  int64_t shared_memory_per_block_optin; /* bytes */
  int64_t l2_cache_bytes;
  int64_t total_memory_bytes;
} hm_device_info_t;
HM_API void hm_device_info_init(hm_device_info_t *info);
HM_API void hm_device_info_init_sized(hm_device_info_t *info, size_t size);
HM_API hm_status_t hm_context_device_info(const hm_context_t *context, hm_device_info_t *info);

/* What the library found on this machine (for `humming info`). Fields that could not be
 * determined are 0 / empty, and the matching *_error field says why. */
typedef struct hm_runtime_info {
  uint32_t struct_size;
  int32_t driver_version; /* e.g. 13000 for CUDA 13.0; 0 when no driver loaded */
  int32_t device_count;
  char driver_path[512];
  char driver_error[512];
  int32_t nvrtc_version; /* major * 1000 + minor * 10, like CUDA versions */
  char nvrtc_path[512];
  char nvrtc_error[512];
  char nvcc_path[512];
  char nvcc_version[64]; /* e.g. "13.0.88"; empty when NVCC was not found */
  char kernel_sources[512]; /* "embedded (<hash>)" or the HUMMING_KERNEL_DIR directory */
  char cache_dir[512];
  uint64_t cache_bytes; /* total size of the cache directory */
  uint64_t cache_entries;
} hm_runtime_info_t;
HM_API void hm_runtime_info_init(hm_runtime_info_t *info);
HM_API void hm_runtime_info_init_sized(hm_runtime_info_t *info, size_t size);
HM_API hm_status_t hm_runtime_info(hm_runtime_info_t *info);

/* Trims the kernel cache, which otherwise only grows (every library, kernel-header or compiler
 * change adds a set of entries): removes the entries not used for max_age_seconds (0: no age
 * limit), then the least recently used ones while the cache directory takes more than max_bytes
 * (UINT64_MAX: no size limit). An entry is used when it is written or loaded. dir NULL or "":
 * the default cache (HUMMING_CACHE_DIR, ...). Each entry goes under its key's lock (one another
 * process is compiling is left alone) and is moved aside atomically first, so a process loading
 * it meanwhile either loads it whole or recompiles it. *removed_entries and *removed_bytes (either
 * may be NULL) say what went. */
HM_API hm_status_t hm_cache_prune(const char *dir, uint64_t max_age_seconds, uint64_t max_bytes,
                                  uint64_t *removed_entries, uint64_t *removed_bytes);

/* ------------------------------------------------------------------------------------------ */
/* Kernels and launches                                                                        */
/* ------------------------------------------------------------------------------------------ */

/* One compiled kernel: built (or found in the cache) for the context's arch, and loaded into the
 * device when the context has one. */
typedef struct hm_kernel hm_kernel_t;

/* Arguments for a launch, set by slot. Not thread-safe: use one per thread. */
typedef struct hm_launch_params hm_launch_params_t;

/* Launch-parameter slots. Pointers are device addresses (CUdeviceptr) passed as uint64_t. */
#define HM_ARG_A 0         /* [M, K] activations, row-major */
#define HM_ARG_B 1         /* weights (reference GEMM: [N, K] row-major) */
#define HM_ARG_C 2         /* [M, N] output, row-major */
#define HM_ARG_BIAS 3      /* [N] in the output dtype, or 0 */
#define HM_ARG_SCALES 4    /* packed weight scales */
#define HM_ARG_ZEROS 5     /* packed zero points */
#define HM_ARG_GLOBAL 6    /* f32 global scales */
#define HM_ARG_WORKSPACE 7 /* device workspace (size from the plan) */
/* MoE formats (e >= 2), indexed: the routing of the call (docs/moe.md), all device memory. */
#define HM_ARG_SORTED_IDS 8         /* int32 flat assignment ids (token * top_k + j), grouped by
                                     * expert, each expert's run padded to the plan's block size
                                     * with ids >= M * top_k; at least hm_plan_moe_rows entries */
#define HM_ARG_EXPERT_IDS 9         /* int32 [rows / block size]: the local expert of each block
                                     * (-1 or out of range: skipped) */
#define HM_ARG_NUM_TOKENS_PADDED 10 /* int32 scalar: the used length of SORTED_IDS */
/* 8-bit activations (a=e4m3, a=e5m2, a=int8): f32 [M] per-token scales of A, as
 * hm_quantize_activation_device writes them with group_k = 0 (A row i is codes * scale[i]);
 * with activation groups (a=e4m3:g128) [M][ceil(K / group_k)], written with that group_k. */
#define HM_ARG_ACT_SCALES 11
/* MoE formats, grouped modes (HM_ARG_MOE_MODE; docs/moe.md), device memory, 4-byte aligned. */
#define HM_ARG_EXPERT_OFFSETS 12 /* contiguous: int32 [E + 1], expert e owns rows
                                  * [offsets[e], offsets[e + 1]) of A and C (clamped to [0, M)) */
#define HM_ARG_MASKED_M 13       /* masked: int32 [E], the valid rows of each expert's [M] slab
                                  * (clamped to [0, M]) */
#define HM_ARG_M 16        /* integers from here */
#define HM_ARG_N 17        /* hm_kernel_launch; hm_plan_gemm takes N and K from the plan and */
#define HM_ARG_K 18        /* refuses values other than 0 or the plan's */
#define HM_ARG_WORKSPACE_BYTES 19
#define HM_ARG_TOP_K 20    /* MoE: experts per token, 1..HM_MAX_TOP_K (indexed mode) */
#define HM_ARG_MOE_MODE 21 /* MoE: HM_MOE_MODE_* (0, the default: indexed) */

/* How a MoE call finds each expert's rows, chosen per call by HM_ARG_MOE_MODE (an explicit
 * integer rather than "whichever routing slots are set": launch params are reused between
 * calls, and a stale slot must not switch the mode silently). Each mode requires its own routing
 * slots and refuses the others'. */
#define HM_MOE_MODE_INDEXED 0    /* A [M][K] tokens, C [M * top_k][N]: SORTED_IDS, EXPERT_IDS,
                                  * NUM_TOKENS_PADDED, TOP_K */
#define HM_MOE_MODE_CONTIGUOUS 1 /* A [M][K], C [M][N], rows grouped by expert: EXPERT_OFFSETS */
#define HM_MOE_MODE_MASKED 2     /* A [E][M][K], C [E][M][N] (M = T_max rows per expert):
                                  * MASKED_M */

/* Only the slots named above are accepted: set_pointer takes HM_ARG_A .. HM_ARG_MASKED_M,
 * set_int HM_ARG_M .. HM_ARG_MOE_MODE; any other id is HM_ERROR_INVALID_ARGUMENT. */
HM_API hm_status_t hm_launch_params_create(hm_launch_params_t **out);
HM_API void hm_launch_params_destroy(hm_launch_params_t *params);
HM_API hm_status_t hm_launch_params_set_pointer(hm_launch_params_t *params, int32_t slot,
                                                uint64_t device_pointer);
HM_API hm_status_t hm_launch_params_set_int(hm_launch_params_t *params, int32_t slot,
                                            int64_t value);
/* Resets every slot to 0. */
HM_API hm_status_t hm_launch_params_clear(hm_launch_params_t *params);

/* The plain reference GEMM C[M,N] = A[M,K] * B[N,K]^T with f32 accumulation: in_dtype is F16,
 * BF16 or F32 (A and B), out_dtype F16, BF16 or F32. Compiles through the cache. */
HM_API hm_status_t hm_kernel_create_reference_gemm(hm_context_t *context, hm_dtype_t in_dtype,
                                                   hm_dtype_t out_dtype, hm_kernel_t **out);
HM_API void hm_kernel_destroy(hm_kernel_t *kernel);
/* The kernel's name and its cache key (hex), for logs. snprintf rule. */
HM_API hm_status_t hm_kernel_name(const hm_kernel_t *kernel, char *buf, size_t size,
                                  size_t *length);
HM_API hm_status_t hm_kernel_cache_key(const hm_kernel_t *kernel, char *buf, size_t size,
                                       size_t *length);
/* Launches on `stream` (a CUstream, 0 for the legacy default stream). Uses A [M][K], B [N][K]
 * and C [M][N], M, N, K; the device, alignment and size checks of hm_plan_gemm apply.
 * Asynchronous: no host synchronization, no allocation; capturable in a CUDA graph. */
HM_API hm_status_t hm_kernel_launch(const hm_kernel_t *kernel, const hm_launch_params_t *params,
                                    void *stream);

/* ------------------------------------------------------------------------------------------ */
/* Plans: one layer on one device                                                              */
/* ------------------------------------------------------------------------------------------ */

/* A plan binds a format to a context: it picks the kernels for each range of M, compiles them all
 * in hm_plan_prepare() (through the cache, never later), and runs hm_plan_gemm() with no host
 * synchronization and no allocation, so a call can be captured in a CUDA graph. A prepared plan is
 * immutable and may be used from several threads at once (each with its own launch params). */
typedef struct hm_plan hm_plan_t;

/* Reserved: will allow reductions whose order depends on timing. Accepted, and has no effect
 * today: every kernel sums its K splits in split order, so results are deterministic with or
 * without it. */
#define HM_PLAN_NONDETERMINISTIC 1u

typedef struct hm_plan_options {
  uint32_t struct_size;
  uint32_t flags;          /* HM_PLAN_* */
  int64_t max_m;           /* the largest M the plan will run (0: no limit); hm_plan_prepare
                            * compiles only the kernels of M up to it */
  const char *tuning_json; /* NULL, or a JSON tuning override (docs/tuning.md); copied */
} hm_plan_options_t;
HM_API void hm_plan_options_init(hm_plan_options_t *options);
HM_API void hm_plan_options_init_sized(hm_plan_options_t *options, size_t size);

/* Validates the format for the context's arch (the error names the rule). options may be NULL.
 * The plan keeps its own copy of the format and a reference to the context's state. */
HM_API hm_status_t hm_plan_create(hm_context_t *context, const hm_format_t *format,
                                  const hm_plan_options_t *options, hm_plan_t **out);
HM_API void hm_plan_destroy(hm_plan_t *plan);
/* Compiles (or loads from the cache) every kernel the plan can choose. Call once, before serving. */
HM_API hm_status_t hm_plan_prepare(hm_plan_t *plan);
/* Device workspace needed for calls with M up to max_m. Allocate it once, zero it once, and pass
 * it with HM_ARG_WORKSPACE / HM_ARG_WORKSPACE_BYTES: every call leaves it all zero again, so one
 * workspace (of the largest size any of them needs) can serve several plans, as long as no two
 * calls that use it run at the same time (one stream, or streams ordered by events). */
HM_API hm_status_t hm_plan_workspace_size(const hm_plan_t *plan, int64_t max_m, uint64_t *bytes);
/* Runs C[M,N] = A[M,K] * dequant(W)^T (+ bias) on `stream`. Uses HM_ARG_A (activations, row-major
 * [M][K] in the activation dtype), HM_ARG_B (packed weight), HM_ARG_SCALES, HM_ARG_ZEROS,
 * HM_ARG_GLOBAL (as the format needs), HM_ARG_BIAS ([N] in the output dtype, if the format has a
 * bias), HM_ARG_C ([M][N] in the output dtype), HM_ARG_WORKSPACE(_BYTES) and HM_ARG_M.
 * 8-bit activations (a=e4m3, a=e5m2, a=int8; sm_90a, docs/activations.md): A holds one code per
 * byte and HM_ARG_ACT_SCALES the f32 scale of each row ([M], 4-byte aligned;
 * hm_quantize_activation_device with group_k = 0 writes both), K % 16 == 0, and
 * C = (codes * scale[row]) * dequant(W)^T; with activation groups (a=e4m3:g128,
 * hm_format_set_activation_groups) the scales are [M][ceil(K / 128)], one per row and K group
 * (the quantizer with that group_k writes them).
 * MoE formats (e >= 2) run indexed: W, scales, zero points, global scales and bias hold every
 * expert ([E][...]); A is [M][K] tokens; C is [M * top_k][N], row token * top_k + j the output
 * of the token's j-th expert; HM_ARG_SORTED_IDS, HM_ARG_EXPERT_IDS, HM_ARG_NUM_TOKENS_PADDED
 * (4-byte aligned) and HM_ARG_TOP_K say which rows go to which expert (hm_plan_moe_rows): the
 * blocks that hold rows come first, each with at least one assignment (as moe_align packs them;
 * the kernel computes at most M * top_k blocks). Rows
 * of experts marked -1 (not on this rank) are neither read nor written; routing data is read on
 * the device and never trusted as a bound (ids and experts out of range are skipped).
 * With HM_ARG_MOE_MODE = HM_MOE_MODE_CONTIGUOUS, A and C are [M][N] rows already grouped by
 * expert and HM_ARG_EXPERT_OFFSETS says where each expert's rows are; rows outside every
 * expert's range are neither read nor written. With HM_MOE_MODE_MASKED, A is [E][M][K] and C
 * [E][M][N] (M = T_max), and only the first HM_ARG_MASKED_M[e] rows of expert e's slab are read
 * and written. Both read their counts on the device only (graph-capturable) and clamp them to M.
 * A grouped call runs the plan's tile for (and is bounded by max_m as) M / 8 tokens (contiguous)
 * or T_max * E / 8 tokens (masked): the rows per expert of that many tokens at top-8.
 * Alignment (HM_ERROR_MISALIGNED otherwise): A 16 bytes when K % 8 == 0 (else 2), B, SCALES, ZEROS
 * and WORKSPACE 16 bytes (the kernels copy them in 16-byte units), C and BIAS 2 bytes, GLOBAL
 * and ACT_SCALES 4 bytes. With C and BIAS on 16 bytes and N % 8 == 0 the kernels store eight
 * outputs at a time; other alignments are exact too but take a slower per-element store.
 * Sizes: every buffer must hold what the format, M (and top_k) need (A [M][K], C [M][N] or
 * [M * top_k][N], the packed sizes of hm_format_packed_sizes, the bias [E][N], the workspace
 * this M uses, which hm_plan_workspace_size bounds). A buffer whose allocation ends before that
 * (the driver's allocation range, asked with the device checks below) is refused with
 * HM_ERROR_INVALID_ARGUMENT naming the slot; a buffer carved out of a larger allocation is
 * checked against that allocation only, memory the driver gives no range for (pageable host
 * memory, some CUDA-compatible runtimes) is not checked, and the MoE routing lists
 * (SORTED_IDS, EXPERT_IDS) are read as far as NUM_TOKENS_PADDED, device data, says.
 * Every pointer must be usable by the plan's device: memory of another device, or a stream of
 * another context, is HM_ERROR_WRONG_DEVICE; host memory the device cannot read is
 * HM_ERROR_INVALID_ARGUMENT (both name the slot; checked with driver attribute queries, no
 * device round trip). Managed memory and host memory mapped for this device are accepted. */
HM_API hm_status_t hm_plan_gemm(const hm_plan_t *plan, const hm_launch_params_t *params,
                                void *stream);
/* MoE plans (formats with e >= 2; docs/moe.md). A call with M tokens routed to top_k experts
 * each reads its rows through HM_ARG_SORTED_IDS, which the routing step (hm_moe_align, or an
 * engine's own moe_align) pads per expert to *block_size rows; the block size depends on M (the
 * tile the plan picks for it). *rows: the capacity SORTED_IDS must have for (M, top_k),
 * round_up(M * top_k + experts * (block_size - 1), block_size); EXPERT_IDS needs
 * *rows / block_size entries. HM_ERROR_INVALID_ARGUMENT for a plan of a dense format. */
HM_API hm_status_t hm_plan_moe_block_size(const hm_plan_t *plan, int64_t m, int32_t *block_size);
HM_API hm_status_t hm_plan_moe_rows(const hm_plan_t *plan, int64_t m, int32_t top_k,
                                    int64_t *rows);
/* The kernel and tiling the plan uses for M (for logs), e.g. "dense_mma bm16 ... split 4". */
HM_API hm_status_t hm_plan_describe(const hm_plan_t *plan, int64_t m, char *buf, size_t size,
                                    size_t *length);

/* ------------------------------------------------------------------------------------------ */
/* Small device helpers (for tools, tests and bindings that have no CUDA runtime of their own) */
/* ------------------------------------------------------------------------------------------ */

/* Allocates / frees device memory on the context's device (cuMemAlloc / cuMemFree). */
HM_API hm_status_t hm_device_alloc(hm_context_t *context, size_t bytes, uint64_t *device_pointer);
HM_API hm_status_t hm_device_free(hm_context_t *context, uint64_t device_pointer);
/* Synchronous copies between host and device memory: on return the destination holds the data,
 * also for work the caller then launches on a non-blocking stream. */
HM_API hm_status_t hm_copy_to_device(hm_context_t *context, uint64_t dst, const void *src,
                                     size_t bytes);
HM_API hm_status_t hm_copy_to_host(hm_context_t *context, void *dst, uint64_t src, size_t bytes);
/* Waits for all work on `stream` (0: the default stream). */
HM_API hm_status_t hm_stream_synchronize(hm_context_t *context, void *stream);

/* ------------------------------------------------------------------------------------------ */
/* Packing on the device                                                                       */
/* ------------------------------------------------------------------------------------------ */

/*
 * Canonical buffers in device memory, for packing at load time without a host round trip. Fields
 * are device addresses (CUdeviceptr, as hm_device_alloc returns them; 0 = absent). Shapes as in
 * hm_canonical_weight_t (counts from hm_format_canonical_sizes), but scales and zero points are
 * already encoded in their dtype, one element of the packed element size each:
 *   codes        uint8 [E][N][K]  one code per byte, the weight dtype's bit pattern
 *   scales       [E][R][G]        scale dtype codes, little-endian: 1 byte (8 bits or fewer:
 *                                 e4m3, ue8m0, ...), 2 (f16, bf16) or 4 (f32); R = N (block
 *                                 scales: ceil(N / group_n)), G = ceil(K / group_k) (1: channel)
 *   zero_points  [E][R][G]        zero-point codes: 1 byte (integer zp: the code), 2 (f16, bf16)
 *   global_scale f32 [E]
 */
typedef struct hm_device_canonical {
  uint32_t struct_size;
  uint64_t codes;
  uint64_t scales;
  uint64_t zero_points;
  uint64_t global_scale;
} hm_device_canonical_t;
HM_API void hm_device_canonical_init(hm_device_canonical_t *weight);
HM_API void hm_device_canonical_init_sized(hm_device_canonical_t *weight, size_t size);

/* Standard-layout buffers in device memory (sizes from hm_format_packed_sizes). */
typedef struct hm_device_packed {
  uint32_t struct_size;
  uint64_t weight;
  uint64_t scales;
  uint64_t zero_points;
  uint64_t global_scale;
} hm_device_packed_t;
HM_API void hm_device_packed_init(hm_device_packed_t *weight);
HM_API void hm_device_packed_init_sized(hm_device_packed_t *weight, size_t size);

/* Canonical -> standard layout on the context's device, on `stream` (a CUstream; 0: the legacy
 * default stream). The weight is byte for byte what hm_pack writes for the same codes, padding
 * included. The side tensors are only reordered ([E][R][G] -> [E][groups][columns], zero bytes
 * in the padding) and the global scale is copied, so they equal hm_pack's output exactly when
 * their codes are the encodings hm_pack would make (hm_dtype_encode).
 *   - in->codes and out->weight are required. Each side tensor the format has (scales, zero
 *     points, global scale) is packed when both its in and out addresses are set and skipped
 *     when both are 0 (for callers that place it themselves); one without the other, or one the
 *     format does not have, is HM_ERROR_INVALID_ARGUMENT.
 *   - out->weight must be 16-byte aligned (HM_ERROR_MISALIGNED); scale, zero-point and global
 *     scale addresses aligned to their element size. Codes may have any alignment.
 *   - Nothing is checked on the device: only the low b bits of each code are used (hm_pack
 *     refuses codes of b or more bits), and no scale is checked for representability.
 *   - The buffers must hold the sizes above; in and out must not overlap.
 * Compiles the packer for the format's (weight bits, activation bits) through the cache on first
 * use (keep the context; later calls reuse it). Asynchronous, no host synchronization and no
 * allocation after the first call for a width; then capturable in a CUDA graph. A context
 * without a device: HM_ERROR_NO_DEVICE; a pointer or stream of another device:
 * HM_ERROR_WRONG_DEVICE where the driver can tell. Thread-safe. */
HM_API hm_status_t hm_pack_device(hm_context_t *context, const hm_format_t *format,
                                  const hm_device_canonical_t *in, const hm_device_packed_t *out,
                                  void *stream);

/* ------------------------------------------------------------------------------------------ */
/* Activation quantization on the device                                                       */
/* ------------------------------------------------------------------------------------------ */

/*
 * Arguments of hm_quantize_activation_device. Addresses are device addresses (CUdeviceptr, as
 * hm_device_alloc returns them; 0 = absent):
 *   a       [M][K] in_dtype (HM_DTYPE_F16 or HM_DTYPE_BF16), row-major, row stride K
 *   perm    int32 [K] or 0: output column j takes input column perm[j] (GPTQ act-order)
 *   codes   uint8 [M][K]: one out_dtype code (HM_DTYPE_E4M3, E5M2 or INT8) per byte
 *   scales  f32 [M][G]: G = hm_activation_scale_groups(K, group_k)
 * group_k = 0: one scale per token (row); else one per token and group of group_k columns (a
 * positive multiple of 8; the last group of a row may be partial). m = 0 launches nothing.
 */
typedef struct hm_activation_quant_args {
  uint32_t struct_size;
  hm_dtype_t in_dtype;
  hm_dtype_t out_dtype;
  int32_t group_k;
  int64_t m;
  int64_t k;
  uint64_t a;
  uint64_t perm;
  uint64_t codes;
  uint64_t scales;
} hm_activation_quant_args_t;
HM_API void hm_activation_quant_args_init(hm_activation_quant_args_t *args);
HM_API void hm_activation_quant_args_init_sized(hm_activation_quant_args_t *args, size_t size);

/* The number of scales per row: 1 for group_k = 0, else ceil(k / group_k). k > 0, group_k >= 0. */
HM_API hm_status_t hm_activation_scale_groups(int64_t k, int32_t group_k, int64_t *out);

/* Quantizes activations on the context's device, on `stream` (a CUstream; 0: the legacy default
 * stream), bit for bit as hm_quantize_activation does on the host for the same (widened) values:
 *   scale = absmax / qmax (qmax: 448 e4m3, 57344 e5m2, 127 int8) and q = x / scale, both IEEE
 *   f32 divisions rounded to nearest even; code = the out_dtype code nearest to q, ties to the
 *   even code, saturating at +-qmax. A group of zeros (or whose scale underflows to 0) gets
 *   scale 1.0 and zero codes. A group holding a NaN or an infinity gets scale NaN (0x7FC00000)
 *   and zero codes, so its dequantized values (and a GEMM that uses them) are NaN.
 *   - perm entries are not checked on the host (that would read device memory): an entry outside
 *     [0, K) reads nothing and counts as a NaN input, making its group's scale NaN.
 *   - Alignment: a 2-byte, perm and scales 4-byte, codes any (16-byte aligned a and 8-byte
 *     aligned codes with K % 8 == 0 and no perm take vector loads and stores). HM_ERROR_MISALIGNED
 *     otherwise. a must not overlap codes or scales.
 *   - HM_ERROR_UNSUPPORTED_FORMAT for other dtypes; HM_ERROR_INVALID_ARGUMENT for m < 0, k <= 0,
 *     a group_k that is negative or not a multiple of 8, or a missing a, codes or scales.
 * Compiles the quantizer for (in_dtype, out_dtype) through the cache on first use (keep the
 * context; later calls reuse it). Asynchronous: no host synchronization, no allocation and no
 * read of device memory after the first call for a dtype pair; then capturable in a CUDA graph.
 * A context without a device: HM_ERROR_NO_DEVICE; memory or a stream of another device:
 * HM_ERROR_WRONG_DEVICE, host memory the device cannot reach: HM_ERROR_INVALID_ARGUMENT (the
 * checks of hm_plan_gemm). Thread-safe. */
HM_API hm_status_t hm_quantize_activation_device(hm_context_t *context,
                                                 const hm_activation_quant_args_t *args,
                                                 void *stream);

/* ------------------------------------------------------------------------------------------ */
/* MoE routing                                                                                 */
/* ------------------------------------------------------------------------------------------ */

/*
 * Device helpers around a Mixture-of-Experts GEMM (docs/moe.md): hm_moe_align turns a router's
 * top-k expert ids into the "indexed" layout the MoE GEMM reads (vLLM moe_align style), and
 * hm_moe_reduce sums each token's top-k output rows with its router weights. Both run on the
 * context's device on `stream`, read and write only device memory the caller owns, never
 * synchronize, allocate or read device data on the host (after the first call has compiled the
 * kernel), so they are capturable in a CUDA graph; both are deterministic (bit-identical results
 * for identical inputs) and thread-safe. Their kernels compile through the cache on first use
 * (keep the context). A context without a device: HM_ERROR_NO_DEVICE; a pointer or stream of
 * another device: HM_ERROR_WRONG_DEVICE where the driver can tell.
 *
 * Assignments are numbered by flat id f = t * top_k + j (token t, slot j). An assignment is kept
 * when its id e = topk_ids[f] lies in [0, num_experts) and, with an expert map, expert_map[e] lies
 * in [0, num_local_experts) (its local expert; otherwise the local expert is e). Every other
 * assignment (ids out of range, -1 from the map: experts of other ranks) is dropped: it appears in
 * no output and its rows are never read. Nothing is reported for dropped ids.
 */
#define HM_MOE_MAX_LOCAL_EXPERTS 1024   /* local experts in [1, HM_MOE_MAX_LOCAL_EXPERTS] */
#define HM_MOE_MIN_BLOCK_SIZE 8         /* block_size: a power of two in [MIN, MAX] */
#define HM_MOE_MAX_BLOCK_SIZE 256

/* One routing decision, as a router produced it. Device addresses as hm_device_alloc returns
 * them (0 = absent); borrowed for the call. */
typedef struct hm_moe_routing {
  uint32_t struct_size;
  uint64_t topk_ids;   /* int32 [num_tokens][top_k], global expert ids (required by the kernels;
                        * hm_moe_align_sizes does not read it) */
  int64_t num_tokens;  /* in [0, HM_MAX_M] */
  int32_t top_k;       /* in [1, HM_MAX_TOP_K] */
  int32_t num_experts; /* global experts, in [1, HM_MAX_EXPERTS] */
  int32_t num_local_experts; /* experts on this rank; 0 = num_experts (required without a map) */
  uint64_t expert_map; /* int32 [num_experts]: global -> local expert, -1 = not on this rank;
                        * 0 = none (every expert is local, local id = global id) */
} hm_moe_routing_t;
HM_API void hm_moe_routing_init(hm_moe_routing_t *routing);
HM_API void hm_moe_routing_init_sized(hm_moe_routing_t *routing, size_t size);

/* Capacities (int32 elements) of hm_moe_align's outputs: fixed by the shapes, so buffers can be
 * allocated once for the largest num_tokens and reused (and captured) for any smaller one. */
typedef struct hm_moe_align_sizes {
  uint32_t struct_size;
  int64_t sorted_ids;     /* num_tokens * top_k + L * (block_size - 1), rounded up to blocks */
  int64_t expert_ids;     /* sorted_ids / block_size */
  int64_t expert_offsets; /* L + 1 */
  int64_t expert_counts;  /* L */
} hm_moe_align_sizes_t;
HM_API void hm_moe_align_sizes_init(hm_moe_align_sizes_t *sizes);
HM_API void hm_moe_align_sizes_init_sized(hm_moe_align_sizes_t *sizes, size_t size);

/* Fills *out for `routing` (L = its local experts) and `block_size` (the MoE GEMM's token block,
 * a power of two in [HM_MOE_MIN_BLOCK_SIZE, HM_MOE_MAX_BLOCK_SIZE]). Host only, no context.
 * HM_ERROR_INVALID_ARGUMENT names a shape out of its range, num_local_experts != num_experts
 * without a map, or a capacity that does not fit int32 ids. */
HM_API hm_status_t hm_moe_align_sizes(const hm_moe_routing_t *routing, int32_t block_size,
                                      hm_moe_align_sizes_t *out);

/* hm_moe_align's outputs: device addresses of int32 buffers of (at least) the capacities above,
 * 4-byte aligned, not overlapping each other or topk_ids. */
typedef struct hm_moe_align_out {
  uint32_t struct_size;
  uint64_t sorted_ids;        /* required */
  uint64_t expert_ids;        /* required */
  uint64_t num_tokens_padded; /* required: one int32 */
  uint64_t expert_offsets;    /* required */
  uint64_t expert_counts;     /* optional (0: not written) */
} hm_moe_align_out_t;
HM_API void hm_moe_align_out_init(hm_moe_align_out_t *out);
HM_API void hm_moe_align_out_init_sized(hm_moe_align_out_t *out, size_t size);

/* The indexed layout (docs/moe.md), with S = num_tokens * top_k (the sentinel) and L local experts:
 *   sorted_ids[capacity]   for each local expert in order, the flat ids of its kept assignments
 *                          in increasing order, then S up to a multiple of block_size; after
 *                          the last expert, S to the end of the capacity;
 *   expert_ids[capacity / block_size]  the local expert of each block of sorted_ids, -1 for the
 *                          blocks past *num_tokens_padded;
 *   *num_tokens_padded     the used length of sorted_ids (a multiple of block_size);
 *   expert_offsets[L + 1]  exclusive prefix sum of the padded counts (expert e's blocks are
 *                          sorted_ids[offsets[e] .. offsets[e + 1])), offsets[L] = padded length;
 *   expert_counts[L]       kept assignments per local expert (unpadded; the masked layout's
 *                          counts), when requested.
 * Every element of every buffer up to its capacity is written. One kernel launch. */
HM_API hm_status_t hm_moe_align(hm_context_t *context, const hm_moe_routing_t *routing,
                                int32_t block_size, const hm_moe_align_out_t *out, void *stream);

/* hm_moe_reduce's buffers (device addresses). */
typedef struct hm_moe_reduce_args {
  uint32_t struct_size;
  hm_dtype_t dtype;      /* HM_DTYPE_F16 or HM_DTYPE_BF16: input and out */
  int64_t n;             /* columns of input and out, >= 1 (<= HM_MAX_N) */
  uint64_t input;        /* [num_tokens * top_k][n]: row f is assignment f's output (the down
                          * projection in flat-id order); rows of dropped assignments unread */
  uint64_t topk_weights; /* f32 [num_tokens][top_k] router weights, 4-byte aligned */
  uint64_t out;          /* [num_tokens][n]; must not overlap input */
} hm_moe_reduce_args_t;
HM_API void hm_moe_reduce_args_init(hm_moe_reduce_args_t *args);
HM_API void hm_moe_reduce_args_init_sized(hm_moe_reduce_args_t *args, size_t size);

/* out[t][c] = sum over kept j of topk_weights[t][j] * in[t * top_k + j][c], accumulated in f32
 * with one fused multiply-add per term in increasing j starting from 0, then rounded once to
 * dtype (round to nearest even); a token with no kept assignment gets 0. input and out must be
 * 2-byte aligned (16-byte aligned and n % 8 == 0 take the vectorized kernel). One kernel launch
 * that moves 2 * n * (kept assignments + num_tokens) + 8 * num_tokens * top_k bytes. */
HM_API hm_status_t hm_moe_reduce(hm_context_t *context, const hm_moe_routing_t *routing,
                                 const hm_moe_reduce_args_t *args, void *stream);

/* ------------------------------------------------------------------------------------------ */
/* Checkpoint conversion                                                                       */
/* ------------------------------------------------------------------------------------------ */

/*
 * Converters read one layer's tensors exactly as the producing tool wrote them (names, dtypes,
 * shapes and bit packing: docs/convert.md) and return its format plus canonical buffers (the
 * ones hm_dequantize / hm_pack take), a bias and, for GPTQ act-order, a K permutation.
 * Conversion is exact: dequantizing the result gives, bit for bit in f32, the checkpoint's own
 * dequantized weight (except the two roundings docs/convert.md lists: scales the activation
 * dtype cannot hold, and global scales that divide).
 */

/* Checkpoint schemes (hm_scheme_parse names in parentheses). */
#define HM_SCHEME_GPTQ 1        /* "gptq": AutoGPTQ / GPTQModel, incl. desc_act with g_idx */
#define HM_SCHEME_AWQ 2         /* "awq": AutoAWQ GEMM packing */
#define HM_SCHEME_CT_PACK 3     /* "ct-pack": compressed-tensors pack-quantized (int2..8) */
#define HM_SCHEME_CT_INT8 4     /* "ct-int8": compressed-tensors int-quantized (W8A8 int8) */
#define HM_SCHEME_CT_FP8 5      /* "ct-fp8": compressed-tensors float-quantized (e4m3) */
#define HM_SCHEME_CT_NVFP4 6    /* "ct-nvfp4": compressed-tensors nvfp4-pack-quantized */
#define HM_SCHEME_FP8 7         /* "fp8": HF fp8 (weight_scale_inv blocks) or per-tensor scales */
#define HM_SCHEME_MXFP4 8       /* "mxfp4": gpt-oss *_blocks / *_scales / *_bias experts */
#define HM_SCHEME_NVFP4 9       /* "nvfp4": ModelOpt NVFP4 (weight_scale_2 global) */
#define HM_SCHEME_BITNET 10     /* "bitnet": BitNet b1.58 ternary, 4 codes per byte */

/* Maps a scheme name (above; also "compressed-tensors-*" and "modelopt" spellings listed in
 * docs/convert.md) to its HM_SCHEME_* constant. HM_ERROR_PARSE names the text. */
HM_API hm_status_t hm_scheme_parse(const char *name, int32_t *out);

/* One checkpoint tensor in host memory, borrowed for the duration of the call. */
typedef struct hm_checkpoint_tensor {
  uint32_t struct_size;
  /* The tensor's role: the last component of its checkpoint name ("qweight", "qzeros",
   * "scales", "g_idx", "bias", "weight_packed", "weight_scale", "gate_up_proj_blocks", ...);
   * a full name "model.layers.0.mlp.down_proj.qweight" is accepted too. */
  const char *name;
  /* The safetensors dtype: "I32", "I16", "I8", "U8", "F16", "BF16", "F32", "F8_E4M3", ... */
  const char *dtype;
  int64_t shape[8];
  int32_t ndim;
  const void *data; /* row-major, little-endian */
  uint64_t bytes;   /* must equal the product of shape times the dtype's size */
} hm_checkpoint_tensor_t;
HM_API void hm_checkpoint_tensor_init(hm_checkpoint_tensor_t *tensor);
HM_API void hm_checkpoint_tensor_init_sized(hm_checkpoint_tensor_t *tensor, size_t size);

/* Conversion flags. */
#define HM_CONVERT_GPTQ_V2 1u         /* GPTQ zeros stored as is (checkpoint_format gptq_v2);
                                       * default v1 stores zero - 1 */
#define HM_CONVERT_SPLIT_GATE_UP 2u   /* MXFP4 gate_up: de-interleave rows (even rows = gate,
                                       * odd rows = up) into [gate rows..., up rows...] */
#define HM_CONVERT_KEEP_K_ORDER 4u    /* GPTQ/CT act-order: fail instead of permuting K */
/* Who wrote a GPTQ v1 checkpoint (quantize_config meta.quantizer); they disagree on a zero
 * point of 0, which v1 stores as -1 (docs/convert.md). Neither: the stored zeros must not need
 * the answer (no field holds all ones), else the layer is refused asking for one of them. */
#define HM_CONVERT_GPTQ_V1_AUTOGPTQ 8u   /* each field read as stored + 1 (AutoGPTQ's kernels) */
#define HM_CONVERT_GPTQ_V1_GPTQMODEL 16u /* whole words + 0x11111111 (4-bit; GPTQModel's loader) */
#define HM_CONVERT_ASYMMETRIC 32u        /* the config says sym: false: zero points required */
/* compressed-tensors pack-quantized for bits that do not divide 32: codes packed densely,
 * crossing words (compressed-tensors >= 0.20), or whole codes per word (older). Neither: the
 * shapes decide, and a layer they cannot decide is refused. */
#define HM_CONVERT_CT_PACK_DENSE 64u
#define HM_CONVERT_CT_PACK_WORD_ALIGNED 128u

/* How an NVFP4 (or BitNet) global scale g is applied: dequant = e2m1 * block_scale * g
 * (MULTIPLY, ModelOpt weight_scale_2) or e2m1 * block_scale / g (DIVIDE, compressed-tensors
 * weight_global_scale; BitNet weight_scale). */
#define HM_GLOBAL_SCALE_DEFAULT 0 /* the scheme's own convention */
#define HM_GLOBAL_SCALE_MULTIPLY 1
#define HM_GLOBAL_SCALE_DIVIDE 2

/* Called by hm_convert_file after each tensor it copies and each layer it converts; done and
 * total count bytes of the input file's tensors. */
typedef void (*hm_convert_progress_fn)(void *user_data, const char *tensor_name, uint64_t done,
                                       uint64_t total);
/* hm_convert_options_t.cancel: nonzero stops the conversion. */
typedef int32_t (*hm_convert_cancel_fn)(void *user_data);

typedef struct hm_convert_options {
  uint32_t struct_size;
  /* The serving activation dtype; HM_DTYPE_NONE: f16, or bf16 for checkpoints with bf16 scales
   * or bias, MXFP4 and f32-scaled FP8 (docs/convert.md). */
  hm_dtype_t activation;
  hm_dtype_t output; /* HM_DTYPE_NONE: the activation when 16-bit, else as activation's default */
  int32_t bits;          /* GPTQ / ct-pack: 0 = derive from the shapes */
  /* GPTQ / AWQ / ct-pack / group FP8: 0 = derive from the shapes (refused when more than one
   * group size fits), -1 = per channel */
  int32_t group_size;
  uint32_t flags;        /* HM_CONVERT_* */
  int32_t global_scale_convention; /* HM_GLOBAL_SCALE_* */
  /* Per-tensor scales of a fused layer (QKV, gate/up): weight_scale holds shard_count scalars,
   * shard i covering shard_rows[i] consecutive rows. NULL: equal shards. Not copied. */
  const int64_t *shard_rows;
  int32_t shard_count;
  hm_convert_progress_fn progress; /* hm_convert_file only; may be NULL */
  void *progress_user_data;
  /* hm_convert_file only; may be NULL. Asked after each tensor copied and each layer converted
   * (after progress): nonzero cancels, and the call returns HM_ERROR_INVALID_STATE having written
   * nothing to out_path (its temporary file is removed), as a cancelling hm_convert_model does.
   * Called on the calling thread; a flag set from a signal handler or another thread suits it.
   * A caller whose struct_size ends before this field has no cancel. */
  hm_convert_cancel_fn cancel;
  void *cancel_user_data;
} hm_convert_options_t;
HM_API void hm_convert_options_init(hm_convert_options_t *options);
HM_API void hm_convert_options_init_sized(hm_convert_options_t *options, size_t size);

/* The result of converting one layer; owns its buffers. */
typedef struct hm_converted_layer hm_converted_layer_t;

/* Converts one layer from `count` tensors (options may be NULL). Unknown or missing tensors,
 * inconsistent shapes and values the format cannot hold fail with a message naming the tensor. */
HM_API hm_status_t hm_convert_layer(int32_t scheme, const hm_checkpoint_tensor_t *tensors,
                                    size_t count, const hm_convert_options_t *options,
                                    hm_converted_layer_t **out);
HM_API void hm_converted_layer_destroy(hm_converted_layer_t *layer);
/* A new copy of the layer's format (valid for options->activation); destroy it yourself. */
HM_API hm_status_t hm_converted_layer_format(const hm_converted_layer_t *layer,
                                             hm_format_t **out);

/* Joins converted layers into one (docs/convert.md "Stacking experts"), for MoE checkpoints that
 * store each expert as its own quantized layer (GPTQ, AWQ, compressed-tensors experts.<i>.*):
 *   HM_STACK_EXPERTS  the layers' experts in order: E = the sum of their E; every other field of
 *                     the format, and the K permutation, must be the same;
 *   HM_STACK_ROWS     expert by expert, the layers' rows in order: N = the sum of their N (gate
 *                     and up into one gate_up layer, as humming.torch.MoE and the MoE GEMM take
 *                     it); the same E and format otherwise, equal global scales per expert, and
 *                     with block scales each layer but the last ending on a block.
 * `count` >= 2 layers; nothing is re-quantized (the canonical buffers are copied). The inputs
 * stay owned by the caller; *out is a new layer (hm_converted_layer_destroy). Refused with
 * HM_ERROR_INVALID_ARGUMENT or HM_ERROR_UNSUPPORTED naming the layer and what differs. */
#define HM_STACK_EXPERTS 0
#define HM_STACK_ROWS 1
HM_API hm_status_t hm_converted_layer_stack(const hm_converted_layer_t *const *layers, size_t count,
                                            int32_t axis, hm_converted_layer_t **out);

/* Pointers into the layer's own buffers, valid until hm_converted_layer_destroy(). */
typedef struct hm_converted_layer_info {
  uint32_t struct_size;
  /* Canonical buffers (element counts from hm_format_canonical_sizes of the layer's format);
   * pass `weight` straight to hm_pack / hm_dequantize. */
  hm_canonical_weight_t weight;
  const float *bias; /* f32 [E][N], or NULL when the format has no bias */
  /* int32 [K], or NULL when K keeps its order (act-order checkpoints). Column k of the converted
   * weight is checkpoint input column k_permutation[k]: gather the activations with it,
   * A'[:, k] = A[:, k_permutation[k]]. */
  const int32_t *k_permutation;
  /* What the conversion changed beyond the layout, one sentence (NUL-terminated), or NULL when
   * nothing was lost: e.g. MXFP4 scale groups below the exponent window of 8-bit activations,
   * whose codes were re-rounded (docs/convert.md). Added after the first release: set only when
   * struct_size covers it. */
  const char *note;
} hm_converted_layer_info_t;
HM_API void hm_converted_layer_info_init(hm_converted_layer_info_t *info);
HM_API void hm_converted_layer_info_init_sized(hm_converted_layer_info_t *info, size_t size);
HM_API hm_status_t hm_converted_layer_info(const hm_converted_layer_t *layer,
                                           hm_converted_layer_info_t *info);

/* Converts every quantized layer of the safetensors file in_path that `scheme` recognizes and
 * writes out_path: per layer "<prefix>.weight", ".weight_scale", ".weight_zero_point",
 * ".global_scale", ".bias" and ".k_permutation" in the standard layout, and the layer's format
 * string in the header metadata under "humming.format.<prefix>" (docs/convert.md). Other tensors
 * are copied unchanged. Refuses (HM_ERROR_UNSUPPORTED) a file with quantized tensors it does not
 * understand, before writing anything. options may be NULL. */
/* The output is written to a new temporary file beside out_path and renamed over it when complete
 * (fsynced, then the directory), so readers never see a partial file and two conversions to one
 * path each publish a whole file. An out_path that names the input file (by device and inode:
 * another spelling, a hard link, a symlink) is HM_ERROR_INVALID_ARGUMENT; an in_path that is not
 * a regular file (a FIFO, a device) is HM_ERROR_IO, without blocking. */
HM_API hm_status_t hm_convert_file(const char *scheme, const char *in_path, const char *out_path,
                                   const hm_convert_options_t *options);

/* ---- Whole model folders ------------------------------------------------------------------ */

/* hm_convert_model_options_t.flags */
#define HM_CONVERT_MODEL_FORCE 1u   /* replace an existing out_dir (atomically where possible) */
#define HM_CONVERT_MODEL_DRY_RUN 2u /* plan and report every item; write nothing */
/* Experts stored one layer each (<base>.experts.<i>.<proj>, i = 0 .. E-1: GPTQ, AWQ,
 * compressed-tensors MoE checkpoints) written as one layer of E experts, <base>.experts.<proj>,
 * as hm_converted_layer_stack(HM_STACK_EXPERTS) joins them (docs/convert.md "Stacking experts"). */
#define HM_CONVERT_MODEL_STACK_EXPERTS 4u
/* With STACK_EXPERTS: gate_proj and up_proj (w1 and w3) of each stacked base joined by rows into
 * <base>.experts.gate_up_proj (w13), gate rows first, as the MoE GEMM and humming.torch.MoE take
 * them. Alone: refused (HM_ERROR_INVALID_ARGUMENT). */
#define HM_CONVERT_MODEL_JOIN_GATE_UP 8u

/* What a progress call is about (its `kind`). */
#define HM_CONVERT_EVENT_LAYER 1  /* a converted layer: name = its prefix, detail = scheme and
                                   * format string (dry run: the config's parameters) */
#define HM_CONVERT_EVENT_TENSOR 2 /* a tensor copied unchanged (detail NULL) */
#define HM_CONVERT_EVENT_FILE 3   /* a file or folder copied (tokenizer, generation config...) */

/* Called by hm_convert_model on the calling thread, in output order, after each item; done and
 * total count input bytes (checkpoint tensors plus copied files). The strings live for the
 * call. Return 0 to go on; anything else cancels: hm_convert_model then removes what it wrote
 * and returns HM_ERROR_INVALID_STATE. */
typedef int32_t (*hm_convert_model_progress_fn)(void *user_data, int32_t kind, const char *name,
                                                const char *detail, uint64_t done,
                                                uint64_t total);

typedef struct hm_convert_model_options {
  uint32_t struct_size;
  /* NULL: each layer's scheme comes from the folder's quantization config; else a scheme name
   * (hm_scheme_parse) that every layer is converted with. */
  const char *scheme;
  /* Overrides of what the config says, field by field; a field at its hm_convert_options_init
   * value leaves the config's choice; NULL: none. Its progress and cancel fields are not used. Borrowed
   * for the call. */
  const hm_convert_options_t *layer_options;
  uint32_t flags;  /* HM_CONVERT_MODEL_* */
  int32_t threads; /* layers converted at once; 0: every usable core */
  hm_convert_model_progress_fn progress; /* may be NULL */
  void *progress_user_data;
} hm_convert_model_options_t;
HM_API void hm_convert_model_options_init(hm_convert_model_options_t *options);
HM_API void hm_convert_model_options_init_sized(hm_convert_model_options_t *options, size_t size);

typedef struct hm_convert_model_summary {
  uint32_t struct_size;
  int32_t layers;     /* layers converted (dry run: that would be) */
  int32_t tensors;    /* tensors copied unchanged */
  int32_t files;      /* other files and folders copied */
  int32_t shards;     /* safetensors shards */
  uint64_t bytes_in;  /* checkpoint tensor bytes read */
  uint64_t bytes_out; /* tensor bytes written */
  double seconds;     /* wall time of the call */
} hm_convert_model_summary_t;
HM_API void hm_convert_model_summary_init(hm_convert_model_summary_t *summary);
HM_API void hm_convert_model_summary_init_sized(hm_convert_model_summary_t *summary, size_t size);

/* Converts a Hugging Face model folder in_dir (config.json with its quantization_config, or
 * quantize_config.json / hf_quant_config.json; model-0000X-of-0000Y.safetensors shards and
 * model.safetensors.index.json, or one model.safetensors) into out_dir: every shard converted
 * like hm_convert_file with each layer's scheme and parameters from the config, a new index,
 * a config.json whose quantization_config records each layer's format, and every other file
 * copied (docs/convert.md). out_dir is written atomically (a temporary folder next to it,
 * renamed at the end): on any failure or cancellation it is left as it was, and in_dir is never
 * modified. out_dir must not exist (unless HM_CONVERT_MODEL_FORCE) and must not overlap in_dir.
 * options and summary may be NULL; summary is filled on success. */
HM_API hm_status_t hm_convert_model(const char *in_dir, const char *out_dir,
                                    const hm_convert_model_options_t *options,
                                    hm_convert_model_summary_t *summary);

/* ---- Reading converted layers back -------------------------------------------------------- */

/* A folder written by hm_convert_model, or a file written by hm_convert_file, opened to read its
 * converted layers (docs/convert.md "Reading it back"): the shards (as hm_convert_model finds an
 * input's) are memory-mapped read-only and their headers listed; no tensor is read until a layer
 * is. Refused (HM_ERROR_INVALID_ARGUMENT) when it holds no converted layer or one layer twice;
 * HM_ERROR_IO / HM_ERROR_PARSE for what cannot be read. A model may be read from several
 * threads at once. */
typedef struct hm_stored_model hm_stored_model_t;
HM_API hm_status_t hm_stored_model_open(const char *path, hm_stored_model_t **out);
HM_API void hm_stored_model_destroy(hm_stored_model_t *model);
/* The converted layers, by name (their prefix, e.g. "model.layers.0.mlp.experts.gate_up_proj")
 * in sorted order; a name lives as long as the model. */
HM_API hm_status_t hm_stored_model_layer_count(const hm_stored_model_t *model, size_t *count);
HM_API hm_status_t hm_stored_model_layer_name(const hm_stored_model_t *model, size_t index,
                                              const char **name);

/* The format of converted layer `name` (a new copy: destroy it yourself), from the header alone:
 * no tensor is read, so listing a large model's formats is quick. */
HM_API hm_status_t hm_stored_model_layer_format(const hm_stored_model_t *model, const char *name,
                                                hm_format_t **out);

/* One converted layer, read: its buffers copied out of the file and checked against its format
 * (a missing, unexpected or wrongly sized tensor, or a K permutation that is none, is refused
 * with HM_ERROR_INVALID_ARGUMENT naming it). Owns its buffers. */
typedef struct hm_stored_layer hm_stored_layer_t;
HM_API hm_status_t hm_stored_model_read(const hm_stored_model_t *model, const char *name,
                                        hm_stored_layer_t **out);
HM_API void hm_stored_layer_destroy(hm_stored_layer_t *layer);
/* A new copy of the layer's format; destroy it yourself. */
HM_API hm_status_t hm_stored_layer_format(const hm_stored_layer_t *layer, hm_format_t **out);

/* Pointers into the layer's own buffers, valid until hm_stored_layer_destroy(). */
typedef struct hm_stored_layer_info {
  uint32_t struct_size;
  /* The standard layout (sizes from hm_format_packed_sizes of the layer's format): pass it
   * straight to hm_unpack, or upload it for hm_plan_gemm. */
  hm_packed_weight_t packed;
  const float *bias;            /* f32 [E][N], or NULL when the format has no bias */
  const int32_t *k_permutation; /* int32 [K], or NULL (as hm_converted_layer_info_t says) */
  const char *note;             /* what the conversion lost (NUL-terminated), or NULL */
} hm_stored_layer_info_t;
HM_API void hm_stored_layer_info_init(hm_stored_layer_info_t *info);
HM_API void hm_stored_layer_info_init_sized(hm_stored_layer_info_t *info, size_t size);
HM_API hm_status_t hm_stored_layer_info(const hm_stored_layer_t *layer,
                                        hm_stored_layer_info_t *info);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HUMMING_H_ */
