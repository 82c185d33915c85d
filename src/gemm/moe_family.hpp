// The MoE GEMM families (moe_family.cpp) and the routing arithmetic they share with the plan API
// and the routing helpers.
#pragma once

#include <cstdint>

#include "gemm/family.hpp"

namespace hm::gemm {

const Family& moe_wgmma_family();  // MoE on the sm_90a wgmma kernel (gemm/sched.cuh)
const Family& moe_mma_family();    // MoE on the mma.sync kernel, every arch from sm_75

// The slots of HM_ARG_SORTED_IDS a call with m tokens, top_k experts each and `experts` local
// experts can fill when each expert's run is padded to `block` rows: every assignment plus at
// most block - 1 padding per expert, rounded to whole blocks.
int64_t moe_rows(int64_t m, int64_t top_k, int64_t experts, int64_t block);

// The M whose range (tile) a MoE call of HM_ARG_MOE_MODE `mode` and HM_ARG_M = m runs. The
// default ranges count tokens at top-8 (about 8 * M / E rows per expert), so the grouped modes
// ask for the tokens that would give their rows per expert: contiguous, m rows -> m / 8;
// masked, up to T_max = m rows per expert -> m * E / 8 (in [1, HM_MAX_M]). Indexed: m.
int64_t moe_tile_m(int64_t mode, int64_t m, int64_t experts);

}  // namespace hm::gemm
