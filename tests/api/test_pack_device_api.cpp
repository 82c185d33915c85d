// hm_pack_device on the mock driver: every argument check, and whole packs compared byte for byte
// with hm_pack. The mock runs the packer's per-lane device function (kernels/humming/layout/pack.h)
// on the host, so this checks the launcher, the argument marshalling and the kernel's lane logic;
// the CUDA thread mapping and stores are checked on a GPU (tests/gpu/test_pack_device.cpp).
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/support/mock_driver_test.hpp"
#include "humming.h"
#include "mock_driver/mock_loader.hpp"
#include "support/pack_device_check.hpp"

namespace {

using hm::test::last_error;
using hm::test::TemporaryDirectory;

class PackDeviceApi : public hm::test::MockDriverTest {
 protected:
  // One kernel cache for the whole suite: each (bits, activation) packer compiles once.
  static void SetUpTestSuite() { cache_ = new TemporaryDirectory("humming-pack-device-test"); }
  static void TearDownTestSuite() {
    delete cache_;
    cache_ = nullptr;
  }
  void SetUp() override {
    ctx_ = context(0);
    ASSERT_NE(ctx_, nullptr);
  }
  void TearDown() override { hm_context_destroy(ctx_); }
  static hm_context_t* context(int device, const char* arch = nullptr) {
    return hm::test::create_context(cache_->path(), device, arch);
  }
  static hm_format_t* format(const char* text) {
    hm_format_t* f = nullptr;
    EXPECT_EQ(hm_format_parse(text, &f), HM_SUCCESS) << last_error();
    return f;
  }
  static TemporaryDirectory* cache_;
  hm_context_t* ctx_ = nullptr;
};
TemporaryDirectory* PackDeviceApi::cache_ = nullptr;

// Expects `status`, and the message to name `needle`.
#define EXPECT_PACK_FAILS(call, status, needle)                                             \
  do {                                                                                      \
    EXPECT_EQ((call), (status)) << #call;                                                   \
    EXPECT_NE(last_error().find(needle), std::string::npos) << last_error();      \
  } while (0)

TEST_F(PackDeviceApi, InitHelpersSetStructSize) {
  hm_device_canonical_t in;
  std::memset(&in, 0xFF, sizeof in);
  hm_device_canonical_init(&in);
  EXPECT_EQ(in.struct_size, sizeof in);
  EXPECT_EQ(in.codes | in.scales | in.zero_points | in.global_scale, 0u);
  hm_device_packed_t out;
  std::memset(&out, 0xFF, sizeof out);
  hm_device_packed_init(&out);
  EXPECT_EQ(out.struct_size, sizeof out);
  EXPECT_EQ(out.weight | out.scales | out.zero_points | out.global_scale, 0u);
  hm_device_canonical_init(nullptr);  // no-ops
  hm_device_packed_init(nullptr);
}

TEST_F(PackDeviceApi, ChecksEveryArgument) {
  hm_format_t* f = format("w=uint4 a=f16 c=f16 s=f16:g128 zp=uint4 n=100 k=300");
  uint64_t buf = 0;
  ASSERT_EQ(hm_device_alloc(ctx_, 1 << 20, &buf), HM_SUCCESS);
  hm_device_canonical_t in;
  hm_device_canonical_init(&in);
  in.codes = buf;
  hm_device_packed_t out;
  hm_device_packed_init(&out);
  out.weight = buf + 65536;

  EXPECT_PACK_FAILS(hm_pack_device(nullptr, f, &in, &out, nullptr), HM_ERROR_INVALID_ARGUMENT,
                    "'context'");
  EXPECT_PACK_FAILS(hm_pack_device(ctx_, nullptr, &in, &out, nullptr), HM_ERROR_INVALID_ARGUMENT,
                    "'format'");
  EXPECT_PACK_FAILS(hm_pack_device(ctx_, f, nullptr, &out, nullptr), HM_ERROR_INVALID_ARGUMENT,
                    "'in'");
  EXPECT_PACK_FAILS(hm_pack_device(ctx_, f, &in, nullptr, nullptr), HM_ERROR_INVALID_ARGUMENT,
                    "'out'");

  // The pack of copies of `in` and `out` that `edit` changes must fail with `status`, and the
  // message name `needle`.
  using In = hm_device_canonical_t;
  using Out = hm_device_packed_t;
  const auto expect_refused = [&](hm_status_t status, const char* needle, const auto& edit) {
    SCOPED_TRACE(needle);
    In edited_in = in;
    Out edited_out = out;
    edit(edited_in, edited_out);
    EXPECT_PACK_FAILS(hm_pack_device(ctx_, f, &edited_in, &edited_out, nullptr), status, needle);
  };
  expect_refused(HM_ERROR_INVALID_STRUCT_SIZE, "in->struct_size",
                 [](In& i, Out&) { i.struct_size = 4; });
  expect_refused(HM_ERROR_INVALID_STRUCT_SIZE, "out->struct_size",
                 [](In&, Out& o) { o.struct_size = 4; });

  expect_refused(HM_ERROR_INVALID_ARGUMENT, "in->codes", [](In& i, Out&) { i.codes = 0; });
  expect_refused(HM_ERROR_INVALID_ARGUMENT, "out->weight", [](In&, Out& o) { o.weight = 0; });
  expect_refused(HM_ERROR_MISALIGNED, "out->weight must be 16-byte aligned",
                 [&](In&, Out& o) { o.weight = buf + 65536 + 4; });

  // Side tensors go in pairs; one the format lacks is refused.
  expect_refused(HM_ERROR_INVALID_ARGUMENT, "out->scales is 0 but in->scales is set",
                 [&](In& i, Out&) { i.scales = buf + 4096; });
  expect_refused(HM_ERROR_INVALID_ARGUMENT, "in->zero_points is 0 but out->zero_points is set",
                 [&](In&, Out& o) { o.zero_points = buf + 8192; });
  expect_refused(HM_ERROR_INVALID_ARGUMENT,
                 "in->global_scale is set, but the format has no global_scale",
                 [&](In& i, Out&) { i.global_scale = buf + 4096; });
  // f16 scales need 2-byte alignment; 1-byte zero points take any address.
  expect_refused(HM_ERROR_MISALIGNED, "in->scales must be 2-byte aligned", [&](In& i, Out& o) {
    i.scales = buf + 4097;
    o.scales = buf + 8192;
  });

  // A format the layout cannot hold is refused before anything runs.
  hm_format_t* wide = format("w=int8 a=int4 c=f16 s=f16:channel n=64 k=64");
  EXPECT_EQ(hm_pack_device(ctx_, wide, &in, &out, nullptr), HM_ERROR_UNSUPPORTED_FORMAT);
  hm_format_destroy(wide);

  // Memory of another device (the mock's device 1) is named.
  hm_context_t* other = context(1);
  ASSERT_NE(other, nullptr);
  uint64_t foreign = 0;
  ASSERT_EQ(hm_device_alloc(other, 1 << 16, &foreign), HM_SUCCESS);
  expect_refused(HM_ERROR_WRONG_DEVICE, "in->codes", [&](In& i, Out&) { i.codes = foreign; });
  hm_device_free(other, foreign);
  hm_context_destroy(other);

  hm::test::MockControl mock;
  mock.reset();
  EXPECT_EQ(hm_pack_device(ctx_, f, &in, &out, nullptr), HM_SUCCESS) << last_error();
  auto launch = mock.last_launch();
  ASSERT_TRUE(launch.has_value());
  EXPECT_EQ(std::string(launch->function), "hm_pack_weight_w4_a16");
  EXPECT_EQ(launch->block[0], 128u);
  EXPECT_EQ(launch->executed, 1);
  EXPECT_EQ(mock.launch_count(), 1) << "no side tensor was asked for: only the weight packer runs";

  hm_device_free(ctx_, buf);
  hm_format_destroy(f);
}

TEST_F(PackDeviceApi, ContextWithoutDeviceIsRefusedAfterTheArgumentChecks) {
  hm_context_t* aot = context(HM_NO_DEVICE, "sm_80");
  ASSERT_NE(aot, nullptr);
  hm_format_t* f = format("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=256");
  hm_device_canonical_t in;
  hm_device_canonical_init(&in);
  in.codes = 0x100000;
  hm_device_packed_t out;
  hm_device_packed_init(&out);
  out.weight = 0x200000;
  EXPECT_PACK_FAILS(hm_pack_device(aot, f, &in, &out, nullptr), HM_ERROR_NO_DEVICE, "no device");
  out.weight = 0x200008;
  EXPECT_EQ(hm_pack_device(aot, f, &in, &out, nullptr), HM_ERROR_MISALIGNED);
  hm_format_destroy(f);
  hm_context_destroy(aot);
}

TEST_F(PackDeviceApi, OutOfBoundsBuffersAreRefusedOrFailLikeTheDevice) {
  // A weight buffer smaller than the packed size is refused before any launch, naming it; where
  // the driver gives no allocation range, the mock reports the illegal address the GPU would,
  // and the launch fails with a status rather than corrupting memory.
  hm_format_t* f = format("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=256");
  uint64_t codes = 0, small = 0;
  ASSERT_EQ(hm_device_alloc(ctx_, 256 * 256, &codes), HM_SUCCESS);
  ASSERT_EQ(hm_device_alloc(ctx_, 1024, &small), HM_SUCCESS);
  hm_device_canonical_t in;
  hm_device_canonical_init(&in);
  in.codes = codes;
  hm_device_packed_t out;
  hm_device_packed_init(&out);
  out.weight = small;
  hm::test::MockControl mock;
  mock.reset();
  EXPECT_EQ(hm_pack_device(ctx_, f, &in, &out, nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("out->weight (0x"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("uses 32768 bytes"), std::string::npos) << last_error();
  EXPECT_FALSE(mock.last_launch().has_value()) << "a refused call must not launch";
  in.codes = small;  // [256][256] codes, one byte each
  out.weight = codes;
  EXPECT_EQ(hm_pack_device(ctx_, f, &in, &out, nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("in->codes (0x"), std::string::npos) << last_error();
  in.codes = codes;
  out.weight = small;
  hm::test::ScopedEnv no_range("HM_MOCK_NO_POINTER_RANGE", "1");
  EXPECT_NE(hm_pack_device(ctx_, f, &in, &out, nullptr), HM_SUCCESS);
  hm_device_free(ctx_, small);
  hm_device_free(ctx_, codes);
  hm_format_destroy(f);
}

TEST_F(PackDeviceApi, MatchesHostPackByteForByte) {
  // Widths with straddling values (3, 5, 7), each activation width, every side tensor kind,
  // ragged N and K, experts.
  for (const char* text : {
           "w=uint4b8 a=f16 c=f16 s=f16:g128 n=100 k=300 e=2",
           "w=int3 a=bf16 c=bf16 s=bf16:g64 n=17 k=130",
           "w=uint5 a=f16 c=f16 s=f16:g32 zp=uint5 n=70 k=200",
           "w=uint7b64 a=f16 c=f16 s=f32:b128x128 n=300 k=100",
           "w=e2m1 a=e4m3 c=bf16 s=ue8m0:g32 n=130 k=384 e=2",
           "w=e2m1 a=e2m1 c=bf16 s=e4m3:g16+tensor n=70 k=200 e=3",
       }) {
    hm::test::expect_device_pack_matches_host(ctx_, text, 1234);
  }
  hm::test::expect_device_pack_matches_host(ctx_, "w=uint4 a=f16 c=f16 s=f16:g128 zp=uint4 n=64 k=64",
                                            7, /*codes_only=*/true);
}

TEST_F(PackDeviceApi, CompilesEachWidthOncePerContext) {
  hm::test::MockControl mock;
  const int64_t before = mock.live_modules();
  hm::test::expect_device_pack_matches_host(ctx_, "w=uint2b2 a=f16 c=f16 s=f16:channel n=64 k=64",
                                            1);
  const int64_t after_first = mock.live_modules();
  EXPECT_EQ(after_first, before + 2) << "the weight packer and the side-tensor kernels";
  hm::test::expect_device_pack_matches_host(ctx_, "w=int2 a=bf16 c=bf16 s=bf16:g64 n=96 k=192", 2);
  EXPECT_EQ(mock.live_modules(), after_first) << "same widths: the loaded kernels are reused";
  hm_context_destroy(ctx_);
  ctx_ = nullptr;
  EXPECT_EQ(mock.live_modules(), before) << "the context unloads its utility kernels";
}

}  // namespace
