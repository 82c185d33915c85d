#include "jit/cache.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>
#include <thread>
#include <vector>

#include "core/env.hpp"
#include "core/error.hpp"
#include "core/quote.hpp"
#include "humming.h"
#include "jit/cache_entry.hpp"
#include "jit/file_util.hpp"
#include "jit/kernel_sources.hpp"
#include "jit/sha256.hpp"

namespace hm::jit {
namespace {

namespace fs = std::filesystem;

// User text in messages is quoted (control bytes escaped): the cache directory comes from the
// environment or the caller, kernel names from the caller.
std::string qp(const std::string& path) { return core::quoted(path, core::kQuotedPathBytes); }
std::string qn(const std::string& name) { return core::quoted(name, 120); }

std::string version_string() {
  return std::to_string(HM_VERSION_MAJOR) + "." + std::to_string(HM_VERSION_MINOR) + "." +
         std::to_string(HM_VERSION_PATCH);
}

// Components end up in meta.json, which holds UTF-8 only; anything else is refused up front
// rather than stored lossily (an entry whose components do not read back is never a hit).
std::string json_text(const nlohmann::json& value, const std::string& what) {
  try {
    return value.dump();
  } catch (const nlohmann::json::type_error&) {
    fail(HM_ERROR_INVALID_ARGUMENT, what + " is not valid UTF-8");
  }
}

// An advisory per-key lock (flock). It only keeps two processes from compiling the same kernel
// at once, so it never blocks for long: when it cannot be taken (no lock file and no right to
// create one, file systems without locks) or its holder seems stuck past `patience`, we go on
// without it.
class KeyLock {
 public:
  KeyLock(const std::string& path, std::chrono::milliseconds patience) {
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    // O_NOFOLLOW: a symlink planted at the lock path is not followed (it would create or
    // lock a file elsewhere); such a lock is just not taken. 0666 less the umask, like the
    // entries.
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
    // A lock file another user created (or a read-only mount) still locks: flock needs no
    // write access, and skipping it would let that user's compiles race ours.
    if (fd_ < 0 && (errno == EACCES || errno == EROFS))
      fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd_ < 0) return;
    const auto deadline = std::chrono::steady_clock::now() + patience;
    auto pause = std::chrono::milliseconds(1);
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if ((errno != EWOULDBLOCK && errno != EINTR) || std::chrono::steady_clock::now() > deadline) {
        ::close(fd_);
        fd_ = -1;
        return;
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(20));
    }
  }
  // Whether this process holds the lock (false: it went on without it).
  bool held() const { return fd_ >= 0; }
  ~KeyLock() {
    if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the lock
  }
  KeyLock(const KeyLock&) = delete;
  KeyLock& operator=(const KeyLock&) = delete;

 private:
  int fd_ = -1;
};

// A hit sets the entry's meta.json modification time to now: Cache::prune reads it as the entry's
// last use. Best effort (a read-only cache keeps its times).
void mark_used(const std::string& entry) noexcept {
  ::utimensat(AT_FDCWD, (entry + "/" + kMetaFile).c_str(), nullptr, 0);
}

// Removes scratch directories left in tmp/ by processes that died mid-write. An hour is far
// longer than any write takes (the compile happens before the scratch directory exists).
void prune_stale_scratch(const std::string& tmp_dir) {
  std::error_code ec;
  const auto cutoff = fs::file_time_type::clock::now() - std::chrono::hours(1);
  for (fs::directory_iterator it(tmp_dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code time_ec;
    const auto mtime = it->last_write_time(time_ec);
    if (!time_ec && mtime < cutoff) remove_tree(it->path().string());
  }
}

std::vector<fs::path> subdirectories(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_directory(type_ec)) out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// One line per differing component between an existing entry and the request.
std::vector<std::string> differences(const std::map<std::string, std::string>& cached,
                                     const std::map<std::string, std::string>& wanted) {
  std::set<std::string> names;
  for (const auto& kv : cached) names.insert(kv.first);
  for (const auto& kv : wanted) names.insert(kv.first);
  std::vector<std::string> out;
  for (const std::string& name : names) {
    const auto c = cached.find(name);
    const auto w = wanted.find(name);
    const std::string cv = c == cached.end() ? "(absent)" : c->second;
    const std::string wv = w == wanted.end() ? "(absent)" : w->second;
    if (cv == wv) continue;
    if (name == "source_sha256")
      out.push_back("generated source differs (sha256 " + cv.substr(0, 12) + "... cached vs " +
                    wv.substr(0, 12) + "... requested)");
    else if (name == "kernel_sources")
      out.push_back("kernel headers differ (sources hash " + cv.substr(0, 12) + "... cached vs " +
                    wv.substr(0, 12) + "... requested)");
    else
      out.push_back(name + ": " + cv + " (cached) vs " + wv + " (requested)");
  }
  return out;
}

}  // namespace

std::string CacheKey::describe() const {
  std::string out = "key " + hex;
  for (const auto& [name, value] : components) out += "\n  " + name + ": " + value;
  return out;
}

CacheKey make_cache_key(std::map<std::string, std::string> components) {
  // Length-prefixed pairs in sorted order: unambiguous for any bytes, unlike plain joining.
  Sha256 h;
  for (const auto& [name, value] : components) {
    h.update(std::to_string(name.size()) + ":" + name + "=" + std::to_string(value.size()) + ":");
    h.update(value);
    h.update(";");
  }
  return CacheKey{h.hex_digest(), std::move(components)};
}

Cache::Cache(std::string dir, bool jit_disabled, bool no_cache)
    : dir_(dir.empty() ? default_dir() : std::move(dir)),
      jit_disabled_(core::env_bool("HUMMING_DISABLE_JIT") || jit_disabled),
      no_cache_(no_cache) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
}

std::string Cache::default_dir() {
  const std::string explicit_dir = env_or_empty("HUMMING_CACHE_DIR");
  if (!explicit_dir.empty()) return explicit_dir;
  // The XDG spec says to ignore a relative XDG_CACHE_HOME.
  const std::string xdg = env_or_empty("XDG_CACHE_HOME");
  if (!xdg.empty() && xdg[0] == '/') return xdg + "/humming";
  std::string home = env_or_empty("HOME");
  if (home.empty()) {
    struct passwd pw, *found = nullptr;
    char buf[4096];
    if (::getpwuid_r(::getuid(), &pw, buf, sizeof(buf), &found) == 0 && found && found->pw_dir)
      home = found->pw_dir;
  }
  HM_REQUIRE(!home.empty(), HM_ERROR_IO,
             "no kernel cache directory: HUMMING_CACHE_DIR, XDG_CACHE_HOME and HOME are unset and "
             "the user has no home directory; set HUMMING_CACHE_DIR or pass a cache_dir");
  return home + "/.cache/humming";
}

CacheKey Cache::key(const CompileRequest& request, const Compiler& compiler) const {
  require_valid_arch(request.arch);
  HM_REQUIRE(!request.name.empty(), HM_ERROR_INVALID_ARGUMENT, "the kernel name is empty");
  json_text(request.name, "the kernel name");
  return make_cache_key({
      {"cache_format", std::to_string(kCacheFormat)},
      {"library_version", version_string()},
      {"kernel_sources", request.kernel_sources().hash()},
      {"source_sha256", sha256_hex(request.source)},
      {"compiler", compiler.id()},
      {"compiler_options", json_text(compiler.builtin_options(request.arch), "a compiler option")},
      {"options", json_text(request.options, "a compile option of kernel " + qn(request.name))},
      {"arch", request.arch},
      {"name", request.name},
  });
}

std::string Cache::entry_dir(const CacheKey& key) const {
  return dir_ + "/v1/" + key.components.at("arch") + "/" + key.hex.substr(0, 2) + "/" + key.hex;
}

CompiledKernel Cache::get_or_compile(const CompileRequest& request, const Compiler& compiler,
                                     Result* result) const {
  Result local;
  Result& r = result ? *result : local;
  r = Result{};
  r.key = key(request, compiler);
  if (no_cache_) {
    HM_REQUIRE(
        !jit_disabled_, HM_ERROR_JIT_DISABLED,
        "kernel " + qn(request.name) + " cannot be built: the disk cache is off (no_cache) and " +
            "JIT compilation is disabled, so no kernel can ever be loaded; allow one of them");
    return compiler.compile(request);
  }

  const std::string entry = entry_dir(r.key);
  CompiledKernel kernel;
  std::string corrupt_reason;
  EntryState state = read_entry(entry, r.key, &kernel, &corrupt_reason);
  if (state == EntryState::kValid) {
    r.outcome = Outcome::kHit;
    r.entry_dir = entry;
    mark_used(entry);
    return kernel;
  }
  if (jit_disabled_) fail_without_jit(request, compiler, r.key, entry, corrupt_reason);

  std::unique_ptr<KeyLock> lock;
  if (locking_) {
    // Far longer than a compile should take (the target is 2 s): a holder this slow is stuck.
    lock =
        std::make_unique<KeyLock>(dir_ + "/locks/" + r.key.hex + ".lock", std::chrono::minutes(5));
    // Another process may have published the entry while we waited for the lock.
    std::string reason;
    const EntryState now = read_entry(entry, r.key, &kernel, &reason);
    if (now == EntryState::kValid) {
      r.outcome = Outcome::kHit;
      r.entry_dir = entry;
      r.note = "published by another process while this one waited for the lock";
      return kernel;
    }
    if (now == EntryState::kCorrupt && state != EntryState::kCorrupt) {
      state = now;
      corrupt_reason = reason;
    }
  }

  kernel = compiler.compile(request);
  r.outcome = state == EntryState::kCorrupt ? Outcome::kRebuiltCorrupt : Outcome::kCompiled;
  if (state == EntryState::kCorrupt)
    r.note = "cache entry " + qp(entry) + " was corrupt (" + corrupt_reason + ") and was rebuilt";
  try {
    std::string published_note;
    publish(entry, r.key, request, compiler, &kernel, &published_note);
    r.entry_dir = entry;
    if (!published_note.empty()) r.note += (r.note.empty() ? "" : "; ") + published_note;
  } catch (const Error& e) {
    if (e.status() != HM_ERROR_IO) throw;
    r.note += (r.note.empty() ? "" : "; ") +
              std::string("the kernel was compiled but not saved: ") + e.message();
  }
  return kernel;
}

void Cache::fail_without_jit(const CompileRequest& request, const Compiler& compiler,
                             const CacheKey& key, const std::string& entry,
                             const std::string& corrupt_reason) const {
  if (!corrupt_reason.empty())
    fail(HM_ERROR_CACHE_CORRUPT,
         "cache entry " + qp(entry) + " for kernel " + qn(request.name) + " (" + request.arch +
             ") is corrupt: " + corrupt_reason +
             ". JIT compilation is disabled, so it cannot be rebuilt; delete the entry and fill "
             "the cache again (`humming compile`), or enable JIT.");
  fail(HM_ERROR_JIT_DISABLED,
       "kernel " + qn(request.name) + " for " + request.arch + " is not in the kernel cache " + qp(dir_) +
           " and JIT compilation is disabled (HUMMING_DISABLE_JIT or HM_CONTEXT_DISABLE_JIT).\n"
           "Wanted " +
           key.describe() + "\nWhy it missed: " + explain_miss(request, compiler) +
           "\nFill the cache with the same library version, compiler and options "
           "(`humming compile`), or enable JIT.");
}

void Cache::publish(const std::string& entry, const CacheKey& key, const CompileRequest& request,
                    const Compiler& compiler, CompiledKernel* kernel, std::string* note) const {
  const std::string tmp_dir = dir_ + "/tmp";
  std::error_code ec;
  fs::create_directories(tmp_dir, ec);
  if (ec) fail(HM_ERROR_IO, "creating cache directory " + qp(tmp_dir) + " failed: " + ec.message());
  fs::create_directories(fs::path(entry).parent_path(), ec);
  if (ec)
    fail(HM_ERROR_IO, "creating cache directory " + qp(fs::path(entry).parent_path().string()) +
                          " failed: " + ec.message());
  prune_stale_scratch(tmp_dir);

  // 0777 less the umask (not mkdtemp's 0700): the directory becomes the entry, which other
  // users must be able to read, e.g. a cache filled by root when a container image is built.
  const std::string staging = make_temp_directory(tmp_dir, key.hex.substr(0, 16) + ".", 0777);
  try {
    write_entry(staging, key, request, compiler, *kernel);
  } catch (...) {
    remove_tree(staging);
    throw;
  }
  // rename() of a directory onto an existing non-empty one fails; then someone else published
  // first (use theirs, so every process loads the same bytes) or a corrupt entry is in the way
  // (move it aside and try again).
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (::rename(staging.c_str(), entry.c_str()) == 0) {
      fsync_directory(fs::path(entry).parent_path().string());
      return;
    }
    const int err = errno;
    if (err != EEXIST && err != ENOTEMPTY && err != ENOTDIR) {
      remove_tree(staging);
      fail(HM_ERROR_IO, "publishing cache entry " + qp(entry) + " failed: " + std::strerror(err));
    }
    // What is there is identified before it is read, so that only the entry found invalid is
    // discarded, never one another process publishes meanwhile.
    core::FileId found;
    if (!entry_identity(entry, &found)) continue;  // gone already: try the rename again
    CompiledKernel theirs;
    std::string reason;
    if (read_entry(entry, key, &theirs, &reason) == EntryState::kValid) {
      remove_tree(staging);
      *kernel = std::move(theirs);
      *note = "another process published this entry first; using its copy";
      return;
    }
    discard_entry(entry, found, tmp_dir);
  }
  remove_tree(staging);
  fail(HM_ERROR_IO, "publishing cache entry " + qp(entry) +
                        " failed: the path stayed occupied by an invalid entry after 4 attempts");
}

std::string Cache::explain_miss(const CompileRequest& request, const Compiler& compiler) const {
  if (no_cache_) return "the disk cache is off (no_cache), so every request compiles";
  const CacheKey wanted = key(request, compiler);
  CompiledKernel unused;
  std::string reason;
  switch (read_entry(entry_dir(wanted), wanted, &unused, &reason)) {
    case EntryState::kValid:
      return "no miss: entry " + qp(entry_dir(wanted)) + " is valid";
    case EntryState::kCorrupt:
      return "the entry with this exact key exists but is corrupt: " + reason;
    case EntryState::kMissing:
      break;
  }
  // Entries of the same kernel name: those of this arch are compared component by component.
  struct Candidate {
    std::string dir;
    std::vector<std::string> diffs;
  };
  std::vector<Candidate> same_arch;
  std::set<std::string> other_archs;
  // <dir>/v1/<arch>/<hh>/<key>: three levels of directories.
  for (const fs::path& arch_dir : subdirectories(fs::path(dir_) / "v1"))
    for (const fs::path& bucket : subdirectories(arch_dir))
      for (const fs::path& entry : subdirectories(bucket)) {
        std::map<std::string, std::string> components;
        if (!read_entry_components(entry.string(), &components)) continue;
        if (components["name"] != request.name) continue;
        if (components["arch"] != request.arch) {
          other_archs.insert(components["arch"]);
          continue;
        }
        same_arch.push_back({entry.string(), differences(components, wanted.components)});
      }
  if (same_arch.empty()) {
    std::string out = "no entry for this kernel name (" + qn(request.name) + ") and arch " +
                      request.arch + " in " + qp(dir_);
    if (!other_archs.empty()) {
      out += "; entries for this kernel exist for:";
      for (const std::string& a : other_archs) out += " " + a;
    }
    return out;
  }
  std::sort(same_arch.begin(), same_arch.end(),
            [](const Candidate& a, const Candidate& b) { return a.diffs.size() < b.diffs.size(); });
  std::string out = std::to_string(same_arch.size()) + " entr" +
                    (same_arch.size() == 1 ? "y" : "ies") + " for kernel " + qn(request.name) +
                    " and " + request.arch + " differ from the request:";
  for (size_t i = 0; i < same_arch.size() && i < 3; ++i) {
    out += "\n  " + qp(same_arch[i].dir) + ":";
    for (const std::string& d : same_arch[i].diffs) out += "\n    " + d;
  }
  if (same_arch.size() > 3) out += "\n  (" + std::to_string(same_arch.size() - 3) + " more)";
  return out;
}

Cache::Stats Cache::stats() const {
  Stats s;
  std::error_code ec;
  const fs::path v1 = fs::path(dir_) / "v1";
  for (fs::recursive_directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code ec2;
    if (it->is_regular_file(ec2)) {
      const auto size = it->file_size(ec2);
      if (!ec2) s.bytes += size;
      // <dir>/v1/<arch>/<hh>/<key>/meta.json marks a complete entry.
      if (it->path().filename() == kMetaFile &&
          it->path().parent_path().parent_path().parent_path().parent_path() == v1)
        ++s.entries;
    }
  }
  return s;
}

Cache::Pruned Cache::prune(std::chrono::seconds max_age, uint64_t max_bytes) const {
  struct Entry {
    std::string dir, hex;
    fs::file_time_type used;
    uint64_t bytes = 0;
  };
  // <dir>/v1/<arch>/<hh>/<key>/meta.json marks a complete entry (as in stats()).
  std::vector<Entry> entries;
  std::set<std::string> live;  // key hex of every entry directory, complete or not
  for (const fs::path& arch : subdirectories(fs::path(dir_) / "v1"))
    for (const fs::path& prefix : subdirectories(arch))
      for (const fs::path& key : subdirectories(prefix)) {
        live.insert(key.filename().string());
        std::error_code ec;
        const fs::file_time_type used = fs::last_write_time(key / kMetaFile, ec);
        if (ec) continue;  // incomplete: neither used nor counted (repairs replace it)
        Entry e{key.string(), key.filename().string(), used, 0};
        for (fs::recursive_directory_iterator it(key, ec), end; !ec && it != end;
             it.increment(ec)) {
          std::error_code ec2;
          if (it->is_regular_file(ec2)) e.bytes += it->file_size(ec2);
        }
        entries.push_back(std::move(e));
      }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.used < b.used; });

  Pruned out;
  uint64_t total = stats().bytes;
  const auto cutoff = fs::file_time_type::clock::now() - max_age;
  const std::string tmp_dir = dir_ + "/tmp";
  for (const Entry& e : entries) {
    const bool too_old = max_age.count() > 0 && e.used < cutoff;
    if (!too_old && total <= max_bytes) break;  // the rest are newer
    std::error_code ec;
    fs::create_directories(tmp_dir, ec);
    KeyLock lock(dir_ + "/locks/" + e.hex + ".lock", std::chrono::seconds(2));
    if (!lock.held()) continue;  // being compiled or repaired now: left alone
    core::FileId id;
    if (!entry_identity(e.dir, &id) || !discard_entry(e.dir, id, tmp_dir)) continue;
    live.erase(e.hex);
    ++out.entries;
    out.bytes += e.bytes;
    total = total > e.bytes ? total - e.bytes : 0;
  }

  // Lock files whose entry is gone, when no process holds them (a held one is a compile in
  // progress; unlinking it would let a third process lock a new file and compile the same
  // kernel again, which the lock exists to avoid).
  std::error_code ec;
  for (fs::directory_iterator it(fs::path(dir_) / "locks", ec), end; !ec && it != end;
       it.increment(ec)) {
    const fs::path path = it->path();
    if (path.extension() != ".lock" || live.count(path.stem().string())) continue;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) ::unlink(path.c_str());
    ::close(fd);
  }
  return out;
}

}  // namespace hm::jit
