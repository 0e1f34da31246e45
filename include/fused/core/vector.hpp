// Arrays made in constant evaluation.
//
// scratch<T>: a heap array whose length is fixed when it is made, the working storage of the
// constexpr pipeline (scheduler, planner, verifier, sorts). Not std::vector: g++ 12 evaluates one
// push_back in about 18 us (a dozen library calls, each interpreted), a store through new T[n]'s
// pointer in about 2 us, so the pipeline fills arrays by index (docs/COMPILE_TIME.md). The same code
// runs at run time, where it is an ordinary new[]/delete[] array.
// (Nor `std::vector<T>(n, v)` or `resize(n)`: for trivial T, libstdc++ fills the new storage with
// std::fill before any element's lifetime begins, which g++ accepts and clang rejects in a constant
// expression. For a T with default member initializers, `std::vector<T>(n)` then a store per element
// is fine, and cheaper than n push_backs: the planner makes its buffers so.)
#pragma once
#include <cstddef>

namespace fused {

template <class T>
class scratch {
 public:
  constexpr scratch() = default;
  // n elements, default-initialized: for a scalar T, write each before reading it (constant
  // evaluation rejects a read of one never written).
  constexpr explicit scratch(std::size_t n) : p_(n ? new T[n] : nullptr), n_(n) {}
  constexpr scratch(std::size_t n, const T& value) : scratch(n) {
    for (std::size_t i = 0; i < n; ++i) p_[i] = value;
  }
  constexpr scratch(scratch&& o) noexcept : p_(o.p_), n_(o.n_) {
    o.p_ = nullptr;
    o.n_ = 0;
  }
  constexpr scratch& operator=(scratch&& o) noexcept {
    if (this != &o) {
      delete[] p_;
      p_ = o.p_;
      n_ = o.n_;
      o.p_ = nullptr;
      o.n_ = 0;
    }
    return *this;
  }
  scratch(const scratch&) = delete;
  scratch& operator=(const scratch&) = delete;
  constexpr ~scratch() { delete[] p_; }

  constexpr T* data() { return p_; }
  constexpr const T* data() const { return p_; }
  constexpr std::size_t size() const { return n_; }
  constexpr T& operator[](std::size_t i) { return p_[i]; }
  constexpr const T& operator[](std::size_t i) const { return p_[i]; }
  constexpr T* begin() { return p_; }
  constexpr T* end() { return p_ + n_; }
  constexpr const T* begin() const { return p_; }
  constexpr const T* end() const { return p_ + n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace fused
