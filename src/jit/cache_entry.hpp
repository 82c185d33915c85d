// One cache entry on disk: writing its files and checking them before anything is loaded.
// Internal to src/jit (cache.cpp decides when to read, write, lock and publish).
#pragma once

#include <string>

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

}  // namespace hm::jit
