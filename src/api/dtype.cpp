// hm_dtype_*: the C face of core::Dtype.
#include <string>

#include "api/guard.hpp"
#include "core/dtype.hpp"

using hm::core::Dtype;

extern "C" {

HM_API hm_status_t hm_dtype_parse(const char* name, hm_dtype_t* out) {
  if (out != nullptr) *out = HM_DTYPE_NONE;
  return HM_API_CALL({
    hm::api::require_not_null(name, "name");
    hm::api::require_not_null(out, "out");
    *out = Dtype::parse(name).code();
  });
}

HM_API hm_status_t hm_dtype_name(hm_dtype_t dtype, char* buf, size_t size, size_t* length) {
  return HM_API_CALL(hm::api::copy_out_string(Dtype::from_code(dtype).name(), buf, size, length));
}

HM_API hm_status_t hm_dtype_decode(hm_dtype_t dtype, uint32_t code, double* value) {
  return HM_API_CALL({
    hm::api::require_not_null(value, "value");
    const Dtype d = Dtype::from_code(dtype);
    HM_REQUIRE(!d.is_none() && (d.bits() <= 8 || d.bits() == 16), HM_ERROR_INVALID_ARGUMENT,
               "hm_dtype_decode takes dtypes of at most 8 bits, f16 or bf16, not " + d.name());
    *value = d.decode(code);
  });
}

HM_API hm_status_t hm_dtype_encode(hm_dtype_t dtype, double value, uint32_t* code) {
  return HM_API_CALL({
    hm::api::require_not_null(code, "code");
    *code = Dtype::from_code(dtype).encode(value);
  });
}

}  // extern "C"
