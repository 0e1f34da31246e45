/* fk_sample.h: argmax, seeded sampling (temperature, top-k, top-p, min-p) and the repetition penalty.
 *
 * Sampling follows Hugging Face's warper order: logits / temp, then top-k (keep every token whose logit
 * is >= the k-th largest: ties at the boundary are kept), then top-p over the renormalized survivors
 * (keep the most probable tokens whose cumulative probability first reaches top_p; ties at the boundary
 * kept), then min-p (keep tokens whose probability is >= min_p times the largest; the largest survives
 * every earlier cut, so this is one more threshold on the same scale), then one uniform draw walked over
 * the kept tokens in index order.
 * Both cut-offs are found by bisection over the bit patterns of non-negative floats (31 passes over n),
 * which needs no sort and no memory beyond the caller's n-float scratch; the passes are plain C with 16
 * interleaved accumulators, which compilers vectorize and which give the same bits on every ISA. The RNG is xoroshiro128++ seeded through splitmix64: the same
 * seed gives the same token sequence on every machine and thread count. */
#ifndef FK_SAMPLE_H
#define FK_SAMPLE_H

#include "fk_cpu.h"

/* ---- argmax: first index of the maximum (NaN never wins) ---------------------------------------- */
FK_API size_t fk_argmax_scalar(const float* x, size_t n) {
  size_t best = 0;
  for (size_t i = 1; i < n; ++i)
    if (x[i] > x[best] || (x[best] != x[best] && x[i] == x[i])) best = i;
  return best;
}
#if FK_X86
/* Two passes: the max value (vector max ignores NaN via the ordered compare), then its first index. */
FK_TARGET_AVX512 FK_API size_t fk_argmax_avx512(const float* x, size_t n) {
  __m512 mx = _mm512_set1_ps(-INFINITY);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    mx = _mm512_mask_mov_ps(mx, _mm512_cmp_ps_mask(v, mx, _CMP_GT_OQ), v);
  }
  float m = _mm512_reduce_max_ps(mx);
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  if (m == -INFINITY) return fk_argmax_scalar(x, n); /* all -inf or NaN: defer to the reference rule */
  const __m512 mv = _mm512_set1_ps(m);
  for (i = 0; i + 16 <= n; i += 16) {
    const __mmask16 eq = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), mv, _CMP_EQ_OQ);
    if (eq) return i + (size_t)__builtin_ctz((unsigned)eq);
  }
  for (; i < n; ++i)
    if (x[i] == m) return i;
  return 0;
}
FK_TARGET_AVX2 FK_API size_t fk_argmax_avx2(const float* x, size_t n) {
  __m256 mx = _mm256_set1_ps(-INFINITY);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    mx = _mm256_blendv_ps(mx, v, _mm256_cmp_ps(v, mx, _CMP_GT_OQ));
  }
  float t[8];
  _mm256_storeu_ps(t, mx);
  float m = t[0];
  for (int k = 1; k < 8; ++k) m = t[k] > m ? t[k] : m;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  if (m == -INFINITY) return fk_argmax_scalar(x, n);
  const __m256 mv = _mm256_set1_ps(m);
  for (i = 0; i + 8 <= n; i += 8) {
    const int eq = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), mv, _CMP_EQ_OQ));
    if (eq) return i + (size_t)__builtin_ctz((unsigned)eq);
  }
  for (; i < n; ++i)
    if (x[i] == m) return i;
  return 0;
}
#endif

FK_API size_t fk_argmax(const float* x, size_t n) {
  if (n == 0) return 0;
  switch (fk_isa_active()) {
#if FK_X86
    case FK_ISA_AMX:
    case FK_ISA_AVX512BF16: return fk_argmax_avx512(x, n);
    case FK_ISA_AVX2: return fk_argmax_avx2(x, n);
#endif
    default: return fk_argmax_scalar(x, n);
  }
}

/* ---- RNG ---------------------------------------------------------------------------------------- */
typedef struct {
  uint64_t s[2];
} fk_rng;

FK_API uint64_t fk__splitmix64(uint64_t* x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
FK_API void fk_rng_seed(fk_rng* r, uint64_t seed) {
  r->s[0] = fk__splitmix64(&seed);
  r->s[1] = fk__splitmix64(&seed);
  if (!r->s[0] && !r->s[1]) r->s[1] = 1; /* the all-zero state is a fixed point */
}
FK_API uint64_t fk__rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
/* xoroshiro128++ */
FK_API uint64_t fk_rng_next(fk_rng* r) {
  const uint64_t s0 = r->s[0];
  uint64_t s1 = r->s[1];
  const uint64_t out = fk__rotl64(s0 + s1, 17) + s0;
  s1 ^= s0;
  r->s[0] = fk__rotl64(s0, 49) ^ s1 ^ (s1 << 21);
  r->s[1] = fk__rotl64(s1, 28);
  return out;
}
/* uniform in [0, 1) with 53 random bits */
FK_API double fk_rng_uniform(fk_rng* r) { return (double)(fk_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

/* ---- sampling ----------------------------------------------------------------------------------- */
FK_API uint32_t fk__fbits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
FK_API float fk__bitsf(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Largest t (over non-negative floats) with count(p >= t) >= k. p >= 0; bit patterns of non-negative
 * floats are ordered like the floats, so bisection on them is exact. */
FK_API float fk__kth_largest(const float* p, size_t n, size_t k) {
  uint32_t lo = 0, hi = 0x7f800000u; /* count(p >= +0) = n >= k; count(p >= inf) = 0 < k */
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    const float t = fk__bitsf(mid);
    uint32_t cnt[16] = {0}; /* interleaved counters: vectorizes */
    const size_t body = n & ~(size_t)15, tail = n & 15;
    size_t c = 0;
    for (size_t i = 0; i < body; i += 16)
      for (int j = 0; j < 16; ++j) cnt[j] += p[i + j] >= t;
    for (size_t j = 0; j < tail; ++j) cnt[j] += p[body + j] >= t;
    for (int j = 0; j < 16; ++j) c += cnt[j];
    if (c >= k) lo = mid;
    else hi = mid;
  }
  return fk__bitsf(lo);
}

/* sum of p_i >= t. 16 interleaved f32 partial sums reduced in a fixed tree: the same bits on every
 * ISA and compiler (plain C that vectorizes without reassociation), ~10x faster than one double chain. */
FK_API float fk__mass_above(const float* p, size_t n, float t) {
  float acc[16] = {0};
  const size_t body = n & ~(size_t)15, tail = n & 15;
  for (size_t i = 0; i < body; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += p[i + j] >= t ? p[i + j] : 0.0f;
  for (size_t j = 0; j < tail; ++j) acc[j] += p[body + j] >= t ? p[body + j] : 0.0f;
  for (int w = 8; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  return acc[0];
}

/* Largest t >= floor with mass_above(t) >= target. */
FK_API float fk__mass_cut(const float* p, size_t n, float floor_, float target) {
  uint32_t lo = fk__fbits(floor_), hi = 0x7f800000u;
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (fk__mass_above(p, n, fk__bitsf(mid)) >= target) lo = mid;
    else hi = mid;
  }
  return fk__bitsf(lo);
}

/* How to draw a token; fill it with designated initializers:
 *   fk_sampler s = {.temp = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f};
 * temp <= 0 or top_k == 1: greedy (argmax). top_k == 0 or >= n: off. top_p >= 1: off. min_p <= 0: off. */
typedef struct {
  float temp;
  size_t top_k;
  float top_p;
  float min_p;
} fk_sampler;

/* scratch: n floats owned by the caller (holds the unnormalized probabilities). */
FK_API size_t fk_sample_with(const float* logits, size_t n, const fk_sampler* how, fk_rng* rng, float* scratch) {
  const float temp = how->temp, top_p = how->top_p, min_p = how->min_p;
  const size_t top_k = how->top_k;
  if (n == 0) return 0;
  if (temp <= 0.0f || top_k == 1) return fk_argmax(logits, n);
  const size_t best = fk_argmax(logits, n);
  const float mx = logits[best];
  const float inv_t = 1.0f / temp;
  for (size_t i = 0; i < n; ++i) scratch[i] = expf((logits[i] - mx) * inv_t); /* in [0, 1], max is exactly 1 */
  float cut = 0.0f;
  if (top_k > 0 && top_k < n) cut = fk__kth_largest(scratch, n, top_k);
  if (top_p < 1.0f) {
    const float kept = fk__mass_above(scratch, n, cut);
    const float c2 = fk__mass_cut(scratch, n, cut, (top_p > 0.0f ? top_p : 0.0f) * kept);
    cut = c2 > cut ? c2 : cut;
  }
  if (min_p > 0.0f) cut = min_p > cut ? (min_p < 1.0f ? min_p : 1.0f) : cut; /* scratch's largest is exactly 1 */
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += scratch[i] >= cut ? (double)scratch[i] : 0.0;
  const double u = fk_rng_uniform(rng) * total;
  double acc = 0.0;
  size_t last = best;
  for (size_t i = 0; i < n; ++i) {
    if (scratch[i] < cut || scratch[i] == 0.0f) continue;
    acc += (double)scratch[i];
    last = i;
    if (u < acc) return i;
  }
  return last; /* u rounded up to total */
}

/* Temperature, top-k and top-p by position: fk_sample_with without min-p. */
FK_API size_t fk_sample(const float* logits, size_t n, float temp, size_t top_k, float top_p, fk_rng* rng, float* scratch) {
  const fk_sampler how = {.temp = temp, .top_k = top_k, .top_p = top_p, .min_p = 0.0f};
  return fk_sample_with(logits, n, &how, rng, scratch);
}

/* The repetition penalty of CTRL (Keskar et al. 2019) as Hugging Face and llama.cpp apply it: each
 * distinct token among the `count` recent ones has its logit divided by `penalty` when positive and
 * multiplied by it otherwise (penalty > 1 makes a repeat less likely). Ids outside [0, n) are skipped. */
FK_API void fk_repeat_penalty(float* logits, size_t n, const int32_t* recent, size_t count, float penalty) {
  if (penalty == 1.0f) return;
  for (size_t i = 0; i < count; ++i) {
    const int32_t id = recent[i];
    if (id < 0 || (size_t)id >= n) continue;
    int seen = 0; /* once per distinct token; windows are short (llama.cpp's default is 64) */
    for (size_t j = 0; j < i && !seen; ++j) seen = recent[j] == id;
    if (seen) continue;
    logits[id] = logits[id] > 0.0f ? logits[id] / penalty : logits[id] * penalty;
  }
}

#endif /* FK_SAMPLE_H */
