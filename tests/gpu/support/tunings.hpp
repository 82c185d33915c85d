// Tuning overrides (docs/tuning.md) that force each dense kernel and wgmma tile shape the
// defaults may not reach on the test GPU; shared by the dense GEMM tests of every activation
// width.
#pragma once

namespace hm::gpu_test::tunings {

// Tuning overrides that force each kernel and tile the defaults may not reach on this GPU.
inline constexpr const char* kForceMma =
    R"({"dense": [{"max_m": 16, "block_m": 16, "warps": 4, "warp_strips": 1},
                  {"max_m": 32, "block_m": 32, "warps": 4, "warp_strips": 2},
                  {"block_m": 64, "warps": 4, "warp_strips": 2}]})";
inline constexpr const char* kWgmmaWide =
    R"({"dense": [{"max_m": 8, "kernel": "wgmma", "block_m": 8, "warps": 8, "stages": 3},
                  {"max_m": 64, "kernel": "wgmma", "block_m": 24, "warps": 4, "stages": 2,
                   "pipeline": "mbarrier"},
                  {"kernel": "wgmma", "block_m": 256, "warps": 8, "stages": 4}]})";
// The same with each warp dequantizing one chunk ahead: the fewest stages each pipeline allows
// (3 with a barrier, 2 with mbarriers), where a missed wait or an early refill shows first.
inline constexpr const char* kWgmmaAhead =
    R"({"dense": [{"max_m": 8, "kernel": "wgmma", "block_m": 8, "warps": 4, "stages": 3,
                   "dequant_ahead": true},
                  {"max_m": 64, "kernel": "wgmma", "block_m": 40, "warps": 8, "stages": 2,
                   "pipeline": "mbarrier", "dequant_ahead": true},
                  {"kernel": "wgmma", "block_m": 128, "warps": 4, "stages": 3,
                   "dequant_ahead": true}]})";
// Activations and weights copied by TMA (mbarrier pipeline only): rows past M and strips past N
// come from the tensor maps' zero fill, so odd M and N check the box bounds.
inline constexpr const char* kWgmmaTma =
    R"({"dense": [{"max_m": 8, "kernel": "wgmma", "block_m": 8, "warps": 4, "stages": 4,
                   "pipeline": "mbarrier", "copy": "tma"},
                  {"max_m": 64, "kernel": "wgmma", "block_m": 40, "warps": 8, "stages": 2,
                   "pipeline": "mbarrier", "copy": "tma", "dequant_ahead": true},
                  {"kernel": "wgmma", "block_m": 128, "warps": 16, "stages": 3,
                   "pipeline": "mbarrier", "copy": "tma"}]})";

// K splits that run as one cluster and meet in shared memory (no workspace): with the block
// barrier, with mbarriers, and dequantizing ahead. Small N and K here make the splits few, so
// M = 1 .. 300 see cluster sizes 2 to 8 and ragged last splits.
inline constexpr const char* kWgmmaCluster =
    R"({"dense": [{"max_m": 8, "kernel": "wgmma", "block_m": 8, "warps": 4, "stages": 4,
                   "split": "cluster"},
                  {"max_m": 64, "kernel": "wgmma", "block_m": 40, "warps": 8, "stages": 3,
                   "pipeline": "mbarrier", "dequant_ahead": true, "split": "cluster"},
                  {"kernel": "wgmma", "block_m": 128, "warps": 8, "stages": 3,
                   "dequant_ahead": true, "split": "cluster"}]})";
// A warp that only copies (TMA), with two stages where a missed release shows first, with
// dequantization ahead, with global and cluster split-K. Formats whose group slots are not
// consecutive rows (g48, g96) cannot use it; plan creation must say so.
inline constexpr const char* kWgmmaProducer =
    R"({"dense": [{"max_m": 8, "kernel": "wgmma", "block_m": 8, "warps": 4, "stages": 2,
                   "pipeline": "mbarrier", "copy": "tma", "producer": true},
                  {"max_m": 64, "kernel": "wgmma", "block_m": 40, "warps": 8, "stages": 3,
                   "pipeline": "mbarrier", "copy": "tma", "producer": true,
                   "dequant_ahead": true, "split": "cluster"},
                  {"kernel": "wgmma", "block_m": 128, "warps": 8, "stages": 4,
                   "pipeline": "mbarrier", "copy": "tma", "producer": true, "split": "cluster"}]})";

}  // namespace hm::gpu_test::tunings
