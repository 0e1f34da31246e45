/* fk_elementwise.h: RMSNorm, residual add, SwiGLU. f32 activations, bf16 norm weights. */
#ifndef FK_ELEMENTWISE_H
#define FK_ELEMENTWISE_H

#include "fk_convert.h"

/* ---- RMSNorm: out = x / sqrt(mean(x^2) + eps) * w  (Qwen2RMSNorm, computed in f32) ------------- */
FK_API void fk_rmsnorm_row_scalar(const float* x, const uint16_t* w, size_t dim, float eps, float* out) {
  float ss = 0.0f;
  for (size_t i = 0; i < dim; ++i) ss += x[i] * x[i];
  const float r = 1.0f / sqrtf(ss / (float)dim + eps);
  for (size_t i = 0; i < dim; ++i) out[i] = (x[i] * r) * fk_bf16_to_f32_1(w[i]);
}

#if FK_X86
FK_TARGET_AVX512 FK_API void fk_rmsnorm_row_avx512(const float* x, const uint16_t* w, size_t dim, float eps, float* out) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(); /* two chains hide the FMA latency */
  size_t i = 0;
  for (; i + 32 <= dim; i += 32) {
    const __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
    a0 = _mm512_fmadd_ps(v0, v0, a0);
    a1 = _mm512_fmadd_ps(v1, v1, a1);
  }
  for (; i < dim; i += 16) {
    const __mmask16 m = dim - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (dim - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    a0 = _mm512_fmadd_ps(v, v, a0);
  }
  const float ss = fk__hsum512(_mm512_add_ps(a0, a1));
  const __m512 r = _mm512_set1_ps(1.0f / sqrtf(ss / (float)dim + eps));
  /* whole vectors without a mask: on Zen 5 a masked load streams slower and gets no store forwarding */
  for (i = 0; i + 16 <= dim; i += 16) _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), r), fk__load_bf16x16(w + i)));
  if (i < dim) {
    const __mmask16 m = (__mmask16)((1u << (dim - i)) - 1);
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), r);
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(v, fk__maskload_bf16x16(w + i, m)));
  }
}
FK_TARGET_AVX2 FK_API void fk_rmsnorm_row_avx2(const float* x, const uint16_t* w, size_t dim, float eps, float* out) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= dim; i += 16) {
    const __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
    a0 = _mm256_fmadd_ps(v0, v0, a0);
    a1 = _mm256_fmadd_ps(v1, v1, a1);
  }
  for (; i + 8 <= dim; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    a0 = _mm256_fmadd_ps(v, v, a0);
  }
  float ss = fk__hsum256(_mm256_add_ps(a0, a1));
  for (; i < dim; ++i) ss = fmaf(x[i], x[i], ss);
  const float rs = 1.0f / sqrtf(ss / (float)dim + eps);
  const __m256 r = _mm256_set1_ps(rs);
  for (i = 0; i + 8 <= dim; i += 8)
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), r), fk__load_bf16x8(w + i)));
  for (; i < dim; ++i) out[i] = (x[i] * rs) * fk_bf16_to_f32_1(w[i]);
}
#endif

FK_API void fk__rmsnorm_row(fk_isa isa, const float* x, const uint16_t* w, size_t dim, float eps, float* out) {
  switch (isa) {
#if FK_X86
    case FK_ISA_AMX:
    case FK_ISA_AVX512BF16: fk_rmsnorm_row_avx512(x, w, dim, eps, out); return;
    case FK_ISA_AVX2: fk_rmsnorm_row_avx2(x, w, dim, eps, out); return;
#endif
    default: fk_rmsnorm_row_scalar(x, w, dim, eps, out); return;
  }
}

/* x[rows, dim] -> out[rows, dim]; out may alias x (each row is read fully before it is written). */
FK_API void fk_rmsnorm(const float* x, const uint16_t* w, size_t rows, size_t dim, float eps, float* out) {
  const fk_isa isa = fk_isa_active();
  const int nt = fk__threads_for(rows, (double)dim * 4);
  FK_PARALLEL_LOOP(nt, for (size_t r = 0; r < rows; ++r) fk__rmsnorm_row(isa, x + r * dim, w, dim, eps, out + r * dim););
}

/* Each head of x[rows, heads*head_dim] normalized on its own with one weight w[head_dim] (Qwen3's
 * q_norm / k_norm): the heads are contiguous rows of head_dim, so this is fk_rmsnorm over them. */
FK_API void fk_rmsnorm_heads(const float* x, const uint16_t* w, size_t rows, size_t heads, size_t head_dim, float eps, float* out) {
  fk_rmsnorm(x, w, rows * heads, head_dim, eps, out);
}

/* The last row of x[rows, cols] -> out[cols] (generation needs the last position only). */
FK_API void fk_copy_last_row(const float* x, size_t rows, size_t cols, float* out) {
  memmove(out, x + (rows - 1) * cols, cols * sizeof(float));
}

/* ---- residual add: out = a + b (out may alias a or b) ------------------------------------------ */
FK_API void fk_add_scalar(const float* a, const float* b, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
#if FK_X86
FK_TARGET_AVX512 FK_API void fk_add_avx512(const float* a, const float* b, size_t n, float* out) {
  size_t i = 0; /* whole vectors without a mask (see fk_rmsnorm_row_avx512) */
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, _mm512_add_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
  if (i < n) {
    const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(out + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
  }
}
FK_TARGET_AVX2 FK_API void fk_add_avx2(const float* a, const float* b, size_t n, float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  for (; i < n; ++i) out[i] = a[i] + b[i];
}
#endif

FK_API void fk__add_run(fk_isa isa, const float* a, const float* b, size_t n, float* out) {
  switch (isa) {
#if FK_X86
    case FK_ISA_AMX:
    case FK_ISA_AVX512BF16: fk_add_avx512(a, b, n, out); return;
    case FK_ISA_AVX2: fk_add_avx2(a, b, n, out); return;
#endif
    default: fk_add_scalar(a, b, n, out); return;
  }
}

FK_API void fk_add(const float* a, const float* b, size_t n, float* out) {
  const fk_isa isa = fk_isa_active();
  const size_t nb = (n + FK_ELT_BLOCK - 1) / FK_ELT_BLOCK;
  const int nt = fk__threads_for(nb, (double)FK_ELT_BLOCK);
  FK_PARALLEL_LOOP(nt, for (size_t blk = 0; blk < nb; ++blk) {
    const size_t i = blk * FK_ELT_BLOCK, len = n - i < FK_ELT_BLOCK ? n - i : FK_ELT_BLOCK;
    fk__add_run(isa, a + i, b + i, len, out + i);
  });
}

/* ---- SwiGLU: out = silu(gate) * up = gate / (1 + exp(-gate)) * up (out may alias gate or up) ---- */
FK_API void fk_swiglu_scalar(const float* g, const float* u, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}
#if FK_X86
FK_TARGET_AVX512 static inline FK_ALWAYS_INLINE __m512 fk__swiglu16(__m512 gv, __m512 uv) {
  const __m512 e = fk__exp512(_mm512_sub_ps(_mm512_setzero_ps(), gv));
  return _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), uv);
}
FK_TARGET_AVX512 FK_API void fk_swiglu_avx512(const float* g, const float* u, size_t n, float* out) {
  size_t i = 0; /* whole vectors without a mask (see fk_rmsnorm_row_avx512) */
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, fk__swiglu16(_mm512_loadu_ps(g + i), _mm512_loadu_ps(u + i)));
  if (i < n) {
    const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(out + i, m, fk__swiglu16(_mm512_maskz_loadu_ps(m, g + i), _mm512_maskz_loadu_ps(m, u + i)));
  }
}
FK_TARGET_AVX2 FK_API void fk_swiglu_avx2(const float* g, const float* u, size_t n, float* out) {
  const __m256 one = _mm256_set1_ps(1.0f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gv = _mm256_loadu_ps(g + i), uv = _mm256_loadu_ps(u + i);
    const __m256 e = fk__exp256(_mm256_sub_ps(_mm256_setzero_ps(), gv));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(one, e)), uv));
  }
  for (; i < n; ++i) out[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}
#endif

FK_API void fk__swiglu_run(fk_isa isa, const float* gate, const float* up, size_t n, float* out) {
  switch (isa) {
#if FK_X86
    case FK_ISA_AMX:
    case FK_ISA_AVX512BF16: fk_swiglu_avx512(gate, up, n, out); return;
    case FK_ISA_AVX2: fk_swiglu_avx2(gate, up, n, out); return;
#endif
    default: fk_swiglu_scalar(gate, up, n, out); return;
  }
}

FK_API void fk_swiglu(const float* gate, const float* up, size_t n, float* out) {
  const fk_isa isa = fk_isa_active();
  const size_t nb = (n + FK_ELT_BLOCK - 1) / FK_ELT_BLOCK;
  const int nt = fk__threads_for(nb, (double)FK_ELT_BLOCK * 8);
  FK_PARALLEL_LOOP(nt, for (size_t blk = 0; blk < nb; ++blk) {
    const size_t i = blk * FK_ELT_BLOCK, len = n - i < FK_ELT_BLOCK ? n - i : FK_ELT_BLOCK;
    fk__swiglu_run(isa, gate + i, up + i, len, out + i);
  });
}

#endif /* FK_ELEMENTWISE_H */
