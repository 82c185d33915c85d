// The dense GEMM families (dense_family.cpp): 16-bit activations times quantized weights, on
// the wgmma kernel (sm_90a) or the mma.sync kernel (sm_75 on). The class is public so that
// families built on the same kernels and tiles (the MoE family, moe_family.cpp) reuse its
// tuning, code generation and argument checks.
#pragma once

#include <memory>
#include <string>

#include "gemm/dense_launch.hpp"
#include "gemm/family.hpp"
#include "tune/dense.hpp"

namespace hm::gemm {

// A tune::DenseTile as a family tile.
struct DenseTileOf final : Tile {
  explicit DenseTileOf(const tune::DenseTile& t) : tile(t) {}
  tune::DenseTile tile;
  std::string name() const override { return tile.name(); }
  std::string json() const override { return tile.json(); }
  int rows_per_block() const override { return tile.block_m; }
  bool same(const Tile& other) const override;
};
const tune::DenseTile& dense_tile(const Tile& tile);

class DenseFamily : public Family {
 public:
  explicit DenseFamily(tune::DenseKernel kernel) : kernel_(kernel) {}
  const char* name() const override;
  const char* tuning_name() const override;
  std::string gap(const core::Format& format, const core::Arch& arch) const override;
  std::vector<std::pair<int64_t, std::shared_ptr<const Tile>>> default_tiles(
      const Layer& layer) const override;
  std::shared_ptr<const Tile> parse_tile(const nlohmann::json& entry,
                                         const std::string& where) const override;
  void check_tile(const Tile& tile, const Layer& layer) const override;
  jit::GeneratedKernel generate(const Tile& tile, const Layer& layer) const override;
  void check_loaded(const Tile& tile, const Layer& layer, runtime::CUfunction function,
                    const std::string& entry, int64_t lo, int64_t hi) const override;
  uint64_t workspace_bytes(const Tile& tile, const Layer& layer, int64_t lo,
                           int64_t hi) const override;
  void extents(const Tile& tile, const Layer& layer, const hm_launch_params& params, int64_t m,
               uint64_t* bytes) const override;  // dense and MoE layers alike
  std::string describe(const Tile& tile, const Layer& layer, int64_t m) const override;
  void launch(const Tile& tile, const Layer& layer, runtime::CUfunction function,
              const std::string& entry, const Call& call) const override;

 protected:
  // The call's weight-side, A and C pointers checked against the format (set when it needs
  // them, unset when not, aligned) into `p`; the MoE routing slots must be unset unless `moe`.
  void marshal(const Layer& layer, const hm_launch_params& params, bool moe,
               DenseParams& p) const;
  // Throws HM_ERROR_UNSUPPORTED when `launch`'s clusters (its K splits) cannot all run at once
  // on the device (a MIG slice or a heavy tile may not hold 8); `when` says which calls,
  // `way_out` what to change.
  static void check_cluster_fits(const tune::DenseTile& tile, const Layer& layer,
                                 runtime::CUfunction function, const std::string& entry,
                                 const tune::DenseLaunch& launch, const std::string& when,
                                 const std::string& way_out);
  // Throws HM_ERROR_UNSUPPORTED when the tile's shared memory exceeds what the layer's device
  // allows a block (a tuning JSON written for a larger GPU), and opts `function` in to it: both
  // at prepare, so that neither a first call (perhaps under stream capture) nor a refusal waits
  // for it.
  static void check_shared_memory(const tune::DenseTile& tile, const Layer& layer,
                                  runtime::CUfunction function, const std::string& entry);
  DenseGeometry geometry(const Tile& tile, const Layer& layer, int64_t m) const;
  tune::DenseKernel kernel_;
};

const Family& dense_wgmma_family();  // sm_90a warpgroup MMA (gemm/dense_wgmma.cuh)
const Family& dense_mma_family();    // mma.sync, every arch from sm_75 (gemm/dense_mma.cuh)

}  // namespace hm::gemm
