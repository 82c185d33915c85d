// `humming support`: prints the support matrix, rendered by the library from its validation rules;
// with --format, whether one format runs; with --converted, whether each layer of a converted
// model does.
#include <string>

#include "cli.hpp"

namespace cli {

namespace {

// `humming support --converted PATH [--arch A]`: for each converted layer of a folder or file,
// the kernel families that run it (or why none does); fails when any layer has none.
int support_converted(const std::string& path, const std::string& arch) {
  struct Model {
    hm_stored_model_t* m = nullptr;
    ~Model() { hm_stored_model_destroy(m); }
  } model;
  check(hm_stored_model_open(path.c_str(), &model.m), "opening --converted");
  size_t count = 0;
  check(hm_stored_model_layer_count(model.m, &count), "counting the layers");
  const char* target = arch.empty() ? nullptr : arch.c_str();
  size_t without = 0;
  for (size_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    check(hm_stored_model_layer_name(model.m, i, &name), "listing the layers");
    hm_format_t* f = nullptr;  // from the header: no weight is read
    check(hm_stored_model_layer_format(model.m, name, &f), "reading a layer's format");
    char text[512] = {}, names[256] = {};
    hm_format_to_string(f, text, sizeof text, nullptr);
    const hm_status_t s = hm_format_kernels(f, target, names, sizeof names, nullptr);
    hm_format_destroy(f);
    if (s == HM_SUCCESS) {
      std::printf("%s: %s (%s)\n", name, names, text);
    } else {
      ++without;
      std::printf("%s: no kernel%s: %s (%s)\n", name, arch.empty() ? "" : (" on " + arch).c_str(),
                  last_error().c_str(), text);
    }
  }
  std::printf("%zu layers, %zu without a kernel%s\n", count, without,
              arch.empty() ? "" : (" on " + arch).c_str());
  return without == 0 ? 0 : 1;
}

}  // namespace

int cmd_support(Args& args) {
  std::string format = args.get("format", "");
  std::string arch = args.get("arch", "");
  const std::string converted = args.get("converted", "");
  args.finish();
  if (!converted.empty()) {
    if (!format.empty()) throw Failure{"--format and --converted exclude each other"};
    return support_converted(converted, arch);
  }
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
