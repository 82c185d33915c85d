// The safetensors reader (header parsing with every bound checked, read-only mmap) and writer.
#include "io/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/quote.hpp"

namespace hm::io {

namespace {

// A short name; an unqualified quoted(std::string) would find std::quoted by ADL.
std::string q(const std::string& s, size_t max = 60) { return core::quoted(s, max); }

// The reference implementation refuses headers above 100 MB; a bigger one is a corrupt length.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

[[noreturn]] void parse_error(const std::string& what, const std::string& detail) {
  fail(HM_ERROR_PARSE, what + ": " + detail +
                           " (the file is not a valid safetensors file; is it "
                           "truncated or written by a different tool?)");
}

std::string errno_text() { return std::strerror(errno); }

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// a * b, or false when it overflows 64 bits.
bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return false;
  *out = a * b;
  return true;
}

TensorView parse_entry(const std::string& name, const nlohmann::json& entry, uint64_t data_size,
                       const std::string& what) {
  const std::string where = what + ": tensor " + q(name, 120);
  if (!entry.is_object()) parse_error(where, "its header entry is not a JSON object");
  TensorView t;
  t.name = name;

  auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) parse_error(where, "has no string 'dtype'");
  t.dtype = dtype->get<std::string>();
  const int elem = dtype_size(t.dtype);
  if (elem == 0) parse_error(where, "has the unknown dtype " + q(t.dtype));

  auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array()) parse_error(where, "has no 'shape' array");
  if (shape->size() > 16)
    parse_error(where, "has " + std::to_string(shape->size()) + " dimensions");
  uint64_t count = 1;
  for (const auto& d : *shape) {
    if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<int64_t>() >= 0))
      parse_error(where, "has a shape entry that is not a non-negative integer: " + d.dump());
    const uint64_t v = d.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        !checked_mul(count, v, &count))
      parse_error(where, "has a shape whose element count overflows 64 bits");
    t.shape.push_back(static_cast<int64_t>(v));
  }

  auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned())
    parse_error(where, "has no 'data_offsets' pair of non-negative integers");
  const uint64_t begin = (*offsets)[0].get<uint64_t>(), end = (*offsets)[1].get<uint64_t>();
  if (begin > end)
    parse_error(where, "has data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                           "] that run backwards");
  if (end > data_size)
    parse_error(where, "ends at byte " + std::to_string(end) +
                           " of the data section, which has only " + std::to_string(data_size) +
                           " bytes");
  uint64_t expected = 0;
  if (!checked_mul(count, static_cast<uint64_t>(elem), &expected) || expected != end - begin)
    parse_error(where, "holds " + std::to_string(end - begin) + " bytes, but dtype " + t.dtype +
                           " x shape " + t.shape_text() + " needs " +
                           (expected || count == 0 ? std::to_string(expected)
                                                   : std::string("more than 2^64")));
  t.bytes = end - begin;
  // data is set by the caller (base + begin); stash begin in the pointer field meanwhile.
  t.data = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(begin));
  return t;
}

}  // namespace

int dtype_size(const std::string& d) {
  if (d == "BOOL" || d == "U8" || d == "I8" || d == "F8_E4M3" || d == "F8_E5M2" || d == "F8_E8M0")
    return 1;
  if (d == "I16" || d == "U16" || d == "F16" || d == "BF16") return 2;
  if (d == "I32" || d == "U32" || d == "F32") return 4;
  if (d == "I64" || d == "U64" || d == "F64") return 8;
  return 0;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorView::shape_text() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Header parse_header(const uint8_t* data, uint64_t size, const std::string& what) {
  if (size < 8)
    parse_error(what, "the file has " + std::to_string(size) +
                          " bytes, fewer than the 8-byte header length");
  const uint64_t header_bytes = read_le64(data);
  if (header_bytes > kMaxHeaderBytes)
    parse_error(what, "the header length field says " + std::to_string(header_bytes) +
                          " bytes, more than the 100 MB limit");
  if (header_bytes > size - 8)
    parse_error(what, "the header length field says " + std::to_string(header_bytes) +
                          " bytes, but only " + std::to_string(size - 8) + " follow it");
  const char* text = reinterpret_cast<const char*>(data + 8);
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text, text + header_bytes);
  } catch (const nlohmann::json::exception& e) {
    parse_error(what, std::string("the JSON header does not parse: ") + e.what());
  }
  if (!json.is_object()) parse_error(what, "the JSON header is not an object");

  Header header;
  const uint64_t data_offset = 8 + header_bytes;
  const uint64_t data_size = size - data_offset;
  for (auto it = json.begin(); it != json.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) parse_error(what, "'__metadata__' is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) parse_error(what, "metadata entry " + q(m.key()) + " is not a string");
        header.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    header.tensors.push_back(parse_entry(it.key(), *it, data_size, what));
  }
  // File order, and no two tensors may share bytes (a writer bug or a crafted file).
  auto begin_of = [](const TensorView& t) { return reinterpret_cast<uintptr_t>(t.data); };
  std::sort(header.tensors.begin(), header.tensors.end(),
            [&](const TensorView& a, const TensorView& b) { return begin_of(a) < begin_of(b); });
  for (size_t i = 1; i < header.tensors.size(); ++i) {
    const TensorView& prev = header.tensors[i - 1];
    if (prev.bytes > 0 && begin_of(header.tensors[i]) < begin_of(prev) + prev.bytes)
      parse_error(what + ": tensor " + q(header.tensors[i].name, 120),
                  "overlaps the bytes of tensor " + q(prev.name, 120));
  }
  for (TensorView& t : header.tensors) t.data = data + data_offset + begin_of(t);
  return header;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(HM_ERROR_IO, "cannot open " + q(path, 200) + ": " + errno_text());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string err = errno_text();
    ::close(fd);
    fail(HM_ERROR_IO, "cannot stat " + q(path, 200) + ": " + err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(HM_ERROR_IO, q(path, 200) + " is not a regular file");
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (size_ > 0) {
    map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map_ == MAP_FAILED) {
      map_ = nullptr;
      const std::string err = errno_text();
      ::close(fd);
      fail(HM_ERROR_IO, "cannot map " + q(path, 200) + ": " + err);
    }
  }
  ::close(fd);
  try {
    static const uint8_t kEmpty[1] = {0};
    header_ = parse_header(map_ ? static_cast<const uint8_t*>(map_) : kEmpty, size_, q(path, 200));
  } catch (...) {
    if (map_) ::munmap(map_, size_);
    map_ = nullptr;
    throw;
  }
  for (size_t i = 0; i < header_.tensors.size(); ++i) index_[header_.tensors[i].name] = i;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, size_);
}

const TensorView* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

// ---------------------------------------------------------------------------------------------
// Writer

void SafetensorsWriter::add(Entry e) {
  for (const Entry& other : entries_)
    HM_REQUIRE(other.name != e.name, HM_ERROR_INVALID_ARGUMENT,
               "tensor " + q(e.name, 120) + " is added twice");
  HM_REQUIRE(e.name != "__metadata__", HM_ERROR_INVALID_ARGUMENT,
             "'__metadata__' is not a tensor name");
  const int elem = dtype_size(e.dtype);
  HM_REQUIRE(elem > 0, HM_ERROR_INVALID_ARGUMENT,
             "tensor " + q(e.name, 120) + " has the unknown dtype " + q(e.dtype));
  uint64_t count = 1;
  for (int64_t d : e.shape) {
    HM_REQUIRE(d >= 0, HM_ERROR_INVALID_ARGUMENT,
               "tensor " + q(e.name, 120) + " has a negative dimension");
    count *= static_cast<uint64_t>(d);
  }
  HM_REQUIRE(count * static_cast<uint64_t>(elem) == e.bytes, HM_ERROR_INVALID_ARGUMENT,
             "tensor " + q(e.name, 120) + ": " + std::to_string(e.bytes) +
                 " bytes do not match dtype " + e.dtype + " and its shape");
  entries_.push_back(std::move(e));
}

void SafetensorsWriter::add_borrowed(const std::string& name, const std::string& dtype,
                                     std::vector<int64_t> shape, const void* data, uint64_t bytes) {
  Entry e;
  e.name = name;
  e.dtype = dtype;
  e.shape = std::move(shape);
  e.data = static_cast<const uint8_t*>(data);
  e.bytes = bytes;
  add(std::move(e));
}

void SafetensorsWriter::add_owned(const std::string& name, const std::string& dtype,
                                  std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
  Entry e;
  e.name = name;
  e.dtype = dtype;
  e.shape = std::move(shape);
  e.owned = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  e.data = e.owned->data();
  e.bytes = e.owned->size();
  add(std::move(e));
}

std::string SafetensorsWriter::header_json() const {
  nlohmann::ordered_json json = nlohmann::ordered_json::object();
  if (!metadata_.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata_) meta[k] = v;
    json["__metadata__"] = meta;
  }
  uint64_t offset = 0;
  for (const Entry& e : entries_) {
    nlohmann::ordered_json t = nlohmann::ordered_json::object();
    t["dtype"] = e.dtype;
    t["shape"] = e.shape;
    t["data_offsets"] = {offset, offset + e.bytes};
    json[e.name] = t;
    offset += e.bytes;
  }
  std::string text = json.dump();
  // The data section starts 8-byte aligned (the format pads the header with spaces).
  while ((text.size() + 8) % 8 != 0) text += ' ';
  return text;
}

std::vector<uint8_t> SafetensorsWriter::to_bytes() const {
  const std::string header = header_json();
  size_t total = 8 + header.size();
  for (const Entry& e : entries_) total += e.bytes;
  // Reserved up front and appended to (GCC 12 also warns, wrongly, about inserting into an
  // 8-byte vector: -Warray-bounds on the memcpy).
  std::vector<uint8_t> out;
  out.reserve(total);
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  for (const Entry& e : entries_) out.insert(out.end(), e.data, e.data + e.bytes);
  return out;
}

void SafetensorsWriter::write(const std::string& path, const Progress& progress) const {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail(HM_ERROR_IO, "cannot create " + q(tmp, 200) + ": " + errno_text());
  auto io_fail = [&](const std::string& what) {
    const std::string err = errno_text();
    std::fclose(f);
    std::remove(tmp.c_str());
    fail(HM_ERROR_IO, "writing " + q(tmp, 200) + " (" + what + "): " + err);
  };
  const std::string header = header_json();
  uint8_t len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));
  if (std::fwrite(len, 1, 8, f) != 8 ||
      std::fwrite(header.data(), 1, header.size(), f) != header.size())
    io_fail("header");
  uint64_t total = 0, done = 0;
  for (const Entry& e : entries_) total += e.bytes;
  for (const Entry& e : entries_) {
    if (e.bytes && std::fwrite(e.data, 1, e.bytes, f) != e.bytes) io_fail("tensor " + e.name);
    done += e.bytes;
    if (progress) progress(e.name, done, total);
  }
  if (std::fflush(f) != 0) io_fail("flush");
  if (std::fclose(f) != 0) {
    std::remove(tmp.c_str());
    fail(HM_ERROR_IO, "closing " + q(tmp, 200) + ": " + errno_text());
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = errno_text();
    std::remove(tmp.c_str());
    fail(HM_ERROR_IO, "cannot rename " + q(tmp, 200) + " to " + q(path, 200) + ": " + err);
  }
}

// ---------------------------------------------------------------------------------------------
// Streaming writer

SafetensorsStreamWriter::SafetensorsStreamWriter(const std::string& path, uint64_t reserve)
    : path_(path), tmp_(path + ".tmp") {
  reserve_ = reserve + 16;
  while ((reserve_ + 8) % 8 != 0) ++reserve_;
  file_ = std::fopen(tmp_.c_str(), "wb");
  if (!file_) fail(HM_ERROR_IO, "cannot create " + q(tmp_, 200) + ": " + errno_text());
  if (std::fseek(file_, static_cast<long>(8 + reserve_), SEEK_SET) != 0) {
    const std::string err = errno_text();
    std::fclose(file_);
    file_ = nullptr;
    std::remove(tmp_.c_str());
    fail(HM_ERROR_IO, "cannot seek in " + q(tmp_, 200) + ": " + err);
  }
}

SafetensorsStreamWriter::~SafetensorsStreamWriter() {
  if (file_) {
    std::fclose(file_);
    std::remove(tmp_.c_str());
  }
}

uint64_t SafetensorsStreamWriter::entry_bound(const std::string& name, size_t ndim) {
  // "name":{"dtype":"F8_E4M3","shape":[d,...],"data_offsets":[a,b]},
  return 6 * name.size() + 64 + 21 * ndim + 2 * 21;
}

uint64_t SafetensorsStreamWriter::metadata_bound(const std::string& key, const std::string& value) {
  return 6 * (key.size() + value.size()) + 8;
}

void SafetensorsStreamWriter::append(const std::string& name, const std::string& dtype,
                                     const std::vector<int64_t>& shape, const void* data,
                                     uint64_t bytes) {
  HM_REQUIRE(file_, HM_ERROR_INVALID_STATE, "the writer for " + q(path_, 200) + " is finished");
  uint64_t count = static_cast<uint64_t>(dtype_size(dtype));
  for (int64_t d : shape) count *= static_cast<uint64_t>(d);
  HM_REQUIRE(
      count == bytes, HM_ERROR_INTERNAL,
      "tensor " + q(name, 120) + ": " + std::to_string(bytes) + " bytes do not match " + dtype);
  for (const Entry& e : entries_)
    HM_REQUIRE(e.name != name, HM_ERROR_INTERNAL, "tensor " + q(name, 120) + " is written twice");
  if (bytes && std::fwrite(data, 1, bytes, file_) != bytes)
    fail(HM_ERROR_IO,
         "writing " + q(tmp_, 200) + " (tensor " + q(name, 120) + "): " + errno_text());
  entries_.push_back({name, dtype, shape, offset_, offset_ + bytes});
  offset_ += bytes;
}

void SafetensorsStreamWriter::finish() {
  HM_REQUIRE(file_, HM_ERROR_INVALID_STATE, "the writer for " + q(path_, 200) + " is finished");
  nlohmann::ordered_json json = nlohmann::ordered_json::object();
  if (!metadata_.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata_) meta[k] = v;
    json["__metadata__"] = meta;
  }
  for (const Entry& e : entries_) {
    nlohmann::ordered_json t = nlohmann::ordered_json::object();
    t["dtype"] = e.dtype;
    t["shape"] = e.shape;
    t["data_offsets"] = {e.begin, e.end};
    json[e.name] = t;
  }
  std::string header = json.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  HM_REQUIRE(header.size() <= reserve_, HM_ERROR_INTERNAL,
             "the safetensors header needs " + std::to_string(header.size()) + " bytes, " +
                 std::to_string(reserve_) + " were reserved");
  header.resize(reserve_, ' ');
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(reserve_ >> (8 * i));
  const bool ok = std::fflush(file_) == 0 && std::fseek(file_, 0, SEEK_SET) == 0 &&
                  std::fwrite(len, 1, 8, file_) == 8 &&
                  std::fwrite(header.data(), 1, header.size(), file_) == header.size();
  const std::string err = ok ? "" : errno_text();
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!ok || !closed) {
    std::remove(tmp_.c_str());
    fail(HM_ERROR_IO, "writing the header of " + q(tmp_, 200) + ": " + (ok ? errno_text() : err));
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const std::string e = errno_text();
    std::remove(tmp_.c_str());
    fail(HM_ERROR_IO, "cannot rename " + q(tmp_, 200) + " to " + q(path_, 200) + ": " + e);
  }
}

}  // namespace hm::io
