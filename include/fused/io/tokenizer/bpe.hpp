// BPE merging: one pre-tokenized word -> token ids.
//
// In byte-level BPE (GPT-2, Qwen2, Llama 3) the word starts as one symbol per byte. In the BPE of a
// converted SentencePiece model (Llama 2, Mistral: `byte_fallback: true`) it starts as one symbol
// per character, a character the vocabulary lacks becoming its UTF-8 bytes as "<0x..>" tokens.
// Then the adjacent pair with the lowest merge rank is merged
// until no adjacent pair has a rank, ties going to the leftmost pair. This is exactly the order of
// Hugging Face's `BPE::merge_word` (a min-heap on (rank, position)), so ids match it bit for bit.
// Cost: O(n log n) per word with the heap and a linked list of symbols, instead of the O(n^2)
// rescans of the textbook loop; repeated words (most of them, in real text) hit a cache.
#pragma once
#include <algorithm>
#include <array>
#include <unordered_map>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "utf8.hpp"

namespace fused::io::tokenization {

// Merge rules keyed by the pair of ids: open addressing with linear probing on one flat array,
// because this lookup is the inner loop of encoding (std::unordered_map chases a pointer per probe).
class merge_table {
 public:
  struct rule {
    std::int32_t rank;    // position in the merges list: lower merges first
    std::int32_t merged;  // id of the token the pair becomes
  };

  // Reserve for `n` rules; keeps the load factor at or below 1/2.
  explicit merge_table(std::size_t n = 0) {
    std::size_t cap = 16;
    while (cap < 2 * n + 2) cap *= 2;
    slots_.assign(cap, slot{empty_key, {0, 0}});
  }

  // A pair given twice keeps the later rule, as Hugging Face's HashMap collect does.
  void insert(std::int32_t a, std::int32_t b, rule r) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    const std::uint64_t k = key(a, b);
    for (std::size_t i = home(k);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].k == k) { slots_[i].r = r; return; }
      if (slots_[i].k == empty_key) { slots_[i] = {k, r}; ++size_; return; }
    }
  }

  const rule* find(std::int32_t a, std::int32_t b) const noexcept {
    const std::uint64_t k = key(a, b);
    for (std::size_t i = home(k);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].k == k) return &slots_[i].r;
      if (slots_[i].k == empty_key) return nullptr;
    }
  }

  std::size_t size() const noexcept { return size_; }

 private:
  struct slot {
    std::uint64_t k;
    rule r;
  };
  // Ids are non-negative, so no real pair has all 64 bits set.
  static constexpr std::uint64_t empty_key = ~std::uint64_t{0};
  static std::uint64_t key(std::int32_t a, std::int32_t b) noexcept {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
  }
  std::size_t home(std::uint64_t k) const noexcept {
    // Fibonacci hashing: the high bits of the product are well mixed even for sequential ids.
    return static_cast<std::size_t>((k * 0x9E3779B97F4A7C15ull) >> 32) & (slots_.size() - 1);
  }
  void grow() {
    std::vector<slot> old = std::move(slots_);
    slots_.assign(old.size() * 2, slot{empty_key, {0, 0}});
    size_ = 0;
    for (const slot& s : old)
      if (s.k != empty_key) insert(static_cast<std::int32_t>(s.k >> 32), static_cast<std::int32_t>(s.k & 0xFFFFFFFFu), s.r);
  }

  std::vector<slot> slots_;
  std::size_t size_ = 0;
};

// Single-character tokens keyed by their UTF-8 bytes packed into 32 bits (a character has at most
// four bytes and its lead byte fixes the length, so the key is unique).
using char_id_map = std::unordered_map<std::uint32_t, std::int32_t>;
inline std::uint32_t char_key(std::string_view utf8_char) noexcept {
  std::uint32_t k = 0;
  for (const char c : utf8_char) k = (k << 8) | static_cast<unsigned char>(c);
  return k;
}

class bpe_model {
 public:
  // byte_ids[b]: id of the token for byte b (every byte must have one): the byte-level token, or
  // with `by_char`, the "<0x..>" fallback token. char_ids (with `by_char` only): the id of each
  // single-character token.
  bpe_model(std::array<std::int32_t, 256> byte_ids, merge_table merges, bool by_char = false, char_id_map char_ids = {})
      : byte_ids_(byte_ids), merges_(std::move(merges)), by_char_(by_char), char_ids_(std::move(char_ids)) {}

  // Appends the ids of one word (one pre-tokenizer piece, well-formed UTF-8 when `by_char`) to `out`.
  void encode_word(std::string_view word, std::vector<std::int32_t>& out) const {
    if (word.size() == 1 && !by_char_) { out.push_back(byte_ids_[static_cast<unsigned char>(word[0])]); return; }
    if (word.empty()) return;
    if (word.size() > max_cached_word) { merge(word, out); return; }
    word_cache& cache = word_cache::for_model(serial_);
    if (cache.find(word, out)) return;
    const std::size_t first = out.size();
    merge(word, out);
    cache.insert(word, std::span<const std::int32_t>(out.data() + first, out.size() - first));
  }

  const merge_table& merges() const noexcept { return merges_; }

 private:
  // Long words are rare and would crowd the cache out; memory stays bounded either way.
  static constexpr std::size_t max_cached_word = 64;

  // Repeated words skip the merge loop. The cache is per thread, so a lookup takes no lock (a
  // mutex here cost a third of the encode time); it belongs to the model that used it last on
  // that thread, identified by a serial number that is never reused (an address could be).
  // Open addressing over flat arenas rather than std::unordered_map: no allocation per word and
  // one probe that compares a stored hash before any bytes (the map version took a fifth of the
  // encode time in its bucket walk).
  class word_cache {
   public:
    static word_cache& for_model(std::uint64_t serial) {
      thread_local word_cache cache;
      if (cache.owner_ != serial) {
        cache.clear();
        cache.owner_ = serial;
      }
      return cache;
    }
    bool find(std::string_view word, std::vector<std::int32_t>& out) const {
      if (slots_.empty()) return false;
      const std::uint64_t h = hash(word);
      for (std::size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
        const slot& s = slots_[i];
        if (s.hash == 0) return false;
        if (s.hash == h && word == std::string_view(keys_).substr(s.key_at, s.key_len)) {
          out.insert(out.end(), ids_.begin() + s.ids_at, ids_.begin() + s.ids_at + s.n_ids);
          return true;
        }
      }
    }
    // `word` is at most max_cached_word bytes, so it and its ids fit the 16-bit lengths.
    void insert(std::string_view word, std::span<const std::int32_t> ids) {
      // Dropping everything when full is crude but keeps the bound without per-entry bookkeeping;
      // the hot words of a text are back within a few lines.
      if (slots_.empty() || size_ >= max_entries) clear(), slots_.assign(2 * max_entries, slot{});
      const std::uint64_t h = hash(word);
      std::size_t i = h & (slots_.size() - 1);
      while (slots_[i].hash != 0) i = (i + 1) & (slots_.size() - 1);
      slots_[i] = {h, static_cast<std::uint32_t>(keys_.size()), static_cast<std::uint32_t>(ids_.size()),
                   static_cast<std::uint16_t>(word.size()), static_cast<std::uint16_t>(ids.size())};
      keys_.append(word);
      ids_.insert(ids_.end(), ids.begin(), ids.end());
      ++size_;
    }

   private:
    static constexpr std::size_t max_entries = 1u << 15;
    struct slot {
      std::uint64_t hash = 0;  // 0 marks an empty slot; hash() never returns it
      std::uint32_t key_at = 0, ids_at = 0;
      std::uint16_t key_len = 0, n_ids = 0;
    };
    // Eight bytes at a time with a multiply-xorshift mix: words are short, so speed matters more
    // than the last bit of quality.
    static std::uint64_t hash(std::string_view s) noexcept {
      std::uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
      std::size_t i = 0;
      for (; i + 8 <= s.size(); i += 8) {
        std::uint64_t w;
        std::memcpy(&w, s.data() + i, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
      }
      std::uint64_t w = 0;
      std::memcpy(&w, s.data() + i, s.size() - i);
      h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
      h ^= h >> 29;
      return h | 1;
    }
    void clear() {
      if (size_ != 0) std::fill(slots_.begin(), slots_.end(), slot{});
      keys_.clear();
      ids_.clear();
      size_ = 0;
    }

    std::uint64_t owner_ = 0;
    std::vector<slot> slots_;  // allocated on first insert: threads that never encode pay nothing
    std::string keys_;
    std::vector<std::int32_t> ids_;
    std::size_t size_ = 0;
  };

  static std::uint64_t next_serial() noexcept {
    static std::atomic<std::uint64_t> counter{0};
    return ++counter;
  }

  struct symbol {
    std::int32_t id;
    std::int32_t prev;  // index of the previous live symbol, -1 at the start
    std::int32_t next;  // index of the next live symbol, -1 at the end
    bool alive;
  };

  // The word's symbols before any merge: its bytes, or its characters (byte_fallback).
  void initial_ids(std::string_view word, std::vector<std::int32_t>& ids) const {
    ids.clear();
    if (!by_char_) {
      for (const char c : word) ids.push_back(byte_ids_[static_cast<unsigned char>(c)]);
      return;
    }
    for (std::size_t i = 0; i < word.size();) {
      const std::size_t len = next_utf8_unit(word, i).size;
      if (const auto it = char_ids_.find(char_key(word.substr(i, len))); it != char_ids_.end()) {
        ids.push_back(it->second);
      } else {
        for (std::size_t k = i; k < i + len; ++k) ids.push_back(byte_ids_[static_cast<unsigned char>(word[k])]);
      }
      i += len;
    }
  }

  void merge(std::string_view word, std::vector<std::int32_t>& out) const {
    // Scratch reused across calls on this thread: encoding allocates nothing per word.
    thread_local std::vector<symbol> sym;
    thread_local std::vector<std::int32_t> ids;
    thread_local std::vector<std::uint64_t> heap;  // (rank << 32) | position, a min-heap
    initial_ids(word, ids);
    const auto n = static_cast<std::int32_t>(ids.size());
    if (n == 0) return;
    sym.resize(ids.size());
    heap.clear();
    for (std::int32_t i = 0; i < n; ++i) sym[i] = {ids[i], i - 1, i + 1 < n ? i + 1 : -1, true};
    const auto push_pair = [&](std::int32_t left) {
      if (left < 0 || sym[left].next < 0) return;
      if (const merge_table::rule* r = merges_.find(sym[left].id, sym[sym[left].next].id)) {
        heap.push_back((static_cast<std::uint64_t>(r->rank) << 32) | static_cast<std::uint32_t>(left));
        std::push_heap(heap.begin(), heap.end(), std::greater<>{});
      }
    };
    for (std::int32_t i = 0; i + 1 < n; ++i) push_pair(i);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
      const std::uint64_t top = heap.back();
      heap.pop_back();
      const auto rank = static_cast<std::int32_t>(top >> 32);
      const auto left = static_cast<std::int32_t>(top & 0xFFFFFFFFu);
      // Entries go stale when a neighbour merged since they were pushed: the pair at `left` now
      // is checked, and the entry counts only if it is still the same rule (ranks are unique).
      if (!sym[left].alive || sym[left].next < 0) continue;
      const std::int32_t right = sym[left].next;
      const merge_table::rule* r = merges_.find(sym[left].id, sym[right].id);
      if (r == nullptr || r->rank != rank) continue;
      sym[left].id = r->merged;
      sym[right].alive = false;
      sym[left].next = sym[right].next;
      if (sym[right].next >= 0) sym[sym[right].next].prev = left;
      push_pair(sym[left].prev);
      push_pair(left);
    }
    for (std::int32_t i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
  }

  std::array<std::int32_t, 256> byte_ids_;
  merge_table merges_;
  bool by_char_;
  char_id_map char_ids_;
  std::uint64_t serial_ = next_serial();
};

}  // namespace fused::io::tokenization
