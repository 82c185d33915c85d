// The two dense families, dense_wgmma (gemm/dense_wgmma.cuh, sm_90a) and dense_mma
// (gemm/dense_mma.cuh, every arch from sm_75): one class, since they share the tile struct and
// its tuning keys (tune/dense), the generated Config (jit::dense_gemm_kernel), the split-K
// epilogue and its workspace, and the launcher (dense_launch.cpp).
#include "gemm/dense_family.hpp"

#include <algorithm>
#include <string>

#include "api/context.hpp"  // hm_launch_params (the C ABI's argument slots)
#include "core/address.hpp"
#include "core/checked.hpp"
#include "core/error.hpp"
#include "jit/codegen.hpp"
#include "runtime/launch.hpp"

namespace hm::gemm {
namespace {

// Activation rows load in 16-byte units (K % 8 == 0 for 16-bit activations, K % 16 == 0 for
// 8-bit): the wgmma kernel needs it; the mma.sync kernel has a variant without.
bool aligned_k(const Layer& layer) { return tune::rows_in_16_byte_units(layer.format); }

}  // namespace

bool DenseTileOf::same(const Tile& other) const {
  const auto* o = dynamic_cast<const DenseTileOf*>(&other);
  return o != nullptr && o->tile == tile;
}

const tune::DenseTile& dense_tile(const Tile& tile) {
  return static_cast<const DenseTileOf&>(tile).tile;
}

const char* DenseFamily::name() const { return tune::dense_family_name(kernel_); }

const char* DenseFamily::tuning_name() const {
  return kernel_ == tune::DenseKernel::kWgmma ? "wgmma" : "mma";
}

std::string DenseFamily::gap(const core::Format& f, const core::Arch& arch) const {
  return jit::dense_gemm_gap(f, kernel_, arch);
}

std::vector<std::pair<int64_t, std::shared_ptr<const Tile>>> DenseFamily::default_tiles(
    const Layer& layer) const {
  std::vector<std::pair<int64_t, std::shared_ptr<const Tile>>> out;
  for (const auto& r : tune::default_dense_ranges(layer.format, layer.arch, kernel_))
    out.emplace_back(r.max_m, std::make_shared<DenseTileOf>(r.tile));
  return out;
}

std::shared_ptr<const Tile> DenseFamily::parse_tile(const nlohmann::json& entry,
                                                    const std::string& where) const {
  return std::make_shared<DenseTileOf>(tune::parse_dense_tile(entry, kernel_, where));
}

void DenseFamily::check_tile(const Tile& tile, const Layer& layer) const {
  tune::check_dense_tile(dense_tile(tile), layer.format);
}

jit::GeneratedKernel DenseFamily::generate(const Tile& tile, const Layer& layer) const {
  return jit::dense_gemm_kernel(layer.format, dense_tile(tile), aligned_k(layer),
                                layer.arch_name);
}

void DenseFamily::check_cluster_fits(const tune::DenseTile& tile, const Layer& layer,
                                     runtime::CUfunction function, const std::string& entry,
                                     const tune::DenseLaunch& launch, const std::string& when,
                                     const std::string& way_out) {
  const runtime::Dim3 cluster{1, 1, static_cast<uint32_t>(launch.splits)};
  const int fit = runtime::max_active_clusters(
      *layer.device, function, runtime::Dim3{static_cast<uint32_t>(launch.grid_x), 1, cluster.z},
      runtime::Dim3{launch.threads, 1, 1}, cluster, launch.smem_bytes, entry.c_str());
  if (fit == 0)
    fail(HM_ERROR_UNSUPPORTED,
         "tile " + tile.name() + " splits K over clusters of " + std::to_string(launch.splits) +
             " blocks (" + when + ", " + std::to_string(launch.threads) + " threads and " +
             std::to_string(launch.smem_bytes) + " bytes of shared memory each), which device " +
             std::to_string(layer.device->ordinal()) + " cannot run at once; " + way_out);
}

void DenseFamily::check_loaded(const Tile& generic, const Layer& layer,
                               runtime::CUfunction function, const std::string& entry,
                               int64_t lo, int64_t hi) const {
  const tune::DenseTile& tile = dense_tile(generic);
  if (layer.device == nullptr) return;
  check_shared_memory(tile, layer, function, entry);
  if (!tile.cluster_split) return;
  int checked = 0;  // the cluster sizes already checked, as a bit set
  // Splits only shrink as token blocks are added: walk them until there is no split left.
  for (int64_t y = (lo + tile.block_m - 1) / tile.block_m; y * tile.block_m - tile.block_m < hi;
       ++y) {
    const int64_t m = std::min(hi, y * tile.block_m);
    const auto launch = tune::plan_dense_launch(tile, layer.format, m, layer.shape.n_padded,
                                                layer.shape.k_padded, layer.multiprocessors);
    if (launch.splits <= 1) break;
    if (!launch.cluster || (checked >> launch.splits & 1)) continue;
    checked |= 1 << launch.splits;
    check_cluster_fits(tile, layer, function, entry, launch, "M = " + std::to_string(m),
                       "use \"split\": \"global\" for this range");
  }
}

void DenseFamily::check_shared_memory(const tune::DenseTile& tile, const Layer& layer,
                                      runtime::CUfunction function, const std::string& entry) {
  // The tile and format decide the bytes; M does not (plan_dense_launch).
  const uint32_t bytes = tune::plan_dense_launch(tile, layer.format, 1, layer.shape.n_padded,
                                                 layer.shape.k_padded, layer.multiprocessors)
                             .smem_bytes;
  const runtime::Device& device = *layer.device;
  const int64_t allowed = device.properties().smem_per_block_optin;
  if (allowed > 0 && bytes > allowed)
    fail(HM_ERROR_UNSUPPORTED,
         "the tile " + tile.name() + " (" + entry + ") needs " + std::to_string(bytes) +
             " bytes of shared memory per block; device " + std::to_string(device.ordinal()) +
             " (" + device.properties().name + ") allows " + std::to_string(allowed) +
             ": use a tuning entry with fewer stages or a smaller tile for this range");
  if (bytes > runtime::kDefaultDynamicSharedBytes)
    device.ensure_dynamic_shared_memory(function, bytes);
}

DenseGeometry DenseFamily::geometry(const Tile& tile, const Layer& layer, int64_t m) const {
  return dense_geometry(dense_tile(tile), layer.format, layer.shape, m, layer.multiprocessors);
}

uint64_t DenseFamily::workspace_bytes(const Tile& tile, const Layer& layer, int64_t lo,
                                      int64_t hi) const {
  uint64_t most = 0;
  for (int64_t m = lo; m <= hi; ++m) {
    const auto g = geometry(tile, layer, m);
    if (g.launch.splits <= 1 && m > 4096) break;  // larger M never splits K (more tiles)
    most = std::max(most, g.workspace_bytes);
  }
  return most;
}

void DenseFamily::extents(const Tile& tile, const Layer& layer, const hm_launch_params& params,
                          int64_t m, uint64_t* bytes) const {
  const core::Format& f = layer.format;
  const quant::PackedShape& s = layer.shape;
  // The slot and alignment checks first: a misaligned or stray pointer is named as such, not as
  // a short buffer (launch repeats them, a few comparisons).
  DenseParams checked{};
  marshal(layer, params, f.experts >= 2, checked);
  std::fill(bytes, bytes + hm_launch_params::kNamedPointerSlots, uint64_t{0});
  // Saturating products: no allocation holds 2^64 bytes, so the check refuses such a call.
  using core::saturating_product;
  const uint64_t experts = static_cast<uint64_t>(std::max(f.experts, 1));
  const int64_t mode = f.experts >= 2 ? params.integer(HM_ARG_MOE_MODE) : HM_MOE_MODE_INDEXED;
  const int64_t top_k = params.integer(HM_ARG_TOP_K);
  // Rows of A and of C (0: not known here, the launch refuses the call).
  uint64_t a_rows = static_cast<uint64_t>(m), c_rows = a_rows;
  if (f.experts >= 2 && mode == HM_MOE_MODE_INDEXED)
    c_rows = top_k >= 1 && top_k <= HM_MAX_TOP_K ? a_rows * static_cast<uint64_t>(top_k) : 0;
  else if (f.experts >= 2 && mode == HM_MOE_MODE_MASKED)
    a_rows = c_rows = saturating_product({experts, a_rows});
  else if (f.experts >= 2 && mode != HM_MOE_MODE_CONTIGUOUS)
    a_rows = c_rows = 0;
  const uint64_t k = static_cast<uint64_t>(f.k), n = static_cast<uint64_t>(f.n);
  const uint64_t out_bytes = static_cast<uint64_t>(f.output.bits() / 8);
  const uint64_t a_bits =
      saturating_product({a_rows, k, static_cast<uint64_t>(f.activation.bits())});
  bytes[HM_ARG_A] = a_bits == UINT64_MAX ? a_bits : (a_bits + 7) / 8;
  bytes[HM_ARG_C] = saturating_product({c_rows, n, out_bytes});
  bytes[HM_ARG_B] = s.weight_bytes;
  bytes[HM_ARG_SCALES] = s.scale_bytes;
  bytes[HM_ARG_ZEROS] = s.zero_point_bytes;
  bytes[HM_ARG_GLOBAL] = s.global_scale_bytes;
  if (f.has_bias) bytes[HM_ARG_BIAS] = saturating_product({experts, n, out_bytes});  // [E][N]
  if (f.activation.bits() == 8)  // f32 per row of A, or per row and K group
    bytes[HM_ARG_ACT_SCALES] = saturating_product(
        {a_rows, static_cast<uint64_t>(std::max<int64_t>(f.activation_groups(), 1)), 4});
  bytes[HM_ARG_WORKSPACE] = workspace_bytes(tile, layer, m, m);
  if (bytes[HM_ARG_WORKSPACE] > 0)  // launch's own check, first here too (see marshal above)
    core::require_aligned(params.pointers[HM_ARG_WORKSPACE], 16, "HM_ARG_WORKSPACE");
  if (f.experts >= 2) {
    // SORTED_IDS and EXPERT_IDS are read as far as NUM_TOKENS_PADDED (device data) says.
    if (mode == HM_MOE_MODE_INDEXED) bytes[HM_ARG_NUM_TOKENS_PADDED] = 4;
    if (mode == HM_MOE_MODE_CONTIGUOUS) bytes[HM_ARG_EXPERT_OFFSETS] = (experts + 1) * 4;
    if (mode == HM_MOE_MODE_MASKED) bytes[HM_ARG_MASKED_M] = experts * 4;
  }
}

std::string DenseFamily::describe(const Tile& tile, const Layer& layer, int64_t m) const {
  return describe_dense(dense_tile(tile), layer.format, geometry(tile, layer, m), aligned_k(layer));
}

void DenseFamily::marshal(const Layer& layer, const hm_launch_params& params, bool moe,
                          DenseParams& p) const {
  const core::Format& f = layer.format;
  auto ptr = [&](int slot, const char* name, bool needed) -> uint64_t {
    const uint64_t v = params.pointers[slot];
    if (needed && v == 0) fail(HM_ERROR_INVALID_ARGUMENT, std::string(name) + " is not set");
    if (!needed && v != 0)
      fail(HM_ERROR_INVALID_ARGUMENT, std::string(name) + " is set but the format " +
                                          f.to_string() + " has no use for it");
    return v;
  };
  const bool scales =
      f.scale_kind != core::ScaleKind::kNone && f.scale_kind != core::ScaleKind::kTensor;
  p.a = reinterpret_cast<const void*>(ptr(HM_ARG_A, "HM_ARG_A", true));
  p.w = reinterpret_cast<const void*>(ptr(HM_ARG_B, "HM_ARG_B", true));
  p.c = reinterpret_cast<void*>(ptr(HM_ARG_C, "HM_ARG_C", true));
  p.scales = reinterpret_cast<const void*>(ptr(HM_ARG_SCALES, "HM_ARG_SCALES", scales));
  p.zeros = reinterpret_cast<const void*>(ptr(HM_ARG_ZEROS, "HM_ARG_ZEROS", f.has_zero_point()));
  p.global =
      reinterpret_cast<const float*>(ptr(HM_ARG_GLOBAL, "HM_ARG_GLOBAL", f.has_global_scale()));
  p.bias = reinterpret_cast<const void*>(ptr(HM_ARG_BIAS, "HM_ARG_BIAS", f.has_bias));
  // 8-bit activations carry one f32 scale per row of A (hm_quantize_activation_device).
  p.act_scales = reinterpret_cast<const float*>(
      ptr(HM_ARG_ACT_SCALES, "HM_ARG_ACT_SCALES", f.activation.bits() == 8));
  p.act_groups = f.activation_groups();  // [m][act_groups] with a=<dtype>:g<K>, else [m]
  // The routing slots: those of the call's MoE mode (humming.h, HM_ARG_MOE_MODE), no others.
  const int64_t mode = params.integer(HM_ARG_MOE_MODE);
  if (!moe && mode != 0)
    fail(HM_ERROR_INVALID_ARGUMENT, "HM_ARG_MOE_MODE is set (" + std::to_string(mode) +
                                        ") but the format " + f.to_string() +
                                        " has no experts; leave it 0");
  if (mode < HM_MOE_MODE_INDEXED || mode > HM_MOE_MODE_MASKED)
    fail(HM_ERROR_INVALID_ARGUMENT,
         "HM_ARG_MOE_MODE must be HM_MOE_MODE_INDEXED (0), HM_MOE_MODE_CONTIGUOUS (1) or "
         "HM_MOE_MODE_MASKED (2), got " + std::to_string(mode));
  static const char* const kModeNames[] = {"HM_MOE_MODE_INDEXED", "HM_MOE_MODE_CONTIGUOUS",
                                           "HM_MOE_MODE_MASKED"};
  auto routing = [&](int slot, const char* name, int64_t used_by) -> const int32_t* {
    if (!moe) return reinterpret_cast<const int32_t*>(ptr(slot, name, false));
    const uint64_t v = params.pointers[slot];
    if (mode == used_by && v == 0)
      fail(HM_ERROR_INVALID_ARGUMENT, std::string(name) + " is not set (" + kModeNames[mode] +
                                          " reads it)");
    if (mode != used_by && v != 0)
      fail(HM_ERROR_INVALID_ARGUMENT, std::string(name) + " is set but HM_ARG_MOE_MODE is " +
                                          kModeNames[mode] + ", which does not read it (" +
                                          kModeNames[used_by] + " does)");
    return reinterpret_cast<const int32_t*>(v);
  };
  p.sorted_ids = routing(HM_ARG_SORTED_IDS, "HM_ARG_SORTED_IDS", HM_MOE_MODE_INDEXED);
  p.expert_ids = routing(HM_ARG_EXPERT_IDS, "HM_ARG_EXPERT_IDS", HM_MOE_MODE_INDEXED);
  p.num_padded =
      routing(HM_ARG_NUM_TOKENS_PADDED, "HM_ARG_NUM_TOKENS_PADDED", HM_MOE_MODE_INDEXED);
  p.expert_offsets = routing(HM_ARG_EXPERT_OFFSETS, "HM_ARG_EXPERT_OFFSETS", HM_MOE_MODE_CONTIGUOUS);
  p.masked_m = routing(HM_ARG_MASKED_M, "HM_ARG_MASKED_M", HM_MOE_MODE_MASKED);
  p.moe_mode = static_cast<int32_t>(mode);
  core::require_aligned(params.pointers[HM_ARG_A], aligned_k(layer) ? 16 : 2, "HM_ARG_A");
  core::require_aligned(params.pointers[HM_ARG_B], 16, "HM_ARG_B");
  core::require_aligned(params.pointers[HM_ARG_C], 2, "HM_ARG_C");
  // The epilogue reads the bias as output values and the global scale as an f32: an address off
  // their size faults on the device (misaligned address), which ends the CUDA context.
  core::require_aligned(params.pointers[HM_ARG_BIAS], 2, "HM_ARG_BIAS");
  core::require_aligned(params.pointers[HM_ARG_GLOBAL], 4, "HM_ARG_GLOBAL");
  core::require_aligned(params.pointers[HM_ARG_ACT_SCALES], 4, "HM_ARG_ACT_SCALES");
  // Scales and zero points are staged in 16-byte units by the wgmma kernel; the rule holds for
  // both families so that an alignment that works for one M works for all.
  core::require_aligned(params.pointers[HM_ARG_SCALES], 16, "HM_ARG_SCALES");
  core::require_aligned(params.pointers[HM_ARG_ZEROS], 16, "HM_ARG_ZEROS");
  core::require_aligned(params.pointers[HM_ARG_SORTED_IDS], 4, "HM_ARG_SORTED_IDS");
  core::require_aligned(params.pointers[HM_ARG_EXPERT_IDS], 4, "HM_ARG_EXPERT_IDS");
  core::require_aligned(params.pointers[HM_ARG_NUM_TOKENS_PADDED], 4, "HM_ARG_NUM_TOKENS_PADDED");
  core::require_aligned(params.pointers[HM_ARG_EXPERT_OFFSETS], 4, "HM_ARG_EXPERT_OFFSETS");
  core::require_aligned(params.pointers[HM_ARG_MASKED_M], 4, "HM_ARG_MASKED_M");
}

void DenseFamily::launch(const Tile& tile, const Layer& layer, runtime::CUfunction function,
                         const std::string& entry, const Call& call) const {
  const hm_launch_params& params = call.params;
  DenseParams p{};
  marshal(layer, params, false, p);
  const int64_t m = call.m;
  const auto g = geometry(tile, layer, m);
  const uint64_t ws = params.pointers[HM_ARG_WORKSPACE];
  if (g.workspace_bytes > 0) {
    const int64_t have = params.integer(HM_ARG_WORKSPACE_BYTES);
    if (ws == 0 || have < static_cast<int64_t>(g.workspace_bytes))
      fail(HM_ERROR_INVALID_ARGUMENT,
           "M = " + std::to_string(m) + " needs a zero-initialized workspace of " +
               std::to_string(g.workspace_bytes) +
               " bytes (HM_ARG_WORKSPACE / HM_ARG_WORKSPACE_BYTES; " +
               "hm_plan_workspace_size gives the size for a largest M), got " +
               std::to_string(have) + " bytes");
    core::require_aligned(ws, 16, "HM_ARG_WORKSPACE");
  }
  launch_dense(*layer.device, function, entry, layer.format, layer.shape, dense_tile(tile), g,
               p, ws, m, call.stream, call.tensor_maps);
}

const Family& dense_wgmma_family() {
  static const DenseFamily family(tune::DenseKernel::kWgmma);
  return family;
}

const Family& dense_mma_family() {
  static const DenseFamily family(tune::DenseKernel::kMma);
  return family;
}

}  // namespace hm::gemm
