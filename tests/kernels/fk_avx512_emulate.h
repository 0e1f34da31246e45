/* fk_avx512_emulate.h: TEST-ONLY software model of the AVX-512 instructions the kernels use.
 *
 * Included by fk_common.h (right after <immintrin.h>) when FK_AVX512_EMULATE is defined; the kernels'
 * AVX-512 and AMX functions are then compiled for AVX2 (FK_TARGET_AVX512 = FK_TARGET_AVX2) and every
 * AVX-512 intrinsic they call is redirected here by a macro of the same name. The vector types stay the
 * compiler's own (__m512, __m512i, __m512bh are generic 64-byte vectors, usable without AVX-512), so the
 * kernels compile unchanged. With FK_AMX_EMULATE as well (fk_linear.h's tile model), a CPU with AVX2
 * alone runs every path of the ladder: tests/kernels builds the kernel suite this way
 * (test_kernels_emulated), so the AVX-512 GEMV/GEMM/attention/sampling code -- blocking, masks, tails,
 * shuffles, packing -- is checked on any x86-64 test machine, not only on one with AVX-512.
 *
 * Each function follows the instruction's definition in the Intel SDM, element by element: FMAs are
 * fused (fmaf), masked loads read only the selected elements (a masked-out element past the end of an
 * array is never touched, as in hardware), vdpbf16ps and vcvtne2ps2bf16 treat denormal inputs as zero
 * and flush denormal results (the SDM's DAZ/FTZ, independent of MXCSR), max/min return the second
 * operand when either is NaN or both are equal. What the model cannot show is speed: it is a scalar
 * loop per instruction. Never define FK_AVX512_EMULATE in a real build.
 *
 * Plain C11 (the C units of the kernel tests include it too); C++ compiles it as well. */
#ifndef FK_AVX512_EMULATE_H
#define FK_AVX512_EMULATE_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* 64-byte vectors by value in functions without AVX-512 are the point of the models: gcc's note that
 * this changes the ABI (-Wpsabi) concerns calls across translation units, which static inline
 * functions never make. (The emulated test targets pass -Wno-psabi for the kernels' own calls.) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

/* The kernels' AVX-512 functions become AVX2 functions (FK_TARGET_AVX512 = FK_TARGET_AVX2): the models
 * carry the same target, so that 256- and 512-bit vectors cross calls under one ABI (clang insists). */
#ifndef FKE_TARGET /* test_avx512_model.cpp compiles them for AVX-512, to call them beside the instructions */
#define FKE_TARGET "avx2,fma,f16c"
#endif
#define FKE_FN static inline __attribute__((target(FKE_TARGET)))

/* ---- element access: a vector is copied to / from an array (no aliasing questions, any type) ---- */
typedef struct {
  float v[16];
} fke_f32x16;
typedef struct {
  uint32_t v[16];
} fke_u32x16;
typedef struct {
  uint16_t v[32];
} fke_u16x32;
typedef struct {
  uint64_t v[8];
} fke_u64x8;

#define FKE_GET(T, a) fke_get_##T(&(a)) /* a: a 64-byte vector */
#define FKE_DEF_GET(T)                   \
  FKE_FN T fke_get_##T(const void* p) { \
    T r;                                 \
    memcpy(&r, p, sizeof r);             \
    return r;                            \
  }
FKE_DEF_GET(fke_f32x16)
FKE_DEF_GET(fke_u32x16)
FKE_DEF_GET(fke_u16x32)
FKE_DEF_GET(fke_u64x8)

FKE_FN __m512 fke_ps(const fke_f32x16* a) {
  __m512 r;
  memcpy(&r, a, 64);
  return r;
}
FKE_FN __m512i fke_si(const void* a) {
  __m512i r;
  memcpy(&r, a, 64);
  return r;
}

FKE_FN float fke_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
FKE_FN uint32_t fke_u32(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
/* DAZ / FTZ of the SDM's bf16 instructions: a denormal becomes a zero of the same sign. */
FKE_FN float fke_daz(float f) { return fpclassify(f) == FP_SUBNORMAL ? copysignf(0.0f, f) : f; }

/* ---- loads, stores, constants, casts ---- */
FKE_FN __m512 fke_mm512_setzero_ps(void) {
  fke_f32x16 r;
  memset(&r, 0, sizeof r);
  return fke_ps(&r);
}
FKE_FN __m512i fke_mm512_setzero_si512(void) {
  unsigned char z[64] = {0};
  return fke_si(z);
}
FKE_FN __m512 fke_mm512_set1_ps(float f) {
  fke_f32x16 r;
  for (int i = 0; i < 16; ++i) r.v[i] = f;
  return fke_ps(&r);
}
FKE_FN __m512i fke_mm512_set1_epi32(int x) {
  fke_u32x16 r;
  for (int i = 0; i < 16; ++i) r.v[i] = (uint32_t)x;
  return fke_si(&r);
}
FKE_FN __m512 fke_mm512_loadu_ps(const void* p) {
  __m512 r;
  memcpy(&r, p, 64);
  return r;
}
FKE_FN __m512i fke_mm512_loadu_si512(const void* p) { return fke_si(p); }
FKE_FN void fke_mm512_storeu_ps(void* p, __m512 a) { memcpy(p, &a, 64); }
FKE_FN void fke_mm512_storeu_si512(void* p, __m512i a) { memcpy(p, &a, 64); }
FKE_FN __m512 fke_mm512_maskz_loadu_ps(__mmask16 k, const void* p) {
  fke_f32x16 r;
  for (int i = 0; i < 16; ++i) {
    r.v[i] = 0.0f;
    if ((k >> i) & 1) memcpy(&r.v[i], (const char*)p + 4 * i, 4);
  }
  return fke_ps(&r);
}
FKE_FN __m512i fke_mm512_maskz_loadu_epi16(__mmask32 k, const void* p) {
  fke_u16x32 r;
  for (int i = 0; i < 32; ++i) {
    r.v[i] = 0;
    if ((k >> i) & 1) memcpy(&r.v[i], (const char*)p + 2 * i, 2);
  }
  return fke_si(&r);
}
FKE_FN void fke_mm512_mask_storeu_ps(void* p, __mmask16 k, __m512 a) {
  const fke_f32x16 x = FKE_GET(fke_f32x16, a);
  for (int i = 0; i < 16; ++i)
    if ((k >> i) & 1) memcpy((char*)p + 4 * i, &x.v[i], 4);
}
FKE_FN __m512 fke_mm512_castsi512_ps(__m512i a) {
  __m512 r;
  memcpy(&r, &a, 64);
  return r;
}
FKE_FN __m512i fke_mm512_castps_si512(__m512 a) { return fke_si(&a); }
FKE_FN __m256 fke_mm512_castps512_ps256(__m512 a) {
  __m256 r;
  memcpy(&r, &a, 32);
  return r;
}
FKE_FN __m256 fke_mm512_extractf32x8_ps(__m512 a, int imm) {
  __m256 r;
  memcpy(&r, (const char*)&a + 32 * (imm & 1), 32);
  return r;
}

/* 256- and 128-bit forms that need AVX-512VL/BW */
FKE_FN __m256 fke_mm256_maskz_loadu_ps(__mmask8 k, const void* p) {
  float r[8];
  for (int i = 0; i < 8; ++i) {
    r[i] = 0.0f;
    if ((k >> i) & 1) memcpy(&r[i], (const char*)p + 4 * i, 4);
  }
  __m256 v;
  memcpy(&v, r, 32);
  return v;
}
FKE_FN __m256i fke_mm256_maskz_loadu_epi16(__mmask16 k, const void* p) {
  uint16_t r[16];
  for (int i = 0; i < 16; ++i) {
    r[i] = 0;
    if ((k >> i) & 1) memcpy(&r[i], (const char*)p + 2 * i, 2);
  }
  __m256i v;
  memcpy(&v, r, 32);
  return v;
}
FKE_FN __m128i fke_mm_maskz_loadu_epi16(__mmask8 k, const void* p) {
  uint16_t r[8];
  for (int i = 0; i < 8; ++i) {
    r[i] = 0;
    if ((k >> i) & 1) memcpy(&r[i], (const char*)p + 2 * i, 2);
  }
  __m128i v;
  memcpy(&v, r, 16);
  return v;
}
FKE_FN void fke_mm256_mask_storeu_epi16(void* p, __mmask16 k, __m256i a) {
  uint16_t x[16];
  memcpy(x, &a, 32);
  for (int i = 0; i < 16; ++i)
    if ((k >> i) & 1) memcpy((char*)p + 2 * i, &x[i], 2);
}
FKE_FN __m256 fke_mm256_permutex2var_ps(__m256 a, __m256i idx, __m256 b) {
  float x[8], y[8], r[8];
  uint32_t s[8];
  memcpy(x, &a, 32);
  memcpy(y, &b, 32);
  memcpy(s, &idx, 32);
  for (int i = 0; i < 8; ++i) r[i] = (s[i] & 8) ? y[s[i] & 7] : x[s[i] & 7];
  __m256 v;
  memcpy(&v, r, 32);
  return v;
}

/* ---- f32 arithmetic ---- */
#define FKE_BINARY_PS(name, expr)                                   \
  FKE_FN __m512 name(__m512 a_, __m512 b_) {                 \
    const fke_f32x16 a = FKE_GET(fke_f32x16, a_), b = FKE_GET(fke_f32x16, b_); \
    fke_f32x16 r;                                                   \
    for (int i = 0; i < 16; ++i) r.v[i] = (expr);                   \
    return fke_ps(&r);                                              \
  }
FKE_BINARY_PS(fke_mm512_add_ps, a.v[i] + b.v[i])
FKE_BINARY_PS(fke_mm512_sub_ps, a.v[i] - b.v[i])
FKE_BINARY_PS(fke_mm512_mul_ps, a.v[i] * b.v[i])
FKE_BINARY_PS(fke_mm512_div_ps, a.v[i] / b.v[i])
FKE_BINARY_PS(fke_mm512_max_ps, a.v[i] > b.v[i] ? a.v[i] : b.v[i]) /* NaN or equal: the second */
FKE_BINARY_PS(fke_mm512_min_ps, a.v[i] < b.v[i] ? a.v[i] : b.v[i])

#define FKE_TERNARY_PS(name, expr)                                                            \
  FKE_FN __m512 name(__m512 a_, __m512 b_, __m512 c_) {                                \
    const fke_f32x16 a = FKE_GET(fke_f32x16, a_), b = FKE_GET(fke_f32x16, b_), c = FKE_GET(fke_f32x16, c_); \
    fke_f32x16 r;                                                                             \
    for (int i = 0; i < 16; ++i) r.v[i] = (expr);                                             \
    return fke_ps(&r);                                                                        \
  }
FKE_TERNARY_PS(fke_mm512_fmadd_ps, fmaf(a.v[i], b.v[i], c.v[i]))   /* a*b + c, one rounding */
FKE_TERNARY_PS(fke_mm512_fmsub_ps, fmaf(a.v[i], b.v[i], -c.v[i]))  /* a*b - c */
FKE_TERNARY_PS(fke_mm512_fnmadd_ps, fmaf(-a.v[i], b.v[i], c.v[i])) /* -(a*b) + c */

/* max of the 16 lanes in gcc's order (not an instruction: a compiler's sequence of maxps): halves
 * max(high, low) for 8 and 4 lanes, then max(low, high) for 2 and 1. maxps returns its second operand
 * on NaN or equal operands, so the order only shows there (NaN, +0 against -0). */
FKE_FN float fke_mm512_reduce_max_ps(__m512 a_) {
  fke_f32x16 a = FKE_GET(fke_f32x16, a_);
  for (int n = 8; n >= 1; n /= 2)
    for (int i = 0; i < n; ++i) {
      const float lo = a.v[i], hi = a.v[i + n];
      a.v[i] = n >= 4 ? (hi > lo ? hi : lo) : (lo > hi ? lo : hi);
    }
  return a.v[0];
}

/* vscalefps: a * 2^floor(b), with the SDM's special cases (table "VSCALEFPS/SS Special Cases"), which
 * real hardware follows (Sapphire Rapids and Zen 5 both checked): a NaN in a wins, quieted, except that a
 * quiet NaN scaled by +inf is +inf and by -inf is +0; then a NaN in b, quieted; inf * 2^-inf and
 * 0 * 2^+inf are the default NaN (0xffc00000). */
FKE_FN __m512 fke_mm512_scalef_ps(__m512 a_, __m512 b_) {
  const fke_f32x16 a = FKE_GET(fke_f32x16, a_), b = FKE_GET(fke_f32x16, b_);
  const uint32_t quiet_bit = 1u << 22;
  const float indefinite = fke_f32(0xffc00000u);
  fke_f32x16 r;
  for (int i = 0; i < 16; ++i) {
    const float x = a.v[i], e = floorf(b.v[i]);
    if (isnan(x)) {
      const int quiet = (fke_u32(x) & quiet_bit) != 0;
      r.v[i] = quiet && isinf(b.v[i]) ? (b.v[i] > 0.0f ? INFINITY : 0.0f) : fke_f32(fke_u32(x) | quiet_bit);
    } else if (isnan(b.v[i])) {
      r.v[i] = fke_f32(fke_u32(b.v[i]) | quiet_bit);
    } else if (e > 400.0f) {
      r.v[i] = x == 0.0f ? (isinf(e) ? indefinite : x) : x * INFINITY;
    } else if (e < -400.0f) {
      r.v[i] = isinf(x) ? (isinf(e) ? indefinite : x) : copysignf(0.0f, x);
    } else {
      r.v[i] = ldexpf(x, (int)e);
    }
  }
  return fke_ps(&r);
}
FKE_FN float fke_rne(float x) { /* to the nearest integer, ties to even, whatever the FP mode */
  const float t = truncf(x), d = fabsf(x - t), up = t + copysignf(1.0f, x);
  if (d > 0.5f) return up;
  if (d < 0.5f) return t;
  return fmodf(t, 2.0f) == 0.0f ? t : up;
}
/* vrndscaleps: round to imm[7:4] fraction bits; imm[1:0] = nearest-even / down / up / toward zero,
 * imm[2] = use the current rounding mode instead. */
FKE_FN __m512 fke_mm512_roundscale_ps(__m512 a_, int imm) {
  const fke_f32x16 a = FKE_GET(fke_f32x16, a_);
  const int m = (imm >> 4) & 15, mode = imm & 3, current = (imm >> 2) & 1;
  fke_f32x16 r;
  for (int i = 0; i < 16; ++i) {
    const float x = ldexpf(a.v[i], m);
    float y;
    if (current) y = nearbyintf(x);
    else if (mode == 0) y = fke_rne(x);
    else if (mode == 1) y = floorf(x);
    else if (mode == 2) y = ceilf(x);
    else y = truncf(x);
    r.v[i] = isfinite(x) ? ldexpf(y, -m) : a.v[i];
  }
  return fke_ps(&r);
}

/* vcmpps: the 16 base predicates (imm[3:0]); imm[4] only makes them signalling, which changes no result. */
FKE_FN __mmask16 fke_mm512_cmp_ps_mask(__m512 a_, __m512 b_, int imm) {
  const fke_f32x16 a = FKE_GET(fke_f32x16, a_), b = FKE_GET(fke_f32x16, b_);
  unsigned k = 0;
  for (int i = 0; i < 16; ++i) {
    const float x = a.v[i], y = b.v[i];
    const int un = isnan(x) || isnan(y);
    int c;
    switch (imm & 15) {
      case 0: c = !un && x == y; break;  /* EQ_O */
      case 1: c = !un && x < y; break;   /* LT_O */
      case 2: c = !un && x <= y; break;  /* LE_O */
      case 3: c = un; break;             /* UNORD */
      case 4: c = un || x != y; break;   /* NEQ_U */
      case 5: c = un || !(x < y); break; /* NLT_U */
      case 6: c = un || !(x <= y); break;/* NLE_U */
      case 7: c = !un; break;            /* ORD */
      case 8: c = un || x == y; break;   /* EQ_U */
      case 9: c = un || x < y; break;    /* NGE_U */
      case 10: c = un || x <= y; break;  /* NGT_U */
      case 11: c = 0; break;             /* FALSE */
      case 12: c = !un && x != y; break; /* NEQ_O */
      case 13: c = !un && x >= y; break; /* GE_O */
      case 14: c = !un && x > y; break;  /* GT_O */
      default: c = 1; break;             /* TRUE */
    }
    k |= (unsigned)c << i;
  }
  return (__mmask16)k;
}

/* ---- masks and moves ---- */
FKE_FN __m512 fke_mm512_mask_mov_ps(__m512 src, __mmask16 k, __m512 a) {
  fke_f32x16 r = FKE_GET(fke_f32x16, src);
  const fke_f32x16 x = FKE_GET(fke_f32x16, a);
  for (int i = 0; i < 16; ++i)
    if ((k >> i) & 1) r.v[i] = x.v[i];
  return fke_ps(&r);
}
FKE_FN __m512 fke_mm512_maskz_mov_ps(__mmask16 k, __m512 a) { return fke_mm512_mask_mov_ps(fke_mm512_setzero_ps(), k, a); }
FKE_FN __m512i fke_mm512_mask_mov_epi32(__m512i src, __mmask16 k, __m512i a) {
  fke_u32x16 r = FKE_GET(fke_u32x16, src);
  const fke_u32x16 x = FKE_GET(fke_u32x16, a);
  for (int i = 0; i < 16; ++i)
    if ((k >> i) & 1) r.v[i] = x.v[i];
  return fke_si(&r);
}

/* ---- integer ---- */
#define FKE_BINARY_U32(name, expr)                                  \
  FKE_FN __m512i name(__m512i a_, __m512i b_) {              \
    const fke_u32x16 a = FKE_GET(fke_u32x16, a_), b = FKE_GET(fke_u32x16, b_); \
    fke_u32x16 r;                                                   \
    for (int i = 0; i < 16; ++i) r.v[i] = (expr);                   \
    return fke_si(&r);                                              \
  }
FKE_BINARY_U32(fke_mm512_and_si512, a.v[i] & b.v[i])
FKE_BINARY_U32(fke_mm512_or_si512, a.v[i] | b.v[i])
FKE_BINARY_U32(fke_mm512_add_epi32, a.v[i] + b.v[i])

FKE_FN __m512i fke_mm512_slli_epi32(__m512i a_, unsigned n) {
  const fke_u32x16 a = FKE_GET(fke_u32x16, a_);
  fke_u32x16 r;
  for (int i = 0; i < 16; ++i) r.v[i] = n > 31 ? 0u : a.v[i] << n;
  return fke_si(&r);
}
FKE_FN __m512i fke_mm512_srli_epi32(__m512i a_, unsigned n) {
  const fke_u32x16 a = FKE_GET(fke_u32x16, a_);
  fke_u32x16 r;
  for (int i = 0; i < 16; ++i) r.v[i] = n > 31 ? 0u : a.v[i] >> n;
  return fke_si(&r);
}
FKE_FN __mmask16 fke_mm512_cmpgt_epu32_mask(__m512i a_, __m512i b_) {
  const fke_u32x16 a = FKE_GET(fke_u32x16, a_), b = FKE_GET(fke_u32x16, b_);
  unsigned k = 0;
  for (int i = 0; i < 16; ++i) k |= (unsigned)(a.v[i] > b.v[i]) << i;
  return (__mmask16)k;
}
FKE_FN __m512i fke_mm512_cvtepu16_epi32(__m256i a_) { /* vpmovzxwd */
  uint16_t a[16];
  memcpy(a, &a_, 32);
  fke_u32x16 r;
  for (int i = 0; i < 16; ++i) r.v[i] = a[i];
  return fke_si(&r);
}
FKE_FN __m256i fke_mm512_cvtepi32_epi16(__m512i a_) { /* vpmovdw: the low 16 bits */
  const fke_u32x16 a = FKE_GET(fke_u32x16, a_);
  uint16_t r[16];
  for (int i = 0; i < 16; ++i) r[i] = (uint16_t)(a.v[i] & 0xffffu);
  __m256i v;
  memcpy(&v, r, 32);
  return v;
}

/* Interleaves within each 128-bit lane: 4 dwords / 2 qwords per lane, low or high half. */
FKE_FN __m512i fke_mm512_unpacklo_epi32(__m512i a_, __m512i b_) {
  const fke_u32x16 a = FKE_GET(fke_u32x16, a_), b = FKE_GET(fke_u32x16, b_);
  fke_u32x16 r;
  for (int l = 0; l < 4; ++l) {
    r.v[4 * l + 0] = a.v[4 * l + 0], r.v[4 * l + 1] = b.v[4 * l + 0];
    r.v[4 * l + 2] = a.v[4 * l + 1], r.v[4 * l + 3] = b.v[4 * l + 1];
  }
  return fke_si(&r);
}
FKE_FN __m512i fke_mm512_unpackhi_epi32(__m512i a_, __m512i b_) {
  const fke_u32x16 a = FKE_GET(fke_u32x16, a_), b = FKE_GET(fke_u32x16, b_);
  fke_u32x16 r;
  for (int l = 0; l < 4; ++l) {
    r.v[4 * l + 0] = a.v[4 * l + 2], r.v[4 * l + 1] = b.v[4 * l + 2];
    r.v[4 * l + 2] = a.v[4 * l + 3], r.v[4 * l + 3] = b.v[4 * l + 3];
  }
  return fke_si(&r);
}
FKE_FN __m512i fke_mm512_unpacklo_epi64(__m512i a_, __m512i b_) {
  const fke_u64x8 a = FKE_GET(fke_u64x8, a_), b = FKE_GET(fke_u64x8, b_);
  fke_u64x8 r;
  for (int l = 0; l < 4; ++l) r.v[2 * l] = a.v[2 * l], r.v[2 * l + 1] = b.v[2 * l];
  return fke_si(&r);
}
FKE_FN __m512i fke_mm512_unpackhi_epi64(__m512i a_, __m512i b_) {
  const fke_u64x8 a = FKE_GET(fke_u64x8, a_), b = FKE_GET(fke_u64x8, b_);
  fke_u64x8 r;
  for (int l = 0; l < 4; ++l) r.v[2 * l] = a.v[2 * l + 1], r.v[2 * l + 1] = b.v[2 * l + 1];
  return fke_si(&r);
}
/* vshufi32x4: lanes 0-1 of the result from a, lanes 2-3 from b, each picked by 2 bits of imm. */
FKE_FN __m512i fke_mm512_shuffle_i32x4(__m512i a_, __m512i b_, int imm) {
  const fke_u32x16 a = FKE_GET(fke_u32x16, a_), b = FKE_GET(fke_u32x16, b_);
  fke_u32x16 r;
  for (int l = 0; l < 4; ++l) {
    const int s = (imm >> (2 * l)) & 3;
    memcpy(&r.v[4 * l], l < 2 ? &a.v[4 * s] : &b.v[4 * s], 16);
  }
  return fke_si(&r);
}

/* ---- bf16 ---- */
/* vcvtne2ps2bf16: result words 0-15 from b, 16-31 from a; round to nearest even, NaN -> quiet NaN,
 * denormal -> zero of the same sign. */
FKE_FN uint16_t fke_to_bf16(float f) {
  f = fke_daz(f);
  const uint32_t u = fke_u32(f);
  if (isnan(f)) return (uint16_t)((u >> 16) | 0x40u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
FKE_FN __m512bh fke_mm512_cvtne2ps_pbh(__m512 a_, __m512 b_) {
  const fke_f32x16 a = FKE_GET(fke_f32x16, a_), b = FKE_GET(fke_f32x16, b_);
  fke_u16x32 r;
  for (int i = 0; i < 16; ++i) r.v[i] = fke_to_bf16(b.v[i]), r.v[16 + i] = fke_to_bf16(a.v[i]);
  __m512bh v;
  memcpy(&v, &r, 64);
  return v;
}
/* vdpbf16ps: per dword j, src += a.odd * b.odd, then += a.even * b.even (each product exact in f32,
 * so each step is one rounding: an fmaf), inputs DAZ, result FTZ. */
FKE_FN __m512 fke_mm512_dpbf16_ps(__m512 src, __m512bh a_, __m512bh b_) {
  fke_f32x16 r = FKE_GET(fke_f32x16, src);
  const fke_u16x32 a = FKE_GET(fke_u16x32, a_), b = FKE_GET(fke_u16x32, b_);
  for (int j = 0; j < 16; ++j) {
    float acc = r.v[j];
    for (int h = 1; h >= 0; --h) {
      const float x = fke_daz(fke_f32((uint32_t)a.v[2 * j + h] << 16)), y = fke_daz(fke_f32((uint32_t)b.v[2 * j + h] << 16));
      acc = fke_daz(fmaf(x, y, fke_daz(acc)));
    }
    r.v[j] = acc;
  }
  return fke_ps(&r);
}

/* ---- the redirections (some intrinsics are macros in the compiler's headers: undefine first) ---- */
#ifndef FKE_MODEL_ONLY /* test_avx512_model.cpp: the models only, the instructions keep their names */
#undef _mm512_setzero_ps
#undef _mm512_setzero_si512
#undef _mm512_set1_ps
#undef _mm512_set1_epi32
#undef _mm512_loadu_ps
#undef _mm512_loadu_si512
#undef _mm512_storeu_ps
#undef _mm512_storeu_si512
#undef _mm512_maskz_loadu_ps
#undef _mm512_maskz_loadu_epi16
#undef _mm512_mask_storeu_ps
#undef _mm512_castsi512_ps
#undef _mm512_castps_si512
#undef _mm512_castps512_ps256
#undef _mm512_extractf32x8_ps
#undef _mm256_maskz_loadu_ps
#undef _mm256_maskz_loadu_epi16
#undef _mm_maskz_loadu_epi16
#undef _mm256_mask_storeu_epi16
#undef _mm256_permutex2var_ps
#undef _mm512_add_ps
#undef _mm512_sub_ps
#undef _mm512_mul_ps
#undef _mm512_div_ps
#undef _mm512_max_ps
#undef _mm512_min_ps
#undef _mm512_fmadd_ps
#undef _mm512_fmsub_ps
#undef _mm512_fnmadd_ps
#undef _mm512_reduce_max_ps
#undef _mm512_scalef_ps
#undef _mm512_roundscale_ps
#undef _mm512_cmp_ps_mask
#undef _mm512_mask_mov_ps
#undef _mm512_maskz_mov_ps
#undef _mm512_mask_mov_epi32
#undef _mm512_and_si512
#undef _mm512_or_si512
#undef _mm512_add_epi32
#undef _mm512_slli_epi32
#undef _mm512_srli_epi32
#undef _mm512_cmpgt_epu32_mask
#undef _mm512_cvtepu16_epi32
#undef _mm512_cvtepi32_epi16
#undef _mm512_unpacklo_epi32
#undef _mm512_unpackhi_epi32
#undef _mm512_unpacklo_epi64
#undef _mm512_unpackhi_epi64
#undef _mm512_shuffle_i32x4
#undef _mm512_cvtne2ps_pbh
#undef _mm512_dpbf16_ps

#define _mm512_setzero_ps fke_mm512_setzero_ps
#define _mm512_setzero_si512 fke_mm512_setzero_si512
#define _mm512_set1_ps fke_mm512_set1_ps
#define _mm512_set1_epi32 fke_mm512_set1_epi32
#define _mm512_loadu_ps fke_mm512_loadu_ps
#define _mm512_loadu_si512 fke_mm512_loadu_si512
#define _mm512_storeu_ps fke_mm512_storeu_ps
#define _mm512_storeu_si512 fke_mm512_storeu_si512
#define _mm512_maskz_loadu_ps fke_mm512_maskz_loadu_ps
#define _mm512_maskz_loadu_epi16 fke_mm512_maskz_loadu_epi16
#define _mm512_mask_storeu_ps fke_mm512_mask_storeu_ps
#define _mm512_castsi512_ps fke_mm512_castsi512_ps
#define _mm512_castps_si512 fke_mm512_castps_si512
#define _mm512_castps512_ps256 fke_mm512_castps512_ps256
#define _mm512_extractf32x8_ps fke_mm512_extractf32x8_ps
#define _mm256_maskz_loadu_ps fke_mm256_maskz_loadu_ps
#define _mm256_maskz_loadu_epi16 fke_mm256_maskz_loadu_epi16
#define _mm_maskz_loadu_epi16 fke_mm_maskz_loadu_epi16
#define _mm256_mask_storeu_epi16 fke_mm256_mask_storeu_epi16
#define _mm256_permutex2var_ps fke_mm256_permutex2var_ps
#define _mm512_add_ps fke_mm512_add_ps
#define _mm512_sub_ps fke_mm512_sub_ps
#define _mm512_mul_ps fke_mm512_mul_ps
#define _mm512_div_ps fke_mm512_div_ps
#define _mm512_max_ps fke_mm512_max_ps
#define _mm512_min_ps fke_mm512_min_ps
#define _mm512_fmadd_ps fke_mm512_fmadd_ps
#define _mm512_fmsub_ps fke_mm512_fmsub_ps
#define _mm512_fnmadd_ps fke_mm512_fnmadd_ps
#define _mm512_reduce_max_ps fke_mm512_reduce_max_ps
#define _mm512_scalef_ps fke_mm512_scalef_ps
#define _mm512_roundscale_ps fke_mm512_roundscale_ps
#define _mm512_cmp_ps_mask fke_mm512_cmp_ps_mask
#define _mm512_mask_mov_ps fke_mm512_mask_mov_ps
#define _mm512_maskz_mov_ps fke_mm512_maskz_mov_ps
#define _mm512_mask_mov_epi32 fke_mm512_mask_mov_epi32
#define _mm512_and_si512 fke_mm512_and_si512
#define _mm512_or_si512 fke_mm512_or_si512
#define _mm512_add_epi32 fke_mm512_add_epi32
#define _mm512_slli_epi32(a, n) fke_mm512_slli_epi32((a), (unsigned)(n))
#define _mm512_srli_epi32(a, n) fke_mm512_srli_epi32((a), (unsigned)(n))
#define _mm512_cmpgt_epu32_mask fke_mm512_cmpgt_epu32_mask
#define _mm512_cvtepu16_epi32 fke_mm512_cvtepu16_epi32
#define _mm512_cvtepi32_epi16 fke_mm512_cvtepi32_epi16
#define _mm512_unpacklo_epi32 fke_mm512_unpacklo_epi32
#define _mm512_unpackhi_epi32 fke_mm512_unpackhi_epi32
#define _mm512_unpacklo_epi64 fke_mm512_unpacklo_epi64
#define _mm512_unpackhi_epi64 fke_mm512_unpackhi_epi64
#define _mm512_shuffle_i32x4 fke_mm512_shuffle_i32x4
#define _mm512_cvtne2ps_pbh fke_mm512_cvtne2ps_pbh
#define _mm512_dpbf16_ps fke_mm512_dpbf16_ps
#endif /* FKE_MODEL_ONLY */

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif /* FK_AVX512_EMULATE_H */
