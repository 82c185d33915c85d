// The kernel headers the JIT compiles against: the copy embedded in the library (the default), or
// a directory named by HUMMING_KERNEL_DIR for kernel development. Their content hash is part of
// every cache key, so editing a header never loads a binary built from the old one.
#pragma once

#include <map>
#include <string>

namespace hm::jit {

class KernelSources {
 public:
  // The process-wide sources, chosen by from_environment() on first use and fixed afterwards.
  static const KernelSources& get();

  // HUMMING_KERNEL_DIR when set (non-empty), else the embedded copy.
  static KernelSources from_environment();
  static KernelSources embedded();
  // Every *.cuh and *.h under `dir` (the same selection the build embeds), by '/'-separated path
  // relative to `dir`. Throws HM_ERROR_IO when `dir` is not a readable directory.
  static KernelSources from_directory(const std::string& dir);
  // For tests and tools: explicit contents.
  static KernelSources from_files(std::map<std::string, std::string> files, std::string origin);

  // Relative path ("humming/core/types.cuh") -> contents.
  const std::map<std::string, std::string>& files() const { return files_; }
  // SHA-256 (hex) over the sorted paths and contents, each length-prefixed so that no two
  // different file sets hash alike by concatenation.
  const std::string& hash() const { return hash_; }
  // Where the files came from, for `humming info`: "embedded (12 files)" or
  // "directory /path/to/kernels (HUMMING_KERNEL_DIR, 12 files)".
  const std::string& origin() const { return origin_; }

 private:
  KernelSources(std::map<std::string, std::string> files, std::string origin);

  std::map<std::string, std::string> files_;
  std::string hash_;
  std::string origin_;
};

}  // namespace hm::jit
