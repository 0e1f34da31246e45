// safetensors reader and writer: real files from transformers, a writer round trip, and one
// crafted file per validation rule, each checked for its exact message.
#include "fused/io/safetensors.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <fused/core/json_text.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include "load_error_of.hpp"

namespace fs = std::filesystem;
using fused::io::dtype;
using fused::io::safetensors_file;
using fused::io::safetensors_view;
using fused::io::tensor_data;

using fused_test::load_error_of;

namespace {

const fs::path test_data = FUSED_TEST_DATA;
const fs::path tiny_a = test_data / "reference" / "tiny_a";

// A file with `header` as its JSON header (length field computed) followed by `data_bytes` zeros.
std::vector<std::byte> craft(const std::string& header, std::size_t data_bytes = 0) {
  std::vector<std::byte> file(8 + header.size() + data_bytes);
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) file[static_cast<std::size_t>(i)] = static_cast<std::byte>((n >> (8 * i)) & 0xFF);
  std::memcpy(file.data() + 8, header.data(), header.size());
  return file;
}

std::string parse_error(const std::vector<std::byte>& file) {
  return load_error_of([&] { (void)safetensors_view::parse(file, "t.safetensors"); });
}

// A fresh path in the system temp directory, removed when the test case ends.
struct temp_file {
  fs::path path;
  explicit temp_file(const std::string& name)
      : path(fs::temp_directory_path() / ("fused_io_test_" + std::to_string(::getpid()) + "_" + name)) {}
  ~temp_file() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

void write_bytes(const fs::path& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

std::vector<std::byte> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

// The Qwen2 weight names and shapes of tiny_a (hidden 128, 4 heads / 2 KV heads of 32, FFN 352,
// vocab 1000, 2 layers, tied).
std::vector<std::pair<std::string, std::vector<std::int64_t>>> tiny_a_weights() {
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> w{{"model.embed_tokens.weight", {1000, 128}},
                                                                   {"model.norm.weight", {128}}};
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    w.insert(w.end(), {{p + "input_layernorm.weight", {128}},
                       {p + "post_attention_layernorm.weight", {128}},
                       {p + "self_attn.q_proj.weight", {128, 128}},
                       {p + "self_attn.q_proj.bias", {128}},
                       {p + "self_attn.k_proj.weight", {64, 128}},
                       {p + "self_attn.k_proj.bias", {64}},
                       {p + "self_attn.v_proj.weight", {64, 128}},
                       {p + "self_attn.v_proj.bias", {64}},
                       {p + "self_attn.o_proj.weight", {128, 128}},
                       {p + "mlp.gate_proj.weight", {352, 128}},
                       {p + "mlp.up_proj.weight", {352, 128}},
                       {p + "mlp.down_proj.weight", {128, 352}}});
  }
  return w;
}

}  // namespace

TEST_CASE("a transformers checkpoint: every Qwen2 weight binds in place, nothing is left over") {
  safetensors_file f = safetensors_file::open(tiny_a / "model.safetensors");
  CHECK(f.metadata().at("format") == "pt");
  CHECK(f.tensors().size() == 26);
  CHECK(std::ranges::is_sorted(f.tensors(), {}, &fused::io::tensor_view::name));
  CHECK(f.find("lm_head.weight") == nullptr);  // tied: transformers stores the embedding once

  const fused::io::tensor_view* embed = f.find("model.embed_tokens.weight");
  REQUIRE(embed != nullptr);
  CHECK(embed->dtype == dtype::BF16);
  CHECK(embed->shape == std::vector<std::int64_t>{1000, 128});
  CHECK(embed->bytes == 256000);
  CHECK(embed->data == f.bytes().data() + f.data_offset());  // in place, first in the data area

  for (const auto& [name, shape] : tiny_a_weights()) {
    const fused::io::tensor_view& t = f.bind(name, dtype::BF16, shape);
    CHECK(reinterpret_cast<std::uintptr_t>(t.data) % 2 == 0);
  }
  CHECK(f.unbound().empty());
  CHECK_NOTHROW(f.require_all_bound());

  // Values read in place equal those read independently (Python struct) from the file.
  const std::vector<float> norm = fused::io::to_f32_owned(f.bind("model.norm.weight", dtype::BF16, {128}));
  CHECK(std::vector<float>(norm.begin(), norm.begin() + 4) ==
        std::vector<float>{1.1015625f, 0.87890625f, 0.95703125f, 0.71484375f});
}

TEST_CASE("bind reports the missing, the misshapen, the mistyped and the unused, by name") {
  const std::string path = (tiny_a / "model.safetensors").string();
  safetensors_file f = safetensors_file::open(path);
  CHECK(load_error_of([&] { f.bind("model.layers.1.mlp.up_proj.weight", dtype::BF16, {896, 128}); }) ==
        path + ": tensor \"model.layers.1.mlp.up_proj.weight\" has shape [352, 128], the model needs [896, 128]");
  CHECK(load_error_of([&] { f.bind("lm_head.weight", dtype::BF16, {1000, 128}); }) ==
        path + ": tensor \"lm_head.weight\" is missing; the model needs it with shape [1000, 128]");
  CHECK(load_error_of([&] { f.bind("model.norm.weight", dtype::F32, {128}); }) ==
        path + ": tensor \"model.norm.weight\" has dtype BF16, the model needs F32");
  CHECK(f.unbound().size() == 26);  // a failed bind binds nothing

  f.bind("model.norm.weight", {128});  // dtype-agnostic bind, for weights that get converted
  std::vector<std::string> unused = f.unbound();
  CHECK(unused.size() == 25);
  CHECK(std::ranges::find(unused, "model.norm.weight") == unused.end());
  CHECK(load_error_of([&] { f.require_all_bound(); }) ==
        path + ": 25 unexpected tensors the model does not use: \"model.embed_tokens.weight\", "
               "\"model.layers.0.input_layernorm.weight\", \"model.layers.0.mlp.down_proj.weight\", "
               "\"model.layers.0.mlp.gate_proj.weight\", \"model.layers.0.mlp.up_proj.weight\", "
               "\"model.layers.0.post_attention_layernorm.weight\", \"model.layers.0.self_attn.k_proj.bias\", "
               "\"model.layers.0.self_attn.k_proj.weight\", \"model.layers.0.self_attn.o_proj.weight\", "
               "\"model.layers.0.self_attn.q_proj.bias\" and 15 more");
}

TEST_CASE("reference.safetensors: token ids (I64) agree with reference.json, logits are F32 [T, V]") {
  safetensors_file f = safetensors_file::open(tiny_a / "reference.safetensors");
  std::ifstream json_in(tiny_a / "reference.json");
  const nlohmann::json ref = fused::json_text::parse(json_in);
  const auto input_ids = fused::io::to_i64_owned(f.bind("input_ids", dtype::I64, {37}));
  CHECK(input_ids == ref.at("input_ids").get<std::vector<std::int64_t>>());
  const auto generated = fused::io::to_i64_owned(f.bind("generated_ids", dtype::I64, {24}));
  CHECK(generated == ref.at("generated_ids").get<std::vector<std::int64_t>>());
  CHECK(f.bind("prefill_logits", dtype::F32, {37, 1000}).bytes == 37 * 1000 * 4);
  CHECK(f.bind("decode_logits", dtype::F32, {24, 1000}).bytes == 24 * 1000 * 4);
  CHECK(f.find("layer1_out") != nullptr);
  CHECK(f.metadata().empty());
}

TEST_CASE("the writer's files round-trip through the reader, header padded like Hugging Face's") {
  const std::vector<float> logits{1.5f, -2.25f, 0.0f, 3e38f, -1e-30f, 7.0f};
  const std::vector<std::uint16_t> weights{0x3F80, 0xBF80, 0x7F80};
  const std::vector<std::int32_t> ids{1, -2, 2147483647};
  const std::vector<std::int64_t> scalar{42};
  temp_file tmp("roundtrip.safetensors");
  fused::io::write_safetensors(tmp.path,
                               {{"prefill_logits", dtype::F32, {2, 3}, std::as_bytes(std::span(logits))},
                                {"w", dtype::BF16, {3}, std::as_bytes(std::span(weights))},
                                {"ids", dtype::I32, {3}, std::as_bytes(std::span(ids))},
                                {"empty", dtype::F32, {0, 5}, {}},
                                {"scalar", dtype::I64, {}, std::as_bytes(std::span(scalar))}},
                               {{"producer", "fused score"}});

  const std::vector<std::byte> raw = read_bytes(tmp.path);
  std::uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, raw.data(), 8);  // the test machine is little-endian, like the format
  CHECK(header_bytes % 8 == 0);
  CHECK(static_cast<char>(raw[8]) == '{');
  CHECK(raw.size() == 8 + header_bytes + 24 + 6 + 12 + 0 + 8);

  safetensors_file f = safetensors_file::open(tmp.path);
  CHECK(f.metadata() == std::map<std::string, std::string>{{"producer", "fused score"}});
  CHECK(fused::io::to_f32_owned(f.bind("prefill_logits", dtype::F32, {2, 3})) == logits);
  CHECK(fused::io::to_bf16_owned(f.bind("w", dtype::BF16, {3})) == weights);
  CHECK(fused::io::to_i64_owned(f.bind("ids", dtype::I32, {3})) == std::vector<std::int64_t>{1, -2, 2147483647});
  CHECK(f.bind("empty", dtype::F32, {0, 5}).bytes == 0);
  CHECK(fused::io::to_i64_owned(f.bind("scalar", dtype::I64, {})) == scalar);
  CHECK(f.unbound().empty());

  // Laid out from offset 0 with no gaps, by decreasing element size (then in the order given), so
  // that the 6-byte BF16 tensor cannot misalign the I32 one after it.
  CHECK(f.find("scalar")->file_offset == f.data_offset());
  CHECK(f.find("prefill_logits")->file_offset == f.data_offset() + 8);
  CHECK(f.find("ids")->file_offset == f.data_offset() + 8 + 24);
  CHECK(f.find("w")->file_offset == f.data_offset() + 8 + 24 + 12);
  for (const fused::io::tensor_view& t : f.tensors())
    CHECK(reinterpret_cast<std::uintptr_t>(t.data) % fused::io::dtype_size(t.dtype) == 0);
}

TEST_CASE("the writer refuses malformed requests") {
  const std::vector<float> three(3);
  using tensors = std::vector<tensor_data>;
  CHECK_THROWS_WITH_AS(fused::io::serialize_safetensors(tensors{{"x", dtype::F32, {2, 2}, std::as_bytes(std::span(three))}}),
                       "write_safetensors: tensor \"x\" has 12 bytes, shape [2, 2] of F32 needs 16",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(fused::io::serialize_safetensors(tensors{{"x", dtype::F32, {3}, std::as_bytes(std::span(three))},
                                                                {"x", dtype::F32, {3}, std::as_bytes(std::span(three))}}),
                       "write_safetensors: tensor name \"x\" is reserved or repeated", std::invalid_argument);
  CHECK_THROWS_AS(fused::io::serialize_safetensors(tensors{{"__metadata__", dtype::F32, {3}, std::as_bytes(std::span(three))}}),
                  std::invalid_argument);
  CHECK_THROWS_AS(fused::io::serialize_safetensors(tensors{{"x", dtype::F32, {-1, -3}, std::as_bytes(std::span(three))}}),
                  std::invalid_argument);
}

TEST_CASE("a file is replaced whole or not at all") {
  temp_file tmp("replaced.bin");
  const std::string old_text = "the old file", new_text = "the new one";
  write_bytes(tmp.path, std::as_bytes(std::span(old_text)));
  const auto entries = [&] {
    std::size_t n = 0;
    for (const auto& e : fs::directory_iterator(tmp.path.parent_path()))
      n += e.path().filename().string().find("replaced.bin") != std::string::npos;
    return n;
  };
  {
    fused::io::pending_file f(tmp.path);
    f.write(std::as_bytes(std::span(new_text)));
    CHECK(read_bytes(tmp.path) == std::vector<std::byte>(std::as_bytes(std::span(old_text)).begin(), std::as_bytes(std::span(old_text)).end()));
    CHECK(entries() == 2);  // the file and its temporary beside it
  }  // not committed: the temporary goes, the old file stays
  CHECK(entries() == 1);
  CHECK(read_bytes(tmp.path).size() == old_text.size());
  fused::io::replace_file(tmp.path, std::as_bytes(std::span(new_text)));
  CHECK(read_bytes(tmp.path).size() == new_text.size());
  CHECK(entries() == 1);
  // A directory cannot be replaced by a file; a device is written in place (it cannot be renamed over).
  CHECK_THROWS_WITH_AS(fused::io::replace_file(tmp.path.parent_path(), std::as_bytes(std::span(new_text))),
                       (tmp.path.parent_path().string() + ": is a directory").c_str(), std::runtime_error);
  fused::io::replace_file("/dev/null", std::as_bytes(std::span(new_text)));
  CHECK(fs::is_character_file("/dev/null"));
  CHECK_THROWS_WITH_AS(fused::io::replace_file("/nonexistent/x.bin", std::as_bytes(std::span(new_text))),
                       "/nonexistent/x.bin: cannot write: No such file or directory", std::runtime_error);
}

TEST_CASE("f32 and f16 convert to bf16 with round-to-nearest-even; NaN stays NaN") {
  const auto bits = [](std::uint32_t u) { return std::bit_cast<float>(u); };
  const std::vector<float> f32{bits(0x3F800000),  // 1.0 -> exact
                               bits(0x3F808000),  // halfway, even below -> down
                               bits(0x3F818000),  // halfway, odd below -> up
                               bits(0x3F808001),  // just above halfway -> up
                               bits(0x3F807FFF),  // just below halfway -> down
                               bits(0x7F7FFFFF),  // max float rounds up to infinity
                               bits(0xFF800000),  // -inf
                               bits(0x7FC00001),  // NaN with low payload: must not become inf
                               bits(0x7F800001),  // signalling NaN: must not become inf
                               bits(0x80000000)};  // -0
  const auto f32_file = fused::io::serialize_safetensors(
      std::vector<tensor_data>{{"f", dtype::F32, {10}, std::as_bytes(std::span(f32))}});
  const safetensors_view v = safetensors_view::parse(f32_file, "f32");
  const std::vector<std::uint16_t> bf16 = fused::io::to_bf16_owned(*v.find("f"));
  CHECK(bf16[0] == 0x3F80);
  CHECK(bf16[1] == 0x3F80);
  CHECK(bf16[2] == 0x3F82);
  CHECK(bf16[3] == 0x3F81);
  CHECK(bf16[4] == 0x3F80);
  CHECK(bf16[5] == 0x7F80);
  CHECK(bf16[6] == 0xFF80);
  CHECK((bf16[7] & 0x7F80) == 0x7F80);
  CHECK((bf16[7] & 0x007F) != 0);
  CHECK((bf16[8] & 0x007F) != 0);
  CHECK(bf16[9] == 0x8000);

  const std::vector<std::uint16_t> f16{0x3C00,   // 1.0
                                       0x0001,   // smallest subnormal, 2^-24
                                       0x7BFF,   // 65504 = 0x477FE000 -> rounds up to 65536
                                       0xFC00,   // -inf
                                       0x3555};  // 0.333251953125 = 0x3EAAA000 -> 0x3EAB
  const auto f16_file = fused::io::serialize_safetensors(
      std::vector<tensor_data>{{"h", dtype::F16, {5}, std::as_bytes(std::span(f16))}});
  const safetensors_view h = safetensors_view::parse(f16_file, "f16");
  CHECK(fused::io::to_bf16_owned(*h.find("h")) == std::vector<std::uint16_t>{0x3F80, 0x3380, 0x4780, 0xFF80, 0x3EAB});
  CHECK(fused::io::to_f32_owned(*h.find("h")) ==
        std::vector<float>{1.0f, 0x1p-24f, 65504.0f, -std::numeric_limits<float>::infinity(), 0.333251953125f});

  const std::vector<std::int32_t> ints{1};
  const auto int_file = fused::io::serialize_safetensors(
      std::vector<tensor_data>{{"i", dtype::I32, {1}, std::as_bytes(std::span(ints))}});
  CHECK(load_error_of([&] { fused::io::to_bf16_owned(*safetensors_view::parse(int_file, "i").find("i")); }) ==
        "tensor \"i\" has dtype I32; only BF16, F16 and F32 convert to BF16");
}

TEST_CASE("files that are not safetensors, or lie about their size") {
  CHECK(parse_error(std::vector<std::byte>(5)) ==
        "t.safetensors: file is 5 bytes, shorter than the 8-byte header length of a safetensors file");

  std::vector<std::byte> huge = craft("{}");
  huge[5] = std::byte{1};  // header length 2^40 + 2
  CHECK(parse_error(huge) ==
        "t.safetensors: header length 1099511627778 exceeds the 100000000-byte limit (not a safetensors file, or corrupt)");

  std::vector<std::byte> cut = craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4);
  cut.resize(40);  // the header itself is cut off
  CHECK(parse_error(cut) == "t.safetensors: header length 54 exceeds the 32 bytes that follow it (truncated file?)");

  const std::string not_json = parse_error(craft("{\"a\": nope}"));
  CHECK(not_json.starts_with("t.safetensors: header is not valid JSON: "));
  CHECK(parse_error(craft("[1, 2]")) == "t.safetensors: header is not a JSON object");
  CHECK(parse_error(craft("{\"x\":[[[[1]]]]}")) ==
        "t.safetensors: header nests deeper than a safetensors header can");
  CHECK(parse_error(craft(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"a":{}})")) ==
        "t.safetensors: header lists tensor \"a\" twice");
  CHECK(parse_error(craft(R"({"__metadata__":{"format":1}})")) ==
        "t.safetensors: \"__metadata__\" entry \"format\" is not a string");
  // nlohmann::json stops at a NUL: a header padded with NULs, or with anything hidden after one,
  // would parse. The reference loader refuses both.
  const std::string nul_message =
      "t.safetensors: the header holds a NUL byte at file offset 10; a header is JSON, padded with spaces (the reference "
      "loader refuses this file too)";
  CHECK(parse_error(craft(std::string("{}") + std::string(6, '\0'))) == nul_message);
  CHECK(parse_error(craft(std::string("{}\0{\"a\":1}   ", 13))) == nul_message);
}

TEST_CASE("each tensor entry is checked: dtype, shape, offsets, bytes, bounds, overlap") {
  const auto entry_error = [](const std::string& entry, std::size_t data_bytes = 64) {
    return parse_error(craft("{\"t\":" + entry + "}", data_bytes));
  };
  CHECK(entry_error("[1]") == "t.safetensors: tensor \"t\": entry is not a JSON object");
  CHECK(entry_error(R"({"dtype":"F17","shape":[1],"data_offsets":[0,4]})") ==
        "t.safetensors: tensor \"t\": unknown dtype \"F17\"");
  CHECK(entry_error(R"({"shape":[1],"data_offsets":[0,4]})") ==
        "t.safetensors: tensor \"t\": \"dtype\" is missing or not a string");
  CHECK(entry_error(R"({"dtype":"F32","shape":3,"data_offsets":[0,4]})") ==
        "t.safetensors: tensor \"t\": \"shape\" is missing or not a list");
  CHECK(entry_error(R"({"dtype":"F32","shape":[2,-1],"data_offsets":[0,4]})") ==
        "t.safetensors: tensor \"t\": shape [2,-1] holds -1, not a non-negative 64-bit integer");
  CHECK(entry_error(R"({"dtype":"F32","shape":[1.5],"data_offsets":[0,4]})") ==
        "t.safetensors: tensor \"t\": shape [1.5] holds 1.5, not a non-negative 64-bit integer");
  CHECK(entry_error(R"({"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,4]})") ==
        "t.safetensors: tensor \"t\": shape [9223372036854775808] holds 9223372036854775808, not a non-negative "
        "64-bit integer");
  CHECK(entry_error(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]})") ==
        "t.safetensors: tensor \"t\": shape [4294967296, 4294967296] of F32 holds more bytes than 2^64");
  CHECK(entry_error(R"({"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,4]})") ==
        "t.safetensors: tensor \"t\": shape [4611686018427387904] of F64 holds more bytes than 2^64");
  CHECK(entry_error(R"({"dtype":"F32","shape":[2],"data_offsets":[0]})") ==
        "t.safetensors: tensor \"t\": \"data_offsets\" is missing or not a list [begin, end]");
  CHECK(entry_error(R"({"dtype":"F32","shape":[2],"data_offsets":[-8,0]})") ==
        "t.safetensors: tensor \"t\": data_offsets [-8,0] are not non-negative integers");
  CHECK(entry_error(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})") ==
        "t.safetensors: tensor \"t\": data_offsets [8, 0] end before they begin");
  CHECK(entry_error(R"({"dtype":"F32","shape":[3,2],"data_offsets":[0,16]})") ==
        "t.safetensors: tensor \"t\": data_offsets [0, 16] span 16 bytes, but shape [3, 2] of F32 needs 24");
  CHECK(entry_error(R"({"dtype":"F32","shape":[4],"data_offsets":[56,72]})") ==
        "t.safetensors: tensor \"t\": data_offsets [56, 72] reach past the data area of 64 bytes");
  // Near 2^64, begin + bytes would wrap: the span check must not.
  CHECK(entry_error(R"({"dtype":"U8","shape":[16],"data_offsets":[18446744073709551600,18446744073709551615]})") ==
        "t.safetensors: tensor \"t\": data_offsets [18446744073709551600, 18446744073709551615] span 15 bytes, but "
        "shape [16] of U8 needs 16");
  // A zero dimension makes any shape empty, even one whose other dimensions overflow.
  CHECK(entry_error(R"({"dtype":"F32","shape":[4294967296,4294967296,0],"data_offsets":[0,0]})", 0) == "no error");

  const std::string overlap = R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                              R"("b":{"dtype":"F32","shape":[4],"data_offsets":[16,32]},)"
                              R"("c":{"dtype":"F32","shape":[2],"data_offsets":[28,36]},)"
                              R"("empty":{"dtype":"F32","shape":[0],"data_offsets":[8,8]}})";
  CHECK(parse_error(craft(overlap, 64)) ==
        "t.safetensors: tensor \"c\": data_offsets [28, 36] overlap those of tensor \"b\" [16, 32]");
  const std::string inside = R"({"a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  CHECK(parse_error(craft(inside, 64)) ==
        "t.safetensors: tensor \"b\": data_offsets [4, 12] overlap those of tensor \"a\" [0, 32]");
}

TEST_CASE("the tensors fill the data area in order: no gap, no byte past the last one") {
  // The reference loader refuses both, and a header length a few bytes short (the header padded
  // with spaces, so its JSON still parses) shifts every tensor: only the data area's size shows it.
  const std::string two = R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                          R"("b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]},)"
                          R"("empty":{"dtype":"F32","shape":[0],"data_offsets":[24,24]}})";
  CHECK(parse_error(craft(two, 24)) == "no error");
  CHECK(parse_error(craft(two, 26)) ==
        "t.safetensors: the data area holds 26 bytes, but the tensors end at byte 24: 2 bytes past the last tensor (a "
        "header length that is off, or bytes appended; the reference loader refuses this file too)");
  CHECK(parse_error(craft("{}", 8)) ==
        "t.safetensors: the data area holds 8 bytes, but the tensors end at byte 0: 8 bytes past the last tensor (a "
        "header length that is off, or bytes appended; the reference loader refuses this file too)");
  const std::string gap = R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                          R"("b":{"dtype":"F32","shape":[2],"data_offsets":[20,28]}})";
  CHECK(parse_error(craft(gap, 28)) ==
        "t.safetensors: tensor \"b\": data_offsets [20, 28] leave 4 bytes unused before it (after tensor \"a\" [0, 16]); "
        "the tensors must fill the data area in order (the reference loader refuses this file too)");
  CHECK(parse_error(craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", 12)) ==
        "t.safetensors: tensor \"a\": data_offsets [8, 12] leave 8 bytes unused before it (at the data area's start); "
        "the tensors must fill the data area in order (the reference loader refuses this file too)");

  // A real checkpoint whose header length is 2 short: its JSON, padded with spaces, still parses.
  const std::vector<std::byte> model = read_bytes(tiny_a / "model.safetensors");
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(model[static_cast<std::size_t>(i)]) << (8 * i);
  std::vector<std::byte> shifted(model.begin(), model.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  shifted.insert(shifted.end(), 8, std::byte{' '});
  shifted.insert(shifted.end(), model.begin() + 8 + static_cast<std::ptrdiff_t>(n), model.end());
  const std::uint64_t short_n = n + 8 - 2;
  for (int i = 0; i < 8; ++i) shifted[static_cast<std::size_t>(i)] = static_cast<std::byte>((short_n >> (8 * i)) & 0xFF);
  CHECK(parse_error(shifted).ends_with(": 2 bytes past the last tensor (a header length that is off, or bytes appended; "
                                       "the reference loader refuses this file too)"));
}

TEST_CASE("a tensor not aligned to its element size is refused for in-place use, and still converts") {
  // A header of odd length puts the data area at an odd address: legal in the format, but a
  // kernel reading uint16_t from it would be undefined behaviour.
  std::vector<std::byte> file = craft(R"({"w":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})", 4);
  REQUIRE((file.size() - 4) % 2 == 1);
  const std::uint16_t values[2] = {0x3F80, 0x4000};
  std::memcpy(file.data() + file.size() - 4, values, 4);
  temp_file tmp("odd.safetensors");
  write_bytes(tmp.path, file);
  safetensors_file f = safetensors_file::open(tmp.path);
  CHECK(load_error_of([&] { f.bind("w", dtype::BF16, {2}); }) ==
        tmp.path.string() +
            ": tensor \"w\" (BF16) starts at file offset 63, which is not a multiple of its element size 2; it "
            "cannot be used in place");
  CHECK(fused::io::to_bf16_owned(f.bind("w", {2})) == std::vector<std::uint16_t>{0x3F80, 0x4000});
}

TEST_CASE("opening: missing, empty, directory, truncated checkpoint") {
  const fs::path missing = test_data / "no_such.safetensors";
  CHECK(load_error_of([&] { safetensors_file::open(missing); }) == missing.string() + ": cannot open: No such file or directory");
  CHECK(load_error_of([&] { safetensors_file::open(test_data); }) == test_data.string() + ": not a regular file");

  temp_file empty("empty.safetensors");
  write_bytes(empty.path, {});
  CHECK(load_error_of([&] { safetensors_file::open(empty.path); }) ==
        empty.path.string() + ": file is 0 bytes, shorter than the 8-byte header length of a safetensors file");

  // A download cut short: the header is intact, the first tensor (by name) past the end is named.
  std::vector<std::byte> model = read_bytes(tiny_a / "model.safetensors");
  model.resize(100000);
  temp_file cut("cut.safetensors");
  write_bytes(cut.path, model);
  CHECK(load_error_of([&] { safetensors_file::open(cut.path); }) ==
        cut.path.string() + ": tensor \"model.embed_tokens.weight\": data_offsets [0, 256000] reach past the data "
                            "area of 97288 bytes");
}

TEST_CASE("safetensors_file is movable; views stay valid across moves") {
  safetensors_file a = safetensors_file::open(tiny_a / "model.safetensors");
  const std::byte* data = a.find("model.norm.weight")->data;
  safetensors_file b = std::move(a);
  CHECK(b.find("model.norm.weight")->data == data);
  safetensors_file c = safetensors_file::open(test_data / "reference" / "tiny_mha" / "model.safetensors");
  c = std::move(b);  // c's old mapping is released, b's is adopted
  CHECK(c.find("model.norm.weight")->data == data);
  CHECK(fused::io::to_f32_owned(*c.find("model.norm.weight"))[0] == 1.1015625f);
  static_assert(!std::is_copy_constructible_v<safetensors_file>);
  static_assert(std::is_nothrow_move_constructible_v<fused::io::mapped_file>);
}
