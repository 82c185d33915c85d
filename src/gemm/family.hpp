// The kernel families: each is one device template under kernels/humming/gemm/ and its host side
// (what it covers, its tiles, its code generation). The registry is the one list of them, asked
// by hm_plan_create (refuse what no family runs, naming why), by the support matrix's "kernels"
// lines and by `humming support --format`, so none of them can claim a kernel that is not there.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/arch.hpp"
#include "core/format.hpp"

namespace hm::gemm {

// A family's device template is kernels/humming/gemm/<name>.cuh.
struct Family {
  const char* name;  // "dense_mma": also the prefix of its kernels' entry names
  // Why the family cannot run `format` (valid for `arch`) on `arch`, or "" when it can.
  std::string (*gap)(const core::Format& format, const core::Arch& arch);
};

// Every family, in the order a plan prefers them.
const std::vector<Family>& families();

// The families that run `format` on `arch` (the format valid there).
std::vector<const Family*> families_for(const core::Format& format, const core::Arch& arch);

// The names of the families that run `format` on `arch`, in registry order (the support
// matrix's core::KernelFamiliesOf).
std::vector<std::string> family_names(const core::Format& format, const core::Arch& arch);

// The names of the families that run `format` (validated first) on `arch`, or with no arch on
// any target where the format is valid; throws HM_ERROR_UNSUPPORTED naming why when none does
// (hm_format_kernels).
std::vector<std::string> families_running(const core::Format& format,
                                          const std::optional<core::Arch>& arch);

// "" when some family runs `format` on `arch`; else one sentence per family saying why not.
std::string kernel_gap(const core::Format& format, const core::Arch& arch);

// Throws HM_ERROR_UNSUPPORTED with kernel_gap's reasons when no family runs the format.
void require_kernel(const core::Format& format, const core::Arch& arch);

}  // namespace hm::gemm
