#include "jit/kernel_sources.hpp"

#include <filesystem>
#include <system_error>
#include <utility>

#include "core/error.hpp"
#include "core/quote.hpp"
#include "jit/embedded_sources.hpp"
#include "jit/file_util.hpp"
#include "jit/sha256.hpp"

namespace hm::jit {
namespace {

namespace fs = std::filesystem;

bool is_kernel_file(const fs::path& path) {
  const std::string ext = path.extension().string();
  return ext == ".cuh" || ext == ".h";
}

std::string count_text(size_t n) { return std::to_string(n) + (n == 1 ? " file" : " files"); }

}  // namespace

KernelSources::KernelSources(std::map<std::string, std::string> files, std::string origin)
    : files_(std::move(files)), origin_(std::move(origin)) {
  Sha256 h;
  for (const auto& [path, contents] : files_) {
    const std::string header =
        std::to_string(path.size()) + ":" + path + ":" + std::to_string(contents.size()) + ":";
    h.update(header);
    h.update(contents);
  }
  hash_ = h.hex_digest();
}

const KernelSources& KernelSources::get() {
  static const KernelSources sources = from_environment();
  return sources;
}

KernelSources KernelSources::from_environment() {
  const std::string dir = env_or_empty("HUMMING_KERNEL_DIR");
  if (dir.empty()) return embedded();
  KernelSources sources = from_directory(dir);
  sources.origin_ =
      "directory " + dir + " (HUMMING_KERNEL_DIR, " + count_text(sources.files_.size()) + ")";
  return sources;
}

KernelSources KernelSources::embedded() {
  std::map<std::string, std::string> files;
  for (const EmbeddedFile& f : embedded_kernel_files())
    files.emplace(f.path, std::string(f.data, f.size));
  const size_t n = files.size();
  return KernelSources(std::move(files), "embedded (" + count_text(n) + ")");
}

KernelSources KernelSources::from_directory(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    fail(HM_ERROR_IO, "kernel source directory " + core::quoted(dir, core::kQuotedPathBytes) +
                          " is not a directory (check HUMMING_KERNEL_DIR; unset it to use the "
                          "kernels embedded in the library)");
  std::map<std::string, std::string> files;
  fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec) || !is_kernel_file(it->path())) continue;
    std::string contents, error;
    if (!try_read_file(it->path().string(), &contents, &error))
      fail(HM_ERROR_IO, "reading kernel sources from " + core::quoted(dir, core::kQuotedPathBytes) + ": " + error);
    files.emplace(it->path().lexically_relative(dir).generic_string(), std::move(contents));
  }
  if (ec)
    fail(HM_ERROR_IO, "listing kernel source directory " + core::quoted(dir, core::kQuotedPathBytes) + " failed: " + ec.message());
  const size_t n = files.size();
  return KernelSources(std::move(files), "directory " + dir + " (" + count_text(n) + ")");
}

KernelSources KernelSources::from_files(std::map<std::string, std::string> files,
                                        std::string origin) {
  return KernelSources(std::move(files), std::move(origin));
}

}  // namespace hm::jit
