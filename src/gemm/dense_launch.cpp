#include "gemm/dense_launch.hpp"

#include <cstring>

#include "core/error.hpp"
#include "core/support.hpp"
#include "runtime/launch.hpp"
#include "runtime/tensor_map.hpp"

namespace hm::gemm {
namespace {

// The TMA descriptors of a wgmma tile that copies with TMA (gemm/dense_wgmma.cuh): activations
// [m][k] in boxes of [block_m][one K step] (128 bytes: 64 16-bit or 128 8-bit values) with the
// 128B swizzle the wgmma descriptor reads; the weight as [strips][k_chunks * chunk words] of
// 32-bit words in boxes of one K step's chunks of each of the tile's strips (docs/layout.md: a
// strip's chunks are contiguous; a last step past them arrives as zeros); the codes below. With
// experts (the MoE family) the weight and code maps cover all of them, expert after expert
// ([E * strips] and [E * groups] rows: the kernel adds the expert's first row), and there is no
// activation map: the copying warp gathers the routed rows of A with cp.async.
void encode_tma(const runtime::Device& device, runtime::TensorMapCache* maps, const core::Format& f,
                const tune::DenseTile& tile, const quant::PackedShape& shape,
                gemm::DenseParams& p) {
  static_assert(sizeof(gemm::DenseParams::TensorMap) == sizeof(runtime::CUtensorMap));
  // Through the calling plan's cache of this kernel's maps: a map whose inputs have not changed
  // since an earlier call is copied, not encoded again.
  auto encode = [&](const runtime::TensorMap2d& tensor, gemm::DenseParams::TensorMap& out,
                    const char* what) {
    runtime::CUtensorMap map;
    runtime::encode_tensor_map(device, maps, tensor, &map, what);
    std::memcpy(&out, &map, sizeof map);
  };
  const uint64_t experts = static_cast<uint64_t>(f.experts > 1 ? f.experts : 1);
  const int act_bytes = f.activation.bits() / 8;
  if (experts == 1)
    encode({p.a, act_bytes, static_cast<uint64_t>(p.m), static_cast<uint64_t>(f.k),
            static_cast<uint64_t>(f.k) * act_bytes, static_cast<uint32_t>(tile.block_m),
            static_cast<uint32_t>(tune::dense_k_step(f)), true},
           p.tma_a, "HM_ARG_A");
  const uint64_t chunk_bytes = static_cast<uint64_t>(quant::chunk_bytes(f.weight.bits()));
  const uint64_t k_chunks = static_cast<uint64_t>(shape.k_padded) / quant::kChunkK;
  const uint64_t step_chunks =
      static_cast<uint64_t>(gemm::dense_step_chunks(f.activation.bits()));
  const int w_bytes = gemm::dense_wgmma_weight_tma_bytes(
      static_cast<int>(step_chunks) * f.weight.bits());  // 4, or 8 for wide steps
  encode({p.w, w_bytes, experts * static_cast<uint64_t>(shape.n_padded) / 16,
          k_chunks * chunk_bytes / w_bytes, k_chunks * chunk_bytes,
          static_cast<uint32_t>(tile.warps), static_cast<uint32_t>(step_chunks * chunk_bytes / w_bytes),
          false},
         p.tma_w, "HM_ARG_B");
  // Scale and zero-point codes [groups][columns], in boxes of [slots][block channels], when a
  // step's slots are consecutive group rows (the kernel asks the same question).
  const int group_k = f.has_group_scales() ? f.group_k : 0;
  const int step_k = gemm::dense_step_k(f.activation.bits());
  if (!gemm::dense_group_slots_consecutive(group_k, step_k)) return;
  auto encode_codes = [&](const void* codes, int bytes, gemm::DenseParams::TensorMap& out,
                          const char* what) {
    encode({codes, bytes, experts * static_cast<uint64_t>(shape.groups),
            static_cast<uint64_t>(shape.scale_columns),
            static_cast<uint64_t>(shape.scale_columns) * bytes,
            static_cast<uint32_t>(gemm::dense_group_slots(group_k, step_k)),
            static_cast<uint32_t>(tile.block_n()), false},
           out, what);
  };
  if (p.scales != nullptr && tune::wgmma_stages_scale_codes(f))
    encode_codes(p.scales, shape.scale_element_bytes, p.tma_s, "HM_ARG_SCALES");
  if (p.zeros != nullptr)
    encode_codes(p.zeros, shape.zero_point_element_bytes, p.tma_z, "HM_ARG_ZEROS");
}

}  // namespace

// docs/activations.md says what each part means.
std::string describe_activation_path(const core::Format& f) {
  if (f.activation.bits() != 8) return "";
  const std::string groups = std::to_string(f.act_group_k);
  std::string path = "; " + f.activation.name() + " activations with per-token" +
                     (f.act_group_k > 0
                          ? " x " + groups + "-k group scales folded in f32 every " + groups + " k"
                          : " scales");
  const bool int8_steps = f.activation.code() == HM_DTYPE_INT8 && f.weight.is_float();
  if (int8_steps)
    path += ", " + f.weight.name() + " weights as int8 counts of their least step";
  if (const auto window = core::scale_exponent_window(f))
    path += ", ue8m0 group scales (2^" + std::to_string(window->lo) + " .. 2^" +
            std::to_string(window->hi) + ") written into the weights' " +
            (int8_steps ? "step counts (shifts)" : "exponents") + " every " +
            std::to_string(f.group_k) + " k";
  else if (f.has_group_scales())
    path += ", " + std::string(f.scale_kind == core::ScaleKind::kBlock ? "block" : "group") +
            " scales folded in f32 every " + std::to_string(f.group_k) + " k";

  return path;
}

DenseGeometry dense_geometry(const tune::DenseTile& tile, const core::Format& f,
                             const quant::PackedShape& shape, int64_t m, int multiprocessors) {
  DenseGeometry g{tune::plan_dense_launch(tile, f, m, shape.n_padded, shape.k_padded,
                                          multiprocessors),
                  0};
  g.workspace_bytes = tune::dense_workspace_bytes(g.launch, m, shape.n_padded);
  return g;
}

std::string describe_dense(const tune::DenseTile& tile, const core::Format& f,
                           const DenseGeometry& g, bool aligned_k) {
  const tune::DenseLaunch& launch = g.launch;
  return tile.name() + (aligned_k ? "" : " unaligned-k") + " grid " +
         std::to_string(launch.grid_x) + "x" + std::to_string(launch.grid_y) + "x" +
         std::to_string(launch.splits) + (launch.cluster ? " (cluster split-K " : " (split-K ") +
         std::to_string(launch.splits) + " x " + std::to_string(launch.k_chunks_per_split) +
         " K steps of " + std::to_string(tune::dense_k_step(f)) + "), workspace " +
         std::to_string(g.workspace_bytes) + " bytes" + describe_activation_path(f);
}

void launch_dense(const runtime::Device& device, runtime::CUfunction function,
                  const std::string& entry, const core::Format& f,
                  const quant::PackedShape& shape, const tune::DenseTile& tile,
                  const DenseGeometry& g, DenseParams& p, uint64_t workspace, int64_t m,
                  runtime::CUstream stream, runtime::TensorMapCache* maps) {
  const tune::DenseLaunch& launch = g.launch;
  if (launch.grid_y > 65535)
    fail(HM_ERROR_UNSUPPORTED, "M = " + std::to_string(m) + " needs more than 65535 token blocks");
  if (g.workspace_bytes > 0) {
    // The layout of tune/dense.hpp: counters at a fixed place first, then the f32 partials.
    p.counters = reinterpret_cast<int32_t*>(workspace);
    p.partials = reinterpret_cast<float*>(workspace + tune::kSplitCounterBytes);
  }
  p.m = m;
  p.n = f.n;
  p.k = f.k;
  p.n_pad = shape.n_padded;
  p.k_pad = shape.k_padded;
  p.scale_cols = shape.scale_columns;
  p.k_chunks_per_split = launch.k_chunks_per_split;
  p.splits = launch.splits;
  if (tile.tma) encode_tma(device, maps, f, tile, shape, p);
  void* args[] = {&p};
  const runtime::Dim3 grid{static_cast<uint32_t>(launch.grid_x),
                           static_cast<uint32_t>(launch.grid_y),
                           static_cast<uint32_t>(launch.splits)};
  const runtime::Dim3 block{launch.threads, 1, 1};
  // The wgmma kernel waits for the previous kernel on the stream itself (gemm/dense_wgmma.cuh),
  // so it can be launched programmatically: its blocks start as that kernel's blocks exit,
  // about 1 us sooner than in stream order (NOTES v30). mma.sync kernels do not wait.
  const runtime::Order order = tile.kernel == tune::DenseKernel::kWgmma
                                   ? runtime::Order::kProgrammatic
                                   : runtime::Order::kStream;
  if (launch.cluster)
    runtime::launch_with_cluster(device, function, grid, block, runtime::Dim3{1, 1, grid.z},
                                 launch.smem_bytes, stream, args, entry.c_str(), order);
  else
    runtime::launch(device, function, grid, block, launch.smem_bytes, stream, args,
                    entry.c_str(), order);
}

}  // namespace hm::gemm
