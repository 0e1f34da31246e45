// Sorting in constant evaluation. std::sort is the wrong tool there: g++ 12 and clang 16 evaluate it
// at about 0.2 s per 1000 ints (each of its iterator and comparator wrappers is a call the evaluator
// interprets), 6x a counting sort and 3x an insertion-merge sort over raw pointers. The spine's keys
// are small integers (schedule positions, levels) or values with few distinct members (byte sizes),
// so counting sorts fit; short ranges use insertion sort. All of these are stable.
#pragma once
#include <cstddef>

#include "vector.hpp"

namespace fused {

// 0..n-1 ordered by key[i] ascending, equal keys in index order. Keys must lie in [0, range).
constexpr scratch<int> counting_order(const int* key, std::size_t n, std::size_t range) {
  scratch<int> start(range + 1, 0);
  int* const st = start.data();
  for (std::size_t i = 0; i < n; ++i) ++st[key[i] + 1];
  for (std::size_t k = 1; k <= range; ++k) st[k] += st[k - 1];
  scratch<int> order(n);
  int* const out = order.data();
  for (std::size_t i = 0; i < n; ++i) out[st[key[i]]++] = static_cast<int>(i);
  return order;
}

// Stable insertion sort of [first, last) by `less`: for short or nearly sorted ranges.
template <class T, class Less>
constexpr void insertion_sort(T* first, T* last, Less less) {
  for (T* i = first; i != last; ++i) {
    T x = *i;
    T* j = i;
    while (j != first && less(x, *(j - 1))) {
      *j = *(j - 1);
      --j;
    }
    *j = x;
  }
}

}  // namespace fused
