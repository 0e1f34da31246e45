// Static shapes whose dims are either constants or symbols bound per mode.
//
// A dim is `n * symbol` (symbol 0 means the constant 1), e.g. {896} or {1, sym::seq}. Symbols are
// generic small integers: a model names them (Qwen2: 1 = tokens in this call, 2 = KV capacity) and a
// mode binds them to numbers. Equality is structural, so shape rules compare dims without binding.
//
// Compile-cost note: the arrays here (and in graph/program.hpp's step and attrs) are C arrays, not
// std::array. The constexpr pipeline reads them in every loop, and g++ 12's evaluator spends about
// 35 000 instructions on a call to std::array's data() or operator[] (nested library calls) against
// about 1 000 for a direct element read (docs/COMPILE_TIME.md); indexing them directly, not through a
// pointer into them, is cheapest too.
#pragma once
#include <cstdint>

namespace fused {

inline constexpr int max_rank = 4;
inline constexpr int max_symbols = 4;

struct dim {
  std::int64_t n = 0;
  std::uint8_t symbol = 0;  // 0: constant

  friend constexpr bool operator==(const dim&, const dim&) = default;
};

constexpr dim sym(std::uint8_t s, std::int64_t n = 1) { return {n, s}; }

// Values of the symbols for one mode; index 0 is the constant 1.
struct binding {
  std::int64_t value[max_symbols]{1, 0, 0, 0};
  constexpr std::int64_t operator()(const dim& d) const { return d.n * value[d.symbol]; }
  friend constexpr bool operator==(const binding&, const binding&) = default;
};

struct shape {
  int rank = 0;
  dim d[max_rank]{};

  constexpr shape() = default;
  template <class... D>
  constexpr explicit shape(D... ds) : rank(sizeof...(D)), d{to_dim(ds)...} {}

  constexpr const dim& operator[](int i) const { return d[i]; }
  constexpr dim& operator[](int i) { return d[i]; }
  constexpr const dim& back() const { return d[rank - 1]; }

  constexpr std::int64_t elements(const binding& b) const {
    std::int64_t e = 1;
    for (int i = 0; i < rank; ++i) e *= d[i].n * b.value[d[i].symbol];
    return e;
  }
  constexpr bool symbolic() const {
    for (int i = 0; i < rank; ++i)
      if (d[i].symbol != 0) return true;
    return false;
  }
  friend constexpr bool operator==(const shape& a, const shape& b) {
    if (a.rank != b.rank) return false;
    for (int i = 0; i < a.rank; ++i)
      if (!(a.d[i] == b.d[i])) return false;
    return true;
  }

 private:
  static constexpr dim to_dim(dim x) { return x; }
  static constexpr dim to_dim(std::int64_t x) { return {x, 0}; }
  static constexpr dim to_dim(int x) { return {x, 0}; }
};

// How an input broadcast (NumPy's rule, dims aligned at the last) to the shape `out` is read, when
// it can be as a span: element i of the result reads input element (i / inner) % extent. That holds
// when the input's dims other than 1 are contiguous (a same-shape input, a scalar, a row, a column);
// `ok` is false otherwise. Both under binding `b`.
struct broadcast_span {
  std::int64_t inner = 1, extent = 1;
  bool ok = false;
};
constexpr broadcast_span span_of(const shape& in, const shape& out, const binding& b) {
  int first = -1, last = -1;  // the out dims the input does not stretch (and that are not 1)
  for (int j = 0; j < out.rank; ++j) {
    const int k = j - (out.rank - in.rank);
    const std::int64_t n = k >= 0 ? b(in[k]) : 1, size = b(out[j]);
    if (n != 1 && n != size) return {};
    if (n != 1) {
      if (first < 0) first = j;
      last = j;
    }
  }
  broadcast_span s{.ok = true};
  for (int j = first; j >= 0 && j <= last; ++j) {
    const int k = j - (out.rank - in.rank);
    if (b(in[k]) != b(out[j])) return {};  // a stretched dim between two kept ones
    s.extent *= b(out[j]);
  }
  for (int j = last + 1; j < out.rank && last >= 0; ++j) s.inner *= b(out[j]);
  return s;
}

}  // namespace fused
