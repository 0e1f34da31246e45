/* fk_attention.h: KV cache store and causal grouped-query attention (Qwen2).
 *
 * Cache layout per layer: kc/vc are bf16 [n_kv][cap][hd]. Query head h reads kv head h / (n_heads/n_kv).
 * Scores are scaled by 1/sqrt(hd); query at position p attends to keys 0..p.
 *
 * Prefill: work item = (query head, block of FK_ATT_BQ query rows). Keys are visited in blocks of
 * FK_ATT_BK with an online softmax (running max m, running sum l, output rescaled by exp(m_old - m_new)),
 * so memory is a few stack tiles whatever S is: K block transposed to f32 [hd][BK] (scores for one query
 * become a vector over keys, no horizontal sums), V block widened to f32 [BK][hd], scores [BQ][BK],
 * output [BQ][hd] (<= 52 KiB for hd 128). The K/V widening is amortized over the BQ rows.
 * Decode: one query per head, work item = head; the same online softmax over key blocks, but scores are
 * direct dot products against the bf16 K rows and V rows are widened on the fly (nothing to amortize).
 * Every output row is computed by one thread in a fixed order: bitwise identical for any thread count. */
#ifndef FK_ATTENTION_H
#define FK_ATTENTION_H

#include "fk_convert.h"

#define FK_ATT_BQ 32
#define FK_ATT_BK 32

/* kv[S, n_kv*hd] (f32) -> cache[g][pos0+s][:] (bf16, RNE). */
FK_API void fk_kv_store(const float* kv, size_t S, size_t n_kv, size_t hd, uint16_t* cache, size_t cap, size_t pos0) {
  for (size_t s = 0; s < S; ++s)
    for (size_t g = 0; g < n_kv; ++g) fk__f32_to_bf16_run(kv + s * n_kv * hd + g * hd, cache + (g * cap + pos0 + s) * hd, hd);
}

/* ---- small per-ISA building blocks ------------------------------------------------------------- */
/* s[j] = scale * sum_d q[d] * kt[d*ldk + j], j < bk (kt: K block transposed, f32) */
FK_API void fk__att_scores_t_scalar(const float* q, const float* kt, size_t ldk, size_t hd, size_t bk, float scale, float* s) {
  for (size_t j = 0; j < bk; ++j) s[j] = 0.0f;
  for (size_t d = 0; d < hd; ++d)
    for (size_t j = 0; j < bk; ++j) s[j] += q[d] * kt[d * ldk + j];
  for (size_t j = 0; j < bk; ++j) s[j] *= scale;
}
/* s[j] = scale * dot(q, k_j) with k_j bf16 rows of length hd */
FK_API void fk__att_scores_bf16_scalar(const float* q, const uint16_t* k, size_t hd, size_t bk, float scale, float* s) {
  for (size_t j = 0; j < bk; ++j) {
    float a = 0.0f;
    for (size_t d = 0; d < hd; ++d) a += q[d] * fk_bf16_to_f32_1(k[j * hd + d]);
    s[j] = a * scale;
  }
}
/* p[j] = exp(s[j] - m), returns sum_j p[j] (ascending j, f32) */
FK_API float fk__att_exp_scalar(const float* s, size_t bk, float m, float* p) {
  float l = 0.0f;
  for (size_t j = 0; j < bk; ++j) {
    p[j] = expf(s[j] - m);
    l += p[j];
  }
  return l;
}
/* o = o * corr + sum_j p[j] * v_j  (v f32 rows [bk][hd] or bf16 rows) */
FK_API void fk__att_pv_scalar(float* o, float corr, const float* p, const float* v, const uint16_t* vb, size_t hd, size_t bk) {
  for (size_t d = 0; d < hd; ++d) o[d] *= corr;
  for (size_t j = 0; j < bk; ++j)
    for (size_t d = 0; d < hd; ++d) o[d] += p[j] * (v ? v[j * hd + d] : fk_bf16_to_f32_1(vb[j * hd + d]));
}

#if FK_X86
FK_TARGET_AVX512 FK_API void fk__att_scores_t_avx512(const float* q, const float* kt, size_t ldk, size_t hd, size_t bk, float scale, float* s) {
  /* bk <= FK_ATT_BK = 32: two vectors of keys; padded keys in kt are zero, masked on store */
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  for (size_t d = 0; d < hd; ++d) {
    const __m512 qd = _mm512_set1_ps(q[d]);
    a0 = _mm512_fmadd_ps(qd, _mm512_loadu_ps(kt + d * ldk), a0);
    a1 = _mm512_fmadd_ps(qd, _mm512_loadu_ps(kt + d * ldk + 16), a1);
  }
  const __m512 sc = _mm512_set1_ps(scale);
  const __mmask16 m0 = bk >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << bk) - 1);
  const __mmask16 m1 = bk >= 32 ? (__mmask16)0xffff : bk <= 16 ? (__mmask16)0 : (__mmask16)((1u << (bk - 16)) - 1);
  _mm512_mask_storeu_ps(s, m0, _mm512_mul_ps(a0, sc));
  _mm512_mask_storeu_ps(s + 16, m1, _mm512_mul_ps(a1, sc));
}
FK_TARGET_AVX512 FK_API void fk__att_scores_bf16_avx512(const float* q, const uint16_t* k, size_t hd, size_t bk, float scale, float* s) {
  for (size_t j = 0; j < bk; ++j) {
    __m512 a = _mm512_setzero_ps();
    for (size_t d = 0; d < hd; d += 16) {
      const __mmask16 m = hd - d >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (hd - d)) - 1);
      a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + d), fk__maskload_bf16x16(k + j * hd + d, m), a);
    }
    s[j] = fk__hsum512(a) * scale;
  }
}
FK_TARGET_AVX512 FK_API float fk__att_exp_avx512(const float* s, size_t bk, float m, float* p) {
  float l = 0.0f;
  for (size_t j = 0; j < bk; j += 16) {
    const __mmask16 k = bk - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (bk - j)) - 1);
    const __m512 e = _mm512_maskz_mov_ps(k, fk__exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + j), _mm512_set1_ps(m))));
    _mm512_mask_storeu_ps(p + j, k, e);
    l += fk__hsum512(e);
  }
  return l;
}
FK_TARGET_AVX512 FK_API void fk__att_pv_avx512(float* o, float corr, const float* p, const float* v, const uint16_t* vb, size_t hd, size_t bk) {
  const __m512 c = _mm512_set1_ps(corr);
  for (size_t d = 0; d < hd; d += 16) {
    const __mmask16 m = hd - d >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (hd - d)) - 1);
    __m512 acc = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, o + d), c);
    if (v)
      for (size_t j = 0; j < bk; ++j) acc = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), _mm512_maskz_loadu_ps(m, v + j * hd + d), acc);
    else
      for (size_t j = 0; j < bk; ++j) acc = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), fk__maskload_bf16x16(vb + j * hd + d, m), acc);
    _mm512_mask_storeu_ps(o + d, m, acc);
  }
}

FK_TARGET_AVX2 FK_API void fk__att_scores_t_avx2(const float* q, const float* kt, size_t ldk, size_t hd, size_t bk, float scale, float* s) {
  __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  for (size_t d = 0; d < hd; ++d) {
    const __m256 qd = _mm256_set1_ps(q[d]);
    for (int t = 0; t < 4; ++t) a[t] = _mm256_fmadd_ps(qd, _mm256_loadu_ps(kt + d * ldk + 8 * t), a[t]);
  }
  float tmp[32];
  for (int t = 0; t < 4; ++t) _mm256_storeu_ps(tmp + 8 * t, _mm256_mul_ps(a[t], _mm256_set1_ps(scale)));
  for (size_t j = 0; j < bk; ++j) s[j] = tmp[j];
}
FK_TARGET_AVX2 FK_API void fk__att_scores_bf16_avx2(const float* q, const uint16_t* k, size_t hd, size_t bk, float scale, float* s) {
  for (size_t j = 0; j < bk; ++j) {
    __m256 a = _mm256_setzero_ps();
    size_t d = 0;
    for (; d + 8 <= hd; d += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), fk__load_bf16x8(k + j * hd + d), a);
    float r = fk__hsum256(a);
    for (; d < hd; ++d) r = fmaf(q[d], fk_bf16_to_f32_1(k[j * hd + d]), r);
    s[j] = r * scale;
  }
}
FK_TARGET_AVX2 FK_API float fk__att_exp_avx2(const float* s, size_t bk, float m, float* p) {
  float l = 0.0f;
  size_t j = 0;
  for (; j + 8 <= bk; j += 8) {
    const __m256 e = fk__exp256(_mm256_sub_ps(_mm256_loadu_ps(s + j), _mm256_set1_ps(m)));
    _mm256_storeu_ps(p + j, e);
    l += fk__hsum256(e);
  }
  for (; j < bk; ++j) {
    p[j] = expf(s[j] - m);
    l += p[j];
  }
  return l;
}
FK_TARGET_AVX2 FK_API void fk__att_pv_avx2(float* o, float corr, const float* p, const float* v, const uint16_t* vb, size_t hd, size_t bk) {
  const __m256 c = _mm256_set1_ps(corr);
  size_t d = 0;
  for (; d + 8 <= hd; d += 8) {
    __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(o + d), c);
    if (v)
      for (size_t j = 0; j < bk; ++j) acc = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), _mm256_loadu_ps(v + j * hd + d), acc);
    else
      for (size_t j = 0; j < bk; ++j) acc = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), fk__load_bf16x8(vb + j * hd + d), acc);
    _mm256_storeu_ps(o + d, acc);
  }
  for (; d < hd; ++d) {
    float a = o[d] * corr;
    for (size_t j = 0; j < bk; ++j) a = fmaf(p[j], v ? v[j * hd + d] : fk_bf16_to_f32_1(vb[j * hd + d]), a);
    o[d] = a;
  }
}
#endif

FK_API void fk__att_scores_t(fk_isa isa, const float* q, const float* kt, size_t ldk, size_t hd, size_t bk, float scale, float* s) {
  switch (isa) {
#if FK_X86
    case FK_ISA_AMX:
    case FK_ISA_AVX512BF16: fk__att_scores_t_avx512(q, kt, ldk, hd, bk, scale, s); return;
    case FK_ISA_AVX2: fk__att_scores_t_avx2(q, kt, ldk, hd, bk, scale, s); return;
#endif
    default: fk__att_scores_t_scalar(q, kt, ldk, hd, bk, scale, s); return;
  }
}
FK_API void fk__att_scores_bf16(fk_isa isa, const float* q, const uint16_t* k, size_t hd, size_t bk, float scale, float* s) {
  switch (isa) {
#if FK_X86
    case FK_ISA_AMX:
    case FK_ISA_AVX512BF16: fk__att_scores_bf16_avx512(q, k, hd, bk, scale, s); return;
    case FK_ISA_AVX2: fk__att_scores_bf16_avx2(q, k, hd, bk, scale, s); return;
#endif
    default: fk__att_scores_bf16_scalar(q, k, hd, bk, scale, s); return;
  }
}
FK_API float fk__att_exp(fk_isa isa, const float* s, size_t bk, float m, float* p) {
  switch (isa) {
#if FK_X86
    case FK_ISA_AMX:
    case FK_ISA_AVX512BF16: return fk__att_exp_avx512(s, bk, m, p);
    case FK_ISA_AVX2: return fk__att_exp_avx2(s, bk, m, p);
#endif
    default: return fk__att_exp_scalar(s, bk, m, p);
  }
}
FK_API void fk__att_pv(fk_isa isa, float* o, float corr, const float* p, const float* v, const uint16_t* vb, size_t hd, size_t bk) {
  switch (isa) {
#if FK_X86
    case FK_ISA_AMX:
    case FK_ISA_AVX512BF16: fk__att_pv_avx512(o, corr, p, v, vb, hd, bk); return;
    case FK_ISA_AVX2: fk__att_pv_avx2(o, corr, p, v, vb, hd, bk); return;
#endif
    default: fk__att_pv_scalar(o, corr, p, v, vb, hd, bk); return;
  }
}

/* Online-softmax step for one query row over one block of scores s[0..bk). */
FK_API void fk__att_online(fk_isa isa, const float* s, size_t bk, float* m, float* l, float* o, const float* v,
                           const uint16_t* vb, size_t hd, float* p) {
  float mb = s[0];
  for (size_t j = 1; j < bk; ++j) mb = s[j] > mb ? s[j] : mb;
  const float mnew = mb > *m ? mb : *m;
  const float corr = expf(*m - mnew); /* exp(-inf) = 0 on the first block: o and l start at 0 anyway */
  const float lb = fk__att_exp(isa, s, bk, mnew, p);
  *l = *l * corr + lb;
  fk__att_pv(isa, o, corr, p, v, vb, hd, bk);
  *m = mnew;
}

/* Rows q0 .. q0+bq of one head h (prefill work item). */
FK_API void fk__att_prefill_item(fk_isa isa, const float* q, size_t n_heads, size_t h, const uint16_t* kc, const uint16_t* vc,
                                 size_t hd, size_t pos0, size_t q0, size_t bq, float scale, float* out) {
  float kt[FK_MAX_HEAD_DIM * FK_ATT_BK]; /* K block, transposed: kt[d][j] */
  float vf[FK_ATT_BK * FK_MAX_HEAD_DIM]; /* V block widened: vf[j][d] */
  float o[FK_ATT_BQ * FK_MAX_HEAD_DIM];
  float mrow[FK_ATT_BQ], lrow[FK_ATT_BQ], s[FK_ATT_BK], p[FK_ATT_BK];
  const size_t ld = n_heads * hd;
  for (size_t i = 0; i < bq; ++i) {
    mrow[i] = -INFINITY;
    lrow[i] = 0.0f;
    for (size_t d = 0; d < hd; ++d) o[i * hd + d] = 0.0f;
  }
  const size_t kend = pos0 + q0 + bq; /* keys 0 .. kend-1 are visible to the last row */
  for (size_t j0 = 0; j0 < kend; j0 += FK_ATT_BK) {
    const size_t bk = kend - j0 < FK_ATT_BK ? kend - j0 : FK_ATT_BK;
    fk__bf16_to_f32_run(vc + j0 * hd, vf, bk * hd);
    for (size_t j = 0; j < FK_ATT_BK; ++j)
      for (size_t d = 0; d < hd; ++d) kt[d * FK_ATT_BK + j] = j < bk ? fk_bf16_to_f32_1(kc[(j0 + j) * hd + d]) : 0.0f;
    for (size_t i = 0; i < bq; ++i) {
      const size_t pos = pos0 + q0 + i;
      if (pos < j0) continue; /* causal: this whole block is in row i's future */
      const size_t nv = pos + 1 - j0 < bk ? pos + 1 - j0 : bk;
      fk__att_scores_t(isa, q + (q0 + i) * ld + h * hd, kt, FK_ATT_BK, hd, nv, scale, s);
      fk__att_online(isa, s, nv, &mrow[i], &lrow[i], o + i * hd, vf, NULL, hd, p);
    }
  }
  for (size_t i = 0; i < bq; ++i) {
    const float inv = 1.0f / lrow[i];
    float* dst = out + (q0 + i) * ld + h * hd;
    for (size_t d = 0; d < hd; ++d) dst[d] = o[i * hd + d] * inv;
  }
}

FK_API void fk_attention_prefill(const float* q, size_t S, size_t n_heads, const uint16_t* kc, const uint16_t* vc, size_t n_kv,
                                 size_t hd, size_t cap, size_t pos0, float* out) {
  const fk_isa isa = fk_isa_active();
  const size_t group = n_heads / n_kv, nqb = (S + FK_ATT_BQ - 1) / FK_ATT_BQ, items = n_heads * nqb;
  const float scale = 1.0f / sqrtf((float)hd);
  const int nt = fk__threads_for(items, (double)FK_ATT_BQ * (double)(pos0 + S) * (double)hd * 4);
  FK_PARALLEL_FOR(nt)
  for (size_t it = 0; it < items; ++it) {
    const size_t h = it / nqb, qb = it % nqb, g = h / group;
    const size_t q0 = qb * FK_ATT_BQ, bq = S - q0 < FK_ATT_BQ ? S - q0 : FK_ATT_BQ;
    fk__att_prefill_item(isa, q, n_heads, h, kc + g * cap * hd, vc + g * cap * hd, hd, pos0, q0, bq, scale, out);
  }
}

FK_API void fk_attention_decode(const float* q, size_t n_heads, const uint16_t* kc, const uint16_t* vc, size_t n_kv, size_t hd,
                                size_t cap, size_t pos, float* out) {
  const fk_isa isa = fk_isa_active();
  const size_t group = n_heads / n_kv;
  const float scale = 1.0f / sqrtf((float)hd);
  const int nt = fk__threads_for(n_heads, (double)(pos + 1) * (double)hd * 4);
  FK_PARALLEL_FOR(nt)
  for (size_t h = 0; h < n_heads; ++h) {
    const uint16_t* k = kc + (h / group) * cap * hd;
    const uint16_t* v = vc + (h / group) * cap * hd;
    float o[FK_MAX_HEAD_DIM], s[FK_ATT_BK], p[FK_ATT_BK];
    float m = -INFINITY, l = 0.0f;
    for (size_t d = 0; d < hd; ++d) o[d] = 0.0f;
    for (size_t j0 = 0; j0 <= pos; j0 += FK_ATT_BK) {
      const size_t bk = pos + 1 - j0 < FK_ATT_BK ? pos + 1 - j0 : FK_ATT_BK;
      fk__att_scores_bf16(isa, q + h * hd, k + j0 * hd, hd, bk, scale, s);
      fk__att_online(isa, s, bk, &m, &l, o, NULL, v + j0 * hd, hd, p);
    }
    const float inv = 1.0f / l;
    for (size_t d = 0; d < hd; ++d) out[h * hd + d] = o[d] * inv;
  }
}

#endif /* FK_ATTENTION_H */
