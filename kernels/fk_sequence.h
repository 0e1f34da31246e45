/* fk_sequence.h: what a generation loop runs beside the model (token ids and positions, i32), and
 * control flow's byte moves. Plain C, one path: each touches a handful of values.
 *   fk_argmax_rows    out[r] = fk_argmax of row r (first largest, NaN never wins)
 *   fk_not_in         out[i] = x[i] is none of v0..v3 (a negative v is no value), as a bool byte
 *   fk_store_at       buf[*index] = *value; -1 (nothing written) when *index is outside [0, n)
 *   fk_increment_i32  out[i] = x[i] + by; -1 (nothing written) when one would leave i32
 *   fk_next_position  *out = pos0 + rows: the position after a call's rows
 *   fk_fill_i32       out[0..count) = value
 *   fk_copy_bytes     out = in (they may overlap)
 *   fk_select_bytes   out = *cond ? a : b (out may be a or b) */
#ifndef FK_SEQUENCE_H
#define FK_SEQUENCE_H

#include <string.h>

#include "fk_sample.h"

FK_API void fk_argmax_rows(const float* x, size_t rows, size_t n, int32_t* out) {
  for (size_t r = 0; r < rows; ++r) out[r] = (int32_t)fk_argmax(x + r * n, n);
}

FK_API void fk_not_in(const int32_t* x, size_t count, int32_t v0, int32_t v1, int32_t v2, int32_t v3, uint8_t* out) {
  for (size_t i = 0; i < count; ++i) {
    const int32_t t = x[i];
    out[i] = !((v0 >= 0 && t == v0) || (v1 >= 0 && t == v1) || (v2 >= 0 && t == v2) || (v3 >= 0 && t == v3));
  }
}

FK_API int fk_store_at(int32_t* buf, size_t n, const int32_t* value, const int32_t* index) {
  if (*index < 0 || (size_t)*index >= n) return -1;
  buf[*index] = *value;
  return 0;
}

FK_API int fk_increment_i32(const int32_t* x, size_t count, int32_t by, int32_t* out) {
  for (size_t i = 0; i < count; ++i)
    if ((int64_t)x[i] + by > INT32_MAX || (int64_t)x[i] + by < INT32_MIN) return -1;
  for (size_t i = 0; i < count; ++i) out[i] = x[i] + by;
  return 0;
}

FK_API void fk_next_position(size_t rows, size_t pos0, int32_t* out) { *out = (int32_t)(pos0 + rows); }

FK_API void fk_fill_i32(size_t count, int32_t value, int32_t* out) {
  for (size_t i = 0; i < count; ++i) out[i] = value;
}

FK_API void fk_copy_bytes(const void* in, size_t bytes, void* out) {
  if (in != out) memmove(out, in, bytes);
}

FK_API void fk_select_bytes(const uint8_t* cond, const void* a, const void* b, size_t bytes, void* out) {
  const void* from = *cond ? a : b;
  if (from != out) memmove(out, from, bytes);
}

#endif /* FK_SEQUENCE_H */
