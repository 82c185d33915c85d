/* Compiled as strict C99 with every warning an error (tests/api/tests.cmake): the public header
 * must stay usable from C, and from the FFI generators (bindgen, cgo, SWIG) that parse it as C. */
#include "humming.h"

int main(void) {
  hm_context_options_t options;
  hm_context_options_init(&options);
  hm_dtype_t dtype = HM_DTYPE_E4M3;
  (void)dtype;
  return HM_STATUS_CATEGORY(HM_ERROR_PARSE) == HM_ERROR_INVALID_ARGUMENT ? 0 : 1;
}
