#include "core/file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>

#include "core/error.hpp"
#include "core/quote.hpp"

namespace hm::core {
namespace {

std::string q(const std::string& path) { return quoted(path, kQuotedPathBytes); }

[[noreturn]] void io_fail(const std::string& what, const std::string& path, int err) {
  fail(HM_ERROR_IO, what + " " + q(path) + ": " + std::strerror(err));
}

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Best effort: some file systems refuse fsync on directories, which loses nothing but
// durability of the name.
void fsync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// Eight random hex digits: the temporary name must not be guessable ahead of time, and two
// processes must not pick the same one (O_EXCL catches the rare collision; we then retry).
std::string random_suffix() {
  static thread_local std::mt19937_64 rng([] {
    std::random_device device;
    return (uint64_t{device()} << 32) ^ device() ^
           static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
           (static_cast<uint64_t>(::getpid()) << 16);
  }());
  static const char kHex[] = "0123456789abcdef";
  std::string s(8, '0');
  uint64_t v = rng();
  for (char& c : s) {
    c = kHex[v & 15];
    v >>= 4;
  }
  return s;
}

}  // namespace

std::string make_temp_directory(const std::string& parent, const std::string& prefix,
                                mode_t mode) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string path = parent + "/" + prefix + random_suffix();
    if (::mkdir(path.c_str(), mode) == 0) return path;
    if (errno != EEXIST) io_fail("cannot create the temporary directory", path, errno);
  }
  io_fail("cannot create a temporary directory", parent + "/" + prefix + "XXXXXXXX", EEXIST);
}

bool file_id(const std::string& path, FileId* id) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  *id = FileId{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
  return true;
}

int open_regular_file(const std::string& path, uint64_t* size, FileId* id, std::string* error) {
  // O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer, forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    *error = "cannot open " + q(path) + ": " + std::strerror(errno);
    return -1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    *error = "cannot stat " + q(path) + ": " + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    *error = q(path) + " is not a regular file (a FIFO, device, socket or directory)";
    ::close(fd);
    return -1;
  }
  // Back to blocking reads, which regular files do anyway.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  *size = static_cast<uint64_t>(st.st_size);
  if (id) *id = FileId{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
  return fd;
}

OutputFile::OutputFile(const std::string& path) : path_(path) {
  HM_REQUIRE(!path.empty(), HM_ERROR_INVALID_ARGUMENT, "the output path is empty");
  // Beside the output, so the final rename stays within one file system.
  for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
    temp_ = path + "." + random_suffix() + ".tmp";
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && errno != EEXIST) io_fail("cannot create the temporary file", temp_, errno);
  }
  if (fd_ < 0) io_fail("cannot create a temporary file beside", path, EEXIST);
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_.c_str());
  }
}

void OutputFile::write_at(uint64_t offset, const void* data, uint64_t bytes,
                          const std::string& what) {
  HM_REQUIRE(fd_ >= 0, HM_ERROR_INVALID_STATE, "the output " + q(path_) + " is already published");
  const auto* p = static_cast<const uint8_t*>(data);
  while (bytes > 0) {
    const size_t chunk = bytes < (uint64_t{1} << 30) ? static_cast<size_t>(bytes) : size_t{1} << 30;
    const ssize_t n = ::pwrite(fd_, p, chunk, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      io_fail("writing " + what + " to", temp_, errno);
    }
    p += n;
    offset += static_cast<uint64_t>(n);
    bytes -= static_cast<uint64_t>(n);
  }
}

void OutputFile::commit() {
  HM_REQUIRE(fd_ >= 0, HM_ERROR_INVALID_STATE, "the output " + q(path_) + " is already published");
  if (::fsync(fd_) != 0) io_fail("cannot flush", temp_, errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(temp_.c_str());
    io_fail("cannot close", temp_, err);
  }
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp_.c_str());
    io_fail("cannot rename " + q(temp_) + " to", path_, err);
  }
  fsync_directory(directory_of(path_));
}

}  // namespace hm::core
