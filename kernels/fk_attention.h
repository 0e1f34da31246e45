/* fk_attention.h: KV cache store and causal grouped-query attention.
 *
 * Cache: per layer, kc and vc are bf16 with n_kv * cap * hd elements, KV head g's at g * cap * hd. Within a
 * head, positions are in blocks of FK_ATT_BK (the capacity's last block holds cap % FK_ATT_BK when that is
 * not 0), block b0 / FK_ATT_BK at element b0 * hd, each block in the order its reader wants:
 *   values (fk_kv_index): 16-dim chunks, chunk c0 = 0, 16, .. at c0 * w (w: the block's width), each its
 *     w positions' n = min(16, hd - c0) dims as key pairs: positions (2i, 2i + 1) at 2i * n, dim by dim,
 *     the two keys' values side by side (an odd w's last position alone, its n dims in order): one load
 *     is 8 dims of two keys (AVX2: split by a shift and a mask into the two keys' vectors) or 16 dims of
 *     two keys as vdpbf16ps takes them (AVX-512: lane d, dim d of both keys), so PV reads V as it lies;
 *   keys (fk_k_index): dim pairs, pair (d, d + 1) at d * w, its w positions' two dims side by side (an
 *     odd hd's last dim alone): one load is 8 keys' values of two dims, split apart by a shift and a
 *     mask (AVX2), or 16 keys' pairs as vdpbf16ps takes them (AVX-512), so the scores take keys as
 *     vector lanes with no transposition.
 * fk_kv_store and fk_k_store write them; a graph says which cache is which by the attention input that
 * reads it (data_layout). Either block is sequential runs the hardware prefetchers follow. Query head h
 * reads KV head h / (n_heads / n_kv). Scores are scaled by 1/sqrt(hd); query at position p attends to
 * keys 0..p.
 *
 * Keys are visited in blocks of FK_ATT_BK with an online softmax (running max m, running sum l, output
 * rescaled by exp(m_old - m_new)), so memory is a few stack tiles whatever S is. The paths:
 *   AVX-512 BF16 (and AMX): products by vdpbf16ps, as PyTorch's bf16 attention computes them: the query
 *     and the softmax weights are rounded to bf16 (RNE) before their products, which are exact and
 *     summed in f32; scores, softmax and outputs are f32. K and V are read as the caches lie.
 *   AVX2 and scalar: f32 FMAs on widened values: the K block widened to f32 [hd][BK] (a query's scores
 *     become a vector over keys: no horizontal sums; AVX2 reads it from the bf16 block at few rows),
 *     V widened to f32 [BK][hd] (scalar; AVX2 splits each load of a key pair, fk__att_load_v_avx2).
 * The tiles' cost is amortized over the rows of a work item:
 *   prefill: work item = (query head, FK_ATT_BQ consecutive positions);
 *   decode:  work item = (KV head, up to FK_ATT_BQ of its query heads, key segment), all at the same
 *            position; beyond FK_ATT_SEG keys the keys are split into segments merged afterwards
 *            (see fk_attention_decode); up to FK_ATT_SEG keys decode equals prefill bit for bit.
 * AVX-512 and AVX2 run a key block in three phases (all rows' scores, all softmax, all PV) over groups of
 * rows that share the K/V loads, prefetching the next block meanwhile (docs/history/PERFORMANCE-2026-11.md).
 * Every output row is computed by one thread in a fixed order: bitwise identical for any thread count. */
#ifndef FK_ATTENTION_H
#define FK_ATTENTION_H

#include "fk_convert.h"

#define FK_ATT_BQ 32
#define FK_ATT_BK 32

/* The width of the key block that starts at position b0 in a cache of capacity cap (FK_ATT_BK, or the
 * capacity's last block's fewer). */
static inline size_t fk__att_block_width(size_t cap, size_t b0) { return cap - b0 < FK_ATT_BK ? cap - b0 : FK_ATT_BK; }
/* The dims of the 16-dim chunk that starts at dim c0 (16, or the last chunk's fewer). */
static inline size_t fk__kv_chunk_dims(size_t hd, size_t c0) { return hd - c0 < 16 ? hd - c0 : 16; }
/* Whether key j of a block of width w lies alone (an odd width's last key) rather than in a pair. */
static inline int fk__kv_alone(size_t w, size_t j) { return w % 2 == 1 && j + 1 == w; }
/* The element of key j, dim d within a value block of width w (layout above). */
static inline size_t fk__kv_block_index(size_t hd, size_t w, size_t j, size_t d) {
  const size_t c0 = d / 16 * 16, n = fk__kv_chunk_dims(hd, c0);
  return c0 * w + (fk__kv_alone(w, j) ? j * n + (d - c0) : j / 2 * 2 * n + (d - c0) * 2 + j % 2);
}
/* The element of position p, dim d in one KV head's cache of capacity cap (layout above). */
static inline size_t fk_kv_index(size_t cap, size_t hd, size_t p, size_t d) {
  const size_t b0 = p / FK_ATT_BK * FK_ATT_BK, w = fk__att_block_width(cap, b0);
  return b0 * hd + fk__kv_block_index(hd, w, p - b0, d);
}

/* The element of key j, dim d within a K block of width w (layout above). */
static inline size_t fk__k_block_index(size_t hd, size_t w, size_t j, size_t d) {
  return d + 1 < hd || hd % 2 == 0 ? d / 2 * 2 * w + 2 * j + d % 2 : d * w + j;
}
/* The element of position p, dim d in one KV head's key cache of capacity cap (layout above). */
static inline size_t fk_k_index(size_t cap, size_t hd, size_t p, size_t d) {
  const size_t b0 = p / FK_ATT_BK * FK_ATT_BK, w = fk__att_block_width(cap, b0);
  return b0 * hd + fk__k_block_index(hd, w, p - b0, d);
}
/* rows[S, n_kv*hd] (f32) -> cache positions pos0 .. pos0+S-1 of every KV head (bf16, RNE), each element
 * where index_of (fk_k_index or fk_kv_index) puts it. */
static inline void fk__cache_store(const float* rows, size_t S, size_t n_kv, size_t hd, uint16_t* cache, size_t cap, size_t pos0,
                                   size_t (*index_of)(size_t, size_t, size_t, size_t)) {
  for (size_t s = 0; s < S; ++s)
    for (size_t g = 0; g < n_kv; ++g)
      for (size_t d = 0; d < hd; ++d)
        cache[g * cap * hd + index_of(cap, hd, pos0 + s, d)] = fk_f32_to_bf16_1(rows[s * n_kv * hd + g * hd + d]);
}

/* k[S, n_kv*hd] (f32) -> key cache positions pos0 .. pos0+S-1 of every KV head (bf16, RNE). */
FK_API void fk_k_store(const float* k, size_t S, size_t n_kv, size_t hd, uint16_t* cache, size_t cap, size_t pos0) {
  fk__cache_store(k, S, n_kv, hd, cache, cap, pos0, fk_k_index);
}

/* v[S, n_kv*hd] (f32) -> value cache positions pos0 .. pos0+S-1 of every KV head (bf16, RNE). */
FK_API void fk_kv_store(const float* kv, size_t S, size_t n_kv, size_t hd, uint16_t* cache, size_t cap, size_t pos0) {
  fk__cache_store(kv, S, n_kv, hd, cache, cap, pos0, fk_kv_index);
}

/* e^(m_old - m_new), the rescale of a row's running output and sum: exp(-inf) = 0 on the first block,
 * where o and l are 0 anyway. While the running max stands the difference is 0 and the result exactly
 * 1 without the libm call. expf's own result whatever the inputs. */
static inline float fk__att_corr(float m_old, float m_new) {
  const float diff = m_old - m_new;
  return diff == 0.0f ? 1.0f : expf(diff);
}

/* ---- one query row x one key block --------------------------------------------------------------
 * kt: the key block transposed to f32, kt[d * FK_ATT_BK + j]; vf: the value block, vf[j * hd + d];
 * nv <= FK_ATT_BK visible keys. Updates the row's running max m, running sum l and unnormalized output
 * o[hd]:  s_j = scale * q.k_j;  m' = max(m, max_j s_j);  l = l e^(m-m') + sum_j e^(s_j-m');
 *         o = o e^(m-m') + sum_j e^(s_j-m') v_j.
 * The SIMD versions keep 8 independent FMA chains in both products, because one chain per vector is
 * FMA-latency bound at these sizes: AVX-512 by pairing rows (below), AVX2 by pairing rows with 2 dims /
 * 2 keys in flight. */
FK_API void fk__att_block_scalar(const float* q, const float* kt, const float* vf, size_t hd, size_t nv, float scale, float* m,
                                 float* l, float* o) {
  float s[FK_ATT_BK];
  float mb = -INFINITY;
  for (size_t j = 0; j < nv; ++j) {
    float a = 0.0f;
    for (size_t d = 0; d < hd; ++d) a += q[d] * kt[d * FK_ATT_BK + j];
    s[j] = a * scale;
    mb = s[j] > mb ? s[j] : mb;
  }
  const float mnew = mb > *m ? mb : *m;
  const float corr = fk__att_corr(*m, mnew);
  float lb = 0.0f;
  for (size_t j = 0; j < nv; ++j) {
    s[j] = expf(s[j] - mnew);
    lb += s[j];
  }
  *l = *l * corr + lb;
  for (size_t d = 0; d < hd; ++d) {
    float a = o[d] * corr;
    for (size_t j = 0; j < nv; ++j) a += s[j] * vf[j * hd + d];
    o[d] = a;
  }
  *m = mnew;
}

#if FK_X86
/* gcc folds a load shared by two FMAs into both as memory operands, doubling the loads of a loop that is
 * then load-port bound; an empty asm that "modifies" the registers makes each value one load. */
#if defined(__GNUC__)
#ifndef FK_AVX512_EMULATE /* the 4-operand form holds zmm values, which an AVX2 build has no register for */
#define FK_KEEP_IN_REG(a, b, c, d) __asm__("" : "+v"(a), "+v"(b), "+v"(c), "+v"(d))
#else
#define FK_KEEP_IN_REG(a, b, c, d)
#endif
#define FK_KEEP_IN_REG2(a, b) __asm__("" : "+v"(a), "+v"(b))
#else
#define FK_KEEP_IN_REG(a, b, c, d)
#define FK_KEEP_IN_REG2(a, b)
#endif

/* The share per tick of a block's `ticks`: whole lines, 0 when there is no next block. */
static inline size_t fk__att_pf_step(const char* pf_k, size_t pf_bytes, size_t ticks) {
  return pf_k ? (pf_bytes + 64 * ticks - 1) / (64 * ticks) * 64 : 0;
}
/* A key block's prefetch in flight (the AVX2 and AVX-512 blocks): the next block's K and V lines from k
 * and v, bytes of each, step bytes of each per tick, spread over the block's inner loops (each block
 * says where it ticks; the AVX2 block below, why and what it measured). */
typedef struct {
  const char *k, *v;
  size_t at, step, bytes;
} fk__att_pf;
static inline FK_ALWAYS_INLINE void fk__att_pf_tick(fk__att_pf* pf) {
  for (const size_t end = pf->at + pf->step < pf->bytes ? pf->at + pf->step : pf->bytes; pf->at < end; pf->at += 64) {
    _mm_prefetch(pf->k + pf->at, _MM_HINT_T0);
    _mm_prefetch(pf->v + pf->at, _MM_HINT_T0);
  }
}


/* ---- AVX-512 BF16: a key block in three phases (all rows' scores, all rows' softmax, all rows' PV),
 * rows in groups of up to 4 that share every K and V load, the products by vdpbf16ps: two bf16
 * products per f32 lane, exact, accumulated in f32, at twice the rate of FMAs on widened values (decode
 * of 7 query heads per KV head was bound by those FMAs). As PyTorch's
 * bf16 attention does, a row's query is rounded to bf16 (RNE, fk__att_q_pairs_avx512) and so are its
 * weights p before PV; the scores, the softmax, its sum l and the outputs stay f32. The scores read the
 * key cache as it lies: a dim pair of 16 keys is one load, lane j key j's (d, d + 1); PV reads the value
 * cache as it lies too: a key pair's 16 dims are one load, lane d dim d of both keys (an odd width's
 * last key, alone in the cache, widened to pairs (v, 0)). Interleaving V into pairs once per block
 * instead (a load and a vpermw per pair and 16 dims, into a stack tile) cost decode more than it saved.
 * Per row the arithmetic is the same whatever the group: scores are 2 key vectors x 2 chains (even and
 * odd dim pairs), the softmax is one row's, PV runs the row's own key pairs in order (a row with an odd
 * number of keys ends on a half pair whose missing key is 0 in both factors); so grouping never changes
 * a row's bits, and the phases let the rows' softmax chains (max, exp, sum: latency-bound) overlap.
 * The next key block is prefetched a few lines per tick: every 8 dim pairs of a group's scores, each
 * group's softmax, each 64-dim PV pass: a burst per phase stalls on the lines it asks for. */
/* q[0 .. hd) -> qp[0 .. (hd + 1) / 2): dims (2i, 2i + 1) as one bf16 pair (vcvtne2ps2bf16: RNE, denormals
 * to 0), an odd hd's last dim paired with 0. */
FK_TARGET_AVX512 FK_API void fk__att_q_pairs_avx512(const float* q, size_t hd, uint32_t* qp) {
  size_t d = 0;
  for (; d + 32 <= hd; d += 32) /* whole chunks by plain loads and stores: see fk__att_pv_bf16 */
    _mm512_storeu_si512(qp + d / 2, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(q + d + 16), _mm512_loadu_ps(q + d)));
  for (; d < hd; d += 32) {
    const __m512 lo = _mm512_maskz_loadu_ps(fk__lanes16(hd, d), q + d);
    const __m512 hi = _mm512_maskz_loadu_ps(fk__lanes16(hd, d + 16), q + d + 16);
    const __m512i pairs = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
    _mm512_mask_storeu_ps(qp + d / 2, fk__lanes16((hd + 1) / 2, d / 2), _mm512_castsi512_ps(pairs));
  }
}

/* The query pair t of R rows against keys 0-15 (k0) and 16-31 (k1) of one dim pair: chains a[r][c],
 * a[r][c + 1]. */
FK_TARGET_AVX512 static inline FK_ALWAYS_INLINE void fk__att_scores_pair_bf16(int R, const uint32_t* const* qp, size_t t, __m512i k0,
                                                                              __m512i k1, int c, __m512 (*a)[4]) {
  FK_UNROLL(4)
  for (int r = 0; r < R; ++r) {
    __m512i qv = _mm512_set1_epi32((int)qp[r][t]);
    FK_CLANG_IN_REG(qv); /* see fk_common.h: clang 16 crashes folding this broadcast into vdpbf16ps */
    a[r][c] = _mm512_dpbf16_ps(a[r][c], (__m512bh)k0, (__m512bh)qv);
    a[r][c + 1] = _mm512_dpbf16_ps(a[r][c + 1], (__m512bh)k1, (__m512bh)qv);
  }
}

/* Scaled scores s[r][0 .. FK_ATT_BK) of R (1 to 4) rows from the bf16 K block kb (width w in the cache,
 * bk keys loaded, the rest 0, masked later): a[r] = [keys 0-15 even pairs, keys 16-31 even pairs,
 * keys 0-15 odd pairs, keys 16-31 odd pairs]. An odd hd's last dim, alone in the key layout, is widened
 * to pairs (k, 0) against the query's (q, 0). full (a full block, fk__att_block_bf16_body): K by plain
 * loads (see fk__att_pv_bf16) and one prefetch tick, not one every 8 dim pairs. */
FK_TARGET_AVX512 static inline FK_ALWAYS_INLINE void fk__att_scores_bf16(int R, const uint32_t* const* qp, const uint16_t* kb, size_t w,
                                                                         size_t bk, size_t hd, float scale, float* const* s,
                                                                         fk__att_pf* pf, int full) {
  __m512 a[4][4];
  FK_UNROLL(4)
  for (int r = 0; r < R; ++r)
    FK_UNROLL(4)
    for (int c = 0; c < 4; ++c) a[r][c] = _mm512_setzero_ps();
  const __mmask16 m0 = fk__lanes16(bk, 0), m1 = fk__lanes16(bk, 16);
  const size_t pairs = hd / 2;
  size_t t = 0;
  if (full) fk__att_pf_tick(pf);
  for (; t + 1 < pairs; t += 2) {
    if (!full && t % 8 == 0) fk__att_pf_tick(pf);
    const uint16_t* kp = kb + 2 * t * w;
    __m512i k0, k1, k2, k3;
    if (full) {
      k0 = _mm512_loadu_si512(kp), k1 = _mm512_loadu_si512(kp + 32);
      k2 = _mm512_loadu_si512(kp + 2 * w), k3 = _mm512_loadu_si512(kp + 2 * w + 32);
    } else {
      k0 = _mm512_castps_si512(_mm512_maskz_loadu_ps(m0, kp)), k1 = _mm512_castps_si512(_mm512_maskz_loadu_ps(m1, kp + 32));
      k2 = _mm512_castps_si512(_mm512_maskz_loadu_ps(m0, kp + 2 * w)), k3 = _mm512_castps_si512(_mm512_maskz_loadu_ps(m1, kp + 2 * w + 32));
    }
    FK_KEEP_IN_REG(k0, k1, k2, k3);
    fk__att_scores_pair_bf16(R, qp, t, k0, k1, 0, a);
    fk__att_scores_pair_bf16(R, qp, t + 1, k2, k3, 2, a);
  }
  if (t < pairs) { /* an odd number of pairs: the last into the even chains */
    const uint16_t* kp = kb + 2 * t * w;
    const __m512i k0 = _mm512_castps_si512(_mm512_maskz_loadu_ps(m0, kp)), k1 = _mm512_castps_si512(_mm512_maskz_loadu_ps(m1, kp + 32));
    fk__att_scores_pair_bf16(R, qp, t, k0, k1, 0, a);
  }
  if (hd % 2) { /* the last dim alone, into the odd chains */
    const uint16_t* kd = kb + (hd - 1) * w;
    const __m512i k0 = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m0, kd)), k1 = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m1, kd + 16));
    fk__att_scores_pair_bf16(R, qp, pairs, k0, k1, 2, a);
  }
  const __m512 sc = _mm512_set1_ps(scale);
  FK_UNROLL(4)
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(s[r], _mm512_mul_ps(_mm512_add_ps(a[r][0], a[r][2]), sc));
    _mm512_storeu_ps(s[r] + 16, _mm512_mul_ps(_mm512_add_ps(a[r][1], a[r][3]), sc));
  }
}

/* How far a block's scores may pass the running max before it moves (AVX-512 softmax): weights then
 * reach e^16 ~ 9e6 and a row's sum L e^16, far inside f32, and rounding them to bf16 is relative all the
 * same; most blocks skip the max's reduction and the rescale. */
#define FK_ATT_MAX_SLACK 16.0f

/* The softmax bookkeeping of R (1 to 4) rows against the block, each step across the rows (their
 * chains interleaved: see fk__exp512_n): row r's p_j = e^(s_j - m') (keys past n[r] masked to -inf for
 * the max, to 0 after exp), rounded to bf16 into pb[r] (pair i: keys 2i, 2i + 1); m, l updated (l sums
 * the f32 weights, as PyTorch does); corr[r] = e^(m - m'). m' = m unless a score passes m by more than
 * FK_ATT_MAX_SLACK; then it is the block's max (so m' = m, the first block aside, in most blocks,
 * which skip the reduction and the rescale). A row's bits do not depend on the others. */
FK_TARGET_AVX512 static inline FK_ALWAYS_INLINE void fk__att_softmax_bf16(int R, float* const* s, const size_t* n, float* const* m,
                                                                          float* const* l, uint32_t* const* pb, float* corr) {
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  __mmask16 keep[8];
  __m512 x[8];
  FK_UNROLL(4)
  for (int r = 0; r < R; ++r) {
    keep[2 * r] = fk__lanes16(n[r], 0);
    keep[2 * r + 1] = fk__lanes16(n[r], 16);
    x[2 * r] = _mm512_mask_mov_ps(ninf, keep[2 * r], _mm512_loadu_ps(s[r]));
    x[2 * r + 1] = _mm512_mask_mov_ps(ninf, keep[2 * r + 1], _mm512_loadu_ps(s[r] + 16));
  }
  float mnew[4];
  FK_UNROLL(4)
  for (int r = 0; r < R; ++r) {
    const __m512 mx = _mm512_max_ps(x[2 * r], x[2 * r + 1]);
    mnew[r] = *m[r];
    corr[r] = 1.0f;
    if (_mm512_cmp_ps_mask(mx, _mm512_set1_ps(*m[r] + FK_ATT_MAX_SLACK), _CMP_GT_OQ)) { /* always on the first block: m = -inf */
      const float mb = _mm512_reduce_max_ps(mx);
      mnew[r] = mb > *m[r] ? mb : *m[r];
      corr[r] = fk__att_corr(*m[r], mnew[r]);
    }
  }
  FK_UNROLL(8)
  for (int i = 0; i < 2 * R; ++i) x[i] = _mm512_sub_ps(x[i], _mm512_set1_ps(mnew[i / 2]));
  fk__exp512_n(2 * R, x);
  FK_UNROLL(8)
  for (int i = 0; i < 2 * R; ++i) x[i] = _mm512_maskz_mov_ps(keep[i], x[i]);
  FK_UNROLL(4)
  for (int r = 0; r < R; ++r) {
    *l[r] = fmaf(*l[r], corr[r], fk__hsum512(_mm512_add_ps(x[2 * r], x[2 * r + 1]))); /* explicit: C and C++ contract differently */
    *m[r] = mnew[r];
    _mm512_storeu_si512(pb[r], (__m512i)_mm512_cvtne2ps_pbh(x[2 * r + 1], x[2 * r]));
  }
}

/* Key pair i's 64 dims v into R rows' PV chains e[r] (one per 16 dims). */
FK_TARGET_AVX512 static inline FK_ALWAYS_INLINE void fk__att_pv_pair_bf16(int R, uint32_t* const* pb, size_t i, const __m512i* v,
                                                                          __m512 (*e)[4]) {
  FK_UNROLL(4)
  for (int r = 0; r < R; ++r) {
    __m512i pv = _mm512_set1_epi32((int)pb[r][i]);
    FK_CLANG_IN_REG(pv);
    FK_UNROLL(4)
    for (int t = 0; t < 4; ++t) e[r][t] = _mm512_dpbf16_ps(e[r][t], (__m512bh)v[t], (__m512bh)pv);
  }
}

/* PV of R (1 to 4) rows for dims d0 .. d0 + 63 (masked past hd), key pairs i0 .. i1 - 1 of the V block
 * vb (width w) in order, then with half set the pair i1 with its second key's value taken as 0 (a row's
 * odd last key): o[r] = o[r] corr[r] + sum p v (corr NULL: o[r] + sum, a row's run continued).
 * plain (a full block's): a whole 64-dim pass loads and stores without masks. On Zen 5 a masked load
 * gets no store forwarding and streams slower (the query pairs' conversion, fk__att_q_pairs_avx512,
 * stalled prefill so): prefill's full blocks gain; decode from DRAM ran slower with plain loads
 * (docs/PERFORMANCE.md), and keeps its masks. */
FK_TARGET_AVX512 static inline FK_ALWAYS_INLINE void fk__att_pv_bf16(int R, uint32_t* const* pb, const uint16_t* vb, size_t w,
                                                                     size_t hd, size_t d0, size_t i0, size_t i1, int half,
                                                                     const float* corr, float* const* o, int plain) {
  const int whole = plain && d0 + 64 <= hd;
  __mmask16 dm[4];
  const uint16_t* chunk[4]; /* the 16-dim chunks' key pair i0 */
  size_t pair_words[4];
  FK_UNROLL(4)
  for (int t = 0; t < 4; ++t) {
    const size_t c0 = d0 + 16 * (size_t)t;
    dm[t] = fk__lanes16(hd, c0);
    pair_words[t] = c0 < hd ? 2 * fk__kv_chunk_dims(hd, c0) : 0;
    chunk[t] = vb + (c0 < hd ? c0 * w : 0) + i0 * pair_words[t];
  }
  __m512 e[4][4];
  FK_UNROLL(4)
  for (int r = 0; r < R; ++r)
    FK_UNROLL(4)
    for (int t = 0; t < 4; ++t) {
      e[r][t] = whole ? _mm512_loadu_ps(o[r] + d0 + 16 * t) : _mm512_maskz_loadu_ps(dm[t], o[r] + d0 + 16 * t);
      if (corr) e[r][t] = _mm512_mul_ps(e[r][t], _mm512_set1_ps(corr[r]));
    }
  for (size_t i = i0; i < i1; ++i) {
    __m512i v[4];
    FK_UNROLL(4)
    for (int t = 0; t < 4; ++t) {
      v[t] = whole ? _mm512_loadu_si512(chunk[t]) : _mm512_castps_si512(_mm512_maskz_loadu_ps(dm[t], chunk[t]));
      chunk[t] += pair_words[t];
    }
    FK_KEEP_IN_REG(v[0], v[1], v[2], v[3]);
    fk__att_pv_pair_bf16(R, pb, i, v, e);
  }
  if (half) { /* the pair's second key: past the row's keys (its value may be unwritten: no NaN may pass) */
    const __m512i first = _mm512_set1_epi32(0xFFFF);
    const int alone = fk__kv_alone(w, 2 * i1);
    __m512i v[4];
    FK_UNROLL(4)
    for (int t = 0; t < 4; ++t)
      v[t] = alone ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(dm[t], chunk[t]))
                   : _mm512_and_si512(_mm512_castps_si512(_mm512_maskz_loadu_ps(dm[t], chunk[t])), first);
    fk__att_pv_pair_bf16(R, pb, i1, v, e);
  }
  FK_UNROLL(4)
  for (int r = 0; r < R; ++r)
    FK_UNROLL(4)
    for (int t = 0; t < 4; ++t) {
      if (whole) _mm512_storeu_ps(o[r] + d0 + 16 * t, e[r][t]);
      else _mm512_mask_storeu_ps(o[r] + d0 + 16 * t, dm[t], e[r][t]);
    }
}

/* Rows per AVX-512 group for rem rows still to go: 4, but 3 where a 4 would leave a single row behind. */
static inline size_t fk__att_group512(size_t rem) { return rem == 5 ? 3 : rem < 4 ? rem : 4; }

/* Where the rows of one group (up to 4) of a key block's work lie, for every phase: the group's slot r
 * is the block's row k + r, the index i into the block's tiles (s, pb, corr) and the item's row
 * first + i (its query pairs, nv, m, l and o). A group of R < 4 fills its slots past R with its first
 * row, so each slot holds a valid pointer (those slots are never computed). Each phase reads only its
 * fields; the rest are dropped after inlining. */
typedef struct {
  const uint32_t* q[4]; /* the query pairs */
  float* s[4];          /* the scaled scores */
  size_t n[4];          /* the keys seen */
  float *m[4], *l[4];   /* running max and sum */
  uint32_t* p[4];       /* the weights as bf16 pairs */
  float* o[4];          /* the unnormalized output */
} fk__att_rowset;
/* The block's tiles and the item's rows as fk__att_block_bf16_body holds them: row i's query pairs at
 * qp + i * ((hd + 1) / 2), its output at o + i * hd. */
typedef struct {
  const uint32_t* qp;
  size_t first;
  const size_t* nv;
  float *m, *l, *o;
  size_t hd;
  float (*s)[FK_ATT_BK];
  uint32_t (*pb)[FK_ATT_BK / 2];
} fk__att_tiles;
/* full: every row sees all FK_ATT_BK keys (nv is not read). */
static inline FK_ALWAYS_INLINE fk__att_rowset fk__att_rowset_at(const fk__att_tiles* t, size_t k, size_t R, int full) {
  fk__att_rowset g;
  FK_UNROLL(4)
  for (size_t r = 0; r < 4; ++r) {
    const size_t i = k + (r < R ? r : 0), row = t->first + i;
    g.q[r] = t->qp + row * ((t->hd + 1) / 2);
    g.s[r] = t->s[i];
    g.n[r] = full ? FK_ATT_BK : t->nv[row];
    g.m[r] = t->m + row;
    g.l[r] = t->l + row;
    g.p[r] = t->pb[i];
    g.o[r] = t->o + row * t->hd;
  }
  return g;
}

/* fk__att_softmax_bf16 of the block's rows k .. k + R - 1, one prefetch tick first. */
FK_TARGET_AVX512 static inline FK_ALWAYS_INLINE void fk__att_softmax_rows(const fk__att_tiles* t, size_t k, size_t R, int full, float* corr,
                                                                          fk__att_pf* pf) {
  const fk__att_rowset g = fk__att_rowset_at(t, k, R, full);
  fk__att_pf_tick(pf);
  if (R == 4) fk__att_softmax_bf16(4, g.s, g.n, g.m, g.l, g.p, corr + k);
  else if (R == 3) fk__att_softmax_bf16(3, g.s, g.n, g.m, g.l, g.p, corr + k);
  else if (R == 2) fk__att_softmax_bf16(2, g.s, g.n, g.m, g.l, g.p, corr + k);
  else fk__att_softmax_bf16(1, g.s, g.n, g.m, g.l, g.p, corr + k);
}

/* The n rows first .. first + n - 1 of an item (its query pairs qp, running m and l, outputs o: row i
 * at qp + i * ((hd + 1) / 2), m + i, l + i, o + i * hd), row i seeing nv[i] keys of the block: kb and
 * vb, the block's bf16 K and V (width w in the cache, bk keys visible to some row). The next block's K
 * and V (pf_k, pf_v, pf_bytes each; NULL when there is none) are prefetched along the way.
 * softmax_rows: 1 (a row per softmax call) or 4 (groups). full: n = FK_ATT_BQ rows from the item's
 * first, w = bk = FK_ATT_BK and every row sees every key (a prefill block below the diagonal): each
 * group's scores then tick the prefetch once rather than every 8 dim pairs, which keeps the scores
 * loop's pointers in registers. */
FK_TARGET_AVX512 static inline FK_ALWAYS_INLINE void fk__att_block_bf16_body(const uint32_t* qp, size_t first, size_t n, const size_t* nv,
                                                                             const uint16_t* kb, const uint16_t* vb, size_t w, size_t bk,
                                                                             size_t hd, float scale, float* m, float* l, float* o,
                                                                             const char* pf_k, const char* pf_v, size_t pf_bytes,
                                                                             int softmax_rows, int full) {
  float s[FK_ATT_BQ][FK_ATT_BK], corr[FK_ATT_BQ];
  uint32_t pb[FK_ATT_BQ][FK_ATT_BK / 2];
  const size_t groups = n / 4 + (n % 4 != 0); /* fk__att_group512's split: ceil(n / 4) groups */
  /* ticks: each group's score steps (of 8 dim pairs, or one) and its PV passes of 64 dims, each softmax call */
  const size_t ticks = groups * ((full ? 1 : (hd / 2 + 7) / 8) + (hd + 63) / 64) + (softmax_rows == 1 ? n : groups);
  fk__att_pf pf = {.k = pf_k, .v = pf_v, .at = 0, .step = fk__att_pf_step(pf_k, pf_bytes, ticks), .bytes = pf_bytes};
  const fk__att_tiles t = {.qp = qp, .first = first, .nv = nv, .m = m, .l = l, .o = o, .hd = hd, .s = s, .pb = pb};
  for (size_t k = 0, R; k < n; k += R) {
    R = fk__att_group512(n - k);
    const fk__att_rowset g = fk__att_rowset_at(&t, k, R, full);
    if (R == 4) fk__att_scores_bf16(4, g.q, kb, w, bk, hd, scale, g.s, &pf, full);
    else if (R == 3) fk__att_scores_bf16(3, g.q, kb, w, bk, hd, scale, g.s, &pf, full);
    else if (R == 2) fk__att_scores_bf16(2, g.q, kb, w, bk, hd, scale, g.s, &pf, full);
    else fk__att_scores_bf16(1, g.q, kb, w, bk, hd, scale, g.s, &pf, full);
  }
  for (size_t k = 0, R; k < n; k += R) {
    R = softmax_rows == 1 ? 1 : fk__att_group512(n - k);
    fk__att_softmax_rows(&t, k, R, full, corr, &pf);
  }
  for (size_t k = 0, R; k < n; k += R) {
    R = fk__att_group512(n - k);
    const fk__att_rowset g = fk__att_rowset_at(&t, k, R, full);
    size_t both = g.n[0] / 2; /* whole key pairs every row of the group sees; a row's own further keys follow */
    for (size_t r = 1; r < R; ++r) both = g.n[r] / 2 < both ? g.n[r] / 2 : both;
    for (size_t d0 = 0; d0 < hd; d0 += 64) {
      fk__att_pf_tick(&pf);
      if (R == 4) fk__att_pv_bf16(4, g.p, vb, w, hd, d0, 0, both, 0, corr + k, g.o, full);
      else if (R == 3) fk__att_pv_bf16(3, g.p, vb, w, hd, d0, 0, both, 0, corr + k, g.o, full);
      else if (R == 2) fk__att_pv_bf16(2, g.p, vb, w, hd, d0, 0, both, 0, corr + k, g.o, full);
      else fk__att_pv_bf16(1, g.p, vb, w, hd, d0, 0, both, 0, corr + k, g.o, full);
      FK_UNROLL(4)
      for (size_t r = 0; r < R; ++r)
        if (g.n[r] > 2 * both) fk__att_pv_bf16(1, g.p + r, vb, w, hd, d0, both, g.n[r] / 2, (int)(g.n[r] % 2), NULL, g.o + r, full);
    }
  }
}
/* hd 64 as a constant unrolls the dim-pair and 64-dim loops and folds their masks: faster in prefill
 * and in decode wherever the cache is not read from DRAM (there the reads bound it, and it runs even).
 * A prefill item's many rows also take their softmax in groups (fk__att_softmax_bf16); a decode
 * group's few rows ran slower so. hd 128 gained too little from the constant to carry its code, but
 * for the full blocks of prefill (most of its blocks) both head dims take every size as a constant:
 * only groups of 4 are compiled there. */
FK_TARGET_AVX512 FK_API void fk__att_block_bf16(const uint32_t* qp, size_t first, size_t n, const size_t* nv, const uint16_t* kb,
                                                const uint16_t* vb, size_t w, size_t bk, size_t hd, float scale, float* m, float* l,
                                                float* o, const char* pf_k, const char* pf_v, size_t pf_bytes) {
  int full = n == FK_ATT_BQ && w == FK_ATT_BK && bk == FK_ATT_BK;
  for (size_t i = 0; full && i < n; ++i) full = nv[first + i] == FK_ATT_BK;
  if (full && hd == 64) fk__att_block_bf16_body(qp, first, FK_ATT_BQ, nv, kb, vb, FK_ATT_BK, FK_ATT_BK, 64, scale, m, l, o, pf_k, pf_v, pf_bytes, 4, 1);
  else if (full && hd == 128) fk__att_block_bf16_body(qp, first, FK_ATT_BQ, nv, kb, vb, FK_ATT_BK, FK_ATT_BK, 128, scale, m, l, o, pf_k, pf_v, pf_bytes, 4, 1);
  else if (n < FK_ATT_BQ / 2 && hd == 64) fk__att_block_bf16_body(qp, first, n, nv, kb, vb, w, bk, 64, scale, m, l, o, pf_k, pf_v, pf_bytes, 1, 0);
  else if (n < FK_ATT_BQ / 2) fk__att_block_bf16_body(qp, first, n, nv, kb, vb, w, bk, hd, scale, m, l, o, pf_k, pf_v, pf_bytes, 1, 0);
  else if (hd == 64) fk__att_block_bf16_body(qp, first, n, nv, kb, vb, w, bk, 64, scale, m, l, o, pf_k, pf_v, pf_bytes, 4, 0);
  else fk__att_block_bf16_body(qp, first, n, nv, kb, vb, w, bk, hd, scale, m, l, o, pf_k, pf_v, pf_bytes, 4, 0);
}

/* Keys jb .. jb + 7's words of the K block's dim pair at kp, keys past bk 0 (not read: the capacity's
 * last block may end before jb + 8). */
FK_TARGET_AVX2 static inline FK_ALWAYS_INLINE __m256i fk__att_k_words_avx2(const uint16_t* kp, size_t jb, size_t bk) {
  if (jb + 8 <= bk) return _mm256_loadu_si256((const __m256i*)(const void*)kp);
  const __m256i lane = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
  const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(bk > jb ? bk - jb : 0)), lane);
  return _mm256_maskload_epi32((const int*)(const void*)kp, m);
}

/* The same 8 keys at a time. */
FK_TARGET_AVX2 FK_API void fk__att_load_k_avx2(const uint16_t* k, size_t hd, size_t w, size_t bk, float* kt) {
  for (size_t d = 0; d + 1 < hd; d += 2)
    for (size_t jb = 0; jb < FK_ATT_BK; jb += 8) {
      const __m256i wd = fk__att_k_words_avx2(k + d * w + 2 * jb, jb, bk);
      _mm256_storeu_ps(kt + d * FK_ATT_BK + jb, fk__bf16_even(wd));
      _mm256_storeu_ps(kt + (d + 1) * FK_ATT_BK + jb, fk__bf16_odd(wd));
    }
}

/* Where a key's values lie in its V chunk (the value layout above). */
typedef enum {
  FK__V_EVEN_KEY, /* the first of a key pair */
  FK__V_ODD_KEY,  /* the second */
  FK__V_ALONE     /* an odd block width's last key: its dims in order */
} fk__v_slot;

/* A V chunk's dims 0 .. 8 DV of one key as f32 vectors (v1 = v0 for DV = 1), from its key pair at pair:
 * a 256-bit load is 8 dims of both keys, the even key's in each 32-bit word's low half (shifted left
 * 16: fk__bf16_even), the odd key's in the high half (masked: fk__bf16_odd), so no shuffles. */
FK_TARGET_AVX2 static inline FK_ALWAYS_INLINE void fk__att_load_v_avx2(int DV, const uint16_t* pair, fk__v_slot slot, __m256* v0,
                                                                       __m256* v1) {
  if (slot == FK__V_ALONE) {
    *v0 = fk__load_bf16x8(pair);
    *v1 = DV > 1 ? fk__load_bf16x8(pair + 8) : *v0;
    return;
  }
  const __m256i lo = _mm256_loadu_si256((const __m256i*)(const void*)pair);
  *v0 = slot == FK__V_ODD_KEY ? fk__bf16_odd(lo) : fk__bf16_even(lo);
  if (DV > 1) {
    const __m256i hi = _mm256_loadu_si256((const __m256i*)(const void*)(pair + 16));
    *v1 = slot == FK__V_ODD_KEY ? fk__bf16_odd(hi) : fk__bf16_even(hi);
  } else {
    *v1 = *v0;
  }
}

/* Keys [j0, j1) of rows 0 .. R-1 (R <= 3) into their chains, DV dim vectors of a V chunk of `stride`
 * dims at vk, in a block of width w; j0 is even; key pair (j, j + 1) at vk + j * stride (bf16). R and DV
 * are constants after inlining and callers pass e and f at constant row offsets, so they stay in
 * registers (R = 3, DV = 2: 12 accumulators, one key's 2 vectors, 1 broadcast; the pair is loaded again
 * for its second key rather than held). */
FK_TARGET_AVX2 static inline FK_ALWAYS_INLINE void fk__att_pv_keys_avx2(int R, int DV, const float* const* p, const uint16_t* vk,
                                                                        size_t stride, size_t w, size_t j0, size_t j1,
                                                                        __m256 (*e)[2], __m256 (*f)[2]) {
  size_t j = j0;
  for (; j + 2 <= j1; j += 2) {
    __m256 v0, v1;
    fk__att_load_v_avx2(DV, vk + j * stride, FK__V_EVEN_KEY, &v0, &v1);
    FK_KEEP_IN_REG2(v0, v1);
    FK_UNROLL(4)
    for (int r = 0; r < R; ++r) {
      const __m256 pj = _mm256_broadcast_ss(p[r] + j);
      e[r][0] = _mm256_fmadd_ps(pj, v0, e[r][0]);
      if (DV > 1) e[r][1] = _mm256_fmadd_ps(pj, v1, e[r][1]);
    }
    __m256 w0, w1;
    fk__att_load_v_avx2(DV, vk + j * stride, FK__V_ODD_KEY, &w0, &w1);
    FK_KEEP_IN_REG2(w0, w1);
    FK_UNROLL(4)
    for (int r = 0; r < R; ++r) {
      const __m256 pk = _mm256_broadcast_ss(p[r] + j + 1);
      f[r][0] = _mm256_fmadd_ps(pk, w0, f[r][0]);
      if (DV > 1) f[r][1] = _mm256_fmadd_ps(pk, w1, f[r][1]);
    }
  }
  if (j < j1) { /* an even key: chain e */
    __m256 v0, v1;
    fk__att_load_v_avx2(DV, vk + j * stride, fk__kv_alone(w, j) ? FK__V_ALONE : FK__V_EVEN_KEY, &v0, &v1);
    FK_UNROLL(4)
    for (int r = 0; r < R; ++r) {
      const __m256 pj = _mm256_broadcast_ss(p[r] + j);
      e[r][0] = _mm256_fmadd_ps(pj, v0, e[r][0]);
      if (DV > 1) e[r][1] = _mm256_fmadd_ps(pj, v1, e[r][1]);
    }
  }
}

/* o[r][d .. d + 8 DV) = o corr + sum_j p_j v_j for R rows: the keys all R rows see together, then each
 * row's own remaining keys alone, into the same chains. vk, stride: the V chunk that starts at dim d,
 * of `stride` dims, in a block of width w. */
FK_TARGET_AVX2 static inline FK_ALWAYS_INLINE void fk__att_pv_avx2(int R, int DV, const float* const* p, const uint16_t* vk,
                                                                   size_t stride, size_t w, size_t d, const size_t* nv, size_t nboth,
                                                                   const float* corr, float* const* o) {
  __m256 e[3][2], f[3][2];
  FK_UNROLL(4)
  for (int r = 0; r < R; ++r)
    FK_UNROLL(4)
    for (int v = 0; v < DV; ++v) {
      e[r][v] = _mm256_mul_ps(_mm256_loadu_ps(o[r] + d + 8 * (size_t)v), _mm256_set1_ps(corr[r]));
      f[r][v] = _mm256_setzero_ps();
    }
  fk__att_pv_keys_avx2(R, DV, p, vk, stride, w, 0, nboth, e, f);
  fk__att_pv_keys_avx2(1, DV, p, vk, stride, w, nboth, nv[0], e, f);
  if (R > 1) fk__att_pv_keys_avx2(1, DV, p + 1, vk, stride, w, nboth, nv[1], e + 1, f + 1);
  if (R > 2) fk__att_pv_keys_avx2(1, DV, p + 2, vk, stride, w, nboth, nv[2], e + 2, f + 2);
  FK_UNROLL(4)
  for (int r = 0; r < R; ++r)
    FK_UNROLL(4)
    for (int v = 0; v < DV; ++v) _mm256_storeu_ps(o[r] + d + 8 * (size_t)v, _mm256_add_ps(e[r][v], f[r][v]));
}

/* AVX2: the rows of a work item against one key block, in three phases: the scores of every row, then
 * every row's softmax bookkeeping, then every row's PV. Phases, not a pass per row pair: a row's softmax
 * is a long dependency chain (max, exp, sum) that would stall the FMAs behind it; the rows' chains are
 * independent, so run back to back they overlap each other. A row's arithmetic is the same whatever
 * the other rows are (so decode == prefill bit for bit):
 *   scores, per 8-key vector: the even dims in one FMA chain, the odd dims in another (an odd hd's last
 *     dim into the even chain), summed, then scaled;
 *   PV, per 8-dim vector: chain e = o * corr + the even keys' p_j v_j, chain f = the odd keys', in key
 *     order, then e + f; an hd % 8 tail: one scalar fmaf chain per dim.
 * Rows go through the products in groups of 3 (2 where 3 would leave a row alone: 7 rows = 3 + 2 + 2):
 * a group shares every kt / vf load, one key's (or one dim's) at a time, 2 loads and 3 broadcasts per
 * 6 FMAs (16 ymm registers: 12 accumulators, 2 shared loads, 1 broadcast); pairs loading two keys at a
 * time were load-port bound, 8 loads per 8 FMAs (scores of 7 rows: 0.85 -> 0.93 of the FMA peak).
 * The next key block (pf_k, pf_v: pf_bytes each; none if pf_k is NULL) is prefetched in address order,
 * a line or two of K and of V at each tick of the inner loops (fk__att_pf): spread out like this it
 * arrives while this block computes. The hardware prefetcher alone leaves the loads stalled on DRAM; in
 * one burst at the top of the block, or one per phase, the prefetches only stall; in address order, as
 * the hardware prefetchers follow it (K in the order the scores read it, or all of K before V, lost). */


/* Scaled scores s[r][0 .. FK_ATT_BK) of R (1 to 3) rows, keys past a row's nv included (masked later). */
FK_TARGET_AVX2 static inline FK_ALWAYS_INLINE void fk__att_scores_avx2(int R, const float* const* q, const float* kt, size_t hd,
                                                                       float scale, float* const* s) {
  const __m256 sc = _mm256_set1_ps(scale);
  for (size_t h = 0; h < FK_ATT_BK; h += 16) { /* keys h .. h+15: two key vectors */
    __m256 a[3][4];                              /* [row][even dims: keys 0-7, 8-15; odd dims: keys 0-7, 8-15] */
    FK_UNROLL(4)
    for (int r = 0; r < R; ++r)
      FK_UNROLL(4)
      for (int t = 0; t < 4; ++t) a[r][t] = _mm256_setzero_ps();
    size_t d = 0;
    for (; d + 2 <= hd; d += 2) {
      const float* k = kt + d * FK_ATT_BK + h;
      __m256 k0 = _mm256_loadu_ps(k), k1 = _mm256_loadu_ps(k + 8);
      FK_KEEP_IN_REG2(k0, k1);
      FK_UNROLL(4)
      for (int r = 0; r < R; ++r) {
        const __m256 q0 = _mm256_broadcast_ss(q[r] + d);
        a[r][0] = _mm256_fmadd_ps(q0, k0, a[r][0]);
        a[r][1] = _mm256_fmadd_ps(q0, k1, a[r][1]);
      }
      __m256 k2 = _mm256_loadu_ps(k + FK_ATT_BK), k3 = _mm256_loadu_ps(k + FK_ATT_BK + 8);
      FK_KEEP_IN_REG2(k2, k3);
      FK_UNROLL(4)
      for (int r = 0; r < R; ++r) {
        const __m256 q1 = _mm256_broadcast_ss(q[r] + d + 1);
        a[r][2] = _mm256_fmadd_ps(q1, k2, a[r][2]);
        a[r][3] = _mm256_fmadd_ps(q1, k3, a[r][3]);
      }
    }
    if (d < hd) {
      const __m256 k0 = _mm256_loadu_ps(kt + d * FK_ATT_BK + h), k1 = _mm256_loadu_ps(kt + d * FK_ATT_BK + h + 8);
      FK_UNROLL(4)
      for (int r = 0; r < R; ++r) {
        const __m256 q0 = _mm256_broadcast_ss(q[r] + d);
        a[r][0] = _mm256_fmadd_ps(q0, k0, a[r][0]);
        a[r][1] = _mm256_fmadd_ps(q0, k1, a[r][1]);
      }
    }
    FK_UNROLL(4)
    for (int r = 0; r < R; ++r) {
      _mm256_storeu_ps(s[r] + h, _mm256_mul_ps(_mm256_add_ps(a[r][0], a[r][2]), sc));
      _mm256_storeu_ps(s[r] + h + 8, _mm256_mul_ps(_mm256_add_ps(a[r][1], a[r][3]), sc));
    }
  }
}

/* The same scores straight from the bf16 K block kb (width w in the cache, bk keys loaded, the rest 0):
 * per dim pair, one load of 8 keys' words split into the pair's two dims (fk__att_k_words_avx2), fed
 * to the rows' chains in dim order: the same products in the same order as through kt, without writing
 * and rereading it. Up to 2 rows take 2 key vectors at a time, so that 8 chains are in flight. Ticks
 * the prefetch once per 16 dims of each key step. */
FK_TARGET_AVX2 static inline FK_ALWAYS_INLINE void fk__att_scores_kb_avx2(int R, const float* const* q, const uint16_t* kb,
                                                                          size_t hd, size_t w, size_t bk, float scale,
                                                                          float* const* s, fk__att_pf* pf) {
  const __m256 sc = _mm256_set1_ps(scale);
  const size_t KV = R <= 2 ? 2 : 1; /* key vectors per step */
  for (size_t jb = 0; jb < FK_ATT_BK; jb += 8 * KV) {
    __m256 a[2][3][2]; /* [key vector][row][even dims, odd dims] */
    FK_UNROLL(4)
    for (size_t x = 0; x < KV; ++x)
      FK_UNROLL(4)
      for (int r = 0; r < R; ++r) a[x][r][0] = a[x][r][1] = _mm256_setzero_ps();
    size_t d = 0;
    for (; d + 1 < hd; d += 2) {
      if (d % 16 == 0) fk__att_pf_tick(pf);
      __m256 ke[2], ko[2];
      FK_UNROLL(4)
      for (size_t x = 0; x < KV; ++x) {
        const __m256i wd = fk__att_k_words_avx2(kb + d * w + 2 * (jb + 8 * x), jb + 8 * x, bk);
        ke[x] = fk__bf16_even(wd);
        ko[x] = fk__bf16_odd(wd);
      }
      FK_UNROLL(4)
      for (int r = 0; r < R; ++r) {
        const __m256 q0 = _mm256_broadcast_ss(q[r] + d), q1 = _mm256_broadcast_ss(q[r] + d + 1);
        FK_UNROLL(4)
        for (size_t x = 0; x < KV; ++x) {
          a[x][r][0] = _mm256_fmadd_ps(q0, ke[x], a[x][r][0]);
          a[x][r][1] = _mm256_fmadd_ps(q1, ko[x], a[x][r][1]);
        }
      }
    }
    if (d < hd) /* an odd hd's last dim, into the even chain */
      FK_UNROLL(4)
      for (size_t x = 0; x < KV; ++x) {
        float t[8];
        for (size_t i = 0; i < 8; ++i) t[i] = jb + 8 * x + i < bk ? fk_bf16_to_f32_1(kb[d * w + jb + 8 * x + i]) : 0.0f;
        FK_UNROLL(4)
        for (int r = 0; r < R; ++r) a[x][r][0] = _mm256_fmadd_ps(_mm256_broadcast_ss(q[r] + d), _mm256_loadu_ps(t), a[x][r][0]);
      }
    FK_UNROLL(4)
    for (size_t x = 0; x < KV; ++x)
      FK_UNROLL(4)
      for (int r = 0; r < R; ++r) _mm256_storeu_ps(s[r] + jb + 8 * x, _mm256_mul_ps(_mm256_add_ps(a[x][r][0], a[x][r][1]), sc));
  }
}

/* One row's softmax bookkeeping against the block, in vectors: scores s (keys past nv masked to -inf for
 * the max, to 0 after exp) become p_j = e^(s_j - m') in place; m, l updated; returns corr = e^(m - m'). */
FK_TARGET_AVX2 static inline float fk__att_softmax_avx2(float* s, size_t nv, float* m, float* l) {
  const __m256i nvv = _mm256_set1_epi32((int)nv), eight = _mm256_set1_epi32(8);
  __m256 sv[4], vis[4];
  __m256i idx = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
  FK_UNROLL(4)
  for (int t = 0; t < 4; ++t, idx = _mm256_add_epi32(idx, eight)) {
    vis[t] = _mm256_castsi256_ps(_mm256_cmpgt_epi32(nvv, idx));
    sv[t] = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_loadu_ps(s + 8 * t), vis[t]);
  }
  __m256 mx = _mm256_max_ps(_mm256_max_ps(sv[0], sv[1]), _mm256_max_ps(sv[2], sv[3]));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float mb = _mm_cvtss_f32(m4);
  const float mnew = mb > *m ? mb : *m;
  const float corr = fk__att_corr(*m, mnew);
  const __m256 mv = _mm256_set1_ps(mnew);
  FK_UNROLL(4)
  for (int t = 0; t < 4; ++t) {
    sv[t] = _mm256_and_ps(fk__exp256(_mm256_sub_ps(sv[t], mv)), vis[t]); /* exp256 clamps -inf: masked to 0 */
    _mm256_storeu_ps(s + 8 * t, sv[t]);
  }
  const float lb = fk__hsum256(_mm256_add_ps(_mm256_add_ps(sv[0], sv[1]), _mm256_add_ps(sv[2], sv[3])));
  *l = fmaf(*l, corr, lb); /* explicit: C and C++ contract differently */
  *m = mnew;
  return corr;
}

/* PV of R (1 to 3) rows: o[r] = o[r] corr[r] + sum_j p[r][j] v_j over the row's nv[r] keys; vb: the bf16
 * V block, of width w in the cache. */
FK_TARGET_AVX2 static inline FK_ALWAYS_INLINE void fk__att_pv_rows_avx2(int R, const float* const* p, const uint16_t* vb, size_t hd,
                                                                        size_t w, const size_t* nv, const float* corr, float* const* o,
                                                                        fk__att_pf* pf) {
  size_t nboth = nv[0]; /* keys every row of the group sees (an even count when the group has two or more) */
  for (int r = 1; r < R; ++r) nboth = nv[r] < nboth ? nv[r] : nboth;
  if (R > 1) nboth &= ~(size_t)1;
  size_t d = 0;
  for (; d + 16 <= hd; d += 16) {
    fk__att_pf_tick(pf);
    fk__att_pv_avx2(R, 2, p, vb + d * w, 16, w, d, nv, nboth, corr, o);
  }
  if (d + 8 <= hd) { /* the last chunk, of 8 to 15 dims */
    fk__att_pv_avx2(R, 1, p, vb + d * w, fk__kv_chunk_dims(hd, d), w, d, nv, nboth, corr, o);
    d += 8;
  }
  FK_UNROLL(4)
  for (int r = 0; r < R; ++r)
    for (size_t dd = d; dd < hd; ++dd) {
      float acc = o[r][dd] * corr[r];
      for (size_t j = 0; j < nv[r]; ++j) /* explicit fmaf: C and C++ contract differently */
        acc = fmaf(p[r][j], fk_bf16_to_f32_1(vb[fk__kv_block_index(hd, w, j, dd)]), acc);
      o[r][dd] = acc;
    }
}

/* Rows per group for rem rows still to go: 3, but 2 where a 3 would leave a single row behind. */
static inline size_t fk__att_group(size_t rem) { return rem == 1 ? 1 : rem == 2 || rem == 4 ? 2 : 3; }

/* The n rows rows[0 .. n) (indices into q, m, l and o, whose row i is o + i * hd, 16-dim chunks in
 * even/odd order), each seeing nv[i] keys of the block. kb, vb: the block's bf16 K and V, of width w in
 * the cache, bk keys visible to some row; kt: the K block transposed to f32, or NULL for scores read
 * straight from kb. The next block's K and V (pf_k, pf_v, pf_bytes each; NULL when there is none) are
 * prefetched along the way. */
FK_TARGET_AVX2 FK_API void fk__att_block_avx2(const float* const* q, const size_t* rows, size_t n, const size_t* nv, const float* kt,
                                              const uint16_t* kb, size_t bk, const uint16_t* vb, size_t hd, size_t w, float scale,
                                              float* m, float* l, float* o,
                                              const char* pf_k, const char* pf_v, size_t pf_bytes) {
  float s[FK_ATT_BQ][FK_ATT_BK], corr[FK_ATT_BQ];
  const size_t groups = (n + 2) / 3, chunks = hd / 16; /* fk__att_group's split: ceil(n / 3) groups */
  /* ticks: each group's score tiles (or its kt pass) and PV chunks, and each row's softmax */
  size_t ticks = groups * chunks + n;
  for (size_t k = 0, R; k < n; k += R) { /* a group's scores: one kt pass, or fk__att_scores_kb_avx2's */
    R = fk__att_group(n - k);
    ticks += kt ? 1 : FK_ATT_BK / (R <= 2 ? 16 : 8) * ((hd + 14) / 16);
  }
  fk__att_pf pf = {.k = pf_k, .v = pf_v, .at = 0, .step = fk__att_pf_step(pf_k, pf_bytes, ticks), .bytes = pf_bytes};
  for (size_t k = 0, R; k < n; k += R) {
    R = fk__att_group(n - k);
    const float* qq[3] = {q[rows[k]], q[rows[k + (R > 1)]], q[rows[k + (R > 2) * 2]]};
    float* ss[3] = {s[k], s[k + (R > 1)], s[k + (R > 2) * 2]};
    if (!kt && R == 3) fk__att_scores_kb_avx2(3, qq, kb, hd, w, bk, scale, ss, &pf);
    else if (!kt && R == 2) fk__att_scores_kb_avx2(2, qq, kb, hd, w, bk, scale, ss, &pf);
    else if (!kt) fk__att_scores_kb_avx2(1, qq, kb, hd, w, bk, scale, ss, &pf);
    else {
      fk__att_pf_tick(&pf);
      if (R == 3) fk__att_scores_avx2(3, qq, kt, hd, scale, ss);
      else if (R == 2) fk__att_scores_avx2(2, qq, kt, hd, scale, ss);
      else fk__att_scores_avx2(1, qq, kt, hd, scale, ss);
    }
  }
  for (size_t k = 0; k < n; ++k) {
    fk__att_pf_tick(&pf);
    corr[k] = fk__att_softmax_avx2(s[k], nv[rows[k]], m + rows[k], l + rows[k]);
  }
  for (size_t k = 0, R; k < n; k += R) {
    R = fk__att_group(n - k);
    const size_t k1 = k + (R > 1), k2 = k + (R > 2) * 2;
    const float* pp[3] = {s[k], s[k1], s[k2]};
    const size_t nn[3] = {nv[rows[k]], nv[rows[k1]], nv[rows[k2]]};
    float* oo[3] = {o + rows[k] * hd, o + rows[k1] * hd, o + rows[k2] * hd};
    if (R == 3) fk__att_pv_rows_avx2(3, pp, vb, hd, w, nn, corr + k, oo, &pf);
    else if (R == 2) fk__att_pv_rows_avx2(2, pp, vb, hd, w, nn, corr + k, oo, &pf);
    else fk__att_pv_rows_avx2(1, pp, vb, hd, w, nn, corr + k, oo, &pf);
  }
}
#endif

/* K block kb (width w in the cache) -> kt[d][j] (f32), its first bk keys, the rest 0. */
static inline void fk__att_load_k(fk_isa isa, const uint16_t* kb, size_t hd, size_t w, size_t bk, float* kt) {
  size_t d0 = 0; /* dims done */
#if FK_X86
  if (isa >= FK_ISA_AVX2) {
    fk__att_load_k_avx2(kb, hd, w, bk, kt);
    d0 = hd / 2 * 2;
  }
#endif
  (void)isa;
  for (size_t d = d0; d < hd; ++d)
    for (size_t j = 0; j < FK_ATT_BK; ++j) kt[d * FK_ATT_BK + j] = j < bk ? fk_bf16_to_f32_1(kb[fk__k_block_index(hd, w, j, d)]) : 0.0f;
}

/* V block vb (width w in the cache) -> vf[j][d] (f32), its first bk keys (the scalar path). */
static inline void fk__att_load_v(const uint16_t* vb, size_t hd, size_t w, size_t bk, float* vf) {
  for (size_t j = 0; j < bk; ++j)
    for (size_t d = 0; d < hd; ++d) vf[j * hd + d] = fk_bf16_to_f32_1(vb[fk__kv_block_index(hd, w, j, d)]);
}

/* out[d] = o[d] * mul for d < hd (a row's normalization), in vectors where the CPU has them: g++ -O2,
 * the generated C's documented build, leaves the plain loop scalar, and prefill attention waited on it.
 * The same bits either way. */
#if FK_X86
FK_TARGET_AVX2 FK_API void fk__att_scale_avx2(float* out, const float* o, float mul, size_t hd) {
  /* the tail its own index: with hd a constant, g++ took a shared one for a loop without end
   * (-Waggressive-loop-optimizations) */
  const size_t whole = hd - hd % 8;
  const __m256 m = _mm256_set1_ps(mul);
  for (size_t d = 0; d < whole; d += 8) _mm256_storeu_ps(out + d, _mm256_mul_ps(_mm256_loadu_ps(o + d), m));
  for (size_t d = whole; d < hd; ++d) out[d] = o[d] * mul;
}
#endif
static inline void fk__att_scale(fk_isa isa, float* out, const float* o, float mul, size_t hd) {
#if FK_X86
  if (isa >= FK_ISA_AVX2) {
    fk__att_scale_avx2(out, o, mul, hd);
    return;
  }
#endif
  (void)isa;
  for (size_t d = 0; d < hd; ++d) out[d] = o[d] * mul;
}

/* ---- a work item: up to FK_ATT_BQ query rows that share one KV head ----------------------------------
 * Prefill: rows are consecutive positions of one query head. Decode: rows are the query heads of one
 * GQA group at the same position, so each K/V block is widened once for the whole group. A row's
 * arithmetic does not depend on the other rows, so decode computes bit for bit what prefill computes for
 * the same query, position and cache. */
/* Keys [kbeg, min(klim, last visible + 1)); kbeg is a multiple of FK_ATT_BK, so the key blocks are the
 * same as in an unsplit pass. pos is nondecreasing (prefill's rows ascend, decode's share one
 * position), so the rows that see any key of a block are the item's last ones. Without part_o,
 * writes the normalized rows to orow; with it (a key segment of a split decode), writes each row's
 * unnormalized output, running max and running sum to part_o/part_m/part_l (row i at index
 * i * part_stride) and leaves orow alone. */
FK_API void fk__att_rows(fk_isa isa, const float* const* qr, float* const* orow, const size_t* pos, size_t nr,
                         const uint16_t* kc, const uint16_t* vc, size_t hd, size_t cap, float scale, size_t kbeg, size_t klim,
                         float* part_o, float* part_m, float* part_l, size_t part_stride) {
  /* the SIMD paths read the K and V blocks as they lie; the scalar path widens both */
  const int bf16 = FK_X86 && isa >= FK_ISA_AVX512BF16, avx2 = FK_X86 && isa >= FK_ISA_AVX2 && !bf16;
  float kt[FK_MAX_HEAD_DIM * FK_ATT_BK]; /* K block, transposed: kt[d][j] (scalar; AVX2 at many rows) */
  float vf[FK_ATT_BK * FK_MAX_HEAD_DIM]; /* V block, widened: vf[j][d] (scalar) */
  float o[FK_ATT_BQ * FK_MAX_HEAD_DIM];
  /* The rows' queries, copied beside the tiles: read in place, where a row sits against the tiles'
   * stores (by address bits 0-11) decided whether its loads waited on them, and prefill's speed
   * depended on where the allocator and the stack happened to put them. AVX-512 keeps them as bf16
   * pairs (fk__att_q_pairs_avx512). */
  union {
    float f32[FK_ATT_BQ * FK_MAX_HEAD_DIM];
    uint32_t pairs[FK_ATT_BQ * FK_MAX_HEAD_DIM / 2];
  } qtile;
  const float* ql[FK_ATT_BQ];
  float mrow[FK_ATT_BQ], lrow[FK_ATT_BQ];
  size_t kend = 0;
  for (size_t i = 0; i < nr; ++i) {
#if FK_X86
    if (bf16) {
      fk__att_q_pairs_avx512(qr[i], hd, qtile.pairs + i * ((hd + 1) / 2)); /* fk__att_block_bf16's layout */
    } else
#endif
    {
      memcpy(qtile.f32 + i * hd, qr[i], hd * sizeof(float));
      ql[i] = qtile.f32 + i * hd;
    }
    mrow[i] = -INFINITY;
    lrow[i] = 0.0f;
    kend = pos[i] + 1 > kend ? pos[i] + 1 : kend;
  }
  kend = kend < klim ? kend : klim;
  memset(o, 0, nr * hd * sizeof(float));
  /* AVX2, few rows (decode of a few query heads per KV head): the scores read each K block themselves,
   * no kt: splitting the dim pairs once per row group beats writing and rereading kt up to two groups
   * of 2 (4 rows); at 5-8 rows it is even or slower, and prefill's 32 rows widen each block once.
   * Same bits either way. */
#if FK_X86
  const int k_direct = avx2 && nr <= 4;
#endif
  for (size_t j0 = kbeg; j0 < kend; j0 += FK_ATT_BK) {
    const size_t bk = kend - j0 < FK_ATT_BK ? kend - j0 : FK_ATT_BK;
    const size_t w = fk__att_block_width(cap, j0);
    const uint16_t *kb = kc + j0 * hd, *vb = vc + j0 * hd;
#if FK_X86
    if (bf16 || avx2) {
      size_t rows[FK_ATT_BQ], nvs[FK_ATT_BQ], n = 0;
      for (size_t i = 0; i < nr; ++i)
        if (pos[i] >= j0) { /* causal: skip a row whose future this whole block is */
          rows[n++] = i;
          nvs[i] = pos[i] + 1 - j0 < bk ? pos[i] + 1 - j0 : bk;
        }
      assert(n == 0 || rows[0] + n == nr); /* the last n rows (pos nondecreasing) */
      /* the next block, if any keys of it are visible: all of it (its visible keys' dims are in every chunk) */
      const size_t j1 = j0 + FK_ATT_BK, next_w = j1 < kend ? fk__att_block_width(cap, j1) : 0;
      const char* pf_k = next_w ? (const char*)(kc + j1 * hd) : NULL;
      const char* pf_v = next_w ? (const char*)(vc + j1 * hd) : NULL;
      if (bf16) {
        fk__att_block_bf16(qtile.pairs, nr - n, n, nvs, kb, vb, w, bk, hd, scale, mrow, lrow, o, pf_k, pf_v, next_w * hd * sizeof(uint16_t));
      } else {
        if (!k_direct) fk__att_load_k(isa, kb, hd, w, bk, kt);
        fk__att_block_avx2(ql, rows, n, nvs, k_direct ? NULL : kt, kb, bk, vb, hd, w, scale, mrow, lrow, o, pf_k, pf_v,
                           next_w * hd * sizeof(uint16_t));
      }
      continue;
    }
#endif
    fk__att_load_v(vb, hd, w, bk, vf);
    fk__att_load_k(isa, kb, hd, w, bk, kt);
    for (size_t i = 0; i < nr; ++i) {
      if (pos[i] < j0) continue; /* causal: this whole block is in row i's future */
      const size_t nv = pos[i] + 1 - j0 < bk ? pos[i] + 1 - j0 : bk;
      fk__att_block_scalar(ql[i], kt, vf, hd, nv, scale, &mrow[i], &lrow[i], o + i * hd);
    }
  }
  for (size_t i = 0; i < nr; ++i) {
    const float* oi = o + i * hd;
    float* out = part_o ? part_o + i * part_stride * hd : orow[i];
    const float mul = part_o ? 1.0f : 1.0f / lrow[i];
    if (part_o) {
      part_m[i * part_stride] = mrow[i];
      part_l[i * part_stride] = lrow[i];
    }
    fk__att_scale(isa, out, oi, mul, hd);
  }
}

/* Prefill work item it of nqb query blocks a head: its head h and first position q0; returns its rows. */
static inline size_t fk__att_prefill_item(size_t it, size_t nqb, size_t S, size_t* h, size_t* q0) {
  *h = it / nqb;
  *q0 = (it % nqb) * FK_ATT_BQ;
  return S - *q0 < FK_ATT_BQ ? S - *q0 : FK_ATT_BQ;
}

FK_API void fk_attention_prefill(const float* q, size_t S, size_t n_heads, const uint16_t* kc, const uint16_t* vc, size_t n_kv,
                                 size_t hd, size_t cap, size_t pos0, float* out) {
  const fk_isa isa = fk_isa_active();
  assert(hd <= FK_MAX_HEAD_DIM && n_kv > 0 && n_heads % n_kv == 0);
  const size_t group = n_heads / n_kv, nqb = (S + FK_ATT_BQ - 1) / FK_ATT_BQ, items = n_heads * nqb;
  const size_t ld = n_heads * hd;
  const float scale = 1.0f / sqrtf((float)hd);
  const int nt = fk__threads_for(items, (double)FK_ATT_BQ * (double)(pos0 + S) * (double)hd * 4);
  FK_PARALLEL_LOOP(nt, for (size_t it = 0; it < items; ++it) {
    size_t h, q0;
    const size_t nr = fk__att_prefill_item(it, nqb, S, &h, &q0), g = h / group;
    const float* qr[FK_ATT_BQ];
    float* orow[FK_ATT_BQ];
    size_t pos[FK_ATT_BQ];
    for (size_t i = 0; i < nr; ++i) {
      qr[i] = q + (q0 + i) * ld + h * hd;
      orow[i] = out + (q0 + i) * ld + h * hd;
      pos[i] = pos0 + q0 + i;
    }
    /* The next item's queries, into L2 (into L1 the K and V blocks would evict them): a head's rows lie
     * ld floats apart, past the hardware prefetchers, and prefill waited for them. */
    if (it + 1 < items) {
      size_t next_h, next_q0;
      const size_t next_nr = fk__att_prefill_item(it + 1, nqb, S, &next_h, &next_q0);
      for (size_t i = 0; i < next_nr; ++i)
        for (size_t b = 0; b < hd * sizeof(float); b += 64) __builtin_prefetch((const char*)(q + (next_q0 + i) * ld + next_h * hd) + b, 0, 2);
    }
    fk__att_rows(isa, qr, orow, pos, nr, kc + g * cap * hd, vc + g * cap * hd, hd, cap, scale, 0, (size_t)-1, NULL, NULL, NULL, 0);
  });
}

/* Decode work is split over keys too (flash-decoding), or only n_kv threads could work: the keys
 * 0..pos are cut into nseg segments whose length depends only on pos and n_heads (never on the thread
 * count); each (KV head, segment) item leaves per-row partial (m, l, o) on the caller's stack, and the
 * partials are merged per head in segment order. Up to FK_ATT_SEG keys there is one segment and
 * decode computes exactly what prefill computes for that row. */
#define FK_ATT_SEG 512       /* keys per segment, at least */
#define FK_ATT_MAX_PARTS 128 /* n_heads x segments held on the stack: 64 KiB of partial outputs */

/* o[d] = fmaf(po[d], c, o[d]) for d < hd: one rounding per element on every path (a fused vector
 * multiply-add rounds exactly as fmaf does), vector code where the CPU has FMA. */
#if FK_X86
FK_TARGET_AVX2 FK_API void fk__att_merge_avx2(float* o, const float* po, float c, size_t hd) {
  const size_t whole = hd - hd % 8; /* the tail's own index, as in fk__att_scale_avx2 */
  const __m256 cv = _mm256_set1_ps(c);
  for (size_t d = 0; d < whole; d += 8) _mm256_storeu_ps(o + d, _mm256_fmadd_ps(_mm256_loadu_ps(po + d), cv, _mm256_loadu_ps(o + d)));
  for (size_t d = whole; d < hd; ++d) o[d] = fmaf(po[d], c, o[d]);
}
#endif
FK_API void fk__att_merge(fk_isa isa, float* o, const float* po, float c, size_t hd) {
#if FK_X86
  if (isa >= FK_ISA_AVX2) {
    fk__att_merge_avx2(o, po, c, hd);
    return;
  }
#endif
  (void)isa;
  for (size_t d = 0; d < hd; ++d) o[d] = fmaf(po[d], c, o[d]);
}

FK_API void fk_attention_decode(const float* q, size_t n_heads, const uint16_t* kc, const uint16_t* vc, size_t n_kv, size_t hd,
                                size_t cap, size_t pos, float* out) {
  const fk_isa isa = fk_isa_active();
  assert(hd <= FK_MAX_HEAD_DIM && n_kv > 0 && n_heads % n_kv == 0);
  const size_t group = n_heads / n_kv, chunks = (group + FK_ATT_BQ - 1) / FK_ATT_BQ;
  const float scale = 1.0f / sqrtf((float)hd);
  const size_t L = pos + 1, maxseg = FK_ATT_MAX_PARTS / n_heads;
  size_t nseg = (L + FK_ATT_SEG - 1) / FK_ATT_SEG;
  nseg = nseg < maxseg ? nseg : maxseg;
  size_t seglen = L;
  if (nseg > 1) {
    seglen = ((L + nseg - 1) / nseg + FK_ATT_BK - 1) / FK_ATT_BK * FK_ATT_BK; /* whole key blocks */
    nseg = (L + seglen - 1) / seglen;
  }
  if (nseg < 1) nseg = 1;
  float part_o[FK_ATT_MAX_PARTS * FK_MAX_HEAD_DIM]; /* untouched (no cost) when nseg == 1 */
  float part_m[FK_ATT_MAX_PARTS], part_l[FK_ATT_MAX_PARTS];
  const size_t items = n_kv * chunks * nseg;
  const int nt = fk__threads_for(items, (double)seglen * (double)hd * 4 * (double)group);
  FK_PARALLEL_LOOP(nt, for (size_t it = 0; it < items; ++it) {
    const size_t seg = it % nseg, gc = it / nseg, g = gc / chunks, h0 = g * group + (gc % chunks) * FK_ATT_BQ;
    const size_t hend = (g + 1) * group, nr = hend - h0 < FK_ATT_BQ ? hend - h0 : FK_ATT_BQ;
    const float* qr[FK_ATT_BQ];
    float* orow[FK_ATT_BQ];
    size_t ps[FK_ATT_BQ];
    for (size_t i = 0; i < nr; ++i) {
      qr[i] = q + (h0 + i) * hd;
      orow[i] = out + (h0 + i) * hd;
      ps[i] = pos;
    }
    if (nseg == 1)
      fk__att_rows(isa, qr, orow, ps, nr, kc + g * cap * hd, vc + g * cap * hd, hd, cap, scale, 0, L, NULL, NULL, NULL, 0);
    else /* partial of head h, segment seg at index h * nseg + seg */
      fk__att_rows(isa, qr, NULL, ps, nr, kc + g * cap * hd, vc + g * cap * hd, hd, cap, scale, seg * seglen, (seg + 1) * seglen,
                   part_o + (h0 * nseg + seg) * hd, part_m + h0 * nseg + seg, part_l + h0 * nseg + seg, nseg);
  });
  if (nseg == 1) return;
  for (size_t h = 0; h < n_heads; ++h) { /* merge in segment order: o = sum_s e^(m_s - M) o_s, same for l */
    const float* pm = part_m + h * nseg;
    const float* pl = part_l + h * nseg;
    float M = pm[0];
    for (size_t s = 1; s < nseg; ++s) M = pm[s] > M ? pm[s] : M;
    float l = 0.0f;
    float* o = out + h * hd;
    for (size_t d = 0; d < hd; ++d) o[d] = 0.0f;
    for (size_t s = 0; s < nseg; ++s) {
      const float c = expf(pm[s] - M);
      const float* po = part_o + (h * nseg + s) * hd;
      l = fmaf(pl[s], c, l); /* explicit fmaf: C and C++ would contract a*b+c differently */
      fk__att_merge(isa, o, po, c, hd);
    }
    const float inv = 1.0f / l;
    for (size_t d = 0; d < hd; ++d) o[d] *= inv;
  }
}

#endif /* FK_ATTENTION_H */
