/* fk_train.h: the kernels of a training step, all f32 (master weights and activations in f32, so
 * that losses and gradients match an f32 reference to within its own rounding). The reference path is plain
 * C: every inner loop is contiguous (dot products as eight explicit lanes, the rest as axpy rows),
 * which the compiler vectorizes without reassociating anything.
 *
 * Where the CPU has AVX2 the hot kernels take an AVX2 path: the linear kernels a blocked GEMM
 * (fk__gemm_f32, with an AVX-512 micro-kernel on the AVX-512 BF16 path that rounds as the AVX2 one
 * does, and on AMX tiles of bf16 products that carry 16 of f32's 24 bits: fk__gemm_f32_amx_item),
 * causal attention and its backward 8 keys at a time with an online softmax (head_dim a multiple of
 * 8), and the exponentials of cross-entropy and SwiGLU's backward 8 at a time (fk__exp256). Each path
 * has its own rounding, the same on every thread count.
 *
 * Forward:  fk_embed_f32, fk_rmsnorm_f32, fk_linear_f32, fk_attention_causal_f32, fk_cross_entropy,
 *           fk_dropout_f32 (its own backward too)
 * Backward: fk_cross_entropy_backward, fk_linear_backward_input (dX = dY W),
 *           fk_linear_backward_weight (dW = dY^T X), fk_sum_rows (a bias's gradient),
 *           fk_rmsnorm_backward_input / _weight, fk_rope_backward / fk_rope_llama3_backward (fk_rope.h),
 *           fk_swiglu_backward, fk_attention_causal_backward (dq, dk, dv side by side in one row),
 *           fk_take_columns, fk_embed_backward (scatter-add)
 * AdamW:    fk_adam_first_moment, fk_adam_second_moment, fk_adamw_factors, fk_adamw_update
 * SGD:      fk_sgd_momentum, fk_sgd_update, fk_sgd_momentum_update
 *
 * Threads split rows or output columns, never a sum: each output element is computed by one
 * iteration in one order, so every result is bitwise independent of the thread count. */
#ifndef FK_TRAIN_H
#define FK_TRAIN_H

#include <math.h>

#include "fk_cpu.h"
#include "fk_linear.h" /* the AMX tile instructions (or their model) */
#include "fk_rope.h"

/* No fused multiply-add but where written (the GEMM's intrinsics): this plain C must round the same
 * whether the target has FMA (generated C built with -march=native) or not (the library's baseline
 * build), so that the generated train step is bitwise the C++ one. */
#if defined(__clang__)
#pragma float_control(push)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif

/* sum_k a[k] * b[k] in eight interleaved lanes, then the lanes pairwise: a fixed order. */
FK_API float fk__dot_f32(const float* a, const float* b, size_t n) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t k = 0;
  for (; k + 8 <= n; k += 8)
    for (int j = 0; j < 8; ++j) lane[j] += a[k + (size_t)j] * b[k + (size_t)j];
  for (size_t j = 0; j < 8 && k + j < n; ++j) lane[j] += a[k + j] * b[k + j]; /* j < 8: n - k < 8, said for the compiler */
  return ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
}

/* y[i] += a * x[i] */
FK_API void fk__axpy_f32(float a, const float* x, size_t n, float* y) {
  for (size_t i = 0; i < n; ++i) y[i] += a * x[i];
}

/* ---- the f32 GEMM under the linear kernels ------------------------------------------------------- */

/* C[m, n] = A B (+ bias[j]) with A(i, k) = a[i*a_row + k*a_col] and B(k, j) = b[k*b_row + j*b_col]: the
 * strides let one routine serve x W^T, dY W and dY^T X without copying a transpose. Blocked as
 * GotoBLAS does, in buffers on the stack: for each block of FK__GEMM_KC k's, B's columns are packed
 * 16 at a time (a panel) for up to FK__GEMM_NC_PANELS panels, and A's rows are taken FK__GEMM_MC at
 * a time, so that they stay in L2 while every panel passes them. The AVX2 micro-kernel (6 rows x 1
 * panel) reads A through its strides (dY^T packed first: fk__gemm_f32_pack_a_t); the AVX-512 ones
 * (6 rows x 4 panels, 12 x 2) read A packed as it lies (fk__gemm_f32_pack_a), each broadcast at a
 * constant displacement, where 6 or 12 strided rows would take as many pointers.
 * Threads take groups of panels. Each element of C starts from the bias (or 0) and adds its products
 * k in order, one FMA each, so the result depends neither on the blocking nor on the thread count,
 * and the AVX2 and AVX-512 paths agree bit for bit (the scalar path's order differs, as any two
 * ISAs may). */
#define FK__GEMM_MR 6
#define FK__GEMM_NR 16
#define FK__GEMM_KC 256
#define FK__GEMM_MC 120
#define FK__GEMM_NC_PANELS 8
#define FK__GEMM_MR512 6    /* AVX-512 micro-kernel on row-major A: 6 rows x 4 panels */
#define FK__GEMM_NP512 4
#define FK__GEMM_MR512_T 12 /* ... on k-major A (dY^T): 12 rows x 2 panels */
#define FK__GEMM_NP512_T 2

#if FK_X86
/* A 6 x 16 block of C over kc k's: twelve accumulators in named registers (an array of them would
 * live on the stack), k in order. Row r of A is a + r*a_row, its k's a_col apart; `c_in` holds the
 * block's starting values (bias, 0 or C so far), its rows ld_in apart (0: one row for all). */
FK_TARGET_AVX2 FK_API void fk__gemm_f32_6x16_avx2(size_t kc, const float* a, size_t a_row, size_t a_col, const float* packed_b, const float* c_in,
                                                 size_t ld_in, float* c_out, size_t ld_out) {
  __m256 c00 = _mm256_loadu_ps(c_in), c01 = _mm256_loadu_ps(c_in + 8);
  __m256 c10 = _mm256_loadu_ps(c_in + ld_in), c11 = _mm256_loadu_ps(c_in + ld_in + 8);
  __m256 c20 = _mm256_loadu_ps(c_in + 2 * ld_in), c21 = _mm256_loadu_ps(c_in + 2 * ld_in + 8);
  __m256 c30 = _mm256_loadu_ps(c_in + 3 * ld_in), c31 = _mm256_loadu_ps(c_in + 3 * ld_in + 8);
  __m256 c40 = _mm256_loadu_ps(c_in + 4 * ld_in), c41 = _mm256_loadu_ps(c_in + 4 * ld_in + 8);
  __m256 c50 = _mm256_loadu_ps(c_in + 5 * ld_in), c51 = _mm256_loadu_ps(c_in + 5 * ld_in + 8);
  const float *a0 = a, *a1 = a + a_row, *a2 = a + 2 * a_row, *a3 = a + 3 * a_row, *a4 = a + 4 * a_row, *a5 = a + 5 * a_row;
  for (size_t k = 0; k < kc; ++k, packed_b += FK__GEMM_NR) {
    const __m256 b0 = _mm256_loadu_ps(packed_b), b1 = _mm256_loadu_ps(packed_b + 8);
    __m256 av = _mm256_broadcast_ss(a0);
    c00 = _mm256_fmadd_ps(av, b0, c00), c01 = _mm256_fmadd_ps(av, b1, c01);
    av = _mm256_broadcast_ss(a1);
    c10 = _mm256_fmadd_ps(av, b0, c10), c11 = _mm256_fmadd_ps(av, b1, c11);
    av = _mm256_broadcast_ss(a2);
    c20 = _mm256_fmadd_ps(av, b0, c20), c21 = _mm256_fmadd_ps(av, b1, c21);
    av = _mm256_broadcast_ss(a3);
    c30 = _mm256_fmadd_ps(av, b0, c30), c31 = _mm256_fmadd_ps(av, b1, c31);
    av = _mm256_broadcast_ss(a4);
    c40 = _mm256_fmadd_ps(av, b0, c40), c41 = _mm256_fmadd_ps(av, b1, c41);
    av = _mm256_broadcast_ss(a5);
    c50 = _mm256_fmadd_ps(av, b0, c50), c51 = _mm256_fmadd_ps(av, b1, c51);
    a0 += a_col, a1 += a_col, a2 += a_col, a3 += a_col, a4 += a_col, a5 += a_col;
  }
  _mm256_storeu_ps(c_out, c00), _mm256_storeu_ps(c_out + 8, c01);
  _mm256_storeu_ps(c_out + ld_out, c10), _mm256_storeu_ps(c_out + ld_out + 8, c11);
  _mm256_storeu_ps(c_out + 2 * ld_out, c20), _mm256_storeu_ps(c_out + 2 * ld_out + 8, c21);
  _mm256_storeu_ps(c_out + 3 * ld_out, c30), _mm256_storeu_ps(c_out + 3 * ld_out + 8, c31);
  _mm256_storeu_ps(c_out + 4 * ld_out, c40), _mm256_storeu_ps(c_out + 4 * ld_out + 8, c41);
  _mm256_storeu_ps(c_out + 5 * ld_out, c50), _mm256_storeu_ps(c_out + 5 * ld_out + 8, c51);
}

/* B's k's [0, kc) x columns [0, cols) as panels of 16 columns, k-major (columns past cols are 0);
 * B is read along whichever of its strides is 1. */
FK_API void fk__gemm_f32_pack_b(size_t kc, size_t cols, const float* b, size_t b_row, size_t b_col, float* packed) {
  for (size_t j0 = 0; j0 < cols; j0 += FK__GEMM_NR, packed += FK__GEMM_NR * kc) {
    const size_t nr = cols - j0 < FK__GEMM_NR ? cols - j0 : FK__GEMM_NR;
    if (b_col == 1) {
      for (size_t k = 0; k < kc; ++k) {
        const float* row = b + k * b_row + j0;
        for (size_t j = 0; j < FK__GEMM_NR; ++j) packed[k * FK__GEMM_NR + j] = j < nr ? row[j] : 0.0f;
      }
    } else {
      for (size_t j = 0; j < FK__GEMM_NR; ++j) {
        const float* column = b + (j0 + j) * b_col;
        for (size_t k = 0; k < kc; ++k) packed[k * FK__GEMM_NR + j] = j < nr ? column[k * b_row] : 0.0f;
      }
    }
  }
}

/* One row of a block, the same sums in the same order (the rows past the last full 6). */
FK_TARGET_AVX2 FK_API void fk__gemm_f32_1x16_avx2(size_t kc, const float* a, size_t a_col, const float* packed_b, const float* c_in, float* c_out) {
  __m256 c0 = _mm256_loadu_ps(c_in), c1 = _mm256_loadu_ps(c_in + 8);
  for (size_t k = 0; k < kc; ++k, a += a_col, packed_b += FK__GEMM_NR) {
    const __m256 av = _mm256_broadcast_ss(a);
    c0 = _mm256_fmadd_ps(av, _mm256_loadu_ps(packed_b), c0);
    c1 = _mm256_fmadd_ps(av, _mm256_loadu_ps(packed_b + 8), c1);
  }
  _mm256_storeu_ps(c_out, c0), _mm256_storeu_ps(c_out + 8, c1);
}

/* The rows [0, mr) and columns [0, nr) of a 6 x 16 block of C over one K block: C = C_in + A B, where
 * C_in's rows are ld_in apart (0: one row for all, a bias); a partial block goes through a copy. */
FK_API void fk__gemm_f32_block_avx2(size_t kc, const float* a, size_t a_row, size_t a_col, size_t mr, const float* packed_b, const float* c_in,
                                    size_t ld_in, float* c, size_t ldc, size_t nr) {
  float block[FK__GEMM_MR * FK__GEMM_NR];
  if (mr == FK__GEMM_MR && nr == FK__GEMM_NR) {  /* the common case: C in place */
    fk__gemm_f32_6x16_avx2(kc, a, a_row, a_col, packed_b, c_in, ld_in, c, ldc);
    return;
  }
  for (size_t r = 0; r < mr; ++r)
    for (size_t j = 0; j < FK__GEMM_NR; ++j) block[r * FK__GEMM_NR + j] = j < nr ? c_in[r * ld_in + j] : 0.0f;
  if (mr == FK__GEMM_MR) {
    fk__gemm_f32_6x16_avx2(kc, a, a_row, a_col, packed_b, block, FK__GEMM_NR, block, FK__GEMM_NR);
  } else {
    for (size_t r = 0; r < mr; ++r) fk__gemm_f32_1x16_avx2(kc, a + r * a_row, a_col, packed_b, block + r * FK__GEMM_NR, block + r * FK__GEMM_NR);
  }
  for (size_t r = 0; r < mr; ++r)
    for (size_t j = 0; j < nr; ++j) c[r * ldc + j] = block[r * FK__GEMM_NR + j];
}

/* dY^T's rows [0, mc) (A with a_row == 1, a_col > 1) over k's [0, kc) as k-major micro-panels of mr
 * (6 or 12) rows, for the AVX2 6 x 16 and the AVX-512 12 x 32 micro-kernels: micro-panel p at
 * p FK__GEMM_PANEL_T(mr), element (r, k) at k mr + r, rows past mc 0. Read k by k across all mc rows,
 * each k's rows one run of dY, the run 8 k's on prefetched (its lines lie a_col floats apart, beyond the
 * hardware prefetchers). Reading dY^T through its strides instead, each k's rows another DRAM line,
 * stalled the AVX-512 GEMM on memory. A micro-panel's mr floats of a k are stored as whole
 * 8-float vectors, the floats past them overwritten by the next k: hence 8 floats of slack. */
#define FK__GEMM_PANEL_T(mr) ((size_t)(mr) * FK__GEMM_KC + 8)
FK_TARGET_AVX2 FK_API void fk__gemm_f32_pack_a_t(int mr, size_t kc, size_t mc, const float* a, size_t a_col, float* packed) {
  const size_t micro_panels = (mc + (size_t)mr - 1) / (size_t)mr;
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (size_t k = 0; k < kc; ++k) {
    if (k + 8 < kc)
      for (size_t i = 0; i < mc; i += 16) _mm_prefetch((const char*)(a + i + (k + 8) * a_col), _MM_HINT_T0);
    for (size_t p = 0; p < micro_panels; ++p) {
      const size_t i0 = p * (size_t)mr, rows = mc - i0 < (size_t)mr ? mc - i0 : (size_t)mr;
      float* to = packed + p * FK__GEMM_PANEL_T(mr) + k * (size_t)mr;
      for (int c = 0; c < mr; c += 8) /* lanes past the rows load nothing (no fault) and store 0 */
        _mm256_storeu_ps(to + c, _mm256_maskload_ps(a + i0 + (size_t)c + k * a_col,
                                                    _mm256_cmpgt_epi32(_mm256_set1_epi32((int)rows - c), lane)));
    }
  }
}

/* The rows [i0, i0 + mc) of C (c points at row i0, column j0) and the group's `cols` columns over one K
 * block, AVX2: each panel passes every 6-row block of the mc rows. */
FK_API void fk__gemm_f32_rows_avx2(size_t kc, size_t mc, const float* a, size_t a_row, size_t a_col, size_t cols, const float* packed_b,
                                   const float* c_in, size_t ld_in, float* c, size_t ldc) {
  if (a_row == 1 && a_col > 1) { /* dY^T: its 6 rows at a k lie in one line, and the k's a line apart each */
    float packed_a[(FK__GEMM_MC + FK__GEMM_MR - 1) / FK__GEMM_MR * FK__GEMM_PANEL_T(FK__GEMM_MR)];
    fk__gemm_f32_pack_a_t(FK__GEMM_MR, kc, mc, a, a_col, packed_a);
    for (size_t p = 0; p * FK__GEMM_NR < cols; ++p) {
      const size_t j = p * FK__GEMM_NR, nr = cols - j < FK__GEMM_NR ? cols - j : FK__GEMM_NR;
      for (size_t ir = 0; ir < mc; ir += FK__GEMM_MR)
        fk__gemm_f32_block_avx2(kc, packed_a + ir / FK__GEMM_MR * FK__GEMM_PANEL_T(FK__GEMM_MR), 1, FK__GEMM_MR, mc - ir < FK__GEMM_MR ? mc - ir : FK__GEMM_MR,
                                packed_b + j * kc, c_in + ir * ld_in + j, ld_in, c + ir * ldc + j, ldc, nr);
    }
    return;
  }
  for (size_t p = 0; p * FK__GEMM_NR < cols; ++p) {
    const size_t j = p * FK__GEMM_NR, nr = cols - j < FK__GEMM_NR ? cols - j : FK__GEMM_NR;
    for (size_t ir = 0; ir < mc; ir += FK__GEMM_MR)
      fk__gemm_f32_block_avx2(kc, a + ir * a_row, a_row, a_col, mc - ir < FK__GEMM_MR ? mc - ir : FK__GEMM_MR, packed_b + j * kc,
                              c_in + ir * ld_in + j, ld_in, c + ir * ldc + j, ldc, nr);
  }
}

/* A's rows [0, mc) over k's [0, kc) as micro-panels of the micro-kernel's mr rows, rows past mc 0, each
 * laid out as A lies so that packing copies runs:
 *   A's rows contiguous (a_col == 1): mr = FK__GEMM_MR512, row-major, micro-panel p at p mr KC
 *     (KC = FK__GEMM_KC), row r at r KC;
 *   otherwise: mr = FK__GEMM_MR512_T, k-major, micro-panel p at p FK__GEMM_PANEL_T(mr), k at k mr
 *     (dY^T, a_row == 1: fk__gemm_f32_pack_a_t).
 * A transposing copy into one layout (one element at a time) took a large share of the AVX-512 GEMM's
 * time. The buffer holds FK__GEMM_PACKED_A floats: the k-major layout's, which with its slack
 * exceeds the row-major one's MC KC. */
#define FK__GEMM_PACKED_A ((FK__GEMM_MC + FK__GEMM_MR512_T - 1) / FK__GEMM_MR512_T * FK__GEMM_PANEL_T(FK__GEMM_MR512_T))
FK_TARGET_AVX512 FK_API void fk__gemm_f32_pack_a(size_t kc, size_t mc, const float* a, size_t a_row, size_t a_col, float* packed) {
  if (a_col == 1) {
    const size_t padded = (mc + FK__GEMM_MR512 - 1) / FK__GEMM_MR512 * FK__GEMM_MR512;
    for (size_t i = 0; i < padded; ++i) { /* micro-panel i / mr, its row i % mr: at i KC either way */
      if (i < mc) memcpy(packed + i * FK__GEMM_KC, a + i * a_row, kc * sizeof(float));
      else memset(packed + i * FK__GEMM_KC, 0, kc * sizeof(float));
    }
    return;
  }
  if (a_row == 1) {
    fk__gemm_f32_pack_a_t(FK__GEMM_MR512_T, kc, mc, a, a_col, packed);
    return;
  }
  const size_t micro_panels = (mc + FK__GEMM_MR512_T - 1) / FK__GEMM_MR512_T;
  for (size_t p = 0; p < micro_panels; ++p) {
    const size_t i0 = p * FK__GEMM_MR512_T, mr = mc - i0 < FK__GEMM_MR512_T ? mc - i0 : FK__GEMM_MR512_T;
    for (size_t k = 0; k < kc; ++k)
      for (size_t r = 0; r < FK__GEMM_MR512_T; ++r)
        packed[p * FK__GEMM_PANEL_T(FK__GEMM_MR512_T) + k * FK__GEMM_MR512_T + r] = r < mr ? a[(i0 + r) * a_row + k * a_col] : 0.0f;
  }
}

/* An mr-row block of C over kc k's and `panels` panels side by side (mr x panels <= 24): an accumulator
 * per row and panel, each a column vector's one FMA chain, k in order. A's element (r, k) is
 * packed_a[r a_r + k a_k] (fk__gemm_f32_pack_a's layouts: constants, so each broadcast is one address
 * plus a displacement). Rows past `rows` are computed from A's zero padding and never stored;
 * columns[p] selects the columns of panel p that C has: a block whose panels C has whole loads and
 * stores them without masks (see fk__vnni_16x32 in fk_linear.h). */
FK_TARGET_AVX512 static inline FK_ALWAYS_INLINE void fk__gemm_f32_block_avx512(int mr, int panels, size_t a_r, size_t a_k, size_t kc,
                                                                           const float* packed_a, const float* packed_b, const float* c_in,
                                                                           size_t ld_in, float* c, size_t ldc, size_t rows,
                                                                           const __mmask16* columns) {
  __m512 acc[FK__GEMM_MR512_T][FK__GEMM_NP512];
  int whole = 1;
  FK_UNROLL(4)
  for (int p = 0; p < panels; ++p) whole &= columns[p] == (__mmask16)0xFFFF;
  FK_UNROLL(12)
  for (int r = 0; r < mr; ++r)
    FK_UNROLL(4)
    for (int p = 0; p < panels; ++p) {
      const float* cr = c_in + (size_t)r * ld_in + (size_t)p * FK__GEMM_NR;
      acc[r][p] = (size_t)r >= rows ? _mm512_setzero_ps() : whole ? _mm512_loadu_ps(cr) : _mm512_maskz_loadu_ps(columns[p], cr);
    }
  for (size_t k = 0; k < kc; ++k, packed_a += a_k) {
    __m512 b[FK__GEMM_NP512];
    FK_UNROLL(4)
    for (int p = 0; p < panels; ++p) b[p] = _mm512_loadu_ps(packed_b + ((size_t)p * kc + k) * FK__GEMM_NR);
    FK_UNROLL(12)
    for (int r = 0; r < mr; ++r) {
      const __m512 a_rk = _mm512_set1_ps(packed_a[(size_t)r * a_r]);
      FK_UNROLL(4)
      for (int p = 0; p < panels; ++p) acc[r][p] = _mm512_fmadd_ps(a_rk, b[p], acc[r][p]);
    }
  }
  FK_UNROLL(12)
  for (int r = 0; r < mr; ++r) { /* a constant count: acc stays in registers */
    if ((size_t)r >= rows) break;
    FK_UNROLL(4)
    for (int p = 0; p < panels; ++p) {
      float* cr = c + (size_t)r * ldc + (size_t)p * FK__GEMM_NR;
      if (whole) _mm512_storeu_ps(cr, acc[r][p]);
      else _mm512_mask_storeu_ps(cr, columns[p], acc[r][p]);
    }
  }
}

/* Every mr-row micro-panel of A's packed mc rows against the group's columns, np panels at a time: A
 * row-major (mr = FK__GEMM_MR512, np = FK__GEMM_NP512) or k-major (FK__GEMM_MR512_T, FK__GEMM_NP512_T).
 * Which suits which was measured: 6 x 4 runs x W^T faster than 12 x 2, which runs dY^T X faster than
 * 6 x 4. */
FK_TARGET_AVX512 static inline FK_ALWAYS_INLINE void fk__gemm_f32_sweep_avx512(int mr, int np, int row_major, size_t kc, size_t mc,
                                                                           const float* packed_a, size_t cols, const float* packed_b,
                                                                           const float* c_in, size_t ld_in, float* c, size_t ldc) {
  const size_t a_r = row_major ? FK__GEMM_KC : 1, a_k = row_major ? 1 : (size_t)mr;
  const size_t micro_panel = row_major ? (size_t)mr * FK__GEMM_KC : FK__GEMM_PANEL_T(mr); /* fk__gemm_f32_pack_a's layouts */
  for (size_t j = 0; j < cols; j += (size_t)np * FK__GEMM_NR) {
    const size_t width = cols - j < (size_t)np * FK__GEMM_NR ? cols - j : (size_t)np * FK__GEMM_NR;
    const int panels = (int)((width + FK__GEMM_NR - 1) / FK__GEMM_NR);
    __mmask16 columns[FK__GEMM_NP512];
    for (int p = 0; p < FK__GEMM_NP512; ++p) columns[p] = fk__lanes16(width, (size_t)p * FK__GEMM_NR);
    for (size_t ir = 0; ir < mc; ir += (size_t)mr) {
      const size_t rows = mc - ir < (size_t)mr ? mc - ir : (size_t)mr;
      const float *a_block = packed_a + ir / (size_t)mr * micro_panel, *b = packed_b + j * kc, *start = c_in + ir * ld_in + j;
      float* out = c + ir * ldc + j;
      if (panels == np) fk__gemm_f32_block_avx512(mr, np, a_r, a_k, kc, a_block, b, start, ld_in, out, ldc, rows, columns);
      else if (np > 3 && panels == 3) fk__gemm_f32_block_avx512(mr, 3, a_r, a_k, kc, a_block, b, start, ld_in, out, ldc, rows, columns);
      else if (panels == 2) fk__gemm_f32_block_avx512(mr, 2, a_r, a_k, kc, a_block, b, start, ld_in, out, ldc, rows, columns);
      else fk__gemm_f32_block_avx512(mr, 1, a_r, a_k, kc, a_block, b, start, ld_in, out, ldc, rows, columns);
    }
  }
}

/* fk__gemm_f32_rows_avx2's work on AVX-512: A's mc rows packed once, then the micro-kernel sweeps them. */
FK_TARGET_AVX512 FK_API void fk__gemm_f32_rows_avx512(size_t kc, size_t mc, const float* a, size_t a_row, size_t a_col, size_t cols,
                                                      const float* packed_b, const float* c_in, size_t ld_in, float* c, size_t ldc) {
  float packed_a[FK__GEMM_PACKED_A];
  fk__gemm_f32_pack_a(kc, mc, a, a_row, a_col, packed_a);
  if (a_col == 1) fk__gemm_f32_sweep_avx512(FK__GEMM_MR512, FK__GEMM_NP512, 1, kc, mc, packed_a, cols, packed_b, c_in, ld_in, c, ldc);
  else fk__gemm_f32_sweep_avx512(FK__GEMM_MR512_T, FK__GEMM_NP512_T, 0, kc, mc, packed_a, cols, packed_b, c_in, ld_in, c, ldc);
}

/* ---- the AMX path: each f32 product as three bf16 products ------------------------------------- */
/* On AMX the GEMM multiplies in bf16 tiles without giving up f32's accuracy where the losses and
 * gradients need it: every value v is split into hi = bf16(v) (nearest even) and lo = bf16(v - hi)
 * (v - hi is exact in f32), and a b is taken as a_hi b_hi + a_hi b_lo + a_lo b_hi, each product exact
 * in tdpbf16ps's f32 accumulator. What is dropped, a_lo b_lo and the rounding of the lo parts, is
 * about 3 * 2^-16 of |a b| at most, where bf16 alone would be 2^-8: an element of C is within
 * 2^-14 sum_k |a_k b_k|, plus its f32 sums' rounding, of the exact sum (test_kernels_emulated checks
 * it element by element). Why: three tdpbf16ps do the 8,192 multiply-adds of a 16 x 16 x 32 block,
 * which take 512 f32 FMA instructions on AVX-512 (docs/TRAINING.md, "Speed", for what that gives).
 * Denormal inputs (|v| < 2^-126) count as 0, as tdpbf16ps and vcvtne2ps2bf16 take them; an infinite
 * or NaN input still gives a non-finite result (v - hi is then NaN).
 *
 * Layout: a K block (FK__GEMM_AMX_KC k's) of a work item's strips of 32 columns is split into B tiles
 * (16 k pairs x 16 columns, 1 KiB each, hi and lo apart), then every 32 rows of A into A tiles (16 rows
 * x 32 k); C is 2 x 2 tiles of 16 x 16 f32 per strip, kept in c between K blocks. Each element of C
 * starts from its bias (or 0) and adds, per 32 k's in order, its hi x hi pairs, hi x lo, then lo x hi:
 * one order whatever the thread count or blocking. */
#define FK__GEMM_AMX_KC 256    /* k per K block: 8 tile chunks of 32 */
#define FK__GEMM_AMX_STRIPS 4  /* 32-column strips per work item: 128 KiB of B tiles per K block */

/* The 32 bf16 of h (from vcvtne2ps2bf16) as f32: its lower 16 in `first`, its upper 16 in `second`. */
FK_TARGET_AVX512 static inline FK_ALWAYS_INLINE void fk__bf16x32_to_f32(__m512i h, __m512* first, __m512* second) {
  const __m256i lower = _mm256_castps_si256(_mm512_castps512_ps256(_mm512_castsi512_ps(h)));
  const __m256i upper = _mm256_castps_si256(_mm512_extractf32x8_ps(_mm512_castsi512_ps(h), 1));
  *first = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(lower), 16));
  *second = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(upper), 16));
}

/* The pairs {even, odd} (u32, even in the low half) of two vectors of bf16-valued f32. */
FK_TARGET_AVX512 static inline FK_ALWAYS_INLINE __m512i fk__bf16_pairs(__m512 even, __m512 odd) {
  return _mm512_or_si512(_mm512_srli_epi32(_mm512_castps_si512(even), 16), _mm512_castps_si512(odd));
}

/* The VNNI pairs of one 16 x 32 block of a matrix X (X(r, k) = src[r * r_stride + k * k_stride]; rows
 * r >= rows and k >= ks read as 0), split: hi[i][j] and lo[i][j] (u32) are {X(r, 2p), X(r, 2p + 1)}
 * with (i, j) = (r, p) for an A tile (by_pair = 0) or (p, r) for a B tile (by_pair = 1), rows 64 bytes
 * apart. Reads run along whichever stride is 1; with neither, the block is gathered first. */
FK_TARGET_AVX512 FK_API void fk__split_tile_pairs(const float* src, size_t r_stride, size_t k_stride, size_t rows, size_t ks,
                                                  int by_pair, uint32_t* hi, uint32_t* lo) {
  __m512i hi_rows[16], lo_rows[16];
  const int along_k = k_stride == 1 || r_stride != 1; /* each row r's 32 k's in two vectors */
  float gathered[16 * 32];
  if (k_stride != 1 && r_stride != 1) {
    for (size_t r = 0; r < 16; ++r)
      for (size_t k = 0; k < 32; ++k) gathered[r * 32 + k] = r < rows && k < ks ? src[r * r_stride + k * k_stride] : 0.0f;
    src = gathered, r_stride = 32, k_stride = 1, rows = 16, ks = 32;
  }
  if (along_k) { /* row r: k 0..15 and 16..31, rounded to 32 bf16 in k order: its 16 pairs */
    const __mmask16 first = fk__lanes16(ks, 0), second = fk__lanes16(ks, 16);
    for (size_t r = 0; r < 16; ++r) {
      const __m512 v0 = r < rows ? _mm512_maskz_loadu_ps(first, src + r * r_stride) : _mm512_setzero_ps();
      const __m512 v1 = r < rows ? _mm512_maskz_loadu_ps(second, src + r * r_stride + 16) : _mm512_setzero_ps();
      __m512 kept0, kept1;
      hi_rows[r] = (__m512i)_mm512_cvtne2ps_pbh(v1, v0);
      fk__bf16x32_to_f32(hi_rows[r], &kept0, &kept1);
      lo_rows[r] = (__m512i)_mm512_cvtne2ps_pbh(_mm512_sub_ps(v1, kept1), _mm512_sub_ps(v0, kept0));
    }
  } else { /* pair p: k = 2p and 2p + 1, each over the 16 r's, rounded then paired lane by lane */
    const __mmask16 live = fk__lanes16(rows, 0);
    for (size_t p = 0; p < 16; ++p) {
      const __m512 even = 2 * p < ks ? _mm512_maskz_loadu_ps(live, src + 2 * p * k_stride) : _mm512_setzero_ps();
      const __m512 odd = 2 * p + 1 < ks ? _mm512_maskz_loadu_ps(live, src + (2 * p + 1) * k_stride) : _mm512_setzero_ps();
      __m512 even_hi, odd_hi, even_lo, odd_lo;
      fk__bf16x32_to_f32((__m512i)_mm512_cvtne2ps_pbh(odd, even), &even_hi, &odd_hi);
      fk__bf16x32_to_f32((__m512i)_mm512_cvtne2ps_pbh(_mm512_sub_ps(odd, odd_hi), _mm512_sub_ps(even, even_hi)), &even_lo, &odd_lo);
      hi_rows[p] = fk__bf16_pairs(even_hi, odd_hi);
      lo_rows[p] = fk__bf16_pairs(even_lo, odd_lo);
    }
  }
  if (along_k == by_pair) { /* the wanted orientation is the other one */
    fk__transpose16x16(hi_rows);
    fk__transpose16x16(lo_rows);
  }
  for (int i = 0; i < 16; ++i) {
    _mm512_storeu_si512(hi + i * 16, hi_rows[i]);
    _mm512_storeu_si512(lo + i * 16, lo_rows[i]);
  }
}

/* C's columns [j0, j0 + 32 strips) (strips <= FK__GEMM_AMX_STRIPS), every row: one work item. */
FK_TARGET_AMX FK_API void fk__gemm_f32_amx_item(size_t m, size_t n, size_t kdim, const float* a, size_t a_row, size_t a_col, const float* b,
                                                size_t b_row, size_t b_col, const float* bias, float* c, size_t j0, size_t strips) {
  enum { chunks_max = FK__GEMM_AMX_KC / 32, tile = 256 /* u32 */ };
  uint32_t b_hi[FK__GEMM_AMX_STRIPS][2][chunks_max][tile], b_lo[FK__GEMM_AMX_STRIPS][2][chunks_max][tile];
  uint32_t a_hi[2][chunks_max][tile], a_lo[2][chunks_max][tile];
  float start[FK__GEMM_AMX_STRIPS][2][16 * 16]; /* each row: the bias (or 0) of a strip's column half */
  float staging[32 * 32];                       /* C blocks at the edges of C */
  while (strips > 0 && j0 + 32 * (strips - 1) >= n) --strips;
  for (size_t s = 0; s < strips; ++s)
    for (size_t h = 0; h < 2; ++h)
      for (size_t col = 0; col < 16; ++col) {
        const size_t j = j0 + 32 * s + 16 * h + col;
        for (size_t r = 0; r < 16; ++r) start[s][h][r * 16 + col] = bias && j < n ? bias[j] : 0.0f;
      }
  if (kdim == 0) {
    for (size_t i = 0; i < m; ++i)
      for (size_t j = j0; j < n && j < j0 + 32 * strips; ++j) c[i * n + j] = bias ? bias[j] : 0.0f;
    return;
  }
  fk__amx_configure();
  for (size_t k0 = 0; k0 < kdim; k0 += FK__GEMM_AMX_KC) {
    const size_t kc = kdim - k0 < FK__GEMM_AMX_KC ? kdim - k0 : FK__GEMM_AMX_KC, chunks = (kc + 31) / 32;
    for (size_t s = 0; s < strips; ++s)
      for (size_t h = 0; h < 2; ++h) {
        const size_t j = j0 + 32 * s + 16 * h, cols = j >= n ? 0 : n - j < 16 ? n - j : 16;
        for (size_t q = 0; q < chunks; ++q)
          fk__split_tile_pairs(b + (k0 + 32 * q) * b_row + (cols ? j : 0) * b_col, b_col, b_row, cols, kc - 32 * q, 1, b_hi[s][h][q], b_lo[s][h][q]);
      }
    for (size_t i0 = 0; i0 < m; i0 += 32) {
      const size_t rows = m - i0 < 32 ? m - i0 : 32;
      for (size_t h = 0; h < 2; ++h) {
        const size_t live = rows > 16 * h ? rows - 16 * h : 0;
        for (size_t q = 0; q < chunks; ++q)
          fk__split_tile_pairs(a + (i0 + (live ? 16 * h : 0)) * a_row + (k0 + 32 * q) * a_col, a_row, a_col, live, kc - 32 * q, 0, a_hi[h][q], a_lo[h][q]);
      }
      for (size_t s = 0; s < strips; ++s) {
        const size_t j = j0 + 32 * s, cols = n - j < 32 ? n - j : 32;
        float* cb = c + i0 * n + j;
        if (k0 == 0) {
          FK_TILE_LOADD(0, start[s][0], 64);
          FK_TILE_LOADD(1, start[s][1], 64);
          FK_TILE_LOADD(2, start[s][0], 64);
          FK_TILE_LOADD(3, start[s][1], 64);
        } else {
          fk__amx_load_c(cb, n, rows, cols, staging);
        }
        for (size_t q = 0; q < chunks; ++q) { /* tiles 4, 5: A's row halves; 6, 7: B's column halves */
          FK_TILE_LOADD(4, a_hi[0][q], 64);
          FK_TILE_LOADD(5, a_hi[1][q], 64);
          FK_TILE_LOADD(6, b_hi[s][0][q], 64);
          FK_TILE_LOADD(7, b_hi[s][1][q], 64);
          fk__amx_dp_2x2();
          FK_TILE_LOADD(6, b_lo[s][0][q], 64);
          FK_TILE_LOADD(7, b_lo[s][1][q], 64);
          fk__amx_dp_2x2();
          FK_TILE_LOADD(4, a_lo[0][q], 64);
          FK_TILE_LOADD(5, a_lo[1][q], 64);
          FK_TILE_LOADD(6, b_hi[s][0][q], 64);
          FK_TILE_LOADD(7, b_hi[s][1][q], 64);
          fk__amx_dp_2x2();
        }
        fk__amx_store_c(cb, n, rows, cols, staging);
      }
    }
  }
  FK_TILE_RELEASE();
}

/* The driver of the SIMD paths (isa >= FK_ISA_AVX2): threads, K blocks and row blocks. */
FK_API void fk__gemm_f32(fk_isa isa, size_t m, size_t n, size_t kdim, const float* a, size_t a_row, size_t a_col, const float* b, size_t b_row,
                         size_t b_col, const float* bias, float* c) {
  if (m == 0 || n == 0) return;
  if (isa == FK_ISA_AMX) {
    const size_t strips = (n + 31) / 32;
    const int nt = fk__threads_for(strips, (double)m * (double)kdim * 32 * 2);
    const size_t per_thread = (strips + (size_t)nt - 1) / (size_t)nt;
    const size_t item_strips = per_thread < FK__GEMM_AMX_STRIPS ? per_thread : FK__GEMM_AMX_STRIPS;
    const size_t items = (strips + item_strips - 1) / item_strips;
    FK_PARALLEL_LOOP(nt, for (size_t item = 0; item < items; ++item)
      fk__gemm_f32_amx_item(m, n, kdim, a, a_row, a_col, b, b_row, b_col, bias, c, item * item_strips * 32, item_strips););
    return;
  }
  const int avx512 = isa >= FK_ISA_AVX512BF16;
  const size_t panels = (n + FK__GEMM_NR - 1) / FK__GEMM_NR;
  const int nt = fk__threads_for(panels, (double)m * (double)kdim * FK__GEMM_NR * 2);
  const size_t per_thread = (panels + (size_t)nt - 1) / (size_t)nt;
  const size_t group_panels = per_thread < FK__GEMM_NC_PANELS ? per_thread : FK__GEMM_NC_PANELS;
  const size_t groups = (panels + group_panels - 1) / group_panels;
  FK_PARALLEL_LOOP(nt, for (size_t group = 0; group < groups; ++group) {
    const size_t j0 = group * group_panels * FK__GEMM_NR;
    const size_t cols = n - j0 < group_panels * FK__GEMM_NR ? n - j0 : group_panels * FK__GEMM_NR;
    float packed_b[FK__GEMM_KC * FK__GEMM_NC_PANELS * FK__GEMM_NR];
    const float zero_row[FK__GEMM_NC_PANELS * FK__GEMM_NR] = {0};
    if (kdim == 0)
      for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < cols; ++j) c[i * n + j0 + j] = bias ? bias[j0 + j] : 0.0f;
    for (size_t k0 = 0; k0 < kdim; k0 += FK__GEMM_KC) {
      const size_t kc = kdim - k0 < FK__GEMM_KC ? kdim - k0 : FK__GEMM_KC;
      fk__gemm_f32_pack_b(kc, cols, b + k0 * b_row + j0 * b_col, b_row, b_col, packed_b);
      /* the first K block starts from the bias (or 0), one row for every row of C: C is written once, never cleared first */
      const float* start = k0 > 0 ? NULL : bias ? bias + j0 : zero_row;
      for (size_t i0 = 0; i0 < m; i0 += FK__GEMM_MC) {
        const size_t mc = m - i0 < FK__GEMM_MC ? m - i0 : FK__GEMM_MC;
        float* block = c + i0 * n + j0;
        const float* a_block = a + i0 * a_row + k0 * a_col;
        if (avx512)
          fk__gemm_f32_rows_avx512(kc, mc, a_block, a_row, a_col, cols, packed_b, start ? start : block, start ? 0 : n, block, n);
        else
          fk__gemm_f32_rows_avx2(kc, mc, a_block, a_row, a_col, cols, packed_b, start ? start : block, start ? 0 : n, block, n);
      }
    }
  });
}
#endif

/* ---- dropout ------------------------------------------------------------------------------------ */

/* Dropout's mask is a pure function of (key, step, element): no state, no order, the same bits on any
 * thread count, and the backward recomputes the forward's mask. `key` names the dropout site in a
 * seeded run (train::dropout_key); `step` is the train step's number, so each train step draws a
 * new mask. splitmix64's finalizer mixes them. */
FK_API uint64_t fk__mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/* Element `index` of a mask keeping 1 - p: 24 uniform bits against p's threshold. */
typedef struct {
  uint64_t stream;     /* key and step mixed */
  uint32_t threshold;  /* p * 2^24: elements whose bits fall below are dropped */
  float scale;         /* 1 / (1 - p), what kept elements are multiplied by */
} fk__dropout_mask;

FK_API fk__dropout_mask fk__dropout_mask_of(float p, int32_t key, const int32_t* step) {
  fk__dropout_mask m;
  m.stream = fk__mix64(((uint64_t)(uint32_t)key << 32) ^ (uint64_t)(uint32_t)(step ? step[0] : 0) ^ 0x9e3779b97f4a7c15ULL);
  m.threshold = p >= 1.0f ? (1u << 24) : (uint32_t)((double)p * 16777216.0 + 0.5);
  m.scale = p >= 1.0f ? 0.0f : (float)(1.0 / (1.0 - (double)p));
  return m;
}

FK_API float fk__dropout_factor(const fk__dropout_mask* m, uint64_t index) {
  const uint32_t bits = (uint32_t)(fk__mix64(m->stream + index * 0x9e3779b97f4a7c15ULL) >> 40);
  return bits < m->threshold ? 0.0f : m->scale;
}

/* y[i] = x[i] / (1 - p) where the mask keeps element i, else 0 (torch.nn.functional.dropout's
 * arithmetic; its random numbers are torch's own). p = 0: y = x, the same bits. The same call with
 * the same key and step is its own backward: dx = dropout(dy). y may alias x. */
FK_API void fk_dropout_f32(const float* x, size_t n, float p, int32_t key, const int32_t* step, float* y) {
  if (p <= 0.0f) {
    if (y != x) memmove(y, x, n * sizeof(float));
    return;
  }
  const fk__dropout_mask m = fk__dropout_mask_of(p, key, step);
  for (size_t i = 0; i < n; ++i) y[i] = x[i] * fk__dropout_factor(&m, i);
}

/* ---- forward ------------------------------------------------------------------------------------ */

/* out[i, :] = table[ids[i], :] (ids checked by the executors) */
FK_API void fk_embed_f32(const float* table, size_t dim, const int32_t* ids, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) memcpy(out + i * dim, table + (size_t)ids[i] * dim, dim * sizeof(float));
}

FK_API float fk__rms_scale(const float* x, size_t dim, float eps) {
  return 1.0f / sqrtf(fk__dot_f32(x, x, dim) / (float)dim + eps);
}

/* out = x / sqrt(mean(x^2) + eps) * w, row by row; out may alias x. */
FK_API void fk_rmsnorm_f32(const float* x, const float* w, size_t rows, size_t dim, float eps, float* out) {
  const int nt = fk__threads_for(rows, (double)dim * 4);
  FK_PARALLEL_LOOP(nt, for (size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    const float scale = fk__rms_scale(xr, dim, eps);
    for (size_t i = 0; i < dim; ++i) o[i] = (xr[i] * scale) * w[i];
  });
}

/* y[rows, n_out] = x[rows, n_in] w[n_out, n_in]^T (+ bias[n_out]); bias may be NULL. */
FK_API void fk_linear_f32(const float* x, size_t rows, size_t n_in, const float* w, size_t n_out, const float* bias, float* y) {
#if FK_X86
  const fk_isa isa = fk_isa_active();
  if (isa >= FK_ISA_AVX2) {
    fk__gemm_f32(isa, rows, n_out, n_in, x, n_in, 1, w, 1, n_in, bias, y);
    return;
  }
#endif
  const int nt = fk__threads_for(n_out, (double)rows * (double)n_in * 2);
  FK_PARALLEL_LOOP(nt, for (size_t n = 0; n < n_out; ++n) {
    const float* wn = w + n * n_in;
    const float b = bias ? bias[n] : 0.0f;
    for (size_t t = 0; t < rows; ++t) y[t * n_out + n] = fk__dot_f32(x + t * n_in, wn, n_in) + b;
  });
}

/* The first row that row t attends to: its sequence's first (sequences of `period` rows packed one
 * after another; period 0: all rows are one sequence). */
FK_API size_t fk__sequence_start(size_t t, size_t period) { return period ? t - t % period : 0; }

/* The attention probability of head h, query row t, key row j in a dropout mask over [heads, rows, rows]. */
FK_API uint64_t fk__attention_element(size_t h, size_t t, size_t j, size_t rows) { return ((uint64_t)h * rows + t) * rows + j; }

#if FK_X86
/* x . y over hd (a multiple of 8) floats: one FMA chain of 8 lanes, summed as fk__dot8_rows_avx2 sums
 * each of its rows, so a key scores the same bits alone or in a group of 8. */
FK_TARGET_AVX2 FK_API float fk__dot_avx2(const float* x, const float* y, size_t hd) {
  __m256 acc = _mm256_setzero_ps();
  for (size_t i = 0; i < hd; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc);
  acc = _mm256_hadd_ps(acc, acc);
  acc = _mm256_hadd_ps(acc, acc);
  return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1)));
}

/* x . rows[r * stride] for the 8 rows r, hd a multiple of 8: eight FMA chains, then one transposing sum. */
FK_TARGET_AVX2 FK_API __m256 fk__dot8_rows_avx2(const float* x, const float* rows, size_t stride, size_t hd) {
  __m256 d0 = _mm256_setzero_ps(), d1 = d0, d2 = d0, d3 = d0, d4 = d0, d5 = d0, d6 = d0, d7 = d0;
  for (size_t i = 0; i < hd; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
    d0 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(rows + i), d0);
    d1 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(rows + stride + i), d1);
    d2 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(rows + 2 * stride + i), d2);
    d3 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(rows + 3 * stride + i), d3);
    d4 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(rows + 4 * stride + i), d4);
    d5 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(rows + 5 * stride + i), d5);
    d6 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(rows + 6 * stride + i), d6);
    d7 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(rows + 7 * stride + i), d7);
  }
  /* hadd pairs lanes within each 128-bit half: the low halves end up holding lanes 0-3 of each row,
   * the high halves lanes 4-7; the two halves added give the eight sums in row order. */
  const __m256 rows0123 = _mm256_hadd_ps(_mm256_hadd_ps(d0, d1), _mm256_hadd_ps(d2, d3));
  const __m256 rows4567 = _mm256_hadd_ps(_mm256_hadd_ps(d4, d5), _mm256_hadd_ps(d6, d7));
  return _mm256_add_ps(_mm256_permute2f128_ps(rows0123, rows4567, 0x20), _mm256_permute2f128_ps(rows0123, rows4567, 0x31));
}

/* s[i] = (x . rows[i * stride]) * scale for i < n. */
FK_TARGET_AVX2 FK_API void fk__scores_avx2(const float* x, const float* rows, size_t stride, size_t hd, size_t n, float scale, float* s) {
  const size_t full = n - n % 8;
  for (size_t i = 0; i < full; i += 8) _mm256_storeu_ps(s + i, _mm256_mul_ps(fk__dot8_rows_avx2(x, rows + i * stride, stride, hd), _mm256_set1_ps(scale)));
  for (size_t i = full; i < full + n % 8; ++i) s[i] = fk__dot_avx2(x, rows + i * stride, hd) * scale;
}

/* s[i] = exp(s[i] - max) for i < n; returns their sum. */
FK_TARGET_AVX2 FK_API float fk__exp_shifted_avx2(float* s, size_t n, float max) {
  const __m256 mv = _mm256_set1_ps(max);
  __m256 sum = _mm256_setzero_ps();
  const size_t full = n - n % 8;
  for (size_t i = 0; i < full; i += 8) {
    const __m256 e = fk__exp256(_mm256_sub_ps(_mm256_loadu_ps(s + i), mv));
    _mm256_storeu_ps(s + i, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (n % 8) {  /* the last n % 8, through a tile whose unused lanes add 0 */
    float tile[8];
    for (size_t r = 0; r < 8; ++r) tile[r] = r < n % 8 ? s[full + r] : max;
    _mm256_storeu_ps(tile, fk__exp256(_mm256_sub_ps(_mm256_loadu_ps(tile), mv)));
    for (size_t r = 0; r < 8; ++r) {
      if (r < n % 8) s[full + r] = tile[r];
      else tile[r] = 0.0f;
    }
    sum = _mm256_add_ps(sum, _mm256_loadu_ps(tile));
  }
  return fk__hsum256(sum);
}

/* Keys scored at a time by the AVX2 attention (a stack tile; the softmax runs online across tiles). */
#define FK__ATTENTION_KEYS 64

/* One query row and head (job = t * heads + h) of fk_attention_causal_f32, hd a multiple of 8: the
 * keys 64 at a time, their scores 8 at a time, the softmax online (a running max and sum; the output
 * rescaled when the max grows), the values added 32 columns (four FMA chains) at a time. `mask`:
 * the dropout mask, NULL for none. */
FK_TARGET_AVX2 FK_API void fk__attention_row_avx2(const float* q, size_t rows, size_t heads, const float* k, const float* v, size_t kv_heads,
                                                 size_t head_dim, size_t period, const fk__dropout_mask* mask, size_t job, float* out) {
  const size_t group = heads / kv_heads, qw = heads * head_dim, kw = kv_heads * head_dim;
  const float scale = 1.0f / sqrtf((float)head_dim);
  const size_t t = job / heads, h = job % heads, g = h / group;
  const float* qr = q + t * qw + h * head_dim;
  const float* k_head = k + g * head_dim;
  const float* v_head = v + g * head_dim;
  float* o = out + t * qw + h * head_dim;
  const size_t first = fk__sequence_start(t, period);
  float weight[FK__ATTENTION_KEYS];
  float running_max = -INFINITY, running_sum = 0.0f;
  for (size_t i = 0; i < head_dim; ++i) o[i] = 0.0f;
  for (size_t j0 = first; j0 <= t; j0 += FK__ATTENTION_KEYS) {
    const size_t n = t + 1 - j0 < FK__ATTENTION_KEYS ? t + 1 - j0 : FK__ATTENTION_KEYS;
    fk__scores_avx2(qr, k_head + j0 * kw, kw, head_dim, n, scale, weight);
    float new_max = running_max;
    for (size_t i = 0; i < n; ++i) new_max = weight[i] > new_max ? weight[i] : new_max;
    const float rescale = expf(running_max - new_max); /* exp(-inf) = 0 on the first tile, where o is 0 */
    running_sum = running_sum * rescale + fk__exp_shifted_avx2(weight, n, new_max);
    running_max = new_max;
    if (mask)
      for (size_t i = 0; i < n; ++i) weight[i] *= fk__dropout_factor(mask, fk__attention_element(h, t, j0 + i, rows));
    const __m256 rv = _mm256_set1_ps(rescale);
    size_t d = 0;
    for (; d + 32 <= head_dim; d += 32) {
      __m256 o0 = _mm256_mul_ps(_mm256_loadu_ps(o + d), rv), o1 = _mm256_mul_ps(_mm256_loadu_ps(o + d + 8), rv);
      __m256 o2 = _mm256_mul_ps(_mm256_loadu_ps(o + d + 16), rv), o3 = _mm256_mul_ps(_mm256_loadu_ps(o + d + 24), rv);
      for (size_t i = 0; i < n; ++i) {
        const __m256 w = _mm256_set1_ps(weight[i]);
        const float* vr = v_head + (j0 + i) * kw + d;
        o0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(vr), o0), o1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(vr + 8), o1);
        o2 = _mm256_fmadd_ps(w, _mm256_loadu_ps(vr + 16), o2), o3 = _mm256_fmadd_ps(w, _mm256_loadu_ps(vr + 24), o3);
      }
      _mm256_storeu_ps(o + d, o0), _mm256_storeu_ps(o + d + 8, o1), _mm256_storeu_ps(o + d + 16, o2), _mm256_storeu_ps(o + d + 24, o3);
    }
    for (; d < head_dim; d += 8) {
      __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(o + d), rv);
      for (size_t i = 0; i < n; ++i) acc = _mm256_fmadd_ps(_mm256_set1_ps(weight[i]), _mm256_loadu_ps(v_head + (j0 + i) * kw + d), acc);
      _mm256_storeu_ps(o + d, acc);
    }
  }
  const __m256 inv = _mm256_set1_ps(1.0f / running_sum);
  for (size_t d = 0; d < head_dim; d += 8) _mm256_storeu_ps(o + d, _mm256_mul_ps(_mm256_loadu_ps(o + d), inv));
}

/* The threads' loops of the AVX2 attention stay outside FK_TARGET_AVX2 functions: clang outlines an
 * OpenMP loop's body into a function that does not inherit the target attribute. */
FK_API void fk__attention_causal_f32_avx2(const float* q, size_t rows, size_t heads, const float* k, const float* v, size_t kv_heads,
                                         size_t head_dim, size_t period, float dropout, int32_t key, const int32_t* step, float* out) {
  const fk__dropout_mask mask = fk__dropout_mask_of(dropout, key, step);
  const int nt = fk__threads_for(rows * heads, (double)rows * (double)head_dim * 2);
  FK_PARALLEL_LOOP(nt, for (size_t job = 0; job < rows * heads; ++job)
    fk__attention_row_avx2(q, rows, heads, k, v, kv_heads, head_dim, period, dropout > 0.0f ? &mask : NULL, job, out););
}

/* KV head g of fk_attention_causal_backward, hd a multiple of 8 (dqkv already zero): per query row,
 * the scores and dO . v 8 keys at a time, then dq in registers while dk and dv rows take their
 * terms. `mask`: the dropout mask, NULL for none. */
FK_TARGET_AVX2 FK_API void fk__attention_backward_head_avx2(const float* q, const float* k, const float* v, const float* dout, size_t rows,
                                                           size_t heads, size_t kv_heads, size_t head_dim, size_t period,
                                                           const fk__dropout_mask* mask, size_t g, float* work, float* dqkv) {
  const size_t group = heads / kv_heads, qw = heads * head_dim, kw = kv_heads * head_dim, row = qw + 2 * kw;
  const float scale = 1.0f / sqrtf((float)head_dim);
  float* weight = work + g * 2 * rows; /* p_j, then p_j times the dropout factor */
  float* dscore = weight + rows;       /* dp_j, then ds_j */
  const float* k_head = k + g * head_dim;
  const float* v_head = v + g * head_dim;
  float* dk_head = dqkv + qw + g * head_dim;
  float* dv_head = dqkv + qw + kw + g * head_dim;
  for (size_t h = g * group; h < (g + 1) * group; ++h)
    for (size_t t = 0; t < rows; ++t) {
      const float* qr = q + t * qw + h * head_dim;
      const float* dor = dout + t * qw + h * head_dim;
      const size_t first = fk__sequence_start(t, period), n = t + 1 - first;
      float* p = weight + first;
      float* ds = dscore + first;
      fk__scores_avx2(qr, k_head + first * kw, kw, head_dim, n, scale, p);
      float max = -INFINITY;
      for (size_t i = 0; i < n; ++i) max = p[i] > max ? p[i] : max;
      const float inv = 1.0f / fk__exp_shifted_avx2(p, n, max);
      fk__scores_avx2(dor, v_head + first * kw, kw, head_dim, n, 1.0f, ds);
      float delta = 0.0f; /* sum_j p_j dp_j = dO . O */
      for (size_t i = 0; i < n; ++i) {
        p[i] *= inv;
        if (mask) ds[i] *= fk__dropout_factor(mask, fk__attention_element(h, t, first + i, rows));
        delta += p[i] * ds[i];
      }
      for (size_t i = 0; i < n; ++i) {
        ds[i] = p[i] * (ds[i] - delta) * scale;
        if (mask) p[i] *= fk__dropout_factor(mask, fk__attention_element(h, t, first + i, rows));
      }
      float* dq = dqkv + t * row + h * head_dim;
      size_t d = 0;
      for (; d + 32 <= head_dim; d += 32) {  /* four independent dq chains */
        const __m256 q0 = _mm256_loadu_ps(qr + d), q1 = _mm256_loadu_ps(qr + d + 8), q2 = _mm256_loadu_ps(qr + d + 16), q3 = _mm256_loadu_ps(qr + d + 24);
        const __m256 do0 = _mm256_loadu_ps(dor + d), do1 = _mm256_loadu_ps(dor + d + 8), do2 = _mm256_loadu_ps(dor + d + 16),
                     do3 = _mm256_loadu_ps(dor + d + 24);
        __m256 dq0 = _mm256_setzero_ps(), dq1 = dq0, dq2 = dq0, dq3 = dq0;
        for (size_t i = 0; i < n; ++i) {
          const size_t j = first + i;
          const __m256 dsv = _mm256_set1_ps(ds[i]), pv = _mm256_set1_ps(p[i]);
          const float* kr = k_head + j * kw + d;
          float* dk = dk_head + j * row + d;
          float* dv = dv_head + j * row + d;
          dq0 = _mm256_fmadd_ps(dsv, _mm256_loadu_ps(kr), dq0), dq1 = _mm256_fmadd_ps(dsv, _mm256_loadu_ps(kr + 8), dq1);
          dq2 = _mm256_fmadd_ps(dsv, _mm256_loadu_ps(kr + 16), dq2), dq3 = _mm256_fmadd_ps(dsv, _mm256_loadu_ps(kr + 24), dq3);
          _mm256_storeu_ps(dk, _mm256_fmadd_ps(dsv, q0, _mm256_loadu_ps(dk)));
          _mm256_storeu_ps(dk + 8, _mm256_fmadd_ps(dsv, q1, _mm256_loadu_ps(dk + 8)));
          _mm256_storeu_ps(dk + 16, _mm256_fmadd_ps(dsv, q2, _mm256_loadu_ps(dk + 16)));
          _mm256_storeu_ps(dk + 24, _mm256_fmadd_ps(dsv, q3, _mm256_loadu_ps(dk + 24)));
          _mm256_storeu_ps(dv, _mm256_fmadd_ps(pv, do0, _mm256_loadu_ps(dv)));
          _mm256_storeu_ps(dv + 8, _mm256_fmadd_ps(pv, do1, _mm256_loadu_ps(dv + 8)));
          _mm256_storeu_ps(dv + 16, _mm256_fmadd_ps(pv, do2, _mm256_loadu_ps(dv + 16)));
          _mm256_storeu_ps(dv + 24, _mm256_fmadd_ps(pv, do3, _mm256_loadu_ps(dv + 24)));
        }
        _mm256_storeu_ps(dq + d, dq0), _mm256_storeu_ps(dq + d + 8, dq1), _mm256_storeu_ps(dq + d + 16, dq2), _mm256_storeu_ps(dq + d + 24, dq3);
      }
      for (; d < head_dim; d += 8) {
        const __m256 qv = _mm256_loadu_ps(qr + d), dov = _mm256_loadu_ps(dor + d);
        __m256 dqv = _mm256_setzero_ps();
        for (size_t i = 0; i < n; ++i) {
          const size_t j = first + i;
          const __m256 dsv = _mm256_set1_ps(ds[i]);
          dqv = _mm256_fmadd_ps(dsv, _mm256_loadu_ps(k_head + j * kw + d), dqv);
          float* dk = dk_head + j * row + d;
          float* dv = dv_head + j * row + d;
          _mm256_storeu_ps(dk, _mm256_fmadd_ps(dsv, qv, _mm256_loadu_ps(dk)));
          _mm256_storeu_ps(dv, _mm256_fmadd_ps(_mm256_set1_ps(p[i]), dov, _mm256_loadu_ps(dv)));
        }
        _mm256_storeu_ps(dq + d, dqv);
      }
    }
}

/* Threads split the kv heads (each owns its dk, dv and its query heads' dq). */
FK_API void fk__attention_causal_backward_avx2(const float* q, const float* k, const float* v, const float* dout, size_t rows, size_t heads,
                                              size_t kv_heads, size_t head_dim, size_t period, float dropout, int32_t key, const int32_t* step,
                                              float* work, float* dqkv) {
  const fk__dropout_mask mask = fk__dropout_mask_of(dropout, key, step);
  const int nt = fk__threads_for(kv_heads, (double)rows * (double)rows * (double)head_dim * (double)(heads / kv_heads) * 4);
  FK_PARALLEL_LOOP(nt, for (size_t g = 0; g < kv_heads; ++g)
    fk__attention_backward_head_avx2(q, k, v, dout, rows, heads, kv_heads, head_dim, period, dropout > 0.0f ? &mask : NULL, g, work, dqkv););
}
#endif

/* Causal grouped-query attention: q[rows, heads*hd], k and v [rows, kv_heads*hd], out[rows, heads*hd];
 * head h reads kv head h / (heads / kv_heads); row t sees the rows of its sequence up to its own.
 * Softmax of q.k / sqrt(hd) in two passes (max, then sum). With dropout p > 0 (and its key and step,
 * as fk_dropout_f32's), the probabilities go through a mask over [heads, rows, rows] before they
 * weigh the values, as Hugging Face's attention_dropout does in training. */
FK_API void fk_attention_causal_f32(const float* q, size_t rows, size_t heads, const float* k, const float* v, size_t kv_heads,
                                    size_t head_dim, size_t period, float dropout, int32_t key, const int32_t* step, float* out) {
#if FK_X86
  if (fk_isa_active() >= FK_ISA_AVX2 && head_dim % 8 == 0) {
    fk__attention_causal_f32_avx2(q, rows, heads, k, v, kv_heads, head_dim, period, dropout, key, step, out);
    return;
  }
#endif
  const size_t group = heads / kv_heads, qw = heads * head_dim, kw = kv_heads * head_dim;
  const float scale = 1.0f / sqrtf((float)head_dim);
  const int masked = dropout > 0.0f;
  const fk__dropout_mask mask = fk__dropout_mask_of(dropout, key, step);
  const int nt = fk__threads_for(rows * heads, (double)rows * (double)head_dim * 2);
  FK_PARALLEL_LOOP(nt, for (size_t job = 0; job < rows * heads; ++job) {
    const size_t t = job / heads, h = job % heads, g = h / group;
    const float* qr = q + t * qw + h * head_dim;
    float* o = out + t * qw + h * head_dim;
    const size_t first = fk__sequence_start(t, period);
    float m = -INFINITY;
    for (size_t j = first; j <= t; ++j) {
      const float s = fk__dot_f32(qr, k + j * kw + g * head_dim, head_dim) * scale;
      m = s > m ? s : m;
    }
    float sum = 0.0f;
    for (size_t i = 0; i < head_dim; ++i) o[i] = 0.0f;
    for (size_t j = first; j <= t; ++j) {
      const float p = expf(fk__dot_f32(qr, k + j * kw + g * head_dim, head_dim) * scale - m);
      sum += p;
      const float weight = masked ? p * fk__dropout_factor(&mask, fk__attention_element(h, t, j, rows)) : p;
      fk__axpy_f32(weight, v + j * kw + g * head_dim, head_dim, o);
    }
    const float inv = 1.0f / sum;
    for (size_t i = 0; i < head_dim; ++i) o[i] *= inv;
  });
}

/* Label -100 (Hugging Face's ignore index) marks a row the loss skips. */
#define FK_IGNORE_LABEL (-100)

#if FK_X86
/* fk__logsumexp with the exponentials 8 at a time (fk__exp256), summed in four double lanes. */
FK_TARGET_AVX2 FK_API double fk__logsumexp_avx2(const float* x, size_t n) {
  const size_t full = n - n % 8; /* the tails count n % 8, which the compiler sees is < 8 */
  float m = -INFINITY;
  if (full > 0) {
    __m256 mv = _mm256_loadu_ps(x);
    for (size_t j = 8; j < full; j += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(x + j));
    float lanes[8];
    _mm256_storeu_ps(lanes, mv);
    for (int l = 0; l < 8; ++l) m = lanes[l] > m ? lanes[l] : m;
  }
  for (size_t r = 0; r < n % 8; ++r) m = x[full + r] > m ? x[full + r] : m;
  const __m256 shift = _mm256_set1_ps(m);
  __m256d low = _mm256_setzero_pd(), high = _mm256_setzero_pd();
  for (size_t j = 0; j < full; j += 8) {
    const __m256 e = fk__exp256(_mm256_sub_ps(_mm256_loadu_ps(x + j), shift));
    low = _mm256_add_pd(low, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    high = _mm256_add_pd(high, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  double lanes[4];
  _mm256_storeu_pd(lanes, _mm256_add_pd(low, high));
  double s = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (size_t r = 0; r < n % 8; ++r) s += (double)expf(x[full + r] - m);
  return (double)m + log(s);
}

/* d[j] = exp(x[j] - shift) * factor, 8 at a time. */
FK_TARGET_AVX2 FK_API void fk__exp_scaled_avx2(const float* x, size_t n, float shift, float factor, float* d) {
  const size_t full = n - n % 8;
  for (size_t j = 0; j < full; j += 8)
    _mm256_storeu_ps(d + j, _mm256_mul_ps(fk__exp256(_mm256_sub_ps(_mm256_loadu_ps(x + j), _mm256_set1_ps(shift))), _mm256_set1_ps(factor)));
  for (size_t r = 0; r < n % 8; ++r) d[full + r] = expf(x[full + r] - shift) * factor;
}
#endif

/* log(sum_j exp(x[j])) of one row: f32 exponentials (of x - max, so at most 1), summed in double. */
FK_API double fk__logsumexp(const float* x, size_t n) {
#if FK_X86
  if (fk_isa_active() >= FK_ISA_AVX2) return fk__logsumexp_avx2(x, n);
#endif
  float m = -INFINITY;
  for (size_t j = 0; j < n; ++j) m = x[j] > m ? x[j] : m;
  double s = 0.0;
  for (size_t j = 0; j < n; ++j) s += (double)expf(x[j] - m);
  return (double)m + log(s);
}

/* loss[0] = the sum over rows with labels[r] != FK_IGNORE_LABEL of logsumexp(logits[r]) - logits[r][labels[r]],
 * divided by label_count[0], or where label_count is NULL by the number of those rows: their mean (0 when
 * every row is ignored). A data-parallel shard divides by the labels of the whole batch, so that the shards'
 * losses and gradients add up to the batch's. Labels outside [0, vocab) other than the ignore index:
 * refused (1). */
FK_API int fk_cross_entropy(const float* logits, size_t rows, size_t vocab, const int32_t* labels, const float* label_count, float* loss) {
  double total = 0.0;
  size_t counted = 0;
  for (size_t r = 0; r < rows; ++r)
    if (labels[r] != FK_IGNORE_LABEL && (labels[r] < 0 || (size_t)labels[r] >= vocab)) return 1;
  for (size_t r = 0; r < rows; ++r) {
    if (labels[r] == FK_IGNORE_LABEL) continue;
    const float* x = logits + r * vocab;
    total += fk__logsumexp(x, vocab) - (double)x[labels[r]];
    ++counted;
  }
  const double divisor = label_count ? (double)label_count[0] : (double)counted;
  loss[0] = counted && divisor > 0 ? (float)(total / divisor) : 0.0f;
  return 0;
}

/* ---- backward ----------------------------------------------------------------------------------- */

/* d[j] = softmax(x)[j] * scale, j < n */
FK_API void fk__softmax_scaled(const float* x, size_t n, float scale, float* d) {
  const float lse = (float)fk__logsumexp(x, n);
#if FK_X86
  if (fk_isa_active() >= FK_ISA_AVX2) {
    fk__exp_scaled_avx2(x, n, lse, scale, d);
    return;
  }
#endif
  for (size_t j = 0; j < n; ++j) d[j] = expf(x[j] - lse) * scale;
}

/* dlogits[r] = (softmax(logits[r]) - onehot(labels[r])) * dloss / (label_count[0], or the rows counted where
 * label_count is NULL); ignored rows get 0. */
FK_API int fk_cross_entropy_backward(const float* logits, size_t rows, size_t vocab, const int32_t* labels, const float* dloss,
                                     const float* label_count, float* dlogits) {
  size_t counted = 0;
  for (size_t r = 0; r < rows; ++r) {
    if (labels[r] != FK_IGNORE_LABEL && (labels[r] < 0 || (size_t)labels[r] >= vocab)) return 1;
    counted += labels[r] != FK_IGNORE_LABEL;
  }
  const float divisor = label_count ? label_count[0] : (float)counted;
  const float per_row = counted && divisor > 0 ? dloss[0] / divisor : 0.0f;
  const int nt = fk__threads_for(rows, (double)vocab * 8);
  FK_PARALLEL_LOOP(nt, for (size_t r = 0; r < rows; ++r) {
    float* d = dlogits + r * vocab;
    if (labels[r] == FK_IGNORE_LABEL) {
      for (size_t j = 0; j < vocab; ++j) d[j] = 0.0f;
      continue;
    }
    fk__softmax_scaled(logits + r * vocab, vocab, per_row, d);
    d[labels[r]] -= per_row;
  });
  return 0;
}

/* dx[rows, n_in] = dy[rows, n_out] w[n_out, n_in] */
FK_API void fk_linear_backward_input(const float* dy, size_t rows, size_t n_out, const float* w, size_t n_in, float* dx) {
#if FK_X86
  const fk_isa isa = fk_isa_active();
  if (isa >= FK_ISA_AVX2) {
    fk__gemm_f32(isa, rows, n_in, n_out, dy, n_out, 1, w, n_in, 1, NULL, dx);
    return;
  }
#endif
  const int nt = fk__threads_for(rows, (double)n_out * (double)n_in * 2);
  FK_PARALLEL_LOOP(nt, for (size_t t = 0; t < rows; ++t) {
    float* d = dx + t * n_in;
    for (size_t i = 0; i < n_in; ++i) d[i] = 0.0f;
    for (size_t n = 0; n < n_out; ++n) fk__axpy_f32(dy[t * n_out + n], w + n * n_in, n_in, d);
  });
}

/* dw[n_out, n_in] = dy[rows, n_out]^T x[rows, n_in] */
FK_API void fk_linear_backward_weight(const float* dy, size_t rows, size_t n_out, const float* x, size_t n_in, float* dw) {
#if FK_X86
  const fk_isa isa = fk_isa_active();
  if (isa >= FK_ISA_AVX2) {
    fk__gemm_f32(isa, n_out, n_in, rows, dy, 1, n_out, x, n_in, 1, NULL, dw);
    return;
  }
#endif
  const int nt = fk__threads_for(n_out, (double)rows * (double)n_in * 2);
  FK_PARALLEL_LOOP(nt, for (size_t n = 0; n < n_out; ++n) {
    float* d = dw + n * n_in;
    for (size_t i = 0; i < n_in; ++i) d[i] = 0.0f;
    for (size_t t = 0; t < rows; ++t) fk__axpy_f32(dy[t * n_out + n], x + t * n_in, n_in, d);
  });
}

/* out[cols] = sum over rows of x[rows, cols] (a bias's gradient) */
FK_API void fk_sum_rows(const float* x, size_t rows, size_t cols, float* out) {
  for (size_t c = 0; c < cols; ++c) out[c] = 0.0f;
  for (size_t r = 0; r < rows; ++r) fk__axpy_f32(1.0f, x + r * cols, cols, out);
}

/* y = x * s * w with s = 1/sqrt(mean(x^2) + eps): dx = s * (dy*w - x * s^2 * mean(dy*w*x)). */
FK_API void fk_rmsnorm_backward_input(const float* x, const float* w, const float* dy, size_t rows, size_t dim, float eps, float* dx) {
  const int nt = fk__threads_for(rows, (double)dim * 8);
  FK_PARALLEL_LOOP(nt, for (size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    const float* g = dy + r * dim;
    float* d = dx + r * dim;
    const float s = fk__rms_scale(xr, dim, eps);
    double gwx = 0.0;
    for (size_t i = 0; i < dim; ++i) gwx += (double)g[i] * (double)w[i] * (double)xr[i];
    const float c = (float)(gwx / (double)dim) * s * s;
    for (size_t i = 0; i < dim; ++i) d[i] = s * (g[i] * w[i] - xr[i] * c);
  });
}

/* dw[dim] = sum over rows of dy * x * s (rows in order). */
FK_API void fk_rmsnorm_backward_weight(const float* x, const float* dy, size_t rows, size_t dim, float eps, float* dw) {
  for (size_t i = 0; i < dim; ++i) dw[i] = 0.0f;
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    const float* g = dy + r * dim;
    const float s = fk__rms_scale(xr, dim, eps);
    for (size_t i = 0; i < dim; ++i) dw[i] += g[i] * (xr[i] * s);
  }
}

/* silu(g) * u: which == 0 -> d gate = dy * u * silu'(g), silu'(g) = sig(g) * (1 + g * (1 - sig(g)));
 * which == 1 -> d up = dy * silu(g). */
#if FK_X86
FK_TARGET_AVX2 FK_API void fk__swiglu_backward_avx2(const float* gate, const float* up, const float* dy, size_t n, int32_t which, float* out) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const size_t full = n - n % 8;
  for (size_t i = 0; i < full; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i), grad = _mm256_loadu_ps(dy + i);
    const __m256 sig = _mm256_div_ps(one, _mm256_add_ps(one, fk__exp256(_mm256_sub_ps(_mm256_setzero_ps(), g))));
    const __m256 result = which == 0
        ? _mm256_mul_ps(_mm256_mul_ps(grad, _mm256_loadu_ps(up + i)), _mm256_mul_ps(sig, _mm256_add_ps(one, _mm256_mul_ps(g, _mm256_sub_ps(one, sig)))))
        : _mm256_mul_ps(grad, _mm256_mul_ps(g, sig));
    _mm256_storeu_ps(out + i, result);
  }
  for (size_t i = full; i < full + n % 8; ++i) {
    const float g = gate[i], sig = 1.0f / (1.0f + expf(-g));
    out[i] = which == 0 ? dy[i] * up[i] * (sig * (1.0f + g * (1.0f - sig))) : dy[i] * (g * sig);
  }
}
#endif

FK_API void fk_swiglu_backward(const float* gate, const float* up, const float* dy, size_t n, int32_t which, float* out) {
#if FK_X86
  if (fk_isa_active() >= FK_ISA_AVX2) {
    fk__swiglu_backward_avx2(gate, up, dy, n, which, out);
    return;
  }
#endif
  for (size_t i = 0; i < n; ++i) {
    const float g = gate[i], sig = 1.0f / (1.0f + expf(-g));
    out[i] = which == 0 ? dy[i] * up[i] * (sig * (1.0f + g * (1.0f - sig))) : dy[i] * (g * sig);
  }
}

/* The gradients of fk_attention_causal_f32 with respect to q, k and v, side by side in one row:
 * dqkv[rows, (heads + 2*kv_heads) * hd] = [dq | dk | dv]. The probabilities (and a dropout's mask) are
 * recomputed row by row; work holds 2 * rows floats per kv head. Threads split the kv heads: each owns
 * its dk and dv and the dq of its query heads, and adds rows in order. With dropout, dp_j is the mask's
 * factor times dO.v_j, and sum_j p_j dp_j is still dO.O. */
FK_API void fk_attention_causal_backward(const float* q, const float* k, const float* v, const float* dout, size_t rows, size_t heads,
                                         size_t kv_heads, size_t head_dim, size_t period, float dropout, int32_t key, const int32_t* step,
                                         float* work, float* dqkv) {
  const size_t group = heads / kv_heads, qw = heads * head_dim, kw = kv_heads * head_dim, row = qw + 2 * kw;
  const float scale = 1.0f / sqrtf((float)head_dim);
  const int masked = dropout > 0.0f;
  const fk__dropout_mask mask = fk__dropout_mask_of(dropout, key, step);
  for (size_t t = 0; t < rows; ++t)
    for (size_t i = 0; i < row; ++i) dqkv[t * row + i] = 0.0f;
#if FK_X86
  if (fk_isa_active() >= FK_ISA_AVX2 && head_dim % 8 == 0) {
    fk__attention_causal_backward_avx2(q, k, v, dout, rows, heads, kv_heads, head_dim, period, dropout, key, step, work, dqkv);
    return;
  }
#endif
  const int nt = fk__threads_for(kv_heads, (double)rows * (double)rows * (double)head_dim * (double)group * 4);
  FK_PARALLEL_LOOP(nt, for (size_t g = 0; g < kv_heads; ++g) {
    float* p = work + g * 2 * rows;
    float* dp = p + rows;
    for (size_t h = g * group; h < (g + 1) * group; ++h)
      for (size_t t = 0; t < rows; ++t) {
        const float* qr = q + t * qw + h * head_dim;
        const float* dor = dout + t * qw + h * head_dim;
        const size_t first = fk__sequence_start(t, period);
        float m = -INFINITY;
        for (size_t j = first; j <= t; ++j) {
          p[j] = fk__dot_f32(qr, k + j * kw + g * head_dim, head_dim) * scale;
          m = p[j] > m ? p[j] : m;
        }
        float sum = 0.0f;
        for (size_t j = first; j <= t; ++j) {
          p[j] = expf(p[j] - m);
          sum += p[j];
        }
        const float inv = 1.0f / sum;
        float delta = 0.0f; /* sum_j p_j dp_j = dO . O */
        for (size_t j = first; j <= t; ++j) {
          p[j] *= inv;
          dp[j] = fk__dot_f32(dor, v + j * kw + g * head_dim, head_dim);
          if (masked) dp[j] *= fk__dropout_factor(&mask, fk__attention_element(h, t, j, rows));
          delta += p[j] * dp[j];
        }
        float* dq = dqkv + t * row + h * head_dim;
        for (size_t j = first; j <= t; ++j) {
          const float ds = p[j] * (dp[j] - delta) * scale;
          const float weight = masked ? p[j] * fk__dropout_factor(&mask, fk__attention_element(h, t, j, rows)) : p[j];
          fk__axpy_f32(ds, k + j * kw + g * head_dim, head_dim, dq);
          fk__axpy_f32(ds, qr, head_dim, dqkv + j * row + qw + g * head_dim);
          fk__axpy_f32(weight, dor, head_dim, dqkv + j * row + qw + kw + g * head_dim);
        }
      }
  });
}

/* out[rows, count] = x[rows, cols] columns first..first+count-1 */
FK_API void fk_take_columns(const float* x, size_t rows, size_t cols, int32_t first, size_t count, float* out) {
  for (size_t r = 0; r < rows; ++r) memcpy(out + r * count, x + r * cols + (size_t)first, count * sizeof(float));
}

/* dtable[vocab, dim] = sum over i of dy[i] into row ids[i] (rows in order). */
FK_API void fk_embed_backward(const int32_t* ids, size_t n, const float* dy, size_t dim, size_t vocab, float* dtable) {
  memset(dtable, 0, vocab * dim * sizeof(float));
  for (size_t i = 0; i < n; ++i) fk__axpy_f32(1.0f, dy + i * dim, dim, dtable + (size_t)ids[i] * dim);
}

/* ---- AdamW, as torch.optim.AdamW computes it ---------------------------------------------------- */

/* m' = m * beta1 + g * (1 - beta1) */
FK_API void fk_adam_first_moment(const float* m, const float* g, size_t n, float beta1, float* out) {
  const float keep = beta1, take = (float)(1.0 - (double)beta1);
  for (size_t i = 0; i < n; ++i) out[i] = m[i] * keep + take * g[i];
}

/* v' = v * beta2 + (1 - beta2) * g * g */
FK_API void fk_adam_second_moment(const float* v, const float* g, size_t n, float beta2, float* out) {
  const float keep = beta2, take = (float)(1.0 - (double)beta2);
  for (size_t i = 0; i < n; ++i) out[i] = v[i] * keep + take * g[i] * g[i];
}

/* This step's factors from the step count t (already advanced) and the learning rate, in double as
 * torch computes its Python scalars: out = {1 - lr * weight_decay, lr / (1 - beta1^t), sqrt(1 - beta2^t), lr}. */
FK_API void fk_adamw_factors(const int32_t* step, const float* lr, float beta1, float beta2, float weight_decay, float* out) {
  const double t = (double)step[0], rate = (double)lr[0];
  out[0] = (float)(1.0 - rate * (double)weight_decay);
  out[1] = (float)(rate / (1.0 - pow((double)beta1, t)));
  out[2] = (float)sqrt(1.0 - pow((double)beta2, t));
  out[3] = lr[0];
}

/* p' = p * (1 - lr*wd) - step_size * m / (sqrt(v) / sqrt(1 - beta2^t) + eps); out may alias p. */
FK_API void fk_adamw_update(const float* p, const float* m, const float* v, const float* factors, size_t n, float eps, float* out) {
  const float decay = factors[0], step_size = factors[1], bias2_sqrt = factors[2];
  for (size_t i = 0; i < n; ++i) {
    const float decayed = p[i] * decay;
    out[i] = decayed + (-step_size) * (m[i] / (sqrtf(v[i]) / bias2_sqrt + eps));
  }
}

/* ---- SGD, as torch.optim.SGD computes it --------------------------------------------------------- */

/* The update direction before momentum: g + weight_decay * p (g itself without weight decay). */
FK_API float fk__sgd_direction(float g, float p, float weight_decay) { return weight_decay != 0.0f ? g + weight_decay * p : g; }

/* buf' = d on the first step (step[0] == 1: the count is already advanced), else
 * buf * momentum + (1 - dampening) * d, with d = g + weight_decay * p; out may alias buf. */
FK_API void fk_sgd_momentum(const float* buf, const float* g, const float* p, const int32_t* step, size_t n, float momentum, float dampening,
                            float weight_decay, float* out) {
  const float take = (float)(1.0 - (double)dampening);
  const int first = step[0] == 1;
  for (size_t i = 0; i < n; ++i) {
    const float d = fk__sgd_direction(g[i], p[i], weight_decay);
    out[i] = first ? d : buf[i] * momentum + take * d;
  }
}

/* p' = p - lr * d; out may alias p. */
FK_API void fk_sgd_update(const float* p, const float* g, const float* lr, size_t n, float weight_decay, float* out) {
  const float step = -lr[0];
  for (size_t i = 0; i < n; ++i) out[i] = p[i] + step * fk__sgd_direction(g[i], p[i], weight_decay);
}

/* p' = p - lr * (nesterov ? d + momentum * buf' : buf'); out may alias p. */
FK_API void fk_sgd_momentum_update(const float* p, const float* g, const float* buf, const float* lr, size_t n, float momentum, float weight_decay,
                                   int32_t nesterov, float* out) {
  const float step = -lr[0];
  for (size_t i = 0; i < n; ++i) {
    const float along = nesterov ? fk__sgd_direction(g[i], p[i], weight_decay) + momentum * buf[i] : buf[i];
    out[i] = p[i] + step * along;
  }
}

#if defined(__clang__)
#pragma float_control(pop)
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif

#endif /* FK_TRAIN_H */
