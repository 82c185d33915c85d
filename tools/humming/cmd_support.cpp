// `humming support`: prints the support matrix, rendered by the library from its validation rules.
#include <string>

#include "cli.hpp"

namespace cli {

int cmd_support(Args& args) {
  std::string format = args.get("format", "");
  std::string arch = args.get("arch", "");
  args.finish();
  if (!format.empty()) {
    // Check one format: which rule rejects it, if any, then which kernel families run it.
    hm_format_t* f = nullptr;
    check(hm_format_parse(format.c_str(), &f), "parsing the format");
    const char* target = arch.empty() ? nullptr : arch.c_str();
    const std::string on = arch.empty() ? "" : " on " + arch;
    hm_status_t s = hm_format_validate(f, target);
    if (s != HM_SUCCESS) {
      hm_format_destroy(f);
      std::printf("not supported%s: %s: %s\n", on.c_str(), hm_status_name(s), last_error().c_str());
      return 1;
    }
    char names[256] = {};
    s = hm_format_kernels(f, target, names, sizeof names, nullptr);
    hm_format_destroy(f);
    if (s != HM_SUCCESS) {
      std::printf("valid%s, but no kernel runs it yet (hm_plan_create refuses it): %s: %s\n",
                  on.c_str(), hm_status_name(s), last_error().c_str());
      return 1;
    }
    std::printf("supported%s: %s\nkernels: %s\n", on.c_str(), format.c_str(), names);
    return 0;
  }
  size_t length = 0;
  hm_support_matrix(nullptr, 0, &length);
  std::string text(length + 1, '\0');
  check(hm_support_matrix(&text[0], text.size(), &length), "rendering the support matrix");
  text.resize(length);
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace cli
