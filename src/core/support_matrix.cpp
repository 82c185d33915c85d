// The support matrix, rendered from the rules (support.cpp): every cell is found by asking check()
// about concrete formats, so the matrix cannot disagree with validation. Used by
// hm_support_matrix, `humming support` and docs/support.md.
#include <algorithm>
#include <string>
#include <vector>

#include "core/support.hpp"

namespace hm::core {
namespace {

const hm_dtype_t kScaleDtypes[] = {HM_DTYPE_F16, HM_DTYPE_BF16, HM_DTYPE_F32,
                                   HM_DTYPE_E4M3, HM_DTYPE_E5M2, HM_DTYPE_UE8M0};

// A format that passes every rule not under study: channel f32 scales, 16-bit output.
Format base_format(Dtype activation) {
  Format f;
  f.activation = activation;
  f.output = Dtype::from_code(activation.code() == HM_DTYPE_BF16 ? HM_DTYPE_BF16 : HM_DTYPE_F16);
  f.scale = Dtype::from_code(HM_DTYPE_F32);
  f.scale_kind = ScaleKind::kChannel;
  f.group_k = 0;
  f.group_n = 0;
  f.n = 4096;
  f.k = 4096;
  return f;
}

bool supported(const Format& f) { return check(f, std::nullopt).empty(); }

std::string join(const std::vector<std::string>& parts, const char* sep = " ") {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

// "int1..int8" for a contiguous run of widths, else the names one by one.
std::string int_run(const std::vector<Dtype>& ints) {
  if (ints.empty()) return "";
  bool contiguous = true;
  for (size_t i = 1; i < ints.size(); ++i) contiguous = contiguous && ints[i].bits() == ints[i - 1].bits() + 1;
  if (contiguous && ints.size() > 2) return ints.front().name() + ".." + ints.back().name();
  std::vector<std::string> names;
  for (Dtype d : ints) names.push_back(d.name());
  return join(names);
}

std::string int_list(const std::vector<Dtype>& ints) {
  std::vector<std::string> parts;
  for (DtypeKind kind : {DtypeKind::kSignedInt, DtypeKind::kUnsignedInt, DtypeKind::kBiasedUnsignedInt}) {
    std::vector<Dtype> of_kind;
    for (Dtype d : ints)
      if (d.kind() == kind) of_kind.push_back(d);
    if (!of_kind.empty()) parts.push_back(int_run(of_kind));
  }
  return parts.empty() ? "-" : join(parts);
}

bool is_default_variant(Dtype d) {
  return d == Dtype::floating(d.exponent_bits(), d.mantissa_bits());
}

// Accepted float weights, compacted: "eXmY with X<=4 Y<=3" for the named default-variant floats
// of at most 8 bits inside that box (with "(not ...)" for the few inside it that fail), else
// their names; then e0m3, f16/bf16, and the 8-bit variants (fn / ieee / finite) that pass.
std::string float_list(const std::vector<Dtype>& accepted, const std::vector<Dtype>& named) {
  std::vector<Dtype> box, extra, variants, variant_candidates;
  for (Dtype d : accepted) {
    if (d.bits() > 8 || d.exponent_bits() == 0) extra.push_back(d);
    else if (is_default_variant(d)) box.push_back(d);
    else variants.push_back(d);
  }
  std::vector<std::string> parts;
  if (!box.empty()) {
    int max_e = 0, max_m = 0;
    for (Dtype d : box) max_e = std::max(max_e, d.exponent_bits()), max_m = std::max(max_m, d.mantissa_bits());
    std::vector<std::string> holes;  // named floats inside the box that do not pass
    for (Dtype d : named)
      if (d.kind() == DtypeKind::kFloat && d.bits() <= 8 && d.exponent_bits() >= 1 && is_default_variant(d) &&
          d.exponent_bits() <= max_e && d.mantissa_bits() <= max_m &&
          std::find(box.begin(), box.end(), d) == box.end())
        holes.push_back(d.name());
    const std::string shape = "eXmY with X<=" + std::to_string(max_e) + " Y<=" + std::to_string(max_m);
    if (holes.empty()) {
      parts.push_back(shape);
    } else if (holes.size() * 2 <= box.size()) {
      parts.push_back(shape + " (not " + join(holes) + ")");
    } else {
      for (Dtype d : box) parts.push_back(d.name());
    }
  }
  for (Dtype d : extra) parts.push_back(d.name());
  // The variants of accepted shapes that do not pass, or those that do, whichever is shorter.
  std::vector<std::string> in, out;
  for (Dtype d : named) {
    if (d.kind() != DtypeKind::kFloat || d.bits() != 8 || is_default_variant(d)) continue;
    const Dtype shape = Dtype::floating(d.exponent_bits(), d.mantissa_bits());
    if (std::find(box.begin(), box.end(), shape) == box.end()) continue;
    (std::find(variants.begin(), variants.end(), d) != variants.end() ? in : out).push_back(d.name());
  }
  if (!in.empty() && out.empty()) parts.push_back("8-bit variants too");
  else if (!in.empty() && out.size() < in.size()) parts.push_back("8-bit variants too (not " + join(out) + ")");
  else if (!in.empty()) parts.push_back("variants " + join(in));
  return parts.empty() ? "-" : join(parts, ", ");
}

struct Row {
  const ActivationSupport* act;
  std::vector<Dtype> ints, ints_int_zp, ints_float_zp, floats;
};

Row row_for(const ActivationSupport& act, const std::vector<Dtype>& named) {
  Row r{&act, {}, {}, {}, {}};
  Format f = base_format(act.dtype);
  for (Dtype w : named) {
    f.weight = w;
    f.zero_point = Dtype();
    const bool ok = supported(f);
    if (ok && w.is_integer()) r.ints.push_back(w);
    if (ok && w.kind() == DtypeKind::kFloat) r.floats.push_back(w);
    if (w.kind() != DtypeKind::kUnsignedInt) continue;
    f.zero_point = w;
    if (supported(f)) r.ints_int_zp.push_back(w);
    f.zero_point = act.dtype;
    if (act.dtype.bits() == 16 && supported(f)) r.ints_float_zp.push_back(w);
  }
  return r;
}

// The scale line: which scale dtypes and group sizes pass with one representative weight.
std::string scale_line(const Row& r) {
  Format f = base_format(r.act->dtype);
  f.weight = !r.ints.empty() ? r.ints.back() : !r.floats.empty() ? r.floats.front() : Dtype();
  std::vector<std::string> channel, group, block;
  for (hm_dtype_t code : kScaleDtypes) {
    f.scale = Dtype::from_code(code);
    f.scale_kind = ScaleKind::kChannel;
    f.group_k = f.group_n = 0;
    if (supported(f)) channel.push_back(f.scale.name());
    for (ScaleKind kind : {ScaleKind::kGroup, ScaleKind::kBlock}) {
      f.scale_kind = kind;
      f.group_n = kind == ScaleKind::kBlock ? 128 : 0;
      for (int g = 16; g <= 512; g += 16) {
        f.group_k = g;
        if (!supported(f)) continue;
        (kind == ScaleKind::kGroup ? group : block).push_back(f.scale.name() + "/" + std::to_string(g));
        break;
      }
    }
  }
  f.scale = Dtype();
  f.scale_kind = ScaleKind::kTensor;
  f.group_k = 0;
  const bool tensor = supported(f);
  std::string line = "scales: channel " + (channel.empty() ? "-" : join(channel)) +
                     " | group (dtype/multiple of) " + (group.empty() ? "-" : join(group)) + " | block " +
                     (block == group ? "as group" : block.empty() ? "-" : join(block)) + " | tensor " +
                     (tensor ? "yes" : "no");
  f = base_format(r.act->dtype);
  f.weight = !r.ints.empty() ? r.ints.back() : !r.floats.empty() ? r.floats.front() : Dtype();
  f.accumulator = Dtype::from_code(HM_DTYPE_F16);
  return line + " | acc f32" + (supported(f) ? " f16" : "");
}

// The kernels line: for the row's representative format (the scale line's), each family with the
// compile-matrix targets it runs that format on ("sm_75+" when every target from one on).
std::string kernel_line(const Row& r, const KernelFamiliesOf& kernels) {
  Format f = base_format(r.act->dtype);
  f.weight = !r.ints.empty() ? r.ints.back() : !r.floats.empty() ? r.floats.front() : Dtype();
  std::vector<std::string> names;                    // families, in first-seen order
  std::vector<std::vector<bool>> runs;               // per family, per known arch
  const std::vector<Arch>& archs = known_archs();
  for (size_t i = 0; i < archs.size(); ++i) {
    if (!check(f, archs[i]).empty()) continue;
    for (const std::string& name : kernels(f, archs[i])) {
      size_t k = std::find(names.begin(), names.end(), name) - names.begin();
      if (k == names.size()) {
        names.push_back(name);
        runs.emplace_back(archs.size(), false);
      }
      runs[k][i] = true;
    }
  }
  if (names.empty())
    return "kernels: none yet (valid formats, but hm_plan_create refuses them: HM_ERROR_UNSUPPORTED)";
  std::vector<std::string> parts;
  for (size_t k = 0; k < names.size(); ++k) {
    size_t first = 0;
    while (!runs[k][first]) ++first;
    bool all_after = true;
    std::vector<std::string> on;
    for (size_t i = first; i < archs.size(); ++i) {
      all_after = all_after && runs[k][i];
      if (runs[k][i]) on.push_back(archs[i].name());
    }
    parts.push_back(names[k] + " " + (all_after && on.size() > 1 ? archs[first].name() + "+" : join(on)));
  }
  return "kernels: " + join(parts, " | ");
}

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

}  // namespace

std::string render_support_matrix(const KernelFamiliesOf& kernels) {
  const std::vector<Dtype> named = all_named_dtypes();
  std::string out =
      "Humming support matrix, rendered from the validation rules (docs/support.md explains them).\n"
      "Weights: intN signed, uintN unsigned, uintNbB unsigned with implicit zero point B; eXmY signed\n"
      "floats (8-bit variants: fn, ieee, finite). Zero points are per group, like the scales.\n";
  for (const ActivationSupport& act : supported_activations()) {
    const Row r = row_for(act, named);
    out += "\n" + pad("a=" + act.dtype.name(), 8) + pad(act.arch_text(), 21) + " MMA K " +
           std::to_string(act.mma_k) + ": " + act.mma + "\n";
    out += "  int    w " + int_list(r.ints) + " | zp uintN (same width) " + int_list(r.ints_int_zp);
    if (act.dtype.bits() == 16) out += " | zp " + act.dtype.name() + " " + int_list(r.ints_float_zp);
    out += "\n  float  w " + float_list(r.floats, named) + "\n";
    out += "  " + scale_line(r) + "\n";
    out += "  " + kernel_line(r, kernels) + "\n";
  }
  return out;
}

std::string render_support_markdown(const KernelFamiliesOf& kernels) {
  std::string out =
      "# Support matrix\n\n"
      "<!-- Generated from src/core/support.cpp; do not edit. The host test SupportDocs.MatchesRules\n"
      "     fails when this file is stale and writes the fresh one to the build tree (its message\n"
      "     gives the cp command). -->\n\n"
      "What Humming can run, as decided by the validation rules in `src/core/support.cpp` (one place:\n"
      "`hm_format_validate`, `humming support`, the tuner and the tests all ask it). Check one format\n"
      "with `humming support --format \"w=uint4b8 a=f16 ...\" [--arch sm_90a]`; the canonical string is\n"
      "described in [format.md](format.md).\n\n"
      "## Matrix\n\n"
      "Per activation dtype: the targets, the MMA, the weight dtypes (without and with zero points) and\n"
      "the scales that pass every rule. `group e4m3/16` means e4m3 group scales with group_k a multiple\n"
      "of 16. The rules say which formats are well formed; the `kernels` line says which kernel\n"
      "families run them today (asked of the kernel registry, `src/gemm/family.cpp`, for the row's\n"
      "representative format: channel f32 scales, K = 4096), and on which targets. A row with no\n"
      "kernel is refused by `hm_plan_create` (`HM_ERROR_UNSUPPORTED`); `humming support --format ...\n"
      "--arch ...` answers for one format.\n\n```text\n" +
      render_support_matrix(kernels) + "```\n\n## Activations\n\n| activation | MMA K | instructions | targets | why |\n|---|---|---|---|---|\n";
  for (const ActivationSupport& a : supported_activations())
    out += "| " + a.dtype.name() + " | " + std::to_string(a.mma_k) + " | " + a.mma + " | " + a.arch_text() +
           " | " + a.why + " |\n";
  out +=
      "\n`a/f`: an arch-specific (`sm_100a`) or family (`sm_100f`) target is required. Without an\n"
      "architecture, validation accepts a format when some target of the compile matrix (sm_75, sm_80,\n"
      "sm_86, sm_87, sm_89, sm_90a, sm_100a, sm_103a, sm_110a, sm_120a, sm_121a) runs it.\n\n"
      "## Rules\n\nChecked in this order; the first broken rule is reported with the offending values.\n"
      "Format rules fail with `HM_ERROR_UNSUPPORTED_FORMAT`, target rules with\n"
      "`HM_ERROR_UNSUPPORTED_ARCH`.\n\n| id | name | kind | rule |\n|---|---|---|---|\n";
  for (const Rule& r : support_rules())
    out += std::string("| ") + r.id + " | " + r.name + " | " +
           (r.status == HM_ERROR_UNSUPPORTED_ARCH ? "target" : "format") + " | " + r.sentence + " |\n";
  return out;
}

}  // namespace hm::core
