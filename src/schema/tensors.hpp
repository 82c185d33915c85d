// Shared helpers of the converters: find a layer's tensors by role, check their dtypes and shapes
// with messages that name the tensor, and read elements (unaligned, little-endian) as numbers.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "io/safetensors.hpp"
#include "schema/convert.hpp"

namespace hm::schema {

// The tensors of one layer, by role. Construction fails (HM_ERROR_INVALID_ARGUMENT) on a tensor
// whose name matches none of the scheme's roles, two tensors with the same role, or tensors of
// different layers (full names that differ before the role; a bare role name fits any layer).
class LayerTensors {
 public:
  LayerTensors(Scheme scheme, const std::vector<io::TensorView>& tensors);
  const io::TensorView* find(const std::string& role) const;
  // Throws HM_ERROR_INVALID_ARGUMENT naming the missing role (with its full name when the
  // layer's prefix is known) and the scheme.
  const io::TensorView& require(const std::string& role) const;
  // The name the tensor of `role` has or would have: "<prefix><separator><role>", or the role.
  std::string full_name(const std::string& role) const;
  // The layer's name ("model.layers.0.mlp.down_proj"), empty when only bare roles were given.
  const std::string& prefix() const { return prefix_; }

 private:
  Scheme scheme_;
  std::string prefix_;
  std::vector<std::pair<std::string, const io::TensorView*>> by_role_;
};

// "tensor 'model.layers.0.qweight'": the start of every message about a tensor.
std::string tensor_label(const io::TensorView& t);

// Throw HM_ERROR_INVALID_ARGUMENT naming the tensor, what it has and what was expected.
void expect_dtype(const io::TensorView& t, std::initializer_list<const char*> dtypes);
void expect_shape(const io::TensorView& t, const std::vector<int64_t>& shape);
void expect_ndim(const io::TensorView& t, size_t ndim);
// Fails naming the tensor: `detail` says what is inconsistent.
[[noreturn]] void bad_tensor(const io::TensorView& t, const std::string& detail,
                             hm_status_t status = HM_ERROR_INVALID_ARGUMENT);

// Element i of a 32-bit / 8-bit tensor (any alignment).
inline uint32_t u32_at(const io::TensorView& t, int64_t i) {
  uint32_t v;
  std::memcpy(&v, t.data + 4 * i, 4);
  return v;
}
inline uint8_t u8_at(const io::TensorView& t, int64_t i) { return t.data[i]; }

// The values of a float tensor (F32, F16, BF16, F8_E4M3, F8_E5M2), exactly, as float.
std::vector<float> read_floats(const io::TensorView& t);
// read_floats for scales: a NaN or infinite element fails with HM_ERROR_NON_FINITE naming the
// tensor and the element's index.
std::vector<float> read_scales(const io::TensorView& t);
// "element 5 ([0, 5])": an element's flat and multi-dimensional index, for messages.
std::string element_label(const io::TensorView& t, int64_t flat);
// The checkpoint dtype of a float tensor as a core dtype (F16 -> f16, F8_E4M3 -> e4m3, ...).
core::Dtype float_dtype_of(const io::TensorView& t);
// The values of an integer tensor (I8, I16, I32, I64, U8, U16, U32), as int64.
std::vector<int64_t> read_integers(const io::TensorView& t);

// CPUs this process may use (affinity-aware), or the calling thread's limit (ThreadLimit).
int usable_threads();

// Caps usable_threads() on the calling thread while it lives: the model converter runs layers
// on several threads and gives each one share of the cores, so their inner parallel loops do
// not oversubscribe the machine.
class ThreadLimit {
 public:
  explicit ThreadLimit(int threads);
  ~ThreadLimit();
  ThreadLimit(const ThreadLimit&) = delete;
  ThreadLimit& operator=(const ThreadLimit&) = delete;

 private:
  int previous_;
};

}  // namespace hm::schema
