// Llama 3's kind of tokenizer: byte-level BPE with its own Split regex and `ignore_merges`.
// The small tokenizer in tests/data/tokenizer/llama3_tiny (made by make_llama3_tiny.py) is checked
// against encodings from @lenml/tokenizers (lenml_reference.cjs), an implementation independent of
// fused's; Meta's own tokenizer.json, which the repository does not carry, against Hugging Face's
// encodings when a checkout has it in ../shared.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <fused/core/json_text.hpp>

#include <fused/io/tokenizer.hpp>

using fused::io::tokenizer;

namespace {

const std::string tiny_dir = std::string(FUSED_TEST_DATA) + "/tokenizer/llama3_tiny";

const tokenizer& llama3_tiny() {
  static const auto tok = tokenizer::from_file(tiny_dir + "/tokenizer.json");
  return tok;
}

// Checks every line of a reference_encodings.jsonl: ids, the tokens when given, and the decode.
// Returns the number of lines.
int check_llama3_reference(const tokenizer& tok, const std::string& path) {
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
    if (r.contains("tokens")) {
      const auto tokens = r.at("tokens").get<std::vector<std::string>>();
      REQUIRE(tokens.size() == want.size());
      for (std::size_t i = 0; i < want.size(); ++i) CHECK(tok.token(want[i]) == tokens[i]);
    }
    CHECK(tok.decode(want) == r.at("decoded").get<std::string>());
    ++lines;
  }
  return lines;
}

}  // namespace

TEST_CASE("Llama 3 tiny: reference encodings from @lenml/tokenizers") {
  CHECK(check_llama3_reference(llama3_tiny(), tiny_dir + "/reference_encodings.jsonl") == 43);
}

TEST_CASE("Llama 3 tiny: the regex's contractions and digit groups show in the ids") {
  const tokenizer& t = llama3_tiny();
  // (?i:'s|...) takes "'S" from "'STAR" case-insensitively; the vocabulary has "STAR" whole.
  CHECK(t.encode("'STAR") == std::vector{t.token_id("'S"), t.token_id("T"), t.token_id("AR")});
  // Digits go in groups of three from the left: "1611" is "161" "1", never "16" "11".
  CHECK(t.encode("1611") == std::vector{t.token_id("161"), t.token_id("1")});
}

TEST_CASE("Llama 3 tiny: ignore_merges keeps a vocabulary word whole; without it the merges cut it") {
  const std::int32_t whole = llama3_tiny().token_id("Ġjubilee");
  REQUIRE(whole >= 0);
  CHECK(llama3_tiny().encode(" jubilee") == std::vector{whole});

  std::ifstream in(tiny_dir + "/tokenizer.json");
  auto j = fused::json_text::parse(in);
  REQUIRE(j.at("model").at("ignore_merges") == true);
  j["model"]["ignore_merges"] = false;
  const auto merged = tokenizer::from_json(fused::json_text::dump(j));
  const std::vector<std::int32_t> ids = merged.encode(" jubilee");
  CHECK(ids.size() > 1);  // the merges never reach "Ġjubilee": the test above can fail
  CHECK(merged.decode(ids) == " jubilee");
}

TEST_CASE("Llama 3 (Meta's tokenizer.json in ../shared): reference encodings from Hugging Face") {
  const std::filesystem::path dir = std::filesystem::path(FUSED_SHARED_DIR) / "tokenizer" / "llama3";
  if (!std::filesystem::exists(dir / "tokenizer.json") || !std::filesystem::exists(dir / "reference_encodings.jsonl")) {
    MESSAGE("skipped: " << dir.string() << " has no tokenizer.json and reference_encodings.jsonl (Meta's vocabulary is not in the repository)");
    return;
  }
  const auto tok = tokenizer::from_file(dir / "tokenizer.json");
  CHECK(tok.vocab_size() == 128256);
  CHECK(check_llama3_reference(tok, (dir / "reference_encodings.jsonl").string()) > 0);
}
