// POSIX file helpers shared by the safetensors reader and writers (src/io) and the kernel cache
// (src/jit): opening a file for reading only when it is a regular file, and publishing an output
// file atomically. Errors throw hm::Error(HM_ERROR_IO) naming the path, quoted.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace hm::core {

// The identity of a file (device and inode): two paths name the same file when these match.
struct FileId {
  uint64_t device = 0, inode = 0;
  friend bool operator==(const FileId& a, const FileId& b) {
    return a.device == b.device && a.inode == b.inode;
  }
};

// The identity of the file `path` names (symlinks followed), or false when it does not exist or
// cannot be examined.
bool file_id(const std::string& path, FileId* id);

// A read-only descriptor of `path`, only when it is a regular file: a FIFO, a device, a socket
// or a directory is refused without blocking (the file is opened O_NONBLOCK and examined with
// fstat before anything is read). *size gets the size the file claims: callers read no more.
// Returns -1 and says why in *error (the path quoted) instead of throwing.
int open_regular_file(const std::string& path, uint64_t* size, FileId* id, std::string* error);

// Creates a fresh directory `<parent>/<prefix><8 random hex digits>` with `mode` less the umask
// (mkdir applies it, and any default ACL, as for any new directory; mkdtemp would fix 0700), and
// returns its path. mkdir never follows or reuses an existing name. 0700 keeps scratch private;
// directories renamed into place as outputs (kernel-cache entries, converted model folders) use
// 0777, so that they are shared as the umask allows.
std::string make_temp_directory(const std::string& parent, const std::string& prefix,
                                mode_t mode = 0700);

// An output file published atomically: written under a unique temporary name in the
// destination's directory, created with O_CREAT | O_EXCL (so no existing file, and no symlink
// planted there, is ever opened) and mode 0666 less the umask; commit() fsyncs it, renames it
// over `path` and fsyncs the directory. Two writers of one path each publish a whole file (the
// last rename wins), and a crash leaves either the old file or the new one. An uncommitted
// temporary file is removed by the destructor.
class OutputFile {
 public:
  explicit OutputFile(const std::string& path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Writes `bytes` bytes at `offset` (short writes and EINTR retried). `what` names the part for
  // the message.
  void write_at(uint64_t offset, const void* data, uint64_t bytes, const std::string& what);
  void commit();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_; }

 private:
  std::string path_, temp_;
  int fd_ = -1;
};

}  // namespace hm::core
