// `humming`: the command-line face of the library.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cli.hpp"

namespace cli {

Args::Args(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) {
      // Leading words are positional (convert IN_DIR OUT_DIR); after an option they are values.
      if (options_.empty()) {
        positionals_.push_back(a);
        continue;
      }
      throw Failure{"unexpected argument " + quoted(a) + " (options start with --)"};
    }
    a = a.substr(2);
    auto eq = a.find('=');
    if (eq != std::string::npos) {
      options_.emplace_back(a.substr(0, eq), a.substr(eq + 1));
    } else if (i + 1 < argc && std::strncmp(argv[i + 1], "--", 2) != 0) {
      options_.emplace_back(a, argv[++i]);
    } else {
      options_.emplace_back(a, "");
    }
  }
}

std::vector<std::string> Args::positionals() {
  positionals_taken_ = true;
  return positionals_;
}

std::string Args::get(const std::string& name, const std::string& fallback) {
  known_.push_back(name);
  for (auto& [k, v] : options_)
    if (k == name) return v;
  return fallback;
}

bool Args::flag(const std::string& name) {
  known_.push_back(name);
  for (auto& [k, v] : options_)
    if (k == name) return true;
  return false;
}

void Args::finish() const {
  if (!positionals_taken_ && !positionals_.empty())
    throw Failure{"unexpected argument " + quoted(positionals_[0]) + " (options start with --)"};
  for (auto& [k, v] : options_) {
    bool ok = false;
    for (auto& n : known_) ok |= (n == k);
    if (!ok) throw Failure{"unknown option " + quoted("--" + k)};
  }
}

int64_t parse_integer(const std::string& text, const std::string& option, int64_t min,
                      int64_t max) {
  const std::string range = "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0')
    throw Failure{"--" + option + " takes an integer in " + range + ", got " + quoted(text)};
  if (errno == ERANGE || v < min || v > max)
    throw Failure{"--" + option + " is " + quoted(text) + ", outside the range " + range};
  return v;
}

}  // namespace cli

static void usage(FILE* out) {
  std::fprintf(out,
               "usage: humming <command> [options]\n"
               "\n"
               "commands:\n"
               "  info                       library, driver, NVRTC/NVCC, devices, kernel cache\n"
               "  support [--format F | --converted PATH] [--arch A]\n"
               "                             the support matrix (from the validation rules); or\n"
               "                             which kernels run a format, or each converted layer\n"
               "  compile --arch sm_90a [--format F]\n"
               "                             compile kernels ahead of time into the cache (the\n"
               "                             reference GEMMs, and every kernel of F's plan)\n"
               "  demo [--format F] [--arch A] [--m M]\n"
               "                             quantize, pack, compile, run and check a layer\n"
               "  demo --converted PATH --layer NAME [--arch A] [--m M]\n"
               "                             the same for a layer humming convert wrote\n"
               "  convert IN_DIR OUT_DIR [--dry-run] [--force] [--threads N] ...\n"
               "                             a Hugging Face model folder into the standard layout\n"
               "                             (--stack-experts [--join-gate-up]: MoE experts\n"
               "                             stored one layer each written as one layer)\n"
               "  convert --scheme S --in F --out F [--act DTYPE] ...\n"
               "                             one safetensors file into the standard layout\n"
               "  cache prune [--max-age-days N] [--max-size SIZE] [--dir DIR]\n"
               "                             remove kernel-cache entries not used for N days and\n"
               "                             / or the least recently used beyond SIZE (e.g. 2G)\n"
               "  version                    the library version\n");
}

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  std::string cmd = argv[1];
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    usage(stdout);
    return 0;
  }
  try {
    cli::Args args(argc, argv, 2);
    if (cmd == "info") return cli::cmd_info(args);
    if (cmd == "support") return cli::cmd_support(args);
    if (cmd == "compile") return cli::cmd_compile(args);
    if (cmd == "demo") return cli::cmd_demo(args);
    if (cmd == "convert") return cli::cmd_convert(args);
    if (cmd == "cache") return cli::cmd_cache(args);
    if (cmd == "version") {
      args.finish();
      std::printf("humming %s (ABI %u)\n", hm_version_string(), hm_abi_version());
      return 0;
    }
    std::fprintf(stderr, "humming: unknown command %s\n\n", cli::quoted(cmd).c_str());
    usage(stderr);
    return 2;
  } catch (const cli::Failure& f) {
    std::fprintf(stderr, "humming %s: %s\n", cli::quoted(cmd).c_str(), f.message.c_str());
    return 1;
  }
}
