// What is supported: the ONE place that says it. A table of rules (id, name, one sentence with the
// reason) and a table of activation dtypes with the tensor-core instructions and architectures
// that multiply them. validate() applies the rules; the support matrix (hm_support_matrix,
// `humming support`, docs/support.md) is rendered from the same tables, never written by hand.
#pragma once

#include <cstdint>
#include <optional>
#include <functional>
#include <string>
#include <vector>

#include "core/arch.hpp"
#include "core/format.hpp"

namespace hm::core {

struct Rule {
  const char* id;        // "R10": stable; quoted in error messages and docs/support.md
  const char* name;      // "float-weight-in-float"
  const char* sentence;  // the rule and why it exists
  hm_status_t status;    // HM_ERROR_UNSUPPORTED_FORMAT, or HM_ERROR_UNSUPPORTED_ARCH
};

struct Violation {
  const Rule* rule;
  std::string detail;  // the offending values, e.g. "w=e5m2 has 5 exponent bits, a=e4m3 has 4"
  // "rule R10 float-weight-in-float: <sentence> Here: <detail>."
  std::string message() const;
};

// Every rule, in the order check() applies them: shape, dtypes, zero points, scales, then the
// architecture rules (the only ones with status HM_ERROR_UNSUPPORTED_ARCH).
const std::vector<Rule>& support_rules();
// The rule with this id; throws HM_ERROR_INVALID_ARGUMENT for an unknown id.
const Rule& support_rule(const std::string& id);

// Every violated rule, without throwing. With an arch, the architecture rules are checked for
// that target. Without one, they pass when at least one target of known_archs() satisfies all of
// them (otherwise the violations for the closest target are returned).
std::vector<Violation> check(const Format& format, const std::optional<Arch>& arch);
// Throws hm::Error for the first violation: its rule's status, a message naming the rule, the
// offending values and how many other rules failed. Format rules come first, so
// HM_ERROR_UNSUPPORTED_ARCH means the format itself is fine on some other architecture.
void validate(const Format& format, const std::optional<Arch>& arch);

// One row of the activation table: a dtype the tensor cores multiply, and where.
struct ActivationSupport {
  Dtype dtype;
  int mma_k;             // K of one MMA step (elements): group scales change at most this often
  const char* mma;       // the instructions, for the matrix
  int min_cc;            // lowest compute capability (75 for 7.5)
  int max_cc;            // highest, or 0 for no upper bound
  std::vector<int> only_cc;  // when not empty: exactly these compute capabilities
  bool needs_specific;   // needs an arch-specific target ('a' or 'f' suffix)
  const char* why;       // why the architecture range is what it is

  bool runs_on(const Arch& arch) const;
  std::string arch_text() const;  // "sm_75+", "sm_80..sm_89", "sm_100a/f..sm_129a/f", ...
};
const std::vector<ActivationSupport>& supported_activations();
const ActivationSupport* find_activation(Dtype activation);  // nullptr when not supported

// The exactness facts the dtype rules are made of (exposed so tests can prove them by brute
// force against Dtype::decode):
// The largest L such that every integer in [-L, L] times one power of two is a value of the
// float dtype `a` (so integer weights up to magnitude L convert exactly).
int64_t exact_integer_limit(Dtype a);
// The integer values an integer weight takes after its zero point: [lo, hi].
struct IntegerRange {
  int64_t lo, hi;
};
IntegerRange weight_integer_range(Dtype weight, Dtype zero_point);
// Every value of the float dtype `s` is exactly a value of the float dtype `a` (no rescaling).
bool float_fits_exactly(Dtype s, Dtype a);

// Group scales folded into the weights' exponents (the MXFP4 -> FP8 / INT8 path,
// docs/activations.md): ue8m0 group x tensor scales on 4-bit float weights (e2m1) with e4m3, e5m2
// or int8 activations. The kernel writes each weight times its group scale 2^e straight into an
// activation value, exactly: on e4m3 / e5m2 by adding e to the code's exponent, which is exact
// and stays a normal activation value for e in [lo, hi] (e2m1 on e4m3: [-5, 6], so 0.5 * 2^-5 is
// e4m3's least normal and 6 * 2^6 = 384 <= 448; on e5m2: [-13, 13]); on int8 by shifting the
// weight's count of least steps (rule R11) left by e - lo, exact while the largest count still
// fits a lane (e2m1: 12 << 3 = 96, a window of [0, 3]; lo = 0 by choice, the epilogue carries the
// step). The f32 global scale carries the rest: quantizers and converters put a layer's
// (expert's) largest group exponent at hi, and raise the groups below lo to lo, re-rounding their
// codes. A group scale outside the window reaches the outputs as NaN (NaN weights on float
// activations, NaN rows on int8; never a silently wrong product). No window (nullopt) for any
// other format.
struct ScaleExponentWindow {
  int lo, hi;  // group scales 2^lo .. 2^hi
};
std::optional<ScaleExponentWindow> scale_exponent_window(const Format& f);

// Whether 8-bit activations take the format's weight group or block scales in f32 between MMA
// steps (a fold per K group, with a second accumulator set: gemm/dense_wgmma.cuh), i.e. the
// format has group scales that do not go into the weights' exponents.
bool folds_weight_groups_in_f32(const Format& f);

// Whether those groups are under a 128-k step (group scales of 32 or 64 k, not block scales):
// the dense kernels fold them per group slot of every step, a partial accumulator set each
// (GroupFold::kSets; on wgmma tiles stop at tune::folded_group_token_cap tokens).
bool folds_weight_groups_per_slot(const Format& f);

// Which kernel families run a format (valid for the arch) on an arch: their names, none when
// no kernel does yet. Supplied by the layer that owns the kernels (src/gemm's registry), so the
// matrix says what runs without core knowing the kernels.
using KernelFamiliesOf = std::function<std::vector<std::string>(const Format&, const Arch&)>;

// The matrix as plain text (hm_support_matrix, `humming support`).
std::string render_support_matrix(const KernelFamiliesOf& kernels);
// docs/support.md: the matrix, the activation table and the rule table.
std::string render_support_markdown(const KernelFamiliesOf& kernels);

}  // namespace hm::core
