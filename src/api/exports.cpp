// libhumming.so is humming_core linked whole (see CMakeLists.txt); the exported surface is exactly
// the hm_* functions of include/humming.h, enforced by cmake/humming.map and by the
// `exports_only_hm` test. This file only pins ABI facts that must never change silently.
#include <cstddef>

#include "humming.h"

static_assert(sizeof(hm_status_t) == 4, "hm_status_t is int32_t in the ABI");
static_assert(sizeof(hm_dtype_t) == 4, "hm_dtype_t is uint32_t in the ABI");
static_assert(offsetof(hm_context_options_t, struct_size) == 0, "struct_size comes first");
static_assert(offsetof(hm_device_info_t, struct_size) == 0, "struct_size comes first");
static_assert(offsetof(hm_runtime_info_t, struct_size) == 0, "struct_size comes first");
static_assert(offsetof(hm_canonical_sizes_t, struct_size) == 0, "struct_size comes first");
static_assert(offsetof(hm_packed_sizes_t, struct_size) == 0, "struct_size comes first");
static_assert(offsetof(hm_canonical_weight_t, struct_size) == 0, "struct_size comes first");
static_assert(offsetof(hm_packed_weight_t, struct_size) == 0, "struct_size comes first");
