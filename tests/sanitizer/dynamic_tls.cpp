// Regression test of cmake/sanitizer_options.cpp: puts a dlopen'ed module's dynamic TLS block 16
// bytes past a page boundary, where gcc 12's LeakSanitizer misreads ASan's chunk header as a
// glibc TLS header, then exits normally. With the sanitizer build's default options the leak
// check at exit runs and the test passes; without them the tracer crashes ("Tracer caught
// signal 11") and the process fails. CTest's skip code (HM_TEST_SKIP_CODE) when the block cannot be
// placed.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {
constexpr uintptr_t kPage = 4096;
constexpr uintptr_t kBadOffset = 16;  // sizeof the glibc 2.19 header LeakSanitizer looks for
constexpr size_t kBlockBytes = 32;    // the module's TLS size: the same allocator size class
constexpr size_t kMaxBlocks = size_t{1} << 16;
void* g_kept[kMaxBlocks];             // a plain global (no destructor): reachable at the leak check
size_t g_count = 0;
void* keep(void* p) { return g_kept[g_count++] = p; }
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MODULE.so\n", argv[0]);
    return 2;
  }
  // ASan hands out a size class's chunks in address order from a fresh region, so the block
  // glibc allocates next lands one stride past the last of these: stop one stride short of the
  // bad offset.
  void* previous = keep(std::malloc(kBlockBytes));
  void* current = keep(std::malloc(kBlockBytes));
  const uintptr_t stride = reinterpret_cast<uintptr_t>(current) - reinterpret_cast<uintptr_t>(previous);
  if (stride == 0 || stride > kPage) return HM_TEST_SKIP_CODE;
  while ((reinterpret_cast<uintptr_t>(current) + stride) % kPage != kBadOffset) {
    if (g_count == kMaxBlocks) return HM_TEST_SKIP_CODE;
    current = keep(std::malloc(kBlockBytes));
  }
  void* module = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (module == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 2;
  }
  auto address = reinterpret_cast<void* (*)()>(dlsym(module, "hm_dynamic_tls_address"));
  if (address == nullptr) {
    std::fprintf(stderr, "dlsym: %s\n", dlerror());
    return 2;
  }
  const uintptr_t block = reinterpret_cast<uintptr_t>(address());
  std::printf("dynamic TLS block at %#zx (page offset %zu)\n", static_cast<size_t>(block),
              static_cast<size_t>(block % kPage));
  if (block % kPage != kBadOffset) {
    std::printf("could not place the block at page offset %zu: skipped\n",
                static_cast<size_t>(kBadOffset));
    return HM_TEST_SKIP_CODE;
  }
  return 0;  // the leak check runs after this
}
