// Static shapes whose dims are either constants or symbols bound per mode.
//
// A dim is `n * symbol` (symbol 0 means the constant 1), e.g. {896} or {1, sym::seq}. Symbols are
// generic small integers: a model names them (Qwen2: 1 = tokens in this call, 2 = KV capacity) and a
// mode binds them to numbers. Equality is structural, so shape rules compare dims without binding.
#pragma once
#include <array>
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
  std::array<std::int64_t, max_symbols> value{1, 0, 0, 0};
  constexpr std::int64_t operator()(const dim& d) const { return d.n * value[d.symbol]; }
};

struct shape {
  int rank = 0;
  std::array<dim, max_rank> d{};

  constexpr shape() = default;
  template <class... D>
  constexpr explicit shape(D... ds) : rank(sizeof...(D)), d{to_dim(ds)...} {}

  constexpr const dim& operator[](int i) const { return d[static_cast<std::size_t>(i)]; }
  constexpr dim& operator[](int i) { return d[static_cast<std::size_t>(i)]; }
  constexpr const dim& back() const { return d[static_cast<std::size_t>(rank - 1)]; }

  constexpr std::int64_t elements(const binding& b) const {
    std::int64_t e = 1;
    for (int i = 0; i < rank; ++i) e *= b((*this)[i]);
    return e;
  }
  constexpr bool symbolic() const {
    for (int i = 0; i < rank; ++i)
      if ((*this)[i].symbol != 0) return true;
    return false;
  }
  friend constexpr bool operator==(const shape& a, const shape& b) {
    if (a.rank != b.rank) return false;
    for (int i = 0; i < a.rank; ++i)
      if (!(a[i] == b[i])) return false;
    return true;
  }

 private:
  static constexpr dim to_dim(dim x) { return x; }
  static constexpr dim to_dim(std::int64_t x) { return {x, 0}; }
  static constexpr dim to_dim(int x) { return {x, 0}; }
};

}  // namespace fused
