// One cache entry on disk: writing its files and checking them before anything is loaded.
// Internal to src/jit (cache.cpp decides when to read, write, lock and publish).
#pragma once

#include <string>

#include "core/file.hpp"
#include "jit/cache.hpp"
#include "jit/compiler.hpp"

namespace hm::jit {

constexpr int kCacheFormat = 1;  // bump with any change to the layout or meta.json
constexpr const char* kMetaFile = "meta.json";
constexpr const char* kSourceFile = "kernel.cu";

inline const char* image_file_name(bool is_ptx) { return is_ptx ? "kernel.ptx" : "kernel.cubin"; }

enum class EntryState { kMissing, kValid, kCorrupt };

// Reads and verifies the entry in `dir` for `key`. kValid fills *kernel; kCorrupt says why in
// *reason; kMissing means there is no directory at all.
EntryState read_entry(const std::string& dir, const CacheKey& key, CompiledKernel* kernel,
                      std::string* reason);

// Writes every file of an entry into `dir` (an empty directory), each fsynced, then the
// directory itself. meta.json records the image's size and SHA-256 for read_entry.
void write_entry(const std::string& dir, const CacheKey& key, const CompileRequest& request,
                 const Compiler& compiler, const CompiledKernel& kernel);

// The components recorded in `dir`/meta.json, or false when it cannot be read (for
// explain_miss, which looks at entries of other keys).
bool read_entry_components(const std::string& dir, std::map<std::string, std::string>* components);

// The identity (device, inode) of what `path` itself is (a symlink is not followed), or false
// when nothing is there. Taken before an entry is read, for discard_entry.
bool entry_identity(const std::string& path, core::FileId* id);

// Moves the entry `found` (a directory, or a stray file, identified before it was judged
// corrupt) out of the way into a fresh directory under tmp_dir, atomically so no reader sees it
// half-deleted, and deletes it. Repairs run without the lock at times, so another process may
// have replaced the entry meanwhile: what the path holds now is moved only if it is still
// `found`, so a valid entry just published is never thrown away. Returns whether it was moved.
bool discard_entry(const std::string& entry, const core::FileId& found, const std::string& tmp_dir);

}  // namespace hm::jit
