// The indexed MoE GEMM family (moe_family.cpp) and the routing arithmetic it shares with the
// plan API and the routing helpers.
#pragma once

#include <cstdint>

#include "gemm/family.hpp"

namespace hm::gemm {

const Family& moe_wgmma_family();  // indexed MoE on the sm_90a wgmma kernel (gemm/sched.cuh)

// The slots of HM_ARG_SORTED_IDS a call with m tokens, top_k experts each and `experts` local
// experts can fill when each expert's run is padded to `block` rows: every assignment plus at
// most block - 1 padding per expert, rounded to whole blocks.
int64_t moe_rows(int64_t m, int64_t top_k, int64_t experts, int64_t block);

}  // namespace hm::gemm
