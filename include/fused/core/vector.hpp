// Vectors made in constant evaluation. Not `std::vector<T>(n, v)` or `resize(n)`: for trivial T,
// libstdc++ fills the new storage with std::fill before any element's lifetime begins, which g++
// accepts and clang rejects in a constant expression. push_back starts each lifetime properly.
#pragma once
#include <cstddef>
#include <vector>

namespace fused {

template <class T>
constexpr std::vector<T> filled(std::size_t n, const T& value) {
  std::vector<T> v;
  v.reserve(n);
  for (std::size_t i = 0; i < n; ++i) v.push_back(value);
  return v;
}

// 0, 1, ..., n-1
constexpr std::vector<int> iota_vector(std::size_t n) {
  std::vector<int> v;
  v.reserve(n);
  for (std::size_t i = 0; i < n; ++i) v.push_back(static_cast<int>(i));
  return v;
}

}  // namespace fused
