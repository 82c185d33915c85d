// Atomic directory publication and synced file copies (directory.hpp).
#include "io/directory.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/error.hpp"
#include "core/file.hpp"
#include "core/quote.hpp"

namespace hm::io {

namespace fs = std::filesystem;

namespace {

std::string q(const std::string& path) { return core::quoted(path, 200); }
std::string errno_text() { return std::strerror(errno); }

}  // namespace

std::string absolute_path(const std::string& path) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(fs::absolute(path), ec);
  if (ec) fail(HM_ERROR_IO, "cannot resolve " + q(path) + ": " + ec.message());
  std::string s = p.string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

bool path_within(const std::string& inner, const std::string& outer) {
  if (inner == outer) return true;
  return inner.size() > outer.size() && inner.compare(0, outer.size(), outer) == 0 &&
         (outer == "/" || inner[outer.size()] == '/');
}

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(HM_ERROR_IO, "cannot open " + q(path) + " to sync it: " + errno_text());
  const int rc = ::fsync(fd);
  const std::string err = rc != 0 ? errno_text() : "";
  ::close(fd);
  if (rc != 0) fail(HM_ERROR_IO, "cannot sync " + q(path) + ": " + err);
}

StagingDirectory::StagingDirectory(const std::string& destination)
    : destination_(absolute_path(destination)) {
  const fs::path d(destination_);
  // 0777 less the umask: the folder is published by renaming it, and gets a new folder's mode.
  path_ = core::make_temp_directory(d.parent_path().string(), "." + d.filename().string() + ".tmp-",
                                    0777);
}

StagingDirectory::~StagingDirectory() {
  if (published_) return;
  std::error_code ec;
  fs::remove_all(path_, ec);  // best effort: nothing to report from a destructor
}

void StagingDirectory::publish(bool replace) {
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(path_))
    if (e.is_regular_file() || e.is_directory()) fsync_path(e.path().string());
  fsync_path(path_);
  const std::string parent = fs::path(destination_).parent_path().string();
  std::error_code ec;
  const bool exists = fs::exists(fs::symlink_status(destination_, ec));
  if (!exists) {
    if (std::rename(path_.c_str(), destination_.c_str()) != 0)
      fail(HM_ERROR_IO, "cannot rename " + q(path_) + " to " + q(destination_) + ": " +
                            errno_text());
  } else {
    if (!replace)
      fail(HM_ERROR_IO, q(destination_) + " exists; choose a new output folder or --force");
#if defined(SYS_renameat2)
    constexpr unsigned kExchange = 2;  // RENAME_EXCHANGE
    if (::syscall(SYS_renameat2, AT_FDCWD, path_.c_str(), AT_FDCWD, destination_.c_str(),
                  kExchange) == 0) {
      published_ = true;
      fs::remove_all(path_, ec);  // now the old destination
      fsync_path(parent);
      return;
    }
#endif
    // No atomic exchange here: move the old destination aside, then rename the new one in.
    const std::string aside = path_ + ".old";
    if (std::rename(destination_.c_str(), aside.c_str()) != 0)
      fail(HM_ERROR_IO, "cannot move " + q(destination_) + " aside: " + errno_text());
    if (std::rename(path_.c_str(), destination_.c_str()) != 0) {
      const std::string err = errno_text();
      std::rename(aside.c_str(), destination_.c_str());
      fail(HM_ERROR_IO, "cannot rename " + q(path_) + " to " + q(destination_) + ": " + err);
    }
    fs::remove_all(aside, ec);
  }
  published_ = true;
  fsync_path(parent);
}

uint64_t copy_file_synced(const std::string& from, const std::string& to) {
  std::FILE* in = std::fopen(from.c_str(), "rb");
  if (!in) fail(HM_ERROR_IO, "cannot open " + q(from) + ": " + errno_text());
  std::FILE* out = std::fopen(to.c_str(), "wb");
  if (!out) {
    const std::string err = errno_text();
    std::fclose(in);
    fail(HM_ERROR_IO, "cannot create " + q(to) + ": " + err);
  }
  std::vector<char> buf(1 << 20);
  uint64_t total = 0;
  bool ok = true;
  for (size_t got; (got = std::fread(buf.data(), 1, buf.size(), in)) > 0; total += got)
    if (std::fwrite(buf.data(), 1, got, out) != got) {
      ok = false;
      break;
    }
  ok = ok && !std::ferror(in) && std::fflush(out) == 0 && ::fsync(::fileno(out)) == 0;
  const std::string err = ok ? "" : errno_text();
  std::fclose(in);
  ok = std::fclose(out) == 0 && ok;
  if (!ok) fail(HM_ERROR_IO, "copying " + q(from) + " to " + q(to) + ": " + err);
  return total;
}

void write_file_synced(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) fail(HM_ERROR_IO, "cannot create " + q(path) + ": " + errno_text());
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0 &&
            ::fsync(::fileno(f)) == 0;
  const std::string err = ok ? "" : errno_text();
  ok = std::fclose(f) == 0 && ok;
  if (!ok) fail(HM_ERROR_IO, "writing " + q(path) + ": " + err);
}

}  // namespace hm::io
