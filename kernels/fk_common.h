/* fk_common.h: shared plumbing for the fused kernels (C11 and C++20 compatible).
 *
 * Every kernel is one function with a run-time ISA ladder (AMX -> AVX-512 BF16 -> AVX2+FMA -> scalar),
 * ggml style. The library is built WITHOUT -march=native, so each SIMD body lives in its own function
 * carrying a target attribute; the dispatcher calls it only after fk_isa_active() says the CPU has it.
 *
 * Linkage: `static inline` in C (the generated C is one translation unit); plain `inline` in C++ so that
 * the ISA/thread state (function-local statics in fk_cpu.h) is ONE object shared by every translation unit
 * of a program, and fk_set_threads() in one file governs the kernels called from another. */
#ifndef FK_COMMON_H
#define FK_COMMON_H

#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
#if defined(FK_KERNELS_IMPLEMENTATION)
/* Kernels compiled once: this unit (kernels/fk_kernels_once.cpp) holds the program's one definition. */
#define FK_API
#elif defined(FK_KERNELS_EXTERN)
#if defined(FK_AVX512_EMULATE) || defined(FK_AMX_EMULATE)
#error "FK_KERNELS_EXTERN would call the real kernels in place of this unit's emulated ones"
#endif
/* ... and the program's other units read the bodies and never compile them: a gnu_inline extern inline
 * function is never emitted, and one that cannot be inlined either is left to the definition above
 * (clang: noinline; g++, which refuses noinline beside gnu_inline, inlines no function whose
 * optimization attributes differ from its caller's). Each unit that calls the kernels would
 * otherwise compile them again: 12 s of g++ -O3, 26 s of clang -O1 under ASan. */
#if defined(__clang__)
#define FK_API extern inline __attribute__((gnu_inline, noinline))
#else
#define FK_API extern inline __attribute__((gnu_inline, optimize("O0")))
#endif
#else
#define FK_API inline
#endif
#else
#define FK_API static inline
#endif
/* The kernels' shared state (fk_cpu.h) is a function-local static: plain inline in every C++ unit, so
 * that the program holds one object whichever of the modes above its units use. */
#ifdef __cplusplus
#define FK_STATE_API inline
#else
#define FK_STATE_API static inline
#endif

#if defined(__x86_64__) || defined(_M_X64)
#define FK_X86 1
/* gcc 12's AVX-512 intrinsics build their "undefined" pass-through operands as `__m512 __Y = __Y;`,
 * which -Wmaybe-uninitialized reports at every inlined use (GCC PR 105593); silence it for them only. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#else
#define FK_X86 0
#endif

/* Per-function ISA targets (gcc and clang). AVX-512 BF16 implies the F/BW/VL/DQ subset every
 * Sapphire-Rapids-class CPU has; the detector checks all of them before allowing the path. */
#if FK_X86
#define FK_TARGET_AVX2   __attribute__((target("avx2,fma,f16c")))
#ifndef FK_AVX512_EMULATE
#define FK_TARGET_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#define FK_TARGET_AMX    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,amx-tile,amx-bf16")))
#else
/* TEST-ONLY (tests/kernels): the AVX-512 paths built for an AVX2 CPU, every AVX-512 intrinsic they use
 * replaced by a software model of the instruction, so that their blocking, masks, tails and data flow
 * are tested on CPUs without AVX-512. Never define it in a real build. */
#define FK_TARGET_AVX512 FK_TARGET_AVX2
#define FK_TARGET_AMX    FK_TARGET_AVX2
#include <fk_avx512_emulate.h>
#endif
#endif

/* FK_PARALLEL_LOOP(nthreads, for (...) statement): the loop, given whole, over nthreads OpenMP threads
 * with a static schedule. Results never depend on the thread count because every output element is
 * produced by exactly one iteration whose arithmetic does not depend on which thread runs it (block
 * boundaries are fixed multiples, never derived from the thread count).
 * With one thread the loop runs on the caller without entering OpenMP: libgomp takes a team of one
 * through a whole fork and join, futex wake included, about 1.2 us a call on the VMs measured, more
 * than a decode step's rmsnorm or add of 896 floats (docs/PERFORMANCE.md). A macro argument cannot hold
 * preprocessor lines: a loop whose body needs them calls a function. */
#ifdef _OPENMP
#include <omp.h>
#define FK_PRAGMA_(x) _Pragma(#x)
#define FK_PARALLEL_LOOP(nthreads, ...)                                           \
  do {                                                                            \
    if ((nthreads) > 1) {                                                         \
      FK_PRAGMA_(omp parallel for schedule(static) num_threads(nthreads))         \
      __VA_ARGS__                                                                 \
    } else {                                                                      \
      __VA_ARGS__                                                                 \
    }                                                                             \
  } while (0)
#else
#define FK_PARALLEL_LOOP(nthreads, ...) \
  do {                                  \
    (void)(nthreads);                   \
    __VA_ARGS__                         \
  } while (0)
#endif

/* Maximum head_dim supported by the attention/RoPE kernels (stack tiles are sized by it; Qwen2 uses
 * 64 and 128). Checked with assert() in debug builds. */
#define FK_MAX_HEAD_DIM 128

/* clang 16.0.6 segfaults at -O1 and above when it folds a 32-bit broadcast load into vdpbf16ps as an
 * embedded-broadcast operand (`_mm512_dpbf16_ps(acc, (__m512bh)_mm512_set1_epi32(*p), b)` is enough).
 * An empty asm that keeps the broadcast in a register prevents the fold; the GEMM needs the broadcast
 * in a register anyway (it feeds four vdpbf16ps), and gcc is left as it was. */
#if defined(__clang__) && !defined(FK_AVX512_EMULATE)
#define FK_CLANG_IN_REG(v) __asm__("" : "+v"(v))
#else
#define FK_CLANG_IN_REG(v) ((void)0)
#endif

#if defined(__GNUC__)
#define FK_ALWAYS_INLINE __attribute__((always_inline))
#else
#define FK_ALWAYS_INLINE
#endif

/* A loop over an array of vector registers (a register tile's accumulators, rows read at once) is
 * unrolled whatever the optimization level: g++ 12 at -O2, where the generated C and CI build, leaves
 * such loops rolled, so the array stays in memory and every FMA waits on a store and a reload. n bounds the trip count; the loops are meant for constant ones.
 * Not under AddressSanitizer: a check on every access of a fully unrolled tile made clang 16 take
 * 5 minutes over the kernels' unit (37 s rolled; docs/COMPILE_TIME.md), and speed is not what an
 * ASan build is for. The pragma changes no result. */
#define FK__PRAGMA(text) _Pragma(#text)
#if defined(__SANITIZE_ADDRESS__)
#define FK__ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FK__ASAN 1
#endif
#endif
#if (defined(__clang__) || defined(__GNUC__)) && !defined(FK__ASAN)
#define FK_UNROLL(n) FK__PRAGMA(GCC unroll n)
#else
#define FK_UNROLL(n)
#endif

/* ---- scalar bf16 <-> f32 (the reference every SIMD path must match bit for bit) ---------------- */
FK_API float fk_bf16_to_f32_1(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Round to nearest, ties to even. NaN stays NaN (quiet bit forced, so a NaN whose payload lives only
 * in the low 16 bits does not turn into infinity). Denormals are rounded like any other value. */
FK_API uint16_t fk_f32_to_bf16_1(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* ---- SIMD helpers shared by several kernels ----------------------------------------------------- */
#if FK_X86
/* p[i] = p[i] r[i] + c for i < n: one Horner step of a polynomial in each of n vectors. */
FK_TARGET_AVX512 static inline FK_ALWAYS_INLINE void fk__horner_step512(int n, __m512* p, const __m512* r, float c) {
  FK_UNROLL(8)
  for (int i = 0; i < n; ++i) p[i] = _mm512_fmadd_ps(p[i], r[i], _mm512_set1_ps(c));
}
/* exp(x): Cody-Waite range reduction x = n*ln2 + r, |r| <= ln2/2, then a degree-6 polynomial (Taylor,
 * max rel. error ~2e-7 on the interval) and scalef(p, n) = p*2^n, which overflows to +inf and
 * underflows to 0 exactly where expf does (x is clamped only to keep n finite). Of x[0 .. n) (n <= 8)
 * in place, each step across all n: one vector's exp is a chain of 13 dependent operations, and the FP
 * scheduler does not hold enough of them to overlap the chains of vectors written one after the other. */
FK_TARGET_AVX512 static inline FK_ALWAYS_INLINE void fk__exp512_n(int n, __m512* x) {
  __m512 k[8], r[8];
  FK_UNROLL(8)
  for (int i = 0; i < n; ++i) {
    x[i] = _mm512_max_ps(_mm512_min_ps(x[i], _mm512_set1_ps(200.0f)), _mm512_set1_ps(-200.0f));
    k[i] = _mm512_roundscale_ps(_mm512_mul_ps(x[i], _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  FK_UNROLL(8)
  for (int i = 0; i < n; ++i) r[i] = _mm512_fnmadd_ps(k[i], _mm512_set1_ps(0.693145751953125f), x[i]);
  FK_UNROLL(8)
  for (int i = 0; i < n; ++i) r[i] = _mm512_fnmadd_ps(k[i], _mm512_set1_ps(1.428606765330187045e-06f), r[i]);
  FK_UNROLL(8)
  for (int i = 0; i < n; ++i) x[i] = _mm512_set1_ps(1.0f / 720.0f);
  fk__horner_step512(n, x, r, 1.0f / 120.0f);
  fk__horner_step512(n, x, r, 1.0f / 24.0f);
  fk__horner_step512(n, x, r, 1.0f / 6.0f);
  fk__horner_step512(n, x, r, 0.5f);
  fk__horner_step512(n, x, r, 1.0f);
  fk__horner_step512(n, x, r, 1.0f);
  FK_UNROLL(8)
  for (int i = 0; i < n; ++i) x[i] = _mm512_scalef_ps(x[i], k[i]);
}
/* One vector's exp. */
FK_TARGET_AVX512 FK_API __m512 fk__exp512(__m512 x) {
  fk__exp512_n(1, &x);
  return x;
}

/* Same polynomial for AVX2. Without scalef the 2^n factor is built in the exponent field, valid for
 * n in [-126, 127], so x is clamped to [-87.3, 88.7] and results above 88.72 become +inf as in expf;
 * exp(-87.3) ~ 1e-38 instead of a denormal or 0 is harmless for every use here (softmax weights and
 * silu, where it is added to terms >= 1). */
FK_TARGET_AVX2 FK_API __m256 fk__exp256(__m256 x) {
  const __m256 over = _mm256_cmp_ps(x, _mm256_set1_ps(88.72f), _CMP_GT_OQ);
  x = _mm256_min_ps(x, _mm256_set1_ps(88.7f));
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
  __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187045e-06f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_blendv_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), _mm256_set1_ps(INFINITY), over);
}

FK_TARGET_AVX2 FK_API float fk__hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

FK_TARGET_AVX512 FK_API float fk__hsum512(__m512 v) {
  __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* 16 / 8 bf16 -> f32: zero-extend to 32 bits and shift into the high half (exact). */
FK_TARGET_AVX512 FK_API __m512 fk__load_bf16x16(const uint16_t* p) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)(const void*)p)), 16));
}
FK_TARGET_AVX512 FK_API __m512 fk__maskload_bf16x16(const uint16_t* p, __mmask16 m) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}
FK_TARGET_AVX2 FK_API __m256 fk__load_bf16x8(const uint16_t* p) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)(const void*)p)), 16));
}
/* 16 bf16 held as 8 32-bit words w (element 2i in word i's low half, 2i + 1 in its high half) -> the
 * even elements 0, 2, .., 14 and the odd elements 1, 3, .., 15 as f32 (exact), a shift or a mask each:
 * no shuffles, for code that can take the elements in that order. */
FK_TARGET_AVX2 static inline FK_ALWAYS_INLINE __m256 fk__bf16_even(__m256i w) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
FK_TARGET_AVX2 static inline FK_ALWAYS_INLINE __m256 fk__bf16_odd(__m256i w) {
  return _mm256_castsi256_ps(_mm256_and_si256(w, _mm256_set1_epi32((int)0xFFFF0000u)));
}

/* f32 -> bf16 with the same integer rounding as fk_f32_to_bf16_1 (bitwise equal to scalar, denormals
 * kept; vcvtneps2bf16 would flush them). */
FK_TARGET_AVX512 FK_API __m256i fk__to_bf16x16(__m512 f) {
  __m512i u = _mm512_castps_si512(f);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  __m512i q = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  r = _mm512_mask_mov_epi32(r, nan, q);
  return _mm512_cvtepi32_epi16(r);
}
FK_TARGET_AVX2 FK_API __m128i fk__to_bf16x8(__m256 f) {
  __m256i u = _mm256_castps_si256(f);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  /* signed compare is right here: both sides are < 2^31 after masking the sign */
  __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  r = _mm256_blendv_epi8(r, q, nan);
  /* pack 8 x u32 (all < 2^16) into 8 x u16 */
  __m128i lo = _mm256_castsi256_si128(r), hi = _mm256_extracti128_si256(r, 1);
  return _mm_packus_epi32(lo, hi);
}
/* 8 x 8 transpose of f32 (r[i] = row i in, r[j] = column j out). */
FK_TARGET_AVX2 static inline FK_ALWAYS_INLINE void fk__transpose8x8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int g = 0; g < 8; g += 4) {
    u[g + 0] = _mm256_shuffle_ps(t[g], t[g + 2], 0x44);
    u[g + 1] = _mm256_shuffle_ps(t[g], t[g + 2], 0xee);
    u[g + 2] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0x44);
    u[g + 3] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0xee);
  }
  for (int q = 0; q < 4; ++q) {
    r[q] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x20);
    r[4 + q] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x31);
  }
}

/* The lanes of 16 that hold elements from .. n - 1 of a run starting at lane 0 = element `from`. */
static inline __mmask16 fk__lanes16(size_t n, size_t from) {
  return n <= from ? (__mmask16)0 : n - from >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - from)) - 1);
}

/* 16 x 16 transpose of 32-bit elements (r[i] = row i in, r[j] = column j out). */
FK_TARGET_AVX512 static inline FK_ALWAYS_INLINE void fk__transpose16x16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  /* after this, in group g (rows 4g..4g+3), u[4g+q] lane j = {r[4g][4j+q], .., r[4g+3][4j+q]} */
  for (int g = 0; g < 4; ++g) {
    u[4 * g + 0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int q = 0; q < 4; ++q) {
    const __m512i a = _mm512_shuffle_i32x4(u[q], u[4 + q], 0x88), b = _mm512_shuffle_i32x4(u[q], u[4 + q], 0xdd);
    const __m512i c = _mm512_shuffle_i32x4(u[8 + q], u[12 + q], 0x88), d = _mm512_shuffle_i32x4(u[8 + q], u[12 + q], 0xdd);
    r[0 + q] = _mm512_shuffle_i32x4(a, c, 0x88);
    r[8 + q] = _mm512_shuffle_i32x4(a, c, 0xdd);
    r[4 + q] = _mm512_shuffle_i32x4(b, d, 0x88);
    r[12 + q] = _mm512_shuffle_i32x4(b, d, 0xdd);
  }
}

#endif /* FK_X86 */

#endif /* FK_COMMON_H */
