// A stand-in for libFuzzer where the compiler has none (GCC, or clang without
// libclang-rt-*-dev): replays every file of the corpus directories given, then feeds random
// mutations of them (bit flips, byte changes, insertions, deletions, splices, interesting
// integers) until the time is up. Not coverage-guided, but deterministic for a seed, and it runs
// under the sanitizer build. Usage (tests/fuzz/README.md):
//   fuzz_<target> [--seconds S] [--seed N] [--max-len BYTES] CORPUS_DIR_OR_FILE...
// A failing input is written to ./fuzz-crash-input before the process dies.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

// Under ASan a crash is reported and the process ended by the sanitizer, not by a signal: its
// death callback writes the input then.
#if defined(__SANITIZE_ADDRESS__)
#define HM_FUZZ_HAVE_DEATH_CALLBACK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HM_FUZZ_HAVE_DEATH_CALLBACK 1
#endif
#endif
#ifdef HM_FUZZ_HAVE_DEATH_CALLBACK
#include <sanitizer/common_interface_defs.h>
#endif

#include "fuzz_target.hpp"

namespace {

std::vector<uint8_t> g_current;  // the input being run, for the crash report

// Async-signal-safe: open + write + close.
void dump_current() {
  FILE* f = std::fopen("fuzz-crash-input", "wb");
  if (!f) return;
  std::fwrite(g_current.data(), 1, g_current.size(), f);
  std::fclose(f);
  static const char kMessage[] = "fuzz driver: the failing input is in ./fuzz-crash-input\n";
  if (::write(2, kMessage, sizeof kMessage - 1) < 0) return;
}

void on_signal(int sig) {
  dump_current();
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

std::vector<uint8_t> read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void run(const std::vector<uint8_t>& input) {
  g_current = input;
  LLVMFuzzerTestOneInput(g_current.data(), g_current.size());
}

std::vector<uint8_t> mutate(std::vector<uint8_t> x, const std::vector<std::vector<uint8_t>>& pool,
                            std::mt19937_64& rng, size_t max_len) {
  static const uint64_t kInteresting[] = {0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0xffff, 0x7fffffff,
                                          0x80000000ull, 0xffffffffull, 0x7fffffffffffffffull,
                                          0x8000000000000000ull, ~0ull, 4294967312ull, 1ull << 31};
  const int steps = 1 + static_cast<int>(rng() % 4);
  for (int s = 0; s < steps; ++s) {
    const size_t at = x.empty() ? 0 : rng() % x.size();
    switch (rng() % 8) {
      case 0:
        if (!x.empty()) x[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:
        if (!x.empty()) x[at] = static_cast<uint8_t>(rng());
        break;
      case 2:
        if (x.size() < max_len) x.insert(x.begin() + at, static_cast<uint8_t>(rng()));
        break;
      case 3:
        if (!x.empty()) x.erase(x.begin() + at, x.begin() + std::min(x.size(), at + 1 + rng() % 8));
        break;
      case 4: {  // splice in a piece of another input
        const auto& other = pool[rng() % pool.size()];
        if (other.empty()) break;
        const size_t from = rng() % other.size(), len = 1 + rng() % std::min<size_t>(64, other.size() - from);
        x.insert(x.begin() + at, other.begin() + from, other.begin() + from + len);
        break;
      }
      case 5: {  // an interesting integer, little-endian
        const uint64_t v = kInteresting[rng() % (sizeof kInteresting / sizeof kInteresting[0])];
        for (int i = 0; i < 8 && at + i < x.size(); ++i) x[at + i] = static_cast<uint8_t>(v >> (8 * i));
        break;
      }
      case 6: {  // an interesting integer, in decimal (text formats)
        const std::string v = std::to_string(kInteresting[rng() % (sizeof kInteresting / sizeof kInteresting[0])]);
        x.insert(x.begin() + at, v.begin(), v.end());
        break;
      }
      default:
        if (x.size() > 1) x.resize(rng() % x.size());
    }
  }
  if (x.size() > max_len) x.resize(max_len);
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 0;
  uint64_t seed = 16;
  size_t max_len = 4096;
  std::vector<std::vector<uint8_t>> corpus;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--max-len" && i + 1 < argc) {
      max_len = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::filesystem::is_directory(a)) {
      for (const auto& e : std::filesystem::directory_iterator(a))
        if (e.is_regular_file()) corpus.push_back(read_file(e.path()));
    } else if (std::filesystem::is_regular_file(a)) {
      corpus.push_back(read_file(a));
    } else {
      std::fprintf(stderr, "usage: %s [--seconds S] [--seed N] [--max-len BYTES] CORPUS...\n"
                   "  (%s is neither an option nor a file or directory)\n", argv[0], a.c_str());
      return 2;
    }
  }
#ifdef HM_FUZZ_HAVE_DEATH_CALLBACK
  __sanitizer_set_death_callback(dump_current);
#endif
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGABRT, SIGILL}) ::signal(sig, on_signal);

  for (const auto& input : corpus) run(input);
  size_t runs = corpus.size();
  if (corpus.empty()) corpus.push_back({});
  std::mt19937_64 rng(seed);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    for (int i = 0; i < 64; ++i, ++runs) run(mutate(corpus[rng() % corpus.size()], corpus, rng, max_len));
  }
  std::fprintf(stderr, "fuzz driver: %zu inputs (seed %llu), no failure\n", runs,
               static_cast<unsigned long long>(seed));
  return 0;
}
