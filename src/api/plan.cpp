// Plans: a format bound to a context, its kernels chosen per range of M, compiled up front, and
// launched with no host synchronization and no allocation.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <future>
#include <string>
#include <vector>

#include "api/context.hpp"
#include "api/device_check.hpp"
#include "api/format.hpp"
#include "api/guard.hpp"
#include "gemm/dense_launch.hpp"
#include "gemm/family.hpp"
#include "core/support.hpp"
#include "quant/layout.hpp"
#include "runtime/launch.hpp"
#include "tune/dense.hpp"
#include <humming/gemm/params.h>

struct hm_plan {
  std::shared_ptr<hm::api::ContextState> context;
  hm::core::Format format;
  hm::quant::PackedShape shape;
  std::vector<hm::tune::DenseRange> ranges;
  uint32_t flags = 0;
  int64_t max_m = 0;
  bool aligned_k = false;  // K % 8 == 0: activation rows load in 16-byte units
  bool prepared = false;
  // One kernel per distinct tile, and the kernel each range uses.
  std::vector<std::unique_ptr<hm_kernel>> kernels;
  std::vector<size_t> kernel_of_range;
};

namespace hm::api {
namespace {

size_t range_index(const hm_plan* plan, int64_t m) {
  for (size_t i = 0; i < plan->ranges.size(); ++i)
    if (m <= plan->ranges[i].max_m) return i;
  return plan->ranges.size() - 1;
}

int multiprocessors(const hm_plan* plan) {
  return plan->context->device ? plan->context->device->properties().multiprocessors : 132;
}

void require_aligned(uint64_t pointer, uint64_t alignment, const char* slot) {
  if (pointer % alignment != 0)
    fail(HM_ERROR_MISALIGNED, std::string(slot) + " must be " + std::to_string(alignment) +
                                  "-byte aligned, got 0x" + [&] {
                                    char buf[32];
                                    std::snprintf(buf, sizeof buf, "%llx",
                                                  static_cast<unsigned long long>(pointer));
                                    return std::string(buf);
                                  }());
}

// The blocks of a cluster run at once on one processing cluster of the GPU, so a cluster split-K
// tile can only launch where its clusters fit (a MIG slice or a heavy tile may not hold 8). Checks
// every cluster size a range's M values can produce, at prepare time rather than at a call.
void check_cluster_splits(const hm_plan* plan, size_t r, const hm_kernel& kernel) {
  const tune::DenseTile& tile = plan->ranges[r].tile;
  const runtime::Device* device = plan->context->device.get();
  if (!tile.cluster_split || device == nullptr) return;
  const int64_t lo = r == 0 ? 1 : plan->ranges[r - 1].max_m + 1, hi = plan->ranges[r].max_m;
  int checked = 0;  // the cluster sizes already checked, as a bit set
  // Splits only shrink as token blocks are added: walk them until there is no split left.
  for (int64_t y = (lo + tile.block_m - 1) / tile.block_m; y * tile.block_m - tile.block_m < hi;
       ++y) {
    const int64_t m = std::min(hi, y * tile.block_m);
    const auto launch = tune::plan_dense_launch(tile, plan->format, m, plan->shape.n_padded,
                                                plan->shape.k_padded, multiprocessors(plan));
    if (launch.splits <= 1) break;
    if (!launch.cluster || (checked >> launch.splits & 1)) continue;
    checked |= 1 << launch.splits;
    const runtime::Dim3 cluster{1, 1, static_cast<uint32_t>(launch.splits)};
    const int fit = runtime::max_active_clusters(
        *device, kernel.function,
        runtime::Dim3{static_cast<uint32_t>(launch.grid_x), 1, cluster.z},
        runtime::Dim3{launch.threads, 1, 1}, cluster, launch.smem_bytes, kernel.entry.c_str());
    if (fit == 0)
      fail(HM_ERROR_UNSUPPORTED,
           "tile " + tile.name() + " splits K over clusters of " + std::to_string(launch.splits) +
               " blocks (M = " + std::to_string(m) + ", " + std::to_string(launch.threads) +
               " threads and " + std::to_string(launch.smem_bytes) +
               " bytes of shared memory each), which device " +
               std::to_string(device->ordinal()) + " cannot run at once; use \"split\": "
               "\"global\" for this range");
  }
}

std::string describe(const hm_plan* plan, int64_t m) {
  const tune::DenseTile& tile = tune::tile_for(plan->ranges, m);
  return gemm::describe_dense(
      tile, gemm::dense_geometry(tile, plan->format, plan->shape, m, multiprocessors(plan)),
      plan->aligned_k);
}

}  // namespace
}  // namespace hm::api

using namespace hm;
using namespace hm::api;

extern "C" {

HM_API void hm_plan_options_init(hm_plan_options_t* options) {
  if (!options) return;
  std::memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
}

HM_API hm_status_t hm_plan_create(hm_context_t* context, const hm_format_t* format,
                                  const hm_plan_options_t* options, hm_plan_t** out) {
  if (out) *out = nullptr;
  return HM_API_CALL({
    require_not_null(context, "context");
    require_not_null(out, "out");
    const core::Format& f = format_of(format);
    hm_plan_options_t o;
    hm_plan_options_init(&o);
    if (options) {
      require_struct_size(options->struct_size, sizeof(hm_plan_options_t), "options");
      o = *options;
    }
    if (o.flags & ~HM_PLAN_NONDETERMINISTIC)
      fail(HM_ERROR_INVALID_ARGUMENT, "options->flags has unknown bits");
    if (o.max_m < 0) fail(HM_ERROR_INVALID_ARGUMENT, "options->max_m must be >= 0 (0: no limit)");
    core::validate(f, context->state->arch);
    gemm::require_kernel(f, context->state->arch);  // a valid format may still have no kernel
    auto plan = std::make_unique<hm_plan>();
    plan->context = context->state;
    plan->format = f;
    plan->shape = quant::packed_shape(f);
    plan->flags = o.flags;
    plan->max_m = o.max_m;
    plan->aligned_k = f.k % 8 == 0;
    plan->ranges = o.tuning_json ? tune::parse_dense_ranges(o.tuning_json)
                                 : tune::default_dense_ranges(f, context->state->arch);
    tune::check_dense_ranges(plan->ranges, f, context->state->arch);
    // Generate every kernel now (cheap, and it rejects what the kernels do not cover yet, at
    // creation rather than at the first call); compile them in hm_plan_prepare().
    for (const auto& r : plan->ranges)
      jit::dense_gemm_kernel(f, r.tile, plan->aligned_k, context->state->arch_name);
    *out = plan.release();
  });
}

HM_API void hm_plan_destroy(hm_plan_t* plan) { delete plan; }

HM_API hm_status_t hm_plan_prepare(hm_plan_t* plan) {
  return HM_API_CALL({
    require_not_null(plan, "plan");
    if (plan->prepared) return;
    // Distinct tiles, each compiled on its own thread: NVRTC compiles are independent and the
    // cache locks per key, so a layer's prepare takes about as long as its slowest kernel.
    // Only the ranges that serve some M <= max_m (all of them without a max_m): a decode-only
    // plan compiles no large-M tile.
    constexpr size_t kUnused = SIZE_MAX;
    std::vector<tune::DenseTile> tiles;
    std::vector<size_t> of_range;
    for (size_t k = 0; k < plan->ranges.size(); ++k) {
      const auto& r = plan->ranges[k];
      const int64_t lo = k == 0 ? 1 : plan->ranges[k - 1].max_m + 1;
      if (plan->max_m > 0 && lo > plan->max_m) {
        of_range.push_back(kUnused);
        continue;
      }
      size_t i = 0;
      while (i < tiles.size() && !(tiles[i] == r.tile)) ++i;
      if (i == tiles.size()) tiles.push_back(r.tile);
      of_range.push_back(i);
    }
    std::vector<std::future<std::unique_ptr<hm_kernel>>> pending;
    for (const auto& tile : tiles) {
      pending.push_back(std::async(std::launch::async, [plan, tile] {
        return build_kernel(plan->context, jit::dense_gemm_kernel(plan->format, tile, plan->aligned_k,
                                                                 plan->context->arch_name));
      }));
    }
    std::vector<std::unique_ptr<hm_kernel>> kernels;
    for (auto& f : pending) kernels.push_back(f.get());  // rethrows the first failure
    for (size_t r = 0; r < plan->ranges.size(); ++r)
      if (of_range[r] != kUnused) check_cluster_splits(plan, r, *kernels[of_range[r]]);
    plan->kernels = std::move(kernels);
    plan->kernel_of_range = std::move(of_range);
    plan->prepared = true;
  });
}

HM_API hm_status_t hm_plan_workspace_size(const hm_plan_t* plan, int64_t max_m, uint64_t* bytes) {
  if (bytes) *bytes = 0;
  return HM_API_CALL({
    require_not_null(plan, "plan");
    require_not_null(bytes, "bytes");
    if (max_m <= 0) fail(HM_ERROR_INVALID_ARGUMENT, "max_m must be positive");
    if (max_m > (int64_t{1} << 24))
      fail(HM_ERROR_INVALID_ARGUMENT, "max_m above 2^24 is not supported by the size query");
    uint64_t most = 0;
    for (int64_t m = 1; m <= max_m; ++m) {
      const auto g = gemm::dense_geometry(tune::tile_for(plan->ranges, m), plan->format,
                                          plan->shape, m, multiprocessors(plan));
      if (g.launch.splits <= 1 && m > 4096) break;  // larger M never splits K (more tiles)
      most = std::max(most, g.workspace_bytes);
    }
    *bytes = most;
  });
}

HM_API hm_status_t hm_plan_gemm(const hm_plan_t* plan, const hm_launch_params_t* params,
                                void* stream) {
  return HM_API_CALL({
    require_not_null(plan, "plan");
    require_not_null(params, "params");
    if (!plan->prepared)
      fail(HM_ERROR_INVALID_STATE, "the plan is not prepared: call hm_plan_prepare() first");
    const ContextState& ctx = *plan->context;
    if (!ctx.device)
      fail(HM_ERROR_NO_DEVICE, "the plan's context has no device (ahead-of-time context)");
    const core::Format& f = plan->format;
    const int64_t m = params->integer(HM_ARG_M);
    // One range check keeps the grid arithmetic below from overflowing (HM_MAX_M, humming.h).
    if (m <= 0 || m > HM_MAX_M)
      fail(HM_ERROR_INVALID_ARGUMENT, "HM_ARG_M must be in [1, HM_MAX_M = " +
                                          std::to_string(HM_MAX_M) + "], got " + std::to_string(m));
    if (plan->max_m > 0 && m > plan->max_m)
      fail(HM_ERROR_INVALID_ARGUMENT, "M = " + std::to_string(m) + " exceeds the plan's max_m " +
                                          std::to_string(plan->max_m));
    auto ptr = [&](int slot, const char* name, bool needed) -> uint64_t {
      const uint64_t p = params->pointers[slot];
      if (needed && p == 0) fail(HM_ERROR_INVALID_ARGUMENT, std::string(name) + " is not set");
      if (!needed && p != 0)
        fail(HM_ERROR_INVALID_ARGUMENT, std::string(name) + " is set but the format " +
                                            f.to_string() + " has no use for it");
      return p;
    };
    const bool scales = f.scale_kind != core::ScaleKind::kNone && f.scale_kind != core::ScaleKind::kTensor;
    gemm::DenseParams p{};
    p.a = reinterpret_cast<const void*>(ptr(HM_ARG_A, "HM_ARG_A", true));
    p.w = reinterpret_cast<const void*>(ptr(HM_ARG_B, "HM_ARG_B", true));
    p.c = reinterpret_cast<void*>(ptr(HM_ARG_C, "HM_ARG_C", true));
    p.scales = reinterpret_cast<const void*>(ptr(HM_ARG_SCALES, "HM_ARG_SCALES", scales));
    p.zeros = reinterpret_cast<const void*>(ptr(HM_ARG_ZEROS, "HM_ARG_ZEROS", f.has_zero_point()));
    p.global = reinterpret_cast<const float*>(ptr(HM_ARG_GLOBAL, "HM_ARG_GLOBAL", f.has_global_scale()));
    p.bias = reinterpret_cast<const void*>(ptr(HM_ARG_BIAS, "HM_ARG_BIAS", f.has_bias));
    require_aligned(params->pointers[HM_ARG_A], plan->aligned_k ? 16 : 2, "HM_ARG_A");
    require_aligned(params->pointers[HM_ARG_B], 16, "HM_ARG_B");
    require_aligned(params->pointers[HM_ARG_C], 2, "HM_ARG_C");
    // Scales and zero points are staged in 16-byte units by the wgmma kernel; the rule holds for
    // every kernel so that an alignment that works for one M works for all.
    require_aligned(params->pointers[HM_ARG_SCALES], 16, "HM_ARG_SCALES");
    require_aligned(params->pointers[HM_ARG_ZEROS], 16, "HM_ARG_ZEROS");

    const size_t r = range_index(plan, m);
    const tune::DenseTile& tile = plan->ranges[r].tile;
    const hm_kernel& kernel = *plan->kernels[plan->kernel_of_range[r]];
    const auto geometry = gemm::dense_geometry(tile, f, plan->shape, m, multiprocessors(plan));
    const uint64_t ws = params->pointers[HM_ARG_WORKSPACE];
    if (geometry.workspace_bytes > 0) {
      const int64_t have = params->integer(HM_ARG_WORKSPACE_BYTES);
      if (ws == 0 || have < static_cast<int64_t>(geometry.workspace_bytes))
        fail(HM_ERROR_INVALID_ARGUMENT,
             "M = " + std::to_string(m) + " needs a zero-initialized workspace of " +
                 std::to_string(geometry.workspace_bytes) +
                 " bytes (HM_ARG_WORKSPACE / HM_ARG_WORKSPACE_BYTES; " +
                 "hm_plan_workspace_size gives the size for a largest M), got " +
                 std::to_string(have) + " bytes");
      require_aligned(ws, 16, "HM_ARG_WORKSPACE");
    }
    check_launch_device(*ctx.device, *params, static_cast<runtime::CUstream>(stream));
    gemm::launch_dense(*ctx.device, kernel.function, kernel.entry, f, plan->shape, tile, geometry,
                       p, ws, m, static_cast<runtime::CUstream>(stream));
  });
}

HM_API hm_status_t hm_plan_describe(const hm_plan_t* plan, int64_t m, char* buf, size_t size,
                                    size_t* length) {
  return HM_API_CALL({
    require_not_null(plan, "plan");
    if (m <= 0 || m > HM_MAX_M)
      fail(HM_ERROR_INVALID_ARGUMENT, "m must be in [1, HM_MAX_M = " + std::to_string(HM_MAX_M) +
                                          "], got " + std::to_string(m));
    copy_out_string(describe(plan, m), buf, size, length);
  });
}

}  // extern "C"
