// Architecture naming for the runtime. The one definition of Arch, its parser and the native
// target of a compute capability lives in core/arch.hpp (the support rules use it too); the
// runtime names devices with it.
#pragma once

#include <string>

#include "core/arch.hpp"

namespace hm::runtime {

using core::Arch;
using core::native_arch;
using core::parse_arch;

// "sm_90a" for 9.0, "sm_100a", "sm_103a", "sm_110a", "sm_120a", "sm_121a"; plain "sm_75",
// "sm_80", "sm_86", "sm_89" (and any unknown future arch) for the rest.
inline std::string arch_for_compute_capability(int cc_major, int cc_minor) {
  return core::native_arch(cc_major, cc_minor).name();
}

}  // namespace hm::runtime
