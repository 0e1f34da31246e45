// The tokenizer.json loader on hostile files: a few bytes must not make it allocate in proportion
// to an id they name, nest the parser without bound, or fail with anything but io::load_error.
// largest_allocation.cpp replaces operator new in this executable to record the largest single
// allocation, so "does not allocate big" is measured, not assumed.
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include <fused/core/json_text.hpp>

#include <fused/io/tokenizer.hpp>

#include "largest_allocation.hpp"

using fused::io::load_error;
using fused::io::tokenizer;
using nlohmann::json;

namespace {
// 256 byte tokens, "ab" = 256, the added token "<|end|>" = 257.
json minimal() {
  json vocab = json::object();
  for (unsigned b = 0; b < 256; ++b) vocab[fused::io::tokenization::byte_level_char(static_cast<unsigned char>(b))] = b;
  vocab["ab"] = 256;
  return {
      {"added_tokens", json::array({{{"id", 257}, {"content", "<|end|>"}, {"special", true}, {"normalized", false}}})},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({"a b"})}}},
  };
}

// The message of the load_error that loading `text` throws; a test fails on any other outcome.
std::string error_of(const std::string& text) {
  try {
    (void)tokenizer::from_json(text, "t.json");
  } catch (const load_error& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("not a load_error: " << e.what());
  }
  return "(loaded)";
}
}  // namespace

TEST_CASE("a small file with a huge token id is refused before any big allocation") {
  for (const std::int64_t id : {std::int64_t{1} << 20, tokenizer::max_token_id}) {
    CAPTURE(id);
    json j = minimal();
    j["model"]["vocab"]["ab"] = id;
    const std::string text = fused::json_text::dump(j);
    REQUIRE(text.size() < 8192);
    fused_test_reset_largest_allocation();
    CHECK(error_of(text).find("t.json: model.vocab[\"ab\"]: id " + std::to_string(id) + " leaves most of the id space empty") == 0);
    CHECK(fused_test_largest_allocation() < 256 * 1024);  // a dense table of `id` strings would be 32 bytes per id
  }
  // The same through an added token: the field named is the added token's id.
  json j = minimal();
  j["added_tokens"][0]["id"] = 5'000'000;
  CHECK(error_of(fused::json_text::dump(j)).find("t.json: added_tokens[0].id: id 5000000 leaves most of the id space empty") == 0);
}

TEST_CASE("gaps in the id space are fine while most ids are present") {
  json j = minimal();
  j["added_tokens"][0]["id"] = 258 + 1000;  // below 2 * 258 + id_slack
  const tokenizer t = tokenizer::from_json(fused::json_text::dump(j));
  CHECK(t.vocab_size() == 1259);
  CHECK(t.token(1258) == "<|end|>");
  CHECK(t.token(1000).empty());
  CHECK(t.encode("ab<|end|>") == std::vector<std::int32_t>{256, 1258});
}

TEST_CASE("deeply nested JSON is refused before parsing, with the limit named") {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  CHECK(error_of(deep) == "t.json: JSON nests deeper than 64 levels (at byte 64)");
  const std::string objects = [] {
    std::string s;
    for (int i = 0; i < 1000; ++i) s += "{\"a\":";
    return s + "1" + std::string(1000, '}');
  }();
  CHECK(error_of(objects).find("t.json: JSON nests deeper than 64 levels") == 0);
  // Brackets inside strings do not count, so a real file with such tokens still loads.
  json j = minimal();
  j["model"]["vocab"][std::string(200, '[')] = 258;
  j["model"]["vocab"]["\\\"[[["] = 259;
  CHECK(error_of(fused::json_text::dump(j)) == "(loaded)");
  // Nesting just inside the limit reaches the parser (and then the field checks).
  json nested = minimal();
  json v = 1;
  for (int i = 0; i < 55; ++i) v = json::array({v});
  nested["unused"] = v;
  CHECK(error_of(fused::json_text::dump(nested)) == "(loaded)");
}

TEST_CASE("every malformed file is an io::load_error naming the file") {
  const auto with = [](auto edit) {
    json j = minimal();
    edit(j);
    return fused::json_text::dump(j);
  };
  const std::string cases[] = {
      "",
      "{\"model\": ",
      "[1, 2",
      "\"just a string\"",
      with([](json& j) { j["model"]["vocab"]["ab"] = -1; }),
      with([](json& j) { j["model"]["vocab"]["ab"] = 1e30; }),
      with([](json& j) { j["model"]["vocab"]["ab"] = std::uint64_t{1} << 63; }),
      with([](json& j) { j["model"]["merges"] = {"a q"}; }),
      with([](json& j) { j["model"]["vocab"].erase("a"); }),
      with([](json& j) { j["added_tokens"] = json::object(); }),
      with([](json& j) {
        j["pre_tokenizer"] = {{"type", "Sequence"},
                              {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", "(?<"}}}, {"behavior", "Isolated"}}, {{"type", "ByteLevel"}}}}};
      }),
      with([](json& j) { j["normalizer"] = {{"type", 7}}; }),
  };
  for (const std::string& text : cases) {
    CAPTURE(text.substr(0, 200));
    const std::string e = error_of(text);
    CHECK(e != "(loaded)");
    CHECK(e.rfind("t.json: ", 0) == 0);
  }
  CHECK_THROWS_AS((void)tokenizer::from_file("/nonexistent/tokenizer.json"), load_error);
}
