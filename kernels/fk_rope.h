/* fk_rope.h: rotary position embedding, Qwen2 / Llama "rotate half" convention.
 * For each head, the pairs (i, i + hd/2), i < hd/2, are rotated by angle = pos * inv_freq[i] with
 * inv_freq[i] = 1 / theta^(2i/hd). Row s sits at position pos0 + s, or, given a period (sequences of
 * `period` rows packed one after another, as a training batch is), at pos0 + s % period. Angles are computed exactly as transformers does in f32
 * (inv_freq rounded to f32, pos * inv_freq rounded to f32, cos/sin of that), so positions in the
 * thousands match Hugging Face rather than an exact-angle ideal. cos/sin come from libm (same on every
 * path); only the rotation is vectorized. The SIMD paths write the rotation with explicit FMAs: plain
 * mul/sub would be contracted by gcc in C++ (gnu++20: -ffp-contract=fast) but not in ISO C, and the C
 * and C++ builds must compute the same bits. */
#ifndef FK_ROPE_H
#define FK_ROPE_H

#include "fk_cpu.h"

FK_API void fk__rope_rot_scalar(float* x, const float* c, const float* s, size_t half) {
  for (size_t i = 0; i < half; ++i) {
    const float x1 = x[i], x2 = x[i + half];
    x[i] = x1 * c[i] - x2 * s[i];
    x[i + half] = x2 * c[i] + x1 * s[i];
  }
}
#if FK_X86
FK_TARGET_AVX512 FK_API void fk__rope_rot_avx512(float* x, const float* c, const float* s, size_t half) {
  size_t i = 0; /* whole vectors without a mask (see fk_rmsnorm_row_avx512) */
  for (; i + 16 <= half; i += 16) {
    const __m512 x1 = _mm512_loadu_ps(x + i), x2 = _mm512_loadu_ps(x + i + half);
    const __m512 cv = _mm512_loadu_ps(c + i), sv = _mm512_loadu_ps(s + i);
    _mm512_storeu_ps(x + i, _mm512_fmsub_ps(x1, cv, _mm512_mul_ps(x2, sv)));
    _mm512_storeu_ps(x + i + half, _mm512_fmadd_ps(x2, cv, _mm512_mul_ps(x1, sv)));
  }
  if (i < half) {
    const __mmask16 m = (__mmask16)((1u << (half - i)) - 1);
    const __m512 x1 = _mm512_maskz_loadu_ps(m, x + i), x2 = _mm512_maskz_loadu_ps(m, x + i + half);
    const __m512 cv = _mm512_maskz_loadu_ps(m, c + i), sv = _mm512_maskz_loadu_ps(m, s + i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_fmsub_ps(x1, cv, _mm512_mul_ps(x2, sv)));
    _mm512_mask_storeu_ps(x + i + half, m, _mm512_fmadd_ps(x2, cv, _mm512_mul_ps(x1, sv)));
  }
}
FK_TARGET_AVX2 FK_API void fk__rope_rot_avx2(float* x, const float* c, const float* s, size_t half) {
  size_t i = 0;
  for (; i + 8 <= half; i += 8) {
    const __m256 x1 = _mm256_loadu_ps(x + i), x2 = _mm256_loadu_ps(x + i + half);
    const __m256 cv = _mm256_loadu_ps(c + i), sv = _mm256_loadu_ps(s + i);
    _mm256_storeu_ps(x + i, _mm256_fmsub_ps(x1, cv, _mm256_mul_ps(x2, sv)));
    _mm256_storeu_ps(x + i + half, _mm256_fmadd_ps(x2, cv, _mm256_mul_ps(x1, sv)));
  }
  for (; i < half; ++i) { /* same fused form as the vector body */
    const float x1 = x[i], x2 = x[i + half];
    x[i] = fmaf(x1, c[i], -(x2 * s[i]));
    x[i + half] = fmaf(x2, c[i], x1 * s[i]);
  }
}
#endif

/* The same f32 inv_freq transformers computes: 1 / theta ** (arange(0, hd, 2) / hd), all in f32. */
FK_API float fk_rope_inv_freq(size_t i, size_t head_dim, float theta) {
  return 1.0f / powf(theta, (float)(2 * i) / (float)head_dim);
}

FK_API void fk__rope_rot(fk_isa isa, float* x, const float* c, const float* s, size_t half) {
  switch (isa) {
#if FK_X86
    case FK_ISA_AMX:
    case FK_ISA_AVX512BF16: fk__rope_rot_avx512(x, c, s, half); return;
    case FK_ISA_AVX2: fk__rope_rot_avx2(x, c, s, half); return;
#endif
    default: fk__rope_rot_scalar(x, c, s, half); return;
  }
}

/* The rotation of rows by the angles pos * inv_freq[i], i < head_dim/2; `direction` -1 rotates back
 * by the same angles (the transpose: a gradient's way through the rotation). */
FK_API void fk__rope_apply(float* x, size_t S, size_t heads, size_t head_dim, size_t pos0, size_t period, const float* inv_freq,
                           float direction) {
  const fk_isa isa = fk_isa_active();
  const size_t half = head_dim / 2;
  assert(head_dim <= FK_MAX_HEAD_DIM && head_dim % 2 == 0);
  const int nt = fk__threads_for(S, (double)(heads * head_dim * 4 + half * 40));
  FK_PARALLEL_LOOP(nt, for (size_t s = 0; s < S; ++s) {
    float c[FK_MAX_HEAD_DIM / 2], sn[FK_MAX_HEAD_DIM / 2];
    const float pos = (float)(pos0 + (period ? s % period : s));
    for (size_t i = 0; i < half; ++i) {
      const float a = pos * inv_freq[i];
      c[i] = cosf(a);
      sn[i] = direction * sinf(a);
    }
    for (size_t h = 0; h < heads; ++h) fk__rope_rot(isa, x + s * heads * head_dim + h * head_dim, c, sn, half);
  });
}

/* x[S, heads*hd] in place; row s is at position pos0 + s (period 0) or pos0 + s % period. hd must be
 * even and <= FK_MAX_HEAD_DIM. */
FK_API void fk_rope(float* x, size_t S, size_t heads, size_t head_dim, size_t pos0, size_t period, float theta) {
  float inv_freq[FK_MAX_HEAD_DIM / 2];
  assert(head_dim <= FK_MAX_HEAD_DIM && head_dim % 2 == 0);
  for (size_t i = 0; i < head_dim / 2; ++i) inv_freq[i] = fk_rope_inv_freq(i, head_dim, theta);
  fk__rope_apply(x, S, heads, head_dim, pos0, period, inv_freq, 1.0f);
}

/* fk_rope's vector-Jacobian product: dy[S, heads*hd] rotated back in place. */
FK_API void fk_rope_backward(float* dy, size_t S, size_t heads, size_t head_dim, size_t pos0, size_t period, float theta) {
  float inv_freq[FK_MAX_HEAD_DIM / 2];
  assert(head_dim <= FK_MAX_HEAD_DIM && head_dim % 2 == 0);
  for (size_t i = 0; i < head_dim / 2; ++i) inv_freq[i] = fk_rope_inv_freq(i, head_dim, theta);
  fk__rope_apply(dy, S, heads, head_dim, pos0, period, inv_freq, -1.0f);
}

/* Llama 3.1's frequencies (transformers' _compute_llama3_parameters, step by step in f32 as torch
 * does it, the Python scalars rounded to f32 where they meet an f32 tensor): a wavelength longer
 * than original_max / low_freq_factor is slowed by `factor`, one shorter than original_max /
 * high_freq_factor is kept, and the band between is a smooth mix of the two. */
FK_API float fk_rope_llama3_inv_freq(size_t i, size_t head_dim, float theta, float factor, float low_freq_factor,
                                     float high_freq_factor, float original_max) {
  const float inv = fk_rope_inv_freq(i, head_dim, theta);
  const float wavelen = (float)(2.0 * 3.141592653589793) / inv;
  const float low_freq_wavelen = (float)((double)original_max / (double)low_freq_factor);
  const float high_freq_wavelen = (float)((double)original_max / (double)high_freq_factor);
  if (wavelen > low_freq_wavelen) return inv / factor;
  if (wavelen < high_freq_wavelen) return inv;
  const float smooth = (original_max / wavelen - low_freq_factor) / (float)((double)high_freq_factor - (double)low_freq_factor);
  return (1.0f - smooth) * inv / factor + smooth * inv;
}

FK_API void fk__rope_llama3_apply(float* x, size_t S, size_t heads, size_t head_dim, size_t pos0, size_t period, float theta, float factor,
                                  float low_freq_factor, float high_freq_factor, size_t original_max, float direction) {
  float inv_freq[FK_MAX_HEAD_DIM / 2];
  assert(head_dim <= FK_MAX_HEAD_DIM && head_dim % 2 == 0);
  for (size_t i = 0; i < head_dim / 2; ++i)
    inv_freq[i] = fk_rope_llama3_inv_freq(i, head_dim, theta, factor, low_freq_factor, high_freq_factor, (float)original_max);
  fk__rope_apply(x, S, heads, head_dim, pos0, period, inv_freq, direction);
}

FK_API void fk_rope_llama3(float* x, size_t S, size_t heads, size_t head_dim, size_t pos0, size_t period, float theta, float factor,
                           float low_freq_factor, float high_freq_factor, size_t original_max) {
  fk__rope_llama3_apply(x, S, heads, head_dim, pos0, period, theta, factor, low_freq_factor, high_freq_factor, original_max, 1.0f);
}

/* fk_rope_llama3's vector-Jacobian product, in place. */
FK_API void fk_rope_llama3_backward(float* dy, size_t S, size_t heads, size_t head_dim, size_t pos0, size_t period, float theta, float factor,
                                    float low_freq_factor, float high_freq_factor, size_t original_max) {
  fk__rope_llama3_apply(dy, S, heads, head_dim, pos0, period, theta, factor, low_freq_factor, high_freq_factor, original_max, -1.0f);
}

#endif /* FK_ROPE_H */
