// The AVX-512 model (fk_avx512_emulate.h) against the AVX2 instructions that do the same thing on 8
// lanes, on any CPU with AVX2: each 512-bit model result must equal the AVX2 instruction applied to
// both 256-bit halves, bit for bit (both NaN also agree, whatever the payload). That covers the rules
// the kernels lean on where no AVX-512 CPU is at hand to compare with: fused multiply-adds, max/min
// returning the second operand on NaN or equal inputs, the four rounding modes of roundscale, all 32
// compare predicates, the per-128-bit-lane unpacks, shifts, the two-source permute. (test_avx512_model.cpp
// compares every model with its own instruction where the CPU has AVX-512 BF16.)
#include "kernel_test_util.hpp"  // first: fk_common.h includes <immintrin.h> with its gcc 12 workaround

#define FKE_MODEL_ONLY  // the models, compiled for AVX2 (their default target), beside the AVX2 instructions
#include "fk_avx512_emulate.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "avx512_model_util.hpp"

#if FK_X86
namespace {

using fkt::awkward_float;
using fkt::model_gen;
using fkt::same32;

uint32_t next_u32() { return static_cast<uint32_t>(model_gen()()); }

FK_TARGET_AVX2 __m256 half(const __m512& v, int h) {
  __m256 r;
  std::memcpy(&r, reinterpret_cast<const char*>(&v) + 32 * h, 32);
  return r;
}
FK_TARGET_AVX2 __m256i halfi(const __m512i& v, int h) {
  __m256i r;
  std::memcpy(&r, reinterpret_cast<const char*>(&v) + 32 * h, 32);
  return r;
}

FK_TARGET_AVX2 std::string disagreements() {
  alignas(64) float A[16], B[16], C[16];
  alignas(64) uint32_t I[16], J[16];
  for (int i = 0; i < 16; ++i) {
    A[i] = awkward_float(), B[i] = awkward_float(), C[i] = awkward_float();
    I[i] = next_u32(), J[i] = next_u32() % 40;
  }
  __m512 a, b, c;
  __m512i ia, ib;
  std::memcpy(&a, A, 64);
  std::memcpy(&b, B, 64);
  std::memcpy(&c, C, 64);
  std::memcpy(&ia, I, 64);
  std::memcpy(&ib, J, 64);
  std::string bad;
  auto note = [&](const char* name, bool ok) {
    if (!ok) bad += std::string(bad.empty() ? "" : ", ") + name;
  };
  alignas(64) unsigned char m[64], n[64];
#define FKT_PS(name, model, avx2_of_half)               \
  {                                                     \
    const __m512 r_ = (model);                          \
    std::memcpy(m, &r_, 64);                            \
    for (int h = 0; h < 2; ++h) {                       \
      const __m256 s_ = (avx2_of_half);                 \
      std::memcpy(n + 32 * h, &s_, 32);                 \
    }                                                   \
    note(name, same32(m, n, 16, true));                  \
  }
#define FKT_SI(name, model, avx2_of_half)               \
  {                                                     \
    const __m512i r_ = (model);                         \
    std::memcpy(m, &r_, 64);                            \
    for (int h = 0; h < 2; ++h) {                       \
      const __m256i s_ = (avx2_of_half);                \
      std::memcpy(n + 32 * h, &s_, 32);                 \
    }                                                   \
    note(name, same32(m, n, 16, false));                 \
  }
  FKT_PS("add_ps", fke_mm512_add_ps(a, b), _mm256_add_ps(half(a, h), half(b, h)));
  FKT_PS("sub_ps", fke_mm512_sub_ps(a, b), _mm256_sub_ps(half(a, h), half(b, h)));
  FKT_PS("mul_ps", fke_mm512_mul_ps(a, b), _mm256_mul_ps(half(a, h), half(b, h)));
  FKT_PS("div_ps", fke_mm512_div_ps(a, b), _mm256_div_ps(half(a, h), half(b, h)));
  FKT_PS("max_ps", fke_mm512_max_ps(a, b), _mm256_max_ps(half(a, h), half(b, h)));
  FKT_PS("min_ps", fke_mm512_min_ps(a, b), _mm256_min_ps(half(a, h), half(b, h)));
  FKT_PS("fmadd_ps", fke_mm512_fmadd_ps(a, b, c), _mm256_fmadd_ps(half(a, h), half(b, h), half(c, h)));
  FKT_PS("fmsub_ps", fke_mm512_fmsub_ps(a, b, c), _mm256_fmsub_ps(half(a, h), half(b, h), half(c, h)));
  FKT_PS("fnmadd_ps", fke_mm512_fnmadd_ps(a, b, c), _mm256_fnmadd_ps(half(a, h), half(b, h), half(c, h)));
  FKT_PS("roundscale_ps 0x08", fke_mm512_roundscale_ps(a, 0x08), _mm256_round_ps(half(a, h), 0x08));
  FKT_PS("roundscale_ps 0x09", fke_mm512_roundscale_ps(a, 0x09), _mm256_round_ps(half(a, h), 0x09));
  FKT_PS("roundscale_ps 0x0a", fke_mm512_roundscale_ps(a, 0x0a), _mm256_round_ps(half(a, h), 0x0a));
  FKT_PS("roundscale_ps 0x0b", fke_mm512_roundscale_ps(a, 0x0b), _mm256_round_ps(half(a, h), 0x0b));
  FKT_PS("mask_mov_ps", fke_mm512_mask_mov_ps(a, static_cast<__mmask16>(I[0]), b),
         _mm256_blendv_ps(half(a, h), half(b, h),
                          _mm256_castsi256_ps(_mm256_sllv_epi32(_mm256_set1_epi32(static_cast<int>(I[0] >> (8 * h))),
                                                                _mm256_setr_epi32(31, 30, 29, 28, 27, 26, 25, 24)))));
  FKT_SI("unpacklo_epi32", fke_mm512_unpacklo_epi32(ia, ib), _mm256_unpacklo_epi32(halfi(ia, h), halfi(ib, h)));
  FKT_SI("unpackhi_epi32", fke_mm512_unpackhi_epi32(ia, ib), _mm256_unpackhi_epi32(halfi(ia, h), halfi(ib, h)));
  FKT_SI("unpacklo_epi64", fke_mm512_unpacklo_epi64(ia, ib), _mm256_unpacklo_epi64(halfi(ia, h), halfi(ib, h)));
  FKT_SI("unpackhi_epi64", fke_mm512_unpackhi_epi64(ia, ib), _mm256_unpackhi_epi64(halfi(ia, h), halfi(ib, h)));
  FKT_SI("slli_epi32", fke_mm512_slli_epi32(ia, 7), _mm256_slli_epi32(halfi(ia, h), 7));
  FKT_SI("srli_epi32", fke_mm512_srli_epi32(ia, 16), _mm256_srli_epi32(halfi(ia, h), 16));
  FKT_SI("add_epi32", fke_mm512_add_epi32(ia, ib), _mm256_add_epi32(halfi(ia, h), halfi(ib, h)));
  FKT_SI("and_si512", fke_mm512_and_si512(ia, ib), _mm256_and_si256(halfi(ia, h), halfi(ib, h)));
  FKT_SI("or_si512", fke_mm512_or_si512(ia, ib), _mm256_or_si256(halfi(ia, h), halfi(ib, h)));
#undef FKT_PS
#undef FKT_SI
  {
    const __m256 x = fke_mm256_permutex2var_ps(half(a, 0), halfi(ib, 0), half(b, 0));
    float want[8];
    for (int i = 0; i < 8; ++i) want[i] = (J[i] & 8) ? B[J[i] & 7] : A[J[i] & 7];
    note("permutex2var_ps (256)", same32(&x, want, 8, true));
  }
  // every predicate: vcmpps's 5-bit immediate is AVX's too
#define FKT_CMP(P)                                                                                             \
  {                                                                                                            \
    const unsigned want = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(half(a, 0), half(b, 0), P))) |  \
                          static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(half(a, 1), half(b, 1), P))) << 8; \
    note("cmp_ps_mask " #P, fke_mm512_cmp_ps_mask(a, b, P) == want);                                             \
  }
  FKT_CMP(0) FKT_CMP(1) FKT_CMP(2) FKT_CMP(3) FKT_CMP(4) FKT_CMP(5) FKT_CMP(6) FKT_CMP(7)
  FKT_CMP(8) FKT_CMP(9) FKT_CMP(10) FKT_CMP(11) FKT_CMP(12) FKT_CMP(13) FKT_CMP(14) FKT_CMP(15)
  FKT_CMP(16) FKT_CMP(17) FKT_CMP(18) FKT_CMP(19) FKT_CMP(20) FKT_CMP(21) FKT_CMP(22) FKT_CMP(23)
  FKT_CMP(24) FKT_CMP(25) FKT_CMP(26) FKT_CMP(27) FKT_CMP(28) FKT_CMP(29) FKT_CMP(30) FKT_CMP(31)
#undef FKT_CMP
  return bad;
}

}  // namespace

TEST_CASE("the AVX-512 model agrees with the AVX2 instructions it overlaps") {
  if (fk_isa_detect() < FK_ISA_AVX2) {
    MESSAGE("skipping: this CPU lacks AVX2");
    return;
  }
  for (int trial = 0; trial < 20000; ++trial) {
    const std::string bad = disagreements();
    INFO("trial " << trial);
    CHECK_MESSAGE(bad.empty(), "model and AVX2 disagree on: " << bad);
    if (!bad.empty()) break;
  }
}

// vscalefps has no AVX2 twin, so its special cases are checked here against the SDM's table itself
// (as the hardware computes it: Sapphire Rapids and Zen 5 agree with the table; test_avx512_model.cpp
// compares with the instruction wherever it exists). Bits are compared exactly, NaN payloads included.
namespace {
FK_TARGET_AVX2 uint32_t scalef_bits(float a, float b) {
  alignas(64) float x[16], y[16], r[16];
  for (int i = 0; i < 16; ++i) x[i] = a, y[i] = b;
  __m512 va, vb;
  std::memcpy(&va, x, 64);
  std::memcpy(&vb, y, 64);
  const __m512 vr = fke_mm512_scalef_ps(va, vb);
  std::memcpy(r, &vr, 64);
  uint32_t u;
  std::memcpy(&u, &r[0], 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace

TEST_CASE("the vscalefps model follows the SDM's special-case table") {
  const float qnan = from_bits(0x7fc00001u), snan = from_bits(0x7f800001u), inf = INFINITY;
  constexpr uint32_t indefinite = 0xffc00000u, plus_inf = 0x7f800000u, plus_zero = 0u;
  // a quiet NaN wins, except against an infinite exponent: +inf makes +inf, -inf makes +0
  CHECK(scalef_bits(qnan, 3.0f) == 0x7fc00001u);
  CHECK(scalef_bits(qnan, qnan) == 0x7fc00001u);
  CHECK(scalef_bits(qnan, inf) == plus_inf);
  CHECK(scalef_bits(from_bits(0xffc00001u), inf) == plus_inf);
  CHECK(scalef_bits(qnan, -inf) == plus_zero);
  // a signalling NaN in a wins, quieted, whatever b is
  CHECK(scalef_bits(snan, inf) == 0x7fc00001u);
  CHECK(scalef_bits(snan, -inf) == 0x7fc00001u);
  CHECK(scalef_bits(snan, qnan) == 0x7fc00001u);
  // then a NaN in b, quieted
  CHECK(scalef_bits(1.0f, snan) == 0x7fc00001u);
  CHECK(scalef_bits(-inf, qnan) == 0x7fc00001u);
  // infinities and zeros
  CHECK(scalef_bits(inf, -inf) == indefinite);
  CHECK(scalef_bits(0.0f, inf) == indefinite);
  CHECK(scalef_bits(-inf, 5.0f) == 0xff800000u);
  CHECK(scalef_bits(-0.0f, -inf) == 0x80000000u);
  CHECK(scalef_bits(2.0f, inf) == plus_inf);
  CHECK(scalef_bits(-2.0f, -inf) == 0x80000000u);
  // finite: a * 2^floor(b), rounded once (to a denormal here)
  CHECK(scalef_bits(1.5f, 2.7f) == std::bit_cast<uint32_t>(6.0f));
  CHECK(scalef_bits(1.5f, -149.5f) == 0x00000001u);  // 1.5 * 2^-150 = 0.75 of the least denormal -> 1 (nearest)
}
#else
TEST_CASE("the AVX-512 model agrees with the AVX2 instructions it overlaps") { MESSAGE("skipping: not x86-64"); }
#endif
