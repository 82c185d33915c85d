// The kernel headers compiled into the library. The definition of embedded_kernel_files() is
// generated at build time by cmake/embed_kernels.cmake from kernels/ (one byte array per file),
// so a single libhumming.so carries the device code it JIT-compiles.
#pragma once

#include <cstddef>
#include <vector>

namespace hm::jit {

struct EmbeddedFile {
  const char* path;  // relative to kernels/, '/'-separated: "humming/core/types.cuh"
  const char* data;  // the file's bytes, NUL-terminated (the NUL is not counted in size)
  size_t size;
};

// Every embedded file, sorted by path.
const std::vector<EmbeddedFile>& embedded_kernel_files();

}  // namespace hm::jit
