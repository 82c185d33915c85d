// Steps several converters share: choosing the activation / output / scale dtypes, integer weight
// dtypes from zero points, act-order K permutations, per-shard scales, bit-stream reads, a small
// parallel loop and the final validation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "core/dtype.hpp"
#include "core/parallel.hpp"
#include "schema/convert.hpp"
#include "schema/tensors.hpp"

namespace hm::schema {

core::Dtype dtype(hm_dtype_t code);

// The activation: options.activation, else `preferred` (the scheme's 16-bit default).
// The output: options.output, else the activation when it is 16-bit, else `preferred`.
void choose_activation_output(Layer& layer, const Options& options, core::Dtype preferred);
// The 16-bit float a checkpoint speaks (its 16-bit scales' or bias's dtype), else f16.
core::Dtype preferred_16bit(std::initializer_list<const io::TensorView*> tensors);

// Sets layer.format.scale for scales read from a checkpoint of dtype `stored`: kept when the
// format allows it (16-bit activations need group / block scales exact in the activation, R19),
// else the activation's dtype, and then every scale value is rounded into it (the one lossy
// step, docs/convert.md). Rounding never saturates or flushes silently: when a scale lies beyond
// the activation's range (or a nonzero one would become 0) a default f16 activation becomes bf16,
// and a requested one is refused naming `source` and the value. Call after the scale kind and
// activation are set.
void set_scale_dtype(Layer& layer, core::Dtype stored, const Options& options,
                     const io::TensorView& source);

// Integer weights with `bits`-bit unsigned codes and real zero points [E][N][G] (empty:
// symmetric around 2^(bits-1)): uint{b}b{2^(b-1)} when every zero point is 2^(bits-1), else
// uint{b} with uint{b} zero points, or 16-bit float zero points (16-bit activations only) when
// one lies outside [0, 2^bits - 1]. Moves the zero points into the layer as needed.
void set_integer_weight(Layer& layer, int bits, std::vector<float> zero_points,
                        const io::TensorView& zero_tensor_for_messages);

// For 8-bit activations: ue8m0 group scales on 4-bit float weights (MXFP4) become group x tensor
// scales within the kernel's exponent window (core::scale_exponent_window), so the kernel writes
// them into the weights' exponents. Per expert: the largest exponent of a group with a nonzero
// code goes to the window's top, the global scale takes the difference (times any global the
// layer had); a group more than the window's width below is raised to its bottom and its codes
// re-rounded to nearest even (the one lossy step, docs/convert.md; none when every expert's group
// exponents span at most the window). Does nothing for other formats. Call after the activation
// and the scales are set. Returns how many groups lost a value to that rounding.
int64_t fold_scale_exponents(Layer& layer);

// For 8-bit activations (e4m3, e5m2, int8): group scales that no 8-bit kernel applies exactly
// (NVFP4's e4m3 scales per 16 k: too small a group to fold between MMA steps, and e2m1 times an
// e4m3 scale needs up to 6 significant bits) are multiplied into the weights, which become the
// activation's own 8-bit type with one f32 scale per row (global scale included): a power of two
// that puts the row's largest value at or below the type's top for float types, largest / 127 for
// int8; each value rounded to nearest even. The one lossy step of such a conversion (docs/
// convert.md); does nothing for 16-bit activations. Returns how many weights changed value.
int64_t requantize_per_channel_for_8bit_activations(Layer& layer);

// Act-order: from g_idx [K] (group of each input column), the permutation that makes the groups
// contiguous (empty when g_idx already is k / group_k). Fails naming g_idx when a group id is out
// of range or a group does not have group_k members (the last may be smaller).
std::vector<int32_t> act_order_permutation(const io::TensorView& g_idx, int64_t k, int64_t group_k,
                                           int64_t groups, bool keep_k_order);
// codes [rows][K]: column k' of the result is column perm[k'] of the input.
void permute_columns(std::vector<uint8_t>& codes, int64_t rows, int64_t k,
                     const std::vector<int32_t>& perm);

// The whole act-order step of a scheme with a g_idx tensor (null: none): checks its dtype,
// computes the permutation and applies it to codes [rows][K]. Returns the permutation (empty
// when none is needed) for Layer::k_permutation.
std::vector<int32_t> apply_act_order(const io::TensorView* g_idx, std::vector<uint8_t>& codes,
                                     int64_t rows, int64_t k, int64_t group_k, int64_t groups,
                                     bool keep_k_order);

// The group size of a K-grouped scale with `groups` groups (group.cpp): options.group_size (a
// model's config), else the size g_idx shows, else the one group size that fits: K / groups
// when exact, or a power of two >= 16 with ceil(K / g) == groups. When several fit (K = 288 in
// 3 groups: 96, or 128 with a partial last group) the layer is refused, asking for the group
// size. -1, or groups == 1 with no option, mean per channel (returns k).
int64_t derive_group(const Options& options, int64_t k, int64_t groups,
                     const io::TensorView& scales, const io::TensorView* g_idx = nullptr);

// Several per-tensor scales of a fused layer over row ranges -> one value per row ([N]), or one
// value when they are all equal (uniform = true).
struct RowScales {
  bool uniform = true;
  std::vector<float> per_row;  // [N] when not uniform; [1] when uniform
};
RowScales shard_scales(const std::vector<float>& scalars, int64_t n, const Options& options,
                       const io::TensorView& scale_tensor);
// Makes them the layer's scales: equal ones one tensor (global) scale, else channel scales of
// `channel_dtype` (the dtype the values are exact in).
void set_shard_scales(Layer& layer, const RowScales& scales, core::Dtype channel_dtype);

// Value `index` of a little-endian bit stream of `bits`-bit values held in 32-bit words, word i
// at words + i * word_stride_bytes (a stream may cross word boundaries: GPTQ's 3-bit packing).
inline uint32_t stream_value(const uint8_t* words, int64_t word_stride_bytes, int64_t index,
                             int bits) {
  const int64_t bit = index * bits;
  const int64_t w = bit >> 5;
  const int shift = static_cast<int>(bit & 31);
  uint32_t lo;
  std::memcpy(&lo, words + w * word_stride_bytes, 4);
  uint64_t v = lo >> shift;
  if (shift + bits > 32) {
    uint32_t hi;
    std::memcpy(&hi, words + (w + 1) * word_stride_bytes, 4);
    v |= uint64_t{hi} << (32 - shift);
  }
  return static_cast<uint32_t>(v) & ((1u << bits) - 1u);
}

// Codes [0, count) of `bits`-bit codes packed whole into little-endian 32-bit words, floor(32 /
// bits) to a word, least significant bits first (code j of a word in bits [bits*j, bits*j +
// bits)), into codes[0, count). Word i is at words + i * word_stride_bytes; the last may be
// partly used. Unlike stream_value no code crosses a word: 3-, 5-, 6- and 7-bit codes leave the
// top 32 % bits bits unused (compressed-tensors' pack_to_int32). Where bits divides 32 the two
// orders agree, so GPTQ's 2-, 4- and 8-bit packing is read with this too.
inline void unpack_word_aligned_codes_lsb_first(const uint8_t* words, int64_t word_stride_bytes,
                                                int64_t count, int bits, uint8_t* codes) {
  const int64_t per_word = 32 / bits;
  const uint32_t mask = (1u << bits) - 1u;
  for (int64_t first = 0, i = 0; first < count; first += per_word, ++i) {
    uint32_t word;
    std::memcpy(&word, words + i * word_stride_bytes, 4);
    const int64_t in_word = std::min(per_word, count - first);
    for (int64_t j = 0; j < in_word; ++j)
      codes[first + j] = static_cast<uint8_t>((word >> (bits * j)) & mask);
  }
}

// Runs fn(begin, end) over [0, count) on the usable cores when the work is big enough
// (core::parallel_ranges: every range runs; the first exception is rethrown).
template <typename Fn>
void parallel_for(int64_t count, int64_t work_per_item, Fn fn) {
  const int64_t by_work = std::max<int64_t>(1, count * work_per_item / (int64_t{1} << 20));
  core::parallel_ranges(count, std::min<int64_t>({usable_threads(), by_work, count, 64}), fn);
}

// The common end of the integer schemes (GPTQ, AWQ, compressed-tensors pack-quantized): codes
// [N][K] (unsigned `bits`-bit), scales [N][G] of dtype scale_dtype, real zero points [N][G]
// (empty: symmetric around 2^(bits-1)). group_k == k means one group (channel scales).
struct IntegerParts {
  int bits = 0;
  int64_t n = 0, k = 0, group_k = 0;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  std::vector<float> zero_points;
  core::Dtype scale_dtype;
  const io::TensorView* scale_tensor = nullptr;  // for messages
};
Layer integer_layer(IntegerParts parts, const Options& options, core::Dtype preferred,
                    const io::TensorView& zero_tensor_for_messages);

// Reads an optional bias ([N] or [E][N], any float dtype) into the layer and sets has_bias.
void set_bias(Layer& layer, const io::TensorView* bias, int64_t experts, int64_t n);
// The bias is stored in the output dtype (f16 or bf16, rule R4): when a value lies beyond its
// range, or a nonzero one would become 0, a default f16 output becomes bf16; a requested output
// that cannot hold it is refused naming the tensor, the element and its value.
void fit_bias_to_output(Layer& layer, const io::TensorView* bias, const Options& options);

// Sizes the layer's buffers for its format (codes, scales, zero points, global scale).
void allocate(Layer& layer);
// Validates the format (core::validate for any architecture) and checks every buffer size
// against quant::canonical_shape: the last step of every converter.
void finish(Layer& layer);

}  // namespace hm::schema
