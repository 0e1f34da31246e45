// Shared helpers for the kernel tests: deterministic random data, unaligned buffers, the ISA loop.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "fk_kernels.h"

namespace fkt {

inline const fk_isa kAllIsas[] = {FK_ISA_SCALAR, FK_ISA_AVX2, FK_ISA_AVX512BF16, FK_ISA_AMX};

// Runs body once per ISA path the CPU has (forced with fk_isa_force); a missing one is reported, not failed.
inline void for_each_isa(const std::function<void(fk_isa)>& body) {
  const fk_isa detected = fk_isa_detect();
  for (fk_isa isa : kAllIsas) {
    if (!fk_isa_force(isa)) {
      MESSAGE("skipping path " << std::string(fk_isa_name(isa)) << ": this CPU/OS lacks it (detected: " << std::string(fk_isa_name(detected)) << ")");
      continue;
    }
    INFO("path " << std::string(fk_isa_name(isa)));
    body(isa);
  }
  fk_isa_force(detected);
}

// Restores the thread count on scope exit.
struct threads_guard {
  int saved = fk_get_threads();
  ~threads_guard() { fk_set_threads(saved); }
};

// While alive, kernels fork for any work of two or more items: tests of thread-count independence
// on small shapes then run the split they mean to test.
struct forks_on_any_work {
  long long saved = fk__parallel_min_work();
  forks_on_any_work() { fk__set_parallel_min_work(0); }
  ~forks_on_any_work() { fk__set_parallel_min_work(saved); }
  forks_on_any_work(const forks_on_any_work&) = delete;
  forks_on_any_work& operator=(const forks_on_any_work&) = delete;
};

// A buffer whose data() is deliberately misaligned by one element (4 bytes for float, 2 for bf16),
// so no SIMD path can rely on 16/32/64-byte alignment.
template <class T>
struct unaligned {
  std::vector<T> storage;
  std::size_t n;
  explicit unaligned(std::size_t count, T fill = T{}) : storage(count + 17, fill), n(count) {}
  T* data() { return storage.data() + 1; }
  const T* data() const { return storage.data() + 1; }
  T& operator[](std::size_t i) { return data()[i]; }
  const T& operator[](std::size_t i) const { return data()[i]; }
  std::size_t size() const { return n; }
};

inline float bf(uint16_t h) { return fk_bf16_to_f32_1(h); }

inline std::mt19937& rng() {
  static std::mt19937 g(12345);
  return g;
}
inline void fill_f32(float* p, std::size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  for (std::size_t i = 0; i < n; ++i) p[i] = d(rng());
}
inline void fill_bf16(uint16_t* p, std::size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  for (std::size_t i = 0; i < n; ++i) p[i] = fk_f32_to_bf16_1(d(rng()));
}

constexpr double kU = 1.0 / 16777216.0;  // 2^-24: unit roundoff of f32
constexpr double kUbf = 1.0 / 256.0;     // 2^-8: unit roundoff of bf16 (p = 8 significant bits, u = 2^-p)

}  // namespace fkt
