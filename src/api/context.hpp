// The objects behind the opaque handles of the runtime part of the ABI. A context's state is
// shared (shared_ptr) with the kernels made from it, so destroying handles in any order is safe.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/arch.hpp"
#include "jit/cache.hpp"
#include "jit/codegen.hpp"
#include "jit/compiler.hpp"
#include "runtime/device.hpp"
#include "runtime/module.hpp"

namespace hm::api {

struct ContextState {
  core::Arch arch;        // the compile target
  std::string arch_name;  // "sm_90a", or "compute_XX" (PTX) for a device we do not know
  std::unique_ptr<runtime::Device> device;  // null: ahead-of-time, no device
  int compiler_choice = HM_COMPILER_DEFAULT;
  std::unique_ptr<jit::Cache> cache;

  // The compiler is loaded on first use: a context that only loads cached kernels never needs
  // NVRTC or NVCC to be installed.
  const jit::Compiler& compiler();

  // Utility kernels (the GPU packer), built on first use and kept for the context's life, by
  // generated name (utility_kernel()). Their hm_kernel::context is left empty: a reference
  // back to this state would keep it alive forever. Declared after `device`, so they are unloaded
  // before it goes.
  std::mutex utility_mutex;
  std::map<std::string, std::unique_ptr<hm_kernel>> utility_kernels;

 private:
  std::mutex compiler_mutex_;
  std::unique_ptr<jit::Compiler> compiler_;
};

}  // namespace hm::api

struct hm_context {
  std::shared_ptr<hm::api::ContextState> state;
};

struct hm_kernel {
  std::shared_ptr<hm::api::ContextState> context;
  std::string name;   // "reference_gemm_f16_f16"
  std::string entry;  // the symbol in the image
  std::string cache_key;
  std::unique_ptr<hm::runtime::Module> module;  // null without a device
  hm::runtime::CUfunction function = nullptr;
  // Reference GEMMs: the bytes of an element of A and B (the input dtype) and of C (the output
  // dtype), the alignments hm_kernel_launch requires (the kernel loads typed values).
  int input_bytes = 0, output_bytes = 0;
};

namespace hm::api {
// Compiles (or finds in the cache) a generated kernel and, with a device, loads it.
std::unique_ptr<hm_kernel> build_kernel(const std::shared_ptr<ContextState>& context,
                                        const jit::GeneratedKernel& generated);
}  // namespace hm::api

struct hm_launch_params {
  static constexpr int kPointerSlots = 16;  // HM_ARG_A .. (HM_ARG_M - 1)
  static constexpr int kIntSlots = 16;      // HM_ARG_M ..
  // Only the slots humming.h names are arguments; the rest of the storage is spare room for new
  // ones, and setting it is refused (a typo'd slot id would otherwise be silently ignored).
  static constexpr int kNamedPointerSlots = HM_ARG_MASKED_M + 1;
  static constexpr int kNamedIntSlots = HM_ARG_MOE_MODE - HM_ARG_M + 1;
  static_assert(kNamedPointerSlots <= kPointerSlots && kNamedIntSlots <= kIntSlots);
  std::array<uint64_t, kPointerSlots> pointers{};
  std::array<int64_t, kIntSlots> ints{};
  int64_t integer(int32_t slot) const { return ints[slot - HM_ARG_M]; }  // slot >= HM_ARG_M
};
