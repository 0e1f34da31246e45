// Shared by the `fused bench` subcommands: timing, medians, and this machine's read-bandwidth
// ceiling (a streaming SIMD sum, N threads each over a fixed contiguous share): the best of a 256-bit
// sum, 4- and 8-stream 256-bit sums and, on an AVX-512 machine, a 512-bit sum, because they differ: on
// Sapphire Rapids one core streams faster through ymm loads than through zmm loads; on Zen 3 one core
// reads faster as 8 concurrent streams than as one.
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
// S streams at once: the range is cut into S slabs read side by side, as the GEMV row kernel reads a
// thread's weight rows (fk__rows_avx2); what is left past the S slabs, as one stream. A CPU whose
// prefetchers follow several streams reads faster this way (Zen 3 most with 8, Zen 5 with 4), and a
// kernel that reads several weight rows at once can reach it. Ahead > 0: each stream also requests its
// line Ahead floats ahead, as the GEMV row kernel does (Zen 5 reads faster so).
template <std::size_t S, std::size_t Ahead = 0>
FK_TARGET_AVX2 inline float stream_sum_avx2_streams(const float* p, std::size_t n) {
  const std::size_t slab = n / S / 16 * 16;
  __m256 a[S];
  for (auto& v : a) v = _mm256_setzero_ps();
  for (std::size_t i = 0; i < slab; i += 16) {
    if constexpr (Ahead > 0)
      for (std::size_t s = 0; s < S; ++s) _mm_prefetch(reinterpret_cast<const char*>(p + s * slab + i + Ahead), _MM_HINT_T0);
#pragma GCC unroll 8
    for (std::size_t s = 0; s < S; ++s)
      a[s] = _mm256_add_ps(a[s], _mm256_add_ps(_mm256_loadu_ps(p + s * slab + i), _mm256_loadu_ps(p + s * slab + i + 8)));
  }
  for (std::size_t s = 1; s < S; ++s) a[0] = _mm256_add_ps(a[0], a[s]);
  return fk__hsum256(a[0]) + stream_sum_avx2(p + S * slab, n - S * slab);
}
#endif

// How a pass reads: one stream of 256-bit or of 512-bit loads, or 4 or 8 concurrent 256-bit streams
// (4 also with each line requested 1 KiB ahead). A CPU without the instructions for one runs the best
// it has instead.
enum class stream_kind { ymm, zmm, ymm_x4, ymm_x4_ahead, ymm_x8 };

inline float stream_sum(const float* p, std::size_t n, stream_kind kind) {
#if FK_X86
  if (kind == stream_kind::ymm_x4 && fk_isa_active() >= FK_ISA_AVX2) return stream_sum_avx2_streams<4>(p, n);
  if (kind == stream_kind::ymm_x4_ahead && fk_isa_active() >= FK_ISA_AVX2) return stream_sum_avx2_streams<4, 256>(p, n);
  if (kind == stream_kind::ymm_x8 && fk_isa_active() >= FK_ISA_AVX2) return stream_sum_avx2_streams<8>(p, n);
  if (kind == stream_kind::zmm && fk_isa_active() >= FK_ISA_AVX512BF16) return stream_sum_avx512(p, n);
  if (fk_isa_active() >= FK_ISA_AVX2) return stream_sum_avx2(p, n);
#endif
  (void)kind;
  float s = 0;
  for (std::size_t i = 0; i < n; ++i) s += p[i];
  return s;
}

// Read bandwidth in GB/s of one pass of one kind.
inline double read_bandwidth_at(const float* buf, std::size_t n, int nt, stream_kind kind) {
  const double t = seconds([&] {
    float total = 0;
    BENCH_OMP(omp parallel for schedule(static) num_threads(nt) reduction(+ : total))
    for (int c = 0; c < nt; ++c) {
      const std::size_t lo = n / nt * c, hi = c + 1 == nt ? n : n / nt * (c + 1);
      total += stream_sum(buf + lo, hi - lo, kind);
    }
    g_sink = total;
  });
  return static_cast<double>(n) * sizeof(float) / t / 1e9;
}

// Read bandwidth in GB/s: the best of a 256-bit pass, 4-stream (plain and requesting ahead) and
// 8-stream 256-bit passes and (where the CPU has it) a 512-bit pass.
inline double read_bandwidth(const float* buf, std::size_t n, int nt) {
  double b = read_bandwidth_at(buf, n, nt, stream_kind::ymm);
#if FK_X86
  if (fk_isa_active() >= FK_ISA_AVX2) {
    b = std::max(b, read_bandwidth_at(buf, n, nt, stream_kind::ymm_x4));
    b = std::max(b, read_bandwidth_at(buf, n, nt, stream_kind::ymm_x4_ahead));
    b = std::max(b, read_bandwidth_at(buf, n, nt, stream_kind::ymm_x8));
  }
  if (fk_isa_active() >= FK_ISA_AVX512BF16) b = std::max(b, read_bandwidth_at(buf, n, nt, stream_kind::zmm));
#endif
  return b;
}

}  // namespace fused::bench
