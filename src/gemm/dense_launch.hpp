// The dense families' host side at call time: from a tile, a format and M to the kernel's
// parameters (shapes, K splits, the split-K workspace layout, TMA tensor maps) and the launch
// (grid, cluster, shared memory). The API layer checks the caller's arguments and hands them
// here; this file owns how the kernels of gemm/dense_mma.cuh and gemm/dense_wgmma.cuh are fed.
#pragma once

#include <cstdint>
#include <string>

#include "core/format.hpp"
#include "quant/layout.hpp"
#include "runtime/device.hpp"
#include "runtime/driver_types.hpp"
#include "runtime/tensor_map.hpp"
#include "tune/dense.hpp"
#include <humming/gemm/params.h>

namespace hm::gemm {

// The geometry of a call: grid, K splits, threads, shared memory (tune::plan_dense_launch), and
// the workspace it needs (0 without split-K or with cluster split-K).
struct DenseGeometry {
  tune::DenseLaunch launch;
  uint64_t workspace_bytes;
};
DenseGeometry dense_geometry(const tune::DenseTile& tile, const core::Format& format,
                             const quant::PackedShape& shape, int64_t m, int multiprocessors);

// "wg_bm16_w4_st8_b4_mb_tma_pw_cs grid 64x1x8 (cluster split-K 8 x 8 K steps of 64), workspace
// 0 bytes" (hm_plan_describe, after the family's name), and for 8-bit activations the path
// ("; e4m3 activations with per-token scales, group scales folded in f32 every 128 k").
std::string describe_dense(const tune::DenseTile& tile, const core::Format& format,
                           const DenseGeometry& geometry, bool aligned_k);

// What the 8-bit path adds to a description ("; e4m3 activations with per-token scales, ..."),
// "" for 16-bit activations: describe_dense's tail, and the MoE family's.
std::string describe_activation_path(const core::Format& format);

// Completes `p` (whose tensor pointers the caller has set and checked) for M = m and launches
// `function` on `stream`: shapes, splits, the workspace's counters and partials (at `workspace`,
// at least geometry.workspace_bytes, 16-byte aligned), the TMA maps of a TMA tile (through
// `maps`, the kernel's cache, when not null).
void launch_dense(const runtime::Device& device, runtime::CUfunction function,
                  const std::string& entry, const core::Format& format,
                  const quant::PackedShape& shape, const tune::DenseTile& tile,
                  const DenseGeometry& geometry, DenseParams& p, uint64_t workspace, int64_t m,
                  runtime::CUstream stream, runtime::TensorMapCache* maps);

}  // namespace hm::gemm
