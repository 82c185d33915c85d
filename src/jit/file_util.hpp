// Small POSIX file helpers for the JIT: environment lookups, whole-file reads, durable writes
// (write + fsync) and temporary directories. Errors throw hm::Error(HM_ERROR_IO) naming the path.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "core/file.hpp"

namespace hm::jit {

// The variable's value, or "" when it is unset (core::env_text; boolean variables are read with
// core::env_bool, the one parser of them).
std::string env_or_empty(const char* name);

// Reads a whole regular file, no more than the size it claims when opened (a FIFO or a device is
// refused without blocking: core::open_regular_file). Returns false (and says why in *error)
// instead of throwing, because the cache treats unreadable entries as corrupt rather than as
// failures. With `expected_size`, a file of another size when opened (fstat) is refused without
// being read; *size_found (when given) gets the size it had.
constexpr uint64_t kAnySize = UINT64_MAX;
bool try_read_file(const std::string& path, std::string* out, std::string* error,
                   uint64_t expected_size = kAnySize, uint64_t* size_found = nullptr);

// Writes `data` to a new file and fsyncs it, so a published cache entry survives a crash.
void write_file_durably(const std::string& path, const std::string& data);

// Writes `data` to a new file, without fsync (scratch files for the NVCC subprocess).
void write_file(const std::string& path, const std::string& data);

// fsyncs a directory, making renames and new names in it durable. Best effort: some file
// systems refuse fsync on directories, which is not an error for a cache.
void fsync_directory(const std::string& path) noexcept;

// A fresh directory with a random name (core/file.hpp).
using core::make_temp_directory;

// The system temporary directory: $TMPDIR, else /tmp.
std::string temp_root();

// Removes a file or directory tree, ignoring errors (cleanup paths must not throw).
void remove_tree(const std::string& path) noexcept;

// `text` reduced to [A-Za-z0-9_.-] (others become '_'), non-empty, for file names.
std::string safe_file_name(const std::string& text);

}  // namespace hm::jit
