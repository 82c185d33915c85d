// Writing a directory atomically: everything goes into a fresh hidden directory next to the
// destination (mkdtemp), is fsync'ed, and is renamed onto the destination at the end, so a
// failure or an interrupt never leaves a half-written destination. Used by the model-folder
// converter (src/schema/model.cpp).
#pragma once

#include <cstdint>
#include <string>

namespace hm::io {

// Canonical absolute form of a path that may not exist yet (its existing parent resolved).
std::string absolute_path(const std::string& path);
// Whether `inner` is `outer` or lies inside it (both canonical).
bool path_within(const std::string& inner, const std::string& outer);

class StagingDirectory {
 public:
  // Creates "<parent of destination>/.<name>.tmp-<random>" (core::make_temp_directory, mode 0777
  // less the umask: the published folder's). Throws HM_ERROR_IO naming the path.
  explicit StagingDirectory(const std::string& destination);
  // Removes the staging directory and everything in it unless published.
  ~StagingDirectory();
  StagingDirectory(const StagingDirectory&) = delete;
  StagingDirectory& operator=(const StagingDirectory&) = delete;

  const std::string& path() const { return path_; }
  // fsyncs every file and directory inside, then renames onto the destination. `replace`: an
  // existing destination is swapped out atomically (renameat2 RENAME_EXCHANGE where the file
  // system has it, else moved aside first) and removed; without it an existing destination
  // fails with HM_ERROR_IO.
  void publish(bool replace);

 private:
  std::string destination_, path_;
  bool published_ = false;
};

// Copies a regular file (following symbolic links, as Hugging Face cache snapshots are) and
// fsyncs the copy. Returns the bytes copied. HM_ERROR_IO names the path.
uint64_t copy_file_synced(const std::string& from, const std::string& to);
// Writes text to a new file and fsyncs it.
void write_file_synced(const std::string& path, const std::string& text);
// fsync of an existing file or directory.
void fsync_path(const std::string& path);

}  // namespace hm::io
