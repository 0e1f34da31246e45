/* fk_linear.h: y[M,N] = x[M,K] * W[N,K]^T (+ bias[N]).
 * W and bias are bf16 exactly as Hugging Face stores a Linear ([out, in]); x and y are f32.
 * fk_gemm_bf16 takes an optional workspace of fk_gemm_bf16_work_bytes(M, K) bytes (the models plan one
 * per linear step): the bf16 paths round x into it once per call, so their work items read x in place
 * instead of each rounding it again. Without one (NULL) they round per work item; same bits.
 *
 * Paths
 *  GEMV (M == 1, decode) is bandwidth bound: every path widens bf16 W to f32 and uses f32 FMA against the
 *    f32 x, so x is NOT rounded. Each output row is one dot product with one accumulation order on
 *    every path (256-bit steps of 16 k into one accumulator per row, a zero padded tail, one horizontal
 *    sum): on every SIMD path (AVX2, AVX-512 BF16, AMX) the AVX2 row kernel, each thread's rows as 4
 *    or 8 long streams (fk__rows_avx2). vdpbf16ps would need x in bf16 and measured no faster: memory
 *    is the limit (`fused bench kernels --study`, docs/history/PERFORMANCE-2026-11.md).
 *  GEMM (prefill):
 *    AVX-512 BF16: a work item is up to 4 panels of 64 output columns (fk__panels_per_item); per chunk
 *      of 128 k, W is packed into VNNI panels of 64 columns (panel[pair][col] = {W[col][2p], W[col][2p+1]}, a 16x16 32-bit transpose
 *      per 16 columns x 32 k); x rows are rounded to bf16 (vcvtne2ps2bf16: RNE, denormals as zero), in
 *      the workspace once per call or else into a 6-row stack tile shared by the item's panels; a 6 x 64
 *      register tile (24 zmm) accumulates with vdpbf16ps; the W lines of the next chunk are prefetched while
 *      the tiles work (fk__w_ahead). M < 4 takes the GEMV row kernel instead.
 *    AMX-BF16 (M >= 16): a work item is up to 4 strips of 32 columns; per chunk of 256 k its strips are
 *      packed into B tiles (16 k pairs x 16 columns, 1 KiB contiguous each); A tiles load straight from
 *      the workspace (row stride K rounded up to 32), or from a 32-row stack tile rounded per item (no
 *      workspace, or a last block of fewer than 32 rows); 2 x 2 C tiles of 16 x 16 f32 per strip, kept
 *      in y between k chunks; the W rows of the next chunk are prefetched into L2 while the tiles work.
 *      Run and timed on a Xeon with AMX (fk__gemm_block_amx); the tile instructions also have a
 *      software model (FK_AMX_EMULATE) that tests/kernels runs everywhere.
 *    AVX2 (M >= 4): W widened once per 64 columns x 256 k into f32 panels, a 6 x 16 register tile of f32
 *      FMAs with x unrounded (fk__gemm_block_avx2). M < 4 takes the GEMV row kernel.
 *    Scalar: the GEMV row kernel for every row of x.
 * Threads split the output columns in blocks of panels or strips, never the reduction dimension: every
 * y element is computed by one thread in one order, so results are bitwise identical for any thread
 * count. No heap: packed panels or strips (64 KiB) and x tiles (<= 32 KiB) are per-thread stack arrays
 * (< 120 KiB in all). */
#ifndef FK_LINEAR_H
#define FK_LINEAR_H

#include "fk_convert.h"

#define FK_LIN_NB 64  /* output columns per packed panel, and per work item of the row-kernel paths */
#define FK_LIN_DP_PANELS 4 /* AVX-512 BF16 GEMM: at most this many 64-column panels per work item */
#define FK_LIN_KC_DP 128   /* AVX-512 BF16 GEMM: k per chunk (4 panels x 16 KiB on the stack) */
#define FK_LIN_KC 256 /* k per packed chunk (multiple of 32: one AMX tile row is 32 bf16) */
#define FK_LIN_MR 6   /* x rows per AVX-512 register tile */
#define FK_LIN_MIN_M_DP 4   /* below this, GEMM uses the widening row kernel */
#define FK_LIN_MIN_M_AMX 16 /* AMX needs a full A tile to pay off */
#define FK_LIN_AMX_STRIP 32          /* AMX GEMM: output columns per packed strip (two 16-column B tiles) */
#define FK_LIN_AMX_KC_MAX 512        /* ... the most k per packed chunk (sizes its stack arrays) */
#define FK_LIN_AMX_STRIP_BYTES 65536 /* ... and the most bytes of packed strips per chunk: strips x kc x 64 */
#define FK_LIN_AMX_MAX_STRIPS 8      /* ... and the most 32-column strips per work item */
#define FK_LIN_AMX_STRIPS 4          /* what fk_gemm_bf16 uses: up to 4 strips per item, */
#define FK_LIN_AMX_KC 256            /* 256 k per chunk (see fk__gemm_block_amx) */
#define FK_LIN_AMX_PREFETCH_MAX 4    /* the most W lines prefetched per k step (fk__w_ahead) */

/* The optional workspace of fk_gemm_bf16: x rounded to bf16 once per call, row stride K rounded up to
 * 32 (one AMX tile row), zero padded. fk_gemm_bf16_work_bytes(M, K) is its size. */
static inline size_t fk__work_ld(size_t K) { return (K + 31) & ~(size_t)31; }
FK_API size_t fk_gemm_bf16_work_bytes(size_t M, size_t K) { return M * fk__work_ld(K) * sizeof(uint16_t); }

/* ---- scalar ----------------------------------------------------------------------------------- */
FK_API float fk__dot_scalar(const float* x, const uint16_t* w, size_t K) {
  float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f; /* 4 chains: same order for every row */
  const size_t K4 = K & ~(size_t)3; /* (k + 4 <= K led g++ -O3 to a false -Waggressive-loop-optimizations) */
  size_t k = 0;
  for (; k < K4; k += 4) {
    a0 += x[k] * fk_bf16_to_f32_1(w[k]);
    a1 += x[k + 1] * fk_bf16_to_f32_1(w[k + 1]);
    a2 += x[k + 2] * fk_bf16_to_f32_1(w[k + 2]);
    a3 += x[k + 3] * fk_bf16_to_f32_1(w[k + 3]);
  }
  for (; k < K; ++k) a0 += x[k] * fk_bf16_to_f32_1(w[k]);
  return (a0 + a1) + (a2 + a3);
}

FK_API void fk__rows_scalar(const float* x, size_t M, size_t K, const uint16_t* W, size_t N, const uint16_t* bias,
                            float* y, size_t n0, size_t n1) {
  for (size_t n = n0; n < n1; ++n)
    for (size_t m = 0; m < M; ++m)
      y[m * N + n] = fk__dot_scalar(x + m * K, W + n * K, K) + (bias ? fk_bf16_to_f32_1(bias[n]) : 0.0f);
}

#if FK_X86
/* ---- AVX2: R (<= 8) W rows against one x row -------------------------------------------------- */
/* The row kernel of every SIMD path (GEMV, and GEMM below its M threshold). 8 rows at a time in 8 ymm
 * accumulators, one per row: per 16 k, one 32-byte load of a row whose even bf16 become f32 by a shift
 * and odd ones by a mask (fk__bf16_even/odd, no shuffles), the even then the odd products into the
 * row's accumulator against x split into its even and odd elements (4 shuffles per 16 k, shared by the
 * rows); then 8-wide steps, the last one zero padded; one horizontal sum. Fixed for a given K whichever
 * rows share a call, so the grouping below never changes a bit (tests/kernels checks every path against
 * one model of this order), and a model decodes alike on every x86 host.
 * Grouping (fk__rows_avx2): decode is bound by how fast one core reads, and a core reads several
 * sequential streams faster than one or than many short ones. So a thread's range of rows (fk_gemv_bf16:
 * one range per thread; a range of at least 64 rows) is cut into S slabs of L rows and runs as L groups
 * of rows {i, i+L, ..., i+(S-1)L}: each accumulator walks its own slab, S contiguous streams that the
 * hardware prefetchers follow, each also requesting its line some bytes ahead (it runs on into the
 * slab's next row). Per path (fk__row_reads_of), what read fastest where it was measured: 8 streams,
 * 256 bytes ahead on the AVX2 and AMX paths (Zen 3, Sapphire Rapids); 4 streams, 2 KiB ahead on the
 * AVX-512 BF16 path (Zen 5). Slabs read the decode GEMVs faster than 8 or 16 adjacent rows at a time
 * (short streams, the next group prefetched) on all three. Rows past the slabs, and a range under 64
 * rows, take adjacent rows with the next group prefetched. */
FK_TARGET_AVX2 static inline FK_ALWAYS_INLINE void fk__dot_rows_avx2(const float* x, size_t K, const uint16_t* w, size_t ldw,
                                                                     int R, float* out, const uint16_t* pf) {
  __m256 a[8];
  FK_UNROLL(8)
  for (int r = 0; r < R; ++r) a[r] = _mm256_setzero_ps();
  size_t k = 0;
  for (; k + 16 <= K; k += 16) {
    if (pf && k % 32 == 0) {
      FK_UNROLL(8)
      for (int r = 0; r < R; ++r) _mm_prefetch((const char*)(pf + (size_t)r * ldw + k), _MM_HINT_T0);
    }
    const __m256 xa = _mm256_loadu_ps(x + k), xb = _mm256_loadu_ps(x + k + 8);
    /* within each 128-bit lane: {a0 a2 b0 b2 | a4 a6 b4 b6}; swapping the middle 64-bit pairs orders them */
    const __m256 xe = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(xa, xb, 0x88)), 0xD8));
    const __m256 xo = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(xa, xb, 0xDD)), 0xD8));
    FK_UNROLL(8)
    for (int r = 0; r < R; ++r) {
      const __m256i wv = _mm256_loadu_si256((const __m256i*)(const void*)(w + (size_t)r * ldw + k));
      a[r] = _mm256_fmadd_ps(fk__bf16_even(wv), xe, a[r]);
      a[r] = _mm256_fmadd_ps(fk__bf16_odd(wv), xo, a[r]);
    }
  }
  for (; k + 8 <= K; k += 8) {
    const __m256 x0 = _mm256_loadu_ps(x + k);
    FK_UNROLL(8)
    for (int r = 0; r < R; ++r) a[r] = _mm256_fmadd_ps(fk__load_bf16x8(w + (size_t)r * ldw + k), x0, a[r]);
  }
  if (k < K) { /* zero padded, as the AVX-512 kernel's masked loads are: each padded lane adds 0 x 0 */
    float xt[8] = {0};
    uint16_t wt[8] = {0};
    for (size_t t = k; t < K; ++t) xt[t - k] = x[t];
    const __m256 x0 = _mm256_loadu_ps(xt);
    FK_UNROLL(8)
    for (int r = 0; r < R; ++r) {
      for (size_t t = k; t < K; ++t) wt[t - k] = w[(size_t)r * ldw + t];
      a[r] = _mm256_fmadd_ps(fk__load_bf16x8(wt), x0, a[r]);
    }
  }
  FK_UNROLL(8)
  for (int r = 0; r < R; ++r) out[r] = fk__hsum256(a[r]);
}

/* How a path reads a thread's rows: slabs (streams) side by side, and how far ahead in its slab each
 * stream requests its line; what its hosts read fastest (see above). Never changes a bit. */
typedef struct {
  int streams;
  size_t ahead; /* bf16 elements */
} fk__row_reads;
FK_API fk__row_reads fk__row_reads_of(fk_isa isa) {
  const fk__row_reads four_far = {.streams = 4, .ahead = 1024}, eight_near = {.streams = 8, .ahead = 128};
  return isa == FK_ISA_AVX512BF16 ? four_far : eight_near;
}

FK_TARGET_AVX2 FK_API void fk__rows_avx2(const float* x, size_t M, size_t K, const uint16_t* W, size_t N, const uint16_t* bias,
                                         float* y, size_t n0, size_t n1, fk__row_reads reads) {
  const int streams = reads.streams;
  float o[8];
  size_t n = n0;
  if (n1 - n0 >= FK_LIN_NB) { /* `streams` slabs of `slab` rows: groups of `streams` rows, `slab` rows apart */
    const size_t slab = (n1 - n0) / (size_t)streams;
    for (size_t i = 0; i < slab; ++i)
      for (size_t m = 0; m < M; ++m) {
        const uint16_t* rows = W + (n0 + i) * K;
        const uint16_t* ahead = m == 0 ? rows + reads.ahead : NULL;
        if (streams == 4)
          fk__dot_rows_avx2(x + m * K, K, rows, slab * K, 4, o, ahead);
        else
          fk__dot_rows_avx2(x + m * K, K, rows, slab * K, 8, o, ahead);
        for (size_t r = 0; r < (size_t)streams; ++r) {
          const size_t c = n0 + i + slab * r;
          y[m * N + c] = o[r] + (bias ? fk_bf16_to_f32_1(bias[c]) : 0.0f);
        }
      }
    n = n0 + (size_t)streams * slab;
  }
  for (; n + 8 <= n1; n += 8)
    for (size_t m = 0; m < M; ++m) {
      fk__dot_rows_avx2(x + m * K, K, W + n * K, K, 8, o, m == 0 && n + 16 <= N ? W + (n + 8) * K : NULL);
      for (int r = 0; r < 8; ++r) y[m * N + n + (size_t)r] = o[r] + (bias ? fk_bf16_to_f32_1(bias[n + (size_t)r]) : 0.0f);
    }
  for (; n + 4 <= n1; n += 4) /* the last block's tail */
    for (size_t m = 0; m < M; ++m) {
      fk__dot_rows_avx2(x + m * K, K, W + n * K, K, 4, o, NULL);
      for (int r = 0; r < 4; ++r) y[m * N + n + (size_t)r] = o[r] + (bias ? fk_bf16_to_f32_1(bias[n + (size_t)r]) : 0.0f);
    }
  for (; n < n1; ++n)
    for (size_t m = 0; m < M; ++m) {
      fk__dot_rows_avx2(x + m * K, K, W + n * K, K, 1, o, NULL);
      y[m * N + n] = o[0] + (bias ? fk_bf16_to_f32_1(bias[n]) : 0.0f);
    }
}

/* The W lines a GEMM work item packs next (its next k chunk, else the next item's first chunk),
 * prefetched a few per step of the current chunk's products so that the packing finds them in cache
 * instead of waiting on DRAM. Where a step would need more than most_per_step lines (few rows of x to
 * spread them over), the prefetches cost more than they hide and none are made. Never changes a bit. */
typedef struct {
  const uint16_t* W;
  size_t K, n0, k0, rows, row_lines, per_step, row, line;
} fk__w_ahead;
static inline fk__w_ahead fk__w_ahead_of(const uint16_t* W, size_t N, size_t K, size_t n0, size_t k0, size_t kc_max,
                                        size_t item_cols, size_t packed_cols, size_t steps, size_t most_per_step) {
  const size_t next_k0 = k0 + kc_max < K ? k0 + kc_max : 0, next_n0 = next_k0 ? n0 : n0 + item_cols;
  const size_t cols = next_k0 ? packed_cols : item_cols, rows = next_n0 >= N ? 0 : N - next_n0 < cols ? N - next_n0 : cols;
  const size_t kc = K - next_k0 < kc_max ? K - next_k0 : kc_max, row_lines = (kc * sizeof(uint16_t) + 63) / 64;
  const size_t per_step = (rows * row_lines + steps - 1) / steps;
  const fk__w_ahead ahead = {.W = W, .K = K, .n0 = next_n0, .k0 = next_k0, .rows = per_step <= most_per_step ? rows : 0,
                             .row_lines = row_lines, .per_step = per_step, .row = 0, .line = 0};
  return ahead;
}
/* Into L2: into L1 (_MM_HINT_T0) gained nothing, and L2 leaves L1 to the tiles at work. */
static inline FK_ALWAYS_INLINE void fk__w_ahead_step(fk__w_ahead* ahead) {
  for (size_t i = 0; i < ahead->per_step && ahead->row < ahead->rows; ++i) {
    _mm_prefetch((const char*)(ahead->W + (ahead->n0 + ahead->row) * ahead->K + ahead->k0) + ahead->line * 64, _MM_HINT_T1);
    if (++ahead->line == ahead->row_lines) ahead->line = 0, ++ahead->row;
  }
}

/* ---- AVX2 GEMM (prefill on CPUs without AVX-512 BF16) ------------------------------------------ */
/* Per chunk of FK_LIN_KC2 k, a work item's 64 columns of W are widened once into four f32 panels of 16
 * columns (panel[s][k][16], each contiguous), which every 6-row block of x then reuses: a 6 x 16
 * register tile (12 ymm accumulators + 2 B vectors + 1 broadcast = 15 of the 16 ymm) per panel; per k,
 * 2 loads of B, 6 broadcasts of x read straight from its rows (x stays f32, never rounded) and 12 FMAs.
 * y holds the tile between chunks, so each y element is ONE fma chain: bias (or 0), then k = 0, 1, ...
 * K-1 in order. Its bits depend only on K: not on M, on the tile or panel it falls in, nor on the thread
 * count. By instruction count, the widening (an 8 x 8 transpose per 64 weights) is about 1% of the FMA
 * work at M = 512; M < FK_LIN_MIN_M_AVX2 has too few rows to amortize it and takes the row kernel. */
#define FK_LIN_MR2 6        /* x rows per AVX2 register tile */
#define FK_LIN_KC2 256      /* k per widened chunk: 4 panels x 16 KiB on the stack */
#define FK_LIN_MIN_M_AVX2 4 /* below this, GEMM uses the row kernel (no widening to amortize) */

/* panel[s][k][c] = W[n0 + 16 s + c][k0 + k] as f32 for s < 4, k < kc, c < 16; 0 for rows >= N. */
FK_TARGET_AVX2 FK_API void fk__pack_w_f32_avx2(const uint16_t* W, size_t N, size_t K, size_t n0, size_t k0, size_t kc, float* panel) {
  for (size_t g = 0; g < FK_LIN_NB / 8; ++g) { /* 8 columns at a time */
    float* p = panel + (g / 2) * FK_LIN_KC2 * 16 + (g % 2) * 8;
    const size_t nb = n0 + g * 8, rows = nb >= N ? 0 : N - nb < 8 ? N - nb : 8;
    size_t k = 0;
    for (; k + 8 <= kc; k += 8) {
      __m256 r[8];
      FK_UNROLL(8)
      for (size_t i = 0; i < 8; ++i) r[i] = i < rows ? fk__load_bf16x8(W + (nb + i) * K + k0 + k) : _mm256_setzero_ps();
      fk__transpose8x8(r);
      FK_UNROLL(8)
      for (size_t j = 0; j < 8; ++j) _mm256_storeu_ps(p + (k + j) * 16, r[j]);
    }
    for (; k < kc; ++k)
      for (size_t i = 0; i < 8; ++i) p[k * 16 + i] = i < rows ? fk_bf16_to_f32_1(W[(nb + i) * K + k0 + k]) : 0.0f;
  }
}

/* One mr x 16 tile: rows x[0 .. mr) (row stride K, already offset to the chunk's k0) times one panel of
 * kc k; y (row stride N) at columns [n0, n0 + nn), nn <= 16. */
FK_TARGET_AVX2 static inline FK_ALWAYS_INLINE void fk__gemm_tile_avx2(const float* x, size_t K, const float* bp, size_t kc, int mr,
                                                                      int first, const uint16_t* bias, float* y, size_t N,
                                                                      size_t n0, size_t nn) {
  __m256 acc[FK_LIN_MR2][2];
  const __m256i lane = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
  const __m256i cm0 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)nn), lane);     /* column n0 + i < n0 + nn */
  const __m256i cm1 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)nn - 8), lane); /* column n0 + 8 + i */
  if (first) {
    __m256 b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
    if (bias && nn == 16) {
      b0 = fk__load_bf16x8(bias + n0);
      b1 = fk__load_bf16x8(bias + n0 + 8);
    } else if (bias) {
      float bt[16] = {0};
      for (size_t c = 0; c < nn; ++c) bt[c] = fk_bf16_to_f32_1(bias[n0 + c]);
      b0 = _mm256_loadu_ps(bt);
      b1 = _mm256_loadu_ps(bt + 8);
    }
    FK_UNROLL(FK_LIN_MR2)
    for (int r = 0; r < mr; ++r) acc[r][0] = b0, acc[r][1] = b1;
  } else if (nn == 16) {
    FK_UNROLL(FK_LIN_MR2)
    for (int r = 0; r < mr; ++r) {
      acc[r][0] = _mm256_loadu_ps(y + (size_t)r * N + n0);
      acc[r][1] = _mm256_loadu_ps(y + (size_t)r * N + n0 + 8);
    }
  } else {
    FK_UNROLL(FK_LIN_MR2)
    for (int r = 0; r < mr; ++r) {
      acc[r][0] = _mm256_maskload_ps(y + (size_t)r * N + n0, cm0);
      acc[r][1] = _mm256_maskload_ps(y + (size_t)r * N + n0 + 8, cm1);
    }
  }
  for (size_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_loadu_ps(bp + k * 16), b1 = _mm256_loadu_ps(bp + k * 16 + 8);
    FK_UNROLL(FK_LIN_MR2)
    for (int r = 0; r < mr; ++r) {
      const __m256 a = _mm256_broadcast_ss(x + (size_t)r * K + k);
      acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
    }
  }
  if (nn == 16) {
    FK_UNROLL(FK_LIN_MR2)
    for (int r = 0; r < mr; ++r) {
      _mm256_storeu_ps(y + (size_t)r * N + n0, acc[r][0]);
      _mm256_storeu_ps(y + (size_t)r * N + n0 + 8, acc[r][1]);
    }
  } else {
    FK_UNROLL(FK_LIN_MR2)
    for (int r = 0; r < mr; ++r) {
      _mm256_maskstore_ps(y + (size_t)r * N + n0, cm0, acc[r][0]);
      _mm256_maskstore_ps(y + (size_t)r * N + n0 + 8, cm1, acc[r][1]);
    }
  }
}

/* Columns [n0, n0 + 64) of y for all M rows of x. */
FK_TARGET_AVX2 FK_API void fk__gemm_block_avx2(const float* x, size_t M, size_t K, const uint16_t* W, size_t N, const uint16_t* bias,
                                               float* y, size_t n0) {
  float panel[FK_LIN_NB / 16 * FK_LIN_KC2 * 16]; /* 64 KiB: four 16-column f32 panels */
  size_t nn[FK_LIN_NB / 16];
  for (size_t s = 0; s < FK_LIN_NB / 16; ++s) {
    const size_t c0 = n0 + s * 16;
    nn[s] = c0 >= N ? 0 : N - c0 < 16 ? N - c0 : 16;
  }
  for (size_t k0 = 0; k0 < K; k0 += FK_LIN_KC2) {
    const size_t kc = K - k0 < FK_LIN_KC2 ? K - k0 : FK_LIN_KC2;
    const int first = k0 == 0;
    fk__pack_w_f32_avx2(W, N, K, n0, k0, kc, panel);
    fk__w_ahead ahead = fk__w_ahead_of(W, N, K, n0, k0, FK_LIN_KC2, FK_LIN_NB, FK_LIN_NB, (M + FK_LIN_MR2 - 1) / FK_LIN_MR2 * 4, SIZE_MAX);
    for (size_t m0 = 0; m0 < M; m0 += FK_LIN_MR2) {
      const size_t mr = M - m0 < FK_LIN_MR2 ? M - m0 : FK_LIN_MR2;
      const float* xb = x + m0 * K + k0;
      float* yb = y + m0 * N;
      for (size_t s = 0; s < FK_LIN_NB / 16 && nn[s]; ++s) {
        const float* bp = panel + s * FK_LIN_KC2 * 16;
        const size_t c0 = n0 + s * 16;
        fk__w_ahead_step(&ahead);
        /* constant mr per call so the accumulators live in registers */
        switch (mr) {
          case 6: fk__gemm_tile_avx2(xb, K, bp, kc, 6, first, bias, yb, N, c0, nn[s]); break;
          case 5: fk__gemm_tile_avx2(xb, K, bp, kc, 5, first, bias, yb, N, c0, nn[s]); break;
          case 4: fk__gemm_tile_avx2(xb, K, bp, kc, 4, first, bias, yb, N, c0, nn[s]); break;
          case 3: fk__gemm_tile_avx2(xb, K, bp, kc, 3, first, bias, yb, N, c0, nn[s]); break;
          case 2: fk__gemm_tile_avx2(xb, K, bp, kc, 2, first, bias, yb, N, c0, nn[s]); break;
          default: fk__gemm_tile_avx2(xb, K, bp, kc, 1, first, bias, yb, N, c0, nn[s]); break;
        }
      }
    }
  }
}

/* ---- AVX-512 BF16 GEMM ------------------------------------------------------------------------- */
/* out[p * ld + j] (u32) = {W[n + j][k + 2p], W[n + j][k + 2p + 1]} for p, j < 16: 32 k of 16 rows of W
 * as 16 VNNI pair rows (a 16 x 16 32-bit transpose); rows >= N and k past `left` read as 0. Whole
 * vectors are read without a mask, here as in the x packing and the C tiles below: on Zen 5 a masked
 * load streams memory slower and gets no store forwarding (docs/PERFORMANCE.md). */
FK_TARGET_AVX512 static inline FK_ALWAYS_INLINE void fk__vnni_16x32(const uint16_t* W, size_t N, size_t K, size_t n, size_t k,
                                                                    size_t left, uint32_t* out, size_t ld) {
  __m512i r[16];
  const __mmask32 km = left >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << left) - 1);
  for (int i = 0; i < 16; ++i)
    r[i] = n + (size_t)i >= N ? _mm512_setzero_si512()
           : left >= 32     ? _mm512_loadu_si512(W + (n + (size_t)i) * K + k)
                            : _mm512_maskz_loadu_epi16(km, W + (n + (size_t)i) * K + k);
  fk__transpose16x16(r);
  for (int p = 0; p < 16; ++p) _mm512_storeu_si512(out + (size_t)p * ld, r[p]);
}

/* panel[p][c] (u32) = {W[n0+c][k0+2p], W[n0+c][k0+2p+1]} for p < FK_LIN_KC/2, c < 64; zero outside
 * W (rows >= N, k >= k0+kc), so padded columns and pairs contribute exactly 0. */
FK_TARGET_AVX512 FK_API void fk__pack_w_vnni(const uint16_t* W, size_t N, size_t K, size_t n0, size_t k0, size_t kc,
                                             uint32_t* panel) {
  const size_t kpad = (kc + 31) & ~(size_t)31;
  for (size_t s = 0; s < FK_LIN_NB / 16; ++s)
    for (size_t kb = 0; kb < kpad; kb += 32)
      fk__vnni_16x32(W, N, K, n0 + s * 16, k0 + kb, kc > kb ? kc - kb : 0, panel + kb / 2 * FK_LIN_NB + s * 16, FK_LIN_NB);
}

/* rows x[m0 .. m0+mr) k [k0, k0+kc) -> bf16 tile t[rows][ldt], zero padded to ldt (a multiple of 32).
 * vcvtne2ps2bf16 rounds to nearest even like fk_f32_to_bf16, except that it treats denormal inputs as
 * zero (and quiets NaNs without keeping their payload): one instruction per 32 values instead of ~10
 * per 16, which matters because every column block re-converts its x tiles. */
FK_TARGET_AVX512 FK_API void fk__pack_x_bf16(const float* x, size_t K, size_t m0, size_t mr, size_t rows, size_t k0,
                                             size_t kc, uint16_t* t, size_t ldt) {
  for (size_t r = 0; r < rows; ++r) {
    uint16_t* tr = t + r * ldt;
    if (r >= mr) {
      memset(tr, 0, ldt * sizeof *tr);
      continue;
    }
    const float* xr = x + (m0 + r) * K + k0;
    for (size_t k = 0; k < ldt; k += 32) {
      const size_t left = kc > k ? kc - k : 0;
      const __mmask16 lo = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
      const __mmask16 hi = left >= 32 ? (__mmask16)0xffff : left <= 16 ? (__mmask16)0 : (__mmask16)((1u << (left - 16)) - 1);
      const __m512 first = left >= 32 ? _mm512_loadu_ps(xr + k) : _mm512_maskz_loadu_ps(lo, xr + k);
      const __m512 second = left >= 32 ? _mm512_loadu_ps(xr + k + 16) : _mm512_maskz_loadu_ps(hi, xr + k + 16);
      _mm512_storeu_si512(tr + k, (__m512i)_mm512_cvtne2ps_pbh(second, first));
    }
  }
}

/* One mr x 64 register tile over one packed chunk of kp pairs. */
FK_TARGET_AVX512 static inline FK_ALWAYS_INLINE void fk__gemm_tile_avx512(const uint16_t* xt, size_t ldt, const uint32_t* panel,
                                                                          size_t kp, int mr, int first, const uint16_t* bias,
                                                                          float* y, size_t N, size_t n0, size_t nn) {
  __m512 acc[FK_LIN_MR][4];
  __mmask16 cm[4];
  for (int s = 0; s < 4; ++s) {
    const size_t lo = (size_t)s * 16;
    cm[s] = nn <= lo ? (__mmask16)0 : nn - lo >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (nn - lo)) - 1);
  }
  FK_UNROLL(4)
  for (int s = 0; s < 4; ++s) {
    const __m512 b = first && bias ? fk__maskload_bf16x16(bias + n0 + (size_t)s * 16, cm[s]) : _mm512_setzero_ps();
    FK_UNROLL(FK_LIN_MR)
    for (int r = 0; r < mr; ++r) {
      float* yr = y + (size_t)r * N + n0 + (size_t)s * 16;
      acc[r][s] = first ? b : nn == FK_LIN_NB ? _mm512_loadu_ps(yr) : _mm512_maskz_loadu_ps(cm[s], yr);
    }
  }
  for (size_t p = 0; p < kp; ++p) {
    /* B straight from the panel as memory operands: 24 loads per 24 vdpbf16ps is well under the load
     * ports' rate, and it leaves 24 accumulators + 1 broadcast in registers (keeping the four B
     * vectors in registers made gcc spill one of them every iteration: ~7% slower) */
    const uint32_t* pp = panel + p * FK_LIN_NB;
    FK_UNROLL(FK_LIN_MR)
    for (int r = 0; r < mr; ++r) {
      int32_t pair; /* memcpy: xt may be only 2-byte aligned (a caller's workspace); still one load */
      memcpy(&pair, xt + (size_t)r * ldt + 2 * p, sizeof pair);
      __m512i ai = _mm512_set1_epi32(pair);
      FK_CLANG_IN_REG(ai); /* see fk_common.h: clang 16 crashes folding this broadcast into vdpbf16ps */
      const __m512bh a = (__m512bh)ai;
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], a, (__m512bh)_mm512_loadu_si512(pp));
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], a, (__m512bh)_mm512_loadu_si512(pp + 16));
      acc[r][2] = _mm512_dpbf16_ps(acc[r][2], a, (__m512bh)_mm512_loadu_si512(pp + 32));
      acc[r][3] = _mm512_dpbf16_ps(acc[r][3], a, (__m512bh)_mm512_loadu_si512(pp + 48));
    }
  }
  FK_UNROLL(FK_LIN_MR)
  for (int r = 0; r < mr; ++r) {
    FK_UNROLL(4)
    for (int s = 0; s < 4; ++s) {
      float* yr = y + (size_t)r * N + n0 + (size_t)s * 16;
      if (nn == FK_LIN_NB) _mm512_storeu_ps(yr, acc[r][s]);
      else _mm512_mask_storeu_ps(yr, cm[s], acc[r][s]);
    }
  }
}

/* Columns [n0, n0 + np * 64), np <= FK_LIN_DP_PANELS. xb: x already rounded (fk__round_x_work), or NULL:
 * then the np panels share each x tile the item converts, which divides the conversion per flop by np
 * (redone for every work item: measured ~7% of the time with one panel per item, ~2% with four). A column's arithmetic depends only on its own 64-column panel
 * and the fixed k chunks, never on np, so np may follow the thread count without changing any bit. */
FK_TARGET_AVX512 FK_API void fk__gemm_block_avx512(const float* x, const uint16_t* xb, size_t M, size_t K, const uint16_t* W,
                                                   size_t N, const uint16_t* bias, float* y, size_t n0, size_t np) {
  const size_t ldb = fk__work_ld(K);
  uint32_t panel[FK_LIN_DP_PANELS][FK_LIN_KC_DP / 2 * FK_LIN_NB]; /* 4 x 16 KiB: 64-column x 128-k VNNI panels */
  uint16_t xt[FK_LIN_MR * FK_LIN_KC_DP];                          /* 1.5 KiB: 6 rows of x in bf16 */
  size_t nn[FK_LIN_DP_PANELS];
  for (size_t h = 0; h < FK_LIN_DP_PANELS; ++h) {
    const size_t c0 = n0 + h * FK_LIN_NB;
    nn[h] = c0 >= N || h >= np ? 0 : N - c0 < FK_LIN_NB ? N - c0 : FK_LIN_NB;
  }
  for (size_t k0 = 0; k0 < K; k0 += FK_LIN_KC_DP) {
    const size_t kc = K - k0 < FK_LIN_KC_DP ? K - k0 : FK_LIN_KC_DP, kpad = (kc + 31) & ~(size_t)31;
    for (size_t h = 0; h < FK_LIN_DP_PANELS; ++h)
      if (nn[h]) fk__pack_w_vnni(W, N, K, n0 + h * FK_LIN_NB, k0, kc, panel[h]);
    /* however few rows share the chunk: even all of its lines before one tile measured faster here */
    size_t panels = 0;
    while (panels < FK_LIN_DP_PANELS && nn[panels]) ++panels;
    fk__w_ahead ahead = fk__w_ahead_of(W, N, K, n0, k0, FK_LIN_KC_DP, np * FK_LIN_NB, panels * FK_LIN_NB,
                                       (M + FK_LIN_MR - 1) / FK_LIN_MR * panels, SIZE_MAX);
    for (size_t m0 = 0; m0 < M; m0 += FK_LIN_MR) {
      const size_t mr = M - m0 < FK_LIN_MR ? M - m0 : FK_LIN_MR;
      /* x already rounded for the whole GEMM (work given): the tile is read in place */
      const uint16_t* xs = xb ? xb + m0 * ldb + k0 : xt;
      const size_t lds = xb ? ldb : kpad;
      if (!xb) fk__pack_x_bf16(x, K, m0, mr, mr, k0, kc, xt, kpad);
      float* yb = y + m0 * N;
      const int first = k0 == 0;
      for (size_t h = 0; h < FK_LIN_DP_PANELS && nn[h]; ++h) {
        const size_t c0 = n0 + h * FK_LIN_NB;
        fk__w_ahead_step(&ahead);
        /* constant mr per call so the 6 x 4 accumulator array lives in registers */
        switch (mr) {
          case 6: fk__gemm_tile_avx512(xs, lds, panel[h], kpad / 2, 6, first, bias, yb, N, c0, nn[h]); break;
          case 5: fk__gemm_tile_avx512(xs, lds, panel[h], kpad / 2, 5, first, bias, yb, N, c0, nn[h]); break;
          case 4: fk__gemm_tile_avx512(xs, lds, panel[h], kpad / 2, 4, first, bias, yb, N, c0, nn[h]); break;
          case 3: fk__gemm_tile_avx512(xs, lds, panel[h], kpad / 2, 3, first, bias, yb, N, c0, nn[h]); break;
          case 2: fk__gemm_tile_avx512(xs, lds, panel[h], kpad / 2, 2, first, bias, yb, N, c0, nn[h]); break;
          default: fk__gemm_tile_avx512(xs, lds, panel[h], kpad / 2, 1, first, bias, yb, N, c0, nn[h]); break;
        }
      }
    }
  }
}

/* ---- AMX-BF16 GEMM ------------------------------------------------------------------------------ */
/* The 64-byte tile configuration of ldtilecfg (palette 1). */
typedef struct {
  uint8_t palette_id, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} fk__amx_tilecfg;

#ifdef FK_AMX_EMULATE
/* TEST-ONLY software model of the tile instructions used below, so that the AMX GEMM's packing,
 * strides, tile roles and C staging are tested on CPUs without AMX (tests/kernels: test_kernels_emulated).
 * It follows the SDM: ldtilecfg (palette 1, each tile at most 16 rows x 64 bytes) zeroes the tiles;
 * tileloadd / tilestored move the configured rows x colsb bytes (the rest of a tile reads as zero);
 * tdpbf16ps checks the shapes the instruction checks (#UD otherwise: C rows = A rows, C colsb =
 * B colsb, A colsb = 4 B rows, three distinct tiles) and accumulates even then odd bf16 products, each
 * a fused step. A violation, or a tile instruction before ldtilecfg, aborts with the reason: on
 * hardware it would fault. Never define FK_AMX_EMULATE in a real build. */
#include <stdio.h>
#include <stdlib.h>
#ifdef __cplusplus
#define FK_THREAD_LOCAL thread_local
#else
#define FK_THREAD_LOCAL _Thread_local
#endif
typedef struct {
  unsigned char t[8][16][64];
  fk__amx_tilecfg cfg;
  int configured;
} fk__amx_emu_tiles;
FK_API fk__amx_emu_tiles* fk__amx_emu(void) {
  static FK_THREAD_LOCAL fk__amx_emu_tiles s; /* tile registers are per thread, as in hardware */
  return &s;
}
FK_API void fk__amx_emu_require(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "FK_AMX_EMULATE: %s (a fault on AMX hardware)\n", what);
    abort();
  }
}
FK_API void fk__amx_emu_config(const fk__amx_tilecfg* cfg) {
  fk__amx_emu_tiles* e = fk__amx_emu();
  fk__amx_emu_require(cfg->palette_id == 1 && cfg->start_row == 0, "ldtilecfg: palette must be 1, start_row 0");
  for (int t = 0; t < 16; ++t) {
    const int used = t < 8;
    fk__amx_emu_require(used ? cfg->rows[t] <= 16 && cfg->colsb[t] <= 64 && (cfg->rows[t] == 0) == (cfg->colsb[t] == 0)
                             : cfg->rows[t] == 0 && cfg->colsb[t] == 0,
                        "ldtilecfg: a tile's rows / colsb out of range (or set for a tile palette 1 lacks)");
  }
  memcpy(&e->cfg, cfg, sizeof *cfg);
  memset(e->t, 0, sizeof e->t);
  e->configured = 1;
}
FK_API void fk__amx_emu_release(void) {
  fk__amx_emu_tiles* e = fk__amx_emu();
  memset(e->t, 0, sizeof e->t);
  e->configured = 0;
}
/* The tile state, once tile t is known to be configured (what tileloadd / tilestored require). */
FK_API fk__amx_emu_tiles* fk__amx_emu_tile(int t, const char* what) {
  fk__amx_emu_tiles* e = fk__amx_emu();
  fk__amx_emu_require(e->configured && t >= 0 && t < 8 && e->cfg.rows[t] > 0, what);
  return e;
}
FK_API void fk__amx_emu_load(int t, const void* p, size_t stride) {
  fk__amx_emu_tiles* e = fk__amx_emu_tile(t, "tileloadd: tile not configured");
  memset(e->t[t], 0, sizeof e->t[t]);
  for (size_t r = 0; r < e->cfg.rows[t]; ++r) memcpy(e->t[t][r], (const unsigned char*)p + r * stride, e->cfg.colsb[t]);
}
FK_API void fk__amx_emu_store(int t, void* p, size_t stride) {
  fk__amx_emu_tiles* e = fk__amx_emu_tile(t, "tilestored: tile not configured");
  for (size_t r = 0; r < e->cfg.rows[t]; ++r) memcpy((unsigned char*)p + r * stride, e->t[t][r], e->cfg.colsb[t]);
}
FK_API void fk__amx_emu_dp(int c, int a, int b) {
  fk__amx_emu_tiles* e = fk__amx_emu();
  fk__amx_emu_require(e->configured && c >= 0 && c < 8 && a >= 0 && a < 8 && b >= 0 && b < 8 && c != a && c != b && a != b,
                      "tdpbf16ps: tiles not configured or not distinct");
  const fk__amx_tilecfg* g = &e->cfg;
  fk__amx_emu_require(g->rows[c] == g->rows[a] && g->colsb[c] == g->colsb[b] && g->colsb[a] % 4 == 0 && g->colsb[a] / 4 == g->rows[b],
                      "tdpbf16ps: tile shapes do not match (C rows = A rows, C colsb = B colsb, A colsb = 4 B rows)");
  const int M = g->rows[c], N = g->colsb[c] / 4, K = g->colsb[a] / 4;
  float C[16][16];
  uint16_t A[16][32], B[16][32];
  memcpy(C, e->t[c], sizeof C);
  memcpy(A, e->t[a], sizeof A);
  memcpy(B, e->t[b], sizeof B);
  for (int m = 0; m < M; ++m)
    for (int k = 0; k < K; ++k) /* C[m][n] += A[m][2k] B[k][2n], then += A[m][2k+1] B[k][2n+1] */
      for (int n = 0; n < N; ++n) {
        C[m][n] = fmaf(fk_bf16_to_f32_1(A[m][2 * k]), fk_bf16_to_f32_1(B[k][2 * n]), C[m][n]);
        C[m][n] = fmaf(fk_bf16_to_f32_1(A[m][2 * k + 1]), fk_bf16_to_f32_1(B[k][2 * n + 1]), C[m][n]);
      }
  memcpy(e->t[c], C, sizeof C);
}
FK_API void fk__amx_emu_zero(int t) {
  fk__amx_emu_tiles* e = fk__amx_emu_tile(t, "tilezero: tile not configured");
  memset(e->t[t], 0, sizeof e->t[t]);
}
#define FK_TILE_LOADCONFIG(cfg) fk__amx_emu_config(cfg)
#define FK_TILE_LOADD(t, p, s) fk__amx_emu_load(t, p, (size_t)(s))
#define FK_TILE_STORED(t, p, s) fk__amx_emu_store(t, p, (size_t)(s))
#define FK_TILE_DPBF16PS(c, a, b) fk__amx_emu_dp(c, a, b)
#define FK_TILE_RELEASE() fk__amx_emu_release()
#define FK_TILE_ZERO(t) fk__amx_emu_zero(t)
#else
#define FK_TILE_LOADCONFIG(cfg) _tile_loadconfig(cfg)
#define FK_TILE_LOADD(t, p, s) _tile_loadd(t, p, s)
#define FK_TILE_STORED(t, p, s) _tile_stored(t, p, s)
#define FK_TILE_DPBF16PS(c, a, b) _tile_dpbf16ps(c, a, b)
#define FK_TILE_RELEASE() _tile_release()
#define FK_TILE_ZERO(t) _tile_zero(t)
#endif

/* Every tile 16 rows x 64 bytes (the GEMMs' one configuration): 0..3 C, 4, 5 A, 6, 7 B. */
FK_TARGET_AMX static inline void fk__amx_configure(void) {
  fk__amx_tilecfg cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette_id = 1;
  for (int t = 0; t < 8; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;
  FK_TILE_LOADCONFIG(&cfg);
}

/* C tiles 0..3 (rows 0-15 / 16-31 x columns 0-15 / 16-31) <- the 32 x 32 block at c, rows ld floats
 * apart, of which rows x cols lie in C: straight from c when whole, else through `staging` (32 x 32,
 * zero outside). */
FK_TARGET_AMX static inline FK_ALWAYS_INLINE void fk__amx_load_c(const float* c, size_t ld, size_t rows, size_t cols, float* staging) {
  if (rows == 32 && cols == 32) {
    FK_TILE_LOADD(0, c, (int)(ld * sizeof(float)));
    FK_TILE_LOADD(1, c + 16, (int)(ld * sizeof(float)));
    FK_TILE_LOADD(2, c + 16 * ld, (int)(ld * sizeof(float)));
    FK_TILE_LOADD(3, c + 16 * ld + 16, (int)(ld * sizeof(float)));
    return;
  }
  for (size_t r = 0; r < 32; ++r)
    for (size_t j = 0; j < 32; ++j) staging[r * 32 + j] = r < rows && j < cols ? c[r * ld + j] : 0.0f;
  FK_TILE_LOADD(0, staging, 128);
  FK_TILE_LOADD(1, staging + 16, 128);
  FK_TILE_LOADD(2, staging + 16 * 32, 128);
  FK_TILE_LOADD(3, staging + 16 * 32 + 16, 128);
}

/* ... and back: C tiles 0..3 -> the rows x cols of the block at c that lie in C. */
FK_TARGET_AMX static inline FK_ALWAYS_INLINE void fk__amx_store_c(float* c, size_t ld, size_t rows, size_t cols, float* staging) {
  if (rows == 32 && cols == 32) {
    FK_TILE_STORED(0, c, (int)(ld * sizeof(float)));
    FK_TILE_STORED(1, c + 16, (int)(ld * sizeof(float)));
    FK_TILE_STORED(2, c + 16 * ld, (int)(ld * sizeof(float)));
    FK_TILE_STORED(3, c + 16 * ld + 16, (int)(ld * sizeof(float)));
    return;
  }
  FK_TILE_STORED(0, staging, 128);
  FK_TILE_STORED(1, staging + 16, 128);
  FK_TILE_STORED(2, staging + 16 * 32, 128);
  FK_TILE_STORED(3, staging + 16 * 32 + 16, 128);
  for (size_t r = 0; r < rows; ++r) memcpy(c + r * ld, staging + r * 32, cols * sizeof(float));
}

/* C += A B on the 2 x 2 C tiles: A's row halves in tiles 4, 5, B's column halves in 6, 7. */
FK_TARGET_AMX static inline FK_ALWAYS_INLINE void fk__amx_dp_2x2(void) {
  FK_TILE_DPBF16PS(0, 4, 6);
  FK_TILE_DPBF16PS(1, 4, 7);
  FK_TILE_DPBF16PS(2, 5, 6);
  FK_TILE_DPBF16PS(3, 5, 7);
}

/* strip[h][p][j] (u32) = {W[c0+16h+j][k0+2p], W[c0+16h+j][k0+2p+1]} for h < 2, p < kpad/2, j < 16: the
 * two 16-column B tiles of a 32-column strip over one chunk, each tile 16 pairs x 64 bytes = 1 KiB
 * contiguous; zero outside W (columns >= N, k >= k0 + kc), so padding contributes exactly 0. */
FK_TARGET_AVX512 FK_API void fk__pack_w_strip(const uint16_t* W, size_t N, size_t K, size_t c0, size_t k0, size_t kc,
                                              uint32_t* strip) {
  const size_t kpad = (kc + 31) & ~(size_t)31;
  for (size_t h = 0; h < 2; ++h)
    for (size_t kb = 0; kb < kpad; kb += 32)
      fk__vnni_16x32(W, N, K, c0 + h * 16, k0 + kb, kc > kb ? kc - kb : 0, strip + (h * (kpad / 2) + kb / 2) * 16, 16);
}

/* Columns [n0, n0 + 32 ns) as ns strips of 32 (ns <= FK_LIN_AMX_MAX_STRIPS), k in chunks of kc_max
 * (a multiple of 32, <= FK_LIN_AMX_KC_MAX, ns * kc_max * 64 <= FK_LIN_AMX_STRIP_BYTES).
 * Per chunk the item's strips are packed once (fk__pack_w_strip: every B tile 1 KiB contiguous) and
 * each 32-row block of x then meets all of them: tiles 4, 5 = x rows 0-15, 16-31 (straight from xb,
 * the rounded x, or a zero-padded stack copy for a last block of fewer rows or without xb), 6, 7 = a
 * strip's two column halves, 0..3 = C (x half i, column half j -> 2i + j). C starts as a bias tile or
 * tilezero and lives in y between chunks; full 32 x 32 blocks move by tile loads and stores straight
 * from y, ragged ones through a stack block: faster than 64-column panels whose B tiles were spread
 * over 4 KiB with C started by a scalar loop over a staging block. Of 1, 2, 4 and 8 strips x 512-128 k,
 * 4 x 256 was the most consistent on 1 thread. */
FK_TARGET_AMX FK_API void fk__gemm_block_amx(const float* x, const uint16_t* xb, size_t M, size_t K, const uint16_t* W,
                                             size_t N, const uint16_t* bias, float* y, size_t n0, size_t ns, size_t kc_max) {
  const size_t ldb = fk__work_ld(K);
  uint32_t strips[FK_LIN_AMX_STRIP_BYTES / 4];
  uint16_t xt[32 * FK_LIN_AMX_KC_MAX]; /* 32 rows of x in bf16 = two A tiles */
  float cb[32 * 32];                   /* C staging block for ragged edges */
  float bias_tile[FK_LIN_AMX_MAX_STRIPS][2][16 * 16]; /* each row: the bias of a column half */
  size_t nstrips = 0;
  while (nstrips < ns && n0 + nstrips * 32 < N) ++nstrips;
  if (bias)
    for (size_t s = 0; s < nstrips; ++s)
      for (size_t h = 0; h < 2; ++h)
        for (size_t c = 0; c < 16; ++c) {
          const size_t n = n0 + s * 32 + h * 16 + c;
          const float v = n < N ? fk_bf16_to_f32_1(bias[n]) : 0.0f;
          for (size_t r = 0; r < 16; ++r) bias_tile[s][h][r * 16 + c] = v;
        }
  fk__amx_configure();
  for (size_t k0 = 0; k0 < K; k0 += kc_max) {
    const size_t kc = K - k0 < kc_max ? K - k0 : kc_max, kpad = (kc + 31) & ~(size_t)31, strip_u32 = kpad * 16;
    for (size_t s = 0; s < nstrips; ++s) fk__pack_w_strip(W, N, K, n0 + s * 32, k0, kc, strips + s * strip_u32);
    fk__w_ahead ahead = fk__w_ahead_of(W, N, K, n0, k0, kc_max, ns * FK_LIN_AMX_STRIP, nstrips * FK_LIN_AMX_STRIP,
                                       (M + 31) / 32 * nstrips * (kpad / 32), FK_LIN_AMX_PREFETCH_MAX);
    for (size_t m0 = 0; m0 < M; m0 += 32) {
      const size_t mr = M - m0 < 32 ? M - m0 : 32;
      const int in_place = xb && mr == 32;
      const uint16_t* xa = in_place ? xb + m0 * ldb + k0 : xt;
      const size_t lda = in_place ? ldb : kpad; /* in bf16 elements */
      if (!in_place) fk__pack_x_bf16(x, K, m0, mr, 32, k0, kc, xt, kpad);
      for (size_t s = 0; s < nstrips; ++s) {
        const size_t c0 = n0 + s * 32, nc = N - c0 < 32 ? N - c0 : 32;
        const uint32_t* b0 = strips + s * strip_u32;
        const uint32_t* b1 = b0 + kpad / 2 * 16;
        float* yb = y + m0 * N + c0;
        if (k0 == 0 && bias) {
          FK_TILE_LOADD(0, bias_tile[s][0], 64);
          FK_TILE_LOADD(1, bias_tile[s][1], 64);
          FK_TILE_LOADD(2, bias_tile[s][0], 64);
          FK_TILE_LOADD(3, bias_tile[s][1], 64);
        } else if (k0 == 0) {
          FK_TILE_ZERO(0);
          FK_TILE_ZERO(1);
          FK_TILE_ZERO(2);
          FK_TILE_ZERO(3);
        } else {
          fk__amx_load_c(yb, N, mr, nc, cb);
        }
        for (size_t kk = 0; kk < kpad; kk += 32) {
          FK_TILE_LOADD(4, xa + kk, (int)(lda * 2));
          FK_TILE_LOADD(5, xa + 16 * lda + kk, (int)(lda * 2));
          FK_TILE_LOADD(6, b0 + kk / 2 * 16, 64);
          FK_TILE_LOADD(7, b1 + kk / 2 * 16, 64);
          fk__amx_dp_2x2();
          fk__w_ahead_step(&ahead);
        }
        fk__amx_store_c(yb, N, mr, nc, cb);
      }
    }
  }
  FK_TILE_RELEASE();
}
#endif /* FK_X86 */

/* ---- dispatch ---------------------------------------------------------------------------------- */
/* 64-column panels per GEMM work item: the most sharing of x tiles (maxp) unless fewer balance the
 * threads better, e.g. 76 panels on 2 threads: 19 items of 4 leave one thread 10 items (40 panels),
 * 38 items of 2 give 19 each. Each extra item costs ~2%/panel-share of x conversion (measured).
 * Never changes results: a column's arithmetic depends only on its own panel. */
FK_API size_t fk__panels_per_item(size_t P, int nt, size_t maxp) {
  size_t np = maxp;
  double best = 1e300;
  for (size_t c = maxp; c >= 1; --c) {
    const size_t items = (P + c - 1) / c, per = (items + (size_t)nt - 1) / (size_t)nt;
    const double cost = (double)(per * c) * (1.0 + 0.02 * (double)maxp / (double)c);
    if (cost < best) best = cost, np = c;
  }
  return np;
}

FK_API void fk__linear_rows(fk_isa isa, const float* x, size_t M, size_t K, const uint16_t* W, size_t N,
                            const uint16_t* bias, float* y, size_t n0, size_t n1) {
  switch (isa) {
#if FK_X86
    case FK_ISA_AMX: /* every SIMD path: the AVX2 row kernel's long streams read fastest (see it) */
    case FK_ISA_AVX512BF16:
    case FK_ISA_AVX2: fk__rows_avx2(x, M, K, W, N, bias, y, n0, n1, fk__row_reads_of(isa)); return;
#endif
    default: fk__rows_scalar(x, M, K, W, N, bias, y, n0, n1); return;
  }
}

FK_API void fk_gemv_bf16(const float* x, size_t K, const uint16_t* W, size_t N, const uint16_t* bias, float* y) {
  const fk_isa isa = fk_isa_active();
  const size_t nb = (N + FK_LIN_NB - 1) / FK_LIN_NB;
  const int nt = fk__threads_for(nb, (double)FK_LIN_NB * (double)K);
  /* a range of whole blocks per thread: the SIMD paths read it as 4 or 8 long streams */
  FK_PARALLEL_LOOP(nt, for (int t = 0; t < nt; ++t) {
    const size_t n0 = nb * (size_t)t / (size_t)nt * FK_LIN_NB, n1 = nb * (size_t)(t + 1) / (size_t)nt * FK_LIN_NB;
    if (n0 < N) fk__linear_rows(isa, x, 1, K, W, N, bias, y, n0, n1 < N ? n1 : N);
  });
}

#if FK_X86
/* work[m][0 .. ldb) = x[m][0 .. K) rounded as fk__pack_x_bf16 rounds it (the same bits a work item's own
 * tile would hold), zero padded to ldb = fk__work_ld(K). */
FK_API void fk__round_x_work(const float* x, size_t M, size_t K, uint16_t* work) {
  const size_t ldb = fk__work_ld(K);
  const int nt = fk__threads_for(M, (double)K);
  FK_PARALLEL_LOOP(nt, for (size_t m = 0; m < M; ++m) fk__pack_x_bf16(x, K, m, 1, 1, 0, K, work + m * ldb, ldb););
}
#endif

/* Which arithmetic fk_gemm_bf16 gives each row of an M-row call on the active path (see Paths above):
 * the GEMV row kernel, 64-column panels (AVX-512 BF16 vdpbf16ps or AVX2 f32 FMA chains), or AMX tiles.
 * A row's bits depend on its x, W and this, never on the other rows or the threads: rows computed with
 * equal values are equal, and a decoder's KV cache row may stand in for a fresh one only where they
 * match (the tools' slot::feed). fk_gemv_bf16 is the row kernel. */
typedef enum { FK_GEMM_ROWS_GEMV = 0, FK_GEMM_ROWS_PANELS = 1, FK_GEMM_ROWS_TILES = 2 } fk_gemm_rows;
FK_API fk_gemm_rows fk_gemm_bf16_rows(size_t M) {
  const fk_isa isa = fk_isa_active();
  if (isa == FK_ISA_AMX && M >= FK_LIN_MIN_M_AMX) return FK_GEMM_ROWS_TILES;
  if (isa >= FK_ISA_AVX512BF16 && M >= FK_LIN_MIN_M_DP) return FK_GEMM_ROWS_PANELS;
  if (isa == FK_ISA_AVX2 && M >= FK_LIN_MIN_M_AVX2) return FK_GEMM_ROWS_PANELS;
  return FK_GEMM_ROWS_GEMV;
}

/* work: NULL, or fk_gemm_bf16_work_bytes(M, K) writable bytes (any alignment of 2). The paths that
 * multiply in bf16 (AVX-512 BF16, AMX) then round x into it once per call instead of once per work
 * item; the other paths leave it alone. Same bits either way. */
FK_API void fk_gemm_bf16(const float* x, size_t M, size_t K, const uint16_t* W, size_t N, const uint16_t* bias, float* y,
                         uint16_t* work) {
  const fk_gemm_rows rows = fk_gemm_bf16_rows(M);
#if FK_X86
  const fk_isa isa = fk_isa_active();
  const int bf16_x = rows != FK_GEMM_ROWS_GEMV && isa >= FK_ISA_AVX512BF16;
  const uint16_t* xb = bf16_x && work ? work : NULL;
  if (xb) fk__round_x_work(x, M, K, work);
  if (bf16_x && rows == FK_GEMM_ROWS_PANELS) {
    const size_t P = (N + FK_LIN_NB - 1) / FK_LIN_NB;
    const int nt = fk__threads_for(P, (double)FK_LIN_NB * (double)K * (double)M);
    const size_t np = fk__panels_per_item(P, nt, FK_LIN_DP_PANELS), nb = (P + np - 1) / np;
    FK_PARALLEL_LOOP(nt, for (size_t b = 0; b < nb; ++b) fk__gemm_block_avx512(x, xb, M, K, W, N, bias, y, b * np * FK_LIN_NB, np););
    return;
  }
#endif
  const size_t nb = (N + FK_LIN_NB - 1) / FK_LIN_NB;
  const int nt = fk__threads_for(nb, (double)FK_LIN_NB * (double)K * (double)M);
#if FK_X86
  if (rows == FK_GEMM_ROWS_TILES) {
    const size_t S = (N + FK_LIN_AMX_STRIP - 1) / FK_LIN_AMX_STRIP;
    const size_t ns = fk__panels_per_item(S, nt, FK_LIN_AMX_STRIPS), items = (S + ns - 1) / ns;
    FK_PARALLEL_LOOP(nt, for (size_t b = 0; b < items; ++b) fk__gemm_block_amx(x, xb, M, K, W, N, bias, y, b * ns * FK_LIN_AMX_STRIP, ns, FK_LIN_AMX_KC););
    return;
  }
  if (rows == FK_GEMM_ROWS_PANELS) { /* AVX2 */
    FK_PARALLEL_LOOP(nt, for (size_t b = 0; b < nb; ++b) fk__gemm_block_avx2(x, M, K, W, N, bias, y, b * FK_LIN_NB););
    return;
  }
#endif
  FK_PARALLEL_LOOP(nt, for (size_t b = 0; b < nb; ++b) {
    const size_t n0 = b * FK_LIN_NB, n1 = n0 + FK_LIN_NB < N ? n0 + FK_LIN_NB : N;
    fk__linear_rows(fk_isa_active(), x, M, K, W, N, bias, y, n0, n1);
  });
}

#endif /* FK_LINEAR_H */
