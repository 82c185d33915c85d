#include "jit/cache_entry.hpp"

#include <stdio.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "jit/file_util.hpp"
#include "jit/sha256.hpp"

namespace hm::jit {
namespace {

using nlohmann::json;

bool parse_meta(const std::string& dir, json* meta, std::string* reason) {
  std::string text, error;
  if (!try_read_file(dir + "/" + kMetaFile, &text, &error)) {
    *reason = std::string(kMetaFile) + " is unreadable (" + error + ")";
    return false;
  }
  *meta = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (meta->is_discarded() || !meta->is_object()) {
    *reason = std::string(kMetaFile) + " is not a JSON object";
    return false;
  }
  return true;
}

}  // namespace

EntryState read_entry(const std::string& dir, const CacheKey& key, CompiledKernel* kernel,
                      std::string* reason) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    // ENOTDIR: a parent is not a directory, so there is no entry (publishing will say why).
    if (errno == ENOENT || errno == ENOTDIR) return EntryState::kMissing;
    *reason = "cannot stat the entry: " + std::string(std::strerror(errno));
    return EntryState::kCorrupt;
  }
  if (!S_ISDIR(st.st_mode)) {
    *reason = "the entry is not a directory";
    return EntryState::kCorrupt;
  }
  json meta;
  if (!parse_meta(dir, &meta, reason)) return EntryState::kCorrupt;
  try {
    if (meta.value("format", 0) != kCacheFormat) {
      *reason = "meta.json has format " + meta.value("format", json()).dump() + ", expected " +
                std::to_string(kCacheFormat);
      return EntryState::kCorrupt;
    }
    if (meta.at("key").get<std::string>() != key.hex ||
        meta.at("components").get<std::map<std::string, std::string>>() != key.components) {
      *reason = "meta.json describes another key";
      return EntryState::kCorrupt;
    }
    const bool is_ptx = meta.at("is_ptx").get<bool>();
    const json& image = meta.at("image");
    const std::string file = image.at("file").get<std::string>();
    if (file != image_file_name(is_ptx)) {
      *reason = "meta.json names image file '" + file + "', expected " + image_file_name(is_ptx);
      return EntryState::kCorrupt;
    }
    // The size is compared (fstat) before the image is read, so a damaged entry with a huge
    // file in place of the image costs nothing to reject.
    const uint64_t size = image.at("size").get<uint64_t>();
    std::string bytes, error;
    uint64_t size_found = kAnySize;
    if (!try_read_file(dir + "/" + file, &bytes, &error, size, &size_found)) {
      if (size_found != kAnySize && size_found != size)
        *reason = "image " + file + " has " + std::to_string(size_found) +
                  " bytes, meta.json says " + std::to_string(size);
      else
        *reason = "image " + error;
      return EntryState::kCorrupt;
    }
    if (bytes.size() != size) {  // it shrank while being read
      *reason = "image " + file + " has " + std::to_string(bytes.size()) +
                " bytes, meta.json says " + std::to_string(size);
      return EntryState::kCorrupt;
    }
    if (sha256_hex(bytes) != image.at("sha256").get<std::string>()) {
      *reason = "image " + file + " does not match the SHA-256 in meta.json";
      return EntryState::kCorrupt;
    }
    kernel->image = std::move(bytes);
    kernel->is_ptx = is_ptx;
    kernel->log = meta.value("log", std::string());
    return EntryState::kValid;
  } catch (const json::exception& e) {
    *reason =
        std::string("meta.json lacks a required field or has a wrong type (") + e.what() + ")";
    return EntryState::kCorrupt;
  }
}

void write_entry(const std::string& dir, const CacheKey& key, const CompileRequest& request,
                 const Compiler& compiler, const CompiledKernel& kernel) {
  // The source is kept for people (diffing a miss, reproducing a compile); nothing loads it.
  write_file_durably(dir + "/" + kSourceFile, request.source);
  write_file_durably(dir + "/" + image_file_name(kernel.is_ptx), kernel.image);
  json meta = {
      {"format", kCacheFormat},
      {"key", key.hex},
      {"components", key.components},
      {"is_ptx", kernel.is_ptx},
      {"image",
       {{"file", image_file_name(kernel.is_ptx)},
        {"size", kernel.image.size()},
        {"sha256", sha256_hex(kernel.image)}}},
      {"log", kernel.log},
      // Informational only (not checked): which binary produced it and when.
      {"compiler_path", compiler.path()},
      {"created_unix", static_cast<int64_t>(std::time(nullptr))},
  };
  // Invalid UTF-8 in a compiler log must not make the entry unwritable.
  write_file_durably(dir + "/" + kMetaFile,
                     meta.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
  fsync_directory(dir);
}

bool read_entry_components(const std::string& dir, std::map<std::string, std::string>* components) {
  json meta;
  std::string reason;
  if (!parse_meta(dir, &meta, &reason)) return false;
  try {
    *components = meta.at("components").get<std::map<std::string, std::string>>();
    return true;
  } catch (const json::exception&) {
    return false;
  }
}

bool entry_identity(const std::string& path, core::FileId* id) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return false;
  *id = core::FileId{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
  return true;
}

bool discard_entry(const std::string& entry, const core::FileId& found,
                   const std::string& tmp_dir) {
  // Renaming into a fresh directory works for files and directories alike. It is made first,
  // to keep the window between the check and the rename short.
  const std::string trash = make_temp_directory(tmp_dir, "corrupt.");
  const std::string moved = trash + "/entry";
  core::FileId now;
  bool discarded = entry_identity(entry, &now) && now == found &&
                   ::rename(entry.c_str(), moved.c_str()) == 0;
  // Swapped for another between the check and the rename: put it back. That fails only if the
  // path is taken again meanwhile, and then ours is just a duplicate.
  if (discarded && entry_identity(moved, &now) && !(now == found)) {
    ::rename(moved.c_str(), entry.c_str());
    discarded = false;
  }
  remove_tree(trash);
  return discarded;
}

}  // namespace hm::jit
