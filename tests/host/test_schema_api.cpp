// The conversion C API's contract: scheme names, _init helpers, struct sizes, NULL arguments,
// option checks, *out left NULL on failure, destroy(NULL).
#include <cstddef>

#include "test_schema_support.hpp"

namespace {

using namespace schema_test;

TEST(ConvertApi, SchemeNames) {
  const struct {
    const char* name;
    int32_t scheme;
  } names[] = {{"gptq", HM_SCHEME_GPTQ},
               {"AWQ", HM_SCHEME_AWQ},
               {"ct-pack", HM_SCHEME_CT_PACK},
               {"pack-quantized", HM_SCHEME_CT_PACK},
               {"int-quantized", HM_SCHEME_CT_INT8},
               {"float-quantized", HM_SCHEME_CT_FP8},
               {"nvfp4-pack-quantized", HM_SCHEME_CT_NVFP4},
               {"fp8", HM_SCHEME_FP8},
               {"gpt-oss", HM_SCHEME_MXFP4},
               {"modelopt", HM_SCHEME_NVFP4},
               {"bitnet", HM_SCHEME_BITNET}};
  for (const auto& n : names) {
    int32_t s = 0;
    EXPECT_EQ(hm_scheme_parse(n.name, &s), HM_SUCCESS) << n.name;
    EXPECT_EQ(s, n.scheme) << n.name;
  }
  int32_t s = 77;
  EXPECT_EQ(hm_scheme_parse("gguf", &s), HM_ERROR_PARSE);
  EXPECT_NE(last_error().find("gptq"), std::string::npos) << "lists the schemes: " << last_error();
  EXPECT_EQ(hm_scheme_parse(nullptr, &s), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(hm_scheme_parse("gptq", nullptr), HM_ERROR_INVALID_ARGUMENT);
}

TEST(ConvertApi, InitHelpers) {
  hm_checkpoint_tensor_t t;
  std::memset(&t, 0xab, sizeof t);
  hm_checkpoint_tensor_init(&t);
  EXPECT_EQ(t.struct_size, sizeof t);
  EXPECT_EQ(t.data, nullptr);
  hm_convert_options_t o;
  std::memset(&o, 0xab, sizeof o);
  hm_convert_options_init(&o);
  EXPECT_EQ(o.struct_size, sizeof o);
  EXPECT_EQ(o.activation, HM_DTYPE_NONE);
  EXPECT_EQ(o.progress, nullptr);
  hm_converted_layer_info_t i;
  std::memset(&i, 0xab, sizeof i);
  hm_converted_layer_info_init(&i);
  EXPECT_EQ(i.struct_size, sizeof i);
  EXPECT_EQ(i.weight.struct_size, sizeof i.weight);
  hm_checkpoint_tensor_init(nullptr);
  hm_convert_options_init(nullptr);
  hm_converted_layer_info_init(nullptr);
  hm_converted_layer_destroy(nullptr);
}

TEST(ConvertApi, ArgumentChecks) {
  std::vector<int32_t> qweight(16 * 8, 0);
  hm_checkpoint_tensor_t t;
  hm_checkpoint_tensor_init(&t);
  t.name = "qweight";
  t.dtype = "I32";
  t.ndim = 2;
  t.shape[0] = 16;
  t.shape[1] = 8;
  t.data = qweight.data();
  t.bytes = qweight.size() * 4;

  hm_converted_layer_t* layer = reinterpret_cast<hm_converted_layer_t*>(0x1);
  EXPECT_EQ(hm_convert_layer(99, &t, 1, nullptr, &layer), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(layer, nullptr) << "*out is NULL on failure";
  EXPECT_NE(last_error().find("HM_SCHEME_"), std::string::npos) << last_error();
  EXPECT_EQ(hm_convert_layer(HM_SCHEME_GPTQ, &t, 1, nullptr, nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(hm_convert_layer(HM_SCHEME_GPTQ, nullptr, 1, nullptr, &layer),
            HM_ERROR_INVALID_ARGUMENT);

  hm_checkpoint_tensor_t bad = t;
  bad.struct_size = 0;
  EXPECT_EQ(hm_convert_layer(HM_SCHEME_GPTQ, &bad, 1, nullptr, &layer),
            HM_ERROR_INVALID_STRUCT_SIZE);
  bad = t;
  bad.ndim = 9;
  EXPECT_EQ(hm_convert_layer(HM_SCHEME_GPTQ, &bad, 1, nullptr, &layer), HM_ERROR_INVALID_ARGUMENT);
  bad = t;
  bad.name = nullptr;
  EXPECT_EQ(hm_convert_layer(HM_SCHEME_GPTQ, &bad, 1, nullptr, &layer), HM_ERROR_INVALID_ARGUMENT);
  bad = t;
  bad.shape[0] = int64_t{1} << 62;  // bytes no longer match; the size check must not overflow
  bad.shape[1] = int64_t{1} << 62;
  EXPECT_EQ(hm_convert_layer(HM_SCHEME_GPTQ, &bad, 1, nullptr, &layer), HM_ERROR_INVALID_ARGUMENT);

  hm_convert_options_t o;
  hm_convert_options_init(&o);
  o.struct_size = 4;
  EXPECT_EQ(hm_convert_layer(HM_SCHEME_GPTQ, &t, 1, &o, &layer), HM_ERROR_INVALID_STRUCT_SIZE);
  hm_convert_options_init(&o);
  o.flags = 0x100;
  EXPECT_EQ(hm_convert_layer(HM_SCHEME_GPTQ, &t, 1, &o, &layer), HM_ERROR_INVALID_ARGUMENT);
  hm_convert_options_init(&o);
  o.bits = 9;
  EXPECT_EQ(hm_convert_layer(HM_SCHEME_GPTQ, &t, 1, &o, &layer), HM_ERROR_INVALID_ARGUMENT);
  hm_convert_options_init(&o);
  o.activation = 0xdeadbeef;
  EXPECT_EQ(hm_convert_layer(HM_SCHEME_GPTQ, &t, 1, &o, &layer), HM_ERROR_INVALID_ARGUMENT);
  hm_convert_options_init(&o);
  o.shard_count = 2;
  EXPECT_EQ(hm_convert_layer(HM_SCHEME_FP8, &t, 1, &o, &layer), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(layer, nullptr);

  hm_format_t* f = reinterpret_cast<hm_format_t*>(0x1);
  EXPECT_EQ(hm_converted_layer_format(nullptr, &f), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(f, nullptr);
  hm_converted_layer_info_t info;
  hm_converted_layer_info_init(&info);
  EXPECT_EQ(hm_converted_layer_info(nullptr, &info), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(hm_convert_file(nullptr, "a", "b", nullptr), HM_ERROR_INVALID_ARGUMENT);
}

// hm_converted_layer_info_t grew `note` after the first release: a caller built against the
// first layout passes its smaller struct_size, and nothing past it is written.
TEST(ConvertApi, TheFirstReleasedInfoLayoutIsFilledUpToItsSize) {
  std::vector<int32_t> qweight(8 * 16, 0x01010101), qzeros(1 * 4, 0x7f7f7f7f);
  std::vector<uint16_t> scales(16, 0x2000);
  const std::vector<Tensor> t = {make_tensor("qweight", "I32", {8, 16}, qweight),
                                 make_tensor("qzeros", "I32", {1, 4}, qzeros),
                                 make_tensor("scales", "F16", {1, 16}, scales)};
  const std::vector<hm_checkpoint_tensor_t> c = checkpoint_structs(t);
  hm_converted_layer_t* layer = nullptr;
  ASSERT_EQ(hm_convert_layer(HM_SCHEME_GPTQ, c.data(), c.size(), nullptr, &layer), HM_SUCCESS)
      << last_error();
  hm_converted_layer_info_t info;
  hm_converted_layer_info_init(&info);
  const char* const untouched = reinterpret_cast<const char*>(0x1);
  info.note = untouched;
  info.struct_size = offsetof(hm_converted_layer_info_t, note);
  EXPECT_EQ(hm_converted_layer_info(layer, &info), HM_SUCCESS) << last_error();
  EXPECT_NE(info.weight.codes, nullptr);
  EXPECT_EQ(info.note, untouched);
  info.struct_size = offsetof(hm_converted_layer_info_t, note) - 1;
  EXPECT_EQ(hm_converted_layer_info(layer, &info), HM_ERROR_INVALID_STRUCT_SIZE);
  hm_converted_layer_info_init(&info);
  EXPECT_EQ(hm_converted_layer_info(layer, &info), HM_SUCCESS) << last_error();
  EXPECT_EQ(info.note, nullptr) << "nothing was lost";
  hm_converted_layer_destroy(layer);
}

TEST(ConvertApi, RequestedFormatsThatBreakTheRulesFail) {
  // GPTQ int8 weights cannot be served with e4m3 activations (rule R8): the error names the rule.
  std::vector<int32_t> qweight(8 * 16, 0x01010101), qzeros(1 * 4, 0x7f7f7f7f);
  std::vector<uint16_t> scales(16, 0x2000);
  std::vector<Tensor> t = {make_tensor("qweight", "I32", {8, 16}, qweight),
                           make_tensor("qzeros", "I32", {1, 4}, qzeros),
                           make_tensor("scales", "F16", {1, 16}, scales)};
  Converted ok = convert(HM_SCHEME_GPTQ, t);
  ASSERT_EQ(ok.status, HM_SUCCESS) << ok.error;
  EXPECT_EQ(ok.weight_dtype, hm::core::Dtype::biased_integer(8).code());
  hm_convert_options_t o;
  hm_convert_options_init(&o);
  o.activation = HM_DTYPE_E4M3;
  const Converted out = convert(HM_SCHEME_GPTQ, t, &o);
  EXPECT_EQ(out.status, HM_ERROR_UNSUPPORTED_FORMAT);
  EXPECT_NE(out.error.find("R8"), std::string::npos) << out.error;
}

}  // namespace
