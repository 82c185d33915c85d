#include "jit/file_util.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/env.hpp"
#include "core/error.hpp"
#include "core/file.hpp"
#include "core/quote.hpp"

namespace hm::jit {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

[[noreturn]] void fail_io(const std::string& what, const std::string& path, int err) {
  fail(HM_ERROR_IO, what + " " + core::quoted(path, core::kQuotedPathBytes) + " failed: " +
                        errno_text(err));
}

// Writes all of `data` to fd, retrying short writes and EINTR.
bool write_all(int fd, const std::string& data, int* err) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      *err = errno;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

void write_file_impl(const std::string& path, const std::string& data, bool durable) {
  // 0666 less the umask, like any file a program creates: cache entries are shared between the
  // users the umask allows (e.g. filled by root when a container image is built).
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) fail_io("creating", path, errno);
  int err = 0;
  bool ok = write_all(fd, data, &err);
  if (ok && durable && ::fsync(fd) != 0) {
    ok = false;
    err = errno;
  }
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) fail_io("writing", path, err);
}

}  // namespace

std::string env_or_empty(const char* name) { return core::env_text(name); }

bool try_read_file(const std::string& path, std::string* out, std::string* error,
                   uint64_t expected_size, uint64_t* size_found) {
  uint64_t size = 0;
  const int fd = core::open_regular_file(path, &size, nullptr, error);
  if (fd < 0) return false;
  if (size_found) *size_found = size;
  if (expected_size != kAnySize && size != expected_size) {
    // Refused before reading: a file of the wrong size is never worth reading whole.
    *error = core::quoted(path, core::kQuotedPathBytes) + " has " + std::to_string(size) +
             " bytes, expected " + std::to_string(expected_size);
    ::close(fd);
    return false;
  }
  out->assign(static_cast<size_t>(size), '\0');
  uint64_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, &(*out)[done], static_cast<size_t>(size - done));
    if (n == 0) break;  // shrank since fstat: what is there is what it has (callers check it)
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = "cannot read " + core::quoted(path, core::kQuotedPathBytes) + ": " + errno_text(errno);
      ::close(fd);
      return false;
    }
    done += static_cast<uint64_t>(n);
  }
  out->resize(static_cast<size_t>(done));
  ::close(fd);
  return true;
}

void write_file_durably(const std::string& path, const std::string& data) {
  write_file_impl(path, data, /*durable=*/true);
}

void write_file(const std::string& path, const std::string& data) {
  write_file_impl(path, data, /*durable=*/false);
}

void fsync_directory(const std::string& path) noexcept {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

std::string temp_root() {
  const std::string tmpdir = env_or_empty("TMPDIR");
  return tmpdir.empty() ? std::string("/tmp") : tmpdir;
}

void remove_tree(const std::string& path) noexcept {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

std::string safe_file_name(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    out.push_back(ok ? c : '_');
  }
  if (out.empty() || out[0] == '.') out.insert(out.begin(), '_');
  return out;
}

}  // namespace hm::jit
