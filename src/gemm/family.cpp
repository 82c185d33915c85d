#include "gemm/family.hpp"

#include <algorithm>
#include <utility>

#include "core/error.hpp"
#include "core/support.hpp"
#include "core/quote.hpp"

#include <nlohmann/json.hpp>

namespace hm::gemm {

const Family* family_by_tuning_name(const std::string& name) {
  for (const Family* family : families())
    if (name == family->tuning_name()) return family;
  return nullptr;
}

std::vector<const Family*> families_for(const core::Format& f, const core::Arch& arch) {
  std::vector<const Family*> out;
  for (const Family* family : families())
    if (family->gap(f, arch).empty()) out.push_back(family);
  return out;
}

std::vector<std::string> family_names(const core::Format& f, const core::Arch& arch) {
  std::vector<std::string> names;
  for (const Family* family : families_for(f, arch)) names.push_back(family->name());
  return names;
}

std::vector<std::string> families_running(const core::Format& f,
                                          const std::optional<core::Arch>& arch) {
  core::validate(f, arch);
  if (arch) {
    require_kernel(f, *arch);
    return family_names(f, *arch);
  }
  // Any target where the format is valid, families in registry order.
  std::vector<std::string> names;
  std::optional<core::Arch> first_valid;
  for (const Family* family : families()) {
    for (const core::Arch& a : core::known_archs()) {
      if (!core::check(f, a).empty()) continue;
      if (!first_valid) first_valid = a;
      if (family->gap(f, a).empty()) {
        names.push_back(family->name());
        break;
      }
    }
  }
  if (names.empty() && first_valid) require_kernel(f, *first_valid);
  return names;
}

std::string kernel_gap(const core::Format& f, const core::Arch& arch) {
  // Families built on one template often give the same reason: each reason once, after the
  // names of the families that gave it.
  std::vector<std::pair<std::string, std::string>> reasons;  // (names, reason)
  for (const Family* family : families()) {
    const std::string gap = family->gap(f, arch);
    if (gap.empty()) return "";
    auto same = std::find_if(reasons.begin(), reasons.end(),
                             [&](const auto& r) { return r.second == gap; });
    if (same == reasons.end()) reasons.emplace_back(family->name(), gap);
    else same->first += std::string(", ") + family->name();
  }
  std::string why;
  for (const auto& [names, reason] : reasons) why += (why.empty() ? "" : "; ") + names + ": " + reason;
  return why;
}

void require_kernel(const core::Format& f, const core::Arch& arch) {
  const std::string gap = kernel_gap(f, arch);
  if (!gap.empty())
    fail(HM_ERROR_UNSUPPORTED, "no kernel runs " + f.to_string() + " on " + arch.name() +
                                   " (the format is valid; its kernel is not written yet): " + gap);
}

Layer make_layer(const core::Format& format, const core::Arch& arch, const std::string& arch_name,
                 const runtime::Device* device) {
  return Layer{format, quant::packed_shape(format), arch, arch_name, device,
               device ? device->properties().multiprocessors : 132};
}

std::vector<Range> default_ranges(const Layer& layer) {
  require_kernel(layer.format, layer.arch);
  const Family* family = families_for(layer.format, layer.arch).front();
  std::vector<Range> ranges;
  for (auto& [max_m, tile] : family->default_tiles(layer))
    ranges.push_back({max_m, family, std::move(tile)});
  ranges.back().max_m = INT64_MAX;
  return ranges;
}

std::vector<Range> parse_ranges(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    fail(HM_ERROR_PARSE, std::string("tuning JSON is not valid JSON: ") + e.what());
  }
  HM_REQUIRE(j.is_object() && j.contains("dense") && j["dense"].is_array() && !j["dense"].empty(),
             HM_ERROR_PARSE, "tuning JSON must be an object with a non-empty array \"dense\"");
  std::string names;
  for (const Family* family : families())
    names += std::string(names.empty() ? "" : ", ") + "\"" + family->tuning_name() + "\"";
  std::vector<Range> out;
  for (size_t i = 0; i < j["dense"].size(); ++i) {
    const auto& e = j["dense"][i];
    const std::string where = "tuning JSON dense[" + std::to_string(i) + "]";
    HM_REQUIRE(e.is_object(), HM_ERROR_PARSE, where + " must be an object");
    const auto kernel = e.find("kernel");
    const Family* family = family_by_tuning_name("mma");
    if (kernel != e.end()) {
      HM_REQUIRE(kernel->is_string(), HM_ERROR_PARSE, where + ".kernel must be one of " + names);
      family = family_by_tuning_name(kernel->get<std::string>());
      HM_REQUIRE(family != nullptr, HM_ERROR_PARSE,
                 where + ".kernel is " + core::quoted(kernel->get<std::string>()) +
                     ", not one of " + names);
    }
    int64_t max_m = INT64_MAX;
    if (const auto it = e.find("max_m"); it != e.end()) {
      // 64-bit JSON integers; an unsigned one above INT64_MAX is out of range, not wrapped.
      HM_REQUIRE(it->is_number_integer() &&
                     (!it->is_number_unsigned() || it->get<uint64_t>() <= INT64_MAX) &&
                     it->get<int64_t>() >= 1,
                 HM_ERROR_PARSE,
                 where + ".max_m is " + it->dump() + ", outside the range [1, 2^63 - 1]");
      max_m = it->get<int64_t>();
    }
    HM_REQUIRE(out.empty() || max_m > out.back().max_m, HM_ERROR_PARSE,
               where + ".max_m must be larger than the previous entry's");
    out.push_back({max_m, family, family->parse_tile(e, where)});
  }
  out.back().max_m = INT64_MAX;
  return out;
}

void check_ranges(const std::vector<Range>& ranges, const Layer& layer) {
  for (const Range& r : ranges) {
    const std::string gap = r.family->gap(layer.format, layer.arch);
    if (gap.empty()) {
      r.family->check_tile(*r.tile, layer);
      continue;
    }
    std::string instead;  // the families that do run it
    for (const Family* family : families_for(layer.format, layer.arch))
      instead += std::string(instead.empty() ? "" : " or ") + "\"kernel\": \"" +
                 family->tuning_name() + "\"";
    fail(HM_ERROR_UNSUPPORTED, "tile " + r.tile->name() + " asks for the " + r.family->name() +
                                   " kernel, which cannot run this plan: " + gap + "; use " +
                                   (instead.empty() ? "another format" : instead) +
                                   " for this format");
  }
}

size_t range_of(const std::vector<Range>& ranges, int64_t m) {
  for (size_t i = 0; i < ranges.size(); ++i)
    if (m <= ranges[i].max_m) return i;
  return ranges.size() - 1;
}

}  // namespace hm::gemm
