/* fk_pointwise.h: the f32 elementwise math of graph files' ops, one path (plain C the compiler may
 * vectorize; these ops are not a decoder's hot path). Op codes: fk_pointwise_ops.h.
 *   fk_unary_value, fk_unary_f32    out[i] = op(x[i]): neg, exp, relu, sigmoid, silu, gelu (erf, exact)
 *   fk_binary_value, fk_binary_f32  out[i] = op(x[.], y[.]): sub, mul, div (f32 out) and gt, lt, ge,
 *                                   le, eq, ne (bool bytes out), with broadcasting as a span: element i
 *                                   of the result reads x[(i / x_inner) % x_extent] (likewise y), which
 *                                   covers an input of the result's shape (1, count), a scalar (1, 1),
 *                                   a row (1, N), a column (N, 1): any input whose non-1 dims are
 *                                   contiguous. Other broadcasts stay with the op's host function.
 *   fk_fill_f32                     out[0..count) = value
 *   fk_arange_f32                   out[i] = i */
#ifndef FK_POINTWISE_H
#define FK_POINTWISE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "fk_common.h"
#include "fk_pointwise_ops.h"

FK_API float fk_unary_value(int32_t op, float x) {
  switch (op) {
    case FK_NEG: return -x;
    case FK_EXP: return expf(x);
    case FK_RELU: return x > 0.0f || x != x ? x : 0.0f; /* NaN stays NaN, as in PyTorch */
    case FK_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case FK_SILU: return x / (1.0f + expf(-x));
    case FK_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    default: return NAN;
  }
}

FK_API void fk_unary_f32(const float* x, size_t count, int32_t op, float* out) {
  /* One loop per op, so the switch is not in the loop. */
#define FK__UNARY(CODE)                                                      \
  case CODE:                                                                 \
    for (size_t i = 0; i < count; ++i) out[i] = fk_unary_value(CODE, x[i]); \
    return;
  switch (op) {
    FK__UNARY(FK_NEG)
    FK__UNARY(FK_EXP)
    FK__UNARY(FK_RELU)
    FK__UNARY(FK_SIGMOID)
    FK__UNARY(FK_SILU)
    FK__UNARY(FK_GELU)
    default:
      for (size_t i = 0; i < count; ++i) out[i] = NAN;
  }
#undef FK__UNARY
}

FK_API float fk_binary_value(int32_t op, float x, float y) {
  switch (op) {
    case FK_SUB: return x - y;
    case FK_MUL: return x * y;
    case FK_DIV: return x / y;
    case FK_GT: return x > y;
    case FK_LT: return x < y;
    case FK_GE: return x >= y;
    case FK_LE: return x <= y;
    case FK_EQ: return x == y;
    case FK_NE: return x != y;
    default: return NAN;
  }
}

FK_API void fk_binary_f32(const float* x, size_t x_inner, size_t x_extent, const float* y, size_t y_inner, size_t y_extent, size_t count,
                          int32_t op, void* out) {
  float* values = (float*)out;
  uint8_t* flags = (uint8_t*)out;
  const int same = x_inner == 1 && x_extent == count && y_inner == 1 && y_extent == count;
#define FK__BINARY(CODE, OUT, TYPE)                                                                                     \
  case CODE:                                                                                                            \
    if (same)                                                                                                           \
      for (size_t i = 0; i < count; ++i) OUT[i] = (TYPE)fk_binary_value(CODE, x[i], y[i]);                              \
    else                                                                                                                \
      for (size_t i = 0; i < count; ++i)                                                                                \
        OUT[i] = (TYPE)fk_binary_value(CODE, x[(i / x_inner) % x_extent], y[(i / y_inner) % y_extent]);                  \
    return;
  switch (op) {
    FK__BINARY(FK_SUB, values, float)
    FK__BINARY(FK_MUL, values, float)
    FK__BINARY(FK_DIV, values, float)
    FK__BINARY(FK_GT, flags, uint8_t)
    FK__BINARY(FK_LT, flags, uint8_t)
    FK__BINARY(FK_GE, flags, uint8_t)
    FK__BINARY(FK_LE, flags, uint8_t)
    FK__BINARY(FK_EQ, flags, uint8_t)
    FK__BINARY(FK_NE, flags, uint8_t)
    default:
      for (size_t i = 0; i < count; ++i) values[i] = NAN;
  }
#undef FK__BINARY
}

FK_API void fk_fill_f32(size_t count, float value, float* out) {
  for (size_t i = 0; i < count; ++i) out[i] = value;
}

FK_API void fk_arange_f32(size_t count, float* out) {
  for (size_t i = 0; i < count; ++i) out[i] = (float)i;
}

#endif /* FK_POINTWISE_H */
