// hm_pack_device on a real GPU against hm_pack, byte for byte: every weight width 1..8 with 16-,
// 8- and 4-bit activations (b <= a), every integer kind and float weights, ragged N and K, several
// experts, every side-tensor kind. Skipped (exit 77, tests/support/gpu_main.cpp) without a GPU.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/support/dense_layer.hpp"
#include "humming.h"
#include "support/pack_device_check.hpp"

namespace {

using hm::gpu_test::Gpu;  // a context on device 0

// The weight dtype of width b in one of three integer kinds (signed, biased, unsigned with zero
// points), chosen by `kind`. One bit has only unsigned codes (int1 and uint1b1 hold no positive
// value for symmetric scales): uint1, with and without zero points.
std::string integer_weight(int b, int kind) {
  const std::string bits = std::to_string(b);
  if (b == 1) return "w=uint1";
  if (kind == 0) return "w=int" + bits;
  if (kind == 1) return "w=uint" + bits + "b" + std::to_string(1 << (b - 1));
  return "w=uint" + bits;
}
bool with_zero_points(int b, int kind) { return kind == 2 || (b == 1 && kind == 0); }

// Shapes: ragged in both N and K (not multiples of 16 / 64), and one with a partial last group.
struct Shape {
  const char* text;
};
const Shape kShapes[] = {{"n=100 k=300 e=1"}, {"n=17 k=4100 e=2"}, {"n=130 k=96 e=3"}};

void run_widths(hm_context_t* ctx, const char* act, const char* scale, int max_bits) {
  for (int b = 1; b <= max_bits; ++b) {
    for (int kind = 0; kind < 3; ++kind) {
      const Shape& shape = kShapes[(b + kind) % 3];
      std::string text = integer_weight(b, kind) + " a=" + act + " c=f16 s=" + scale;
      if (with_zero_points(b, kind)) text += " zp=uint" + std::to_string(b);
      text += std::string(" ") + shape.text;
      hm::test::expect_device_pack_matches_host(ctx, text, 100 * b + kind);
    }
  }
}

TEST(PackDeviceGpu, IntegerWeightsWith16BitActivations) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  run_widths(gpu.ctx, "f16", "f16:g64", 8);
}

TEST(PackDeviceGpu, IntegerWeightsWith8BitActivations) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  run_widths(gpu.ctx, "int8", "f32:channel", 8);
}

TEST(PackDeviceGpu, IntegerWeightsWith4BitActivations) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  run_widths(gpu.ctx, "int4", "f16:g32", 4);
}

TEST(PackDeviceGpu, FloatWeightsAndEverySideTensor) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  for (const char* text : {
           "w=e2m1 a=bf16 c=bf16 s=ue8m0:g32 n=130 k=384 e=2",
           "w=e2m1 a=f16 c=f16 s=e4m3:g16+tensor n=70 k=200 e=3",
           "w=e2m1 a=e2m1 c=bf16 s=e4m3:g16+tensor n=64 k=128 e=2",
           "w=e3m2 a=e4m3 c=bf16 s=f32:channel n=33 k=130",
           "w=e4m3 a=bf16 c=bf16 s=bf16:channel n=300 k=1000",
           "w=e4m3 a=e4m3 c=bf16 s=f32:b128x128 n=300 k=1000 e=2",
           "w=uint4 a=bf16 c=bf16 s=bf16:g128 zp=bf16 n=200 k=520",
       }) {
    hm::test::expect_device_pack_matches_host(gpu.ctx, text, 99);
  }
}

TEST(PackDeviceGpu, LargeLayerAndCodesOnly) {
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  // 4 x 512 strips x 144 chunks = 73728 blocks of 4 chunks: more than the launch's 65535
  // blocks, so the grid strides.
  hm::test::expect_device_pack_matches_host(
      gpu.ctx, "w=uint4b8 a=f16 c=f16 s=f16:g128 n=8192 k=9216 e=4", 5);
  hm::test::expect_device_pack_matches_host(gpu.ctx, "w=uint3b4 a=f16 c=f16 s=f16:g64 n=190 k=900",
                                            6, /*codes_only=*/true);
}

}  // namespace
