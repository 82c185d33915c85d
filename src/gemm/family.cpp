#include "gemm/family.hpp"

#include <algorithm>
#include <utility>

#include "core/error.hpp"
#include "core/support.hpp"
#include "jit/codegen.hpp"
#include "tune/dense.hpp"

namespace hm::gemm {
namespace {

std::string dense_mma_gap(const core::Format& f, const core::Arch& arch) {
  return jit::dense_gemm_gap(f, tune::DenseKernel::kMma, arch);
}

std::string dense_wgmma_gap(const core::Format& f, const core::Arch& arch) {
  return jit::dense_gemm_gap(f, tune::DenseKernel::kWgmma, arch);
}

}  // namespace

const std::vector<Family>& families() {
  static const std::vector<Family> kFamilies = {
      {tune::dense_family_name(tune::DenseKernel::kWgmma), dense_wgmma_gap},
      {tune::dense_family_name(tune::DenseKernel::kMma), dense_mma_gap},
  };
  return kFamilies;
}

std::vector<const Family*> families_for(const core::Format& f, const core::Arch& arch) {
  std::vector<const Family*> out;
  for (const Family& family : families())
    if (family.gap(f, arch).empty()) out.push_back(&family);
  return out;
}

std::vector<std::string> family_names(const core::Format& f, const core::Arch& arch) {
  std::vector<std::string> names;
  for (const Family* family : families_for(f, arch)) names.push_back(family->name);
  return names;
}

std::vector<std::string> families_running(const core::Format& f,
                                          const std::optional<core::Arch>& arch) {
  core::validate(f, arch);
  if (arch) {
    require_kernel(f, *arch);
    return family_names(f, *arch);
  }
  // Any target where the format is valid, families in registry order.
  std::vector<std::string> names;
  std::optional<core::Arch> first_valid;
  for (const Family& family : families()) {
    for (const core::Arch& a : core::known_archs()) {
      if (!core::check(f, a).empty()) continue;
      if (!first_valid) first_valid = a;
      if (family.gap(f, a).empty()) {
        names.push_back(family.name);
        break;
      }
    }
  }
  if (names.empty() && first_valid) require_kernel(f, *first_valid);
  return names;
}

std::string kernel_gap(const core::Format& f, const core::Arch& arch) {
  // Families built on one template often give the same reason: each reason once, after the
  // names of the families that gave it.
  std::vector<std::pair<std::string, std::string>> reasons;  // (names, reason)
  for (const Family& family : families()) {
    const std::string gap = family.gap(f, arch);
    if (gap.empty()) return "";
    auto same = std::find_if(reasons.begin(), reasons.end(),
                             [&](const auto& r) { return r.second == gap; });
    if (same == reasons.end()) reasons.emplace_back(family.name, gap);
    else same->first += std::string(", ") + family.name;
  }
  std::string why;
  for (const auto& [names, reason] : reasons) why += (why.empty() ? "" : "; ") + names + ": " + reason;
  return why;
}

void require_kernel(const core::Format& f, const core::Arch& arch) {
  const std::string gap = kernel_gap(f, arch);
  if (!gap.empty())
    fail(HM_ERROR_UNSUPPORTED, "no kernel runs " + f.to_string() + " on " + arch.name() +
                                   " (the format is valid; its kernel is not written yet): " + gap);
}

}  // namespace hm::gemm
