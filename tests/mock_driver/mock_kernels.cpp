// Kernel images and host kernels of the mock driver (see mock_kernels.hpp).
#include "mock_kernels.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <exception>
#include <sstream>

#include <cmath>
#include <vector>

#include <humming/gemm/params.h>
#include <humming/layout/pack.h>
#include <humming/quant/activation.h>
#include <humming/moe/routing.h>

namespace hm::mock {
namespace {

constexpr const char* kReferenceGemm = "hm_reference_gemm_f32_f32";

template <typename T>
T read(const unsigned char* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

bool is_symbol_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$';
}

size_t align_up(size_t value, size_t alignment) {
  return alignment == 0 ? value : (value + alignment - 1) / alignment * alignment;
}

// One PTX parameter declaration, e.g. ".param .u64 name", ".param .align 8 .b8 name[16]" or
// ".param .u64 .ptr .global .align 4 name" (there .align is the pointee's, not the parameter's).
bool parse_param(const std::string& text, size_t* size, size_t* alignment) {
  std::istringstream in(text);
  std::string token;
  if (!(in >> token) || token != ".param") return false;
  size_t element = 0, explicit_alignment = 0, count = 1;
  bool pointer = false;
  while (in >> token) {
    if (token == ".align") {
      size_t value = 0;
      if (!(in >> value)) return false;
      if (!pointer) explicit_alignment = value;
    } else if (token == ".ptr") {
      pointer = true;
    } else if (token.size() >= 3 && token[0] == '.' && std::strchr("usbf", token[1]) &&
               std::isdigit(static_cast<unsigned char>(token[2]))) {
      element = std::stoul(token.substr(2)) / 8;
    } else if (token[0] != '.') {  // the name, maybe with an array size
      const size_t bracket = token.find('[');
      if (bracket != std::string::npos) count = std::stoul(token.substr(bracket + 1));
    }
  }
  if (element == 0 || count == 0) return false;
  *size = element * count;
  *alignment = explicit_alignment ? explicit_alignment : element;
  return true;
}

// The parameter list of ".entry <name>(...)" in PTX text, or false when there is none.
bool ptx_signature(const std::string& image, const std::string& name, KernelSignature* out) {
  size_t at = 0;
  while ((at = image.find(".entry", at)) != std::string::npos) {
    at += 6;
    size_t p = at;
    while (p < image.size() && std::isspace(static_cast<unsigned char>(image[p]))) ++p;
    if (image.compare(p, name.size(), name) != 0) continue;
    p += name.size();
    if (p < image.size() && is_symbol_char(image[p])) continue;
    while (p < image.size() && std::isspace(static_cast<unsigned char>(image[p]))) ++p;
    KernelSignature signature;
    signature.known = true;
    if (p >= image.size() || image[p] != '(') {  // a kernel without parameters
      *out = signature;
      return true;
    }
    const size_t close = image.find(')', p);
    if (close == std::string::npos) return false;
    std::string list = image.substr(p + 1, close - p - 1);
    std::replace(list.begin(), list.end(), '\n', ' ');
    std::istringstream items(list);
    std::string item;
    size_t offset = 0;
    while (std::getline(items, item, ',')) {
      if (item.find_first_not_of(" \t\r") == std::string::npos) continue;
      size_t size = 0, alignment = 0;
      if (!parse_param(item, &size, &alignment)) return false;
      offset = align_up(offset, alignment);
      signature.params.push_back({offset, size});
      offset += size;
    }
    signature.buffer_size = offset;
    *out = signature;
    return true;
  }
  return false;
}

// C[m, n] = sum_k A[m, k] * B[n, k], all f32 row-major, f32 accumulation like the real kernel.
CUresult reference_gemm(const KernelSignature& signature, const unsigned char* args,
                        const RangeCheck& in_bounds) {
  if (signature.params.size() != 6) return runtime::CUDA_ERROR_INVALID_VALUE;
  for (const KernelParam& p : signature.params)
    if (p.size != 8) return runtime::CUDA_ERROR_INVALID_VALUE;
  const auto a = read<uint64_t>(args + signature.params[0].offset);
  const auto b = read<uint64_t>(args + signature.params[1].offset);
  const auto c = read<uint64_t>(args + signature.params[2].offset);
  const auto m = read<int64_t>(args + signature.params[3].offset);
  const auto n = read<int64_t>(args + signature.params[4].offset);
  const auto k = read<int64_t>(args + signature.params[5].offset);
  if (m <= 0 || n <= 0) return runtime::CUDA_SUCCESS;
  constexpr int64_t kLimit = int64_t{1} << 28;  // keeps every byte count below 2^62
  if (m > kLimit || n > kLimit || k > kLimit) return runtime::CUDA_ERROR_ILLEGAL_ADDRESS;
  const uint64_t kk = k > 0 ? static_cast<uint64_t>(k) : 0;
  if (!in_bounds(c, uint64_t(m) * uint64_t(n) * 4) || !in_bounds(a, uint64_t(m) * kk * 4) ||
      !in_bounds(b, uint64_t(n) * kk * 4))
    return runtime::CUDA_ERROR_ILLEGAL_ADDRESS;
  const float* A = reinterpret_cast<const float*>(a);
  const float* B = reinterpret_cast<const float*>(b);
  float* C = reinterpret_cast<float*>(c);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (uint64_t l = 0; l < kk; ++l) sum += A[i * kk + l] * B[j * kk + l];
      C[i * n + j] = sum;
    }
  return runtime::CUDA_SUCCESS;
}

// ---- the GPU packer (kernels/humming/layout/pack_kernel.cuh), run lane by lane on the host with
// the device code's own per-lane function (pack.h); only the thread mapping is the mock's.

constexpr const char* kPackWeightPrefix = "hm_pack_weight_";
// The dense GEMM kernels (hm_dense_wgmma_..., hm_dense_mma_...: jit/codegen.cpp's entry names).
constexpr const char* kDenseGemmPrefix = "hm_dense_";
constexpr const char* kPackSidePrefix = "hm_pack_side_b";

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// (b, a) of "hm_pack_weight_w<b>_a<a>", or false.
bool pack_weight_widths(const std::string& name, int* b, int* a) {
  char tail = 0;
  if (std::sscanf(name.c_str(), "hm_pack_weight_w%d_a%d%c", b, a, &tail) != 2) return false;
  return name == std::string(kPackWeightPrefix) + "w" + std::to_string(*b) + "_a" +
                     std::to_string(*a) &&
         quant::layout_defined(*b, *a);
}

template <int B, int A>
void pack_weight_host(const pack::WeightParams& p) {
  for (int64_t chunk = 0; chunk < p.chunks; ++chunk) {
    for (int lane = 0; lane < quant::kLanes; ++lane) {
      uint32_t words[B];
      pack::lane_words<B, A>(p, chunk, lane, words);
      uint8_t* base = p.out + chunk * quant::chunk_bytes(B);
      for (int w = 0; w < B; ++w)
        std::memcpy(base + 4 * quant::lane_word_offset(B, lane, w), &words[w], 4);
    }
  }
}

using PackWeightFn = void (*)(const pack::WeightParams&);
template <int A, int... Bs>
struct PackWeightTable {
  static constexpr PackWeightFn fn[] = {pack_weight_host<Bs, A>...};
};

PackWeightFn pack_weight_fn(int b, int a) {
  if (a == 16) return PackWeightTable<16, 1, 2, 3, 4, 5, 6, 7, 8>::fn[b - 1];
  if (a == 8) return PackWeightTable<8, 1, 2, 3, 4, 5, 6, 7, 8>::fn[b - 1];
  return PackWeightTable<4, 1, 2, 3, 4>::fn[b - 1];
}

CUresult pack_weight(const std::string& name, const KernelSignature& signature,
                     const unsigned char* args, const RangeCheck& in_bounds) {
  int b = 0, a = 0;
  if (!pack_weight_widths(name, &b, &a)) return runtime::CUDA_ERROR_NOT_FOUND;
  if (signature.params.size() != 1 || signature.params[0].size != sizeof(pack::WeightParams))
    return runtime::CUDA_ERROR_INVALID_VALUE;
  const auto p = read<pack::WeightParams>(args + signature.params[0].offset);
  const int64_t per_expert = p.strips * p.k_chunks;
  if (p.n <= 0 || p.k <= 0 || per_expert <= 0 || p.chunks % per_expert != 0 ||
      p.strips * quant::kChunkRows < p.n || p.k_chunks * quant::kChunkK < p.k)
    return runtime::CUDA_ERROR_ILLEGAL_ADDRESS;  // the kernel would read or write out of shape
  const uint64_t experts = uint64_t(p.chunks / per_expert);
  if (!in_bounds(reinterpret_cast<uint64_t>(p.codes), experts * uint64_t(p.n) * uint64_t(p.k)) ||
      !in_bounds(reinterpret_cast<uint64_t>(p.out), uint64_t(p.chunks) * quant::chunk_bytes(b)))
    return runtime::CUDA_ERROR_ILLEGAL_ADDRESS;
  if (reinterpret_cast<uint64_t>(p.out) % 16 != 0) return runtime::CUDA_ERROR_MISALIGNED_ADDRESS;
  pack_weight_fn(b, a)(p);
  return runtime::CUDA_SUCCESS;
}

template <typename T>
CUresult pack_side_as(const pack::SideParams& p, const RangeCheck& in_bounds) {
  const uint64_t in = reinterpret_cast<uint64_t>(p.in), out = reinterpret_cast<uint64_t>(p.out);
  if (p.columns <= 0 || p.groups <= 0 || p.total % (p.columns * p.groups) != 0 ||
      p.rows > p.columns || p.groups_in > p.groups)
    return runtime::CUDA_ERROR_ILLEGAL_ADDRESS;
  const uint64_t experts = uint64_t(p.total / (p.columns * p.groups));
  if (!in_bounds(in, experts * uint64_t(p.rows) * uint64_t(p.groups_in) * sizeof(T)) ||
      !in_bounds(out, uint64_t(p.total) * sizeof(T)))
    return runtime::CUDA_ERROR_ILLEGAL_ADDRESS;
  if (in % sizeof(T) != 0 || out % sizeof(T) != 0) return runtime::CUDA_ERROR_MISALIGNED_ADDRESS;
  for (int64_t i = 0; i < p.total; ++i) pack::side_element<T>(p, i);
  return runtime::CUDA_SUCCESS;
}

CUresult pack_side(const std::string& name, const KernelSignature& signature,
                   const unsigned char* args, const RangeCheck& in_bounds) {
  if (signature.params.size() != 1 || signature.params[0].size != sizeof(pack::SideParams))
    return runtime::CUDA_ERROR_INVALID_VALUE;
  const auto p = read<pack::SideParams>(args + signature.params[0].offset);
  const std::string bytes = name.substr(std::strlen(kPackSidePrefix));
  if (bytes == "1") return pack_side_as<uint8_t>(p, in_bounds);
  if (bytes == "2") return pack_side_as<uint16_t>(p, in_bounds);
  if (bytes == "4") return pack_side_as<uint32_t>(p, in_bounds);
  return runtime::CUDA_ERROR_NOT_FOUND;
}

// ---- the GPU activation quantizer (kernels/humming/quant/activation_kernel.cuh), row by row with
// the rule's own host/device functions (activation.h); only the thread mapping is the mock's.

constexpr const char* kQuantizeActivationPrefix = "hm_quantize_activation_";

template <int In, int Out>
void quantize_rows_host(const actquant::Params& p) {
  for (int64_t row = 0; row < p.m; ++row) actquant::quantize_row_reference<In, Out>(p, row);
}

CUresult quantize_activation(const std::string& name, const KernelSignature& signature,
                             const unsigned char* args, const RangeCheck& in_bounds) {
  if (signature.params.size() != 1 || signature.params[0].size != sizeof(actquant::Params))
    return runtime::CUDA_ERROR_INVALID_VALUE;
  const auto p = read<actquant::Params>(args + signature.params[0].offset);
  if (p.m <= 0 || p.k <= 0 || p.group_k <= 0 || p.groups != (p.k + p.group_k - 1) / p.group_k)
    return runtime::CUDA_ERROR_ILLEGAL_ADDRESS;  // the kernel would index out of shape
  const uint64_t elements = uint64_t(p.m) * uint64_t(p.k);
  if (!in_bounds(reinterpret_cast<uint64_t>(p.a), elements * 2) ||
      !in_bounds(reinterpret_cast<uint64_t>(p.codes), elements) ||
      !in_bounds(reinterpret_cast<uint64_t>(p.scales), uint64_t(p.m) * uint64_t(p.groups) * 4) ||
      (p.perm != nullptr && !in_bounds(reinterpret_cast<uint64_t>(p.perm), uint64_t(p.k) * 4)))
    return runtime::CUDA_ERROR_ILLEGAL_ADDRESS;
  const std::string tag = name.substr(std::strlen(kQuantizeActivationPrefix));
  using namespace actquant;
  if (tag == "f16_e4m3") quantize_rows_host<kInF16, kOutE4m3>(p);
  else if (tag == "f16_e5m2") quantize_rows_host<kInF16, kOutE5m2>(p);
  else if (tag == "f16_int8") quantize_rows_host<kInF16, kOutInt8>(p);
  else if (tag == "bf16_e4m3") quantize_rows_host<kInBf16, kOutE4m3>(p);
  else if (tag == "bf16_e5m2") quantize_rows_host<kInBf16, kOutE5m2>(p);
  else if (tag == "bf16_int8") quantize_rows_host<kInBf16, kOutInt8>(p);
  else return runtime::CUDA_ERROR_NOT_FOUND;
  return runtime::CUDA_SUCCESS;
}

// ---- the MoE routing kernels (kernels/humming/moe/routing.cuh), as plain serial loops on the
// host over the kernels' own parameter structs and drop rule (routing.h). This checks what the
// launcher passes; the kernels' thread mapping is checked on a GPU (tests/gpu/test_moe_routing_gpu).

constexpr const char* kMoeAlign = "hm_moe_align";
constexpr const char* kMoeReducePrefix = "hm_moe_reduce_";

CUresult moe_align(const KernelSignature& signature, const unsigned char* args,
                   const RangeCheck& in_bounds) {
  if (signature.params.size() != 1 || signature.params[0].size != sizeof(moe::AlignParams))
    return runtime::CUDA_ERROR_INVALID_VALUE;
  const auto p = read<moe::AlignParams>(args + signature.params[0].offset);
  const int32_t E = p.local_experts;
  auto at = [](const void* q) { return reinterpret_cast<uint64_t>(q); };
  if (E < 1 || p.block_size < 1 || p.assignments < 0 || p.capacity % p.block_size != 0 ||
      p.capacity < moe::align_capacity(p.assignments, E, p.block_size))
    return runtime::CUDA_ERROR_ILLEGAL_ADDRESS;
  if (!in_bounds(at(p.topk_ids), uint64_t(p.assignments) * 4 + (p.assignments == 0)) ||
      (p.expert_map && !in_bounds(at(p.expert_map), uint64_t(p.num_experts) * 4)) ||
      !in_bounds(at(p.sorted_ids), uint64_t(p.capacity) * 4) ||
      !in_bounds(at(p.expert_ids), uint64_t(p.capacity / p.block_size) * 4) ||
      !in_bounds(at(p.num_tokens_padded), 4) || !in_bounds(at(p.expert_offsets), uint64_t(E + 1) * 4) ||
      (p.expert_counts && !in_bounds(at(p.expert_counts), uint64_t(E) * 4)))
    return runtime::CUDA_ERROR_ILLEGAL_ADDRESS;
  std::vector<int32_t> count(E, 0);
  for (int64_t i = 0; i < p.assignments; ++i) {
    const int32_t e = moe::local_expert(p.topk_ids[i], p.expert_map, p.num_experts, E);
    if (e >= 0) ++count[e];
  }
  std::vector<int64_t> next(E + 1, 0);
  for (int32_t e = 0; e < E; ++e)
    next[e + 1] = next[e] + (count[e] + p.block_size - 1) / p.block_size * p.block_size;
  for (int32_t e = 0; e <= E; ++e) p.expert_offsets[e] = static_cast<int32_t>(next[e]);
  if (p.expert_counts)
    for (int32_t e = 0; e < E; ++e) p.expert_counts[e] = count[e];
  *p.num_tokens_padded = static_cast<int32_t>(next[E]);
  for (int64_t s = 0; s < p.capacity; ++s) p.sorted_ids[s] = static_cast<int32_t>(p.assignments);
  for (int64_t b = 0; b < p.capacity / p.block_size; ++b) p.expert_ids[b] = -1;
  for (int32_t e = 0; e < E; ++e)
    for (int64_t s = next[e]; s < next[e + 1]; s += p.block_size) p.expert_ids[s / p.block_size] = e;
  for (int64_t i = 0; i < p.assignments; ++i) {
    const int32_t e = moe::local_expert(p.topk_ids[i], p.expert_map, p.num_experts, E);
    if (e >= 0) p.sorted_ids[next[e]++] = static_cast<int32_t>(i);
  }
  return runtime::CUDA_SUCCESS;
}

float moe_from16(uint16_t code, bool bf16) {
  if (bf16) {
    const uint32_t u = uint32_t(code) << 16;
    float x;
    std::memcpy(&x, &u, 4);
    return x;
  }
  const int exp = (code >> 10) & 0x1f, man = code & 0x3ff;
  const float mag = exp == 0 ? std::ldexp(float(man), -24)
                             : exp == 31 ? (man ? NAN : INFINITY)
                                         : std::ldexp(float(man | 0x400), exp - 25);
  return (code & 0x8000) ? -mag : mag;
}

uint16_t moe_to16(float x, bool bf16) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if (bf16) return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);  // finite inputs only
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a >= 0x477ff000u) return sign | 0x7c00u;
  if (a < 0x38800000u) return sign | uint16_t(std::nearbyint(std::fabs(x) * 16777216.0f));
  const uint32_t r = a + 0x0fffu + ((a >> 13) & 1u);
  return sign | uint16_t((((r >> 23) - 112) << 10) | ((r >> 13) & 0x3ffu));
}

CUresult moe_reduce(const std::string& name, const KernelSignature& signature,
                    const unsigned char* args, const RangeCheck& in_bounds) {
  if (signature.params.size() != 1 || signature.params[0].size != sizeof(moe::ReduceParams))
    return runtime::CUDA_ERROR_INVALID_VALUE;
  const bool bf16 = name.rfind("hm_moe_reduce_bf16_", 0) == 0;
  const int vec = name.size() > 3 && name.compare(name.size() - 3, 3, "_v8") == 0 ? 8 : 1;
  const auto p = read<moe::ReduceParams>(args + signature.params[0].offset);
  auto at = [](const void* q) { return reinterpret_cast<uint64_t>(q); };
  if (p.n < 1 || p.tokens < 0 || p.top_k < 1 || p.n % vec != 0 || p.vectors != p.tokens * (p.n / vec))
    return runtime::CUDA_ERROR_ILLEGAL_ADDRESS;
  const uint64_t rows = uint64_t(p.tokens) * uint64_t(p.top_k);
  if (!in_bounds(at(p.topk_ids), rows * 4) || !in_bounds(at(p.weights), rows * 4) ||
      !in_bounds(at(p.out), uint64_t(p.tokens) * uint64_t(p.n) * 2) ||
      (p.expert_map && !in_bounds(at(p.expert_map), uint64_t(p.num_experts) * 4)))
    return runtime::CUDA_ERROR_ILLEGAL_ADDRESS;
  if (vec == 8 && (at(p.in) % 16 != 0 || at(p.out) % 16 != 0))
    return runtime::CUDA_ERROR_MISALIGNED_ADDRESS;
  const auto* in = static_cast<const uint16_t*>(p.in);
  auto* out = static_cast<uint16_t*>(p.out);
  for (int64_t t = 0; t < p.tokens; ++t) {
    for (int64_t c = 0; c < p.n; ++c) {
      float acc = 0.0f;
      for (int32_t j = 0; j < p.top_k; ++j) {
        const int64_t f = t * p.top_k + j;
        if (moe::local_expert(p.topk_ids[f], p.expert_map, p.num_experts, p.local_experts) < 0)
          continue;
        if (!in_bounds(at(in + f * p.n + c), 2)) return runtime::CUDA_ERROR_ILLEGAL_ADDRESS;
        acc = std::fma(p.weights[f], moe_from16(in[f * p.n + c], bf16), acc);
      }
      out[t * p.n + c] = moe_to16(acc, bf16);
    }
  }
  return runtime::CUDA_SUCCESS;
}

}  // namespace

size_t image_size(const void* image) {
  const auto* p = static_cast<const unsigned char*>(image);
  if (!(p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F' && p[4] == 2))
    return std::strlen(static_cast<const char*>(image));
  // ELF64: the file ends with the last of its header, program headers, section headers and
  // section contents.
  const auto phoff = read<uint64_t>(p + 0x20), shoff = read<uint64_t>(p + 0x28);
  const auto phentsize = read<uint16_t>(p + 0x36), phnum = read<uint16_t>(p + 0x38);
  const auto shentsize = read<uint16_t>(p + 0x3A), shnum = read<uint16_t>(p + 0x3C);
  size_t size = 0x40;
  size = std::max<size_t>(size, phoff + size_t{phentsize} * phnum);
  size = std::max<size_t>(size, shoff + size_t{shentsize} * shnum);
  for (uint16_t i = 0; i < shnum && shoff != 0; ++i) {
    const unsigned char* header = p + shoff + size_t{i} * shentsize;
    constexpr uint32_t kNoBits = 8;  // SHT_NOBITS occupies no file space
    if (read<uint32_t>(header + 4) == kNoBits) continue;
    size = std::max<size_t>(size, read<uint64_t>(header + 0x18) + read<uint64_t>(header + 0x20));
  }
  return size;
}

bool image_has_symbol(const std::string& image, const std::string& name) {
  if (name.empty()) return false;
  for (size_t at = image.find(name); at != std::string::npos; at = image.find(name, at + 1)) {
    const bool starts = at == 0 || !is_symbol_char(image[at - 1]);
    const size_t end = at + name.size();
    const bool ends = end == image.size() || !is_symbol_char(image[end]);
    if (starts && ends) return true;
  }
  return false;
}

KernelSignature kernel_signature(const std::string& image, const std::string& name) {
  KernelSignature signature;
  try {
    if (ptx_signature(image, name, &signature)) return signature;
  } catch (const std::exception&) {  // a malformed number in the PTX
  }
  signature = KernelSignature();
  if (name.rfind("hm_moe_wgmma_", 0) == 0 || name.rfind("hm_moe_mma_", 0) == 0) {
    // The MoE GEMM (jit/codegen.cpp's entry names): one gemm::DenseParams by value, recorded,
    // not run, so that a test can check what the plan marshalled for each MoE mode.
    signature.known = true;
    signature.params.push_back({0, sizeof(gemm::DenseParams)});
    signature.buffer_size = sizeof(gemm::DenseParams);
  } else if (name == kReferenceGemm) {  // (const float*, const float*, float*, long long x3)
    signature.known = true;
    for (size_t i = 0; i < 6; ++i) signature.params.push_back({i * 8, 8});
    signature.buffer_size = 48;
  } else if (starts_with(name, kQuantizeActivationPrefix)) {
    signature.known = true;  // one struct by value (kernels/humming/quant/activation.h)
    signature.params.push_back({0, sizeof(actquant::Params)});
    signature.buffer_size = sizeof(actquant::Params);
  } else if (name == kMoeAlign || starts_with(name, kMoeReducePrefix)) {
    const size_t size = name == kMoeAlign ? sizeof(moe::AlignParams) : sizeof(moe::ReduceParams);
    signature.known = true;
    signature.params.push_back({0, size});
    signature.buffer_size = size;
  } else if (starts_with(name, kDenseGemmPrefix)) {
    // One struct by value (kernels/humming/gemm/params.h): recorded, not run, so that a test
    // can check what the plan marshalled.
    signature.known = true;
    signature.params.push_back({0, sizeof(gemm::DenseParams)});
    signature.buffer_size = sizeof(gemm::DenseParams);
  } else if (starts_with(name, kPackWeightPrefix) || starts_with(name, kPackSidePrefix)) {
    // One struct by value (kernels/humming/layout/pack.h).
    const size_t size = starts_with(name, kPackWeightPrefix) ? sizeof(pack::WeightParams)
                                                            : sizeof(pack::SideParams);
    signature.known = true;
    signature.params.push_back({0, size});
    signature.buffer_size = size;
  }
  return signature;
}

bool run_host_kernel(const std::string& name, const KernelSignature& signature,
                     const unsigned char* args, const RangeCheck& in_bounds, CUresult* result) {
  if (name == kReferenceGemm) {
    *result = reference_gemm(signature, args, in_bounds);
    return true;
  }
  if (starts_with(name, kPackWeightPrefix)) {
    *result = pack_weight(name, signature, args, in_bounds);
    return true;
  }
  if (starts_with(name, kPackSidePrefix)) {
    *result = pack_side(name, signature, args, in_bounds);
    return true;
  }
  if (starts_with(name, kQuantizeActivationPrefix)) {
    *result = quantize_activation(name, signature, args, in_bounds);
    return true;
  }
  if (name == kMoeAlign) {
    *result = moe_align(signature, args, in_bounds);
    return true;
  }
  if (starts_with(name, kMoeReducePrefix)) {
    *result = moe_reduce(name, signature, args, in_bounds);
    return true;
  }
  return false;
}

}  // namespace hm::mock
