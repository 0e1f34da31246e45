// `fused bench kernels [--threads N] [--format text|json]`: kernel figures against this machine's own
// ceilings, measured in the same run.
//   read bandwidth: a streaming sum over a 1 GiB buffer (>> any LLC), SIMD loads, N threads;
//   peaks: register-only loops of the instruction a kernel uses (vdpbf16ps, tdpbf16ps, vfmadd231ps).
// GEMV streams distinct weight copies laid end to end through that same 1 GiB buffer, so every rep reads
// weights from DRAM, never from cache. Every figure is the median of several repetitions, and each
// repetition of a case is paired with a repetition of its ceiling (ceiling, case, ceiling, case, ...):
// on a shared machine the load changes by the second, and a ratio is only meaningful when both halves
// saw the same conditions.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.hpp"
#include "cli.hpp"
#include "fk_kernels.h"

namespace fused::cli::cmd_bench_kernels {

using namespace fused::bench;

struct bench_case {
  std::string name;
  int threads;
  double value;
  std::string unit;
  double ceiling;
  std::string ceiling_what;
};

// Interleaved medians: {median of ceiling(), median of work()} as rates, both already in their units.
template <class C, class W>
std::pair<double, double> paired(int reps, C&& ceiling, W&& work) {
  std::vector<double> c, w;
  for (int r = 0; r < reps; ++r) {
    c.push_back(ceiling());
    w.push_back(work());
  }
  return {median(c), median(w)};
}

// ---- ceilings -----------------------------------------------------------------------------------
#if FK_X86

// 16 independent accumulator chains cover the latency x ports of either instruction. The inner loops are
// unrolled by pragma: at -O2 g++ 12 keeps the array in memory otherwise, and measures store forwarding.
FK_TARGET_AVX512 double peak_dpbf16_flops(long iters) {
  __m512 acc[16];
  for (int j = 0; j < 16; ++j) acc[j] = _mm512_set1_ps(static_cast<float>(j));
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80), b = (__m512bh)_mm512_set1_epi32(0x3c003c00);
  for (long i = 0; i < iters; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], a, b);
  __m512 s = acc[0];
  for (int j = 1; j < 16; ++j) s = _mm512_add_ps(s, acc[j]);
  g_sink = _mm512_reduce_add_ps(s);
  return static_cast<double>(iters) * 16 * 16 * 2 * 2;  // 16 lanes x 2 pairs x (mul + add)
}
FK_TARGET_AVX512 double peak_fma512_flops(long iters) {
  __m512 acc[16];
  for (int j = 0; j < 16; ++j) acc[j] = _mm512_set1_ps(static_cast<float>(j));
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-3f);
  for (long i = 0; i < iters; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
  __m512 s = acc[0];
  for (int j = 1; j < 16; ++j) s = _mm512_add_ps(s, acc[j]);
  g_sink = _mm512_reduce_add_ps(s);
  return static_cast<double>(iters) * 16 * 16 * 2;
}
FK_TARGET_AVX2 double peak_fma256_flops(long iters) {
  __m256 acc[12];
  for (int j = 0; j < 12; ++j) acc[j] = _mm256_set1_ps(static_cast<float>(j));
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-3f);
  for (long i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int j = 0; j < 12; ++j) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
  __m256 s = acc[0];
  for (int j = 1; j < 12; ++j) s = _mm256_add_ps(s, acc[j]);
  g_sink = fk__hsum256(s);
  return static_cast<double>(iters) * 12 * 8 * 2;
}
// Four independent C tiles, A and B loaded once: the TMUL unit's register-only rate.
FK_TARGET_AMX double peak_amx_flops(long iters) {
  alignas(64) uint16_t ab[16 * 32] = {};
  alignas(64) float c[16 * 16] = {};
  fk__amx_tilecfg cfg;
  std::memset(&cfg, 0, sizeof cfg);
  cfg.palette_id = 1;
  for (int t = 0; t < 8; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;
  _tile_loadconfig(&cfg);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, ab, 64);
  _tile_loadd(6, ab, 64);
  for (long i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 6);
    _tile_dpbf16ps(2, 4, 6);
    _tile_dpbf16ps(3, 4, 6);
  }
  _tile_stored(0, c, 64);
  _tile_release();
  g_sink = c[0];
  return static_cast<double>(iters) * 4 * 16 * 16 * 32 * 2;
}

// Study for the GEMV design (not a kernel): vdpbf16ps against x rounded to bf16 once, with the
// 4-row blocking and next-group prefetch fk_gemv_bf16's widening loop had when this study was made
// (it now reads 8 long streams, or 16 rows at a time on the AVX-512 BF16 path;
// docs/history/PERFORMANCE-2026-11.md). K % 32 == 0 and N % 4 == 0 here.
FK_TARGET_AVX512 void gemv_dpbf16_study(const uint16_t* xb, std::size_t K, const uint16_t* W, std::size_t N, float* y,
                                        std::size_t n0, std::size_t n1) {
  for (std::size_t n = n0; n < n1; n += 4) {
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    const uint16_t* w = W + n * K;
    const bool pf = n + 8 <= N;
    for (std::size_t k = 0; k < K; k += 32) {
      const __m512bh xv = (__m512bh)_mm512_loadu_si512(xb + k);
      if (pf)
        for (std::size_t r = 0; r < 4; ++r) _mm_prefetch(reinterpret_cast<const char*>(w + (4 + r) * K + k), _MM_HINT_T0);
      for (std::size_t r = 0; r < 4; ++r) acc[r] = _mm512_dpbf16_ps(acc[r], (__m512bh)_mm512_loadu_si512(w + r * K + k), xv);
    }
    for (std::size_t r = 0; r < 4; ++r) y[n + r] = _mm512_reduce_add_ps(acc[r]);
  }
}
#endif


// GFLOP/s of a register-only loop run by nt threads at once (one pass).
template <class F>
double peak_gflops(int nt, long iters, F&& f) {
  double flops_per_thread = 0;
  const double t = seconds([&] {
    BENCH_OMP(omp parallel num_threads(nt))
    {
      const double fl = f(iters);
      BENCH_OMP(omp master)
      flops_per_thread = fl;
    }
  });
  return flops_per_thread * nt / t / 1e9;
}

void print(const std::vector<bench_case>& cs, bool json) {
  if (json) {
    std::printf("{\"cases\":[");
    for (std::size_t i = 0; i < cs.size(); ++i) {
      const auto& c = cs[i];
      std::printf("%s{\"name\":\"%s\",\"threads\":%d,\"value\":%.4g,\"unit\":\"%s\",\"ceiling\":%.4g,\"ceiling_what\":\"%s\",\"ratio\":%.4f}",
                  i ? "," : "", c.name.c_str(), c.threads, c.value, c.unit.c_str(), c.ceiling, c.ceiling_what.c_str(),
                  c.value / c.ceiling);
    }
    std::printf("]}\n");
    return;
  }
  std::printf("%-36s %7s %12s %-8s %12s  %-28s %6s\n", "case", "threads", "value", "unit", "ceiling", "ceiling is", "ratio");
  for (const auto& c : cs)
    std::printf("%-36s %7d %12.2f %-8s %12.2f  %-28s %6.2f\n", c.name.c_str(), c.threads, c.value, c.unit.c_str(), c.ceiling,
                c.ceiling_what.c_str(), c.value / c.ceiling);
}

struct options {
  long long threads = 0;
  std::string format = "text";
  bool study = false;
};

int run(const options& o) {
  int nt = o.threads > 0 ? static_cast<int>(o.threads) : fk_get_threads();
  const std::string& format = o.format;
  const bool study = o.study;
  const fk_isa isa = fk_isa_active();
  auto note = [&](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); };
#ifndef _OPENMP
  if (nt > 1) note("fused bench kernels: built without OpenMP, so the kernels and ceilings run on 1 thread");
  nt = 1;
#endif
  fk_set_threads(nt);
  note("fused bench kernels: ISA " + std::string(fk_isa_name(isa)) + ", " + std::to_string(nt) + " thread(s)");

  // One 1 GiB buffer: first the bandwidth ceiling (as floats), then GEMV weights and KV caches (as bf16).
  const std::size_t bytes = std::size_t{1} << 30;
  std::vector<uint16_t> big(bytes / 2);
  BENCH_OMP(omp parallel for schedule(static) num_threads(nt))
  for (std::size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<uint16_t>(0x3c00 | ((i * 2654435761u) >> 20 & 0x3ff));  // finite bf16 in [2^-7, 2^-5)
  const float* bf = reinterpret_cast<const float*>(big.data());
  read_bandwidth(bf, bytes / 4, nt);  // warm-up: page faults, frequency
  auto bandwidth = [&] { return read_bandwidth(bf, bytes / 4, nt); };
  const int reps = 7;

  std::vector<bench_case> cases;
  // ---- GEMV: weights streamed from DRAM ----
  struct shape {
    std::size_t N, K;
  };
  for (shape s : {shape{4864, 896}, shape{896, 4864}, shape{151936, 896}}) {
    const std::size_t wbytes = s.N * s.K * 2, copies = bytes / wbytes;
    std::vector<float> x(s.K, 0.01f), y(s.N);
    auto pass = [&] {
      for (std::size_t c = 0; c < copies; ++c) fk_gemv_bf16(x.data(), s.K, big.data() + c * s.N * s.K, s.N, nullptr, y.data());
    };
    pass();
    const auto [bw, gbs] = paired(reps, bandwidth, [&] { return static_cast<double>(wbytes * copies) / seconds(pass) / 1e9; });
    cases.push_back({"gemv [" + std::to_string(s.N) + "x" + std::to_string(s.K) + "]", nt, gbs, "GB/s", bw, "read bandwidth"});
#if FK_X86
    if (study && isa >= FK_ISA_AVX512BF16) {
      std::vector<uint16_t> xb(s.K);
      fk_f32_to_bf16(x.data(), xb.data(), s.K);
      auto pass_dp = [&] {
        for (std::size_t c = 0; c < copies; ++c) {
          const uint16_t* W = big.data() + c * s.N * s.K;
          const std::size_t blocks = s.N / 64;
  BENCH_OMP(omp parallel for schedule(static) num_threads(nt))
          for (std::size_t b = 0; b < blocks; ++b) gemv_dpbf16_study(xb.data(), s.K, W, s.N, y.data(), b * 64, b * 64 + 64);
        }
      };
      pass_dp();
      const auto [bw2, gbs2] = paired(reps, bandwidth, [&] { return static_cast<double>(wbytes * copies) / seconds(pass_dp) / 1e9; });
      cases.push_back({"study: gemv [" + std::to_string(s.N) + "x" + std::to_string(s.K) + "] vdpbf16ps", nt, gbs2, "GB/s", bw2,
                       "read bandwidth"});
    }
#endif
  }

  // ---- GEMM [512x896] x [896x4864]: compute bound, weights in cache after the first rep ----
  {
    const std::size_t M = 512, K = 896, N = 4864;
    std::vector<float> x(M * K), y(M * N);
    std::vector<std::uint16_t> work(fk_gemm_bf16_work_bytes(M, K) / sizeof(std::uint16_t));  // as the models plan it
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97) * 0.01f - 0.5f;
    const double flops = 2.0 * M * K * N;
    // The models give every GEMM a workspace (x rounded to bf16 once per call); --study also times the
    // bf16 paths without one (x rounded by every work item), the way they ran before.
    auto time_case = [&](const std::string& name, auto&& ceiling, const char* what, std::uint16_t* wk) {
      fk_gemm_bf16(x.data(), M, K, big.data(), N, nullptr, y.data(), wk);
      const auto [pk, gf] = paired(reps, ceiling, [&] {
        return flops / seconds([&] { fk_gemm_bf16(x.data(), M, K, big.data(), N, nullptr, y.data(), wk); }) / 1e9;
      });
      cases.push_back({name, nt, gf, "GFLOP/s", pk, what});
    };
    auto gemm_case = [&](fk_isa path, const std::string& name, auto&& ceiling, const char* what) {
      if (!fk_isa_force(path)) return;
      time_case(name, ceiling, what, work.data());
      if (study && path >= FK_ISA_AVX512BF16) time_case("study: " + name + ", no workspace", ceiling, what, nullptr);
    };
#if FK_X86
    if (isa >= FK_ISA_AVX512BF16) {
      gemm_case(FK_ISA_AVX512BF16, "gemm [512x896]x[896x4864] avx512bf16", [&] { return peak_gflops(nt, 4000000, peak_dpbf16_flops); },
                "vdpbf16ps peak");
    } else {
      note("gemm avx512bf16: skipped, this CPU lacks AVX-512 BF16");
    }
    if (fk_isa_detect() >= FK_ISA_AMX) {
      gemm_case(FK_ISA_AMX, "gemm [512x896]x[896x4864] amx", [&] { return peak_gflops(nt, 1000000, peak_amx_flops); },
                "tdpbf16ps peak");
      // study: strips per AMX work item and k per chunk (with the workspace: x rounded once per call,
      // then read in place); fk_gemm_bf16 uses FK_LIN_AMX_STRIPS and FK_LIN_AMX_KC.
      struct amx_shape {
        std::size_t strips, kc;
      };
      if (study && fk_isa_force(FK_ISA_AMX))
        for (const amx_shape sh : {amx_shape{1, 256}, amx_shape{1, 512}, amx_shape{2, 256}, amx_shape{4, 128}, amx_shape{4, 256}}) {
          const std::size_t S = (N + FK_LIN_AMX_STRIP - 1) / FK_LIN_AMX_STRIP, items = (S + sh.strips - 1) / sh.strips;
          auto items_pass = [&] {
            fk__round_x_work(x.data(), M, K, work.data());
            BENCH_OMP(omp parallel for schedule(static) num_threads(nt))
            for (std::size_t b = 0; b < items; ++b)
              fk__gemm_block_amx(x.data(), work.data(), M, K, big.data(), N, nullptr, y.data(), b * sh.strips * FK_LIN_AMX_STRIP, sh.strips, sh.kc);
          };
          items_pass();
          const auto [pk, gf] = paired(reps, [&] { return peak_gflops(nt, 1000000, peak_amx_flops); },
                                       [&] { return flops / seconds(items_pass) / 1e9; });
          cases.push_back({"study: gemm amx, " + std::to_string(sh.strips) + " strip(s) x " + std::to_string(sh.kc) + " k", nt, gf,
                           "GFLOP/s", pk, "tdpbf16ps peak"});
        }
    } else {
      note("gemm amx: skipped, this CPU/OS lacks AMX-BF16 (or the kernel refused tile permission)");
    }
    if (isa >= FK_ISA_AVX2)
      gemm_case(FK_ISA_AVX2, "gemm [512x896]x[896x4864] avx2", [&] { return peak_gflops(nt, 8000000, peak_fma256_flops); },
                "vfmadd231ps ymm peak");
    fk_isa_force(isa);
#endif
  }

  // ---- the train step's f32 GEMMs: the default model's LM head over a batch of 8 x 256 tokens ----
  // Its three products (y = x W^T, dX = dY W, dW = dY^T X) read their operands along different strides;
  // each path's ceiling is the instruction its products take. AMX takes three tdpbf16ps products per f32
  // one (kernels/fk_train.h), so its ceiling is a third of the tdpbf16ps peak.
  {
    const std::size_t rows = 2048, n_in = 256, n_out = 4096;
    std::vector<float> x(rows * n_in), w(n_out * n_in), y(rows * n_out), dx(rows * n_in), dw(n_out * n_in);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 89) * 0.01f - 0.4f;
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 61) * 0.001f - 0.03f;
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 37) * 0.002f - 0.03f;  // as dY
    const double flops = 2.0 * static_cast<double>(rows * n_in * n_out);
    struct product {
      const char* name;
      std::function<void()> call;
    };
    const product products[] = {
        {"x W^T", [&] { fk_linear_f32(x.data(), rows, n_in, w.data(), n_out, nullptr, y.data()); }},
        {"dY W", [&] { fk_linear_backward_input(y.data(), rows, n_out, w.data(), n_in, dx.data()); }},
        {"dY^T X", [&] { fk_linear_backward_weight(y.data(), rows, n_out, x.data(), n_in, dw.data()); }},
    };
    auto train_cases = [&](fk_isa path, const char* path_name, auto&& ceiling, const char* what) {
      if (!fk_isa_force(path)) return;
      for (const product& p : products) {
        p.call();
        const auto [pk, gf] = paired(reps, ceiling, [&] { return flops / seconds(p.call) / 1e9; });
        cases.push_back({std::string("train f32 ") + p.name + " [2048x256x4096] " + path_name, nt, gf, "GFLOP/s", pk, what});
      }
    };
#if FK_X86
    if (fk_isa_detect() >= FK_ISA_AMX)
      train_cases(FK_ISA_AMX, "amx", [&] { return peak_gflops(nt, 1000000, peak_amx_flops) / 3; }, "tdpbf16ps peak / 3");
    if (isa >= FK_ISA_AVX512BF16)
      train_cases(FK_ISA_AVX512BF16, "avx512", [&] { return peak_gflops(nt, 8000000, peak_fma512_flops); }, "vfmadd231ps zmm peak");
    if (isa >= FK_ISA_AVX2)
      train_cases(FK_ISA_AVX2, "avx2", [&] { return peak_gflops(nt, 8000000, peak_fma256_flops); }, "vfmadd231ps ymm peak");
    fk_isa_force(isa);
#endif
  }

  // ---- attention, Qwen2-0.5B heads: 14 query heads, 2 KV heads, head_dim 64 ----
  {
    const std::size_t nh = 14, nkv = 2, hd = 64, S = 512;
    // the products' instruction: vdpbf16ps on AVX-512 BF16 and AMX (fk_attention.h), FMAs on AVX2
    std::function<double()> product_peak;
    std::string peak_what;
#if FK_X86
    if (isa >= FK_ISA_AVX512BF16) product_peak = [&] { return peak_gflops(nt, 4000000, peak_dpbf16_flops); }, peak_what = "vdpbf16ps peak";
    else if (isa >= FK_ISA_AVX2) product_peak = [&] { return peak_gflops(nt, 8000000, peak_fma256_flops); }, peak_what = "vfmadd231ps ymm peak";
#endif
    std::vector<float> q(S * nh * hd), out(S * nh * hd);
    for (std::size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(i % 13) * 0.05f - 0.3f;
    const uint16_t* kc = big.data();
    const uint16_t* vc = big.data() + nkv * S * hd;
    fk_attention_prefill(q.data(), S, nh, kc, vc, nkv, hd, S, 0, out.data());
    // QK^T and PV over the causal triangle: 4 flops per (query, visible key, dim) per head
    const double flops = 4.0 * nh * hd * (S * (S + 1) / 2.0);
    if (product_peak) {
      const auto [pk, gf] = paired(reps, product_peak, [&] {
        return flops / seconds([&] { fk_attention_prefill(q.data(), S, nh, kc, vc, nkv, hd, S, 0, out.data()); }) / 1e9;
      });
      cases.push_back({"attention prefill S=512 (14/2/64)", nt, gf, "GFLOP/s", pk, peak_what});
    }

    // decode at KV length 4096: each call reads its own layer's cache (distinct copies through the
    // 1 GiB buffer), so the cache comes from DRAM as in a real multi-layer model. Qwen2-0.5B's shape
    // (7 query heads per KV head) and Qwen3-0.6B's (2 per KV head, head_dim 128).
    auto decode_case = [&](std::size_t heads, std::size_t kv_heads, std::size_t head_dim) {
      const std::size_t L = 4096, cap = 4096, layer = 2 * kv_heads * cap * head_dim, layers = big.size() / layer;
      std::vector<float> qd(heads * head_dim), od(heads * head_dim);
      for (std::size_t i = 0; i < qd.size(); ++i) qd[i] = static_cast<float>(i % 13) * 0.05f - 0.3f;
      auto pass = [&] {
        for (std::size_t l = 0; l < layers; ++l) {
          const uint16_t* base = big.data() + l * layer;
          fk_attention_decode(qd.data(), heads, base, base + kv_heads * cap * head_dim, kv_heads, head_dim, cap, L - 1, od.data());
        }
      };
      pass();
      const auto [bw, gbs] = paired(reps, bandwidth, [&] { return static_cast<double>(layer * 2 * layers) / seconds(pass) / 1e9; });
      cases.push_back({"attention decode kv=4096 (" + std::to_string(heads) + "/" + std::to_string(kv_heads) + "/" + std::to_string(head_dim) + ")", nt, gbs, "GB/s", bw, "read bandwidth"});
    };
    decode_case(nh, nkv, hd);
    decode_case(16, 8, 128);
  }
  print(cases, format == "json");
  return 0;
}

const fused::cli::command reg{
    "bench kernels", "each kernel's throughput against this machine's measured ceiling", [](CLI::App& app) -> fused::cli::runner {
      auto o = std::make_shared<options>();
      app.add_option("-t,--threads", o->threads, "threads; 0 = all cores")->transform(fused::cli::integer_in(0, 1024));
      app.add_option("-o,--format", o->format, "text or json")->check(fused::cli::one_of({"text", "json"}));
      app.add_flag("--study", o->study, "also time the design alternatives (docs/history/PERFORMANCE-2026-11.md)");
      const CLI::App* bench = app.get_parent();
      return [o, bench] {
        // `fused bench -t 2 kernels`: the flag went to `bench`, which does not run; say so.
        for (const CLI::Option* opt : bench->get_options())
          if (opt->count() > 0 && opt->get_name() != "--help")
            throw fused::cli::usage_error(opt->get_name() + " is a flag of `fused bench`; give `fused bench kernels` its own flags after `kernels`");
        return run(*o);
      };
    }};

}  // namespace fused::cli::cmd_bench_kernels
