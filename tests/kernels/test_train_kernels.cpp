// The train step's kernels (kernels/fk_train.h, fk_rope_backward): each forward kernel against a
// double-precision reference, each backward kernel against central finite differences of that
// reference (d/dx of sum(dy * f(x)), in double), and every result bitwise equal on 1 and 2 threads.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <vector>

#include "fk_kernels.h"
#include "kernel_test_util.hpp"

namespace {

using vec = std::vector<float>;
using dvec = std::vector<double>;

vec random_vec(std::size_t n, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  vec v(n);
  for (float& x : v) x = u(g);
  return v;
}

dvec widen(const vec& v) { return dvec(v.begin(), v.end()); }

// d/dx_i of sum(dy * f(x)) for every i, by central differences of the double function f.
dvec numeric_grad(const std::function<dvec(const dvec&)>& f, dvec x, const vec& dy) {
  dvec g(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double h = 1e-6 * std::max(1.0, std::fabs(x[i])), keep = x[i];
    x[i] = keep + h;
    const dvec up = f(x);
    x[i] = keep - h;
    const dvec down = f(x);
    x[i] = keep;
    double s = 0;
    for (std::size_t j = 0; j < up.size(); ++j) s += static_cast<double>(dy[j]) * (up[j] - down[j]);
    g[i] = s / (2 * h);
  }
  return g;
}

// max |got - want| relative to max |want|
double rel_err(const vec& got, const dvec& want) {
  REQUIRE(got.size() == want.size());
  double d = 0, m = 1e-30;
  for (std::size_t i = 0; i < got.size(); ++i) {
    d = std::max(d, std::fabs(static_cast<double>(got[i]) - want[i]));
    m = std::max(m, std::fabs(want[i]));
  }
  return d / m;
}

// Runs `body` on 1 and 2 threads: the outputs it returns must be bitwise equal.
void same_on_1_and_2_threads(const std::function<vec()>& body) {
  fkt::threads_guard guard;
  fkt::forks_on_any_work fork;
  fk_set_threads(1);
  const vec one = body();
  fk_set_threads(2);
  const vec two = body();
  CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)) == 0);
}

// A training step's three GEMMs on the active path, side by side: y = x W^T + b [T, N], dX = dY W
// [T, K], dW = dY^T X [N, K].
vec three_gemms(const vec& x, const vec& w, const vec& b, const vec& dy, std::size_t T, std::size_t K, std::size_t N) {
  vec out(T * N + T * K + N * K);
  fk_linear_f32(x.data(), T, K, w.data(), N, b.empty() ? nullptr : b.data(), out.data());
  fk_linear_backward_input(dy.data(), T, N, w.data(), K, out.data() + T * N);
  fk_linear_backward_weight(dy.data(), T, N, x.data(), K, out.data() + T * N + T * K);
  return out;
}

// ---- double references of the forward kernels ----
dvec linear_ref(const dvec& x, const dvec& w, const dvec& b, std::size_t rows, std::size_t in, std::size_t out) {
  dvec y(rows * out);
  for (std::size_t t = 0; t < rows; ++t)
    for (std::size_t n = 0; n < out; ++n) {
      double s = b.empty() ? 0 : b[n];
      for (std::size_t k = 0; k < in; ++k) s += x[t * in + k] * w[n * in + k];
      y[t * out + n] = s;
    }
  return y;
}
// The gradients of y = x w^T + b for the output gradient dy, by the chain rule in double.
struct linear_grads {
  dvec dx, dw, db;
};
linear_grads linear_grads_ref(const dvec& x, const dvec& w, const vec& dy, std::size_t rows, std::size_t in, std::size_t out) {
  linear_grads g{dvec(rows * in, 0.0), dvec(out * in, 0.0), dvec(out, 0.0)};
  for (std::size_t t = 0; t < rows; ++t)
    for (std::size_t n = 0; n < out; ++n) {
      const double d = dy[t * out + n];
      g.db[n] += d;
      for (std::size_t k = 0; k < in; ++k) {
        g.dx[t * in + k] += d * w[n * in + k];
        g.dw[n * in + k] += d * x[t * in + k];
      }
    }
  return g;
}
dvec rmsnorm_ref(const dvec& x, const dvec& w, std::size_t rows, std::size_t dim, double eps) {
  dvec y(x.size());
  for (std::size_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (std::size_t i = 0; i < dim; ++i) ss += x[r * dim + i] * x[r * dim + i];
    const double s = 1 / std::sqrt(ss / static_cast<double>(dim) + eps);
    for (std::size_t i = 0; i < dim; ++i) y[r * dim + i] = x[r * dim + i] * s * w[i];
  }
  return y;
}
// Query row t of head h: its softmax over the keys of its sequence (packed sequences of `period`
// rows, 0: one sequence) up to its own; p[j] for j <= t, 0 before the sequence's first row.
dvec attention_probs(const dvec& q, const dvec& k, std::size_t heads, std::size_t kv_heads, std::size_t hd, std::size_t period, std::size_t t,
                     std::size_t h) {
  const std::size_t qw = heads * hd, kw = kv_heads * hd, g = h / (heads / kv_heads), first = period ? t - t % period : 0;
  dvec p(t + 1, 0.0);
  double m = -1e300, z = 0;
  for (std::size_t j = first; j <= t; ++j) {
    double d = 0;
    for (std::size_t i = 0; i < hd; ++i) d += q[t * qw + h * hd + i] * k[j * kw + g * hd + i];
    m = std::max(m, p[j] = d / std::sqrt(static_cast<double>(hd)));
  }
  for (std::size_t j = first; j <= t; ++j) z += (p[j] = std::exp(p[j] - m));
  for (std::size_t j = first; j <= t; ++j) p[j] /= z;
  return p;
}
// `mask` (optional): each probability's dropout factor, [heads, rows, rows].
dvec attention_ref(const dvec& q, const dvec& k, const dvec& v, std::size_t rows, std::size_t heads, std::size_t kv_heads, std::size_t hd,
                   const vec* mask = nullptr) {
  const std::size_t qw = heads * hd, kw = kv_heads * hd, group = heads / kv_heads;
  dvec o(rows * qw, 0.0);
  for (std::size_t t = 0; t < rows; ++t)
    for (std::size_t h = 0; h < heads; ++h) {
      const std::size_t g = h / group;
      const dvec p = attention_probs(q, k, heads, kv_heads, hd, 0, t, h);
      for (std::size_t j = 0; j <= t; ++j) {
        const double keep = mask ? static_cast<double>((*mask)[(h * rows + t) * rows + j]) : 1.0;
        for (std::size_t i = 0; i < hd; ++i) o[t * qw + h * hd + i] += p[j] * keep * v[j * kw + g * hd + i];
      }
    }
  return o;
}
// The forward and, by the chain rule in double, the gradients of causal attention with packed
// sequences of `period` rows (0: one sequence) for the output gradient dy.
struct attention_grads {
  dvec out, dq, dk, dv;
};
attention_grads attention_grads_ref(const dvec& q, const dvec& k, const dvec& v, const vec& dy, std::size_t rows, std::size_t heads,
                                    std::size_t kv_heads, std::size_t hd, std::size_t period) {
  const std::size_t qw = heads * hd, kw = kv_heads * hd, group = heads / kv_heads;
  const double scale = 1 / std::sqrt(static_cast<double>(hd));
  attention_grads r{dvec(rows * qw, 0.0), dvec(rows * qw, 0.0), dvec(rows * kw, 0.0), dvec(rows * kw, 0.0)};
  for (std::size_t t = 0; t < rows; ++t)
    for (std::size_t h = 0; h < heads; ++h) {
      const std::size_t g = h / group, first = period ? t - t % period : 0;
      const double* qr = &q[t * qw + h * hd];
      const dvec p = attention_probs(q, k, heads, kv_heads, hd, period, t, h);
      dvec dp(t + 1, 0.0);
      double delta = 0;
      for (std::size_t j = first; j <= t; ++j) {
        for (std::size_t i = 0; i < hd; ++i) {
          r.out[t * qw + h * hd + i] += p[j] * v[j * kw + g * hd + i];
          dp[j] += static_cast<double>(dy[t * qw + h * hd + i]) * v[j * kw + g * hd + i];
        }
        delta += p[j] * dp[j];
      }
      for (std::size_t j = first; j <= t; ++j) {
        const double ds = p[j] * (dp[j] - delta) * scale;
        for (std::size_t i = 0; i < hd; ++i) {
          r.dq[t * qw + h * hd + i] += ds * k[j * kw + g * hd + i];
          r.dk[j * kw + g * hd + i] += ds * qr[i];
          r.dv[j * kw + g * hd + i] += p[j] * static_cast<double>(dy[t * qw + h * hd + i]);
        }
      }
    }
  return r;
}
dvec rope_ref(const dvec& x, std::size_t rows, std::size_t heads, std::size_t hd, std::size_t pos0, const float* inv_freq) {
  dvec y(x);
  const std::size_t half = hd / 2;
  for (std::size_t t = 0; t < rows; ++t)
    for (std::size_t h = 0; h < heads; ++h)
      for (std::size_t i = 0; i < half; ++i) {
        const float angle = static_cast<float>(pos0 + t) * inv_freq[i];  // as the kernel rounds it
        const double c = std::cos(static_cast<double>(angle)), s = std::sin(static_cast<double>(angle));
        const std::size_t at = t * heads * hd + h * hd + i;
        y[at] = x[at] * c - x[at + half] * s;
        y[at + half] = x[at + half] * c + x[at] * s;
      }
  return y;
}
double cross_entropy_ref(const dvec& logits, const std::vector<std::int32_t>& labels, std::size_t vocab) {
  double total = 0;
  int counted = 0;
  for (std::size_t r = 0; r < labels.size(); ++r) {
    if (labels[r] == FK_IGNORE_LABEL) continue;
    double m = -1e300, z = 0;
    for (std::size_t j = 0; j < vocab; ++j) m = std::max(m, logits[r * vocab + j]);
    for (std::size_t j = 0; j < vocab; ++j) z += std::exp(logits[r * vocab + j] - m);
    total += m + std::log(z) - logits[r * vocab + static_cast<std::size_t>(labels[r])];
    ++counted;
  }
  return counted ? total / counted : 0.0;
}

}  // namespace

TEST_CASE("fk_linear_f32 and its backward: reference, finite differences, threads, every path") {
  {  // The chain rule's gradients are the finite differences' (which cost a layer per element: small).
    const std::size_t T = 5, K = 37, N = 19;
    const vec x = random_vec(T * K, 1), w = random_vec(N * K, 2, 0.3f), b = random_vec(N, 3), dy = random_vec(T * N, 4);
    const dvec xd = widen(x), wd = widen(w), bd = widen(b);
    const linear_grads g = linear_grads_ref(xd, wd, dy, T, K, N);
    CHECK(rel_err(vec(g.dx.begin(), g.dx.end()), numeric_grad([&](const dvec& v) { return linear_ref(v, wd, bd, T, K, N); }, xd, dy)) < 1e-6);
    CHECK(rel_err(vec(g.dw.begin(), g.dw.end()), numeric_grad([&](const dvec& v) { return linear_ref(xd, v, bd, T, K, N); }, wd, dy)) < 1e-6);
    CHECK(rel_err(vec(g.db.begin(), g.db.end()), numeric_grad([&](const dvec& v) { return linear_ref(xd, wd, v, T, K, N); }, bd, dy)) < 1e-6);
  }
  // Odd sizes: the lanes' and the GEMM's row and column tails; K over one K block of the GEMM; then
  // the GEMM's blocks: rows past two blocks of 120 (and a 2-row tail), K over two K blocks, columns
  // over groups of panels, and dY^T X's k (the rows) over a whole K block: its packed micro-panels
  // then fill, up to their slack (sums of 260 to 520 products in f32).
  struct layer {
    std::size_t rows, in, out;
    double tolerance;
  };
  for (const layer& l : {layer{5, 37, 19, 1e-6}, layer{13, 300, 35, 1e-6}, layer{260, 520, 300, 4e-6}}) {
    const std::size_t T = l.rows, K = l.in, N = l.out;  // (no structured binding: clang's OpenMP cannot capture one)
    const double tolerance = l.tolerance;
    CAPTURE(T);
    const vec x = random_vec(T * K, 1), w = random_vec(N * K, 2, 0.3f), b = random_vec(N, 3), dy = random_vec(T * N, 4);
    const dvec xd = widen(x), wd = widen(w);
    const dvec y_ref = linear_ref(xd, wd, widen(b), T, K, N);
    const linear_grads g = linear_grads_ref(xd, wd, dy, T, K, N);
    fkt::for_each_isa([&](fk_isa isa) {
      // AMX multiplies in bf16 pairs (hi and lo parts, 16 of f32's 24 bits): its own bound is below
      const double products = isa == FK_ISA_AMX ? 2e-5 : tolerance;
      vec y(T * N), dx(T * K), dw(N * K), db(N);
      fk_linear_f32(x.data(), T, K, w.data(), N, b.data(), y.data());
      CHECK(rel_err(y, y_ref) < products);
      fk_linear_backward_input(dy.data(), T, N, w.data(), K, dx.data());
      fk_linear_backward_weight(dy.data(), T, N, x.data(), K, dw.data());
      fk_sum_rows(dy.data(), T, N, db.data());
      CHECK(rel_err(dx, g.dx) < products);
      CHECK(rel_err(dw, g.dw) < products);
      CHECK(rel_err(db, g.db) < tolerance);
    });
  }

  same_on_1_and_2_threads([&] {
    const std::size_t big_t = 64, big_k = 96, big_n = 160;
    return three_gemms(random_vec(big_t * big_k, 5), random_vec(big_n * big_k, 6), {}, random_vec(big_t * big_n, 7), big_t, big_k, big_n);
  });
}

TEST_CASE("the AVX-512 f32 GEMM rounds as the AVX2 one: the same bits for every shape and thread count") {
  // Each element of C is the bias (or 0) plus its products k in order, one FMA each, on both paths:
  // the AVX-512 micro-kernels (6 rows x 4 panels on row-major A, 12 x 2 on dY^T) must give exactly the
  // 6 x 16 AVX2 one's results. Shapes: rows of 1, under one micro-panel, past 120-row blocks with a
  // tail; columns of 1, a partial panel, 1, 2 and 3 panels after the full sweeps, several panel
  // groups; K of 1 and over two K blocks; each of the three GEMMs a training step runs (x W^T, dY W,
  // dY^T X).
  if (!fk_isa_force(FK_ISA_AVX2) || !fk_isa_force(FK_ISA_AVX512BF16)) {
    MESSAGE("skipping: this CPU lacks AVX-512 (test_kernels_emulated runs this test on its software model)");
    fk_isa_force(fk_isa_detect());
    return;
  }
  fkt::threads_guard guard;
  fkt::forks_on_any_work fork;
  for (const std::array<std::size_t, 3>& sizes :
       {std::array<std::size_t, 3>{1, 7, 1}, std::array<std::size_t, 3>{11, 3, 40}, std::array<std::size_t, 3>{13, 260, 48},
        std::array<std::size_t, 3>{130, 31, 150}, std::array<std::size_t, 3>{245, 513, 72}, std::array<std::size_t, 3>{24, 64, 272}}) {
    const std::size_t T = sizes[0], K = sizes[1], N = sizes[2];
    CAPTURE(T);
    CAPTURE(K);
    CAPTURE(N);
    const vec x = random_vec(T * K, 21), w = random_vec(N * K, 22, 0.3f), b = random_vec(N, 23), dy = random_vec(T * N, 24);
    auto run = [&](fk_isa isa, int threads) {
      fk_isa_force(isa);
      fk_set_threads(threads);
      return three_gemms(x, w, b, dy, T, K, N);
    };
    const vec avx2 = run(FK_ISA_AVX2, 1);
    for (const int threads : {1, 2}) {
      const vec avx512 = run(FK_ISA_AVX512BF16, threads);
      CHECK(std::memcmp(avx2.data(), avx512.data(), avx2.size() * sizeof(float)) == 0);
    }
  }
  fk_isa_force(fk_isa_detect());
}

TEST_CASE("the AMX f32 GEMM: three bf16 products per f32 one, within their bound element by element") {
  // Each value is split as hi = bf16(v), lo = bf16(v - hi), and a b taken as a_hi b_hi + a_hi b_lo +
  // a_lo b_hi: each element of C must lie within 2^-14 sum_k |a_k b_k| (the split: 3 * 2^-16 and a
  // little) plus 3K f32 roundings of its partial sums of the exact sum, where bf16 products alone are
  // off by ~2^-9 of each product. Shapes: the tails of 32-row blocks, of 16- and 32-column tile halves
  // and of 32-k chunks; several 4-strip work items; K over two K blocks of 256; each of the three
  // GEMMs of a training step (A read along k: x W^T and dY W; A read across: dY^T X). Then: the same
  // bits on 1 and 2 threads, and a non-finite input gives a non-finite output.
  if (!fk_isa_force(FK_ISA_AMX)) {
    MESSAGE("skipping: this CPU lacks AMX (test_kernels_emulated runs this test on its software model)");
    fk_isa_force(fk_isa_detect());
    return;
  }
  fkt::threads_guard guard;
  fkt::forks_on_any_work fork;
  for (const std::array<std::size_t, 3>& sizes :
       {std::array<std::size_t, 3>{1, 7, 1}, std::array<std::size_t, 3>{11, 3, 40}, std::array<std::size_t, 3>{13, 260, 48},
        std::array<std::size_t, 3>{47, 33, 150}, std::array<std::size_t, 3>{70, 513, 17}, std::array<std::size_t, 3>{32, 64, 288}}) {
    const std::size_t T = sizes[0], K = sizes[1], N = sizes[2];
    CAPTURE(T);
    CAPTURE(K);
    CAPTURE(N);
    const vec x = random_vec(T * K, 31), w = random_vec(N * K, 32, 0.3f), b = random_vec(N, 33), dy = random_vec(T * N, 34);
    // C[i][j] = start[j] + sum_k A(i, k) B(k, j), checked against its exact value and its bound
    auto check = [](const vec& got, std::size_t rows, std::size_t cols, std::size_t depth, const std::function<double(std::size_t, std::size_t, std::size_t)>& product,
                    const vec* start) {
      std::size_t bad = 0;
      double worst = 0;
      for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < cols; ++j) {
          const double first = start ? static_cast<double>((*start)[j]) : 0.0;
          double exact = first, magnitude = 0;
          for (std::size_t k = 0; k < depth; ++k) {
            const double p = product(i, j, k);
            exact += p, magnitude += std::fabs(p);
          }
          const double bound = std::ldexp(magnitude, -14) + 3.0 * static_cast<double>(depth) * std::ldexp(std::fabs(first) + magnitude, -24);
          const double err = std::fabs(static_cast<double>(got[i * cols + j]) - exact);
          if (err > bound) ++bad;
          if (magnitude > 0) worst = std::max(worst, err / magnitude);
        }
      CHECK(bad == 0);
      return worst;
    };
    fk_set_threads(1);
    const vec one = three_gemms(x, w, b, dy, T, K, N);
    const vec y(one.begin(), one.begin() + static_cast<std::ptrdiff_t>(T * N));
    const vec dx(one.begin() + static_cast<std::ptrdiff_t>(T * N), one.begin() + static_cast<std::ptrdiff_t>(T * N + T * K));
    const vec dw(one.begin() + static_cast<std::ptrdiff_t>(T * N + T * K), one.end());
    double worst = check(y, T, N, K, [&](std::size_t t, std::size_t n, std::size_t k) { return double{x[t * K + k]} * double{w[n * K + k]}; }, &b);
    worst = std::max(worst, check(dx, T, K, N, [&](std::size_t t, std::size_t i, std::size_t n) { return double{dy[t * N + n]} * double{w[n * K + i]}; }, nullptr));
    worst = std::max(worst, check(dw, N, K, T, [&](std::size_t n, std::size_t i, std::size_t t) { return double{dy[t * N + n]} * double{x[t * K + i]}; }, nullptr));
    CHECK(worst > 0);  // (not exact: the products are split, so some element is off)
    fk_set_threads(2);
    CHECK(std::memcmp(one.data(), three_gemms(x, w, b, dy, T, K, N).data(), one.size() * sizeof(float)) == 0);
  }
  {  // an infinity or a NaN in x: its row of y is not finite, the others are
    const std::size_t T = 40, K = 70, N = 33;
    vec x = random_vec(T * K, 35), w = random_vec(N * K, 36, 0.3f), y(T * N);
    x[3 * K + 5] = INFINITY;
    x[37 * K + 69] = NAN;
    fk_linear_f32(x.data(), T, K, w.data(), N, nullptr, y.data());
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t n = 0; n < N; ++n) CHECK(std::isfinite(y[t * N + n]) == (t != 3 && t != 37));
  }
  fk_isa_force(fk_isa_detect());
}

TEST_CASE("fk_rmsnorm_f32 and its backward, whole rows and heads") {
  const std::size_t rows = 6, dim = 24;
  const float eps = 1e-6f;
  const vec x = random_vec(rows * dim, 11), w = random_vec(dim, 12), dy = random_vec(rows * dim, 13);
  vec y(rows * dim);
  fk_rmsnorm_f32(x.data(), w.data(), rows, dim, eps, y.data());
  CHECK(rel_err(y, rmsnorm_ref(widen(x), widen(w), rows, dim, eps)) < 1e-6);
  vec dx(rows * dim), dw(dim);
  fk_rmsnorm_backward_input(x.data(), w.data(), dy.data(), rows, dim, eps, dx.data());
  fk_rmsnorm_backward_weight(x.data(), dy.data(), rows, dim, eps, dw.data());
  const dvec xd = widen(x), wd = widen(w);
  CHECK(rel_err(dx, numeric_grad([&](const dvec& v) { return rmsnorm_ref(v, wd, rows, dim, eps); }, xd, dy)) < 1e-5);
  CHECK(rel_err(dw, numeric_grad([&](const dvec& v) { return rmsnorm_ref(xd, v, rows, dim, eps); }, wd, dy)) < 1e-5);
  same_on_1_and_2_threads([&] {
    const vec bx = random_vec(512 * 64, 14), bw = random_vec(64, 15), bdy = random_vec(512 * 64, 16);
    vec out(512 * 64);
    fk_rmsnorm_backward_input(bx.data(), bw.data(), bdy.data(), 512, 64, eps, out.data());
    return out;
  });
}

TEST_CASE("fk_attention_causal_f32 and its backward (GQA): reference, finite differences, threads, every path") {
  fkt::for_each_isa([&](fk_isa) {
    const std::size_t T = 7, heads = 4, kv = 2, hd = 8, qw = heads * hd, kw = kv * hd;
    const vec q = random_vec(T * qw, 21), k = random_vec(T * kw, 22), v = random_vec(T * kw, 23), dy = random_vec(T * qw, 24);
    vec o(T * qw);
    fk_attention_causal_f32(q.data(), T, heads, k.data(), v.data(), kv, hd, 0, 0.0f, 0, nullptr, o.data());
    const dvec qd = widen(q), kd = widen(k), vd = widen(v);
    CHECK(rel_err(o, attention_ref(qd, kd, vd, T, heads, kv, hd)) < 1e-6);

    vec work(2 * kv * T), all(T * (qw + 2 * kw)), dq(T * qw), dk(T * kw), dv(T * kw);
    fk_attention_causal_backward(q.data(), k.data(), v.data(), dy.data(), T, heads, kv, hd, 0, 0.0f, 0, nullptr, work.data(), all.data());
    fk_take_columns(all.data(), T, qw + 2 * kw, 0, qw, dq.data());
    fk_take_columns(all.data(), T, qw + 2 * kw, static_cast<std::int32_t>(qw), kw, dk.data());
    fk_take_columns(all.data(), T, qw + 2 * kw, static_cast<std::int32_t>(qw + kw), kw, dv.data());
    CHECK(rel_err(dq, numeric_grad([&](const dvec& x) { return attention_ref(x, kd, vd, T, heads, kv, hd); }, qd, dy)) < 1e-5);
    CHECK(rel_err(dk, numeric_grad([&](const dvec& x) { return attention_ref(qd, x, vd, T, heads, kv, hd); }, kd, dy)) < 1e-5);
    CHECK(rel_err(dv, numeric_grad([&](const dvec& x) { return attention_ref(qd, kd, x, T, heads, kv, hd); }, vd, dy)) < 1e-5);

    same_on_1_and_2_threads([&] {
      const std::size_t bt = 40;
      const vec bq = random_vec(bt * qw, 25), bk = random_vec(bt * kw, 26), bv = random_vec(bt * kw, 27), bdy = random_vec(bt * qw, 28);
      vec bwork(2 * kv * bt), out(bt * (qw + 2 * kw) + bt * qw);
      fk_attention_causal_backward(bq.data(), bk.data(), bv.data(), bdy.data(), bt, heads, kv, hd, 0, 0.0f, 0, nullptr, bwork.data(), out.data());
      fk_attention_causal_f32(bq.data(), bt, heads, bk.data(), bv.data(), kv, hd, 0, 0.0f, 0, nullptr, out.data() + bt * (qw + 2 * kw));
      return out;
    });
  });
}

TEST_CASE("causal attention on every path: head_dim 32 and 40, 70 rows (past a 64-key tile), packed sequences") {
  for (const std::size_t hd : {std::size_t{32}, std::size_t{40}})
    for (const std::size_t period : {std::size_t{0}, std::size_t{33}}) {
      const std::size_t T = 70, heads = 4, kv = 2, qw = heads * hd, kw = kv * hd;
      const auto seed = static_cast<std::uint32_t>(hd + period);
      const vec q = random_vec(T * qw, seed), k = random_vec(T * kw, seed + 1), v = random_vec(T * kw, seed + 2), dy = random_vec(T * qw, seed + 3);
      const attention_grads want = attention_grads_ref(widen(q), widen(k), widen(v), dy, T, heads, kv, hd, period);
      fkt::for_each_isa([&](fk_isa) {
        INFO("head_dim " << hd << ", period " << period);
        vec o(T * qw);
        fk_attention_causal_f32(q.data(), T, heads, k.data(), v.data(), kv, hd, period, 0.0f, 0, nullptr, o.data());
        CHECK(rel_err(o, want.out) < 1e-6);
        vec work(2 * kv * T), all(T * (qw + 2 * kw)), dq(T * qw), dk(T * kw), dv(T * kw);
        fk_attention_causal_backward(q.data(), k.data(), v.data(), dy.data(), T, heads, kv, hd, period, 0.0f, 0, nullptr, work.data(), all.data());
        fk_take_columns(all.data(), T, qw + 2 * kw, 0, qw, dq.data());
        fk_take_columns(all.data(), T, qw + 2 * kw, static_cast<std::int32_t>(qw), kw, dk.data());
        fk_take_columns(all.data(), T, qw + 2 * kw, static_cast<std::int32_t>(qw + kw), kw, dv.data());
        CHECK(rel_err(dq, want.dq) < 1e-5);
        CHECK(rel_err(dk, want.dk) < 1e-5);
        CHECK(rel_err(dv, want.dv) < 1e-5);
      });
    }
}

TEST_CASE("fk_dropout_f32: a seeded mask keeping 1 - p, scaled by 1 / (1 - p), new at each step") {
  const std::size_t n = 200000;
  const vec x = random_vec(n, 91);
  const float p = 0.25f, scale = static_cast<float>(1.0 / (1.0 - 0.25));
  const std::int32_t step = 3, next_step = 4;
  vec y(n), again(n), next(n), other_key(n);
  fk_dropout_f32(x.data(), n, p, 7, &step, y.data());
  fk_dropout_f32(x.data(), n, p, 7, &step, again.data());
  fk_dropout_f32(x.data(), n, p, 7, &next_step, next.data());
  fk_dropout_f32(x.data(), n, p, 8, &step, other_key.data());
  CHECK(y == again);
  std::size_t dropped = 0, wrong = 0, moved = 0, moved_key = 0;
  for (std::size_t i = 0; i < n; ++i) {
    dropped += y[i] == 0.0f;
    wrong += y[i] != 0.0f && y[i] != x[i] * scale;
    moved += (y[i] == 0.0f) != (next[i] == 0.0f);
    moved_key += (y[i] == 0.0f) != (other_key[i] == 0.0f);
  }
  CHECK(wrong == 0);
  CHECK(std::fabs(static_cast<double>(dropped) / n - 0.25) < 0.005);
  // Independent masks differ in 2 p (1 - p) = 37.5 % of the places.
  CHECK(std::fabs(static_cast<double>(moved) / n - 0.375) < 0.01);
  CHECK(std::fabs(static_cast<double>(moved_key) / n - 0.375) < 0.01);

  vec same(n), in_place = x;
  fk_dropout_f32(x.data(), n, 0.0f, 7, &step, same.data());
  CHECK(same == x);  // p = 0: the identity, bit for bit
  fk_dropout_f32(in_place.data(), n, p, 7, &step, in_place.data());
  CHECK(in_place == y);
  // Linear in x with the mask fixed: the same call is its own backward.
  vec doubled = x, y2(n);
  for (float& e : doubled) e *= 2.0f;
  fk_dropout_f32(doubled.data(), n, p, 7, &step, y2.data());
  for (std::size_t i = 0; i < n; ++i) wrong += y2[i] != 2.0f * y[i];
  CHECK(wrong == 0);
}

TEST_CASE("attention dropout: fk_dropout_f32's mask over [heads, rows, rows], finite differences, threads") {
  fkt::for_each_isa([&](fk_isa) {
    const std::size_t T = 7, heads = 4, kv = 2, hd = 8, qw = heads * hd, kw = kv * hd;
    const float p = 0.3f;
    const std::int32_t key = 11, step = 5;
    const vec q = random_vec(T * qw, 121), k = random_vec(T * kw, 122), v = random_vec(T * kw, 123), dy = random_vec(T * qw, 124);
    const vec ones(heads * T * T, 1.0f);
    vec mask(ones.size());
    fk_dropout_f32(ones.data(), ones.size(), p, key, &step, mask.data());
    vec o(T * qw);
    fk_attention_causal_f32(q.data(), T, heads, k.data(), v.data(), kv, hd, 0, p, key, &step, o.data());
    const dvec qd = widen(q), kd = widen(k), vd = widen(v);
    CHECK(rel_err(o, attention_ref(qd, kd, vd, T, heads, kv, hd, &mask)) < 1e-6);
    vec plain(T * qw), zero_p(T * qw);
    fk_attention_causal_f32(q.data(), T, heads, k.data(), v.data(), kv, hd, 0, 0.0f, 0, nullptr, plain.data());
    fk_attention_causal_f32(q.data(), T, heads, k.data(), v.data(), kv, hd, 0, 0.0f, key, &step, zero_p.data());
    CHECK(zero_p == plain);
    CHECK(o != plain);

    vec work(2 * kv * T), all(T * (qw + 2 * kw)), dq(T * qw), dk(T * kw), dv(T * kw);
    fk_attention_causal_backward(q.data(), k.data(), v.data(), dy.data(), T, heads, kv, hd, 0, p, key, &step, work.data(), all.data());
    fk_take_columns(all.data(), T, qw + 2 * kw, 0, qw, dq.data());
    fk_take_columns(all.data(), T, qw + 2 * kw, static_cast<std::int32_t>(qw), kw, dk.data());
    fk_take_columns(all.data(), T, qw + 2 * kw, static_cast<std::int32_t>(qw + kw), kw, dv.data());
    CHECK(rel_err(dq, numeric_grad([&](const dvec& x) { return attention_ref(x, kd, vd, T, heads, kv, hd, &mask); }, qd, dy)) < 1e-5);
    CHECK(rel_err(dk, numeric_grad([&](const dvec& x) { return attention_ref(qd, x, vd, T, heads, kv, hd, &mask); }, kd, dy)) < 1e-5);
    CHECK(rel_err(dv, numeric_grad([&](const dvec& x) { return attention_ref(qd, kd, x, T, heads, kv, hd, &mask); }, vd, dy)) < 1e-5);

    same_on_1_and_2_threads([&] {
      const std::size_t bt = 40;
      const vec bq = random_vec(bt * qw, 125), bk = random_vec(bt * kw, 126), bv = random_vec(bt * kw, 127), bdy = random_vec(bt * qw, 128);
      vec bwork(2 * kv * bt), out(bt * (qw + 2 * kw) + bt * qw);
      fk_attention_causal_backward(bq.data(), bk.data(), bv.data(), bdy.data(), bt, heads, kv, hd, 0, p, key, &step, bwork.data(), out.data());
      fk_attention_causal_f32(bq.data(), bt, heads, bk.data(), bv.data(), kv, hd, 0, p, key, &step, out.data() + bt * (qw + 2 * kw));
      return out;
    });
  });
}

TEST_CASE("fk_swiglu_backward: finite differences of silu(gate) * up, every path") {
  fkt::for_each_isa([&](fk_isa) {
    const std::size_t n = 50;
    const vec gate = random_vec(n, 31, 4.0f), up = random_vec(n, 32), dy = random_vec(n, 33);
    auto f = [&](const dvec& g, const dvec& u) {
      dvec y(n);
      for (std::size_t i = 0; i < n; ++i) y[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
      return y;
    };
    vec dgate(n), dup(n);
    fk_swiglu_backward(gate.data(), up.data(), dy.data(), n, 0, dgate.data());
    fk_swiglu_backward(gate.data(), up.data(), dy.data(), n, 1, dup.data());
    const dvec gd = widen(gate), ud = widen(up);
    CHECK(rel_err(dgate, numeric_grad([&](const dvec& x) { return f(x, ud); }, gd, dy)) < 1e-5);
    CHECK(rel_err(dup, numeric_grad([&](const dvec& x) { return f(gd, x); }, ud, dy)) < 1e-5);
  });
}

TEST_CASE("fk_rope_backward and fk_rope_llama3_backward rotate back, on every path") {
  const std::size_t T = 5, heads = 3, hd = 16, pos0 = 7;
  const float theta = 10000.0f;
  const vec x = random_vec(T * heads * hd, 41), dy = random_vec(T * heads * hd, 42);
  float inv_freq[hd / 2], inv_freq3[hd / 2];
  for (std::size_t i = 0; i < hd / 2; ++i) {
    inv_freq[i] = fk_rope_inv_freq(i, hd, theta);
    inv_freq3[i] = fk_rope_llama3_inv_freq(i, hd, theta, 8.0f, 1.0f, 4.0f, 64.0f);
  }
  const dvec xd = widen(x);
  const dvec want = numeric_grad([&](const dvec& v) { return rope_ref(v, T, heads, hd, pos0, inv_freq); }, xd, dy);
  const dvec want3 = numeric_grad([&](const dvec& v) { return rope_ref(v, T, heads, hd, pos0, inv_freq3); }, xd, dy);
  fkt::for_each_isa([&](fk_isa) {
    vec d = dy;
    fk_rope_backward(d.data(), T, heads, hd, pos0, 0, theta);
    CHECK(rel_err(d, want) < 1e-5);
    vec d3 = dy;
    fk_rope_llama3_backward(d3.data(), T, heads, hd, pos0, 0, theta, 8.0f, 1.0f, 4.0f, 64);
    CHECK(rel_err(d3, want3) < 1e-5);
    vec round_trip = x;  // forward then backward: the rotation is orthogonal
    fk_rope(round_trip.data(), T, heads, hd, pos0, 0, theta);
    fk_rope_backward(round_trip.data(), T, heads, hd, pos0, 0, theta);
    CHECK(rel_err(round_trip, xd) < 1e-6);
  });
}

TEST_CASE("fk_cross_entropy and its backward: ignored rows, out-of-range labels refused") {
  fkt::for_each_isa([&](fk_isa) {
    const std::size_t rows = 4, vocab = 11;
    const vec logits = random_vec(rows * vocab, 51, 5.0f);
    const std::vector<std::int32_t> labels{3, FK_IGNORE_LABEL, 10, 0};
    float loss = 0;
    REQUIRE(fk_cross_entropy(logits.data(), rows, vocab, labels.data(), nullptr, &loss) == 0);
    const dvec ld = widen(logits);
    CHECK(std::fabs(loss - cross_entropy_ref(ld, labels, vocab)) < 1e-6 * std::fabs(cross_entropy_ref(ld, labels, vocab)));
    const float dloss = 0.75f;
    vec dlogits(rows * vocab);
    REQUIRE(fk_cross_entropy_backward(logits.data(), rows, vocab, labels.data(), &dloss, nullptr, dlogits.data()) == 0);
    const vec dy{dloss};
    CHECK(rel_err(dlogits, numeric_grad([&](const dvec& v) { return dvec{cross_entropy_ref(v, labels, vocab)}; }, ld, dy)) < 1e-5);
    for (std::size_t j = 0; j < vocab; ++j) CHECK(dlogits[vocab + j] == 0.0f);  // the ignored row

    const std::vector<std::int32_t> bad{3, 11, 0, 0}, negative{3, -1, 0, 0};
    float untouched = 42.0f;
    CHECK(fk_cross_entropy(logits.data(), rows, vocab, bad.data(), nullptr, &untouched) != 0);
    CHECK(fk_cross_entropy(logits.data(), rows, vocab, negative.data(), nullptr, &untouched) != 0);
    CHECK(untouched == 42.0f);
    const std::vector<std::int32_t> none(rows, FK_IGNORE_LABEL);
    REQUIRE(fk_cross_entropy(logits.data(), rows, vocab, none.data(), nullptr, &loss) == 0);
    CHECK(loss == 0.0f);
  });
}

TEST_CASE("fk_cross_entropy with a label count: a shard's part of the whole batch's mean") {
  const std::size_t rows = 6, vocab = 9;
  const vec logits = random_vec(rows * vocab, 53, 4.0f);
  const std::vector<std::int32_t> labels{1, 8, FK_IGNORE_LABEL, 0, 4, 2};
  const std::span<const std::int32_t> all(labels);
  // The batch's 5 labels split 2 + 3 over two shards of 3 rows.
  const float whole_count = 5.0f, dloss = 1.0f;
  float whole = 0, first = 0, second = 0;
  REQUIRE(fk_cross_entropy(logits.data(), rows, vocab, labels.data(), nullptr, &whole) == 0);
  REQUIRE(fk_cross_entropy(logits.data(), 3, vocab, all.data(), &whole_count, &first) == 0);
  REQUIRE(fk_cross_entropy(logits.data() + 3 * vocab, 3, vocab, all.data() + 3, &whole_count, &second) == 0);
  CHECK(std::fabs(first + second - whole) <= 1e-6f * whole);
  vec d_whole(rows * vocab), d_shards(rows * vocab);
  REQUIRE(fk_cross_entropy_backward(logits.data(), rows, vocab, labels.data(), &dloss, nullptr, d_whole.data()) == 0);
  REQUIRE(fk_cross_entropy_backward(logits.data(), 3, vocab, all.data(), &dloss, &whole_count, d_shards.data()) == 0);
  REQUIRE(fk_cross_entropy_backward(logits.data() + 3 * vocab, 3, vocab, all.data() + 3, &dloss, &whole_count, d_shards.data() + 3 * vocab) == 0);
  CHECK(d_shards == d_whole);  // each row divides by the same count: the same bits
}

TEST_CASE("fk_embed_f32 and fk_embed_backward: gather, and scatter-add of repeated ids") {
  const std::size_t vocab = 6, dim = 5;
  const vec table = random_vec(vocab * dim, 61), dy = random_vec(4 * dim, 62);
  const std::vector<std::int32_t> ids{2, 5, 2, 0};
  vec out(4 * dim), dtable(vocab * dim, 9.0f);
  fk_embed_f32(table.data(), dim, ids.data(), 4, out.data());
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < dim; ++j) CHECK(out[i * dim + j] == table[static_cast<std::size_t>(ids[i]) * dim + j]);
  fk_embed_backward(ids.data(), 4, dy.data(), dim, vocab, dtable.data());
  for (std::size_t j = 0; j < dim; ++j) {
    CHECK(dtable[2 * dim + j] == dy[j] + dy[2 * dim + j]);
    CHECK(dtable[5 * dim + j] == dy[dim + j]);
    CHECK(dtable[0 * dim + j] == dy[3 * dim + j]);
    CHECK(dtable[1 * dim + j] == 0.0f);  // an unused row: zero, whatever was there
  }
}

TEST_CASE("AdamW kernels follow torch.optim.AdamW over three steps") {
  const std::size_t n = 9;
  const double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, wd = 0.01, lr = 1e-3;
  vec p = random_vec(n, 71), m(n, 0.0f), v(n, 0.0f);
  dvec pd = widen(p), md(n, 0.0), vd(n, 0.0);
  for (int t = 1; t <= 3; ++t) {
    const vec g = random_vec(n, 72u + static_cast<std::uint32_t>(t));
    const std::int32_t step = t;
    const float rate = static_cast<float>(lr);
    float factors[4];
    fk_adamw_factors(&step, &rate, static_cast<float>(beta1), static_cast<float>(beta2), static_cast<float>(wd), factors);
    fk_adam_first_moment(m.data(), g.data(), n, static_cast<float>(beta1), m.data());
    fk_adam_second_moment(v.data(), g.data(), n, static_cast<float>(beta2), v.data());
    fk_adamw_update(p.data(), m.data(), v.data(), factors, n, static_cast<float>(eps), p.data());
    for (std::size_t i = 0; i < n; ++i) {  // torch's algorithm, in double
      pd[i] *= 1 - lr * wd;
      md[i] = beta1 * md[i] + (1 - beta1) * g[i];
      vd[i] = beta2 * vd[i] + (1 - beta2) * g[i] * g[i];
      const double denom = std::sqrt(vd[i]) / std::sqrt(1 - std::pow(beta2, t)) + eps;
      pd[i] -= lr / (1 - std::pow(beta1, t)) * md[i] / denom;
    }
    for (std::size_t i = 0; i < n; ++i) CHECK(std::fabs(p[i] - pd[i]) < 1e-6);
  }
}

TEST_CASE("SGD kernels follow torch.optim.SGD over three steps: momentum, dampening, Nesterov, weight decay") {
  const std::size_t n = 9;
  const double lr = 0.05;
  struct sgd_case {
    double momentum, dampening, weight_decay;
    int nesterov;
  };
  for (const sgd_case c : {sgd_case{0, 0, 0, 0}, sgd_case{0, 0, 0.1, 0}, sgd_case{0.9, 0, 0.01, 0}, sgd_case{0.8, 0.3, 0.05, 0}, sgd_case{0.9, 0, 0.02, 1}}) {
    CAPTURE(c.momentum);
    CAPTURE(c.dampening);
    CAPTURE(c.nesterov);
    vec p = random_vec(n, 81), buf(n, 123.0f);  // the buffer's first value must not matter
    dvec pd = widen(p), bufd(n, 0.0);
    for (int t = 1; t <= 3; ++t) {
      const vec g = random_vec(n, 82u + static_cast<std::uint32_t>(t));
      const std::int32_t step = t;
      const float rate = static_cast<float>(lr);
      if (c.momentum > 0) {
        fk_sgd_momentum(buf.data(), g.data(), p.data(), &step, n, static_cast<float>(c.momentum), static_cast<float>(c.dampening),
                        static_cast<float>(c.weight_decay), buf.data());
        fk_sgd_momentum_update(p.data(), g.data(), buf.data(), &rate, n, static_cast<float>(c.momentum), static_cast<float>(c.weight_decay), c.nesterov,
                               p.data());
      } else {
        fk_sgd_update(p.data(), g.data(), &rate, n, static_cast<float>(c.weight_decay), p.data());
      }
      for (std::size_t i = 0; i < n; ++i) {  // torch's algorithm, in double
        double d = g[i] + c.weight_decay * pd[i];
        if (c.momentum > 0) {
          bufd[i] = t == 1 ? d : c.momentum * bufd[i] + (1 - c.dampening) * d;
          d = c.nesterov ? d + c.momentum * bufd[i] : bufd[i];
        }
        pd[i] -= lr * d;
      }
      for (std::size_t i = 0; i < n; ++i) CHECK(std::fabs(p[i] - pd[i]) < 1e-6);
    }
  }
}

TEST_CASE("packed sequences (period): rope and causal attention restart at each sequence") {
  fkt::for_each_isa([&](fk_isa) {
    const std::size_t T = 6, heads = 2, kv = 1, hd = 8, qw = heads * hd, kw = kv * hd;
    const vec q = random_vec(2 * T * qw, 81), k = random_vec(2 * T * kw, 82), v = random_vec(2 * T * kw, 83), dy = random_vec(2 * T * qw, 84);
    vec packed(2 * T * qw), apart(2 * T * qw);
    fk_attention_causal_f32(q.data(), 2 * T, heads, k.data(), v.data(), kv, hd, T, 0.0f, 0, nullptr, packed.data());
    for (std::size_t s = 0; s < 2; ++s)
      fk_attention_causal_f32(q.data() + s * T * qw, T, heads, k.data() + s * T * kw, v.data() + s * T * kw, kv, hd, 0, 0.0f, 0, nullptr, apart.data() + s * T * qw);
    CHECK(packed == apart);
    const std::size_t row = qw + 2 * kw;
    vec work(2 * kv * 2 * T), grads(2 * T * row), grads_apart(2 * T * row);
    fk_attention_causal_backward(q.data(), k.data(), v.data(), dy.data(), 2 * T, heads, kv, hd, T, 0.0f, 0, nullptr, work.data(), grads.data());
    for (std::size_t s = 0; s < 2; ++s)
      fk_attention_causal_backward(q.data() + s * T * qw, k.data() + s * T * kw, v.data() + s * T * kw, dy.data() + s * T * qw, T, heads, kv, hd, 0, 0.0f, 0, nullptr,
                                   work.data(), grads_apart.data() + s * T * row);
    CHECK(grads == grads_apart);
    vec x = q, y = q;
    fk_rope(x.data(), 2 * T, heads, hd, 0, T, 10000.0f);
    fk_rope(y.data(), T, heads, hd, 0, 0, 10000.0f);
    fk_rope(y.data() + T * qw, T, heads, hd, 0, 0, 10000.0f);
    CHECK(x == y);
  });
}
