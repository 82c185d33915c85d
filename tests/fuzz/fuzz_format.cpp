// Fuzz target: the format and dtype parsers (hm_format_parse, hm_dtype_parse, hm_scheme_parse)
// and what follows a successful parse: the printed string parses back to the same format,
// validation and the size queries return a status (never crash), and a validated format has
// sizes (the limits of humming.h keep them within int64).
#include <string>

#include "fuzz_target.hpp"
#include "humming.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  hm_dtype_t dtype = 0;
  if (hm_dtype_parse(text.c_str(), &dtype) == HM_SUCCESS) {
    char name[64];
    HM_FUZZ_CHECK(hm_dtype_name(dtype, name, sizeof name, nullptr) == HM_SUCCESS, "dtype name");
    hm_dtype_t again = 0;
    HM_FUZZ_CHECK(hm_dtype_parse(name, &again) == HM_SUCCESS && again == dtype, "dtype round trip");
  }
  int32_t scheme = 0;
  (void)hm_scheme_parse(text.c_str(), &scheme);

  hm_format_t* f = nullptr;
  if (hm_format_parse(text.c_str(), &f) != HM_SUCCESS) {
    HM_FUZZ_CHECK(f == nullptr, "a failed parse left a handle");
    return 0;
  }
  size_t length = 0;
  hm_format_to_string(f, nullptr, 0, &length);
  std::string printed(length, '\0');
  HM_FUZZ_CHECK(hm_format_to_string(f, &printed[0], length + 1, nullptr) == HM_SUCCESS, "print");
  hm_format_t* back = nullptr;
  HM_FUZZ_CHECK(hm_format_parse(printed.c_str(), &back) == HM_SUCCESS, "printed format parses");
  HM_FUZZ_CHECK(hm_format_equal(f, back) == 1, "printed format parses to the same format");
  hm_format_destroy(back);

  const bool valid = hm_format_validate(f, nullptr) == HM_SUCCESS;
  (void)hm_format_validate(f, "sm_90a");
  hm_canonical_sizes_t c;
  hm_canonical_sizes_init(&c);
  const hm_status_t cs = hm_format_canonical_sizes(f, &c);
  hm_packed_sizes_t p;
  hm_packed_sizes_init(&p);
  const hm_status_t ps = hm_format_packed_sizes(f, &p);
  // The size limits are validation rules (R2): a valid format never fails a size query for its
  // shape (unquantized weights have no canonical codes: HM_ERROR_UNSUPPORTED_FORMAT).
  if (valid)
    HM_FUZZ_CHECK(cs != HM_ERROR_INVALID_ARGUMENT && ps != HM_ERROR_INVALID_ARGUMENT,
                  "a valid format has sizes");
  if (cs == HM_SUCCESS) HM_FUZZ_CHECK(c.codes < (uint64_t{1} << 63), "canonical sizes fit int64");
  if (ps == HM_SUCCESS) HM_FUZZ_CHECK(p.weight < (uint64_t{1} << 63), "packed sizes fit int64");
  hm_format_destroy(f);
  return 0;
}
