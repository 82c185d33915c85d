// The on-disk kernel cache: compiled images keyed by everything that affects them, so a process
// that finds an entry can load it without compiling, and never loads a stale or damaged one.
//
// Layout (docs/jit.md):  <dir>/v1/<arch>/<first 2 hex of key>/<key>/{meta.json, kernel.cubin
// or kernel.ptx, kernel.cu}, plus <dir>/locks/ (advisory per-key locks) and <dir>/tmp/ (entries
// being written; each is published by one atomic rename of its whole directory).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "jit/compiler.hpp"

namespace hm::jit {

struct CacheKey {
  std::string hex;  // SHA-256 of the components' canonical JSON
  // "cache_format", "library_version", "kernel_sources", "source_sha256", "compiler",
  // "compiler_options", "options", "arch", "name" (see Cache::key).
  std::map<std::string, std::string> components;

  // "key <hex>" and one "  component: value" line per component, for error messages.
  std::string describe() const;
};

// The key of arbitrary components: SHA-256 of their JSON object with sorted keys, so it depends
// on every name and value and on nothing else.
CacheKey make_cache_key(std::map<std::string, std::string> components);

class Cache {
 public:
  enum class Outcome {
    kHit,             // loaded from disk (possibly published by another process meanwhile)
    kCompiled,        // compiled (and written unless no_cache or the write failed, see note)
    kRebuiltCorrupt,  // an entry existed but failed its checks; it was replaced
  };
  // What get_or_compile did, for logs and `humming compile`.
  struct Result {
    CacheKey key;
    Outcome outcome = Outcome::kCompiled;
    std::string entry_dir;  // the entry used or written; empty when nothing is on disk
    std::string note;       // corruption found, a lost publish race, a failed write; else empty
  };
  struct Stats {
    uint64_t entries = 0;  // complete entries (directories holding a meta.json)
    uint64_t bytes = 0;    // every file under dir(), locks and scratch included
  };

  // dir empty -> default_dir(). jit_disabled (also forced by HUMMING_DISABLE_JIT=1): a miss
  // throws HM_ERROR_JIT_DISABLED. no_cache: never read or write the disk, compile every time.
  Cache(std::string dir, bool jit_disabled, bool no_cache);

  // HUMMING_CACHE_DIR, else $XDG_CACHE_HOME/humming (when absolute), else $HOME/.cache/humming.
  static std::string default_dir();

  // Components: cache_format (the layout version), library_version (HM_VERSION), kernel_sources
  // (KernelSources hash), source_sha256 (the generated source), compiler (its id), compiler_options
  // (the options it adds itself, JSON array), options (the request's, JSON array, in the order
  // given: order can matter to a compiler, e.g. -D then -U), arch (with its a/f suffix), name.
  CacheKey key(const CompileRequest& request, const Compiler& compiler) const;

  // Returns the cached image when a valid entry exists, else compiles and publishes it. Never
  // loads an entry that fails its checks (meta.json readable and for this key, image size and
  // SHA-256 as recorded): such an entry is replaced, and `result->note` says what was wrong.
  // Throws: compile errors (HM_ERROR_COMPILE), HM_ERROR_JIT_DISABLED on a miss when JIT is
  // disabled (with the key and explain_miss()), HM_ERROR_CACHE_CORRUPT for a corrupt entry when
  // JIT is disabled. A failure to write the cache is not an error: the compiled kernel is
  // returned and the note says why it was not saved.
  CompiledKernel get_or_compile(const CompileRequest& request, const Compiler& compiler,
                                Result* result = nullptr) const;

  // Why this request misses: names the components that differ from the closest existing entries
  // of the same kernel name and arch, or says there is no entry for the name (or only for other
  // archs), or that the entry with this key is corrupt.
  std::string explain_miss(const CompileRequest& request, const Compiler& compiler) const;

  Stats stats() const;

  // What prune() removed.
  struct Pruned {
    uint64_t entries = 0;
    uint64_t bytes = 0;  // of the entries' files
  };
  // Removes the entries not used for `max_age` (zero: no age limit), then the least recently
  // used ones while every file under dir() takes more than `max_bytes`. An entry is used when it
  // is written or loaded (a hit sets its meta.json's modification time). Each goes under its
  // key's lock (an entry whose lock another process holds, compiling it, is left alone), moved
  // aside atomically first, so a process reading it meanwhile sees it whole or not at all, and
  // then recompiles. Lock files of entries that no longer exist go too, when free.
  Pruned prune(std::chrono::seconds max_age, uint64_t max_bytes) const;
  const std::string& dir() const { return dir_; }
  bool jit_disabled() const { return jit_disabled_; }
  bool no_cache() const { return no_cache_; }
  // Where the entry for `key` lives (whether or not it exists).
  std::string entry_dir(const CacheKey& key) const;

  // The per-key lock only avoids duplicate compiles; tests turn it off to show that correctness
  // does not depend on it.
  void set_locking(bool enabled) { locking_ = enabled; }

 private:
  // The error for a miss (corrupt_reason empty) or a corrupt entry when JIT is disabled.
  [[noreturn]] void fail_without_jit(const CompileRequest& request, const Compiler& compiler,
                                     const CacheKey& key, const std::string& entry,
                                     const std::string& corrupt_reason) const;
  // Writes the entry into a scratch directory under tmp/ and renames it into place. When another
  // process published a valid entry first, *kernel becomes that copy and *note says so.
  void publish(const std::string& entry, const CacheKey& key, const CompileRequest& request,
               const Compiler& compiler, CompiledKernel* kernel, std::string* note) const;

  std::string dir_;
  bool jit_disabled_;
  bool no_cache_;
  bool locking_ = true;
};

}  // namespace hm::jit
