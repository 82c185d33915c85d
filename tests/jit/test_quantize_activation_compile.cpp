// The compile matrix of the GPU activation quantizer (kernels/humming/quant/activation_kernel.cuh):
// every (input, output) dtype pair on sm_75, sm_80 and sm_90a with NVRTC, failing on local-memory
// spills (the pass's values must stay in registers) and, on sm_90a, on any stack frame, and the
// pairs the codegen refuses; and the
// kernel's division-free arithmetic against the rule (activation.h), on the host.
#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "jit/codegen_quant.hpp"
#include "jit/compiler.hpp"
#include <humming/quant/activation.h>

namespace {

using hm::core::Dtype;

TEST(QuantizeActivationCompile, EveryPairCompilesWithoutSpills) {
  auto compiler = hm::jit::make_compiler(HM_COMPILER_NVRTC);
  const std::regex spill_re("([0-9]+) bytes spill stores");
  for (const char* arch : {"sm_75", "sm_80", "sm_90a"}) {
    for (const char* in : {"f16", "bf16"}) {
      for (const char* out : {"e4m3", "e5m2", "int8"}) {
        // Every pair on sm_80; one per input dtype elsewhere (the code does not depend on the
        // arch), to keep the suite inside the compile budget.
        if (std::string(arch) != "sm_80" && std::string(out) != (in[0] == 'f' ? "e4m3" : "int8"))
          continue;
        hm::jit::GeneratedKernel k =
            hm::jit::quantize_activation_kernel(Dtype::parse(in), Dtype::parse(out), arch);
        k.request.options.push_back("--ptxas-options=-v");
        SCOPED_TRACE(k.request.name + " on " + arch);
        hm::jit::CompiledKernel compiled;
        try {
          compiled = compiler->compile(k.request);
        } catch (const hm::Error& e) {
          ADD_FAILURE() << e.message();
          continue;
        }
        EXPECT_NE(compiled.image.find(k.entry), std::string::npos) << k.entry << " missing";
        int reports = 0;
        for (std::sregex_iterator it(compiled.log.begin(), compiled.log.end(), spill_re), end;
             it != end; ++it) {
          ++reports;
          EXPECT_EQ((*it)[1], "0") << "spills:\n" << compiled.log;
        }
        EXPECT_GT(reports, 0) << "no ptxas report:\n" << compiled.log;
        // On sm_90+ the kernel reads its parameter in place and inlines its work loops: no stack
        // frame (one holding a copy of the parameter cost 1.2-2.5 us per call, NOTES v30).
        if (std::string(arch) == "sm_90a") {
          const std::regex frame_re("Function properties for " + k.entry +
                                    "[^0-9]+([0-9]+) bytes stack frame");
          std::smatch frame;
          ASSERT_TRUE(std::regex_search(compiled.log, frame, frame_re)) << compiled.log;
          EXPECT_EQ(frame[1], "0") << compiled.log;
        }
      }
    }
  }
}

TEST(QuantizeActivationCompile, OtherPairsAreRefused) {
  for (auto [in, out] : {std::pair{"f32", "e4m3"}, {"e4m3", "e4m3"}, {"f16", "int4"},
                         {"bf16", "e2m1"}, {"f16", "uint8"}, {"f16", "f16"}}) {
    try {
      hm::jit::quantize_activation_kernel(Dtype::parse(in), Dtype::parse(out), "sm_80");
      ADD_FAILURE() << in << " -> " << out << " was accepted";
    } catch (const hm::Error& e) {
      EXPECT_EQ(e.status(), HM_ERROR_UNSUPPORTED_FORMAT) << e.message();
      EXPECT_NE(e.message().find(std::string(in) == "f16" || std::string(in) == "bf16" ? out : in),
                std::string::npos)
          << e.message();
    }
  }
}

}  // namespace

// ---- The kernel's arithmetic (kernels/humming/quant/activation.h): the rule's two divisions as
// reciprocals and FMAs. Checked here, on the host, with the same functions the kernel calls (the
// device versions are the same IEEE operations as PTX instructions; rcp.approx is replaced by the
// exact reciprocal, and the Newton step is checked from every start within 4 ulps of it).

namespace {

using namespace hm::actquant;

// Every finite non-negative 16-bit value of the input dtype, widened.
std::vector<float> magnitudes(int in) {
  std::vector<float> out;
  for (uint32_t h = 0; h < 0x7C00u + (in == kInBf16 ? 0x0380u : 0u); ++h)
    out.push_back(in == kInF16 ? widen_f16(static_cast<uint16_t>(h))
                               : widen_bf16(static_cast<uint16_t>(h)));
  return out;
}

template <int Out>
void check_scales(int in) {
  SCOPED_TRACE("in=" + std::to_string(in) + " out=" + std::to_string(Out));
  for (float absmax : magnitudes(in)) {
    const uint32_t bits = float_bits(absmax);
    const float scale = group_scale<Out>(bits);
    ASSERT_EQ(float_bits(group_scale_by_reciprocal<Out>(bits)), float_bits(scale)) << absmax;
    const ScaleDivisor d = divisor_of(scale);
    ASSERT_GE(d.divisor, kReciprocalMinScale);
    const float exact = 1.0f / d.divisor;
    ASSERT_EQ(float_bits(d.inverse), float_bits(exact));
    for (int ulps = -4; ulps <= 4; ++ulps) {
      const float y0 = bits_float(float_bits(exact) + ulps);
      const float y = fma_rn(y0, fma_rn(-d.divisor, y0, 1.0f), y0);
      ASSERT_EQ(float_bits(y), float_bits(exact)) << "scale " << scale << ", start " << ulps;
    }
  }
}

// Codes of divide_by_scale against the rule's quantize_element, for every x with |x| <= absmax
// (both signs) and every `stride`-th absmax plus the 64 smallest and largest.
template <int Out>
void check_codes(int in, size_t stride) {
  SCOPED_TRACE("in=" + std::to_string(in) + " out=" + std::to_string(Out));
  const std::vector<float> values = magnitudes(in);
  for (size_t a = 0; a < values.size(); ++a) {
    if (a % stride != 0 && a > 64 && a + 64 < values.size()) continue;
    const float scale = group_scale<Out>(float_bits(values[a]));
    const ScaleDivisor d = divisor_of(scale);
    for (size_t x = 0; x <= a; ++x) {
      for (float v : {values[x], -values[x]}) {
        const uint32_t got = encode<Out>(divide_by_scale(v, d));
        const uint32_t want = quantize_element<Out>(v, scale);
        if (got != want)
          FAIL() << "x=" << v << " absmax=" << values[a] << ": code " << got << ", rule " << want;
      }
    }
  }
}

TEST(ActivationQuantArithmetic, ScalesAndReciprocalsMatchTheRuleForEveryAbsmax) {
  for (int in : {kInF16, kInBf16}) {
    check_scales<kOutE4m3>(in);
    check_scales<kOutE5m2>(in);
    check_scales<kOutInt8>(in);
  }
}

// HUMMING_TEST_EXHAUSTIVE=1: every pair (about 6e9, minutes); by default every 61st absmax.
TEST(ActivationQuantArithmetic, QuotientCodesMatchTheRule) {
  const char* exhaustive = std::getenv("HUMMING_TEST_EXHAUSTIVE");
  const size_t stride = exhaustive != nullptr && std::string(exhaustive) == "1" ? 1 : 61;
  for (int in : {kInF16, kInBf16}) {
    check_codes<kOutE4m3>(in, stride);
    check_codes<kOutE5m2>(in, stride);
    check_codes<kOutInt8>(in, stride);
  }
}

}  // namespace
