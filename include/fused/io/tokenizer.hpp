// fused::io::tokenizer: the BPE tokenizer of a Hugging Face `tokenizer.json`, giving the same ids
// as the `tokenizers` library. Two kinds are read:
//   - byte-level BPE (GPT-2, Qwen2, Qwen2.5, Qwen3, Llama 3): a ByteLevel pre-tokenizer (after Split
//     regexes) and decoder;
//   - SentencePiece converted to BPE (Llama 2, Mistral, TinyLlama): `byte_fallback: true`, spaces
//     shown as "▁" by the normalizer (Prepend + Replace) or a Metaspace pre-tokenizer, and the
//     decoder Sequence [Replace, ByteFallback, Fuse, Strip].
//
//   auto tok = fused::io::tokenizer::from_file("tokenizer.json");
//   std::vector<std::int32_t> ids = tok.encode("Hello, world!");   // {9707, 11, 1879, 0} for Qwen2
//   std::string text = tok.decode(ids);                             // "Hello, world!"
//
// encode() runs the pipeline of tokenizers' `encode(text, add_special_tokens=False)`:
//   1. invalid UTF-8 -> U+FFFD for each maximal ill-formed subpart (what a Python caller gets from
//      bytes.decode("utf-8", errors="replace")); well-formed input is untouched;
//   2. added tokens with "normalized": false are cut out of the raw text (leftmost, then longest);
//   3. each stretch between them is normalized (NFC for Qwen2), then added tokens with
//      "normalized": true are cut out of that;
//   4. the pre-tokenizer splits each remaining stretch (the Split regex, then ByteLevel), or
//      Metaspace shows its spaces as "▁";
//   5. BPE merges each piece.
// Like encode(text, add_special_tokens=False), it never adds a post_processor's template tokens
// (Llama 2's <s>): callers add those themselves.
// decode() maps each id back to its bytes (ByteLevel decoder) and replaces ill-formed UTF-8 in the
// result with U+FFFD, as tokenizers' decode does, or runs the ByteFallback decoder Sequence;
// stream_decoder does the same one id at a time.
//
// Any field of tokenizer.json that would change the result and is not implemented here is an
// error naming the file and the field, never silently ignored.
//
// A hostile file costs work and memory in proportion to its size: the JSON may nest at most
// max_json_depth levels (checked before parsing), and the id -> token tables are sized by the
// largest id, which must stay below twice the number of ids present plus id_slack (real
// tokenizers number their tokens densely from 0), so a few bytes cannot ask for a table of 2^24.
// Every failure to load is an io::load_error naming the file and the field or token.
#pragma once
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iterator>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "../core/json_text.hpp"
#include "load_error.hpp"
#include "read_bounded.hpp"
#include "tokenizer/added_tokens.hpp"
#include "tokenizer/bpe.hpp"
#include "tokenizer/byte_fallback.hpp"
#include "tokenizer/byte_level.hpp"
#include "tokenizer/normalizer.hpp"
#include "tokenizer/split_regex.hpp"
#include "tokenizer/utf8.hpp"

namespace fused::io {

class tokenizer {
 public:
  // Largest token id accepted from a file: bounds the id -> token table a damaged file can ask for.
  static constexpr std::int64_t max_token_id = (std::int64_t{1} << 24) - 1;
  // The largest id must be below 2 * (number of distinct ids) + id_slack: the id space may have
  // gaps (ids reserved for tokens not listed), but not be mostly empty.
  static constexpr std::int64_t id_slack = 1024;
  // tokenizer.json nests about 5 levels deep; arrays and objects deeper than this are refused.
  static constexpr int max_json_depth = 64;

  // Throws io::load_error naming the file (and the field, for a bad one).
  static tokenizer from_file(const std::filesystem::path& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
      throw load_error(path.string() + ": is a directory; give the tokenizer.json file" +
                       (std::filesystem::exists(path / "tokenizer.json", ec) ? " (" + (path / "tokenizer.json").string() + ")" : std::string{}));
    // Bounded as it is read (a device such as /dev/zero never ends): the largest vocabularies' files
    // are tens of MiB.
    const read_result text = read_file_at_most(path, std::size_t{512} << 20);
    if (text.too_large) throw load_error(path.string() + ": larger than 512 MiB, more than a tokenizer.json could need");
    if (const std::string why = failure(text); !why.empty()) throw load_error(path.string() + ": " + why);
    return from_json(text.bytes, path.string());
  }

  // `origin` names the source in error messages. Throws io::load_error.
  static tokenizer from_json(std::string_view json_text, const std::string& origin = "tokenizer.json") {
    check_depth(json_text, origin);
    nlohmann::json j;
    try {
      j = fused::json_text::parse(json_text);
    } catch (const nlohmann::json::exception& e) {
      throw load_error(origin + ": not valid JSON: " + fused::json_text::reason(e));
    }
    try {
      return tokenizer(j, origin);
    } catch (const load_error&) {
      throw;
    } catch (const std::runtime_error& e) {  // from PCRE2 or utf8proc, on a value of the file
      throw load_error(origin + ": " + e.what());
    }
  }

  // Token ids of `text`. With allow_special = false, special added tokens ("<|im_start|>", ...)
  // in the text are encoded as ordinary text, so user input cannot forge control tokens;
  // non-special added tokens are still matched (tokenizers' split_special_tokens does the same).
  // starts_input = false: `text` follows other input (a chat template's control token), so
  // Metaspace's prepend_scheme "first" does not mark its start.
  std::vector<std::int32_t> encode(std::string_view text, bool allow_special = true, bool starts_input = true) const {
    std::string valid_storage;
    text = tokenization::to_valid_utf8(text, valid_storage);
    std::vector<std::int32_t> ids;
    ids.reserve(text.size() / 3 + 4);
    const auto on_token = [&](std::int32_t id) { ids.push_back(id); };
    raw_added_.split(text, allow_special, [&](std::string_view raw) {
      std::string normalized_storage;
      const std::string_view normalized = normalizer_.apply(raw, normalized_storage);
      // Whether a stretch starts the input matters to Metaspace's prepend_scheme "first".
      const bool raw_at_start = starts_input && raw.data() == text.data();
      normalized_added_.split(normalized, allow_special, [&](std::string_view s) {
        encode_ordinary(s, 0, raw_at_start && s.data() == normalized.data(), ids);
      }, on_token);
    }, on_token);
    return ids;
  }

  // The text of `ids`; ids this tokenizer does not know are skipped (as tokenizers' decode does:
  // a model's embedding table is often padded past the vocabulary, so a sampler can emit them).
  std::string decode(std::span<const std::int32_t> ids) const {
    if (byte_fallback_) {
      std::string text, run;  // run: the bytes of consecutive "<0x..>" tokens
      for (const std::int32_t id : ids) {
        if (!known(id)) continue;
        if (is_byte_token_[static_cast<std::size_t>(id)]) { run += decode_one(id); continue; }
        tokenization::append_byte_run(run, text);
        run.clear();
        text += decode_one(id);
      }
      tokenization::append_byte_run(run, text);
      text.erase(0, leading_strip(text, strip_start_));
      return text;
    }
    std::string bytes;
    for (const std::int32_t id : ids) bytes.append(decode_one(id));
    std::string text;
    tokenization::append_utf8_lossy(bytes, text);
    return text;
  }

  // The raw bytes of one token: possibly part of a UTF-8 character (use stream_decoder to print
  // text as it is generated); "▁" already shown as " " in a SentencePiece-style vocabulary, whose
  // decoder also drops the text's first space (decode() does, this does not). Empty for an unknown id.
  std::string_view decode_one(std::int32_t id) const noexcept {
    return known(id) ? std::string_view(bytes_of_id_[static_cast<std::size_t>(id)]) : std::string_view{};
  }

  // The id of a token given by its text as tokenizer.json writes it (an added token such as
  // "<|im_start|>", or a vocabulary entry in byte-level form such as "Ġworld"); -1 when absent.
  std::int32_t token_id(std::string_view token) const {
    if (const auto it = added_ids_.find(token); it != added_ids_.end()) return it->second;
    if (const auto it = vocab_.find(token); it != vocab_.end()) return it->second;
    return -1;
  }

  // The text of a token as tokenizer.json writes it ("Ġworld"); empty for an unknown id.
  std::string_view token(std::int32_t id) const noexcept {
    return known(id) ? std::string_view(token_of_id_[static_cast<std::size_t>(id)]) : std::string_view{};
  }

  // The special tokens a generation's prompt starts with (the post-processor's template before the
  // text: Llama 3's <|begin_of_text|>); empty when the tokenizer adds none, as Qwen2's.
  const std::vector<std::int32_t>& prompt_prefix() const noexcept { return prefix_ids_; }

  // One past the largest id in the vocabulary and the added tokens (151669 for Qwen2.5/Qwen3);
  // a model's vocab_size must be at least this.
  std::size_t vocab_size() const noexcept { return token_of_id_.size(); }

  // Decodes a sequence one id at a time, returning only complete UTF-8 characters: the
  // concatenation of every push() and the final finish() equals decode() of the whole sequence.
  // With ByteFallback, a run of "<0x..>" tokens is held back until the token after it, since
  // whether it decodes to its bytes or to U+FFFDs depends on the whole run.
  class stream_decoder {
   public:
    explicit stream_decoder(const tokenizer& tok) : tok_(&tok), strip_left_(tok.strip_start_) {}
    std::string push(std::int32_t id) {
      if (!tok_->byte_fallback_) return utf8_.push(tok_->decode_one(id));
      if (!tok_->known(id)) return {};
      if (tok_->is_byte_token_[static_cast<std::size_t>(id)]) { run_ += tok_->decode_one(id); return {}; }
      std::string out;
      tokenization::append_byte_run(run_, out);
      run_.clear();
      out += tok_->decode_one(id);
      return strip(std::move(out));
    }
    std::string finish() {
      if (!tok_->byte_fallback_) return utf8_.finish();
      std::string out;
      tokenization::append_byte_run(run_, out);
      run_.clear();
      return strip(std::move(out));
    }

   private:
    // The decoder's Strip of leading characters, spread over the pieces of the stream.
    std::string strip(std::string out) {
      while (strip_left_ > 0 && !out.empty()) {
        const std::size_t n = tok_->leading_strip(out, 1);
        if (n == 0) { strip_left_ = 0; break; }
        out.erase(0, n);
        --strip_left_;
      }
      return out;
    }

    const tokenizer* tok_;
    tokenization::utf8_stream utf8_;
    std::string run_;  // ByteFallback: the bytes of the "<0x..>" tokens not yet decoded
    std::size_t strip_left_;
  };

 private:
  using json = nlohmann::json;
  struct string_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  using id_map = std::unordered_map<std::string, std::int32_t, string_hash, std::equal_to<>>;

  // The GPT-2 pattern that ByteLevel applies itself when its "use_regex" is true.
  static constexpr std::string_view gpt2_pattern =
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

  // Refuses JSON nested deeper than max_json_depth, before the parser recurses into it: one pass
  // over the bytes, tracking strings (a bracket inside one does not count). Malformed JSON passes
  // through to the parser, which reports it.
  static void check_depth(std::string_view text, const std::string& origin) {
    int depth = 0;
    bool in_string = false, escaped = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
      const char c = text[i];
      if (in_string) {
        if (escaped) escaped = false;
        else if (c == '\\') escaped = true;
        else if (c == '"') in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '[' || c == '{') {
        if (++depth > max_json_depth)
          throw load_error(origin + ": JSON nests deeper than " + std::to_string(max_json_depth) + " levels (at byte " + std::to_string(i) + ")");
      } else if (c == ']' || c == '}') {
        --depth;
      }
    }
  }

  // Field access that names the file and the field on any mismatch.
  struct reader {
    const std::string& origin;
    [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
      throw load_error(origin + ": " + field + ": " + problem);
    }
    const json& member(const json& obj, const std::string& field, const char* key) const {
      const auto it = obj.find(key);
      if (it == obj.end()) fail(field, std::string("missing field '") + key + "'");
      return *it;
    }
    // A member that may be absent or null.
    const json* optional_member(const json& obj, const char* key) const {
      const auto it = obj.find(key);
      return it == obj.end() || it->is_null() ? nullptr : &*it;
    }
    const std::string& str(const json& v, const std::string& field) const {
      if (!v.is_string()) fail(field, "must be a string");
      return v.get_ref<const std::string&>();
    }
    bool boolean(const json& obj, const std::string& field, const char* key, bool def) const {
      const json* v = optional_member(obj, key);
      if (v == nullptr) return def;
      if (!v->is_boolean()) fail(field + "." + key, "must be true or false");
      return v->get<bool>();
    }
    std::int32_t id(const json& v, const std::string& field) const {
      if (!v.is_number_integer()) fail(field, "must be an integer id");
      const auto x = v.get<std::int64_t>();
      if (v.is_number_unsigned() ? v.get<std::uint64_t>() > static_cast<std::uint64_t>(max_token_id) : (x < 0 || x > max_token_id))
        fail(field, "id is outside [0, " + std::to_string(max_token_id) + "]");
      return static_cast<std::int32_t>(x);
    }
    const std::string& type(const json& obj, const std::string& field) const {
      if (!obj.is_object()) fail(field, "must be an object");
      return str(member(obj, field, "type"), field + ".type");
    }
  };

  tokenizer(const json& j, const std::string& origin) : bpe_(load(j, reader{origin})) {}

  // Everything but the BPE model is filled in as a side effect; the model is returned so that
  // bpe_ (which has no default state) can be initialized from it.
  tokenization::bpe_model load(const json& j, const reader& r) {
    if (!j.is_object()) r.fail("(top level)", "must be a JSON object");
    if (r.optional_member(j, "truncation") != nullptr) r.fail("truncation", "truncation is not supported (set it to null)");
    // The decoder tells the two kinds apart: ByteLevel (alone, or the one decoder of a Sequence), or
    // a Sequence of SentencePiece-style BPE's. It is checked first: a pre-tokenizer is judged by it.
    const json& dec = r.member(j, "(top level)", "decoder");
    bool byte_level_sequence = false;
    if (dec.is_object() && dec.contains("type") && dec["type"] == "Sequence") {
      const json* inner = dec.contains("decoders") ? &dec["decoders"] : nullptr;
      byte_level_sequence = inner && inner->is_array() && inner->size() == 1 && (*inner)[0].is_object() && (*inner)[0].contains("type") &&
                            (*inner)[0]["type"] == "ByteLevel";
      byte_fallback_ = !byte_level_sequence;
    }
    if (!byte_fallback_ && !byte_level_sequence)
      if (const std::string t = dec.is_null() ? "null" : r.type(dec, "decoder"); t != "ByteLevel")
        r.fail("decoder.type", "'" + t + "' is not supported (only ByteLevel, or the Sequence [Replace, ByteFallback, Fuse, Strip] of SentencePiece-style BPE)");
    load_normalizer(r.optional_member(j, "normalizer"), r);
    if (byte_fallback_) load_metaspace(r.member(j, "(top level)", "pre_tokenizer"), r);
    else load_pre_tokenizer(r.member(j, "(top level)", "pre_tokenizer"), r);
    load_post_processor(r.optional_member(j, "post_processor"), r);
    if (byte_fallback_) load_byte_fallback_decoder(dec, r);

    const json& model = r.member(j, "(top level)", "model");
    if (r.type(model, "model") != "BPE") r.fail("model.type", "'" + model.at("type").get<std::string>() + "' is not supported (only BPE)");
    if (const json* d = r.optional_member(model, "dropout"); d != nullptr && !(d->is_number() && d->get<double>() == 0.0))
      r.fail("model.dropout", "BPE dropout is not supported (set it to null)");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (const json* v = r.optional_member(model, key); v != nullptr && !r.str(*v, std::string("model.") + key).empty())
        r.fail(std::string("model.") + key, "a non-empty value is not supported");
    ignore_merges_ = r.boolean(model, "model", "ignore_merges", false);
    // Without byte fallback a character outside the vocabulary would need the unknown token, which
    // is not implemented; byte-level vocabularies have every byte, so the flag changes nothing there.
    if (byte_fallback_ && !r.boolean(model, "model", "byte_fallback", false))
      r.fail("model.byte_fallback", "must be true with the ByteFallback decoder (the unknown token is not supported)");

    const json& vocab = r.member(model, "model", "vocab");
    if (!vocab.is_object()) r.fail("model.vocab", "must be an object of token -> id");
    std::int32_t max_id = -1;
    std::string max_id_field;  // the field that holds max_id, for the error on a sparse id space
    const auto note_id = [&](std::int32_t id, const std::string& field) {
      if (id > max_id) max_id = id, max_id_field = field;
    };
    vocab_.reserve(vocab.size());
    // Each id names one token: two tokens of one id would encode apart and decode alike (the reference
    // library keeps the later one for decoding, silently).
    std::unordered_map<std::int32_t, std::string> vocab_text_of_id;
    vocab_text_of_id.reserve(vocab.size());
    for (const auto& [text, idv] : vocab.items()) {
      const std::string field = "model.vocab[\"" + text + "\"]";
      const std::int32_t id = r.id(idv, field);
      if (const auto [it, fresh] = vocab_text_of_id.try_emplace(id, text); !fresh)
        r.fail(field, "id " + std::to_string(id) + " is also the id of model.vocab[\"" + it->second + "\"]; each token needs its own id");
      vocab_.emplace(text, id);
      note_id(id, field);
    }

    const json& added = r.optional_member(j, "added_tokens") ? j.at("added_tokens") : json::array();
    if (!added.is_array()) r.fail("added_tokens", "must be an array");
    std::vector<tokenization::added_token> raw_tokens, normalized_tokens;
    // An added token may repeat a vocabulary entry (its id wins there), or itself word for word; but
    // one id for two contents, or one content under two ids, could only encode or decode wrongly.
    std::unordered_map<std::int32_t, std::size_t> added_index_of_id;
    for (std::size_t i = 0; i < added.size(); ++i) {
      const std::string field = "added_tokens[" + std::to_string(i) + "]";
      const json& t = added[i];
      if (!t.is_object()) r.fail(field, "must be an object");
      const std::int32_t id = r.id(r.member(t, field, "id"), field + ".id");
      const std::string& content = r.str(r.member(t, field, "content"), field + ".content");
      if (content.empty()) r.fail(field + ".content", "must not be empty");
      if (const auto [it, fresh] = added_index_of_id.try_emplace(id, i); !fresh) {
        const std::string& earlier = added[it->second].at("content").get_ref<const std::string&>();
        if (earlier != content)
          r.fail(field + ".id", "id " + std::to_string(id) + " is also the id of added_tokens[" + std::to_string(it->second) + "] (\"" +
                                    earlier + "\"); each token needs its own id");
        continue;  // the same token twice
      }
      if (const auto at = added_ids_.find(content); at != added_ids_.end())
        r.fail(field + ".content", "\"" + content + "\" is already added_tokens[" + std::to_string(added_index_of_id.at(at->second)) +
                                       "] with id " + std::to_string(at->second) + "; a token has one id");
      for (const char* key : {"single_word", "lstrip", "rstrip"})
        if (r.boolean(t, field, key, false)) r.fail(field + "." + key, "true is not supported");
      const bool special = r.boolean(t, field, "special", false);
      // tokenizers' default for a missing "normalized" is !special.
      const bool normalized = r.boolean(t, field, "normalized", !special);
      if (normalized) {
        // Matched in normalized text, so matched in its own normalized form (as tokenizers does).
        std::string storage;
        normalized_tokens.push_back({std::string(normalizer_.apply(content, storage)), id, special});
      } else {
        raw_tokens.push_back({content, id, special});
      }
      added_ids_.emplace(content, id);
      note_id(id, field + ".id");
    }
    raw_added_ = tokenization::added_token_matcher(std::move(raw_tokens));
    normalized_added_ = tokenization::added_token_matcher(std::move(normalized_tokens));

    // The tables below have max_id + 1 entries: refuse an id space that is mostly empty before
    // allocating them, so that their size is bounded by the number of tokens the file holds.
    {
      std::vector<std::int32_t> ids;
      ids.reserve(vocab_.size() + added_ids_.size());
      for (const auto& [text, id] : vocab_) ids.push_back(id);
      for (const auto& [text, id] : added_ids_) ids.push_back(id);
      std::sort(ids.begin(), ids.end());
      const auto distinct = static_cast<std::int64_t>(std::unique(ids.begin(), ids.end()) - ids.begin());
      if (max_id >= 2 * distinct + id_slack)
        r.fail(max_id_field, "id " + std::to_string(max_id) + " leaves most of the id space empty (only " + std::to_string(distinct) +
                                 " distinct ids; the largest must be below " + std::to_string(2 * distinct + id_slack) + ")");
    }

    // id -> text tables; added tokens win over a vocabulary entry with the same id.
    token_of_id_.assign(static_cast<std::size_t>(max_id + 1), std::string{});
    known_.assign(token_of_id_.size(), false);
    const auto set_token = [this](const std::string& text, std::int32_t id) {
      token_of_id_[static_cast<std::size_t>(id)] = text;
      known_[static_cast<std::size_t>(id)] = true;
    };
    for (const auto& [text, id] : vocab_) set_token(text, id);
    for (const auto& [text, id] : added_ids_) set_token(text, id);
    for (const std::string& name : prefix_names_) {
      const std::int32_t id = token_id(name);
      if (id < 0) r.fail("post_processor.single", "the special token '" + name + "' is not in the vocabulary or the added tokens");
      prefix_ids_.push_back(id);
    }
    bytes_of_id_.resize(token_of_id_.size());
    if (byte_fallback_) return load_byte_fallback_model(model, r);
    for (std::size_t id = 0; id < token_of_id_.size(); ++id) bytes_of_id_[id] = tokenization::from_byte_level(token_of_id_[id]);

    std::array<std::int32_t, 256> byte_ids{};
    for (unsigned b = 0; b < 256; ++b) {
      const auto it = vocab_.find(tokenization::byte_level_char(static_cast<unsigned char>(b)));
      if (it == vocab_.end()) {
        std::ostringstream hex;
        hex << std::hex << b;
        r.fail("model.vocab", "has no token for byte 0x" + hex.str() + " (\"" + tokenization::byte_level_char(static_cast<unsigned char>(b)) +
                                  "\"): not a byte-level vocabulary");
      }
      byte_ids[b] = it->second;
    }
    return tokenization::bpe_model(byte_ids, load_merges(r.member(model, "model", "merges"), r));
  }

  // SentencePiece-style BPE: each token decodes to its text with the decoder's Replaces done, or
  // to one byte if it is then a "<0x..>" token; a word starts as its characters (bpe.hpp).
  tokenization::bpe_model load_byte_fallback_model(const json& model, const reader& r) {
    is_byte_token_.assign(token_of_id_.size(), false);
    for (std::size_t id = 0; id < token_of_id_.size(); ++id) {
      std::string text = token_of_id_[id];
      for (const auto& [pattern, with] : decoder_replace_) text = replace_all(text, pattern, with);
      if (const int b = tokenization::byte_fallback_value(text); b >= 0) {
        text.assign(1, static_cast<char>(b));
        is_byte_token_[id] = true;
      }
      bytes_of_id_[id] = std::move(text);
    }
    std::array<std::int32_t, 256> byte_ids{};
    for (unsigned b = 0; b < 256; ++b) {
      const std::string name = tokenization::byte_fallback_token(static_cast<unsigned char>(b));
      const auto it = vocab_.find(name);
      if (it == vocab_.end()) r.fail("model.vocab", "has no token \"" + name + "\": byte fallback needs one for every byte");
      byte_ids[b] = it->second;
    }
    tokenization::char_id_map chars;
    for (const auto& [text, id] : vocab_)
      if (!text.empty() && tokenization::next_utf8_unit(text, 0).size == text.size()) chars.emplace(tokenization::char_key(text), id);
    return tokenization::bpe_model(byte_ids, load_merges(r.member(model, "model", "merges"), r), true, std::move(chars));
  }

  static std::string replace_all(std::string_view in, std::string_view pattern, std::string_view with) {
    std::string out;
    std::size_t at = 0;
    for (std::size_t hit; (hit = in.find(pattern, at)) != std::string_view::npos; at = hit + pattern.size()) {
      out.append(in.substr(at, hit - at));
      out.append(with);
    }
    out.append(in.substr(at));
    return out;
  }

  // A Replace's pattern: only a literal {"String": ...} (a Regex would need the regex engine here).
  static std::string literal_pattern(const json& step, const std::string& field, const reader& r) {
    const json& pat = r.member(step, field, "pattern");
    const json* lit = pat.is_object() ? r.optional_member(pat, "String") : nullptr;
    if (lit == nullptr) r.fail(field + ".pattern", "only {\"String\": ...} is supported");
    const std::string& p = r.str(*lit, field + ".pattern.String");
    if (p.empty()) r.fail(field + ".pattern.String", "must not be empty");
    return p;
  }

  // Exactly one character, as tokenizers' char fields (Metaspace's replacement, Strip's content).
  static const std::string& one_char(const json& v, const std::string& field, const reader& r) {
    const std::string& s = r.str(v, field);
    if (s.empty() || tokenization::next_utf8_unit(s, 0).size != s.size()) r.fail(field, "must be one character");
    return s;
  }

  // The pre-tokenizer of SentencePiece-style BPE: none (Llama 2: the normalizer puts the "▁" in)
  // or Metaspace without split (Mistral). tokenizers reads a Metaspace without prepend_scheme as
  // "always", and add_prefix_space: false as "never"; split defaults to true.
  void load_metaspace(const json& p, const reader& r) {
    if (p.is_null()) return;
    const std::string& t = r.type(p, "pre_tokenizer");
    if (t != "Metaspace") r.fail("pre_tokenizer.type", "'" + t + "' is not supported with the ByteFallback decoder (only Metaspace, or null)");
    tokenization::metaspace m;
    m.replacement = one_char(r.member(p, "pre_tokenizer", "replacement"), "pre_tokenizer.replacement", r);
    if (const json* ps = r.optional_member(p, "prepend_scheme")) {
      const std::string& v = r.str(*ps, "pre_tokenizer.prepend_scheme");
      if (v == "always") m.scheme = tokenization::metaspace::always;
      else if (v == "first") m.scheme = tokenization::metaspace::first;
      else if (v == "never") m.scheme = tokenization::metaspace::never;
      else r.fail("pre_tokenizer.prepend_scheme", "'" + v + "' is not one of always, first, never");
    }
    if (!r.boolean(p, "pre_tokenizer", "add_prefix_space", true)) m.scheme = tokenization::metaspace::never;
    if (r.boolean(p, "pre_tokenizer", "split", true)) r.fail("pre_tokenizer.split", "true is not supported (only false, as Llama 2 and Mistral have it)");
    metaspace_ = std::move(m);
  }

  // The decoder of SentencePiece-style BPE: Sequence [Replace (of a literal)..., ByteFallback,
  // Fuse, Strip (of leading characters only)], Strip optional. Other orders are refused rather
  // than reasoned about: this is the shape every converted SentencePiece model has.
  void load_byte_fallback_decoder(const json& d, const reader& r) {
    const json& list = r.member(d, "decoder", "decoders");
    if (!list.is_array()) r.fail("decoder.decoders", "must be an array");
    std::size_t i = 0;
    const auto field = [&] { return "decoder.decoders[" + std::to_string(i) + "]"; };
    const auto type_at = [&]() -> std::string { return i < list.size() ? r.type(list[i], field()) : std::string("(end)"); };
    const auto expect = [&](const char* want) {
      if (const std::string t = type_at(); t != want)
        r.fail(field(), "is '" + t + "' where '" + want + "' was expected (only the Sequence [Replace..., ByteFallback, Fuse, Strip] is supported)");
      ++i;
    };
    for (; type_at() == "Replace"; ++i)
      decoder_replace_.emplace_back(literal_pattern(list[i], field(), r), r.str(r.member(list[i], field(), "content"), field() + ".content"));
    expect("ByteFallback");
    expect("Fuse");
    if (i < list.size()) {
      const json& st = list[i];
      expect("Strip");
      const std::string f = "decoder.decoders[" + std::to_string(i - 1) + "]";
      strip_char_ = one_char(r.member(st, f, "content"), f + ".content", r);
      for (const char* key : {"start", "stop"})
        if (!r.member(st, f, key).is_number_unsigned()) r.fail(f + "." + key, "must be a non-negative integer");
      if (st.at("stop").get<std::uint64_t>() != 0) r.fail(f + ".stop", "only 0 is supported (text is decoded as a stream)");
      strip_start_ = static_cast<std::size_t>(std::min<std::uint64_t>(st.at("start").get<std::uint64_t>(), 1u << 20));
    }
    if (i != list.size()) r.fail(field(), "nothing may follow Strip (only the Sequence [Replace..., ByteFallback, Fuse, Strip] is supported)");
  }

  // The post-processor matters only to encode(text, add_special_tokens=True): ByteLevel changes
  // offsets, and TemplateProcessing's single-sequence template puts special tokens around the text
  // (Llama's <|begin_of_text|>, Llama 2's <s>). encode() adds none; the tokens before the text are
  // kept as prompt_prefix() for whoever starts a generation, as transformers' generate() gets them.
  void load_post_processor(const json* pp, const reader& r) {
    if (pp == nullptr) return;
    const auto one = [&](const json& s, const std::string& field) {
      const std::string& t = r.type(s, field);
      if (t != "ByteLevel" && t != "TemplateProcessing")
        r.fail(field + ".type", "'" + t + "' is not supported (only ByteLevel and TemplateProcessing, or a Sequence of them)");
      if (t != "TemplateProcessing") return;
      const json& single = r.member(s, field, "single");
      if (!single.is_array()) r.fail(field + ".single", "must be an array");
      for (std::size_t i = 0; i < single.size(); ++i) {
        const std::string piece = field + ".single[" + std::to_string(i) + "]";
        if (!single[i].is_object()) r.fail(piece, "must be an object");
        if (single[i].contains("Sequence")) break;  // the text: what follows it is not a prefix
        const json& special = r.member(single[i], piece, "SpecialToken");
        if (!special.is_object()) r.fail(piece + ".SpecialToken", "must be an object");
        prefix_names_.push_back(r.str(r.member(special, piece + ".SpecialToken", "id"), piece + ".SpecialToken.id"));
      }
    };
    if (r.type(*pp, "post_processor") != "Sequence") return one(*pp, "post_processor");
    const json& list = r.member(*pp, "post_processor", "processors");
    if (!list.is_array()) r.fail("post_processor.processors", "must be an array");
    for (std::size_t i = 0; i < list.size(); ++i) one(list[i], "post_processor.processors[" + std::to_string(i) + "]");
  }

  // Bytes of up to `max` copies of the decoder's Strip character at the start of `text`.
  std::size_t leading_strip(std::string_view text, std::size_t max) const noexcept {
    std::size_t n = 0;
    for (std::size_t k = 0; k < max && !strip_char_.empty() && text.substr(n).starts_with(strip_char_); ++k) n += strip_char_.size();
    return n;
  }

  tokenization::merge_table load_merges(const json& merges, const reader& r) const {
    if (!merges.is_array()) r.fail("model.merges", "must be an array");
    tokenization::merge_table table(merges.size());
    for (std::size_t i = 0; i < merges.size(); ++i) {
      const std::string field = "model.merges[" + std::to_string(i) + "]";
      const json& m = merges[i];
      std::string a, b;
      if (m.is_string()) {  // the older "a b" form; byte-level tokens never contain a space
        const std::string& s = m.get_ref<const std::string&>();
        const std::size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) r.fail(field, "'" + s + "' is not two tokens separated by one space");
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else if (m.is_array() && m.size() == 2) {
        a = r.str(m[0], field + "[0]");
        b = r.str(m[1], field + "[1]");
      } else {
        r.fail(field, "must be \"a b\" or [\"a\", \"b\"]");
      }
      const auto ia = vocab_.find(a), ib = vocab_.find(b), im = vocab_.find(a + b);
      if (ia == vocab_.end() || ib == vocab_.end() || im == vocab_.end())
        r.fail(field, "'" + a + "' + '" + b + "': " + (ia == vocab_.end() ? a : ib == vocab_.end() ? b : a + b) + " is not in model.vocab");
      table.insert(ia->second, ib->second, {static_cast<std::int32_t>(i), im->second});
    }
    return table;
  }

  void load_normalizer(const json* n, const reader& r) {
    if (n == nullptr) return;
    using step = tokenization::normalizer_step;
    std::vector<step> steps;
    const auto form = [&](tokenization::normal_form f) { steps.push_back({step::form, f, {}, {}}); };
    const auto one = [&](const json& s, const std::string& field) {
      const std::string& t = r.type(s, field);
      if (t == "NFC") form(tokenization::normal_form::nfc);
      else if (t == "NFD") form(tokenization::normal_form::nfd);
      else if (t == "NFKC") form(tokenization::normal_form::nfkc);
      else if (t == "NFKD") form(tokenization::normal_form::nfkd);
      else if (t == "Prepend") steps.push_back({step::prepend, {}, {}, r.str(r.member(s, field, "prepend"), field + ".prepend")});
      else if (t == "Replace")
        steps.push_back({step::replace, {}, literal_pattern(s, field, r), r.str(r.member(s, field, "content"), field + ".content")});
      else r.fail(field + ".type", "'" + t + "' is not supported (only NFC, NFD, NFKC, NFKD, Prepend, Replace and Sequence of them)");
    };
    if (r.type(*n, "normalizer") == "Sequence") {
      const json& list = r.member(*n, "normalizer", "normalizers");
      if (!list.is_array()) r.fail("normalizer.normalizers", "must be an array");
      for (std::size_t i = 0; i < list.size(); ++i) one(list[i], "normalizer.normalizers[" + std::to_string(i) + "]");
    } else {
      one(*n, "normalizer");
    }
    normalizer_ = tokenization::normalizer(std::move(steps));
  }

  // Accepted shapes: ByteLevel alone, or a Sequence of Split steps ending in ByteLevel.
  void load_pre_tokenizer(const json& p, const reader& r) {
    std::vector<std::pair<const json*, std::string>> steps;
    if (p.is_null()) r.fail("pre_tokenizer", "is null; byte-level BPE needs a ByteLevel pre-tokenizer");
    if (r.type(p, "pre_tokenizer") == "Sequence") {
      const json& list = r.member(p, "pre_tokenizer", "pretokenizers");
      if (!list.is_array()) r.fail("pre_tokenizer.pretokenizers", "must be an array");
      for (std::size_t i = 0; i < list.size(); ++i) steps.emplace_back(&list[i], "pre_tokenizer.pretokenizers[" + std::to_string(i) + "]");
    } else {
      steps.emplace_back(&p, "pre_tokenizer");
    }
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const json& s = *steps[i].first;
      const std::string& field = steps[i].second;
      const std::string& t = r.type(s, field);
      if (t == "ByteLevel") {
        if (i + 1 != steps.size()) r.fail(field, "ByteLevel must be the last pre-tokenizer step");
        if (r.boolean(s, field, "add_prefix_space", false)) r.fail(field + ".add_prefix_space", "true is not supported");
        if (r.boolean(s, field, "use_regex", true)) splits_.emplace_back(gpt2_pattern, r.origin + ": " + field + " (ByteLevel's own regex)");
        return;
      }
      if (t != "Split") r.fail(field + ".type", "'" + t + "' is not supported (only Split and ByteLevel)");
      if (r.str(r.member(s, field, "behavior"), field + ".behavior") != "Isolated")
        r.fail(field + ".behavior", "only \"Isolated\" is supported");
      if (r.boolean(s, field, "invert", false)) r.fail(field + ".invert", "true is not supported");
      const json& pat = r.member(s, field, "pattern");
      if (!pat.is_object()) r.fail(field + ".pattern", "must be {\"Regex\": ...} or {\"String\": ...}");
      std::string regex;
      if (const json* re = r.optional_member(pat, "Regex")) {
        regex = r.str(*re, field + ".pattern.Regex");
      } else if (const json* lit = r.optional_member(pat, "String")) {
        // A backslash makes any ASCII punctuation literal in PCRE2; letters and digits are literal already.
        for (const char c : r.str(*lit, field + ".pattern.String")) {
          if (static_cast<unsigned char>(c) < 0x80 && !std::isalnum(static_cast<unsigned char>(c))) regex += '\\';
          regex += c;
        }
      } else {
        r.fail(field + ".pattern", "must be {\"Regex\": ...} or {\"String\": ...}");
      }
      try {
        splits_.emplace_back(regex, r.origin + ": " + field + ".pattern");
      } catch (const std::runtime_error& e) {
        r.fail(field + ".pattern", e.what());
      }
    }
    r.fail("pre_tokenizer", "needs a ByteLevel step last: only byte-level BPE is supported");
  }

  // Pre-tokenizes with split stage `stage` onwards, then merges each piece. `at_start`: the text
  // starts the input (no added token before it).
  void encode_ordinary(std::string_view text, std::size_t stage, bool at_start, std::vector<std::int32_t>& ids) const {
    if (stage == splits_.size()) {
      std::string spaced;
      if (metaspace_) text = spaced = metaspace_->apply(text, at_start);
      if (ignore_merges_) {  // a word that is a whole token skips the merges
        const auto it = byte_fallback_ ? vocab_.find(text) : vocab_.find(tokenization::to_byte_level(text));
        if (it != vocab_.end()) { ids.push_back(it->second); return; }
      }
      bpe_.encode_word(text, ids);
      return;
    }
    splits_[stage].split(text, [&](std::string_view piece) { encode_ordinary(piece, stage + 1, at_start && piece.data() == text.data(), ids); });
  }

  bool known(std::int32_t id) const noexcept { return id >= 0 && static_cast<std::size_t>(id) < known_.size() && known_[static_cast<std::size_t>(id)]; }

  id_map vocab_;      // byte-level token text -> id
  id_map added_ids_;  // added token content -> id
  std::vector<std::string> token_of_id_;
  std::vector<std::string> bytes_of_id_;
  std::vector<bool> known_;
  tokenization::normalizer normalizer_;
  tokenization::added_token_matcher raw_added_, normalized_added_;
  std::vector<tokenization::split_regex> splits_;
  bool ignore_merges_ = false;
  std::vector<std::string> prefix_names_;  // the post-processor's special tokens before the text
  std::vector<std::int32_t> prefix_ids_;   // ... as ids
  // SentencePiece-style BPE (the ByteFallback decoder) rather than byte-level.
  bool byte_fallback_ = false;
  std::optional<tokenization::metaspace> metaspace_;
  std::vector<std::pair<std::string, std::string>> decoder_replace_;  // the decoder's Replaces, in order
  std::vector<bool> is_byte_token_;  // byte_fallback_: the token is "<0x..>", decoding to one byte
  std::string strip_char_;           // the decoder's Strip: up to strip_start_ of these leave the text's start
  std::size_t strip_start_ = 0;
  // Declared last: its initializer, load(), fills in every member above, which must exist by then.
  tokenization::bpe_model bpe_;
};

}  // namespace fused::io
