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
#include <set>

#include "core/checked.hpp"
#include "core/error.hpp"
#include "core/file.hpp"
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
        !core::checked_mul(count, v, &count))
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
  if (!core::checked_mul(count, static_cast<uint64_t>(elem), &expected) || expected != end - begin)
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
  // 0 when any dimension is 0, whatever the others are.
  return core::size_product(shape, "tensor " + q(name, 120) + ": its element count");
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
  // nlohmann keeps the last of repeated keys; a repeated tensor name (or field) is ambiguous, so
  // the callback sees every key and refuses repeats, naming the object they repeat in.
  std::vector<std::set<std::string>> keys;  // one set per open object
  std::vector<std::string> owner;           // the key each open object is the value of
  std::string last_key;
  auto on_event = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) {
      keys.emplace_back();
      owner.push_back(last_key);
    } else if (event == Event::object_end) {
      keys.pop_back();
      owner.pop_back();
    } else if (event == Event::key) {
      last_key = parsed.get<std::string>();
      if (!keys.back().insert(last_key).second) {
        if (keys.size() == 1)
          parse_error(what, (last_key == "__metadata__" ? std::string("'__metadata__'")
                                                        : "tensor " + q(last_key, 120)) +
                                " appears more than once");
        parse_error(what, "key " + q(last_key) + " appears more than once in " +
                              q(owner.back(), 120));
      }
    } else if (event == Event::array_start) {
      last_key.clear();
    }
    return true;
  };
  try {
    json = nlohmann::json::parse(text, text + header_bytes, on_event);
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
  // File order (ties by size, then name, so the order is deterministic), and no two tensors may
  // share bytes (a writer bug or a crafted file). A zero-byte tensor owns no bytes and overlaps
  // nothing, wherever its offset points: writers put it where the next tensor starts.
  auto begin_of = [](const TensorView& t) { return reinterpret_cast<uintptr_t>(t.data); };
  std::sort(header.tensors.begin(), header.tensors.end(),
            [&](const TensorView& a, const TensorView& b) {
              if (begin_of(a) != begin_of(b)) return begin_of(a) < begin_of(b);
              if (a.bytes != b.bytes) return a.bytes < b.bytes;
              return a.name < b.name;
            });
  const TensorView* last = nullptr;  // the non-empty tensor that ends last so far
  for (const TensorView& t : header.tensors) {
    if (t.bytes == 0) continue;
    if (last && begin_of(t) < begin_of(*last) + last->bytes)
      parse_error(what + ": tensor " + q(t.name, 120),
                  "overlaps the bytes of tensor " + q(last->name, 120));
    last = &t;
  }
  for (TensorView& t : header.tensors) t.data = data + data_offset + begin_of(t);
  return header;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  // Only regular files: a FIFO would block the open, a device would map or read without end.
  std::string error;
  const int fd = core::open_regular_file(path, &size_, &id_, &error);
  if (fd < 0) fail(HM_ERROR_IO, error);
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
  std::vector<int64_t> factors = e.shape;
  factors.push_back(elem);
  const auto bytes = static_cast<uint64_t>(
      core::size_product(factors, "tensor " + q(e.name, 120) + ": the bytes of its shape"));
  HM_REQUIRE(bytes == e.bytes, HM_ERROR_INVALID_ARGUMENT,
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
  core::OutputFile out(path);  // published by commit(); removed if anything below throws
  const std::string header = header_json();
  uint8_t len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));
  out.write_at(0, len, 8, "the header length");
  out.write_at(8, header.data(), header.size(), "the header");
  uint64_t total = 0, done = 0;
  for (const Entry& e : entries_) total += e.bytes;
  const uint64_t data_start = 8 + header.size();
  for (const Entry& e : entries_) {
    out.write_at(data_start + done, e.data, e.bytes, "tensor " + q(e.name, 120));
    done += e.bytes;
    if (progress) progress(e.name, done, total);
  }
  out.commit();
}

// ---------------------------------------------------------------------------------------------
// Streaming writer

SafetensorsStreamWriter::SafetensorsStreamWriter(const std::string& path, uint64_t reserve)
    : path_(path), file_(std::make_unique<core::OutputFile>(path)) {
  reserve_ = reserve + 16;
  while ((reserve_ + 8) % 8 != 0) ++reserve_;
}

SafetensorsStreamWriter::~SafetensorsStreamWriter() = default;  // an unfinished file is removed

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
  std::vector<int64_t> factors = shape;
  factors.push_back(dtype_size(dtype));
  const auto count = static_cast<uint64_t>(
      core::size_product(factors, "tensor " + q(name, 120) + ": the bytes of its shape"));
  HM_REQUIRE(
      count == bytes, HM_ERROR_INTERNAL,
      "tensor " + q(name, 120) + ": " + std::to_string(bytes) + " bytes do not match " + dtype);
  for (const Entry& e : entries_)
    HM_REQUIRE(e.name != name, HM_ERROR_INTERNAL, "tensor " + q(name, 120) + " is written twice");
  file_->write_at(8 + reserve_ + offset_, data, bytes, "tensor " + q(name, 120));
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
  file_->write_at(0, len, 8, "the header length");
  file_->write_at(8, header.data(), header.size(), "the header");
  file_->commit();
  file_.reset();
}

}  // namespace hm::io
