// The hm_format_t handle: a C-visible box around hm::core::Format. Other API files (quantize,
// pack, plans) reach the format of a handle through format_of(), which checks for NULL.
#pragma once

#include "core/format.hpp"
#include "humming.h"

struct hm_format {
  hm::core::Format value;
};

namespace hm::api {

// The format behind `format`; throws HM_ERROR_INVALID_ARGUMENT naming `name` when it is NULL.
const core::Format& format_of(const hm_format_t* format, const char* name = "format");

}  // namespace hm::api
