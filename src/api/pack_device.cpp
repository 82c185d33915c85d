// hm_pack_device: the standard layout written on the GPU (kernels/humming/layout/pack_kernel.cuh)
// from canonical codes already in device memory. Argument checks and launches live here; the
// shapes come from the host packer's packed_shape, so both packers agree on every size.
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>

#include "api/context.hpp"
#include "api/format.hpp"
#include "api/guard.hpp"
#include "api/device_check.hpp"
#include "api/utility.hpp"
#include "core/address.hpp"
#include "jit/codegen_pack.hpp"
#include "quant/layout.hpp"
#include "quant/quantize.hpp"
#include "runtime/launch.hpp"
#include <humming/layout/pack.h>

static_assert(offsetof(hm_device_canonical_t, struct_size) == 0, "struct_size comes first");
static_assert(offsetof(hm_device_packed_t, struct_size) == 0, "struct_size comes first");
// The kernels read their parameters as these structs: 8-byte fields, no host-only padding.
static_assert(sizeof(hm::pack::WeightParams) == 8 * 7 + 4 * 2, "WeightParams layout");
static_assert(sizeof(hm::pack::SideParams) == 8 * 7, "SideParams layout");

namespace hm::api {
namespace {

// One side tensor: whether the format has it, and the in / out pair. Returns whether to pack it.
bool side_wanted(bool format_has, uint64_t in, uint64_t out, const char* what) {
  if (!format_has) {
    if (in != 0 || out != 0)
      fail(HM_ERROR_INVALID_ARGUMENT, std::string(in != 0 ? "in->" : "out->") + what +
                                          " is set, but the format has no " + what);
    return false;
  }
  if ((in == 0) != (out == 0))
    fail(HM_ERROR_INVALID_ARGUMENT,
         std::string(in == 0 ? "in->" : "out->") + what + " is 0 but " +
             (in == 0 ? "out->" : "in->") + what +
             " is set: set both to pack it, or neither to leave it to the caller");
  return in != 0;
}

uint32_t grid_for(int64_t items, int64_t per_block) {
  const int64_t blocks = (items + per_block - 1) / per_block;
  return static_cast<uint32_t>(blocks < pack::kMaxGridBlocks ? blocks : pack::kMaxGridBlocks);
}

struct SideJob {
  const char* what = "";  // "scales", "zero_points", "global_scale"
  uint64_t in = 0, out = 0;
  int element_bytes = 0;
  pack::SideParams params{};
};

}  // namespace
}  // namespace hm::api

using namespace hm;
using namespace hm::api;

extern "C" {

HM_API void hm_device_canonical_init(hm_device_canonical_t* weight) {
  if (weight == nullptr) return;
  std::memset(weight, 0, sizeof *weight);
  weight->struct_size = sizeof *weight;
}

HM_API void hm_device_packed_init(hm_device_packed_t* weight) {
  if (weight == nullptr) return;
  std::memset(weight, 0, sizeof *weight);
  weight->struct_size = sizeof *weight;
}

HM_API hm_status_t hm_pack_device(hm_context_t* context, const hm_format_t* format,
                                  const hm_device_canonical_t* in, const hm_device_packed_t* out,
                                  void* stream) {
  return HM_API_CALL({
    require_not_null(context, "context");
    const core::Format& f = format_of(format);
    require_not_null(in, "in");
    require_not_null(out, "out");
    require_struct_size(in->struct_size, sizeof(hm_device_canonical_t), "in");
    require_struct_size(out->struct_size, sizeof(hm_device_packed_t), "out");
    const std::shared_ptr<ContextState>& state = context->state;
    const quant::PackedShape s = quant::packed_shape(f);  // refuses formats without a layout
    const quant::CanonicalShape c = quant::canonical_shape(f);
    if (in->codes == 0) fail(HM_ERROR_INVALID_ARGUMENT, "in->codes is 0: every format has codes");
    if (out->weight == 0)
      fail(HM_ERROR_INVALID_ARGUMENT, "out->weight is 0: every format has a packed weight");
    core::require_aligned(out->weight, 16, "out->weight");  // 16-byte segment stores

    // Side tensors: [E][R][G] codes -> [E][groups][columns], zero-filled.
    SideJob jobs[3];
    int job_count = 0;
    auto add = [&](uint64_t src, uint64_t dst, int bytes, int64_t rows, int64_t groups_in,
                   int64_t groups, int64_t columns, const char* what) {
      const std::string in_name = std::string("in->") + what, out_name = std::string("out->") + what;
      core::require_aligned(src, bytes, in_name.c_str());
      core::require_aligned(dst, bytes, out_name.c_str());
      SideJob& j = jobs[job_count++];
      j.what = what;
      j.in = src;
      j.out = dst;
      j.element_bytes = bytes;
      j.params.in = reinterpret_cast<const void*>(src);
      j.params.out = reinterpret_cast<void*>(dst);
      j.params.rows = rows;
      j.params.groups_in = groups_in;
      j.params.groups = groups;
      j.params.columns = columns;
      j.params.total = s.experts * groups * columns;
    };
    if (side_wanted(s.scale_element_bytes > 0, in->scales, out->scales, "scales"))
      add(in->scales, out->scales, s.scale_element_bytes, c.scale_rows, c.groups_k, s.groups,
          s.scale_columns, "scales");
    if (side_wanted(s.zero_point_element_bytes > 0, in->zero_points, out->zero_points,
                    "zero_points"))
      add(in->zero_points, out->zero_points, s.zero_point_element_bytes, c.scale_rows, c.groups_k,
          s.groups, s.scale_columns, "zero_points");
    if (side_wanted(s.global_scale_bytes > 0, in->global_scale, out->global_scale,
                    "global_scale"))
      add(in->global_scale, out->global_scale, 4, 1, 1, 1, 1, "global_scale");

    if (!state->device)
      fail(HM_ERROR_NO_DEVICE, "the context has no device (HM_NO_DEVICE, for ahead-of-time "
                               "compilation): packing on the device needs one");
    const runtime::Device& device = *state->device;
    // Each allocation must hold its buffer: codes [E][N][K] bytes, the packed weight, and each
    // side tensor's [E][R][G] elements in and [E][groups][columns] out (sizes within the format's
    // limits, packed_shape above).
    const uint64_t experts = static_cast<uint64_t>(s.experts);
    check_device_pointer(device, "in->codes", in->codes,
                         experts * static_cast<uint64_t>(s.n) * static_cast<uint64_t>(s.k));
    check_device_pointer(device, "out->weight", out->weight, s.weight_bytes);
    for (int i = 0; i < job_count; ++i) {
      const SideJob& j = jobs[i];
      const uint64_t element = static_cast<uint64_t>(j.element_bytes);
      check_device_pointer(device, (std::string("in->") + j.what).c_str(), j.in,
                           experts * static_cast<uint64_t>(j.params.rows) *
                               static_cast<uint64_t>(j.params.groups_in) * element);
      check_device_pointer(device, (std::string("out->") + j.what).c_str(), j.out,
                           static_cast<uint64_t>(j.params.total) * element);
    }
    const auto cu_stream = static_cast<runtime::CUstream>(stream);
    const std::optional<bool> owns = device.owns_stream(cu_stream);
    if (owns && !*owns)
      fail(HM_ERROR_WRONG_DEVICE, "the stream does not belong to the context's device " +
                                      std::to_string(device.ordinal()));

    // Build (or fetch) everything before launching anything, so a compile error leaves the
    // outputs untouched.
    const hm_kernel& weight_kernel = utility_kernel(
        state, jit::pack_weight_kernel(s.weight_bits, s.act_bits, state->arch_name));
    const hm_kernel* side_kernel =
        job_count > 0 ? &utility_kernel(state, jit::pack_side_kernels(state->arch_name)) : nullptr;
    runtime::CUfunction side_functions[3] = {};
    for (int i = 0; i < job_count; ++i)
      side_functions[i] = side_kernel->module->function(jit::pack_side_entry(jobs[i].element_bytes));

    pack::WeightParams wp{};
    wp.codes = reinterpret_cast<const uint8_t*>(in->codes);
    wp.out = reinterpret_cast<uint8_t*>(out->weight);
    wp.n = s.n;
    wp.k = s.k;
    wp.strips = s.strips;
    wp.k_chunks = s.k_chunks;
    wp.chunks = s.experts * s.strips * s.k_chunks;
    wp.code_xor = s.code_xor;
    wp.pad_code = s.pad_code;  // hm_pack's padding: the dtype's code of zero
    void* weight_args[] = {&wp};
    runtime::launch(device, weight_kernel.function,
                    runtime::Dim3{grid_for(wp.chunks, pack::kWeightWarps), 1, 1},
                    runtime::Dim3{pack::kWeightWarps * 32, 1, 1}, 0, cu_stream, weight_args,
                    weight_kernel.entry.c_str());
    for (int i = 0; i < job_count; ++i) {
      const std::string entry = jit::pack_side_entry(jobs[i].element_bytes);
      void* side_args[] = {&jobs[i].params};
      runtime::launch(device, side_functions[i],
                      runtime::Dim3{grid_for(jobs[i].params.total, pack::kSideThreads), 1, 1},
                      runtime::Dim3{pack::kSideThreads, 1, 1}, 0, cu_stream, side_args,
                      entry.c_str());
    }
  });
}

}  // extern "C"
