// hm_format_kernels and hm_plan_create read the same kernel registry (src/gemm/family.cpp), so
// that `humming support` and docs/support.md can never list a format as running that a plan
// refuses, or the other way round (issue 14: the matrix listed e4m3 activations like f16 ones).
// Checked on ahead-of-time contexts for every target of the compile matrix: no driver needed.
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/support/mock_driver_test.hpp"
#include "humming.h"

namespace {

using hm::test::last_error;

// Formats across activations, scale kinds, K alignments and experts: some run on every arch,
// some only on sm_90a's families, some on none yet.
const char* const kFormats[] = {
    "w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=256",
    "w=uint4b8 a=bf16 c=bf16 s=bf16:g128 n=256 k=256",
    "w=e4m3 a=bf16 c=bf16 s=bf16:b128x128 n=256 k=256",  // block scales: mma.sync only
    "w=uint4b8 a=f16 c=f16 s=f16:channel n=256 k=260",   // K % 8 != 0: mma.sync only
    "w=e2m1 a=e4m3 c=bf16 s=e4m3:g96 n=256 k=256",        // 8-bit activations: no kernel yet
    "w=uint4b8 a=int8 c=f16 s=f32:channel n=256 k=256",
    "w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=256 e=4",    // MoE: moe_wgmma / moe_mma
    "w=e2m1 a=e4m3 c=bf16 s=e4m3:g96 n=256 k=256 e=4",     // MoE of a format with no kernel
    "w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=260 e=4",    // MoE rows gather in 16-byte units
};

const char* const kArchs[] = {"sm_75", "sm_80", "sm_86", "sm_89", "sm_90a", "sm_100a", "sm_120a"};

std::string kernels_of(const hm_format_t* f, const char* arch, hm_status_t* status) {
  char buf[256] = {};
  size_t length = 0;
  *status = hm_format_kernels(f, arch, buf, sizeof buf, &length);
  return buf;
}

TEST(KernelSupportApi, AgreesWithPlanCreationOnEveryTarget) {
  int runs = 0, refused_no_kernel = 0;
  for (const char* arch : kArchs) {
    hm_context_options_t o;
    hm_context_options_init(&o);
    o.device = HM_NO_DEVICE;
    o.target_arch = arch;
    hm_context_t* ctx = nullptr;
    ASSERT_EQ(hm_context_create(&o, &ctx), HM_SUCCESS) << arch << ": " << last_error();
    for (const char* text : kFormats) {
      hm_format_t* f = nullptr;
      ASSERT_EQ(hm_format_parse(text, &f), HM_SUCCESS) << text << ": " << last_error();
      hm_status_t kernels_status = HM_SUCCESS;
      const std::string names = kernels_of(f, arch, &kernels_status);
      const std::string kernels_error = last_error();
      hm_plan_t* plan = nullptr;
      const hm_status_t plan_status = hm_plan_create(ctx, f, nullptr, &plan);
      EXPECT_EQ(kernels_status, plan_status)
          << text << " on " << arch << ": hm_format_kernels says " << kernels_error
          << " / hm_plan_create says " << last_error();
      if (kernels_status == HM_SUCCESS) {
        ++runs;
        EXPECT_FALSE(names.empty()) << text << " on " << arch;
        char desc[256] = {};
        ASSERT_EQ(hm_plan_describe(plan, 1, desc, sizeof desc, nullptr), HM_SUCCESS);
        // The plan's kernel is one of the families named.
        const std::string family(desc, std::strcspn(desc, " "));
        EXPECT_NE(names.find(family), std::string::npos) << text << " on " << arch << ": " << desc
                                                         << " not in '" << names << "'";
      } else if (kernels_status == HM_ERROR_UNSUPPORTED) {
        ++refused_no_kernel;
        EXPECT_NE(kernels_error.find("no kernel"), std::string::npos) << kernels_error;
      }
      hm_plan_destroy(plan);
      hm_format_destroy(f);
    }
    hm_context_destroy(ctx);
  }
  EXPECT_GT(runs, 10);
  EXPECT_GT(refused_no_kernel, 10);
}

TEST(KernelSupportApi, NamesFamiliesAndSaysWhatIsMissing) {
  hm_format_t* f = nullptr;
  hm_status_t status = HM_SUCCESS;
  ASSERT_EQ(hm_format_parse("w=uint4b8 a=f16 c=f16 s=f16:g128 n=4096 k=4096", &f), HM_SUCCESS);
  EXPECT_EQ(kernels_of(f, "sm_90a", &status), "dense_wgmma dense_mma");
  EXPECT_EQ(status, HM_SUCCESS) << last_error();
  EXPECT_EQ(kernels_of(f, "sm_80", &status), "dense_mma");
  EXPECT_EQ(kernels_of(f, nullptr, &status), "dense_wgmma dense_mma");  // any target
  hm_format_destroy(f);

  // MoE: the wgmma family on sm_90a, the mma.sync one there too and on every other arch;
  // K not a multiple of 8 has none (the rows of A are gathered in 16-byte units), saying why.
  ASSERT_EQ(hm_format_parse("w=uint4b8 a=bf16 c=bf16 s=bf16:g128 n=4096 k=4096 e=8", &f),
            HM_SUCCESS);
  EXPECT_EQ(kernels_of(f, "sm_90a", &status), "moe_wgmma moe_mma");
  EXPECT_EQ(kernels_of(f, "sm_80", &status), "moe_mma");
  EXPECT_EQ(kernels_of(f, "sm_120a", &status), "moe_mma");
  hm_format_destroy(f);
  ASSERT_EQ(hm_format_parse("w=uint4b8 a=f16 c=f16 s=f16:g128 n=4096 k=4100 e=8", &f), HM_SUCCESS);
  EXPECT_EQ(kernels_of(f, "sm_80", &status), "");
  EXPECT_EQ(status, HM_ERROR_UNSUPPORTED);
  EXPECT_NE(last_error().find("16-byte units"), std::string::npos) << last_error();
  hm_format_destroy(f);

  // 8-bit activations: both kernels on sm_90a (wgmma first), mma.sync m16n8k32 from sm_89 on.
  ASSERT_EQ(hm_format_parse("w=e4m3 a=e4m3 c=bf16 s=f32:channel n=4096 k=4096", &f), HM_SUCCESS);
  EXPECT_EQ(kernels_of(f, "sm_90a", &status), "dense_wgmma dense_mma");
  EXPECT_EQ(status, HM_SUCCESS) << last_error();
  EXPECT_EQ(kernels_of(f, nullptr, &status), "dense_wgmma dense_mma");
  EXPECT_EQ(kernels_of(f, "sm_89", &status), "dense_mma");
  EXPECT_EQ(kernels_of(f, "sm_120a", &status), "dense_mma");
  // Invalid for the target: the rule's error, as hm_format_validate gives it.
  kernels_of(f, "sm_80", &status);
  EXPECT_EQ(status, HM_ERROR_UNSUPPORTED_ARCH) << last_error();
  hm_format_destroy(f);
  // f16 accumulation of 8-bit products exists on wgmma only.
  ASSERT_EQ(hm_format_parse("w=e2m1 a=e5m2 c=f16 s=tensor acc=f16 n=4096 k=4096", &f), HM_SUCCESS);
  EXPECT_EQ(kernels_of(f, "sm_90a", &status), "dense_wgmma");
  EXPECT_EQ(kernels_of(f, "sm_89", &status), "");
  EXPECT_EQ(status, HM_ERROR_UNSUPPORTED);
  EXPECT_NE(last_error().find("f16 accumulation of e5m2 activations runs on the wgmma kernel"),
            std::string::npos)
      << last_error();
  hm_format_destroy(f);
  // int8: mma.sync m16n8k32 from sm_80 on, and on Turing as four m8n8k16 each.
  ASSERT_EQ(hm_format_parse("w=uint4b8 a=int8 c=f16 s=f16:channel n=4096 k=4096", &f), HM_SUCCESS);
  EXPECT_EQ(kernels_of(f, "sm_80", &status), "dense_mma");
  EXPECT_EQ(kernels_of(f, "sm_75", &status), "dense_mma");
  EXPECT_EQ(status, HM_SUCCESS) << last_error();
  hm_format_destroy(f);
  // Group scales on 8-bit activations: groups of whole 128-wide K steps run; smaller ones
  // (valid by rule R18) are refused, saying so.
  ASSERT_EQ(hm_format_parse("w=uint4b8 a=e4m3 c=bf16 s=bf16:g128 n=4096 k=4096", &f), HM_SUCCESS);
  EXPECT_EQ(kernels_of(f, "sm_90a", &status), "dense_wgmma dense_mma");
  EXPECT_EQ(kernels_of(f, "sm_89", &status), "dense_mma");
  hm_format_destroy(f);
  // Block scales (a DeepSeek FP8 checkpoint converted for e4m3 activations) run there too,
  // while 16-bit activations keep them on mma.sync.
  ASSERT_EQ(hm_format_parse("w=e4m3 a=e4m3 c=bf16 s=f32:b128x128 n=4096 k=4096", &f), HM_SUCCESS);
  EXPECT_EQ(kernels_of(f, "sm_90a", &status), "dense_wgmma dense_mma");
  hm_format_destroy(f);
  ASSERT_EQ(hm_format_parse("w=e4m3 a=bf16 c=bf16 s=bf16:b128x128 n=4096 k=4096", &f), HM_SUCCESS);
  EXPECT_EQ(kernels_of(f, "sm_90a", &status), "dense_mma");
  hm_format_destroy(f);
  // Groups of 32 or 64 k fold every step on both kernels (a partial set per group slot);
  // groups that neither divide nor are multiples of 128 run nowhere, and block scales need
  // multiples of 128.
  ASSERT_EQ(hm_format_parse("w=uint4b8 a=e4m3 c=bf16 s=bf16:g64 n=4096 k=4096", &f), HM_SUCCESS);
  EXPECT_EQ(kernels_of(f, "sm_90a", &status), "dense_wgmma dense_mma");
  EXPECT_EQ(kernels_of(f, "sm_89", &status), "dense_mma");
  hm_format_destroy(f);
  ASSERT_EQ(hm_format_parse("w=uint4b8 a=int8 c=bf16 s=bf16:g32 n=4096 k=4096", &f), HM_SUCCESS);
  EXPECT_EQ(kernels_of(f, "sm_80", &status), "dense_mma");
  hm_format_destroy(f);
  // The MoE GEMMs are the dense kernels with gathered rows: they fold them too.
  ASSERT_EQ(hm_format_parse("w=uint4b8 a=e4m3 c=bf16 s=bf16:g64 n=4096 k=4096 e=8", &f), HM_SUCCESS);
  EXPECT_EQ(kernels_of(f, "sm_90a", &status), "moe_wgmma moe_mma");
  EXPECT_EQ(kernels_of(f, "sm_89", &status), "moe_mma");
  hm_format_destroy(f);
  ASSERT_EQ(hm_format_parse("w=uint4b8 a=e4m3 c=bf16 s=bf16:g96 n=4096 k=4096", &f), HM_SUCCESS);
  EXPECT_EQ(kernels_of(f, "sm_90a", &status), "");
  EXPECT_EQ(status, HM_ERROR_UNSUPPORTED);
  EXPECT_NE(last_error().find("need group_k 32, 64 or a multiple of 128 (the kernels' K step), "
                              "and block scales a multiple of 128; not 96"),
            std::string::npos)
      << last_error();
  hm_format_destroy(f);
  ASSERT_EQ(hm_format_parse("w=uint4b8 a=e4m3 c=bf16 s=bf16:b64x128 n=4096 k=4096", &f),
            HM_SUCCESS);
  EXPECT_EQ(kernels_of(f, "sm_90a", &status), "");
  EXPECT_NE(last_error().find("; not block 64"), std::string::npos) << last_error();
  hm_format_destroy(f);
  // MXFP4 on FP8 activations: ue8m0 groups of 32 run as group x tensor scales (the weights'
  // exponents) on both kernels, and as plain group scales folded in f32 on both too.
  ASSERT_EQ(hm_format_parse("w=e2m1 a=e4m3 c=bf16 s=ue8m0:g32+tensor n=4096 k=4096", &f),
            HM_SUCCESS);
  EXPECT_EQ(kernels_of(f, "sm_90a", &status), "dense_wgmma dense_mma");
  hm_format_destroy(f);
  ASSERT_EQ(hm_format_parse("w=e2m1 a=e4m3 c=bf16 s=ue8m0:g32 n=4096 k=4096", &f), HM_SUCCESS);
  EXPECT_EQ(kernels_of(f, "sm_90a", &status), "dense_wgmma dense_mma");
  hm_format_destroy(f);
  // e4m3 group scales of 32 (they cannot go into 8-bit weights exactly) fold in f32.
  ASSERT_EQ(hm_format_parse("w=e2m1 a=e4m3 c=bf16 s=e4m3:g32+tensor n=4096 k=4096", &f),
            HM_SUCCESS);
  EXPECT_EQ(kernels_of(f, "sm_90a", &status), "dense_wgmma dense_mma");
  hm_format_destroy(f);

  EXPECT_EQ(hm_format_kernels(nullptr, "sm_90a", nullptr, 0, nullptr), HM_ERROR_INVALID_ARGUMENT);
}

}  // namespace
