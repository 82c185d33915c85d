// hm_X_init_sized for every option and info struct of include/humming.h: initialization by the
// caller's own struct size, so that a library newer than the caller's header (whose structs may
// have grown) never writes past the caller's struct.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "humming.h"

// The caller's struct is `size` bytes (its sizeof *p), which may be smaller than this library's
// (a caller built against an older header) or larger (a newer one). All of it is zeroed (fields
// this library does not know start at zero, which is what a field added later defaults to), the
// library's defaults are copied over the part both know, and struct_size says the caller's size.
// A size too small to hold struct_size writes nothing; a size below the first released layout
// is written as given and refused by the call that reads the struct (HM_ERROR_INVALID_STRUCT_SIZE).
namespace {

template <class T>
void init_sized(T* p, size_t size, void (*init)(T*)) {
  if (p == nullptr || size < sizeof(uint32_t)) return;
  T defaults;
  init(&defaults);
  const uint32_t declared = size > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(size);
  defaults.struct_size = declared;
  std::memset(p, 0, size);
  std::memcpy(p, &defaults, size < sizeof defaults ? size : sizeof defaults);
}

}  // namespace

#define HM_DEFINE_INIT_SIZED(X) \
  HM_API void X##_init_sized(X##_t* p, size_t size) { init_sized(p, size, &X##_init); }
HM_DEFINE_INIT_SIZED(hm_canonical_sizes)
HM_DEFINE_INIT_SIZED(hm_packed_sizes)
HM_DEFINE_INIT_SIZED(hm_canonical_weight)
HM_DEFINE_INIT_SIZED(hm_packed_weight)
HM_DEFINE_INIT_SIZED(hm_context_options)
HM_DEFINE_INIT_SIZED(hm_device_info)
HM_DEFINE_INIT_SIZED(hm_runtime_info)
HM_DEFINE_INIT_SIZED(hm_plan_options)
HM_DEFINE_INIT_SIZED(hm_device_canonical)
HM_DEFINE_INIT_SIZED(hm_device_packed)
HM_DEFINE_INIT_SIZED(hm_activation_quant_args)
HM_DEFINE_INIT_SIZED(hm_moe_routing)
HM_DEFINE_INIT_SIZED(hm_moe_align_sizes)
HM_DEFINE_INIT_SIZED(hm_moe_align_out)
HM_DEFINE_INIT_SIZED(hm_moe_reduce_args)
HM_DEFINE_INIT_SIZED(hm_checkpoint_tensor)
HM_DEFINE_INIT_SIZED(hm_convert_options)
HM_DEFINE_INIT_SIZED(hm_converted_layer_info)
HM_DEFINE_INIT_SIZED(hm_convert_model_options)
HM_DEFINE_INIT_SIZED(hm_convert_model_summary)
HM_DEFINE_INIT_SIZED(hm_stored_layer_info)
#undef HM_DEFINE_INIT_SIZED
