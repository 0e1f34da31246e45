// What every executor of a planned decoder shares: the caller-visible contract of prefill and
// decode over one KV cache — the position, the capacity checks, token-id validation, where the
// token ids go in and the logits come out. Generic: it knows plans and calls, not attention.
#pragma once
#include <sys/sysinfo.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>  // std::exchange

#include "invoke.hpp"

namespace fused::runtime {

// Where one mode's program reads its token ids and writes its logits, in its arena.
struct io_layout {
  std::int64_t ids_offset = 0;
  std::int64_t logits_offset = 0;
  rows_t logits_rows{};  // rows of the logits output (1 when only the last position is kept)
  std::int64_t vocab = 0;
};

// Finds the input "input_ids" and the tensor `logits` of a plan (tensors and buffers ranges).
template <class Tensors, class Buffers>
constexpr io_layout find_io(const Tensors& tensors, const Buffers& buffers, tensor_id logits, const binding& b, std::uint8_t dynamic) {
  io_layout io{};
  for (const auto& t : tensors)
    if (t.kind == role::input && t.name.str().view() == "input_ids") io.ids_offset = buffers[static_cast<std::size_t>(t.id)].offset;
  const auto& t = tensors[static_cast<std::size_t>(logits)];
  io.logits_offset = buffers[static_cast<std::size_t>(logits)].offset;
  const dim& r = t.shp[0];
  io.logits_rows = r.symbol == dynamic && r.symbol ? rows_t{r.n, r.symbol} : rows_t{b(r), 0};
  io.vocab = t.shp[1].n;
  return io;
}

// Thrown when a call would go past the KV capacity or the model's positions: nothing is written.
struct capacity_error : std::length_error {
  using std::length_error::length_error;
};

// The machine's physical memory in bytes (0 where the system does not say).
inline double physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}
// Its memory and swap together (0 where the system does not say): the most any allocation can hold.
inline double memory_and_swap_bytes() {
  struct sysinfo info {};
  if (::sysinfo(&info) != 0) return 0.0;
  return (static_cast<double>(info.totalram) + static_cast<double>(info.totalswap)) * static_cast<double>(info.mem_unit);
}

// 64-byte-aligned, zero-filled bytes owned by a model that was not given caller-owned regions. More
// than the machine's memory and swap is refused (std::length_error) before a page is touched: the
// allocator may grant it, and zeroing it would end the process by the OOM killer, not by an error.
class aligned_bytes {
 public:
  aligned_bytes() = default;
  explicit aligned_bytes(std::size_t n) : p_(n ? static_cast<std::byte*>(::operator new(checked(n), std::align_val_t{64})) : nullptr), n_(n) {
    if (p_) std::memset(p_, 0, n);
  }
  aligned_bytes(aligned_bytes&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  aligned_bytes& operator=(aligned_bytes&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  ~aligned_bytes() { release(); }
  std::byte* data() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  static std::size_t checked(std::size_t n) {
    if (const double memory = memory_and_swap_bytes(); memory > 0 && static_cast<double>(n) > memory) {
      char figures[128];
      std::snprintf(figures, sizeof figures, "cannot allocate %.1f GiB: this machine has %.1f GiB of memory and swap", static_cast<double>(n) / (1 << 30),
                    memory / (1 << 30));
      throw std::length_error(figures);
    }
    return n;
  }
  void release() {
    if (p_) ::operator delete(p_, std::align_val_t{64});
    p_ = nullptr;
  }
  std::byte* p_ = nullptr;
  std::size_t n_ = 0;
};

// The limits one session enforces.
struct session_limits {
  std::int64_t max_tokens = 1;  // most tokens one prefill call runs (longer prompts are chunked)
  std::int64_t capacity = 1;    // KV-cache positions
  std::int64_t vocab = 1;
  std::uint8_t tokens_symbol = 1;
};

// The shared driver. `Exec` is any callable `void(bool decode, const regions&, const call_dims&)`
// that runs every call of one mode; the models pass their own (unrolled or looped).
class session {
 public:
  session() = default;
  session(session_limits lim, io_layout prefill_io, io_layout decode_io, regions r)
      : lim_(lim), io_{prefill_io, decode_io}, r_(r) {}

  std::int64_t position() const { return pos_; }
  std::int64_t capacity() const { return lim_.capacity; }
  std::int64_t max_tokens() const { return lim_.max_tokens; }
  std::int64_t vocab_size() const { return lim_.vocab; }
  const regions& memory() const { return r_; }
  // Forgets the context: the next prefill starts at position 0 (the cache is overwritten as it goes).
  void reset() { pos_ = 0; }
  // Keeps the first `pos` cached positions and forgets the rest: the next call writes from there.
  // For a conversation that shares only a prefix with what is cached (a server reusing a session).
  void rewind(std::int64_t pos) {
    if (pos < 0 || pos > pos_)
      throw std::out_of_range("rewind to position " + std::to_string(pos) + ": the cache holds " + std::to_string(pos_));
    pos_ = pos;
  }
  // The same limits and layouts over another state region (another KV cache), sharing the weights
  // and the arena: calls on the two may interleave but must not overlap.
  session with_state(std::byte* state) const {
    return session(lim_, io_[0], io_[1], {r_.weights, state, r_.arena});
  }

  // Runs `ids` at the current position, in chunks of at most max_tokens, and returns the logits of
  // the last chunk ([1, V] when the plan keeps only the last position; [rows, V] otherwise).
  template <class Exec>
  std::span<const float> prefill(std::span<const std::int32_t> ids, Exec&& exec) {
    if (ids.empty()) throw std::invalid_argument("prefill: no tokens");
    check(ids, static_cast<std::int64_t>(ids.size()));
    std::span<const float> logits;
    for (std::size_t at = 0; at < ids.size();) {
      const std::size_t n = std::min(ids.size() - at, static_cast<std::size_t>(lim_.max_tokens));
      logits = run(false, ids.subspan(at, n), exec);
      at += n;
    }
    return logits;
  }

  // One token at the current position; returns its logits [V].
  template <class Exec>
  std::span<const float> decode(std::int32_t id, Exec&& exec) {
    const std::int32_t one[1] = {id};
    check(one, 1);
    return run(true, one, exec);
  }

 private:
  void check(std::span<const std::int32_t> ids, std::int64_t n) const {
    if (pos_ + n > lim_.capacity)
      throw capacity_error("the KV cache holds " + std::to_string(lim_.capacity) + " positions; " + std::to_string(pos_) +
                           " are used and this call needs " + std::to_string(n) + " more");
    for (std::size_t i = 0; i < ids.size(); ++i)
      if (ids[i] < 0 || ids[i] >= lim_.vocab)
        throw std::invalid_argument("token id " + std::to_string(ids[i]) + " (at index " + std::to_string(i) +
                                    ") is outside the vocabulary [0, " + std::to_string(lim_.vocab) + ")");
  }
  template <class Exec>
  std::span<const float> run(bool decode, std::span<const std::int32_t> ids, Exec& exec) {
    const io_layout& io = io_[decode ? 1 : 0];
    std::memcpy(r_.arena + io.ids_offset, ids.data(), ids.size_bytes());
    call_dims d{};
    d.b.value[lim_.tokens_symbol] = static_cast<std::int64_t>(ids.size());
    d.pos0 = pos_;
    exec(decode, r_, d);
    pos_ += static_cast<std::int64_t>(ids.size());
    const auto rows = static_cast<std::size_t>(io.logits_rows.n * d.b.value[io.logits_rows.symbol]);
    return {reinterpret_cast<const float*>(r_.arena + io.logits_offset), rows * static_cast<std::size_t>(io.vocab)};
  }

  session_limits lim_{};
  io_layout io_[2]{};
  regions r_{};
  std::int64_t pos_ = 0;
};

}  // namespace fused::runtime
