// Shared by the `fused bench` subcommands: timing, medians, and this machine's read-bandwidth
// ceiling (a streaming SIMD sum, N threads each over a fixed contiguous share; on an AVX-512 machine
// the better of a 256-bit and a 512-bit sum, because the two differ: on Sapphire Rapids one core
// streams ~30 GB/s through ymm loads and ~24 GB/s through zmm loads).
#pragma once
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

#include "fk_kernels.h"

// OpenMP is optional in this project: without it every region below runs on one thread.
#ifdef _OPENMP
#define BENCH_OMP(x) _Pragma(#x)
#else
#define BENCH_OMP(x)
#endif

namespace fused::bench {

using clk = std::chrono::steady_clock;

template <class F>
inline double seconds(F&& f) {
  const auto a = clk::now();
  f();
  return std::chrono::duration<double>(clk::now() - a).count();
}
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Keeps results observable so the optimizer cannot drop the measured work.
inline volatile float g_sink;

#if FK_X86
FK_TARGET_AVX512 inline float stream_sum_avx512(const float* p, std::size_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (std::size_t i = 0; i + 64 <= n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_loadu_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_loadu_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_loadu_ps(p + i + 48));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}
FK_TARGET_AVX2 inline float stream_sum_avx2(const float* p, std::size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (std::size_t i = 0; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
  }
  return fk__hsum256(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}
#endif

// width: 512 or 256 (the widest the CPU has is used when it asks for more).
inline float stream_sum(const float* p, std::size_t n, int width) {
#if FK_X86
  if (width >= 512 && fk_isa_active() >= FK_ISA_AVX512BF16) return stream_sum_avx512(p, n);
  if (fk_isa_active() >= FK_ISA_AVX2) return stream_sum_avx2(p, n);
#endif
  (void)width;
  float s = 0;
  for (std::size_t i = 0; i < n; ++i) s += p[i];
  return s;
}

// Read bandwidth in GB/s of one pass with one stream width.
inline double read_bandwidth_at(const float* buf, std::size_t n, int nt, int width) {
  const double t = seconds([&] {
    float total = 0;
    BENCH_OMP(omp parallel for schedule(static) num_threads(nt) reduction(+ : total))
    for (int c = 0; c < nt; ++c) {
      const std::size_t lo = n / nt * c, hi = c + 1 == nt ? n : n / nt * (c + 1);
      total += stream_sum(buf + lo, hi - lo, width);
    }
    g_sink = total;
  });
  return static_cast<double>(n) * sizeof(float) / t / 1e9;
}

// Read bandwidth in GB/s: the better of a 512-bit and a 256-bit pass (one pass where the CPU has
// only one of them).
inline double read_bandwidth(const float* buf, std::size_t n, int nt) {
  const double b256 = read_bandwidth_at(buf, n, nt, 256);
#if FK_X86
  if (fk_isa_active() >= FK_ISA_AVX512BF16) return std::max(b256, read_bandwidth_at(buf, n, nt, 512));
#endif
  return b256;
}

}  // namespace fused::bench
