// The dense GEMM families (dense_family.cpp): 16-bit activations times quantized weights.
#pragma once

#include "gemm/family.hpp"

namespace hm::gemm {

const Family& dense_wgmma_family();  // sm_90a warpgroup MMA (gemm/dense_wgmma.cuh)
const Family& dense_mma_family();    // mma.sync, every arch from sm_75 (gemm/dense_mma.cuh)

}  // namespace hm::gemm
