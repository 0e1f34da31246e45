// Kernels x paths against double-precision references: conversions, embedding, RMSNorm, add, SwiGLU,
// GEMV/GEMM, RoPE, argmax, sampling; thread-count invariance; the C11 build.
#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <numeric>

#include "kernel_test_util.hpp"

using namespace fkt;

extern "C" int fk_c_api_gemv(const float* x, size_t K, const uint16_t* W, size_t N, float* y);
extern "C" int fk_c_api_isa(void);
extern "C" int fk_c_api_force(int isa);
extern "C" int fk_c_pinned_isa(void);
extern "C" void fk_c_pinned_rmsnorm(const float* x, const uint16_t* w, size_t rows, size_t dim, float* out);

static const std::size_t kOdd[] = {1, 3, 17, 63, 65, 127, 896};

// Independent RNE reference: pick the nearer of the two bf16 neighbours in double, ties to even mantissa.
static uint16_t ref_bf16(float f) {
  if (std::isnan(f)) return 0x7fc0;  // only "is a NaN" is checked for NaN inputs
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t lo = static_cast<uint16_t>(u >> 16);
  const uint16_t hi = static_cast<uint16_t>(lo + 1);  // next magnitude up (may carry into inf: correct)
  // IEEE overflow rule: the candidate above the largest finite bf16 is "2^128" (it becomes infinity)
  const double vh = (hi & 0x7fff) == 0x7f80 ? std::ldexp(f < 0 ? -1.0 : 1.0, 128) : static_cast<double>(bf(hi));
  const double dl = std::fabs(static_cast<double>(bf(lo)) - f), dh = std::fabs(vh - f);
  if (dl < dh) return lo;
  if (dh < dl) return hi;
  return (lo & 1) ? hi : lo;
}

TEST_CASE("isa detection, forcing and names") {
  const fk_isa det = fk_isa_detect();
  MESSAGE("detected ISA: " << std::string(fk_isa_name(det)));
#ifdef FK_AVX512_EMULATE
  MESSAGE("this build emulates the AVX-512 instructions in software (FK_AVX512_EMULATE)");
#endif
#ifdef FK_AMX_EMULATE
  MESSAGE("this build emulates the AMX tile instructions in software (FK_AMX_EMULATE)");
#endif
  CHECK(fk_isa_force(FK_ISA_SCALAR) == 1);
  CHECK(fk_isa_active() == FK_ISA_SCALAR);
  if (det < FK_ISA_AMX) {
    CHECK(fk_isa_force(FK_ISA_AMX) == 0);
    CHECK(fk_isa_active() == FK_ISA_SCALAR);  // a refused force changes nothing
  }
  CHECK(fk_isa_force(det) == 1);
  CHECK(fk_isa_active() == det);
  CHECK(std::string(fk_isa_name(FK_ISA_AVX512BF16)) == "avx512bf16");
  CHECK(std::string(fk_isa_name(FK_ISA_AMX)) == "amx");
  // FUSED_ISA values (read once, at the first fk_isa_active(); an unknown name keeps the detected path)
  CHECK(fk__isa_from_name("scalar", FK_ISA_AMX) == FK_ISA_SCALAR);
  CHECK(fk__isa_from_name("avx2", FK_ISA_AMX) == FK_ISA_AVX2);
  CHECK(fk__isa_from_name("avx512bf16", FK_ISA_SCALAR) == FK_ISA_AVX512BF16);
  CHECK(fk__isa_from_name("amx", FK_ISA_SCALAR) == FK_ISA_AMX);
  CHECK(fk__isa_from_name("sse9", FK_ISA_AVX2) == FK_ISA_AVX2);
  CHECK(fk__isa_from_name(nullptr, FK_ISA_AVX2) == FK_ISA_AVX2);
  threads_guard tg;
  fk_set_threads(3);
  CHECK(fk_get_threads() == 3);
  fk_set_threads(0);
  CHECK(fk_get_threads() >= 1);
}

TEST_CASE("bf16 <-> f32 conversions are exact RNE on every path") {
  // special values + random bit patterns (covers denormals, ties, huge values rounding to inf)
  std::vector<float> src = {0.0f, -0.0f, 1.0f, -1.0f, INFINITY, -INFINITY, NAN, 3.4e38f, -3.4e38f, 1e-40f, -1e-45f};
  for (uint32_t u : {0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x7f7fffffu, 0x7f7f8000u, 0x00008000u, 0x7f800001u, 0xffc00001u}) {
    float f;
    std::memcpy(&f, &u, 4);
    src.push_back(f);
  }
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 4000; ++i) {
    uint32_t u = bits(rng());
    float f;
    std::memcpy(&f, &u, 4);
    src.push_back(f);
  }
  for_each_isa([&](fk_isa) {
    for (std::size_t n : {std::size_t{1}, std::size_t{3}, std::size_t{17}, std::size_t{63}, std::size_t{127}, src.size()}) {
      unaligned<float> x(n);
      for (std::size_t i = 0; i < n; ++i) x[i] = src[i];  // (g++ -O2 warns falsely on std::copy here)
      unaligned<uint16_t> h(n);
      fk_f32_to_bf16(x.data(), h.data(), n);
      for (std::size_t i = 0; i < n; ++i) {
        if (std::isnan(x[i])) {
          CHECK(std::isnan(bf(h[i])));
        } else {
          CHECK(h[i] == ref_bf16(x[i]));
        }
      }
      unaligned<float> back(n);
      fk_bf16_to_f32(h.data(), back.data(), n);
      for (std::size_t i = 0; i < n; ++i) {
        uint32_t u;
        std::memcpy(&u, &back[i], 4);
        CHECK(u == static_cast<uint32_t>(h[i]) << 16);  // widening is exact
      }
    }
  });
}

TEST_CASE("embedding gather") {
  const std::size_t vocab = 37;
  const int32_t ids[] = {0, 36, 5, 5, 17};
  for (std::size_t dim : kOdd) {
    unaligned<uint16_t> table(vocab * dim);
    fill_bf16(table.data(), vocab * dim);
    for_each_isa([&](fk_isa) {
      unaligned<float> out(5 * dim);
      fk_embed(table.data(), dim, ids, 5, out.data());
      for (std::size_t i = 0; i < 5; ++i)
        for (std::size_t d = 0; d < dim; ++d) CHECK(out[i * dim + d] == bf(table[static_cast<std::size_t>(ids[i]) * dim + d]));
    });
  }
}

TEST_CASE("rmsnorm against double reference (in place too)") {
  for_each_isa([&](fk_isa) {
    for (std::size_t dim : kOdd) {
      const std::size_t rows = 3;
      unaligned<float> x(rows * dim);
      unaligned<uint16_t> w(dim);
      fill_f32(x.data(), rows * dim, -3.0f, 3.0f);
      fill_bf16(w.data(), dim, 0.5f, 2.0f);
      unaligned<float> out(rows * dim);
      fk_rmsnorm(x.data(), w.data(), rows, dim, 1e-6f, out.data());
      for (std::size_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (std::size_t i = 0; i < dim; ++i) ss += static_cast<double>(x[r * dim + i]) * x[r * dim + i];
        const double inv = 1.0 / std::sqrt(ss / static_cast<double>(dim) + 1e-6);
        for (std::size_t i = 0; i < dim; ++i) {
          const double ref = x[r * dim + i] * inv * bf(w[i]);
          // sum of squares: relative error <= gamma_dim (dim*u); sqrt halves it; +1 u each for the
          // division, sqrt, mean, 1/x and the two products: |err| <= (dim/2 + 6) u |ref|.
          CHECK(std::fabs(out[r * dim + i] - ref) <= (static_cast<double>(dim) / 2 + 6) * kU * std::fabs(ref) + 1e-30);
        }
      }
      std::vector<float> copy(out.data(), out.data() + rows * dim);
      fk_rmsnorm(x.data(), w.data(), rows, dim, 1e-6f, x.data());  // out == x
      CHECK(std::memcmp(copy.data(), x.data(), rows * dim * sizeof(float)) == 0);
    }
  });
}

TEST_CASE("add and swiglu against double reference, in place") {
  for_each_isa([&](fk_isa) {
    for (std::size_t n : {std::size_t{1}, std::size_t{3}, std::size_t{17}, std::size_t{63}, std::size_t{65}, std::size_t{127},
                          std::size_t{896}, std::size_t{40000}}) {
      unaligned<float> a(n), b(n), out(n);
      fill_f32(a.data(), n, -12.0f, 12.0f);
      fill_f32(b.data(), n, -2.0f, 2.0f);
      if (n > 4) a[2] = -120.0f, a[3] = 120.0f;  // saturating exp on both sides
      fk_add(a.data(), b.data(), n, out.data());
      for (std::size_t i = 0; i < n; ++i) CHECK(out[i] == static_cast<float>(static_cast<double>(a[i]) + b[i]));  // correctly rounded
      fk_swiglu(a.data(), b.data(), n, out.data());
      for (std::size_t i = 0; i < n; ++i) {
        const double g = a[i], ref = g / (1.0 + std::exp(-g)) * b[i];
        // silu = g/(1+e), e = exp(-g): d silu / silu = -e/(1+e) * de/e, so the exp's relative error
        // (<= 1e-6 for the vector polynomial, 1 ulp for expf) passes through at most once; + 4 roundings.
        CHECK(std::fabs(out[i] - ref) <= (1e-6 + 4 * kU) * std::fabs(ref) + 1e-37);
      }
      std::vector<float> copy(out.data(), out.data() + n);
      std::vector<float> a0(a.data(), a.data() + n);
      fk_swiglu(a.data(), b.data(), n, a.data());  // out == gate
      CHECK(std::memcmp(copy.data(), a.data(), n * sizeof(float)) == 0);
      fk_add(a0.data(), b.data(), n, out.data());
      fk_add(a0.data(), b.data(), n, a0.data());  // out == a (the residual stream updated in place)
      CHECK(std::memcmp(out.data(), a0.data(), n * sizeof(float)) == 0);
    }
  });
}

// ---- linear -----------------------------------------------------------------------------------
// Reference: double accumulation of the exact products x[k] * W[n][k] (W is exactly its bf16 value).
// Error bound for a path that keeps x in f32: each product rounds at most once (u) and the f32 sum of
// the K products and the bias, in any order (the GEMM paths start their FMA chains at the bias), is off
// by at most gamma_K sum|terms| (Higham 3.1): |err| <= (K+1) u (S + |b|), S = sum|x w|; plus one
// rounding of |y| for a path that adds the bias last. A path that rounds x to bf16 (AVX-512 BF16 GEMM, AMX) adds
// |x - bf16(x)| <= 2^-8 |x| per term (bf16 keeps p = 8 significant bits): |err| <= (2^-8 + (K+1) u) S. vdpbf16ps flushes denormals; the data
// here has none.
struct lin_case {
  std::size_t M, K, N;
  bool bias;
};

static void check_linear(std::size_t M, std::size_t K, std::size_t N, bool with_bias, bool gemv, fk_isa isa) {
  CAPTURE(M);
  CAPTURE(K);
  CAPTURE(N);
  CAPTURE(with_bias);
  unaligned<float> x(M * K), y(M * N, NAN);
  unaligned<uint16_t> W(N * K), bias(N);
  fill_f32(x.data(), M * K);
  fill_bf16(W.data(), N * K);
  fill_bf16(bias.data(), N);
  const bool rounds_x = !gemv && isa >= FK_ISA_AVX512BF16 && M >= FK_LIN_MIN_M_DP;
  if (gemv) fk_gemv_bf16(x.data(), K, W.data(), N, with_bias ? bias.data() : nullptr, y.data());
  else {
    fk_gemm_bf16(x.data(), M, K, W.data(), N, with_bias ? bias.data() : nullptr, y.data(), nullptr);
    // With a workspace (exactly fk_gemm_bf16_work_bytes, so ASan sees any overrun): x is rounded into it
    // once per call on the paths that multiply in bf16, and the result keeps every bit; the other
    // paths do not touch it.
    const std::size_t wn = fk_gemm_bf16_work_bytes(M, K) / sizeof(uint16_t);
    REQUIRE(wn == M * ((K + 31) / 32 * 32));
    unaligned<uint16_t> work(wn);
    for (std::size_t i = 0; i < wn; ++i) work[i] = 0xABCD;
    unaligned<float> yw(M * N, NAN);
    fk_gemm_bf16(x.data(), M, K, W.data(), N, with_bias ? bias.data() : nullptr, yw.data(), work.data());
    CHECK(std::memcmp(yw.data(), y.data(), M * N * sizeof(float)) == 0);
    std::size_t untouched = 0;
    for (std::size_t i = 0; i < wn; ++i) untouched += work[i] == 0xABCD;
    CHECK(untouched == (rounds_x ? 0 : wn));
  }
  int bad = 0;
  for (std::size_t m = 0; m < M; ++m)
    for (std::size_t n = 0; n < N; ++n) {
      const double b = with_bias ? bf(bias[n]) : 0.0;
      double ref = b, S = 0;
      for (std::size_t k = 0; k < K; ++k) {
        const double t = static_cast<double>(x[m * K + k]) * bf(W[n * K + k]);
        ref += t;
        S += std::fabs(t);
      }
      const double tol = (rounds_x ? kUbf : 0.0) * S + static_cast<double>(K + 1) * kU * (S + std::fabs(b)) + kU * std::fabs(ref) + 1e-30;
      if (!(std::fabs(y[m * N + n] - ref) <= tol) && bad++ < 5)
        CHECK_MESSAGE(false, "y[" << m << "," << n << "] = " << y[m * N + n] << " ref " << ref << " tol " << tol);
    }
  CHECK(bad == 0);
}

TEST_CASE("gemv: every path, odd sizes, unaligned, bias or not") {
  for_each_isa([&](fk_isa isa) {
    for (std::size_t K : kOdd)
      for (std::size_t N : {std::size_t{1}, std::size_t{3}, std::size_t{17}, std::size_t{65}, std::size_t{130}})
        check_linear(1, K, N, (K + N) % 2 == 0, true, isa);
    check_linear(1, 4864, 67, true, true, isa);
    check_linear(1, 896, 1000, false, true, isa);
    // rows 2 KiB, just over 2 KiB and 4 KiB apart; 77 and 83 rows: 4 or 8 slabs and a tail of each size
    check_linear(1, 1024, 77, true, true, isa);
    check_linear(1, 1025, 77, false, true, isa);
    check_linear(1, 2048, 83, true, true, isa);
  });
}

// The arithmetic of fk_linear.h's row kernel (every SIMD path's GEMV and small-M GEMM), one lane at a time:
// 8 fused chains, lane i taking k = 16c + 2i then 16c + 2i + 1 for each whole 16 k, then the 8-wide
// steps (lane i: k = 8c + i; lanes past K add 0 x 0), then fk__hsum256's tree and the bias.
static float row_model(const float* x, const std::uint16_t* w, std::size_t K, float bias) {
  float lane[8] = {};
  std::size_t k = 0;
  for (; k + 16 <= K; k += 16)
    for (std::size_t i = 0; i < 8; ++i) {
      lane[i] = std::fma(bf(w[k + 2 * i]), x[k + 2 * i], lane[i]);
      lane[i] = std::fma(bf(w[k + 2 * i + 1]), x[k + 2 * i + 1], lane[i]);
    }
  for (; k < K; k += 8)
    for (std::size_t i = 0; i < 8; ++i) {
      const bool in = k + i < K;
      lane[i] = std::fma(in ? bf(w[k + i]) : 0.0f, in ? x[k + i] : 0.0f, lane[i]);
    }
  const float s0 = lane[0] + lane[4], s1 = lane[1] + lane[5], s2 = lane[2] + lane[6], s3 = lane[3] + lane[7];
  return ((s0 + s2) + (s1 + s3)) + bias;
}

TEST_CASE("gemv and small-M gemm: every SIMD path computes each row exactly as the row model does") {
  // AVX2, and AVX-512 BF16 / AMX where the CPU has them or the build emulates them: one arithmetic for
  // all, so a model decodes to the same bits on every x86 host with AVX2.
  const fk_isa detected = fk_isa_detect();
  int paths = 0;
  for (fk_isa isa : {FK_ISA_AVX2, FK_ISA_AVX512BF16, FK_ISA_AMX}) {
    if (!fk_isa_force(isa)) continue;
    INFO("path " << std::string(fk_isa_name(isa)));
    ++paths;
    for (std::size_t M : {std::size_t{1}, std::size_t{3}})
      for (std::size_t K : {std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{15}, std::size_t{16}, std::size_t{17},
                            std::size_t{63}, std::size_t{896}, std::size_t{1029}, std::size_t{2048}})
        for (std::size_t N : {std::size_t{1}, std::size_t{9}, std::size_t{67}, std::size_t{200}}) {
          CAPTURE(M);
          CAPTURE(K);
          CAPTURE(N);
          unaligned<float> x(M * K);
          unaligned<uint16_t> W(N * K), bias(N);
          fill_f32(x.data(), M * K);
          fill_bf16(W.data(), N * K);
          fill_bf16(bias.data(), N);
          std::vector<float> y(M * N, NAN);
          if (M == 1) fk_gemv_bf16(x.data(), K, W.data(), N, bias.data(), y.data());
          else fk_gemm_bf16(x.data(), M, K, W.data(), N, bias.data(), y.data(), nullptr);
          int bad = 0;
          for (std::size_t m = 0; m < M; ++m)
            for (std::size_t n = 0; n < N; ++n) {
              const float want = row_model(x.data() + m * K, W.data() + n * K, K, bf(bias[n]));
              if (std::memcmp(&want, &y[m * N + n], sizeof want) != 0 && bad++ < 3)
                CHECK_MESSAGE(false, "y[" << m << "," << n << "] = " << y[m * N + n] << ", the model " << want);
            }
          CHECK(bad == 0);
        }
  }
  fk_isa_force(detected);
  if (paths == 0) MESSAGE("skipped: this CPU has none of the SIMD row kernels");
}

TEST_CASE("gemm: every path, M across tile tails, odd K and N") {
  for_each_isa([&](fk_isa isa) {
    for (std::size_t M : {std::size_t{1}, std::size_t{2}, std::size_t{4}, std::size_t{5}, std::size_t{7}, std::size_t{16},
                          std::size_t{37}})
      for (std::size_t K : {std::size_t{1}, std::size_t{3}, std::size_t{17}, std::size_t{63}, std::size_t{65}, std::size_t{127},
                            std::size_t{300}})
        for (std::size_t N : {std::size_t{3}, std::size_t{65}, std::size_t{130}}) check_linear(M, K, N, (M + K) % 2 == 1, false, isa);
    check_linear(33, 896, 131, true, false, isa);
    check_linear(17, 4864, 70, false, false, isa);
  });
}

TEST_CASE("amx gemm: strips per work item and k per chunk never change a bit") {
#if FK_X86
  if (!fk_isa_force(FK_ISA_AMX)) {
    MESSAGE("skipping: this CPU/OS lacks AMX (detected: " << std::string(fk_isa_name(fk_isa_detect())) << ")");
    return;
  }
  threads_guard tg;
  fk_set_threads(1);
  struct shape {
    std::size_t strips, kc;
  };
  auto check = [](std::size_t M, std::size_t K, std::size_t N, std::initializer_list<shape> shapes) {
    const std::size_t S = (N + FK_LIN_AMX_STRIP - 1) / FK_LIN_AMX_STRIP;
    unaligned<float> x(M * K);
    unaligned<uint16_t> W(N * K), bias(N);
    fill_f32(x.data(), M * K);
    fill_bf16(W.data(), N * K);
    fill_bf16(bias.data(), N);
    std::vector<float> want(M * N), want_no_bias(M * N);  // fk_gemm_bf16's own item size and chunk
    fk_gemm_bf16(x.data(), M, K, W.data(), N, bias.data(), want.data(), nullptr);
    fk_gemm_bf16(x.data(), M, K, W.data(), N, nullptr, want_no_bias.data(), nullptr);
    std::vector<uint16_t> work(fk_gemm_bf16_work_bytes(M, K) / 2);
    fk__round_x_work(x.data(), M, K, work.data());
    for (const shape sh : shapes)
      for (const uint16_t* xb : {static_cast<const uint16_t*>(nullptr), static_cast<const uint16_t*>(work.data())})
        for (const uint16_t* b : {static_cast<const uint16_t*>(bias.data()), static_cast<const uint16_t*>(nullptr)}) {
          REQUIRE(sh.strips * sh.kc * 64 <= FK_LIN_AMX_STRIP_BYTES);
          std::vector<float> y(M * N, NAN);
          for (std::size_t i = 0; i * sh.strips < S; ++i)
            fk__gemm_block_amx(x.data(), xb, M, K, W.data(), N, b, y.data(), i * sh.strips * FK_LIN_AMX_STRIP, sh.strips, sh.kc);
          INFO(M << " x " << K << " x " << N << ", strips per item: " << sh.strips << ", k per chunk: " << sh.kc
                 << (xb ? ", x rounded beforehand" : ", x rounded per item") << (b ? ", bias" : ", no bias"));
          CHECK(std::memcmp(y.data(), (b ? want : want_no_bias).data(), y.size() * 4) == 0);
        }
  };
  // ragged everywhere: a last x block of 5 rows, a last strip of 13 columns, k chunks ending mid-tile
  check(37, 600, 7 * 64 + 13,
        {shape{1, 32}, shape{1, 512}, shape{2, 256}, shape{3, 160}, shape{4, 256}, shape{FK_LIN_AMX_MAX_STRIPS, 128}});
  // 9 blocks of x (M >= 256): the kernel prefetches the next chunk's W rows, across items too
  check(8 * 32 + 5, 300, 3 * 32 + 13, {shape{1, 32}, shape{2, 256}, shape{4, 256}});
  fk_isa_force(fk_isa_detect());
#endif
}

// Column blocks of 64 for the thread-count test: many, so that 2 and 3 threads split them unevenly.
// Fewer (still uneven) in the sanitizer build (FUSED_SANITIZE): there every emulated AVX-512
// instruction is a checked loop, and 70 blocks took 190 s of CI's sanitizer stage on their own.
#ifdef FUSED_SANITIZED
constexpr std::size_t column_blocks = 17;
#else
constexpr std::size_t column_blocks = 70;
#endif

TEST_CASE("gemv and gemm are bitwise independent of the thread count") {
  threads_guard tg;
  forks_on_any_work fork;
  for_each_isa([&](fk_isa) {
    for (const std::size_t K : {std::size_t{300}, std::size_t{1500}}) {  // both accumulation orders of the row kernel
      const std::size_t M = 37, N = column_blocks * 64 + 13;  // many column blocks, tails everywhere
      unaligned<float> x(M * K);
      unaligned<uint16_t> W(N * K), bias(N);
      fill_f32(x.data(), M * K);
      fill_bf16(W.data(), N * K);
      fill_bf16(bias.data(), N);
      std::vector<std::vector<float>> ys, vs;
      for (int t : {1, 2, 3}) {
        fk_set_threads(t);
        std::vector<float> y(M * N), v(N);
        std::vector<uint16_t> work(t == 2 ? fk_gemm_bf16_work_bytes(M, K) / 2 : 0);  // with and without a workspace
        fk_gemm_bf16(x.data(), M, K, W.data(), N, bias.data(), y.data(), work.empty() ? nullptr : work.data());
        fk_gemv_bf16(x.data(), K, W.data(), N, bias.data(), v.data());
        ys.push_back(y);
        vs.push_back(v);
      }
      CHECK(std::memcmp(ys[0].data(), ys[1].data(), ys[0].size() * 4) == 0);
      CHECK(std::memcmp(ys[0].data(), ys[2].data(), ys[0].size() * 4) == 0);
      CHECK(std::memcmp(vs[0].data(), vs[1].data(), vs[0].size() * 4) == 0);
      CHECK(std::memcmp(vs[0].data(), vs[2].data(), vs[0].size() * 4) == 0);
      // the GEMV row kernel is also what GEMM uses for M < FK_LIN_MIN_M_DP: same bits
      std::vector<float> y1(N);
      fk_gemm_bf16(x.data(), 1, K, W.data(), N, bias.data(), y1.data(), nullptr);
      CHECK(std::memcmp(y1.data(), vs[0].data(), N * 4) == 0);
    }
  });
}

TEST_CASE("work runs on one thread or on all of them, never on a team in between") {
  // libgomp ends the pool threads a smaller team leaves out and creates them again for the next larger
  // one: kernels that sized their team by their work items ran half as fast on 16 threads.
  threads_guard tg;
  fk_set_threads(8);
  CHECK(fk__threads_for(1, 1e9) == 1);     // one item
  CHECK(fk__threads_for(100, 10.0) == 1);  // too little work to fork
  CHECK(fk__threads_for(2, 1e9) == 8);     // fewer items than threads: every thread, the idle ones wait
  CHECK(fk__threads_for(1000, 1e9) == 8);
  CHECK(fk__threads_for(2, FK_PARALLEL_MIN_WORK / 2 - 1) == 1);  // the least work worth a fork
  CHECK(fk__threads_for(2, FK_PARALLEL_MIN_WORK / 2) == 8);
  forks_on_any_work fork;
  // and more threads than items computes the same bits as one thread: 3 threads, 2 column blocks (3,
  // not 8: LLVM's libomp, under the sanitizer build, leaks the state of a team that large on 2 cores)
  for_each_isa([&](fk_isa) {
    const std::size_t M = 37, K = 300, N = 64 + 13;
    unaligned<float> x(M * K);
    unaligned<uint16_t> W(N * K), bias(N);
    fill_f32(x.data(), M * K);
    fill_bf16(W.data(), N * K);
    fill_bf16(bias.data(), N);
    std::vector<float> y[2], v[2];
    for (int i = 0; i < 2; ++i) {
      fk_set_threads(i == 0 ? 1 : 3);
      y[i].resize(M * N);
      v[i].resize(N);
      fk_gemm_bf16(x.data(), M, K, W.data(), N, bias.data(), y[i].data(), nullptr);
      fk_gemv_bf16(x.data(), K, W.data(), N, bias.data(), v[i].data());
    }
    CHECK(std::memcmp(y[0].data(), y[1].data(), y[0].size() * 4) == 0);
    CHECK(std::memcmp(v[0].data(), v[1].data(), v[0].size() * 4) == 0);
  });
}

TEST_CASE("elementwise kernels are bitwise independent of the thread count") {
  threads_guard tg;
  forks_on_any_work fork;
  for_each_isa([&](fk_isa) {
    const std::size_t n = 100003, rows = 61, dim = 896;
    unaligned<float> a(n), b(n);
    fill_f32(a.data(), n, -8, 8);
    fill_f32(b.data(), n);
    unaligned<uint16_t> w(dim);
    fill_bf16(w.data(), dim);
    std::vector<std::vector<float>> r;
    for (int t : {1, 2, 3}) {
      fk_set_threads(t);
      std::vector<float> s(n), q(rows * dim);
      fk_swiglu(a.data(), b.data(), n, s.data());
      fk_rmsnorm(a.data(), w.data(), rows, dim, 1e-6f, q.data());
      s.insert(s.end(), q.begin(), q.end());
      r.push_back(s);
    }
    CHECK(std::memcmp(r[0].data(), r[1].data(), r[0].size() * 4) == 0);
    CHECK(std::memcmp(r[0].data(), r[2].data(), r[0].size() * 4) == 0);
  });
}

// ---- rope -------------------------------------------------------------------------------------
TEST_CASE("rope: Qwen2 rotate-half against double reference") {
  for_each_isa([&](fk_isa) {
    for (std::size_t hd : {std::size_t{32}, std::size_t{64}, std::size_t{128}, std::size_t{6}})
      for (std::size_t pos0 : {std::size_t{0}, std::size_t{7}, std::size_t{4000}}) {
        const std::size_t S = 5, heads = 3;
        const float theta = hd == 64 ? 1e6f : 1e4f;
        unaligned<float> x(S * heads * hd);
        fill_f32(x.data(), x.size(), -2, 2);
        std::vector<float> orig(x.data(), x.data() + x.size());
        fk_rope(x.data(), S, heads, hd, pos0, 0, theta);
        const std::size_t half = hd / 2;
        for (std::size_t s = 0; s < S; ++s)
          for (std::size_t h = 0; h < heads; ++h)
            for (std::size_t i = 0; i < half; ++i) {
              // The angle is defined as transformers computes it in f32 (see fk_rope.h); the reference
              // takes that same f32 angle and rotates in double. cosf/sinf are within 1 ulp, and the
              // rotation is two products and a sum: |err| <= 4 u (|x1| + |x2|).
              const float ang = static_cast<float>(pos0 + s) * fk_rope_inv_freq(i, hd, theta);
              const double c = std::cos(static_cast<double>(ang)), sn = std::sin(static_cast<double>(ang));
              const std::size_t o = s * heads * hd + h * hd;
              const double x1 = orig[o + i], x2 = orig[o + i + half];
              const double tol = 4 * kU * (std::fabs(x1) + std::fabs(x2)) + 1e-30;
              CHECK(std::fabs(x[o + i] - (x1 * c - x2 * sn)) <= tol);
              CHECK(std::fabs(x[o + i + half] - (x2 * c + x1 * sn)) <= tol);
            }
      }
  });
}

// ---- argmax / sampling ------------------------------------------------------------------------
TEST_CASE("argmax: first index of the max on every path") {
  for_each_isa([&](fk_isa) {
    for (std::size_t n : {std::size_t{1}, std::size_t{3}, std::size_t{17}, std::size_t{63}, std::size_t{65}, std::size_t{127},
                          std::size_t{896}, std::size_t{151936}}) {
      unaligned<float> x(n);
      fill_f32(x.data(), n, -5, 5);
      std::size_t ref = 0;
      for (std::size_t i = 1; i < n; ++i)
        if (x[i] > x[ref]) ref = i;
      CHECK(fk_argmax(x.data(), n) == ref);
      if (n > 20) {  // ties: the first one wins
        x[n - 2] = 9.0f;
        x[n / 2] = 9.0f;
        CHECK(fk_argmax(x.data(), n) == n / 2);
        x[1] = NAN;
        CHECK(fk_argmax(x.data(), n) == n / 2);
      }
    }
    const float all_neg_inf[] = {-INFINITY, -INFINITY, -INFINITY};
    CHECK(fk_argmax(all_neg_inf, 3) == 0);
  });
}

TEST_CASE("sampling: reproducible, greedy limits, top-k and top-p supports, distribution") {
  const std::size_t n = 50;
  std::vector<float> logits(n), scratch(n);
  fill_f32(logits.data(), n, -3, 3);
  logits[7] = 2.9f;
  fk_rng r1, r2;
  fk_rng_seed(&r1, 42);
  fk_rng_seed(&r2, 42);
  for (int i = 0; i < 100; ++i)
    CHECK(fk_sample(logits.data(), n, 0.8f, 10, 0.9f, &r1, scratch.data()) == fk_sample(logits.data(), n, 0.8f, 10, 0.9f, &r2, scratch.data()));
  const std::size_t am = fk_argmax(logits.data(), n);
  CHECK(fk_sample(logits.data(), n, 0.0f, 0, 1.0f, &r1, scratch.data()) == am);
  CHECK(fk_sample(logits.data(), n, 1.0f, 1, 1.0f, &r1, scratch.data()) == am);

  // references by sorting
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return logits[a] > logits[b]; });
  const double temp = 0.7;
  std::vector<double> p(n);
  double z = 0;
  for (std::size_t i = 0; i < n; ++i) z += (p[i] = std::exp((logits[i] - logits[am]) / temp));
  for (auto& v : p) v /= z;
  // top-p 0.6 nucleus (no top-k): smallest prefix of the sorted order reaching 0.6
  std::vector<bool> nucleus(n, false);
  double cum = 0;
  for (std::size_t i = 0; i < n && cum < 0.6; ++i) {
    nucleus[order[i]] = true;
    cum += p[order[i]];
  }
  std::vector<int> hits(n, 0), hits_k(n, 0), hits_all(n, 0);
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) {
    hits[fk_sample(logits.data(), n, static_cast<float>(temp), 0, 0.6f, &r1, scratch.data())]++;
    hits_k[fk_sample(logits.data(), n, static_cast<float>(temp), 5, 1.0f, &r1, scratch.data())]++;
    hits_all[fk_sample(logits.data(), n, static_cast<float>(temp), 0, 1.0f, &r1, scratch.data())]++;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!nucleus[i]) CHECK(hits[i] == 0);
    const bool in_top5 = std::find(order.begin(), order.begin() + 5, i) != order.begin() + 5;
    if (!in_top5) CHECK(hits_k[i] == 0);
    // full distribution: within 5 binomial standard deviations of the expected count
    const double e = p[i] * draws, sd = std::sqrt(draws * p[i] * (1 - p[i]));
    CHECK(std::fabs(hits_all[i] - e) <= 5 * sd + 1);
  }
  std::size_t used5 = 0;
  for (std::size_t i = 0; i < n; ++i) used5 += hits_k[i] > 0;
  CHECK(used5 == 5);
}

TEST_CASE("sampling: min-p keeps exactly the tokens at least min_p times as likely as the best") {
  const std::size_t n = 40;
  std::vector<float> logits(n), scratch(n);
  fill_f32(logits.data(), n, -4, 4);
  const std::size_t am = fk_argmax(logits.data(), n);
  const float temp = 1.3f, min_p = 0.2f;
  std::vector<bool> kept(n);
  for (std::size_t i = 0; i < n; ++i) kept[i] = std::exp((logits[i] - logits[am]) / temp) >= min_p;
  fk_rng r;
  fk_rng_seed(&r, 11);
  const fk_sampler how{.temp = temp, .top_k = 0, .top_p = 1.0f, .min_p = min_p};
  std::vector<int> hits(n, 0);
  for (int i = 0; i < 20000; ++i) hits[fk_sample_with(logits.data(), n, &how, &r, scratch.data())]++;
  for (std::size_t i = 0; i < n; ++i) {
    INFO("token " << i);
    if (kept[i]) CHECK(hits[i] > 0);  // p >= 0.2 p_max of <= 40 tokens: >= 100 expected hits in 20000
    else CHECK(hits[i] == 0);
  }
  // min-p 0 is fk_sample's behaviour, draw for draw; min-p 1 keeps the best token only
  fk_rng a, b;
  fk_rng_seed(&a, 3);
  fk_rng_seed(&b, 3);
  const fk_sampler off{.temp = 0.9f, .top_k = 7, .top_p = 0.8f, .min_p = 0.0f};
  for (int i = 0; i < 200; ++i) CHECK(fk_sample_with(logits.data(), n, &off, &a, scratch.data()) == fk_sample(logits.data(), n, 0.9f, 7, 0.8f, &b, scratch.data()));
  const fk_sampler best_only{.temp = 5.0f, .top_k = 0, .top_p = 1.0f, .min_p = 1.0f};
  for (int i = 0; i < 50; ++i) CHECK(fk_sample_with(logits.data(), n, &best_only, &a, scratch.data()) == am);
}

TEST_CASE("repetition penalty: once per distinct recent token, by the logit's sign") {
  std::vector<float> logits = {2.0f, -2.0f, 0.0f, 4.0f, -1.0f};
  const std::int32_t recent[] = {0, 1, 0, 2, 7, -3, 1};  // repeats, an id past n, a negative id
  fk_repeat_penalty(logits.data(), logits.size(), recent, std::size(recent), 2.0f);
  CHECK(logits == std::vector<float>{1.0f, -4.0f, 0.0f, 4.0f, -1.0f});
  fk_repeat_penalty(logits.data(), logits.size(), recent, std::size(recent), 1.0f);  // 1: off
  CHECK(logits == std::vector<float>{1.0f, -4.0f, 0.0f, 4.0f, -1.0f});
}

TEST_CASE("sampling: the same seed gives the same tokens on every ISA path") {
  const std::size_t n = 151936;  // Qwen2 vocabulary: exercises the vector bodies and tails
  std::vector<float> logits(n), scratch(n);
  std::normal_distribution<float> d(0.0f, 3.0f);
  for (auto& v : logits) v = d(rng());
  std::vector<std::size_t> first;
  for_each_isa([&](fk_isa) {
    fk_rng r;
    fk_rng_seed(&r, 7);
    std::vector<std::size_t> got;
    for (int i = 0; i < 8; ++i) got.push_back(fk_sample(logits.data(), n, 0.9f, i % 2 ? 50 : 0, i % 3 ? 0.95f : 1.0f, &r, scratch.data()));
    if (first.empty()) first = got;
    CHECK(got == first);
  });
}

// ---- the C11 build --------------------------------------------------------------------------
TEST_CASE("C11 translation units: same results as C++, pinned build is constant") {
  const std::size_t K = 127, N = 65;
  std::vector<float> x(K), yc(N), ycpp(N);
  std::vector<uint16_t> W(N * K);
  fill_f32(x.data(), K);
  fill_bf16(W.data(), N * K);
  for_each_isa([&](fk_isa isa) {
    // C keeps its own ISA state (static inline: per translation unit), so force it there too
    REQUIRE(fk_c_api_force(static_cast<int>(isa)) == 1);
    CHECK(fk_c_api_isa() == static_cast<int>(isa));
    const int am = fk_c_api_gemv(x.data(), K, W.data(), N, yc.data());
    fk_gemv_bf16(x.data(), K, W.data(), N, nullptr, ycpp.data());
    CHECK(std::memcmp(yc.data(), ycpp.data(), N * 4) == 0);
    CHECK(static_cast<std::size_t>(am) == fk_argmax(ycpp.data(), N));
  });
  fk_c_api_force(static_cast<int>(fk_isa_detect()));
  CHECK(fk_c_pinned_isa() == FK_ISA_SCALAR);
  std::vector<uint16_t> w(K);
  fill_bf16(w.data(), K);
  std::vector<float> a(2 * K), b(2 * K);
  fk_c_pinned_rmsnorm(x.data(), w.data(), 1, K, a.data());
  fk_isa_force(FK_ISA_SCALAR);
  fk_rmsnorm(x.data(), w.data(), 1, K, 1e-6f, b.data());
  fk_isa_force(fk_isa_detect());
  CHECK(std::memcmp(a.data(), b.data(), K * 4) == 0);
}

// fk_sequence.h: a generation loop's ids and positions, control flow's byte moves.
TEST_CASE("fk_sequence: argmax rows, not_in, store_at, increment, positions, fills, copies") {
  const float x[6] = {1.0f, 3.0f, 3.0f, NAN, -1.0f, -2.0f};
  std::int32_t best[2] = {-5, -5};
  fk_argmax_rows(x, 2, 3, best);
  CHECK(best[0] == 1);  // the first of two equal largest
  CHECK(best[1] == 1);  // NaN never wins
  const std::int32_t ids[4] = {7, 2, 0, 9};
  std::uint8_t none[4]{};
  fk_not_in(ids, 4, 9, 0, -1, -1, none);
  CHECK((none[0] == 1 && none[1] == 1 && none[2] == 0 && none[3] == 0));
  std::int32_t buf[3] = {-1, -1, -1};
  const std::int32_t value = 42, inside = 2, outside = 3, negative = -1;
  CHECK(fk_store_at(buf, 3, &value, &inside) == 0);
  CHECK(buf[2] == 42);
  CHECK(fk_store_at(buf, 3, &value, &outside) == -1);
  CHECK(fk_store_at(buf, 3, &value, &negative) == -1);
  CHECK((buf[0] == -1 && buf[1] == -1));  // nothing written by a refused store
  std::int32_t counts[2] = {1, INT32_MAX - 1}, next[2] = {0, 0};
  CHECK(fk_increment_i32(counts, 2, 1, next) == 0);
  CHECK((next[0] == 2 && next[1] == INT32_MAX));
  CHECK(fk_increment_i32(next, 2, 1, counts) == -1);
  CHECK((counts[0] == 1 && counts[1] == INT32_MAX - 1));  // nothing written on overflow
  std::int32_t position = 0;
  fk_next_position(5, 12, &position);
  CHECK(position == 17);
  std::int32_t filled[3]{};
  fk_fill_i32(3, -1, filled);
  CHECK((filled[0] == -1 && filled[2] == -1));
  const std::uint8_t yes = 1, no = 0;
  std::int32_t a[2] = {1, 2}, b[2] = {3, 4}, out[2]{};
  fk_select_bytes(&yes, a, b, sizeof a, out);
  CHECK((out[0] == 1 && out[1] == 2));
  fk_select_bytes(&no, a, b, sizeof a, a);  // out may be an input
  CHECK((a[0] == 3 && a[1] == 4));
  fk_copy_bytes(b, sizeof b, out);
  CHECK((out[0] == 3 && out[1] == 4));
}

// fk_pointwise.h: graph files' f32 math, broadcast as spans, against the same math written here.
TEST_CASE("fk_pointwise: unary and binary ops, spans, fills") {
  const float x[4] = {-2.0f, -0.5f, 0.0f, 3.0f};
  float out[4]{};
  fk_unary_f32(x, 4, FK_RELU, out);
  CHECK((out[0] == 0.0f && out[1] == 0.0f && out[2] == 0.0f && out[3] == 3.0f));
  fk_unary_f32(x, 4, FK_SIGMOID, out);
  for (int i = 0; i < 4; ++i) CHECK(out[i] == 1.0f / (1.0f + std::exp(-x[i])));
  fk_unary_f32(x, 4, FK_GELU, out);
  for (int i = 0; i < 4; ++i) CHECK(out[i] == 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f)));
  fk_unary_f32(x, 4, FK_NEG, out);
  CHECK((out[0] == 2.0f && out[3] == -3.0f));
  fk_unary_f32(x, 4, 99, out);  // no such op: NaN, never stale bytes
  CHECK(std::isnan(out[0]));
  // [2, 2] - a row [2] (inner 1, extent 2) and - a column [2, 1] (inner 2, extent 2).
  const float m[4] = {10, 20, 30, 40}, v[2] = {1, 2};
  fk_binary_f32(m, 1, 4, v, 1, 2, 4, FK_SUB, out);
  CHECK((out[0] == 9 && out[1] == 18 && out[2] == 29 && out[3] == 38));
  fk_binary_f32(m, 1, 4, v, 2, 2, 4, FK_SUB, out);
  CHECK((out[0] == 9 && out[1] == 19 && out[2] == 28 && out[3] == 38));
  std::uint8_t flags[4]{};
  const float threshold = 25;
  fk_binary_f32(m, 1, 4, &threshold, 1, 1, 4, FK_GT, flags);  // a scalar
  CHECK((flags[0] == 0 && flags[1] == 0 && flags[2] == 1 && flags[3] == 1));
  fk_fill_f32(4, -1.5f, out);
  CHECK((out[0] == -1.5f && out[3] == -1.5f));
  fk_arange_f32(4, out);
  CHECK((out[0] == 0 && out[3] == 3));
}
