// The struct half of the ABI promise: callers built against another header version. A caller's
// option or info struct may be smaller than this library's (an older header: the library must
// never write past it) or larger (a newer header: the library reads and writes only the fields
// it knows, and an array of such structs is stepped by the caller's size).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "humming.h"

namespace {

std::string last_error() {
  char buf[1024];
  hm_last_error_message(buf, sizeof buf);
  return buf;
}

constexpr uint64_t kCanary = 0x1122334455667788ull;

// hm_converted_layer_info_t as the first release laid it out (before `note`), followed by a
// canary where a newer struct's `note` would be.
struct OldInfo {
  unsigned char bytes[offsetof(hm_converted_layer_info_t, note)];
  uint64_t canary;
};
static_assert(sizeof(OldInfo) == offsetof(hm_converted_layer_info_t, note) + sizeof(uint64_t),
              "no padding between the old struct and the canary");

// An FP8 layer (e4m3 weights with one f32 scale per channel), 16 x 32.
hm_converted_layer_t* fp8_layer(std::vector<uint8_t>& weight, std::vector<float>& scale) {
  weight.assign(16 * 32, 0x38);  // 1.0 in e4m3
  scale.assign(16, 0.5f);
  hm_checkpoint_tensor_t t[2];
  hm_checkpoint_tensor_init(&t[0]);
  t[0].name = "weight";
  t[0].dtype = "F8_E4M3";
  t[0].ndim = 2;
  t[0].shape[0] = 16;
  t[0].shape[1] = 32;
  t[0].data = weight.data();
  t[0].bytes = weight.size();
  hm_checkpoint_tensor_init(&t[1]);
  t[1].name = "weight_scale";
  t[1].dtype = "F32";
  t[1].ndim = 1;
  t[1].shape[0] = 16;
  t[1].data = scale.data();
  t[1].bytes = scale.size() * sizeof(float);
  hm_converted_layer_t* layer = nullptr;
  EXPECT_EQ(hm_convert_layer(HM_SCHEME_FP8, t, 2, nullptr, &layer), HM_SUCCESS) << last_error();
  return layer;
}

TEST(StructAbi, SizedInitWritesOnlyTheCallersBytes) {
  OldInfo old;
  old.canary = kCanary;
  hm_converted_layer_info_init_sized(reinterpret_cast<hm_converted_layer_info_t*>(&old),
                                     sizeof old.bytes);
  EXPECT_EQ(old.canary, kCanary) << "the initializer wrote past the caller's struct";
  uint32_t declared = 0;
  std::memcpy(&declared, old.bytes, sizeof declared);
  EXPECT_EQ(declared, sizeof old.bytes);

  // The library then fills the fields the old struct has and leaves `note` (past it) alone.
  std::vector<uint8_t> weight;
  std::vector<float> scale;
  hm_converted_layer_t* layer = fp8_layer(weight, scale);
  ASSERT_NE(layer, nullptr);
  EXPECT_EQ(hm_converted_layer_info(layer, reinterpret_cast<hm_converted_layer_info_t*>(&old)),
            HM_SUCCESS)
      << last_error();
  EXPECT_EQ(old.canary, kCanary) << "the info call wrote past the caller's struct";
  hm_converted_layer_destroy(layer);
}

TEST(StructAbi, SizedInitOfALargerStructZeroesWhatTheLibraryDoesNotKnow) {
  struct Newer {
    hm_plan_options_t known;
    uint64_t added_later;
  } newer;
  std::memset(&newer, 0xab, sizeof newer);
  hm_plan_options_init_sized(&newer.known, sizeof newer);
  EXPECT_EQ(newer.known.struct_size, sizeof newer);
  EXPECT_EQ(newer.added_later, 0u);
  // The library's defaults for the fields it knows are those of hm_plan_options_init.
  hm_plan_options_t reference;
  hm_plan_options_init(&reference);
  reference.struct_size = sizeof newer;
  EXPECT_EQ(std::memcmp(&newer.known, &reference, sizeof reference), 0);
  // The HM_INIT spelling passes the caller's own size.
  hm_plan_options_t plain;
  HM_INIT(hm_plan_options, &plain);
  EXPECT_EQ(plain.struct_size, sizeof plain);
  // NULL and sizes that cannot hold struct_size write nothing.
  hm_plan_options_init_sized(nullptr, sizeof plain);
  uint16_t tiny = 0x5555;
  hm_plan_options_init_sized(reinterpret_cast<hm_plan_options_t*>(&tiny), sizeof tiny);
  EXPECT_EQ(tiny, 0x5555);
}

// A caller built against a newer header passes arrays of its larger hm_checkpoint_tensor_t:
// the library steps through them by their struct_size, and refuses mixed sizes.
TEST(StructAbi, CheckpointTensorArraysAreSteppedByTheCallersStructSize) {
  struct Newer {
    hm_checkpoint_tensor_t known;
    uint64_t added_later;
  };
  std::vector<uint8_t> weight(16 * 32, 0x38);
  std::vector<float> scale(16, 0.5f);
  Newer t[2];
  for (Newer& n : t) {
    hm_checkpoint_tensor_init_sized(&n.known, sizeof n);
    n.added_later = kCanary;
  }
  t[0].known.name = "weight";
  t[0].known.dtype = "F8_E4M3";
  t[0].known.ndim = 2;
  t[0].known.shape[0] = 16;
  t[0].known.shape[1] = 32;
  t[0].known.data = weight.data();
  t[0].known.bytes = weight.size();
  t[1].known.name = "weight_scale";
  t[1].known.dtype = "F32";
  t[1].known.ndim = 1;
  t[1].known.shape[0] = 16;
  t[1].known.data = scale.data();
  t[1].known.bytes = scale.size() * sizeof(float);
  hm_converted_layer_t* layer = nullptr;
  ASSERT_EQ(hm_convert_layer(HM_SCHEME_FP8, &t[0].known, 2, nullptr, &layer), HM_SUCCESS)
      << last_error();
  hm_converted_layer_destroy(layer);

  t[1].known.struct_size = sizeof(hm_checkpoint_tensor_t);
  EXPECT_EQ(hm_convert_layer(HM_SCHEME_FP8, &t[0].known, 2, nullptr, &layer),
            HM_ERROR_INVALID_STRUCT_SIZE);
  EXPECT_NE(last_error().find("the elements of one array share one size"), std::string::npos)
      << last_error();
  t[0].known.struct_size = sizeof(hm_checkpoint_tensor_t) + 4;  // not a possible stride
  EXPECT_EQ(hm_convert_layer(HM_SCHEME_FP8, &t[0].known, 1, nullptr, &layer),
            HM_ERROR_INVALID_STRUCT_SIZE);
  EXPECT_NE(last_error().find("alignment"), std::string::npos) << last_error();
}

// A caller built against a newer header learns from struct_size which fields were filled.
TEST(StructAbi, FilledInfoStructsReportTheBytesFilled) {
  struct Newer {
    hm_canonical_sizes_t known;
    uint64_t added_later;
  } newer;
  HM_INIT(hm_canonical_sizes, &newer.known);
  EXPECT_EQ(newer.known.struct_size, sizeof(hm_canonical_sizes_t));  // sizeof newer.known
  hm_canonical_sizes_init_sized(&newer.known, sizeof newer);
  EXPECT_EQ(newer.known.struct_size, sizeof newer);
  hm_format_t* f = nullptr;
  ASSERT_EQ(hm_format_parse("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=256", &f), HM_SUCCESS);
  ASSERT_EQ(hm_format_canonical_sizes(f, &newer.known), HM_SUCCESS) << last_error();
  EXPECT_EQ(newer.known.struct_size, sizeof(hm_canonical_sizes_t));
  EXPECT_EQ(newer.known.codes, 256u * 256u);
  EXPECT_EQ(newer.added_later, 0u);
  hm_format_destroy(f);

  struct NewerRuntime {
    hm_runtime_info_t known;
    uint64_t added_later;
  } runtime;
  hm_runtime_info_init_sized(&runtime.known, sizeof runtime);
  ASSERT_EQ(hm_runtime_info(&runtime.known), HM_SUCCESS) << last_error();
  EXPECT_EQ(runtime.known.struct_size, sizeof(hm_runtime_info_t));
  EXPECT_EQ(runtime.added_later, 0u);
}

TEST(StructAbi, CountsAndSizesThatCannotBeRealAreArgumentErrors) {
  int64_t groups = 0;
  EXPECT_EQ(hm_activation_scale_groups(INT64_MAX, 8, &groups), HM_SUCCESS) << last_error();
  EXPECT_EQ(groups, INT64_MAX / 8 + 1);
  EXPECT_EQ(hm_activation_scale_groups(INT64_MAX - 3, INT32_MAX, &groups), HM_SUCCESS);
  EXPECT_GT(groups, 0);

  std::vector<uint8_t> weight;
  std::vector<float> scale;
  hm_converted_layer_t* layer = fp8_layer(weight, scale);
  ASSERT_NE(layer, nullptr);
  const hm_converted_layer_t* one = layer;
  hm_converted_layer_t* stacked = nullptr;
  EXPECT_EQ(hm_converted_layer_stack(&one, SIZE_MAX, HM_STACK_EXPERTS, &stacked),
            HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("'count'"), std::string::npos) << last_error();
  hm_converted_layer_destroy(layer);
}

}  // namespace
