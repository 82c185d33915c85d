// safetensors files (https://huggingface.co/docs/safetensors): an 8-byte little-endian header
// length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}}, then
// the tensor bytes. The reader maps the file read-only and checks every offset, size, dtype and
// shape before handing out a pointer, so a malformed or truncated file fails with HM_ERROR_PARSE
// (bad header) or HM_ERROR_IO (cannot read) naming the tensor, never with an out-of-bounds read.
// The writers write a temporary file of their own beside the output and rename it into place when
// complete (core::OutputFile), so no reader ever sees a partial file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/file.hpp"

namespace hm::io {

// Bytes per element of a safetensors dtype name ("F16" -> 2); 0 for a name we do not know.
int dtype_size(const std::string& dtype);

// One tensor inside a mapped file (or any host buffer): borrowed bytes, row-major, little-endian.
struct TensorView {
  std::string name;
  std::string dtype;           // safetensors name: "I32", "F16", "F8_E4M3", ...
  std::vector<int64_t> shape;  // empty for a scalar
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;

  int64_t numel() const;
  std::string shape_text() const;  // "[4096, 512]"
};

// The parsed header of a safetensors image, with views into `data`. Throws hm::Error.
struct Header {
  std::vector<TensorView> tensors;  // in file order (by data offset)
  std::map<std::string, std::string> metadata;
};
// `what` names the file in messages. Checks the whole header against `size` bytes.
Header parse_header(const uint8_t* data, uint64_t size, const std::string& what);

// A safetensors file mapped read-only. Views stay valid while the object lives.
class SafetensorsFile {
 public:
  // Throws HM_ERROR_IO (cannot open / map, or not a regular file: a FIFO or a device is refused
  // without blocking) or HM_ERROR_PARSE (malformed), naming the path.
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<TensorView>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  // nullptr when absent.
  const TensorView* find(const std::string& name) const;
  uint64_t file_size() const { return size_; }
  // The device and inode of the file that was opened (to refuse writing over it).
  const core::FileId& file_id() const { return id_; }

 private:
  std::string path_;
  void* map_ = nullptr;
  uint64_t size_ = 0;
  core::FileId id_;
  Header header_;
  std::map<std::string, size_t> index_;
};

// Collects tensors and metadata, then writes one file. Tensor bytes are either borrowed (they
// must outlive write()) or owned by the writer.
class SafetensorsWriter {
 public:
  // Throws HM_ERROR_INVALID_ARGUMENT for a duplicate name, an unknown dtype or a byte count that
  // does not match dtype x shape.
  void add_borrowed(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
                    const void* data, uint64_t bytes);
  void add_owned(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
                 std::vector<uint8_t> bytes);
  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }

  // Called after each tensor with (name, bytes written so far, total bytes).
  using Progress = std::function<void(const std::string&, uint64_t, uint64_t)>;
  // Writes `path` (through a temporary file beside it, renamed at the end: core::OutputFile).
  // HM_ERROR_IO names the path.
  void write(const std::string& path, const Progress& progress = nullptr) const;
  // The whole file image in memory (tests).
  std::vector<uint8_t> to_bytes() const;

 private:
  struct Entry {
    std::string name, dtype;
    std::vector<int64_t> shape;
    const uint8_t* data = nullptr;
    uint64_t bytes = 0;
    std::shared_ptr<std::vector<uint8_t>> owned;
  };
  void add(Entry entry);
  std::string header_json() const;  // padded to a multiple of 8 bytes

  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Writes a file whose tensors are not all in memory at once: the data section is streamed to a
// temporary file beside `path` (core::OutputFile) behind a reserved header area, and finish()
// writes the header (padded with spaces, which the format allows) and renames the file into
// place. Nothing is left behind on failure (the destructor removes an unfinished temporary file).
class SafetensorsStreamWriter {
 public:
  // reserve: bytes kept for the JSON header (rounded up so the data starts 8-byte aligned);
  // estimate it with header_bound(). Throws HM_ERROR_IO naming the path.
  SafetensorsStreamWriter(const std::string& path, uint64_t reserve);
  ~SafetensorsStreamWriter();
  SafetensorsStreamWriter(const SafetensorsStreamWriter&) = delete;
  SafetensorsStreamWriter& operator=(const SafetensorsStreamWriter&) = delete;

  void append(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
              const void* data, uint64_t bytes);
  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
  // Throws HM_ERROR_INTERNAL when the header outgrew the reservation.
  void finish();

  // An upper bound on the header bytes of one tensor entry with this name and rank, and of one
  // metadata entry: JSON escaping at most sextuples a byte, numbers have at most 20 digits.
  static uint64_t entry_bound(const std::string& name, size_t ndim);
  static uint64_t metadata_bound(const std::string& key, const std::string& value);

 private:
  std::string path_;
  std::unique_ptr<core::OutputFile> file_;  // null once finished
  uint64_t reserve_ = 0, offset_ = 0;
  struct Entry {
    std::string name, dtype;
    std::vector<int64_t> shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace hm::io
