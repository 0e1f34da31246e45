/* fk_convert.h: bf16 <-> f32 and the embedding gather.
 * All paths are bitwise identical to the scalar reference (the conversions are exact integer ops). */
#ifndef FK_CONVERT_H
#define FK_CONVERT_H

#include "fk_cpu.h"

/* Elementwise kernels split work into blocks of this many elements (a multiple of every vector
 * width), so a SIMD tail only ever occurs at the very end, whatever the thread count. */
#define FK_ELT_BLOCK ((size_t)16384)

FK_API void fk_bf16_to_f32_scalar(const uint16_t* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = fk_bf16_to_f32_1(x[i]);
}
FK_API void fk_f32_to_bf16_scalar(const float* x, uint16_t* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = fk_f32_to_bf16_1(x[i]);
}

#if FK_X86
FK_TARGET_AVX512 FK_API void fk_bf16_to_f32_avx512(const uint16_t* x, float* y, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, fk__load_bf16x16(x + i));
  if (i < n) {
    const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, fk__maskload_bf16x16(x + i, m));
  }
}
FK_TARGET_AVX512 FK_API void fk_f32_to_bf16_avx512(const float* x, uint16_t* y, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm256_storeu_si256((__m256i*)(void*)(y + i), fk__to_bf16x16(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
    _mm256_mask_storeu_epi16(y + i, m, fk__to_bf16x16(_mm512_maskz_loadu_ps(m, x + i)));
  }
}
FK_TARGET_AVX2 FK_API void fk_bf16_to_f32_avx2(const uint16_t* x, float* y, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, fk__load_bf16x8(x + i));
  for (; i < n; ++i) y[i] = fk_bf16_to_f32_1(x[i]);
}
FK_TARGET_AVX2 FK_API void fk_f32_to_bf16_avx2(const float* x, uint16_t* y, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm_storeu_si128((__m128i*)(void*)(y + i), fk__to_bf16x8(_mm256_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] = fk_f32_to_bf16_1(x[i]);
}
#endif

/* One contiguous run, no threads: used by the other kernels on their rows. */
FK_API void fk__bf16_to_f32_run(const uint16_t* x, float* y, size_t n) {
  switch (fk_isa_active()) {
#if FK_X86
    case FK_ISA_AMX:
    case FK_ISA_AVX512BF16: fk_bf16_to_f32_avx512(x, y, n); return;
    case FK_ISA_AVX2: fk_bf16_to_f32_avx2(x, y, n); return;
#endif
    default: fk_bf16_to_f32_scalar(x, y, n); return;
  }
}
FK_API void fk__f32_to_bf16_run(const float* x, uint16_t* y, size_t n) {
  switch (fk_isa_active()) {
#if FK_X86
    case FK_ISA_AMX:
    case FK_ISA_AVX512BF16: fk_f32_to_bf16_avx512(x, y, n); return;
    case FK_ISA_AVX2: fk_f32_to_bf16_avx2(x, y, n); return;
#endif
    default: fk_f32_to_bf16_scalar(x, y, n); return;
  }
}

FK_API void fk_bf16_to_f32(const uint16_t* x, float* y, size_t n) {
  const size_t nb = (n + FK_ELT_BLOCK - 1) / FK_ELT_BLOCK;
  const int nt = fk__threads_for(nb, (double)FK_ELT_BLOCK);
  FK_PARALLEL_LOOP(nt, for (size_t b = 0; b < nb; ++b) {
    const size_t i = b * FK_ELT_BLOCK, len = n - i < FK_ELT_BLOCK ? n - i : FK_ELT_BLOCK;
    fk__bf16_to_f32_run(x + i, y + i, len);
  });
}

FK_API void fk_f32_to_bf16(const float* x, uint16_t* y, size_t n) {
  const size_t nb = (n + FK_ELT_BLOCK - 1) / FK_ELT_BLOCK;
  const int nt = fk__threads_for(nb, (double)FK_ELT_BLOCK);
  FK_PARALLEL_LOOP(nt, for (size_t b = 0; b < nb; ++b) {
    const size_t i = b * FK_ELT_BLOCK, len = n - i < FK_ELT_BLOCK ? n - i : FK_ELT_BLOCK;
    fk__f32_to_bf16_run(x + i, y + i, len);
  });
}

/* out[i, :] = table[ids[i], :] widened to f32. ids are trusted (the caller validated the vocab range). */
FK_API void fk_embed(const uint16_t* table, size_t dim, const int32_t* ids, size_t n, float* out) {
  const int nt = fk__threads_for(n, (double)dim);
  FK_PARALLEL_LOOP(nt, for (size_t i = 0; i < n; ++i) fk__bf16_to_f32_run(table + (size_t)ids[i] * dim, out + i * dim, dim););
}

#endif /* FK_CONVERT_H */
