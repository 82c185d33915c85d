// Corrupt cache entries (truncated or altered images, bad or missing meta.json, files missing,
// a file where the entry directory should be) are detected, never loaded, reported, and rebuilt.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "test_cache_support.hpp"

namespace hm::jit::test {
namespace {

namespace fs = std::filesystem;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

void edit_meta(const std::string& entry, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json meta = nlohmann::json::parse(read_text(entry + "/meta.json"));
  edit(meta);
  write_text(entry + "/meta.json", meta.dump());
}

struct Corruption {
  const char* name;
  std::function<void(const std::string& entry)> apply;
  const char* reason;  // a fragment the report must contain
};

const std::vector<Corruption>& corruptions() {
  static const std::vector<Corruption> all = {
      {"truncated image",
       [](const std::string& e) {
         const std::string image = read_text(e + "/kernel.cubin");
         write_text(e + "/kernel.cubin", image.substr(0, image.size() / 2));
       },
       "meta.json says"},
      {"altered image byte",
       [](const std::string& e) {
         std::string image = read_text(e + "/kernel.cubin");
         image[image.size() / 2] ^= 0x20;
         write_text(e + "/kernel.cubin", image);
       },
       "SHA-256"},
      {"garbage meta", [](const std::string& e) { write_text(e + "/meta.json", "{not json"); },
       "not a JSON object"},
      {"empty meta", [](const std::string& e) { write_text(e + "/meta.json", ""); },
       "not a JSON object"},
      {"missing meta", [](const std::string& e) { fs::remove(e + "/meta.json"); },
       "meta.json is unreadable"},
      {"missing image", [](const std::string& e) { fs::remove(e + "/kernel.cubin"); },
       "cannot open"},
      {"size mismatch in meta",
       [](const std::string& e) {
         edit_meta(
             e, [](nlohmann::json& m) { m["image"]["size"] = m["image"]["size"].get<int>() + 1; });
       },
       "meta.json says"},
      {"meta of another key",
       [](const std::string& e) {
         edit_meta(e, [](nlohmann::json& m) { m["key"] = std::string(64, '0'); });
       },
       "another key"},
      {"meta components altered",
       [](const std::string& e) {
         edit_meta(e, [](nlohmann::json& m) { m["components"]["compiler"] = "other 9.9"; });
       },
       "another key"},
      {"meta field missing",
       [](const std::string& e) { edit_meta(e, [](nlohmann::json& m) { m.erase("image"); }); },
       "lacks a required field"},
      {"meta field of the wrong type",
       [](const std::string& e) { edit_meta(e, [](nlohmann::json& m) { m["is_ptx"] = "no"; }); },
       "wrong type"},
      {"meta of another format",
       [](const std::string& e) { edit_meta(e, [](nlohmann::json& m) { m["format"] = 999; }); },
       "format"},
      {"empty entry directory",
       [](const std::string& e) {
         for (const auto& f : fs::directory_iterator(e)) fs::remove(f.path());
       },
       "meta.json is unreadable"},
      // Not regular files (issue 16): a FIFO would block a reader forever, a device would be
      // read without end. Both are refused before reading.
      {"image is a FIFO",
       [](const std::string& e) {
         fs::remove(e + "/kernel.cubin");
         ASSERT_EQ(::mkfifo((e + "/kernel.cubin").c_str(), 0600), 0);
       },
       "not a regular file"},
      {"meta is a FIFO",
       [](const std::string& e) {
         fs::remove(e + "/meta.json");
         ASSERT_EQ(::mkfifo((e + "/meta.json").c_str(), 0600), 0);
       },
       "not a regular file"},
      {"image is a device",
       [](const std::string& e) {
         fs::remove(e + "/kernel.cubin");
         fs::create_symlink("/dev/zero", e + "/kernel.cubin");
       },
       "not a regular file"},
      {"file instead of directory",
       [](const std::string& e) {
         fs::remove_all(e);
         write_text(e, "stray");
       },
       "not a directory"},
  };
  return all;
}

class CacheCorruptionTest : public CacheTest, public ::testing::WithParamInterface<size_t> {};

TEST_P(CacheCorruptionTest, IsDetectedReportedAndRebuilt) {
  const Corruption& c = corruptions()[GetParam()];
  FakeCompiler compiler;
  Cache cache(dir_, false, false);
  Cache::Result first;
  const CompiledKernel good = cache.get_or_compile(test_request(), compiler, &first);
  c.apply(first.entry_dir);

  // Load-only: the corrupt entry is refused, with the reason, and not replaced.
  Cache load_only(dir_, /*jit_disabled=*/true, false);
  try {
    load_only.get_or_compile(test_request(), compiler);
    FAIL() << c.name << ": a corrupt entry was loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_CACHE_CORRUPT) << c.name;
    EXPECT_NE(e.message().find(c.reason), std::string::npos) << c.name << ": " << e.message();
    EXPECT_NE(e.message().find(first.entry_dir), std::string::npos) << e.message();
  }
  EXPECT_EQ(compiler.compiles, 1);
  const std::string why = cache.explain_miss(test_request(), compiler);
  EXPECT_NE(why.find("corrupt"), std::string::npos) << c.name << ": " << why;

  // With JIT: rebuilt, and the note says what was wrong.
  Cache::Result rebuilt;
  const CompiledKernel k = cache.get_or_compile(test_request(), compiler, &rebuilt);
  EXPECT_EQ(rebuilt.outcome, Cache::Outcome::kRebuiltCorrupt) << c.name;
  EXPECT_EQ(compiler.compiles, 2) << c.name;
  EXPECT_EQ(k.image, good.image) << c.name;
  EXPECT_NE(rebuilt.note.find("corrupt"), std::string::npos) << rebuilt.note;
  EXPECT_NE(rebuilt.note.find(c.reason), std::string::npos) << c.name << ": " << rebuilt.note;

  // The replacement is a sound entry, and the corrupt copy left nothing behind.
  Cache::Result again;
  EXPECT_EQ(cache.get_or_compile(test_request(), compiler, &again).image, good.image);
  EXPECT_EQ(again.outcome, Cache::Outcome::kHit) << c.name;
  EXPECT_EQ(compiler.compiles, 2);
  EXPECT_TRUE(fs::is_empty(dir_ + "/tmp")) << c.name;
  EXPECT_EQ(cache.stats().entries, 1u);
}

INSTANTIATE_TEST_SUITE_P(AllKinds, CacheCorruptionTest,
                         ::testing::Range<size_t>(0, corruptions().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           std::string name = corruptions()[info.param].name;
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

}  // namespace
}  // namespace hm::jit::test
