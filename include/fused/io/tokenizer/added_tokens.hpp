// Added tokens (`added_tokens` in tokenizer.json: "<|im_start|>", "<|endoftext|>", ...) are cut out
// of the text before the pre-tokenizer sees it, each becoming its own id. Matching is leftmost,
// then longest, like the Aho-Corasick LeftmostLongest automaton Hugging Face uses; with a few dozen
// tokens, candidates bucketed by first byte and tried longest first do the same with less code.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace fused::io::tokenization {

struct added_token {
  std::string content;
  std::int32_t id;
  bool special;  // special tokens are not matched when the caller disallows them
};

class added_token_matcher {
 public:
  added_token_matcher() = default;
  explicit added_token_matcher(std::vector<added_token> tokens) : tokens_(std::move(tokens)) {
    for (std::size_t i = 0; i < tokens_.size(); ++i)
      if (!tokens_[i].content.empty()) by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
    for (auto& bucket : by_first_byte_)
      std::stable_sort(bucket.begin(), bucket.end(),
                       [&](std::size_t a, std::size_t b) { return tokens_[a].content.size() > tokens_[b].content.size(); });
  }

  bool empty() const noexcept { return tokens_.empty(); }

  // Cuts `text` at the added tokens: on_text(std::string_view) for each non-empty stretch between
  // them, on_token(std::int32_t id) for each token, in order.
  template <class OnText, class OnToken>
  void split(std::string_view text, bool allow_special, OnText&& on_text, OnToken&& on_token) const {
    std::size_t emitted = 0;
    for (std::size_t i = 0; i < text.size();) {
      const added_token* hit = match_at(text, i, allow_special);
      if (hit == nullptr) { ++i; continue; }
      if (i > emitted) on_text(text.substr(emitted, i - emitted));
      on_token(hit->id);
      i += hit->content.size();
      emitted = i;
    }
    if (emitted < text.size()) on_text(text.substr(emitted));
  }

 private:
  const added_token* match_at(std::string_view text, std::size_t i, bool allow_special) const noexcept {
    for (const std::size_t k : by_first_byte_[static_cast<unsigned char>(text[i])]) {
      const added_token& t = tokens_[k];
      if (t.special && !allow_special) continue;
      if (text.size() - i >= t.content.size() && std::memcmp(text.data() + i, t.content.data(), t.content.size()) == 0)
        return &t;
    }
    return nullptr;
  }

  std::vector<added_token> tokens_;
  std::array<std::vector<std::size_t>, 256> by_first_byte_;
};

}  // namespace fused::io::tokenization
