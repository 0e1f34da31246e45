// SentencePiece-style BPE (Llama 2, Mistral, TinyLlama): characters with "▁" for a space, byte
// fallback, and the decoder Sequence [Replace, ByteFallback, Fuse, Strip]. The small tokenizers in
// tests/data/tokenizer/sentencepiece_tiny (made by make_sentencepiece_tiny.py) are checked against
// encodings from @lenml/tokenizers (lenml_reference.cjs).
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <fused/core/json_text.hpp>

#include <fused/io/tokenizer.hpp>

using fused::io::tokenizer;
using json = nlohmann::json;

namespace {

const std::string sp_dir = std::string(FUSED_TEST_DATA) + "/tokenizer/sentencepiece_tiny";

json read_sp_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), path);
  return fused::json_text::parse(in);
}

std::string stream_decode(const tokenizer& tok, const std::vector<std::int32_t>& ids) {
  tokenizer::stream_decoder s(tok);
  std::string out;
  for (const std::int32_t id : ids) out += s.push(id);
  return out + s.finish();
}

// Every line of a reference file: ids, tokens, decode, and the stream decode adding up to it.
int check_sentencepiece_reference(const tokenizer& tok, const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), path);
  int lines = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto r = fused::json_text::parse(line);
    const auto text = r.at("text").get<std::string>();
    const auto want = r.at("ids").get<std::vector<std::int32_t>>();
    CAPTURE(text);
    CHECK(tok.encode(text) == want);
    const auto tokens = r.at("tokens").get<std::vector<std::string>>();
    REQUIRE(tokens.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(tok.token(want[i]) == tokens[i]);
    const auto decoded = r.at("decoded").get<std::string>();
    CHECK(tok.decode(want) == decoded);
    CHECK(stream_decode(tok, want) == decoded);
    ++lines;
  }
  return lines;
}

// The message of loading the Llama 2 style file after `edit`.
std::string load_error(const std::function<void(json&)>& edit) {
  json j = read_sp_json(sp_dir + "/tokenizer.json");
  edit(j);
  try {
    (void)tokenizer::from_json(fused::json_text::dump(j), "sp.json");
  } catch (const fused::io::load_error& e) {
    return e.what();
  }
  return "(loaded)";
}

}  // namespace

TEST_CASE("SentencePiece-style BPE, Llama 2 form (Prepend + Replace): reference encodings from @lenml/tokenizers") {
  const auto tok = tokenizer::from_file(sp_dir + "/tokenizer.json");
  CHECK(check_sentencepiece_reference(tok, sp_dir + "/reference_tokenizer.jsonl") == 31);
  CHECK(tok.token_id("<0x0A>") == 13);
  CHECK(tok.decode_one(tok.token_id("<0x0A>")) == "\n");
  CHECK(tok.decode_one(tok.token_id("▁the")) == " the");
}

TEST_CASE("SentencePiece-style BPE, Mistral form (Metaspace, prepend_scheme first): reference encodings from @lenml/tokenizers") {
  const auto tok = tokenizer::from_file(sp_dir + "/tokenizer_metaspace.json");
  CHECK(check_sentencepiece_reference(tok, sp_dir + "/reference_tokenizer_metaspace.jsonl") == 31);
}

TEST_CASE("ByteFallback decode: a run of byte tokens that is not UTF-8 gives one U+FFFD per byte, in the stream too") {
  const auto tok = tokenizer::from_file(sp_dir + "/tokenizer.json");
  // E6 97 is the start of a three-byte character: tokenizers' ByteFallback replaces each byte
  // (a lossy UTF-8 decode would give one U+FFFD for the pair).
  const std::vector<std::int32_t> ids{tok.token_id("<0xE6>"), tok.token_id("<0x97>"), tok.token_id("▁the"), tok.token_id("<0xE6>")};
  CHECK(tok.decode(ids) == "\uFFFD\uFFFD the\uFFFD");
  CHECK(stream_decode(tok, ids) == tok.decode(ids));
  // Strip drops one leading space only, of the whole text, also when it comes late in a stream.
  const std::vector<std::int32_t> spaces{tok.token_id("<0x20>"), tok.token_id("▁▁"), tok.token_id("▁the")};
  CHECK(tok.decode(spaces) == "   the");
  CHECK(stream_decode(tok, spaces) == "   the");
  CHECK(tok.decode(std::vector<std::int32_t>{9999, tok.token_id("▁the")}) == "the");  // unknown ids are skipped
}

TEST_CASE("SentencePiece-style BPE: what is not supported is refused, naming the file and the field") {
  CHECK(load_error([](json&) {}) == "(loaded)");
  CHECK(load_error([](json& j) { j["model"]["byte_fallback"] = false; }).find("sp.json: model.byte_fallback: must be true") == 0);
  CHECK(load_error([](json& j) { j["model"]["vocab"].erase("<0x41>"); }).find("sp.json: model.vocab: has no token \"<0x41>\"") == 0);
  CHECK(load_error([](json& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}}; }) ==
        "sp.json: pre_tokenizer.split: true is not supported (only false, as Llama 2 and Mistral have it)");
  CHECK(load_error([](json& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "ab"}, {"split", false}}; }) ==
        "sp.json: pre_tokenizer.replacement: must be one character");
  CHECK(load_error([](json& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "sometimes"}, {"split", false}}; })
            .find("sp.json: pre_tokenizer.prepend_scheme: 'sometimes'") == 0);
  CHECK(load_error([](json& j) { j["pre_tokenizer"] = {{"type", "ByteLevel"}}; })
            .find("sp.json: pre_tokenizer.type: 'ByteLevel' is not supported with the ByteFallback decoder") == 0);
  CHECK(load_error([](json& j) { j["normalizer"]["normalizers"][1]["pattern"] = {{"Regex", " +"}}; }) ==
        "sp.json: normalizer.normalizers[1].pattern: only {\"String\": ...} is supported");
  CHECK(load_error([](json& j) { j["decoder"]["decoders"].erase(1); }).find("sp.json: decoder.decoders[1]: is 'Fuse' where 'ByteFallback' was expected") == 0);
  CHECK(load_error([](json& j) { j["decoder"]["decoders"][3]["stop"] = 1; }) == "sp.json: decoder.decoders[3].stop: only 0 is supported (text is decoded as a stream)");
  CHECK(load_error([](json& j) { j["decoder"]["decoders"].push_back({{"type", "Fuse"}}); })
            .find("sp.json: decoder.decoders[4]: nothing may follow Strip") == 0);
  CHECK(load_error([](json& j) { j["decoder"]["decoders"][0]["type"] = "Metaspace"; })
            .find("sp.json: decoder.decoders[0]: is 'Metaspace' where 'ByteFallback' was expected") == 0);
}

TEST_CASE("prompt_prefix: the post-processor's special tokens before the text, for generation") {
  const auto tok = tokenizer::from_file(sp_dir + "/tokenizer.json");
  REQUIRE(tok.token_id("<s>") >= 0);
  CHECK(tok.prompt_prefix() == std::vector<std::int32_t>{tok.token_id("<s>")});
  // encode() itself adds none (add_special_tokens=False).
  CHECK(tok.encode("hello", false).front() != tok.token_id("<s>"));
  const auto text = [] {
    std::ifstream in(sp_dir + "/tokenizer.json");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }();
  // A template naming a token the vocabulary lacks is refused, naming the field.
  std::string broken = text;
  broken.replace(broken.find("\"id\": \"<s>\""), 11, "\"id\": \"<S>\"");
  CHECK_THROWS_WITH(tokenizer::from_json(broken, "t.json"),
                    doctest::Contains("post_processor.single: the special token '<S>' is not in the vocabulary or the added tokens"));
}
