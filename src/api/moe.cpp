// The MoE routing helpers (hm_moe_align_sizes, hm_moe_align, hm_moe_reduce): argument checks and
// launches of kernels/humming/moe/routing.cuh. Sizes come from the host reference's size function
// (src/quant/moe_routing.cpp), so the reference, the size query and the launcher agree.
#include <humming/moe/routing.h>

#include <cstddef>
#include <cstring>
#include <string>

#include "api/context.hpp"
#include "api/guard.hpp"
#include "api/device_check.hpp"
#include "api/utility.hpp"
#include "core/address.hpp"
#include "core/checked.hpp"
#include "core/dtype.hpp"
#include "jit/codegen_moe.hpp"
#include "quant/moe_routing.hpp"
#include "runtime/launch.hpp"

static_assert(offsetof(hm_moe_routing_t, struct_size) == 0, "struct_size comes first");
static_assert(offsetof(hm_moe_align_sizes_t, struct_size) == 0, "struct_size comes first");
static_assert(offsetof(hm_moe_align_out_t, struct_size) == 0, "struct_size comes first");
static_assert(offsetof(hm_moe_reduce_args_t, struct_size) == 0, "struct_size comes first");
static_assert(HM_MAX_TOP_K == hm::moe::kMaxTopK, "one top-k limit");
static_assert(HM_MOE_MAX_LOCAL_EXPERTS == hm::moe::kMaxLocalExperts, "one expert limit");
static_assert(HM_MOE_MIN_BLOCK_SIZE == hm::moe::kMinBlockSize &&
                  HM_MOE_MAX_BLOCK_SIZE == hm::moe::kMaxBlockSize,
              "one block-size range");
// The kernels read their parameters as these structs: fixed-size fields, no host-only padding.
static_assert(sizeof(hm::moe::AlignParams) == 8 * 9 + 4 * 4, "AlignParams layout");
static_assert(sizeof(hm::moe::ReduceParams) == 8 * 8 + 4 * 4, "ReduceParams layout");
// The largest dynamic shared memory of the alignment kernel stays under the 48 KiB every arch
// grants without an opt-in.
static_assert(hm::moe::align_shared_bytes(hm::moe::kMaxLocalExperts) <= 48 * 1024,
              "alignment shared memory");

namespace hm::api {
namespace {

// The checked shapes of a routing struct (hm_moe_align_sizes' rules).
quant::MoeAlignSizes routing_sizes(const hm_moe_routing_t* routing, int32_t block_size) {
  require_not_null(routing, "routing");
  require_struct_size(routing->struct_size, sizeof(hm_moe_routing_t), "routing");
  return quant::moe_align_sizes(routing->num_tokens, routing->top_k, routing->num_experts,
                                routing->num_local_experts, block_size, routing->expert_map != 0);
}

const runtime::Device& device_of(const ContextState& state, const char* what) {
  if (!state.device)
    fail(HM_ERROR_NO_DEVICE, std::string("the context has no device (HM_NO_DEVICE, for "
                                         "ahead-of-time compilation): ") +
                                 what + " runs on the device");
  return *state.device;
}

void require_address(uint64_t pointer, const char* name) {
  if (pointer == 0) fail(HM_ERROR_INVALID_ARGUMENT, std::string(name) + " is 0: it is required");
}

// The routing's device pointers: topk_ids required, the map optional, both int32-aligned and
// on the context's device.
// Their allocations must hold [num_tokens][top_k] and [num_experts] int32 (shapes checked by
// routing_sizes).
void check_routing_pointers(const runtime::Device& device, const hm_moe_routing_t& r) {
  require_address(r.topk_ids, "routing->topk_ids");
  core::require_aligned(r.topk_ids, 4, "routing->topk_ids");
  core::require_aligned(r.expert_map, 4, "routing->expert_map");
  check_device_pointer(device, "routing->topk_ids", r.topk_ids,
                       static_cast<uint64_t>(r.num_tokens) * static_cast<uint64_t>(r.top_k) * 4);
  check_device_pointer(device, "routing->expert_map", r.expert_map,
                       static_cast<uint64_t>(r.num_experts) * 4);
}

uint32_t grid_for(int64_t items, int64_t per_block) {
  const int64_t blocks = items <= 0 ? 1 : (items + per_block - 1) / per_block;
  return static_cast<uint32_t>(blocks < moe::kMaxGridBlocks ? blocks : moe::kMaxGridBlocks);
}

}  // namespace
}  // namespace hm::api

using namespace hm;
using namespace hm::api;

extern "C" {

HM_API void hm_moe_routing_init(hm_moe_routing_t* routing) {
  if (routing == nullptr) return;
  std::memset(routing, 0, sizeof *routing);
  routing->struct_size = sizeof *routing;
}

HM_API void hm_moe_align_sizes_init(hm_moe_align_sizes_t* sizes) {
  if (sizes == nullptr) return;
  std::memset(sizes, 0, sizeof *sizes);
  sizes->struct_size = sizeof *sizes;
}

HM_API void hm_moe_align_out_init(hm_moe_align_out_t* out) {
  if (out == nullptr) return;
  std::memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
}

HM_API void hm_moe_reduce_args_init(hm_moe_reduce_args_t* args) {
  if (args == nullptr) return;
  std::memset(args, 0, sizeof *args);
  args->struct_size = sizeof *args;
}

HM_API hm_status_t hm_moe_align_sizes(const hm_moe_routing_t* routing, int32_t block_size,
                                      hm_moe_align_sizes_t* out) {
  return HM_API_CALL({
    require_not_null(out, "out");
    require_struct_size(out->struct_size, sizeof(hm_moe_align_sizes_t), "out");
    const quant::MoeAlignSizes s = routing_sizes(routing, block_size);
    out->sorted_ids = s.sorted_ids;
    out->expert_ids = s.expert_ids;
    out->expert_offsets = s.expert_offsets;
    out->expert_counts = s.expert_counts;
    hm::api::report_filled(out);
  });
}

HM_API hm_status_t hm_moe_align(hm_context_t* context, const hm_moe_routing_t* routing,
                                int32_t block_size, const hm_moe_align_out_t* out, void* stream) {
  return HM_API_CALL({
    require_not_null(context, "context");
    const quant::MoeAlignSizes s = routing_sizes(routing, block_size);
    require_not_null(out, "out");
    require_struct_size(out->struct_size, sizeof(hm_moe_align_out_t), "out");
    const uint64_t outputs[] = {out->sorted_ids, out->expert_ids, out->num_tokens_padded,
                                out->expert_offsets, out->expert_counts};
    const char* names[] = {"out->sorted_ids", "out->expert_ids", "out->num_tokens_padded",
                           "out->expert_offsets", "out->expert_counts"};
    for (int i = 0; i < 4; ++i) require_address(outputs[i], names[i]);
    for (int i = 0; i < 5; ++i) core::require_aligned(outputs[i], 4, names[i]);
    const std::shared_ptr<ContextState>& state = context->state;
    const runtime::Device& device = device_of(*state, "hm_moe_align");
    check_routing_pointers(device, *routing);
    // int32 elements each, as hm_moe_align_sizes counts them (num_tokens_padded: one).
    const int64_t elements[] = {s.sorted_ids, s.expert_ids, 1, s.expert_offsets, s.expert_counts};
    for (int i = 0; i < 5; ++i) check_device_pointer(device, names[i], outputs[i], uint64_t(elements[i]) * 4);
    const auto cu_stream = static_cast<runtime::CUstream>(stream);
    check_stream(device, cu_stream);

    const hm_kernel& kernel = utility_kernel(state, jit::moe_align_kernel(state->arch_name));
    moe::AlignParams p{};
    p.topk_ids = reinterpret_cast<const int32_t*>(routing->topk_ids);
    p.expert_map = reinterpret_cast<const int32_t*>(routing->expert_map);
    p.sorted_ids = reinterpret_cast<int32_t*>(out->sorted_ids);
    p.expert_ids = reinterpret_cast<int32_t*>(out->expert_ids);
    p.num_tokens_padded = reinterpret_cast<int32_t*>(out->num_tokens_padded);
    p.expert_offsets = reinterpret_cast<int32_t*>(out->expert_offsets);
    p.expert_counts = reinterpret_cast<int32_t*>(out->expert_counts);
    p.assignments = core::size_product({routing->num_tokens, routing->top_k}, "num_tokens x top_k");
    p.capacity = s.sorted_ids;
    p.num_experts = routing->num_experts;
    p.local_experts = static_cast<int32_t>(s.expert_counts);
    p.block_size = block_size;
    void* args[] = {&p};
    // One block per chunk, not capped: block b scatters chunk b (at most 2^31 / 4096 blocks, far
    // inside the grid's x limit).
    const int64_t chunks =
        p.assignments == 0 ? 1 : (p.assignments + moe::kAlignChunk - 1) / moe::kAlignChunk;
    runtime::launch(device, kernel.function, runtime::Dim3{static_cast<uint32_t>(chunks), 1, 1},
                    runtime::Dim3{moe::kAlignThreads, 1, 1},
                    static_cast<uint32_t>(moe::align_shared_bytes(p.local_experts)), cu_stream,
                    args, kernel.entry.c_str());
  });
}

HM_API hm_status_t hm_moe_reduce(hm_context_t* context, const hm_moe_routing_t* routing,
                                 const hm_moe_reduce_args_t* args, void* stream) {
  return HM_API_CALL({
    require_not_null(context, "context");
    // The routing's shape rules are the alignment's (any valid block size).
    const quant::MoeAlignSizes s = routing_sizes(routing, moe::kMinBlockSize);
    require_not_null(args, "args");
    require_struct_size(args->struct_size, sizeof(hm_moe_reduce_args_t), "args");
    const core::Dtype dtype = core::Dtype::from_code(args->dtype);
    if (args->dtype != HM_DTYPE_F16 && args->dtype != HM_DTYPE_BF16)
      fail(HM_ERROR_UNSUPPORTED, "args->dtype is " + dtype.name() +
                                     ": hm_moe_reduce takes f16 or bf16 values (f32 weights)");
    if (args->n < 1 || args->n > HM_MAX_N)
      fail(HM_ERROR_INVALID_ARGUMENT,
           "args->n is " + std::to_string(args->n) + ": it must be in [1, HM_MAX_N]");
    require_address(args->input, "args->input");
    require_address(args->topk_weights, "args->topk_weights");
    require_address(args->out, "args->out");
    core::require_aligned(args->input, 2, "args->input");
    core::require_aligned(args->out, 2, "args->out");
    core::require_aligned(args->topk_weights, 4, "args->topk_weights");
    const int64_t rows = core::size_product({routing->num_tokens, routing->top_k}, "rows of in");
    // Byte sizes of in and out: checked so no index in the kernel wraps.
    const int64_t in_bytes = core::size_product({rows, args->n, 2}, "args->input bytes");
    const int64_t out_bytes =
        core::size_product({routing->num_tokens, args->n, 2}, "args->out bytes");
    if (args->input < args->out + static_cast<uint64_t>(out_bytes) &&
        args->out < args->input + static_cast<uint64_t>(in_bytes) && rows > 0)
      fail(HM_ERROR_INVALID_ARGUMENT, "args->input and args->out overlap");
    const std::shared_ptr<ContextState>& state = context->state;
    const runtime::Device& device = device_of(*state, "hm_moe_reduce");
    check_routing_pointers(device, *routing);
    check_device_pointer(device, "args->input", args->input, static_cast<uint64_t>(in_bytes));
    check_device_pointer(device, "args->topk_weights", args->topk_weights,
                         static_cast<uint64_t>(rows) * 4);
    check_device_pointer(device, "args->out", args->out, static_cast<uint64_t>(out_bytes));
    const auto cu_stream = static_cast<runtime::CUstream>(stream);
    check_stream(device, cu_stream);

    const int vec = args->n % 8 == 0 && args->input % 16 == 0 && args->out % 16 == 0 ? 8 : 1;
    const hm_kernel& kernel =
        utility_kernel(state, jit::moe_reduce_kernel(dtype, vec, state->arch_name));
    moe::ReduceParams p{};
    p.in = reinterpret_cast<const void*>(args->input);
    p.weights = reinterpret_cast<const float*>(args->topk_weights);
    p.topk_ids = reinterpret_cast<const int32_t*>(routing->topk_ids);
    p.expert_map = reinterpret_cast<const int32_t*>(routing->expert_map);
    p.out = reinterpret_cast<void*>(args->out);
    p.tokens = routing->num_tokens;
    p.n = args->n;
    p.vectors = core::size_product({routing->num_tokens, args->n / vec}, "work items");
    p.top_k = routing->top_k;
    p.num_experts = routing->num_experts;
    p.local_experts = static_cast<int32_t>(s.expert_counts);
    if (p.vectors == 0) return;  // no tokens: nothing to write
    void* kernel_args[] = {&p};
    runtime::launch(
        device, kernel.function, runtime::Dim3{grid_for(p.vectors, moe::kReduceThreads), 1, 1},
        runtime::Dim3{moe::kReduceThreads, 1, 1}, 0, cu_stream, kernel_args, kernel.entry.c_str());
  });
}

}  // extern "C"
