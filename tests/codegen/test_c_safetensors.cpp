// codegen/c/fused_safetensors.h, the generated C's own safetensors reader: the malformed files of
// tests/io/safetensors_test.cpp (plus the C reader's own limits: rank, \u0000, UTF-8, duplicate
// members), each refused with its sentence; real and written files read back byte for byte; the
// model directory's index refused when empty or naming files outside the directory.
#include "fused_safetensors.h"

#include "fused/io/safetensors.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace fs = std::filesystem;
using fused::io::dtype;
using fused::io::tensor_data;

namespace {

const fs::path tiny_a = fs::path(FUSED_TEST_DATA) / "reference" / "tiny_a" / "model.safetensors";

// A fresh path in the system temp directory, removed (with what is under it) when the case ends.
struct temp_path {
  fs::path path;
  explicit temp_path(const std::string& name)
      : path(fs::temp_directory_path() / ("fused_c_st_test_" + std::to_string(::getpid()) + "_" + name)) {}
  ~temp_path() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

// A file with `header` as its JSON header (length field computed) followed by `data_bytes` zeros.
std::string craft(const std::string& header, std::size_t data_bytes = 0) {
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[static_cast<std::size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  return file + header + std::string(data_bytes, '\0');
}

// fst_open's message for `bytes` written to a file "t.safetensors", or "no error".
std::string open_error(const std::string& bytes) {
  temp_path dir("open");
  fs::create_directories(dir.path);
  const std::string path = (dir.path / "t.safetensors").string();
  write_bytes(path, bytes);
  fst_file f;
  char err[512] = "";
  const int rc = fst_open(&f, path.c_str(), err, sizeof err);
  std::string message = err;
  if (rc == 0) {
    fst_close(&f);
    return "no error";
  }
  CHECK(f.f == nullptr);  // closed on failure
  CHECK(message.starts_with(path + ": "));
  return message.substr(path.size() - std::string("t.safetensors").size());
}

std::string entry_error(const std::string& entry, std::size_t data_bytes = 64) {
  return open_error(craft("{\"t\":" + entry + "}", data_bytes));
}

}  // namespace

TEST_CASE("C reader: a transformers checkpoint and the C++ writer's files read back byte for byte") {
  fst_file f;
  char err[512] = "";
  REQUIRE_MESSAGE(fst_open(&f, tiny_a.c_str(), err, sizeof err) == 0, err);
  CHECK(f.count == 26);
  fused::io::safetensors_file ref = fused::io::safetensors_file::open(tiny_a);
  for (std::size_t k = 0; k < f.count; ++k) {
    const fst_tensor& t = f.tensors[k];
    const fused::io::tensor_view* r = ref.find(t.name);
    REQUIRE(r != nullptr);
    CHECK(t.dtype == FST_BF16);
    CHECK(std::vector<std::int64_t>(t.shape, t.shape + t.rank) == r->shape);
    CHECK(f.data_start + t.begin == r->file_offset);
    std::vector<std::byte> bytes(t.end - t.begin);
    REQUIRE(fst_read(&f, &t, bytes.data(), err, sizeof err) == 0);
    CHECK(std::memcmp(bytes.data(), r->data, bytes.size()) == 0);
  }
  fst_close(&f);

  const std::vector<float> logits{1.5f, -2.25f, 0.0f, 3e38f, -1e-30f, 7.0f};
  const std::vector<std::uint16_t> w{0x3F80, 0xBF80, 0x7F80};
  const std::vector<std::int64_t> scalar{42};
  const std::vector<std::byte> file = fused::io::serialize_safetensors(
      std::vector<tensor_data>{{"logits", dtype::F32, {2, 3}, std::as_bytes(std::span(logits))},
                               {"w\xC3\xA9", dtype::BF16, {3}, std::as_bytes(std::span(w))},
                               {"empty", dtype::F8_E8M0, {0, 5}, {}},
                               {"scalar", dtype::I64, {}, std::as_bytes(std::span(scalar))}},
      {{"fused_weights_fingerprint", "0x0123456789abcdef"}});
  temp_path tmp("written.safetensors");
  write_bytes(tmp.path, std::string(reinterpret_cast<const char*>(file.data()), file.size()));
  REQUIRE_MESSAGE(fst_open(&f, tmp.path.c_str(), err, sizeof err) == 0, err);
  CHECK(f.count == 4);
  CHECK(std::string(f.fingerprint) == "0x0123456789abcdef");
  for (std::size_t k = 0; k < f.count; ++k) {
    const fst_tensor& t = f.tensors[k];
    if (std::string(t.name) == "w\xC3\xA9") {
      std::uint16_t back[3];
      REQUIRE(fst_read(&f, &t, back, err, sizeof err) == 0);
      CHECK(std::vector<std::uint16_t>(back, back + 3) == w);
    }
    if (std::string(t.name) == "scalar") CHECK((t.rank == 0 && t.dtype == FST_I64 && t.end - t.begin == 8));
    if (std::string(t.name) == "empty") CHECK((t.rank == 2 && t.begin == t.end && std::string(t.dtype_name) == "F8_E8M0"));
  }
  fst_close(&f);
}

TEST_CASE("C reader: files that are not safetensors, or lie about their size") {
  CHECK(open_error("12345") == "t.safetensors: file is 5 bytes, shorter than the 8-byte header length of a safetensors file");
  std::string huge = craft("{}");
  huge[5] = 1;  // header length 2^40 + 2
  CHECK(open_error(huge) ==
        "t.safetensors: header length 1099511627778 exceeds the 100000000-byte limit (not a safetensors file, or corrupt)");
  std::string all_ones(8, '\xFF');
  CHECK(open_error(all_ones + "{}") ==
        "t.safetensors: header length 18446744073709551615 exceeds the 100000000-byte limit (not a safetensors file, or "
        "corrupt)");
  std::string cut = craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4);
  cut.resize(40);
  CHECK(open_error(cut) == "t.safetensors: header length 54 exceeds the 32 bytes that follow it (truncated file?)");

  CHECK(open_error(craft("{\"a\": nope}")) == "t.safetensors: invalid JSON header: unexpected character");
  CHECK(open_error(craft("{\"a\": {}")) == "t.safetensors: invalid JSON header: expected ',' or a closing bracket");
  CHECK(open_error(craft("{} {}")) == "t.safetensors: invalid JSON header: text after the value");
  CHECK(open_error(craft("")) == "t.safetensors: invalid JSON header: unexpected end");
  CHECK(open_error(craft("[1, 2]")) == "t.safetensors: the header is not a JSON object");
  CHECK(open_error(craft("{\"x\":[[[[1]]]]}")) == "t.safetensors: invalid JSON header: nested too deep");
  CHECK(open_error(craft(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}})")) ==
        "t.safetensors: the header lists tensor \"a\" twice");
  // Escapes are decoded before names are compared.
  CHECK(open_error(craft(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"\u0061":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}})")) ==
        "t.safetensors: the header lists tensor \"a\" twice");
  CHECK(open_error(craft(R"({"__metadata__":{"format":1}})")) ==
        "t.safetensors: \"__metadata__\" entry \"format\" is not a string");
  CHECK(open_error(craft(R"({"__metadata__":[]})")) == "t.safetensors: \"__metadata__\" is not a JSON object");
  CHECK(open_error(craft(R"({"__metadata__":{},"__metadata__":{}})")) ==
        "t.safetensors: the header lists \"__metadata__\" twice");
  const std::string nul_message =
      "t.safetensors: the header holds a NUL byte at file offset 10; a header is JSON, padded with spaces (the reference "
      "loader refuses this file too)";
  CHECK(open_error(craft(std::string("{}") + std::string(6, '\0'))) == nul_message);
  CHECK(open_error(craft(std::string("{}\0{\"a\":1}   ", 13))) == nul_message);
}

TEST_CASE("C reader: strings are UTF-8 without NUL; numbers follow the JSON grammar") {
  const auto name_error = [](const std::string& name) {
    return open_error(craft("{\"" + name + "\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}"));
  };
  CHECK(name_error("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80") == "no error");
  CHECK(name_error("\\u00e9\\ud83d\\ude00") == "no error");
  const std::string not_utf8 = "t.safetensors: invalid JSON header: a string is not valid UTF-8";
  CHECK(name_error("\xFF") == not_utf8);
  CHECK(name_error("\x80") == not_utf8);          // a continuation byte alone
  CHECK(name_error("\xC0\xAF") == not_utf8);      // overlong '/'
  CHECK(name_error("\xE0\x80\xAF") == not_utf8);  // overlong '/'
  CHECK(name_error("\xED\xA0\x80") == not_utf8);  // a surrogate
  CHECK(name_error("\xF4\x90\x80\x80") == not_utf8);  // past U+10FFFF
  CHECK(name_error("\xE2\x82") == not_utf8);          // cut short by the closing quote
  CHECK(name_error("a\\u0000b") == "t.safetensors: invalid JSON header: \\u0000 in a string (names are C strings)");
  CHECK(name_error("\\ud83d") == "t.safetensors: invalid JSON header: unpaired surrogate");
  CHECK(name_error(std::string("a\nb")) == "t.safetensors: invalid JSON header: control character in a string");
  CHECK(name_error("\\x") == "t.safetensors: invalid JSON header: bad escape");

  const auto shape_error = [](const std::string& dims) {
    return entry_error("{\"dtype\":\"U8\",\"shape\":[" + dims + "],\"data_offsets\":[0,1]}", 1);
  };
  CHECK(shape_error("1") == "no error");
  CHECK(shape_error("01") == "t.safetensors: invalid JSON header: expected ',' or a closing bracket");
  CHECK(shape_error("1.") == "t.safetensors: invalid JSON header: bad number");
  CHECK(shape_error("1e") == "t.safetensors: invalid JSON header: bad number");
  CHECK(shape_error("-") == "t.safetensors: invalid JSON header: bad number");
  CHECK(shape_error("+1") == "t.safetensors: invalid JSON header: unexpected character");
  CHECK(shape_error(std::string("1\0", 2)) ==
        "t.safetensors: the header holds a NUL byte at file offset 37; a header is JSON, padded with spaces (the reference loader "
        "refuses this file too)");
  CHECK(shape_error("1" + std::string(70, '0')) == "t.safetensors: invalid JSON header: a number longer than 63 characters");
  CHECK(shape_error("1e999") == "t.safetensors: invalid JSON header: number out of range");  // as nlohmann has it
  CHECK(shape_error("1e0") == "t.safetensors: tensor \"t\": shape dimension 0 is not a non-negative 64-bit integer");
  CHECK(shape_error("-0") == "t.safetensors: tensor \"t\": shape dimension 0 is not a non-negative 64-bit integer");
}

TEST_CASE("C reader: each tensor entry is checked: dtype, shape, offsets, bytes, bounds, overlap") {
  CHECK(entry_error("[1]") == "t.safetensors: tensor \"t\": entry is not a JSON object");
  CHECK(entry_error(R"({"dtype":"F17","shape":[1],"data_offsets":[0,4]})") == "t.safetensors: tensor \"t\": unknown dtype \"F17\"");
  CHECK(entry_error(R"({"shape":[1],"data_offsets":[0,4]})") == "t.safetensors: tensor \"t\": \"dtype\" is missing or not a string");
  CHECK(entry_error(R"({"dtype":"F32","dtype":"U8","shape":[1],"data_offsets":[0,4]})") ==
        "t.safetensors: tensor \"t\": \"dtype\", \"shape\" or \"data_offsets\" appears twice");
  CHECK(entry_error(R"({"dtype":"F32","shape":3,"data_offsets":[0,4]})") == "t.safetensors: tensor \"t\": \"shape\" is missing or not a list");
  CHECK(entry_error(R"({"dtype":"U8","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,1]})") ==
        "t.safetensors: tensor \"t\": shape has 9 dimensions, more than the 8 this reader takes");
  const std::string not_dim = "t.safetensors: tensor \"t\": shape dimension 1 is not a non-negative 64-bit integer";
  CHECK(entry_error(R"({"dtype":"F32","shape":[2,-1],"data_offsets":[0,4]})") == not_dim);
  CHECK(entry_error(R"({"dtype":"F32","shape":[2,1.5],"data_offsets":[0,4]})") == not_dim);
  CHECK(entry_error(R"({"dtype":"F32","shape":[2,"2"],"data_offsets":[0,4]})") == not_dim);
  CHECK(entry_error(R"({"dtype":"F32","shape":[2,9223372036854775808],"data_offsets":[0,4]})") == not_dim);
  CHECK(entry_error(R"({"dtype":"F32","shape":[2,99999999999999999999999],"data_offsets":[0,4]})") == not_dim);
  CHECK(entry_error(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]})") ==
        "t.safetensors: tensor \"t\": shape of F32 holds more bytes than 2^64");
  CHECK(entry_error(R"({"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,4]})") ==
        "t.safetensors: tensor \"t\": shape of F64 holds more bytes than 2^64");
  CHECK(entry_error(R"({"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]})") ==
        "t.safetensors: tensor \"t\": shape of U8 holds more bytes than 2^64");  // exactly 2^64: would wrap to 0
  CHECK(entry_error(R"({"dtype":"F32","shape":[2],"data_offsets":[0]})") ==
        "t.safetensors: tensor \"t\": \"data_offsets\" is missing or not a list [begin, end]");
  const std::string bad_offsets = "t.safetensors: tensor \"t\": data_offsets are not non-negative 64-bit integers";
  CHECK(entry_error(R"({"dtype":"F32","shape":[2],"data_offsets":[-8,0]})") == bad_offsets);
  CHECK(entry_error(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8.0]})") == bad_offsets);
  CHECK(entry_error(R"({"dtype":"U8","shape":[16],"data_offsets":[18446744073709551600,18446744073709551616]})") == bad_offsets);
  CHECK(entry_error(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})") ==
        "t.safetensors: tensor \"t\": data_offsets [8, 0] end before they begin");
  CHECK(entry_error(R"({"dtype":"F32","shape":[3,2],"data_offsets":[0,16]})") ==
        "t.safetensors: tensor \"t\": data_offsets [0, 16] span 16 bytes, but its shape of F32 needs 24");
  CHECK(entry_error(R"({"dtype":"F32","shape":[4],"data_offsets":[56,72]})") ==
        "t.safetensors: tensor \"t\": data_offsets [56, 72] reach past the data area of 64 bytes");
  CHECK(entry_error(R"({"dtype":"U8","shape":[16],"data_offsets":[9223372036854775800,9223372036854775807]})") ==
        "t.safetensors: tensor \"t\": data_offsets [9223372036854775800, 9223372036854775807] span 7 bytes, but its shape of U8 "
        "needs 16");
  // A zero dimension makes any shape empty, even one whose other dimensions overflow.
  CHECK(entry_error(R"({"dtype":"F32","shape":[4294967296,4294967296,0],"data_offsets":[0,0]})", 0) == "no error");

  const std::string overlap = R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                              R"("b":{"dtype":"F32","shape":[4],"data_offsets":[16,32]},)"
                              R"("c":{"dtype":"F32","shape":[2],"data_offsets":[28,36]},)"
                              R"("empty":{"dtype":"F32","shape":[0],"data_offsets":[8,8]}})";
  CHECK(open_error(craft(overlap, 64)) == "t.safetensors: tensor \"c\": data_offsets [28, 36] overlap those of tensor \"b\" [16, 32]");
  const std::string inside = R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},)"
                             R"("a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})";
  CHECK(open_error(craft(inside, 64)) == "t.safetensors: tensor \"b\": data_offsets [4, 12] overlap those of tensor \"a\" [0, 32]");
  const std::string unordered = R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
                                R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  CHECK(open_error(craft(unordered, 16)) == "no error");  // the header's order is the writer's business
  // ... but, as for the reference loader, the tensors fill the data area: no gap, no byte after them
  // (a header length a few bytes short shifts every tensor, and only the data area's size shows it)
  CHECK(open_error(craft(unordered, 18)) ==
        "t.safetensors: the data area holds 18 bytes, but the tensors end at byte 16: 2 bytes past the last tensor (a header "
        "length that is off, or bytes appended; the reference loader refuses this file too)");
  CHECK(open_error(craft("{}", 8)) ==
        "t.safetensors: the data area holds 8 bytes, but the tensors end at byte 0: 8 bytes past the last tensor (a header "
        "length that is off, or bytes appended; the reference loader refuses this file too)");
  const std::string gap = R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                          R"("b":{"dtype":"F32","shape":[2],"data_offsets":[20,28]}})";
  CHECK(open_error(craft(gap, 28)) ==
        "t.safetensors: tensor \"b\": data_offsets [20, 28] leave 4 bytes unused before it (after tensor \"a\" [0, 16]); the "
        "tensors must fill the data area in order (the reference loader refuses this file too)");
  CHECK(open_error(craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", 12)) ==
        "t.safetensors: tensor \"a\": data_offsets [8, 12] leave 8 bytes unused before it (at the data area's start); the "
        "tensors must fill the data area in order (the reference loader refuses this file too)");
}

TEST_CASE("C reader: missing files, directories, a truncated checkpoint") {
  fst_file f;
  char err[512] = "";
  CHECK(fst_open(&f, "/nonexistent/x.safetensors", err, sizeof err) == -1);
  CHECK(std::string(err) == "/nonexistent/x.safetensors: cannot open");
  CHECK(f.f == nullptr);
  CHECK(fst_open(&f, FUSED_TEST_DATA, err, sizeof err) == -1);  // whatever the file system says of a directory's size
  CHECK(std::string(err).starts_with(std::string(FUSED_TEST_DATA) + ": "));

  std::ifstream in(tiny_a, std::ios::binary);
  std::string model((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  model.resize(100000);
  CHECK(open_error(model).ends_with("\"model.embed_tokens.weight\": data_offsets [0, 256000] reach past the data area of 97288 bytes"));
}

TEST_CASE("C reader: a model directory's index names a non-empty set of files in the directory") {
  temp_path dir("index");
  fs::create_directories(dir.path);
  const std::string index = (dir.path / "model.safetensors.index.json").string();
  const auto files_error = [&](const std::string& json, int* count = nullptr) {
    write_bytes(index, json);
    fst_file_list list;
    char err[512] = "";
    const int rc = fst_model_files(dir.path.c_str(), &list, err, sizeof err);
    if (count) *count = list.count;
    fst_file_list_free(&list);
    return rc == 0 ? std::string("no error") : std::string(err);
  };
  int count = 0;
  const auto entry = [](const char* name) { return "\"" + std::string(name) + "\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}"; };
  write_bytes(dir.path / "model-1.safetensors", craft("{" + entry("a") + "," + entry("c") + "}"));
  write_bytes(dir.path / "model-2.safetensors", craft("{" + entry("b") + "}"));
  CHECK(files_error(R"({"weight_map":{"a":"model-1.safetensors","b":"model-2.safetensors","c":"model-1.safetensors"}})", &count) ==
        "no error");
  CHECK(count == 2);
  // A map that lies is refused, as fused's C++ loader refuses it: a tensor in another shard, one in none.
  CHECK(files_error(R"({"weight_map":{"a":"model-2.safetensors","b":"model-2.safetensors","c":"model-1.safetensors"}})") ==
        index + ": weight_map puts tensor \"a\" in \"model-2.safetensors\", which does not contain it");
  CHECK(files_error(R"({"weight_map":{"a":"model-1.safetensors","b":"model-2.safetensors","ghost":"model-1.safetensors"}})") ==
        index + ": weight_map puts tensor \"ghost\" in \"model-1.safetensors\", which does not contain it");
  // A tensor the map leaves out is still read with its shard (transformers loads whole shards).
  CHECK(files_error(R"({"weight_map":{"a":"model-1.safetensors","b":"model-2.safetensors"}})") == "no error");
  CHECK(files_error(R"({"weight_map":{"a":"model-1.safetensors","b":"model-3.safetensors"}})").starts_with(
      (dir.path / "model-3.safetensors").string() + ": cannot"));
  CHECK(files_error(R"({"weight_map":{}})") == index + ": \"weight_map\" is empty; it must name the shard of every tensor");
  CHECK(files_error(R"({"weight_map":[]})") == index + ": not a JSON object with a \"weight_map\" object");
  for (const char* bad : {R"("../model.safetensors")", R"("/etc/passwd")", R"("sub/model.safetensors")", R"("..")", R"(".")", R"("")",
                          R"("a\\b")", R"("a\nb")", "3"}) {
    CAPTURE(bad);
    CHECK(files_error(std::string(R"({"weight_map":{"a":)") + bad + "}}") ==
          index + ": weight_map[\"a\"] is not a plain file name (a shard is read from the model directory itself)");
  }
  // an index that is there but cannot be read is not reported as absent
  fs::remove(index);
  fs::create_directories(index);
  fst_file_list list;
  char err[512] = "";
  CHECK(fst_model_files(dir.path.c_str(), &list, err, sizeof err) == -1);
  CHECK(std::string(err) == index + ": cannot be read as a JSON index of at most 16 MiB");
  fs::remove(index);
  CHECK(fst_model_files(dir.path.c_str(), &list, err, sizeof err) == -1);
  CHECK(std::string(err) == dir.path.string() + ": neither model.safetensors nor model.safetensors.index.json is there");
}

TEST_CASE("C reader: JSON that is not a safetensors header is named as JSON") {
  fst_json j;
  char err[512] = "";
  CHECK(fst_json_parse("{\"a\": nope}", 11, "config.json", &j, err, sizeof err) == -1);
  CHECK(std::string(err) == "config.json: invalid JSON: unexpected character");
  const std::string index = "{\"weight_map\": {\"a\": \"x\"}";
  CHECK(fst_json_parse(index.data(), index.size(), "model.safetensors.index.json", &j, err, sizeof err) == -1);
  CHECK(std::string(err) == "model.safetensors.index.json: invalid JSON: expected ',' or a closing bracket");
}

TEST_CASE("C writer: the file is replaced whole or not at all") {
  temp_path dir("writer");
  fs::create_directories(dir.path);
  const float values[3] = {1.5f, -2.0f, 0.25f};
  fst_out t{};
  t.name = "x";
  t.dtype = "F32";
  t.rank = 1;
  t.shape[0] = 3;
  t.data = values;
  t.bytes = sizeof values;
  char err[512] = "";
  const fs::path file = dir.path / "out.safetensors";
  REQUIRE(fst_write(file.c_str(), &t, 1, err, sizeof err) == 0);
  CHECK(fs::file_size(file) > sizeof values);
  CHECK_FALSE(fs::exists(dir.path / "out.safetensors.fused-tmp"));  // renamed, not left beside it
  fst_file back{};
  REQUIRE_MESSAGE(fst_open(&back, file.c_str(), err, sizeof err) == 0, err);
  REQUIRE(back.count == 1);
  float read[3] = {};
  REQUIRE(fst_read(&back, &back.tensors[0], read, err, sizeof err) == 0);
  CHECK(std::memcmp(read, values, sizeof values) == 0);
  fst_close(&back);

  // A target the rename cannot replace (a directory): an error naming it, the directory and the
  // staging file's directory as they were.
  const fs::path blocked = dir.path / "blocked.safetensors";
  fs::create_directories(blocked);
  CHECK(fst_write(blocked.c_str(), &t, 1, err, sizeof err) == -1);
  CHECK(std::string(err).find("blocked.safetensors: cannot replace it") != std::string::npos);
  CHECK(fs::is_directory(blocked));
  CHECK_FALSE(fs::exists(dir.path / "blocked.safetensors.fused-tmp"));

  // A directory that does not exist: nothing written, the path named.
  const fs::path missing = dir.path / "none" / "x.safetensors";
  CHECK(fst_write(missing.c_str(), &t, 1, err, sizeof err) == -1);
  CHECK(std::string(err).find("x.safetensors: cannot write") != std::string::npos);
}
