// Kernel families. A family is one device template under kernels/humming/gemm/ plus one host
// file under src/gemm/ that says everything the library needs to know about it: which formats it
// runs (and why not the others), its default tiles per range of M, how a tuning entry becomes a
// tile, the generated source of a tile, and, at call time, the geometry, the argument
// marshalling and the launch. The registry (registry.cpp, one line per family) is the one list
// of them: plans dispatch through it, and hm_format_kernels, the support matrix's "kernels"
// lines, `humming support` and the API tests ask it, so none of them can claim a kernel that is
// not there. docs/families.md walks through adding one.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/arch.hpp"
#include "core/format.hpp"
#include "jit/codegen.hpp"
#include "quant/layout.hpp"
#include "runtime/device.hpp"
#include "runtime/driver_types.hpp"
#include "runtime/tensor_map.hpp"

#include <nlohmann/json_fwd.hpp>

struct hm_launch_params;

namespace hm::gemm {

// One compile-time shape of a family's kernel. Opaque to plans: they only compare, name and
// hand tiles back to the family that made them.
class Tile {
 public:
  virtual ~Tile() = default;
  // Every field that changes the compiled kernel (logs, hm_plan_describe, entry names).
  virtual std::string name() const = 0;
  // The tuning JSON entry that parses back to this tile.
  virtual std::string json() const = 0;
  // The same kernel (tiles of the same family only).
  virtual bool same(const Tile& other) const = 0;
  // Rows of C (tokens, or MoE assignment slots) one block computes.
  virtual int rows_per_block() const = 0;
};

// What a family sees of the plan's layer.
struct Layer {
  core::Format format;
  quant::PackedShape shape;
  core::Arch arch;
  std::string arch_name;             // the compile target ("sm_90a", "compute_90")
  const runtime::Device* device;     // null: an ahead-of-time plan
  int multiprocessors;               // the device's, or 132 (an H100/H200) without one
};
// The layer of `format` compiled for `arch` (named `arch_name`), on `device` or none.
Layer make_layer(const core::Format& format, const core::Arch& arch, const std::string& arch_name,
                 const runtime::Device* device);

// One call: the caller's arguments (their pointers checked against the device by the API
// layer), M (in [1, HM_MAX_M], within the plan's max_m) and the stream.
struct Call {
  const hm_launch_params& params;
  int64_t m;
  runtime::CUstream stream;
  // The kernel's cache of encoded TMA maps (the plan keeps one per kernel); null: every map is
  // encoded for this call.
  runtime::TensorMapCache* tensor_maps = nullptr;
};

class Family {
 public:
  virtual ~Family() = default;
  // "dense_mma": the registry's, hm_format_kernels' and the support matrix's name, and the
  // prefix of its kernels' entry names.
  virtual const char* name() const = 0;
  // The tuning JSON's "kernel" value for this family ("mma").
  virtual const char* tuning_name() const = 0;
  // Why the family cannot run `format` (valid for `arch`) on `arch`, or "" when it can.
  virtual std::string gap(const core::Format& format, const core::Arch& arch) const = 0;
  // Default tiles, by the largest M each serves (the last: any M), for a format it runs.
  virtual std::vector<std::pair<int64_t, std::shared_ptr<const Tile>>> default_tiles(
      const Layer& layer) const = 0;
  // A tuning JSON entry (an object) -> a tile; throws HM_ERROR_PARSE naming `where` and the key.
  virtual std::shared_ptr<const Tile> parse_tile(const nlohmann::json& entry,
                                                 const std::string& where) const = 0;
  // Throws HM_ERROR_UNSUPPORTED when the tile cannot run the layer (checked at plan creation).
  virtual void check_tile(const Tile& tile, const Layer& layer) const = 0;
  // The generated source and entry name of a tile's kernel for the layer.
  virtual jit::GeneratedKernel generate(const Tile& tile, const Layer& layer) const = 0;
  // After the kernel of a tile serving M in [lo, hi] is loaded: throws HM_ERROR_UNSUPPORTED when
  // some such call could not launch on the layer's device (checked once, at prepare).
  virtual void check_loaded(const Tile& tile, const Layer& layer, runtime::CUfunction function,
                            const std::string& entry, int64_t lo, int64_t hi) const = 0;
  // The largest workspace a call with M in [lo, hi] needs, in bytes.
  virtual uint64_t workspace_bytes(const Tile& tile, const Layer& layer, int64_t lo,
                                   int64_t hi) const = 0;
  // The bytes a call with M = m reads or writes from each pointer slot's address, into
  // bytes[0 .. HM_ARG_MASKED_M] (humming.h's sizes: A [M][K], C [M][N], the packed buffers,
  // the workspace the call uses ...); 0 where the host cannot know (unset slots, and the MoE
  // routing lists, how far those are read is device data); UINT64_MAX for a size beyond 64
  // bits. Throws first what `launch` would for the slots themselves (set or not as the format
  // needs, aligned), so that those errors win over a size; other arguments `launch` refuses (a
  // bad HM_ARG_TOP_K) give 0 for what they size. hm_plan_gemm checks the pointers' allocations
  // against these before launch.
  virtual void extents(const Tile& tile, const Layer& layer, const hm_launch_params& params,
                       int64_t m, uint64_t* bytes) const = 0;
  // What a call with M = m runs (hm_plan_describe).
  virtual std::string describe(const Tile& tile, const Layer& layer, int64_t m) const = 0;
  // Checks the call's arguments against the format (which slots, alignment, workspace),
  // marshals them into the kernel's parameters and launches `function`.
  virtual void launch(const Tile& tile, const Layer& layer, runtime::CUfunction function,
                      const std::string& entry, const Call& call) const = 0;
};

// The tile that serves M <= max_m (the last range of a table: any M), and its family.
struct Range {
  int64_t max_m;
  const Family* family;
  std::shared_ptr<const Tile> tile;
};

// Every family, in the order a plan prefers them (registry.cpp).
const std::vector<const Family*>& families();

// The family a tuning JSON "kernel" value names, or null.
const Family* family_by_tuning_name(const std::string& name);

// The families that run `format` on `arch` (the format valid there).
std::vector<const Family*> families_for(const core::Format& format, const core::Arch& arch);

// The names of the families that run `format` on `arch`, in registry order (the support
// matrix's core::KernelFamiliesOf).
std::vector<std::string> family_names(const core::Format& format, const core::Arch& arch);

// The names of the families that run `format` (validated first) on `arch`, or with no arch on
// any target where the format is valid; throws HM_ERROR_UNSUPPORTED naming why when none does
// (hm_format_kernels).
std::vector<std::string> families_running(const core::Format& format,
                                          const std::optional<core::Arch>& arch);

// "" when some family runs `format` on `arch`; else one sentence per family saying why not.
std::string kernel_gap(const core::Format& format, const core::Arch& arch);

// Throws HM_ERROR_UNSUPPORTED with kernel_gap's reasons when no family runs the format.
void require_kernel(const core::Format& format, const core::Arch& arch);

// The default table of a layer: the first family in registry order that runs it.
std::vector<Range> default_ranges(const Layer& layer);

// {"dense": [{"max_m": 16, "kernel": "wgmma", ...}, ...]} -> a table (docs/tuning.md): entries
// in increasing max_m, the last serving every larger M; "kernel" names the family by its tuning
// name ("mma" when absent). Throws HM_ERROR_PARSE naming what is wrong.
std::vector<Range> parse_ranges(const std::string& json);

// Throws HM_ERROR_UNSUPPORTED when a range's family does not run the layer or its tile cannot.
void check_ranges(const std::vector<Range>& ranges, const Layer& layer);

// The index of the range serving m.
size_t range_of(const std::vector<Range>& ranges, int64_t m);

}  // namespace hm::gemm
