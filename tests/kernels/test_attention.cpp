// KV cache store and causal GQA attention (prefill and decode) against a double-precision reference.
#include <algorithm>

#include "kernel_test_util.hpp"

using namespace fkt;

namespace {

struct att_problem {
  std::size_t S, n_heads, n_kv, hd, cap, pos0;
  unaligned<float> q;       // [S, n_heads*hd]
  unaligned<uint16_t> kc, vc;  // n_kv heads of cap positions in the caches' layouts (fk_k_index, fk_kv_index)
  // spare: cache positions past the last query's (never attended: NaN, as a cache's unwritten
  // positions may hold anything)
  att_problem(std::size_t S_, std::size_t nh, std::size_t nkv, std::size_t hd_, std::size_t pos0_, std::size_t spare = 3)
      : S(S_), n_heads(nh), n_kv(nkv), hd(hd_), cap(pos0_ + S_ + spare), pos0(pos0_), q(S_ * nh * hd_),
        kc(nkv * (pos0_ + S_ + spare) * hd_), vc(nkv * (pos0_ + S_ + spare) * hd_) {
    fill_f32(q.data(), q.size(), -1.5f, 1.5f);
    fill_bf16(kc.data(), kc.size(), -1.5f, 1.5f);
    fill_bf16(vc.data(), vc.size(), -1.0f, 1.0f);
    for (std::size_t g = 0; g < nkv; ++g)
      for (std::size_t p = pos0 + S; p < cap; ++p)
        for (std::size_t d = 0; d < hd; ++d) {
          kc[g * cap * hd + fk_k_index(cap, hd, p, d)] = 0x7FC0;
          vc[g * cap * hd + fk_kv_index(cap, hd, p, d)] = 0x7FC0;
        }
  }
  // Reference for query row s of head h, and its tolerance (derivation at the end). bf16_inputs: the
  // path multiplies in bf16 (the AVX-512 one, fk_attention.h): the query is rounded to bf16 as the
  // kernel rounds it, and the weights' rounding before PV enters the tolerance.
  void reference(std::size_t s, std::size_t h, bool bf16_inputs, std::vector<double>& out, double& tol) const {
    const std::size_t g = h / (n_heads / n_kv), p = pos0 + s, L = p + 1;
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    std::vector<float> qr(q.data() + s * n_heads * hd + h * hd, q.data() + s * n_heads * hd + (h + 1) * hd);
    if (bf16_inputs)  // vcvtne2ps2bf16: round to nearest even, denormals to 0 (none are drawn here)
      for (float& x : qr) x = bf(fk_f32_to_bf16_1(x));
    std::vector<double> sc(L);
    double mx = -1e300, es = 0;
    for (std::size_t j = 0; j < L; ++j) {
      double a = 0, mag = 0;
      for (std::size_t d = 0; d < hd; ++d) {
        const double t = static_cast<double>(qr[d]) * bf(kc[g * cap * hd + fk_k_index(cap, hd, j, d)]);
        a += t;
        mag += std::fabs(t);
      }
      sc[j] = a * scale;
      mx = std::max(mx, sc[j]);
      es = std::max(es, static_cast<double>(hd + 2) * kU * mag * scale);
    }
    double z = 0, vmax = 0;
    out.assign(hd, 0.0);
    for (std::size_t j = 0; j < L; ++j) {
      const double w = std::exp(sc[j] - mx);
      z += w;
      for (std::size_t d = 0; d < hd; ++d) {
        const double v = bf(vc[g * cap * hd + fk_kv_index(cap, hd, j, d)]);
        out[d] += w * v;
        vmax = std::max(vmax, std::fabs(v));
      }
    }
    for (auto& v : out) v /= z;
    // Tolerance. Each f32 score is off by at most e_s = gamma_{hd+1} * scale * sum_d |q_d k_d| (f32 dot,
    // the scale multiply adds one u). A weight exp(s_j - m) then carries relative error <= 2 e_s (s_j and
    // m) + eps_exp (1e-6 bounds both the vector polynomial and expf). The f32 sums l = sum p and
    // o = sum p v over L keys add gamma_L relative to sum p |v| <= l * vmax; rescaling by exp(m_old-m_new)
    // multiplies o and l by the same float, so it cancels in o / l up to one rounding per key block.
    // out = o / l: |err| <= vmax * (2 (2 e_s + eps_exp) + 2 gamma_{L + L/32 + 2}).
    // bf16 inputs: vdpbf16ps adds two exact products per step, one rounding each (the same gamma). The
    // weights in o are rounded to bf16 (relative 2^-9 each, l keeps the f32 ones): at most 2^-9 vmax
    // more, plus 2^-126 per key where a weight that small is flushed to 0.
    tol = vmax * (4 * es + 2e-6 + 2 * static_cast<double>(L + L / 32 + 4) * kU) + 1e-30;
    if (bf16_inputs) tol += vmax * (0x1p-9 + static_cast<double>(L) * 0x1p-126);
  }
};

void check_rows(const att_problem& P, const float* out, std::size_t s_first, std::size_t rows, const char* what) {
  int bad = 0;
  std::vector<double> ref;
  double tol = 0;
  const bool bf16_inputs = fk_isa_active() >= FK_ISA_AVX512BF16;
  for (std::size_t s = 0; s < rows; ++s)
    for (std::size_t h = 0; h < P.n_heads; ++h) {
      P.reference(s_first + s, h, bf16_inputs, ref, tol);
      for (std::size_t d = 0; d < P.hd; ++d) {
        const double got = out[s * P.n_heads * P.hd + h * P.hd + d];
        if (!(std::fabs(got - ref[d]) <= tol) && bad++ < 5)
          CHECK_MESSAGE(false, what << " row " << s_first + s << " head " << h << " d " << d << ": " << got << " vs " << ref[d]
                                    << " tol " << tol);
      }
    }
  CHECK(bad == 0);
}

void run_case(std::size_t S, std::size_t group, std::size_t n_kv, std::size_t hd, std::size_t pos0, bool decode_all_rows,
              std::size_t spare = 3) {
  CAPTURE(S);
  CAPTURE(group);
  CAPTURE(n_kv);
  CAPTURE(hd);
  CAPTURE(pos0);
  CAPTURE(spare);
  const std::size_t nh = group * n_kv;
  att_problem P(S, nh, n_kv, hd, pos0, spare);
  unaligned<float> out(S * nh * hd, NAN);
  fk_attention_prefill(P.q.data(), S, nh, P.kc.data(), P.vc.data(), n_kv, hd, P.cap, pos0, out.data());
  check_rows(P, out.data(), 0, S, "prefill");
  // decode of row s (position pos0 + s) must agree with prefill's row s (both within tol of the reference)
  unaligned<float> dec(nh * hd, NAN);
  for (std::size_t s = 0; s < S; s += decode_all_rows ? 1 : std::max<std::size_t>(1, S / 3)) {
    fk_attention_decode(P.q.data() + s * nh * hd, nh, P.kc.data(), P.vc.data(), n_kv, hd, P.cap, pos0 + s, dec.data());
    check_rows(P, dec.data(), s, 1, "decode");
    // same row arithmetic and key blocking (fk_attention.h): decode equals the prefill row bit for bit
    CHECK(std::memcmp(dec.data(), out.data() + s * nh * hd, nh * hd * sizeof(float)) == 0);
  }
}

}  // namespace

TEST_CASE("the cache layouts place every (position, dim) of a head at its own element") {
  // fk_kv_index and fk_k_index are bijections of [0, cap) x [0, hd) onto [0, cap * hd): whole and partial
  // key blocks, whole and partial 16-dim chunks, an odd hd's lone last dim
  for (auto index : {&fk_kv_index, &fk_k_index})
    for (std::size_t cap : {std::size_t{1}, std::size_t{11}, std::size_t{32}, std::size_t{40}, std::size_t{97}})
      for (std::size_t hd : {std::size_t{8}, std::size_t{17}, std::size_t{24}, std::size_t{64}}) {
        CAPTURE(cap);
        CAPTURE(hd);
        std::vector<int> seen(cap * hd, 0);
        for (std::size_t p = 0; p < cap; ++p)
          for (std::size_t d = 0; d < hd; ++d) {
            const std::size_t at = index(cap, hd, p, d);
            REQUIRE(at < cap * hd);
            ++seen[at];
          }
        CHECK(std::count(seen.begin(), seen.end(), 1) == static_cast<std::ptrdiff_t>(cap * hd));
      }
  // the documented arrangements: block 32..39 of a 40-position cache has width 8. Values: dim 20 is in the
  // chunk of dims 16..23 (8 wide), which starts at 32 * 24 + 16 * 8; position 33 is key pair 0's second
  CHECK(fk_kv_index(40, 24, 33, 20) == 32 * 24 + 16 * 8 + 4 * 2 + 1);
  CHECK(fk_kv_index(40, 24, 32, 20) == 32 * 24 + 16 * 8 + 4 * 2);
  CHECK(fk_kv_index(40, 24, 5, 3) == 2 * 2 * 16 + 3 * 2 + 1);       // first block (width 32), chunk 0 (16 wide): pair 2
  CHECK(fk_kv_index(40, 24, 5, 19) == 16 * 32 + 2 * 2 * 8 + 3 * 2 + 1);  // first block, chunk 16 (8 wide)
  // block 32..40 of a 41-position cache has width 9: its last key alone after 4 pairs, its dims in order
  CHECK(fk_kv_index(41, 24, 40, 3) == 32 * 24 + 8 * 16 + 3);
  CHECK(fk_kv_index(41, 24, 40, 19) == 32 * 24 + 16 * 9 + 8 * 8 + 3);
  CHECK(fk_kv_index(41, 24, 39, 19) == 32 * 24 + 16 * 9 + 3 * 2 * 8 + 3 * 2 + 1);
  // keys: dims 20 and 21 are the pair at 20 * 8 in that block, position 33 its second
  CHECK(fk_k_index(40, 24, 33, 20) == 32 * 24 + 20 * 8 + 1 * 2);
  CHECK(fk_k_index(40, 24, 33, 21) == 32 * 24 + 20 * 8 + 1 * 2 + 1);
  CHECK(fk_k_index(40, 24, 5, 3) == 2 * 32 + 5 * 2 + 1);  // first block (width 32): pair (2, 3)
  CHECK(fk_k_index(40, 17, 5, 16) == 16 * 32 + 5);        // hd 17: dim 16 alone, its 32 positions in a row
}

TEST_CASE("kv_store and k_store write bf16 rows at their positions (fk_kv_index, fk_k_index) and nothing else") {
  for_each_isa([&](fk_isa) {
    const std::size_t S = 5, n_kv = 3, hd = 17, cap = 11, pos0 = 4;
    unaligned<float> kv(S * n_kv * hd);
    fill_f32(kv.data(), kv.size());
    for (const bool keys : {false, true}) {
      CAPTURE(keys);
      unaligned<uint16_t> cache(n_kv * cap * hd, 0xBEEF);
      (keys ? fk_k_store : fk_kv_store)(kv.data(), S, n_kv, hd, cache.data(), cap, pos0);
      for (std::size_t g = 0; g < n_kv; ++g)
        for (std::size_t p = 0; p < cap; ++p)
          for (std::size_t d = 0; d < hd; ++d) {
            const uint16_t got = cache[g * cap * hd + (keys ? fk_k_index : fk_kv_index)(cap, hd, p, d)];
            if (p >= pos0 && p < pos0 + S) CHECK(got == fk_f32_to_bf16_1(kv[(p - pos0) * n_kv * hd + g * hd + d]));
            else CHECK(got == 0xBEEF);
          }
    }
  });
}

TEST_CASE("attention prefill and decode: GQA 1..7, head_dim 32/64/128, against double reference") {
  for_each_isa([&](fk_isa) {
    for (std::size_t group = 1; group <= 7; ++group)
      for (std::size_t hd : {std::size_t{32}, std::size_t{64}, std::size_t{128}})
        run_case(group % 2 ? 40 : 9, group, group <= 3 ? 2 : 1, hd, group % 3 == 0 ? 0 : 37, false);
    run_case(1, 2, 2, 64, 0, true);     // a single token, first position
    run_case(70, 7, 2, 64, 0, true);    // several query blocks, every decode row
    run_case(33, 1, 1, 48, 100, true);  // head_dim not a multiple of 32
    run_case(5, 3, 1, 40, 3, true);     // head_dim not a multiple of 16 (AVX-512: a masked last V chunk)
    run_case(6, 2, 1, 36, 5, true);     // head_dim not a multiple of 8: a scalar dim tail in PV
    run_case(35, 5, 1, 72, 30, true);   // AVX2: 4 16-dim chunks + one 8-dim vector; row groups whose visible keys differ
    run_case(7, 2, 1, 17, 4, true);     // an odd head_dim: the key cache's last dim alone, a scalar dim tail
    run_case(45, 3, 1, 16, 0, true);    // 3 query heads per KV head: decode's scores read K without kt, 1 key vector at a time
    run_case(40, 8, 1, 64, 37, false);  // 8 query heads per KV head: two groups of 4 on AVX-512; AVX2 widens kt
    run_case(40, 9, 1, 64, 37, false);  // 9: a third group of 1; both equal prefill bit for bit
    run_case(11, 1, 1, 24, 2, true);    // AVX-512: odd key counts (a half key pair), a 16- and an 8-dim V chunk
    // the capacity's last block of an odd width, read to its end: its last value alone in the cache
    run_case(13, 3, 1, 24, 0, true, 0);  // one block of 13 keys, V chunks of 16 and 8 dims
    run_case(9, 2, 2, 64, 32, true, 0);  // a second block of 9
    run_case(5, 8, 1, 40, 28, true, 0);  // a second block of 1: two row groups, V chunks of 16, 16 and 8 dims
  });
}

TEST_CASE("attention follows scores that keep rising: the running max moves by small and large steps") {
  // Keys grow with their position, so the scores grow by about 0.4, 1.3 or 5 per key (|q_d| ~ 0.75,
  // scale 1/8: 0.094 ramp), 12, 42 or 170 per block of 32: the AVX-512 softmax lets the running max
  // stand within its slack (FK_ATT_MAX_SLACK) and moves it past that; every path must match the reference.
  for_each_isa([&](fk_isa) {
    for (float ramp : {4.0f, 14.0f, 56.0f}) {
      CAPTURE(ramp);
      att_problem P(40, 4, 2, 64, 300);
      for (std::size_t i = 0; i < P.q.size(); ++i) P.q[i] = std::fabs(P.q[i]);
      for (std::size_t g = 0; g < 2; ++g)
        for (std::size_t pos = 0; pos < P.cap; ++pos)
          for (std::size_t d = 0; d < 64; ++d) {
            uint16_t& key = P.kc[g * P.cap * 64 + fk_k_index(P.cap, 64, pos, d)];
            key = fk_f32_to_bf16_1(ramp * static_cast<float>(pos) / 64 + bf(key) * 0.01f);  // the random key as jitter
          }
      unaligned<float> out(40 * 4 * 64, NAN);
      fk_attention_prefill(P.q.data(), 40, 4, P.kc.data(), P.vc.data(), 2, 64, P.cap, 300, out.data());
      check_rows(P, out.data(), 0, 40, "prefill");
      unaligned<float> dec(4 * 64, NAN);
      fk_attention_decode(P.q.data() + 39 * 4 * 64, 4, P.kc.data(), P.vc.data(), 2, 64, P.cap, 339, dec.data());
      check_rows(P, dec.data(), 39, 1, "decode");
    }
  });
}

TEST_CASE("attention decode over long caches (split over key segments) matches the reference") {
  for_each_isa([&](fk_isa) {
    att_problem P(1, 14, 2, 64, 4095);  // 8 segments of 512 keys
    unaligned<float> dec(14 * 64);
    fk_attention_decode(P.q.data(), 14, P.kc.data(), P.vc.data(), 2, 64, P.cap, 4095, dec.data());
    check_rows(P, dec.data(), 0, 1, "decode@4095");
    att_problem Q(1, 28, 4, 128, 1400);  // Qwen2-7B heads: 3 segments, the last one short
    unaligned<float> dq(28 * 128);
    fk_attention_decode(Q.q.data(), 28, Q.kc.data(), Q.vc.data(), 4, 128, Q.cap, 1400, dq.data());
    check_rows(Q, dq.data(), 0, 1, "decode@1400 hd128");
    att_problem R(1, 7, 1, 32, 600);  // 2 segments, one query-head chunk
    unaligned<float> dr(7 * 32);
    fk_attention_decode(R.q.data(), 7, R.kc.data(), R.vc.data(), 1, 32, R.cap, 600, dr.data());
    check_rows(R, dr.data(), 0, 1, "decode@600 hd32");
  });
}

TEST_CASE("attention is bitwise independent of the thread count") {
  threads_guard tg;
  forks_on_any_work fork;
  for_each_isa([&](fk_isa) {
    att_problem P(75, 14, 2, 64, 20);
    att_problem L(1, 14, 2, 64, 4095);
    std::vector<std::vector<float>> r;
    for (int t : {1, 2, 3}) {
      fk_set_threads(t);
      std::vector<float> o(75 * 14 * 64 + 14 * 64);
      fk_attention_prefill(P.q.data(), 75, 14, P.kc.data(), P.vc.data(), 2, 64, P.cap, 20, o.data());
      fk_attention_decode(P.q.data() + 74 * 14 * 64, 14, P.kc.data(), P.vc.data(), 2, 64, P.cap, 94, o.data() + 75 * 14 * 64);
      r.push_back(o);
      // a long cache: decode is split over key segments (fixed by the position, not the thread count)
      std::vector<float> d(14 * 64);
      fk_attention_decode(L.q.data(), 14, L.kc.data(), L.vc.data(), 2, 64, L.cap, 4095, d.data());
      r.back().insert(r.back().end(), d.begin(), d.end());
    }
    CHECK(std::memcmp(r[0].data(), r[1].data(), r[0].size() * 4) == 0);
    CHECK(std::memcmp(r[0].data(), r[2].data(), r[0].size() * 4) == 0);
  });
}
