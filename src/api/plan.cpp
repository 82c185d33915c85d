// Plans: a format bound to a context, its kernels chosen per range of M, compiled up front, and
// launched with no host synchronization and no allocation.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <future>
#include <string>
#include <tuple>
#include <vector>

#include "api/context.hpp"
#include "api/device_check.hpp"
#include "api/format.hpp"
#include "api/guard.hpp"
#include "core/support.hpp"
#include "gemm/family.hpp"
#include "gemm/moe_family.hpp"
#include "runtime/tensor_map.hpp"

struct hm_plan {
  std::shared_ptr<hm::api::ContextState> context;
  hm::gemm::Layer layer;
  std::vector<hm::gemm::Range> ranges;  // the tile (and family) of each range of M
  uint32_t flags = 0;
  int64_t max_m = 0;
  bool prepared = false;
  // One kernel per distinct tile, and the kernel each range uses (kUnused past max_m).
  std::vector<std::unique_ptr<hm_kernel>> kernels;
  std::vector<size_t> kernel_of_range;
  // The TMA maps each kernel's calls encoded, kept while their inputs do not change (one cache
  // per kernel, owned here: a plan created later, even at this address, starts empty).
  std::vector<std::unique_ptr<hm::runtime::TensorMapCache>> tensor_maps;
};

namespace hm::api {
namespace {

constexpr size_t kUnused = SIZE_MAX;

// The smallest M a range serves.
int64_t first_m(const hm_plan* plan, size_t r) {
  return r == 0 ? 1 : plan->ranges[r - 1].max_m + 1;
}

// MoE queries: a plan of a MoE format, and M in range.
void require_moe(const hm_plan* plan, int64_t m) {
  if (plan->layer.format.experts < 2)
    fail(HM_ERROR_INVALID_ARGUMENT, "the plan's format " + plan->layer.format.to_string() +
                                        " is dense (e=1): it has no MoE routing");
  if (m <= 0 || m > HM_MAX_M)
    fail(HM_ERROR_INVALID_ARGUMENT, "m must be in [1, HM_MAX_M = " + std::to_string(HM_MAX_M) +
                                        "], got " + std::to_string(m));
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
    const ContextState& state = *context->state;
    plan->layer = gemm::make_layer(f, state.arch, state.arch_name, state.device.get());
    plan->flags = o.flags;
    plan->max_m = o.max_m;
    plan->ranges = o.tuning_json ? gemm::parse_ranges(o.tuning_json)
                                 : gemm::default_ranges(plan->layer);
    gemm::check_ranges(plan->ranges, plan->layer);
    // Generate every kernel now (cheap, and it rejects what the kernels do not cover yet, at
    // creation rather than at the first call); compile them in hm_plan_prepare().
    for (const auto& r : plan->ranges) r.family->generate(*r.tile, plan->layer);
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
    std::vector<const gemm::Range*> tiles;  // the first range of each distinct tile
    std::vector<size_t> of_range;
    for (size_t k = 0; k < plan->ranges.size(); ++k) {
      const auto& r = plan->ranges[k];
      if (plan->max_m > 0 && first_m(plan, k) > plan->max_m) {
        of_range.push_back(kUnused);
        continue;
      }
      size_t i = 0;
      while (i < tiles.size() && !(tiles[i]->family == r.family && tiles[i]->tile->same(*r.tile)))
        ++i;
      if (i == tiles.size()) tiles.push_back(&r);
      of_range.push_back(i);
    }
    std::vector<std::future<std::unique_ptr<hm_kernel>>> pending;
    for (const gemm::Range* r : tiles) {
      pending.push_back(std::async(std::launch::async, [plan, r] {
        return build_kernel(plan->context, r->family->generate(*r->tile, plan->layer));
      }));
    }
    std::vector<std::unique_ptr<hm_kernel>> kernels;
    for (auto& f : pending) kernels.push_back(f.get());  // rethrows the first failure
    for (size_t r = 0; r < plan->ranges.size(); ++r) {
      if (of_range[r] == kUnused) continue;
      const gemm::Range& range = plan->ranges[r];
      const hm_kernel& kernel = *kernels[of_range[r]];
      range.family->check_loaded(*range.tile, plan->layer, kernel.function, kernel.entry,
                                 first_m(plan, r), range.max_m);
    }
    std::vector<std::unique_ptr<runtime::TensorMapCache>> tensor_maps;
    for (size_t k = 0; k < kernels.size(); ++k)
      tensor_maps.push_back(std::make_unique<runtime::TensorMapCache>());
    plan->kernels = std::move(kernels);
    plan->kernel_of_range = std::move(of_range);
    plan->tensor_maps = std::move(tensor_maps);
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
    for (size_t r = 0; r < plan->ranges.size() && first_m(plan, r) <= max_m; ++r) {
      const gemm::Range& range = plan->ranges[r];
      most = std::max(most, range.family->workspace_bytes(*range.tile, plan->layer,
                                                          first_m(plan, r),
                                                          std::min(range.max_m, max_m)));
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
    const int64_t m = params->integer(HM_ARG_M);
    // One range check keeps the grid arithmetic below from overflowing (HM_MAX_M, humming.h).
    if (m <= 0 || m > HM_MAX_M)
      fail(HM_ERROR_INVALID_ARGUMENT, "HM_ARG_M must be in [1, HM_MAX_M = " +
                                          std::to_string(HM_MAX_M) + "], got " + std::to_string(m));
    // N and K come from the plan; a caller who sets them must mean the plan's (a launch-params
    // object reused from another layer would otherwise run with this layer's shape unnoticed).
    for (const auto& [slot, name, want] :
         {std::tuple<int32_t, const char*, int64_t>{HM_ARG_N, "HM_ARG_N", plan->layer.format.n},
          {HM_ARG_K, "HM_ARG_K", plan->layer.format.k}}) {
      const int64_t got = params->integer(slot);
      if (got != 0 && got != want)
        fail(HM_ERROR_INVALID_ARGUMENT,
             std::string(name) + " is " + std::to_string(got) + " but the plan's format has " +
                 (slot == HM_ARG_N ? "n = " : "k = ") + std::to_string(want) +
                 ": hm_plan_gemm takes N and K from the plan; leave them 0 or set the plan's");
    }
    // A grouped MoE call runs the tile of the tokens that give its rows per expert.
    const int64_t tile_m =
        plan->layer.format.experts >= 2
            ? gemm::moe_tile_m(params->integer(HM_ARG_MOE_MODE), m, plan->layer.format.experts)
            : m;
    if (plan->max_m > 0 && tile_m > plan->max_m)
      fail(HM_ERROR_INVALID_ARGUMENT,
           "M = " + std::to_string(m) +
               (tile_m != m ? " (a grouped MoE call of " + std::to_string(tile_m) +
                                  " tokens' rows per expert, docs/moe.md)"
                            : std::string()) +
               " exceeds the plan's max_m " + std::to_string(plan->max_m));
    // The host cost of a call is its driver calls (benchmarks/NOTES.md, "Host cost per
    // hm_plan_gemm"): the context is pushed once, here, for the checks, the TMA encodes and the
    // launch (their own Scopes nest for free); each distinct pointer is one query; a TMA tile's
    // maps come from its kernel's cache while their inputs do not change.
    const runtime::Device::Scope current(*ctx.device);
    const size_t r = gemm::range_of(plan->ranges, tile_m);
    const gemm::Range& range = plan->ranges[r];
    uint64_t extents[hm_launch_params::kNamedPointerSlots];
    range.family->extents(*range.tile, plan->layer, *params, m, extents);
    check_launch_device(*ctx.device, *params, static_cast<runtime::CUstream>(stream), extents);
    const size_t k = plan->kernel_of_range[r];
    const hm_kernel& kernel = *plan->kernels[k];
    range.family->launch(*range.tile, plan->layer, kernel.function, kernel.entry,
                         gemm::Call{*params, m, static_cast<runtime::CUstream>(stream),
                                    plan->tensor_maps[k].get()});
  });
}

HM_API hm_status_t hm_plan_moe_block_size(const hm_plan_t* plan, int64_t m, int32_t* block_size) {
  if (block_size) *block_size = 0;
  return HM_API_CALL({
    require_not_null(plan, "plan");
    require_not_null(block_size, "block_size");
    require_moe(plan, m);
    *block_size = plan->ranges[gemm::range_of(plan->ranges, m)].tile->rows_per_block();
  });
}

HM_API hm_status_t hm_plan_moe_rows(const hm_plan_t* plan, int64_t m, int32_t top_k,
                                    int64_t* rows) {
  if (rows) *rows = 0;
  return HM_API_CALL({
    require_not_null(plan, "plan");
    require_not_null(rows, "rows");
    require_moe(plan, m);
    if (top_k < 1 || top_k > HM_MAX_TOP_K || m > INT32_MAX / top_k)
      fail(HM_ERROR_INVALID_ARGUMENT,
           "top_k must be in [1, HM_MAX_TOP_K = " + std::to_string(HM_MAX_TOP_K) +
               "] with M * top_k below 2^31, got top_k = " + std::to_string(top_k) +
               " for M = " + std::to_string(m));
    const int block = plan->ranges[gemm::range_of(plan->ranges, m)].tile->rows_per_block();
    *rows = gemm::moe_rows(m, top_k, plan->layer.format.experts, block);
  });
}

HM_API hm_status_t hm_plan_describe(const hm_plan_t* plan, int64_t m, char* buf, size_t size,
                                    size_t* length) {
  return HM_API_CALL({
    require_not_null(plan, "plan");
    if (m <= 0 || m > HM_MAX_M)
      fail(HM_ERROR_INVALID_ARGUMENT, "m must be in [1, HM_MAX_M = " + std::to_string(HM_MAX_M) +
                                          "], got " + std::to_string(m));
    const gemm::Range& range = plan->ranges[gemm::range_of(plan->ranges, m)];
    copy_out_string(range.family->name() + std::string(" ") +
                        range.family->describe(*range.tile, plan->layer, m),
                    buf, size, length);
  });
}

}  // extern "C"
