// The tokenizer against Hugging Face `tokenizers`: reference encodings, the demo model's prompts,
// the public API and the loader's errors.
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include <fused/core/json_text.hpp>

#include "fixtures.hpp"

using fused::io::tokenizer;
using fused_test::kjv;
using fused_test::qwen2;

namespace {
nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), path);
  return fused::json_text::parse(in);
}
}  // namespace

TEST_CASE("Qwen2: reference encodings from Hugging Face tokenizers, ids, tokens and decode") {
  std::ifstream in(std::string(FUSED_TEST_DATA) + "/tokenizer/qwen2/reference_encodings.jsonl");
  REQUIRE(in.good());
  int lines = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto r = fused::json_text::parse(line);
    const auto text = r.at("text").get<std::string>();
    const auto want = r.at("ids").get<std::vector<std::int32_t>>();
    CAPTURE(text);
    const std::vector<std::int32_t> got = qwen2().encode(text);
    CHECK(got == want);
    const auto tokens = r.at("tokens").get<std::vector<std::string>>();
    REQUIRE(tokens.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(qwen2().token(want[i]) == tokens[i]);
    CHECK(qwen2().decode(want) == r.at("decoded").get<std::string>());
    ++lines;
  }
  CHECK(lines == 18);
}

TEST_CASE("kjv-qwen2-4m: the prompt ids of samples.json") {
  const auto samples = read_json(std::string(FUSED_SOURCE_DIR) + "/examples/models/kjv-qwen2-4m/samples.json");
  int n = 0;
  for (const auto& s : samples.at("samples")) {
    const auto prompt = s.at("prompt").get<std::string>();
    CAPTURE(prompt);
    const auto want = s.at("prompt_ids").get<std::vector<std::int32_t>>();
    CHECK(kjv().encode(prompt) == want);
    CHECK(kjv().decode(want) == prompt);
    ++n;
  }
  CHECK(n == 5);
  CHECK(kjv().token_id("<|endoftext|>") == 4093);
  CHECK(kjv().token_id("<|im_start|>") == 4094);
  CHECK(kjv().token_id("<|im_end|>") == 4095);
  CHECK(kjv().vocab_size() == 4096);
}

TEST_CASE("token_id, token, vocab_size") {
  const tokenizer& t = qwen2();
  CHECK(t.token_id("<|endoftext|>") == 151643);
  CHECK(t.token_id("<|im_start|>") == 151644);
  CHECK(t.token_id("<|im_end|>") == 151645);
  CHECK(t.token_id("Ġworld") == 1879);
  CHECK(t.token_id("no such token, surely") == -1);
  CHECK(t.token(1879) == "Ġworld");
  CHECK(t.token(151644) == "<|im_start|>");
  CHECK(t.token(-1).empty());
  CHECK(t.token(151669).empty());
  CHECK(t.vocab_size() == 151669);  // 151643 BPE tokens + 26 added tokens (Qwen3's set)
}

TEST_CASE("special tokens: matched inside text, or treated as text when not allowed") {
  const tokenizer& t = qwen2();
  const std::string text = "a<|im_end|>b<|endoftext|>";
  const auto ids = t.encode(text);
  REQUIRE(ids.size() == 4);
  CHECK(ids[1] == 151645);
  CHECK(ids[3] == 151643);
  CHECK(t.decode(ids) == text);

  const auto plain = t.encode(text, /*allow_special=*/false);
  CHECK(plain.size() > 4);
  for (const auto id : plain) CHECK(id < 151643);
  CHECK(t.decode(plain) == text);

  // Adjacent, and at both ends, with no text between them.
  CHECK(t.encode("<|im_start|><|im_end|>") == std::vector<std::int32_t>{151644, 151645});
  // A near miss is ordinary text.
  CHECK(t.encode("<|im_start|").size() > 1);
}

TEST_CASE("decode: unknown ids are skipped, cut characters become U+FFFD") {
  const tokenizer& t = qwen2();
  const std::vector<std::int32_t> ids{9707, -5, 11, 999999999, 1879};
  CHECK(t.decode(ids) == "Hello, world");
  CHECK(t.decode_one(-1).empty());
  // "你" is E4 BD A0; the single-byte tokens for E4 and BD without A0 are an incomplete character.
  const auto e4 = t.token_id(fused::io::tokenization::byte_level_char(0xE4));
  const auto bd = t.token_id(fused::io::tokenization::byte_level_char(0xBD));
  REQUIRE(e4 >= 0);
  REQUIRE(bd >= 0);
  CHECK(t.decode(std::vector<std::int32_t>{e4, bd}) == "\xEF\xBF\xBD");
  CHECK(t.decode(std::vector<std::int32_t>{e4, bd, 9707}) == "\xEF\xBF\xBDHello");
}

TEST_CASE("stream_decoder: prints whole characters only, and adds up to decode()") {
  const tokenizer& t = qwen2();
  const std::string text = "Emoji 👩‍👩‍👧 and 中文 and e\xCC\x81 and Ελληνικά";
  // Byte by byte: the worst case for a streaming printer.
  std::vector<std::int32_t> ids;
  for (const char c : text) ids.push_back(t.token_id(fused::io::tokenization::byte_level_char(static_cast<unsigned char>(c))));
  tokenizer::stream_decoder s(t);
  std::string out;
  for (const auto id : ids) {
    const std::string piece = s.push(id);
    CHECK(fused::io::tokenization::is_valid_utf8(piece));
    out += piece;
  }
  out += s.finish();
  CHECK(out == text);

  // Cut short in the middle of a character: finish() reports it as U+FFFD, as decode() does.
  tokenizer::stream_decoder cut(t);
  std::string partial;
  for (std::size_t i = 0; i + 1 < 8; ++i) partial += cut.push(ids[i]);  // "Emoji " + 2 bytes of the emoji
  CHECK(partial == "Emoji ");
  partial += cut.finish();
  CHECK(partial == t.decode(std::span(ids).first(8)));
  CHECK(partial == "Emoji \xEF\xBF\xBD");

  // With real tokens.
  const auto real = t.encode(text);
  tokenizer::stream_decoder s2(t);
  std::string out2;
  for (const auto id : real) out2 += s2.push(id);
  out2 += s2.finish();
  CHECK(out2 == t.decode(real));
}

namespace {
// A minimal valid byte-level tokenizer.json, edited by each error case below.
nlohmann::json minimal() {
  nlohmann::json vocab = nlohmann::json::object();
  for (unsigned b = 0; b < 256; ++b) vocab[fused::io::tokenization::byte_level_char(static_cast<unsigned char>(b))] = b;
  vocab["ab"] = 256;
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", nlohmann::json::array({{{"id", 257}, {"content", "<|end|>"}, {"special", true}, {"normalized", false}}})},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array({"a b"})}}},
  };
}

std::string load_error(const nlohmann::json& j) {
  try {
    (void)tokenizer::from_json(fused::json_text::dump(j), "t.json");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(loaded)";
}
}  // namespace

TEST_CASE("a minimal tokenizer.json: GPT-2 style ByteLevel with its own regex") {
  const auto t = tokenizer::from_json(fused::json_text::dump(minimal()));
  CHECK(t.encode("ab ab<|end|>") == std::vector<std::int32_t>{256, ' ', 256, 257});
  CHECK(t.vocab_size() == 258);
  auto j = minimal();
  j["model"]["merges"] = nlohmann::json::array({nlohmann::json::array({"a", "b"})});  // the array form
  CHECK(tokenizer::from_json(fused::json_text::dump(j)).encode("xab") == std::vector<std::int32_t>{'x', 256});
}

TEST_CASE("loader errors name the file and the field") {
  CHECK(load_error(minimal()) == "(loaded)");
  const auto with = [](auto edit) {
    auto j = minimal();
    edit(j);
    return load_error(j);
  };
  using nlohmann::json;
  CHECK(load_error(json::array()) == "t.json: (top level): must be a JSON object");
  CHECK(with([](json& j) { j["model"]["type"] = "WordPiece"; }) == "t.json: model.type: 'WordPiece' is not supported (only BPE)");
  CHECK(with([](json& j) { j["model"].erase("vocab"); }) == "t.json: model: missing field 'vocab'");
  CHECK(with([](json& j) { j["model"]["vocab"]["ab"] = -3; }) == "t.json: model.vocab[\"ab\"]: id is outside [0, 16777215]");
  CHECK(with([](json& j) { j["model"]["vocab"]["ab"] = "x"; }) == "t.json: model.vocab[\"ab\"]: must be an integer id");
  CHECK(with([](json& j) { j["model"]["merges"] = {"a  b"}; }) == "t.json: model.merges[0]: 'a  b' is not two tokens separated by one space");
  CHECK(with([](json& j) { j["model"]["merges"] = {"a c"}; }) == "t.json: model.merges[0]: 'a' + 'c': ac is not in model.vocab");
  // json::array around it: `= {json::array({"a"})}` is [["a"]] with g++ but ["a"] with clang (a braced list
  // of one json may copy it instead of wrapping it)
  CHECK(with([](json& j) { j["model"]["merges"] = json::array({json::array({"a"})}); }) == "t.json: model.merges[0]: must be \"a b\" or [\"a\", \"b\"]");
  CHECK(with([](json& j) { j["model"]["dropout"] = 0.1; }) == "t.json: model.dropout: BPE dropout is not supported (set it to null)");
  CHECK(with([](json& j) { j["model"]["continuing_subword_prefix"] = "##"; }).find("model.continuing_subword_prefix") != std::string::npos);
  CHECK(with([](json& j) { j["model"]["vocab"].erase("Ġ"); }).find("t.json: model.vocab: has no token for byte 0x20") == 0);
  CHECK(with([](json& j) { j["normalizer"] = {{"type", "Lowercase"}}; }).find("t.json: normalizer.type: 'Lowercase' is not supported") == 0);
  CHECK(with([](json& j) { j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Strip"}}}}}; })
            .find("t.json: normalizer.normalizers[1].type: 'Strip'") == 0);
  CHECK(with([](json& j) { j["pre_tokenizer"]["add_prefix_space"] = true; }) == "t.json: pre_tokenizer.add_prefix_space: true is not supported");
  CHECK(with([](json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; }).find("t.json: pre_tokenizer.type: 'Whitespace'") == 0);
  CHECK(with([](json& j) {
          j["pre_tokenizer"] = {{"type", "Sequence"},
                                {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", "(a"}}}, {"behavior", "Isolated"}}, {{"type", "ByteLevel"}}}}};
        }).find("t.json: pre_tokenizer.pretokenizers[0].pattern: regex does not compile") == 0);
  CHECK(with([](json& j) {
          j["pre_tokenizer"] = {{"type", "Sequence"},
                                {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Removed"}}, {{"type", "ByteLevel"}}}}};
        }) == "t.json: pre_tokenizer.pretokenizers[0].behavior: only \"Isolated\" is supported");
  CHECK(with([](json& j) { j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", json::array()}}; })
            .find("t.json: pre_tokenizer: needs a ByteLevel step last") == 0);
  CHECK(with([](json& j) { j["decoder"] = {{"type", "WordPiece"}}; }).find("t.json: decoder.type: 'WordPiece' is not supported") == 0);
  // The decoder is judged before the pre-tokenizer: a Metaspace one is named, not the pre-tokenizer
  // it would go with; a Sequence of ByteLevel alone is ByteLevel.
  CHECK(with([](json& j) {
          j["decoder"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}};
          j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}};
        }).find("t.json: decoder.type: 'Metaspace' is not supported") == 0);
  CHECK(with([](json& j) { j["decoder"] = {{"type", "Sequence"}, {"decoders", {{{"type", "ByteLevel"}}}}}; }) == "(loaded)");
  CHECK(with([](json& j) { j["post_processor"] = {{"type", "BertProcessing"}}; }).find("t.json: post_processor.type: 'BertProcessing'") == 0);
  CHECK(with([](json& j) {
          j["post_processor"] = {{"type", "Sequence"}, {"processors", {{{"type", "ByteLevel"}}, {{"type", "RobertaProcessing"}}}}};
        }).find("t.json: post_processor.processors[1].type: 'RobertaProcessing'") == 0);
  CHECK(with([](json& j) { j["truncation"] = {{"max_length", 8}}; }).find("t.json: truncation:") == 0);
  CHECK(with([](json& j) { j["added_tokens"][0]["lstrip"] = true; }) == "t.json: added_tokens[0].lstrip: true is not supported");
  CHECK(with([](json& j) { j["added_tokens"][0]["content"] = ""; }) == "t.json: added_tokens[0].content: must not be empty");
  CHECK(with([](json& j) { j["added_tokens"][0].erase("id"); }) == "t.json: added_tokens[0]: missing field 'id'");
  // One id, one token: two would encode apart and decode alike (an id's added token may repeat the
  // vocabulary's, and a token may be listed twice).
  CHECK(with([](json& j) { j["model"]["vocab"]["ab"] = 97; }) ==
        "t.json: model.vocab[\"ab\"]: id 97 is also the id of model.vocab[\"a\"]; each token needs its own id");
  CHECK(with([](json& j) { j["added_tokens"].push_back({{"id", 257}, {"content", "<|other|>"}}); }) ==
        "t.json: added_tokens[1].id: id 257 is also the id of added_tokens[0] (\"<|end|>\"); each token needs its own id");
  CHECK(with([](json& j) { j["added_tokens"].push_back({{"id", 258}, {"content", "<|end|>"}}); }) ==
        "t.json: added_tokens[1].content: \"<|end|>\" is already added_tokens[0] with id 257; a token has one id");
  CHECK(with([](json& j) { j["added_tokens"].push_back(j["added_tokens"][0]); }) == "(loaded)");
  CHECK(with([](json& j) { j["added_tokens"].push_back({{"id", 256}, {"content", "ab"}}); }) == "(loaded)");
  CHECK(load_error(fused::json_text::parse("{}")) == "t.json: (top level): missing field 'decoder'");
  {  // A regex that backtracks without bound loads, and gives up on some text: named where it failed.
    auto j = minimal();
    j["pre_tokenizer"] = {{"type", "Sequence"},
                          {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", "(a+)+$"}}}, {"behavior", "Isolated"}}, {{"type", "ByteLevel"}}}}};
    const tokenizer t = tokenizer::from_json(fused::json_text::dump(j), "t.json");
    CHECK(t.encode("ab") == std::vector<std::int32_t>{256});
    try {
      (void)t.encode(std::string(40, 'a') + "b");
      FAIL("expected an exception");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()).starts_with("t.json: pre_tokenizer.pretokenizers[0].pattern: the regex gave up on this text ("));
    }
  }

  try {
    (void)tokenizer::from_json("{\"model\": ", "bad.json");
    FAIL("expected an exception");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("bad.json: not valid JSON") == 0);
  }
  try {
    (void)tokenizer::from_file("/nonexistent/tokenizer.json");
    FAIL("expected an exception");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "/nonexistent/tokenizer.json: cannot open: No such file or directory");
  }
}

TEST_CASE("encode is safe from several threads at once, and gives the same ids") {
  const tokenizer& t = qwen2();
  std::string text;
  for (int i = 0; i < 200; ++i) text += "Line " + std::to_string(i) + ": In the beginning 你好 DON'T stop\n";
  const auto want = t.encode(text);
  std::vector<std::vector<std::int32_t>> got(4);
  {
    std::vector<std::jthread> threads;
    for (auto& g : got) threads.emplace_back([&t, &text, &g] { for (int k = 0; k < 3; ++k) g = t.encode(text); });
  }
  for (const auto& g : got) CHECK(g == want);
  // Alternating tokenizers on one thread: each finds its own cached words, not the other's.
  CHECK(kjv().encode("In the beginning") == std::vector<std::int32_t>{40, 77, 258, 2185});
  CHECK(t.encode("In the beginning") == std::vector<std::int32_t>{641, 279, 7167});
  CHECK(kjv().encode("In the beginning") == std::vector<std::int32_t>{40, 77, 258, 2185});
}

TEST_CASE("added tokens with \"normalized\": true are matched after normalization, in normalized form") {
  auto j = minimal();
  // Written decomposed (e + U+0301); the text is NFC-normalized before this token is looked for.
  j["added_tokens"].push_back({{"id", 258}, {"content", "e\xCC\x81x"}, {"special", false}, {"normalized", true}});
  const auto t = tokenizer::from_json(fused::json_text::dump(j));
  CHECK(t.encode("a\xC3\xA9x") == std::vector<std::int32_t>{'a', 258});   // composed input
  CHECK(t.encode("ae\xCC\x81x") == std::vector<std::int32_t>{'a', 258});   // decomposed input
  CHECK(t.encode("ae\xCC\x81x", /*allow_special=*/false) == std::vector<std::int32_t>{'a', 258});  // not special
  CHECK(t.decode(std::vector<std::int32_t>{258}) == "e\xCC\x81x");
}
