// hm_quantize_activation_device: f16 / bf16 activations -> 8-bit codes and f32 scales on the GPU
// (kernels/humming/quant/activation_kernel.cuh), bit for bit the host rule of
// src/quant/activation.cpp. Argument checks and the launch live here; no device memory is read.
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>

#include "api/context.hpp"
#include "api/device_check.hpp"
#include "api/utility.hpp"
#include "core/address.hpp"
#include "api/guard.hpp"
#include "core/checked.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "jit/codegen_quant.hpp"
#include "runtime/launch.hpp"
#include <humming/quant/activation.h>

static_assert(offsetof(hm_activation_quant_args_t, struct_size) == 0, "struct_size comes first");
// The kernel reads its parameter as this struct: 8-byte fields, no host-only padding.
static_assert(sizeof(hm::actquant::Params) == 8 * 8 + 4 + 2 * 2, "actquant::Params layout");

namespace hm::api {
namespace {

int64_t scale_groups(int64_t k, int32_t group_k) {
  if (k <= 0) fail(HM_ERROR_INVALID_ARGUMENT, "k must be positive, got " + std::to_string(k));
  if (group_k < 0)
    fail(HM_ERROR_INVALID_ARGUMENT,
         "group_k must be 0 (per token) or positive, got " + std::to_string(group_k));
  // Rounded up without k + group_k - 1, which overflows for k near INT64_MAX.
  return group_k == 0 ? 1 : k / group_k + (k % group_k != 0 ? 1 : 0);
}

// The launch of one call: teams of p.warps warps on passes of p.vectors lane-vectors
// (activation_kernel.cuh), `threads` per block, `blocks` blocks, `shared` dynamic bytes.
struct Geometry {
  uint32_t threads = 0, blocks = 0, shared = 0;
};

// Sets p.warps and p.vectors and sizes the grid. Two regimes:
//  - few rows (m <= SMs, decode and small prefill): every unit of work spread over as many lanes
//    as it has vectors (one vector per lane), and 1x128-style groups cut into 256-column passes
//    of one warp each, so a row's work spreads over several SMs (latency: the whole call is one
//    wave);
//  - many rows: four vectors per lane (64 bytes in flight per thread), as few warps per team as
//    hold a group, blocks of up to 256 threads (bandwidth).
// A unit is a group of a row (kTeamGroups: per-token rows, other group sizes) or a pass of a row
// (kLaneGroups: power-of-two groups of at most 256 columns).
Geometry plan_geometry(actquant::Params& p, int sms) {
  using namespace actquant;
  const bool few_rows = p.m <= sms;
  const bool lane_groups =
      p.groups > 1 && p.group_k <= kWarpRowSpan && (p.group_k & (p.group_k - 1)) == 0;
  int64_t warps = 1, vectors = 1;
  if (lane_groups) {
    vectors = few_rows ? 1 : kMaxVectorsPerLane;
  } else {
    // Warp-rows (256 columns) of one group; a longer group than 32 x 4 warp-rows is read twice.
    const int64_t length = p.group_k < p.k ? p.group_k : p.k;
    const int64_t rows = (length + kWarpRowSpan - 1) / kWarpRowSpan;
    if (rows > int64_t{kMaxTeamWarps} * kMaxVectorsPerLane) {
      warps = kMaxTeamWarps;
      vectors = kMaxVectorsPerLane;
    } else if (few_rows) {
      warps = rows < kMaxTeamWarps ? rows : kMaxTeamWarps;
      vectors = (rows + warps - 1) / warps;
    } else {
      vectors = rows < kMaxVectorsPerLane ? rows : kMaxVectorsPerLane;
      warps = (rows + vectors - 1) / vectors;
    }
  }
  p.warps = static_cast<uint16_t>(warps);
  p.vectors = static_cast<uint16_t>(vectors);
  const WorkPlan plan = plan_work(p);
  const int64_t units = p.m * plan.units_per_row;
  // Teams per block: one when a team is 8+ warps; else up to 256 threads, but not so many that
  // fewer than two blocks per SM remain.
  int64_t teams = warps >= kMaxTeamsPerBlock ? 1 : units / (2 * int64_t{sms});
  const int64_t most = warps >= kMaxTeamsPerBlock ? 1 : kMaxTeamsPerBlock / warps;
  teams = teams < 1 ? 1 : teams > most ? most : teams;
  Geometry g;
  g.threads = static_cast<uint32_t>(32 * warps * teams);
  // The gather path stages a pass per team in shared memory: at most 32 KiB per block (fewer
  // vectors per lane beyond that; a group that no longer fits a pass is read twice).
  while (staging_bytes(p, static_cast<int>(g.threads)) > 32 * 1024 && p.vectors > 1) --p.vectors;
  // At most 16 blocks per SM (a few waves of resident blocks); the teams stride over the rest.
  const int64_t all_units = p.m * plan_work(p).units_per_row;
  const int64_t blocks = (all_units + teams - 1) / teams, cap = 16 * int64_t{sms};
  g.blocks = static_cast<uint32_t>(blocks < cap ? blocks : cap < kMaxGridBlocks ? cap : kMaxGridBlocks);
  g.shared = static_cast<uint32_t>(staging_bytes(p, static_cast<int>(g.threads)));
  return g;
}

// Lane-vectors per block that set how many blocks a cluster row takes (1024 columns each).
constexpr int64_t kClusterBlockVectors = 4 * 32;
// Threads per block the cluster regime aims at: a block that would need more takes up to
// kMaxVectorsPerLane lane-vectors per thread instead of more warps. 128, 256 and 1024 measured
// within 0.3 us of each other (H100, K = 8192, M = 1-128; NOTES v33).
constexpr int64_t kClusterBlockThreads = 256;

// Per-token rows of a call with at most one row per SM, on sm_90+: each row over the blocks of
// one thread-block cluster (activation_kernel.cuh, cluster_row), the row's absmax meeting in
// distributed shared memory. A row takes as many blocks as hold kClusterBlockVectors each, at
// most 8 (the portable cluster size) and at most SMs / m, so that every block of
// the call has an SM of its own: one SM running several rows' blocks one after the other was
// slower than one block per row (H100, K = 8192, m = 128 with 8 blocks per row: 10.59 us
// against 8.03; NOTES v32), and SMs / m blocks per row faster still (m = 32 / 64 / 128: 6.70
// / 6.72 / 7.42 us against 7.66 / 7.62 / 8.16 for one 1024-thread block per row; NOTES v33).
// A block of more than kClusterBlockThreads threads' worth of vectors takes 2 or 4 per
// thread. On one SM per row with 32 warps the call was issue-bound on that SM
// (NOTES v30). False (and g untouched) where it does not apply: the kernel is not built for
// sm_90+, the driver cannot launch clusters, there are more rows than SMs, the scales are per
// group, the loads or stores are not vectors (perm, alignment, k % 8), or the row is longer
// than 8 x 1024 x 4 lane-vectors (262144 columns).
bool plan_cluster_rows(actquant::Params& p, const core::Arch& target, const runtime::Device& device,
                       int sms, Geometry& g, uint32_t& ranks) {
  using namespace actquant;
  constexpr uint32_t kFlags = kVectorLoads | kVectorStores;
  if (target.major < 9 || device.properties().cc_major < 9 ||
      !device.driver().has_launch_kernel_ex() || p.m > sms || p.groups != 1 ||
      (p.flags & kFlags) != kFlags)
    return false;
  const int64_t vectors = p.k / kVector;
  const int64_t by_length = (vectors + kClusterBlockVectors - 1) / kClusterBlockVectors;
  const int64_t by_sms = sms / p.m;  // >= 1: m <= sms
  int64_t r = by_length < by_sms ? by_length : by_sms;
  r = r < kMaxClusterRanks ? r : kMaxClusterRanks;
  const int64_t per_block = (vectors + r - 1) / r;
  int64_t per_thread = 1;
  while (per_thread < kMaxVectorsPerLane &&
         (per_block + per_thread - 1) / per_thread > kClusterBlockThreads)
    per_thread *= 2;
  const int64_t threads = ((per_block + per_thread - 1) / per_thread + 31) / 32 * 32;
  if (threads > kMaxThreads) return false;
  ranks = static_cast<uint32_t>(r);
  p.flags |= kClusterRows;
  p.warps = static_cast<uint16_t>(threads / 32);
  p.vectors = static_cast<uint16_t>(per_thread);
  g.threads = static_cast<uint32_t>(threads);
  g.blocks = static_cast<uint32_t>(p.m) * ranks;
  g.shared = 0;
  return true;
}

core::Dtype dtype_of(hm_dtype_t code, const char* name) {
  try {
    return core::Dtype::from_code(code);
  } catch (const Error& e) {
    fail(e.status(), std::string(name) + ": " + e.message());
  }
}

}  // namespace
}  // namespace hm::api

using namespace hm;
using namespace hm::api;

extern "C" {

HM_API void hm_activation_quant_args_init(hm_activation_quant_args_t* args) {
  if (args == nullptr) return;
  std::memset(args, 0, sizeof *args);
  args->struct_size = sizeof *args;
  args->in_dtype = HM_DTYPE_F16;
  args->out_dtype = HM_DTYPE_E4M3;
}

HM_API hm_status_t hm_activation_scale_groups(int64_t k, int32_t group_k, int64_t* out) {
  return HM_API_CALL({
    require_not_null(out, "out");
    *out = scale_groups(k, group_k);
  });
}

HM_API hm_status_t hm_quantize_activation_device(hm_context_t* context,
                                                 const hm_activation_quant_args_t* args,
                                                 void* stream) {
  return HM_API_CALL({
    require_not_null(context, "context");
    require_not_null(args, "args");
    require_struct_size(args->struct_size, sizeof(hm_activation_quant_args_t), "args");
    const hm_activation_quant_args_t& x = *args;
    const std::shared_ptr<ContextState>& state = context->state;
    // The pair first: the codegen refuses dtypes it has no kernel for, naming them.
    const jit::GeneratedKernel generated = jit::quantize_activation_kernel(
        dtype_of(x.in_dtype, "args->in_dtype"), dtype_of(x.out_dtype, "args->out_dtype"),
        state->arch_name);
    if (x.m < 0) fail(HM_ERROR_INVALID_ARGUMENT, "args->m must be >= 0, got " + std::to_string(x.m));
    const int64_t groups = scale_groups(x.k, x.group_k);
    if (x.group_k % actquant::kVector != 0)
      fail(HM_ERROR_INVALID_ARGUMENT, "args->group_k must be 0 or a multiple of 8, got " +
                                          std::to_string(x.group_k));
    // The largest buffer is a (2 bytes per element): when its size fits, so do the others.
    core::size_product({x.m, x.k, 2}, "the bytes of args->a (m x k x 2)");
    // The kernel's per-row arithmetic is 32-bit (actquant::plan_work); no GEMM has a longer K.
    if (x.k > INT32_MAX)
      fail(HM_ERROR_INVALID_ARGUMENT,
           "args->k must be at most 2^31 - 1, got " + std::to_string(x.k));
    if (x.a == 0) fail(HM_ERROR_INVALID_ARGUMENT, "args->a is 0: the activations are required");
    if (x.codes == 0) fail(HM_ERROR_INVALID_ARGUMENT, "args->codes is 0: the codes are required");
    if (x.scales == 0)
      fail(HM_ERROR_INVALID_ARGUMENT, "args->scales is 0: the scales are required");
    core::require_aligned(x.a, 2, "args->a");
    core::require_aligned(x.perm, 4, "args->perm");
    core::require_aligned(x.scales, 4, "args->scales");

    if (!state->device)
      fail(HM_ERROR_NO_DEVICE, "the context has no device (HM_NO_DEVICE, for ahead-of-time "
                               "compilation): quantizing on the device needs one");
    const runtime::Device& device = *state->device;
    const auto cu_stream = static_cast<runtime::CUstream>(stream);
    // Each buffer's allocation must hold what the call touches: a [m][k] 16-bit values, perm
    // [k] int32, codes [m][k] bytes, scales [m][groups] f32 (within a's size, checked above).
    const uint64_t mk = static_cast<uint64_t>(x.m) * static_cast<uint64_t>(x.k);
    check_device_pointer(device, "args->a", x.a, mk * 2);
    check_device_pointer(device, "args->perm", x.perm, static_cast<uint64_t>(x.k) * 4);
    check_device_pointer(device, "args->codes", x.codes, mk);
    check_device_pointer(device, "args->scales", x.scales,
                         static_cast<uint64_t>(x.m) * static_cast<uint64_t>(groups) * 4);
    check_stream(device, cu_stream);
    // Built (or fetched) before anything is launched, so a compile error leaves outputs untouched.
    const hm_kernel& kernel = utility_kernel(state, generated);
    if (x.m == 0) return;

    actquant::Params p{};
    p.a = reinterpret_cast<const uint16_t*>(x.a);
    p.perm = reinterpret_cast<const int32_t*>(x.perm);
    p.codes = reinterpret_cast<uint8_t*>(x.codes);
    p.scales = reinterpret_cast<float*>(x.scales);
    p.m = x.m;
    p.k = x.k;
    p.group_k = x.group_k > 0 ? x.group_k : x.k;
    p.groups = groups;
    const bool k_vectors = x.k % actquant::kVector == 0;
    p.flags = (k_vectors && x.perm == 0 && x.a % 16 == 0 ? actquant::kVectorLoads : 0u) |
              (k_vectors && x.codes % 8 == 0 ? actquant::kVectorStores : 0u);
    const int sms = device.properties().multiprocessors > 0 ? device.properties().multiprocessors : 1;
    void* kernel_args[] = {&p};
    Geometry g;
    uint32_t ranks = 0;
    if (plan_cluster_rows(p, state->arch, device, sms, g, ranks)) {
      runtime::launch_with_cluster(device, kernel.function, runtime::Dim3{g.blocks, 1, 1},
                                   runtime::Dim3{g.threads, 1, 1}, runtime::Dim3{ranks, 1, 1},
                                   g.shared, cu_stream, kernel_args, kernel.entry.c_str());
      return;
    }
    g = plan_geometry(p, sms);
    runtime::launch(device, kernel.function, runtime::Dim3{g.blocks, 1, 1},
                    runtime::Dim3{g.threads, 1, 1}, g.shared, cu_stream, kernel_args,
                    kernel.entry.c_str());
  });
}

}  // extern "C"
