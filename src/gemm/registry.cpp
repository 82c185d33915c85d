// The kernel-family registry: one line per family, in the order a plan prefers them (the first
// family that runs a format gives its default tiles). A family is its device template under
// kernels/humming/gemm/ and its host file under src/gemm/ (family.hpp; docs/families.md).
#include "gemm/dense_family.hpp"
#include "gemm/family.hpp"
#include "gemm/moe_family.hpp"

namespace hm::gemm {

const std::vector<const Family*>& families() {
  static const std::vector<const Family*> kFamilies = {
      &dense_wgmma_family(),
      &dense_mma_family(),
      &moe_wgmma_family(),
      &moe_mma_family(),
  };
  return kFamilies;
}

}  // namespace hm::gemm
