/* fk_kernels.h: every fused kernel (C11 / C++20). Each header documents its contract and its paths.
 *
 * The API (bf16 = uint16_t raw bits; activations f32; no heap allocation anywhere):
 *   fk_cpu.h        fk_isa, fk_isa_detect, fk_isa_active, fk_isa_force, fk_isa_name,
 *                   fk_set_threads, fk_get_threads          (env FUSED_ISA, FUSED_THREADS; FK_PIN_ISA)
 *   fk_convert.h    fk_bf16_to_f32, fk_f32_to_bf16 (RNE, NaN stays NaN), fk_embed,
 *                   fk_bf16_to_f32_1, fk_f32_to_bf16_1       (one value; the scalar reference)
 *   fk_elementwise.h fk_rmsnorm (out may == x), fk_rmsnorm_heads (per head, one weight), fk_add (out may == a),
 *                   fk_swiglu (out may == gate), fk_copy_last_row
 *   fk_linear.h     fk_gemv_bf16 (M == 1), fk_gemm_bf16       y = x W^T (+ bias), W [N,K] as HF stores it;
 *                   fk_gemm_bf16_work_bytes                  its optional workspace (x rounded to bf16 once)
 *                   fk_gemm_bf16_rows                        the arithmetic a row of an M-row call gets
 *   fk_rope.h       fk_rope (rotate-half, pos0 offset), fk_rope_inv_freq (the f32 inverse frequency),
 *                   fk_rope_llama3, fk_rope_llama3_inv_freq  (transformers' rope_type "llama3")
 *   fk_attention.h  fk_k_store, fk_kv_store, fk_attention_prefill, fk_attention_decode   (caches: n_kv x cap x hd bf16 in key blocks, fk_k_index / fk_kv_index)
 *   fk_sample.h     fk_argmax, fk_rng, fk_rng_seed, fk_rng_next, fk_rng_uniform, fk_sample, fk_sample_with, fk_repeat_penalty
 *   fk_sequence.h   fk_argmax_rows, fk_not_in, fk_store_at, fk_increment_i32, fk_next_position, fk_fill_i32,
 *                   fk_copy_bytes, fk_select_bytes           (a generation loop's ids and positions; control flow)
 *   fk_pointwise.h  fk_unary_f32, fk_binary_f32 (broadcast as spans), fk_fill_f32, fk_arange_f32,
 *                   fk_unary_value, fk_binary_value          (graph files' f32 math; codes: fk_pointwise_ops.h)
 * Per-path entry points (name_scalar / name_avx2 / name_avx512) are callable too, e.g. to pin one
 * kernel; names with a double underscore (fk__*) are internal.
 * The comments say why a kernel is built as it is; the measurements that decided it are in
 * docs/history/PERFORMANCE-2026-12.md ("Measurements behind the kernels' comments").
 * Limits: head_dim <= FK_MAX_HEAD_DIM (128) for RoPE and attention, even for RoPE; n_heads % n_kv == 0. */
#ifndef FK_KERNELS_H
#define FK_KERNELS_H

#include "fk_cpu.h"
#include "fk_convert.h"
#include "fk_elementwise.h"
#include "fk_linear.h"
#include "fk_rope.h"
#include "fk_attention.h"
#include "fk_sample.h"
#include "fk_sequence.h"
#include "fk_pointwise.h"
#include "fk_train.h"

#endif /* FK_KERNELS_H */
