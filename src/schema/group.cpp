// The group size of K-grouped scales (see derive_group in common.hpp). A checkpoint's scale
// tensor only says how many groups there are; more than one group size can give that count
// (a partial last group), so a guess can convert a layer silently wrong: the size comes from
// the config (options), from g_idx, or from the shapes only when exactly one size fits.
#include <map>
#include <set>

#include "core/error.hpp"
#include "schema/common.hpp"

namespace hm::schema {

namespace {

// The group size g_idx shows: every group but the last has exactly g members, in any order
// (act-order); 0 when g_idx says nothing usable (apply_act_order reports what is wrong).
int64_t group_of_g_idx(const io::TensorView& g_idx, int64_t k, int64_t groups) {
  if (g_idx.numel() != k || (g_idx.dtype != "I32" && g_idx.dtype != "I64")) return 0;
  std::map<int64_t, int64_t> count;
  for (int64_t g : read_integers(g_idx)) ++count[g];
  int64_t largest = 0;
  for (const auto& [g, c] : count) largest = std::max(largest, c);
  if (largest == 0 || (k + largest - 1) / largest != groups) return 0;
  // Only a g_idx whose groups all have that size (the last may be smaller) says it.
  for (const auto& [g, c] : count)
    if (g < 0 || g >= groups || (c != largest && g != groups - 1)) return 0;
  return largest;
}

}  // namespace

int64_t derive_group(const Options& options, int64_t k, int64_t groups,
                     const io::TensorView& scales, const io::TensorView* g_idx) {
  if (groups <= 0) bad_tensor(scales, "has no scale groups (a dimension of 0)");
  if (options.group_size == -1 || (options.group_size == 0 && groups == 1)) {
    if (groups != 1)
      bad_tensor(scales, "has " + std::to_string(groups) + " groups, but group_size -1 means one");
    return k;
  }
  int64_t g = options.group_size;
  if (g == 0 && g_idx) g = group_of_g_idx(*g_idx, k, groups);
  if (g == 0) {
    std::set<int64_t> fits;
    if (k % groups == 0) fits.insert(k / groups);
    for (int64_t p = 16; p < k; p *= 2)
      if ((k + p - 1) / p == groups) fits.insert(p);
    if (fits.size() != 1) {
      std::string list;
      for (int64_t f : fits) list += (list.empty() ? "" : " and ") + std::to_string(f);
      bad_tensor(scales,
                 "has " + std::to_string(groups) + " groups for K = " + std::to_string(k) + ", " +
                     (fits.empty() ? std::string("which no usual group size gives")
                                   : "which group sizes " + list + " all give") +
                     "; pass the group size (--group-size / options.group_size; a model "
                     "folder's config says it)");
    }
    g = *fits.begin();
  }
  if (g <= 0 || (k + g - 1) / g != groups)
    bad_tensor(scales, "has " + std::to_string(groups) + " groups, but K = " + std::to_string(k) +
                           " with group size " + std::to_string(g) + " needs " +
                           std::to_string(g > 0 ? (k + g - 1) / g : 0));
  return g;
}

}  // namespace hm::schema
