// Ops that graph files use beyond the decoders' (docs/GRAPH_FORMAT.md): elementwise math with
// broadcasting, comparisons giving bool, where, matmul, softmax, layer_norm, reductions, reshape,
// transpose, concat, slice, and the creation steps full, zeros, arange. Each is an op_def like the
// others (shape rule, attributes by name), f32 in and out (bool for comparisons). The elementwise
// math, the creation steps and reshape are C kernels (kernels/fk_pointwise.h, fk_copy_bytes) that
// every executor runs, the C generator too; the rest, and a broadcast no span reads, are host
// kernels: C++ functions only the run-time executors call (runtime/execute.hpp).
//
// Broadcasting follows NumPy: shapes align at the last dim; two dims agree when equal (a symbol
// only with the same symbol) or when one is the constant 1, which stretches. No other op
// broadcasts implicitly.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include <fk_pointwise.h>

#include "common.hpp"

namespace fused::ops {

namespace host_detail {

constexpr inferred broadcast_shape(const shape& a, const shape& b, int culprit, dtype type) {
  const int rank = a.rank > b.rank ? a.rank : b.rank;
  shape r{};
  r.rank = rank;
  for (int i = 0; i < rank; ++i) {
    const int ia = a.rank - rank + i, ib = b.rank - rank + i;
    const dim da = ia >= 0 ? a.d[ia] : dim{1, 0}, db = ib >= 0 ? b.d[ib] : dim{1, 0};
    if (da == db || (db.symbol == 0 && db.n == 1)) r.d[i] = da;
    else if (da.symbol == 0 && da.n == 1) r.d[i] = db;
    else return mismatch(culprit, "shape " + shape_text(b) + " does not broadcast with " + shape_text(a) + " (dim " + dim_text(db) + " vs " + dim_text(da) + ")");
  }
  return result(type, r);
}

inline float bf16_value(std::uint16_t bits) {
  const std::uint32_t u = std::uint32_t{bits} << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float* out_f32(const host_args& a) { return reinterpret_cast<float*>(a.out.data); }
inline const float* in_f32(const host_args& a, int k) { return reinterpret_cast<const float*>(a.in[k].data); }

// The offset into input t of output element `index` under broadcasting.
inline std::int64_t broadcast_offset(const host_tensor& t, const host_tensor& out, std::int64_t index) {
  std::int64_t offset = 0, stride = 1;
  for (int i = out.rank - 1, j = t.rank - 1; i >= 0; --i, --j) {
    const std::int64_t coord = index % out.dims[i];
    index /= out.dims[i];
    if (j >= 0) {
      if (t.dims[j] != 1) offset += coord * stride;
      stride *= t.dims[j];
    }
  }
  return offset;
}

template <class F>
void binary(const host_args& a, F f) {
  const std::int64_t n = a.out.elements();
  const float *x = in_f32(a, 0), *y = in_f32(a, 1);
  if (a.in[0].elements() == n && a.in[1].elements() == n) {
    for (std::int64_t i = 0; i < n; ++i) f(i, x[i], y[i]);
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) f(i, x[broadcast_offset(a.in[0], a.out, i)], y[broadcast_offset(a.in[1], a.out, i)]);
}

constexpr inferred f32_unary(const tensor_info* const* in, int, const attrs&) {
  if (in[0]->type != dtype::f32) return mismatch(0, "must be f32, got " + describe(*in[0]));
  return result(dtype::f32, in[0]->shp);
}
constexpr inferred f32_binary(const tensor_info* const* in, int, const attrs&) {
  if (in[0]->type != dtype::f32) return mismatch(0, "must be f32, got " + describe(*in[0]));
  if (in[1]->type != dtype::f32) return mismatch(1, "must be f32, got " + describe(*in[1]));
  return broadcast_shape(in[0]->shp, in[1]->shp, 1, dtype::f32);
}
constexpr inferred comparison(const tensor_info* const* in, int n, const attrs& at) {
  inferred r = f32_binary(in, n, at);
  if (r.error.empty()) r.type = dtype::boolean;
  return r;
}

// Bounds products of constant dims in shape rules (graph files' dims go up to 2^31 each).
inline constexpr std::int64_t element_limit = std::int64_t{1} << 50;

// A non-negative axis of rank `rank` from an attribute that may count from the end (-1: last).
constexpr std::int64_t axis_of(std::int64_t axis, int rank) { return axis < 0 ? axis + rank : axis; }

inline constexpr attr_field axis_attributes[] = {{"axis", attr_slot::i0}};
inline constexpr attr_field reduce_attributes[] = {{"axis", attr_slot::i0}, {"keepdim", attr_slot::i1}};
inline constexpr attr_field eps_attributes[] = {{"eps", attr_slot::f}};
inline constexpr attr_field shape_attributes[] = {{"shape", attr_slot::ints}};
inline constexpr attr_field perm_attributes[] = {{"perm", attr_slot::ints}};
inline constexpr attr_field slice_attributes[] = {{"axis", attr_slot::i0}, {"start", attr_slot::i1}, {"end", attr_slot::i2}};

constexpr const char* host_kernel(const binding&, const tensor_info* const*, int, const tensor_info&) { return host_kernel_name; }
inline constexpr char unary_kernel[] = "fk_unary_f32", binary_kernel[] = "fk_binary_f32", fill_kernel[] = "fk_fill_f32",
                      arange_kernel[] = "fk_arange_f32", copy_kernel[] = "fk_copy_bytes";
// fk_binary_f32 when both inputs read as spans (core/shape.hpp's span_of), else the host function.
constexpr const char* binary_or_host(const binding& b, const tensor_info* const* in, int, const tensor_info& out) {
  return span_of(in[0]->shp, out.shp, b).ok && span_of(in[1]->shp, out.shp, b).ok ? binary_kernel : host_kernel_name;
}

// An op whose work is the C kernel `Kernel`, in any mode, out of place.
template <const char* Kernel>
constexpr op_def c_op(op_def d) {
  d.in_place_input = -1;
  d.mode_sensitive = false;
  d.kernel = kernel_named<Kernel>;
  return d;
}

// What every op here shares: its host function is its kernel, and it works out of place in any mode.
// (`chooser`: a kernel that picks a C kernel where one serves, the host function else.)
constexpr op_def host_op(op_def d, const char* (*chooser)(const binding&, const tensor_info* const*, int, const tensor_info&) = host_kernel) {
  d.in_place_input = -1;
  d.mode_sensitive = false;
  d.kernel = chooser;
  d.has_host = true;
  return d;
}

}  // namespace host_detail

#define FUSED_UNARY(NAME, CODE)                                                          \
  inline constexpr op_def NAME = host_detail::c_op<host_detail::unary_kernel>({.name = #NAME,      \
                                                                          .category = "elementwise", \
                                                                          .min_inputs = 1,   \
                                                                          .max_inputs = 1,   \
                                                                          .infer = host_detail::f32_unary, \
                                                                          .variant = CODE});

FUSED_UNARY(neg, FK_NEG)
FUSED_UNARY(exp, FK_EXP)
FUSED_UNARY(relu, FK_RELU)
FUSED_UNARY(sigmoid, FK_SIGMOID)
FUSED_UNARY(silu, FK_SILU)
FUSED_UNARY(gelu, FK_GELU)  // exact (erf), as torch's default
#undef FUSED_UNARY

// fk_binary_f32 where both inputs read as spans; the host function (same math, any broadcast) else.
#define FUSED_BINARY(NAME, RULE, TYPE, CODE)                                              \
  inline constexpr op_def NAME = host_detail::host_op({.name = #NAME,                         \
                                                       .category = "elementwise",             \
                                                       .min_inputs = 2,                       \
                                                       .max_inputs = 2,                       \
                                                       .infer = host_detail::RULE,            \
                                                       .host = [](const host_args& a) {       \
                                                         TYPE* out = reinterpret_cast<TYPE*>(a.out.data); \
                                                         host_detail::binary(a, [&](std::int64_t i, float x, float y) { out[i] = static_cast<TYPE>(fk_binary_value(CODE, x, y)); }); \
                                                       },                                     \
                                                       .variant = CODE}, host_detail::binary_or_host);

FUSED_BINARY(sub, f32_binary, float, FK_SUB)
FUSED_BINARY(mul, f32_binary, float, FK_MUL)
FUSED_BINARY(div, f32_binary, float, FK_DIV)
FUSED_BINARY(gt, comparison, std::uint8_t, FK_GT)
FUSED_BINARY(lt, comparison, std::uint8_t, FK_LT)
FUSED_BINARY(ge, comparison, std::uint8_t, FK_GE)
FUSED_BINARY(le, comparison, std::uint8_t, FK_LE)
FUSED_BINARY(eq, comparison, std::uint8_t, FK_EQ)
FUSED_BINARY(ne, comparison, std::uint8_t, FK_NE)
#undef FUSED_BINARY

// where(cond, a, b): a where cond else b; cond bool, a and b f32; all three broadcast.
inline constexpr op_def where = host_detail::host_op({
    .name = "where",
    .category = "elementwise",
    .min_inputs = 3,
    .max_inputs = 3,
    .infer = [](const tensor_info* const* in, int, const attrs&) -> inferred {
      if (in[0]->type != dtype::boolean) return mismatch(0, "the condition must be bool, got " + describe(*in[0]));
      if (in[1]->type != dtype::f32) return mismatch(1, "must be f32, got " + describe(*in[1]));
      if (in[2]->type != dtype::f32) return mismatch(2, "must be f32, got " + describe(*in[2]));
      const inferred ab = host_detail::broadcast_shape(in[1]->shp, in[2]->shp, 2, dtype::f32);
      if (!ab.error.empty()) return ab;
      return host_detail::broadcast_shape(ab.shp, in[0]->shp, 0, dtype::f32);
    },
    .host = [](const host_args& a) {
      const auto* cond = reinterpret_cast<const std::uint8_t*>(a.in[0].data);
      const float *x = host_detail::in_f32(a, 1), *y = host_detail::in_f32(a, 2);
      float* out = host_detail::out_f32(a);
      for (std::int64_t i = 0, n = a.out.elements(); i < n; ++i)
        out[i] = cond[host_detail::broadcast_offset(a.in[0], a.out, i)] ? x[host_detail::broadcast_offset(a.in[1], a.out, i)]
                                                                        : y[host_detail::broadcast_offset(a.in[2], a.out, i)];
    }});

// matmul: a f32 [M, K] times b f32 [K, N] -> [M, N] (b bf16 is `linear`'s business, as W^T).
inline constexpr op_def matmul = host_detail::host_op({
    .name = "matmul",
    .category = "matmul",
    .min_inputs = 2,
    .max_inputs = 2,
    .infer = [](const tensor_info* const* in, int, const attrs&) -> inferred {
      const auto &a = *in[0], &b = *in[1];
      if (a.type != dtype::f32 || a.shp.rank != 2) return mismatch(0, "must be f32 [M, K], got " + describe(a));
      if (b.type != dtype::f32 || b.shp.rank != 2) return mismatch(1, "must be f32 [K, N], got " + describe(b));
      if (!(a.shp[1] == b.shp[0])) return mismatch(1, describe(b) + " has " + dim_text(b.shp[0]) + " rows, but " + describe(a) + " has " + dim_text(a.shp[1]) + " columns");
      return result(dtype::f32, shape(a.shp[0], b.shp[1]));
    },
    .host = [](const host_args& a) {
      const std::int64_t M = a.in[0].dims[0], K = a.in[0].dims[1], N = a.in[1].dims[1];
      const float *x = host_detail::in_f32(a, 0), *w = host_detail::in_f32(a, 1);
      float* out = host_detail::out_f32(a);
      for (std::int64_t m = 0; m < M; ++m)
        for (std::int64_t n = 0; n < N; ++n) {
          float acc = 0;
          for (std::int64_t k = 0; k < K; ++k) acc += x[m * K + k] * w[k * N + n];
          out[m * N + n] = acc;
        }
    }});

namespace host_detail {
// Rows and columns of x seen as [rows, last dim].
inline std::int64_t last_dim(const host_tensor& t) { return t.rank ? t.dims[t.rank - 1] : 1; }
}  // namespace host_detail

// softmax over the last dim of f32 x (max subtracted first).
inline constexpr op_def softmax = host_detail::host_op({
    .name = "softmax",
    .category = "elementwise",
    .min_inputs = 1,
    .max_inputs = 1,
    .infer = host_detail::f32_unary,
    .host = [](const host_args& a) {
      const std::int64_t cols = host_detail::last_dim(a.in[0]), rows = a.out.elements() / cols;
      const float* in = host_detail::in_f32(a, 0);
      float* out = host_detail::out_f32(a);
      for (std::int64_t r = 0; r < rows; ++r) {
        const float* x = in + r * cols;
        float* y = out + r * cols;
        const float top = *std::max_element(x, x + cols);
        float sum = 0;
        for (std::int64_t c = 0; c < cols; ++c) sum += y[c] = std::exp(x[c] - top);
        for (std::int64_t c = 0; c < cols; ++c) y[c] /= sum;
      }
    }});

// layer_norm(x, weight, bias): over the last dim H of f32 x, weight and bias bf16 [H] (parameters
// are bf16, as the weight loader binds them); attrs eps.
inline constexpr op_def layer_norm = host_detail::host_op({
    .name = "layer_norm",
    .category = "norm",
    .min_inputs = 3,
    .max_inputs = 3,
    .infer = [](const tensor_info* const* in, int, const attrs& at) -> inferred {
      const auto& x = *in[0];
      if (x.type != dtype::f32 || x.shp.rank < 1) return mismatch(0, "must be f32 [..., H], got " + describe(x));
      for (int k = 1; k < 3; ++k)
        if (in[k]->type != dtype::bf16 || in[k]->shp.rank != 1 || !(in[k]->shp[0] == x.shp.back()))
          return mismatch(k, text(k == 1 ? "weight" : "bias") + " must be bf16 [" + dim_text(x.shp.back()) + "], got " + describe(*in[k]));
      if (!(at.f > 0)) return mismatch(-1, "eps must be positive");
      return result(dtype::f32, x.shp);
    },
    .host = [](const host_args& a) {
      const std::int64_t cols = host_detail::last_dim(a.in[0]), rows = a.out.elements() / cols;
      const float* in = host_detail::in_f32(a, 0);
      const auto* w = reinterpret_cast<const std::uint16_t*>(a.in[1].data);
      const auto* b = reinterpret_cast<const std::uint16_t*>(a.in[2].data);
      float* out = host_detail::out_f32(a);
      for (std::int64_t r = 0; r < rows; ++r) {
        const float* x = in + r * cols;
        double mean = 0, var = 0;
        for (std::int64_t c = 0; c < cols; ++c) mean += x[c];
        mean /= static_cast<double>(cols);
        for (std::int64_t c = 0; c < cols; ++c) var += (x[c] - mean) * (x[c] - mean);
        var /= static_cast<double>(cols);
        const double inv = 1.0 / std::sqrt(var + a.at->f);
        for (std::int64_t c = 0; c < cols; ++c)
          out[r * cols + c] = static_cast<float>((x[c] - mean) * inv) * host_detail::bf16_value(w[c]) + host_detail::bf16_value(b[c]);
      }
    },
    .attributes = host_detail::eps_attributes});

namespace host_detail {
constexpr inferred reduce_shape(const tensor_info* const* in, int, const attrs& at) {
  const auto& x = *in[0];
  if (x.type != dtype::f32 || x.shp.rank < 1) return mismatch(0, "must be f32 of rank 1 or more, got " + describe(x));
  const std::int64_t axis = axis_of(at.i[0], x.shp.rank);
  if (axis < 0 || axis >= x.shp.rank) return mismatch(-1, "axis " + to_text(at.i[0]) + " is outside a rank " + to_text(x.shp.rank) + " input");
  if (at.i[1] != 0 && at.i[1] != 1) return mismatch(-1, "keepdim must be 0 or 1");
  shape r{};
  for (int i = 0; i < x.shp.rank; ++i) {
    if (i == axis && !at.i[1]) continue;
    r.d[r.rank++] = i == axis ? dim{1, 0} : x.shp.d[i];
  }
  return result(dtype::f32, r);
}

// out[o, i] = fold of x[o, k, i] over k, for x seen as [outer, size of axis, inner].
template <class Fold>
void reduce(const host_args& a, float init, Fold fold, bool mean) {
  const host_tensor& x = a.in[0];
  const int axis = static_cast<int>(axis_of(a.at->i[0], x.rank));
  std::int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= x.dims[i];
  for (int i = axis + 1; i < x.rank; ++i) inner *= x.dims[i];
  const std::int64_t size = x.dims[axis];
  const float* in = in_f32(a, 0);
  float* out = out_f32(a);
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      float acc = init;
      for (std::int64_t k = 0; k < size; ++k) acc = fold(acc, in[(o * size + k) * inner + i]);
      out[o * inner + i] = mean ? acc / static_cast<float>(size) : acc;
    }
}
}  // namespace host_detail

// sum / mean / max over one axis (attrs axis, counted from the end when negative; keepdim 0 or 1);
// a NaN in a row makes its sum, mean and max NaN, as in PyTorch.
#define FUSED_HOST_REDUCE(NAME, INIT, FOLD, MEAN)                                          \
  inline constexpr op_def NAME = host_detail::host_op({.name = #NAME,                         \
                                                       .category = "elementwise",             \
                                                       .min_inputs = 1,                       \
                                                       .max_inputs = 1,                       \
                                                       .infer = host_detail::reduce_shape,    \
                                                       .host = [](const host_args& a) { host_detail::reduce(a, INIT, FOLD, MEAN); }, \
                                                       .attributes = host_detail::reduce_attributes});
FUSED_HOST_REDUCE(sum, 0.0f, [](float acc, float x) { return acc + x; }, false)
FUSED_HOST_REDUCE(mean, 0.0f, [](float acc, float x) { return acc + x; }, true)
// A NaN wins and stays, as torch.amax propagates it.
FUSED_HOST_REDUCE(max, -std::numeric_limits<float>::infinity(), [](float acc, float x) { return x > acc || x != x ? x : acc; }, false)
#undef FUSED_HOST_REDUCE

// reshape to attrs shape (a list: 0 keeps the input's dim at that position, one -1 is inferred),
// as ONNX's Reshape; the elements keep their order.
inline constexpr op_def reshape = host_detail::c_op<host_detail::copy_kernel>({
    .name = "reshape",
    .category = "memory",
    .min_inputs = 1,
    .max_inputs = 1,
    .infer = [](const tensor_info* const* in, int, const attrs& at) -> inferred {
      const auto& x = *in[0];
      shape r{};
      int infer_at = -1;
      std::int64_t known = 1;
      std::uint8_t symbol = 0;
      for (int i = 0; i < max_rank && at.i[i] != no_value; ++i) {
        const std::int64_t v = at.i[i];
        dim d{v, 0};
        if (v == 0) {
          if (i >= x.shp.rank) return mismatch(-1, "shape entry " + to_text(i) + " is 0 (keep), but the input has rank " + to_text(x.shp.rank));
          d = x.shp.d[i];
        } else if (v == -1) {
          if (infer_at >= 0) return mismatch(-1, "at most one shape entry may be -1");
          infer_at = i;
        } else if (v < 0) {
          return mismatch(-1, "shape entry " + to_text(v) + " must be positive, 0 (keep) or -1 (infer)");
        }
        r.d[r.rank++] = d;
        if (v != -1) {
          if (d.symbol) {
            if (symbol && symbol != d.symbol) return mismatch(-1, "the result may hold one symbol");
            symbol = d.symbol;
          }
          if (d.n > host_detail::element_limit / known) return mismatch(-1, "the shape holds more than 2^50 elements");
          known *= d.n;
        }
      }
      // Elements of the input: n * symbol^k; a reshape keeps the symbol's power at 1 (or 0).
      std::int64_t total = 1;
      std::uint8_t in_symbol = 0;
      for (int i = 0; i < x.shp.rank; ++i) {
        if (x.shp.d[i].symbol) {
          if (in_symbol) return mismatch(0, "the input " + describe(x) + " has more than one symbolic dim");
          in_symbol = x.shp.d[i].symbol;
        }
        if (x.shp.d[i].n > host_detail::element_limit / total) return mismatch(0, "the input " + describe(x) + " holds more than 2^50 elements");
        total *= x.shp.d[i].n;
      }
      if (infer_at >= 0) {
        if (known == 0 || total % known) return mismatch(-1, "the input's " + to_text(total) + " elements do not divide into the shape");
        r.d[infer_at] = dim{total / known, in_symbol != symbol ? in_symbol : std::uint8_t{0}};
      } else if (known != total || in_symbol != symbol) {
        return mismatch(-1, "the shape " + shape_text(r) + " does not hold the input " + describe(x));
      }
      return result(x.type, r);
    },
    .attributes = host_detail::shape_attributes});

// transpose by attrs perm (a permutation of 0..rank-1): out dim i is input dim perm[i].
inline constexpr op_def transpose = host_detail::host_op({
    .name = "transpose",
    .category = "memory",
    .min_inputs = 1,
    .max_inputs = 1,
    .infer = [](const tensor_info* const* in, int, const attrs& at) -> inferred {
      const auto& x = *in[0];
      shape r{};
      bool seen[max_rank]{};
      for (int i = 0; i < max_rank && at.i[i] != no_value; ++i) {
        const std::int64_t p = at.i[i];
        if (p < 0 || p >= x.shp.rank || seen[p]) return mismatch(-1, "perm is not a permutation of the input's " + to_text(x.shp.rank) + " dims");
        seen[p] = true;
        r.d[r.rank++] = x.shp.d[p];
      }
      if (r.rank != x.shp.rank) return mismatch(-1, "perm names " + to_text(r.rank) + " dims; the input has " + to_text(x.shp.rank));
      return result(x.type, r);
    },
    .host = [](const host_args& a) {
      const host_tensor& x = a.in[0];
      const std::int64_t size = size_of(x.type);
      std::int64_t in_stride[max_rank]{};
      for (int i = x.rank - 1, s = 1; i >= 0; --i) in_stride[i] = s, s *= static_cast<int>(x.dims[i]);
      for (std::int64_t i = 0, n = a.out.elements(); i < n; ++i) {
        std::int64_t rest = i, from = 0;
        for (int d = a.out.rank - 1; d >= 0; --d) {
          from += (rest % a.out.dims[d]) * in_stride[a.at->i[d]];
          rest /= a.out.dims[d];
        }
        std::memcpy(a.out.data + i * size, x.data + from * size, static_cast<std::size_t>(size));
      }
    },
    .attributes = host_detail::perm_attributes});

// concat of 2..4 inputs of one dtype along attrs axis; the other dims agree.
inline constexpr op_def concat = host_detail::host_op({
    .name = "concat",
    .category = "memory",
    .min_inputs = 2,
    .max_inputs = 4,
    .infer = [](const tensor_info* const* in, int n, const attrs& at) -> inferred {
      const auto& x = *in[0];
      const std::int64_t axis = host_detail::axis_of(at.i[0], x.shp.rank);
      if (axis < 0 || axis >= x.shp.rank) return mismatch(-1, "axis " + to_text(at.i[0]) + " is outside a rank " + to_text(x.shp.rank) + " input");
      shape r = x.shp;
      for (int k = 1; k < n; ++k) {
        const auto& y = *in[k];
        bool same = y.type == x.type && y.shp.rank == x.shp.rank;
        for (int i = 0; same && i < x.shp.rank; ++i) same = i == axis || y.shp.d[i] == x.shp.d[i];
        if (!same || !(y.shp.d[axis].symbol == r.d[axis].symbol)) return mismatch(k, describe(y) + " does not concatenate with " + describe(x) + " along axis " + to_text(axis));
        r.d[axis].n += y.shp.d[axis].n;
      }
      return result(x.type, r);
    },
    .host = [](const host_args& a) {
      const int axis = static_cast<int>(host_detail::axis_of(a.at->i[0], a.out.rank));
      std::int64_t outer = 1, inner = size_of(a.out.type);
      for (int i = 0; i < axis; ++i) outer *= a.out.dims[i];
      for (int i = axis + 1; i < a.out.rank; ++i) inner *= a.out.dims[i];
      std::byte* out = a.out.data;
      for (std::int64_t o = 0; o < outer; ++o)
        for (int k = 0; k < a.n_in; ++k) {
          const std::int64_t bytes = a.in[k].dims[axis] * inner;
          std::memcpy(out, a.in[k].data + o * bytes, static_cast<std::size_t>(bytes));
          out += bytes;
        }
    },
    .attributes = host_detail::axis_attributes});

// slice of attrs axis, positions [start, end) (constants; the axis must have a constant size).
inline constexpr op_def slice = host_detail::host_op({
    .name = "slice",
    .category = "memory",
    .min_inputs = 1,
    .max_inputs = 1,
    .infer = [](const tensor_info* const* in, int, const attrs& at) -> inferred {
      const auto& x = *in[0];
      const std::int64_t axis = host_detail::axis_of(at.i[0], x.shp.rank);
      if (axis < 0 || axis >= x.shp.rank) return mismatch(-1, "axis " + to_text(at.i[0]) + " is outside a rank " + to_text(x.shp.rank) + " input");
      const dim d = x.shp.d[axis];
      if (d.symbol) return mismatch(0, "axis " + to_text(axis) + " of " + describe(x) + " is symbolic; slice a constant one");
      if (at.i[1] < 0 || at.i[2] <= at.i[1] || at.i[2] > d.n)
        return mismatch(-1, "[start, end) = [" + to_text(at.i[1]) + ", " + to_text(at.i[2]) + ") must be a non-empty range within " + to_text(d.n));
      shape r = x.shp;
      r.d[axis] = dim{at.i[2] - at.i[1], 0};
      return result(x.type, r);
    },
    .host = [](const host_args& a) {
      const host_tensor& x = a.in[0];
      const int axis = static_cast<int>(host_detail::axis_of(a.at->i[0], x.rank));
      std::int64_t outer = 1, inner = size_of(x.type);
      for (int i = 0; i < axis; ++i) outer *= x.dims[i];
      for (int i = axis + 1; i < x.rank; ++i) inner *= x.dims[i];
      const std::int64_t take = (a.at->i[2] - a.at->i[1]) * inner;
      for (std::int64_t o = 0; o < outer; ++o)
        std::memcpy(a.out.data + o * take, x.data + (o * x.dims[axis] + a.at->i[1]) * inner, static_cast<std::size_t>(take));
    },
    .attributes = host_detail::slice_attributes});

// Creation steps (graph files' constants): full(value, shape), zeros(shape), arange(end) -> f32
// [end] = 0, 1, ..., end-1. Shapes are constant lists of positive dims.
namespace host_detail {
constexpr inferred constant_shape(const attrs& at) {
  shape r{};
  for (int i = 0; i < max_rank && at.i[i] != no_value; ++i) {
    if (at.i[i] < 1) return mismatch(-1, "shape entry " + to_text(at.i[i]) + " must be positive");
    r.d[r.rank++] = dim{at.i[i], 0};
  }
  return result(dtype::f32, r);
}
inline constexpr attr_field full_attributes[] = {{"value", attr_slot::f}, {"shape", attr_slot::ints}};
inline constexpr attr_field arange_attributes[] = {{"end", attr_slot::i0}};
}  // namespace host_detail

inline constexpr op_def full = host_detail::c_op<host_detail::fill_kernel>({
    .name = "full",
    .category = "memory",
    .min_inputs = 0,
    .max_inputs = 0,
    .infer = [](const tensor_info* const*, int, const attrs& at) -> inferred {
      if (!(at.f >= -std::numeric_limits<float>::max() && at.f <= std::numeric_limits<float>::max()))
        return mismatch(-1, "value is outside f32's range");
      return host_detail::constant_shape(at);
    },
    .attributes = host_detail::full_attributes});

inline constexpr op_def zeros = host_detail::c_op<host_detail::fill_kernel>({
    .name = "zeros",
    .category = "memory",
    .min_inputs = 0,
    .max_inputs = 0,
    .infer = [](const tensor_info* const*, int, const attrs& at) { return host_detail::constant_shape(at); },
    .attributes = host_detail::shape_attributes});

inline constexpr op_def arange = host_detail::c_op<host_detail::arange_kernel>({
    .name = "arange",
    .category = "memory",
    .min_inputs = 0,
    .max_inputs = 0,
    .infer = [](const tensor_info* const*, int, const attrs& at) -> inferred {
      if (at.i[0] < 1) return mismatch(-1, "end must be positive");
      return result(dtype::f32, shape(at.i[0]));
    },
    .attributes = host_detail::arange_attributes});

}  // namespace fused::ops
