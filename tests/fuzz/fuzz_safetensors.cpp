// Fuzz target: the safetensors header parser, every converter and the reader of converted
// layers. The input is a safetensors image; when it parses, its tensors are handed to each
// scheme's converter as one layer (as hm_convert_file would), and each "humming.format.<name>"
// key of its metadata is read as a converted layer (as hm_stored_model_read would). Both must
// return or throw hm::Error, never crash, and never allocate more than a small multiple of the
// input (their buffers are bounded by the bytes of the tensors they read; the check below runs
// in a process capped by the fuzzer's -rss_limit_mb).
#include <vector>

#include "core/error.hpp"
#include "fuzz_target.hpp"
#include "io/safetensors.hpp"
#include "schema/convert.hpp"
#include "schema/file.hpp"
#include "schema/stored.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hm::io::Header header;
  try {
    header = hm::io::parse_header(data, size, "fuzz input");
  } catch (const hm::Error&) {
    return 0;
  }
  for (const hm::io::TensorView& t : header.tensors) {
    HM_FUZZ_CHECK(t.data >= data && t.data + t.bytes <= data + size, "a view outside the input");
    HM_FUZZ_CHECK(t.numel() * hm::io::dtype_size(t.dtype) == static_cast<int64_t>(t.bytes),
                  "bytes match dtype x shape");
  }
  if (header.tensors.empty() || header.tensors.size() > 16) return 0;
  // Each converter for 16-bit activations (the default), and for e4m3 and int8, whose paths fold
  // MXFP4's scales into the exponent windows and requantize NVFP4 per channel.
  for (int32_t s = HM_SCHEME_GPTQ; s <= HM_SCHEME_BITNET; ++s)
    for (hm_dtype_t act : {HM_DTYPE_NONE, HM_DTYPE_E4M3, HM_DTYPE_INT8}) {
      hm::schema::Options options;
      if (act != HM_DTYPE_NONE) options.activation = hm::core::Dtype::from_code(act);
      try {
        hm::schema::convert_layer(hm::schema::scheme_from_int(s), header.tensors, options);
      } catch (const hm::Error&) {
      }
    }
  const std::string key = hm::schema::kFormatKey;
  auto find = [&](const std::string& name) -> const hm::io::TensorView* {
    for (const hm::io::TensorView& t : header.tensors)
      if (t.name == name) return &t;
    return nullptr;
  };
  for (const auto& [k, v] : header.metadata) {
    if (k.rfind(key, 0) != 0) continue;
    try {
      const hm::schema::StoredLayer l =
          hm::schema::read_stored_layer(header.metadata, find, "fuzz input", k.substr(key.size()));
      HM_FUZZ_CHECK(l.weight.size() <= size && l.scales.size() <= size,
                    "a layer's buffers come from the input");
    } catch (const hm::Error&) {
    }
  }
  return 0;
}
