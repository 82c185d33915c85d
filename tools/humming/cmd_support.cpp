// `humming support`: prints the support matrix, rendered by the library from its validation rules.
#include <string>

#include "cli.hpp"

namespace cli {

int cmd_support(Args& args) {
  std::string format = args.get("format", "");
  std::string arch = args.get("arch", "");
  args.finish();
  if (!format.empty()) {
    // Check one format and say which rule rejects it, if any.
    hm_format_t* f = nullptr;
    check(hm_format_parse(format.c_str(), &f), "parsing the format");
    hm_status_t s = hm_format_validate(f, arch.empty() ? nullptr : arch.c_str());
    hm_format_destroy(f);
    if (s == HM_SUCCESS) {
      std::printf("supported%s%s: %s\n", arch.empty() ? "" : " on ", arch.c_str(), format.c_str());
      return 0;
    }
    std::printf("not supported: %s: %s\n", hm_status_name(s), last_error().c_str());
    return 1;
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
