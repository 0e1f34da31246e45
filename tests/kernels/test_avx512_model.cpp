// The software model of AVX-512 (fk_avx512_emulate.h, which test_kernels_emulated runs the kernel
// suite on) against the instructions themselves, on a CPU that has them: every modelled intrinsic on
// random operands mixed with the awkward ones (signed zeros, denormals, infinities, NaNs, rounding
// ties), result for result. Where both results are NaN they agree whatever the payload (which NaN
// an operation returns depends on operand order, which the compiler may swap for commutative ones).
// Skipped with a message where the CPU lacks AVX-512 BF16: there the model is all there is.
#include "kernel_test_util.hpp"  // first: fk_common.h includes <immintrin.h> with its gcc 12 workaround

#define FKE_MODEL_ONLY  // the fke_* functions, without redirecting the intrinsics' names to them
#ifndef FK_AVX512_EMULATE  // (an emulated build of this file compares the model with itself: a smoke test)
#define FKE_TARGET "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"  // callable beside them
#endif
#include "fk_avx512_emulate.h"

#include <cstring>
#include <string>
#include <vector>

#include "avx512_model_util.hpp"

#if FK_X86
namespace {

using fkt::awkward_float;
using fkt::model_gen;
using fkt::same32;

struct operands {
  alignas(64) float f[3][16];
  alignas(64) uint32_t u[3][16];
  alignas(64) uint16_t h[64];
  uint32_t k;
};

operands random_operands() {
  std::mt19937& gen = model_gen();
  operands o;
  std::uniform_int_distribution<uint32_t> bits;
  std::uniform_int_distribution<int> small(0, 40);
  for (int j = 0; j < 3; ++j)
    for (int i = 0; i < 16; ++i) {
      o.f[j][i] = awkward_float();
      // shift counts and permutation indices come from the same words: keep some of them small
      o.u[j][i] = small(gen) < 20 ? static_cast<uint32_t>(small(gen)) : bits(gen);
    }
  for (auto& h : o.h) h = static_cast<uint16_t>(bits(gen));
  o.k = bits(gen);
  return o;
}

bool same16(const void* a, const void* b, int n) {
  for (int i = 0; i < n; ++i) {
    uint16_t x, y;
    std::memcpy(&x, static_cast<const char*>(a) + 2 * i, 2);
    std::memcpy(&y, static_cast<const char*>(b) + 2 * i, 2);
    const bool xn = (x & 0x7f80) == 0x7f80 && (x & 0x7f), yn = (y & 0x7f80) == 0x7f80 && (y & 0x7f);  // bf16 NaNs
    if (xn && yn) continue;
    if (x != y) return false;
  }
  return true;
}

FK_TARGET_AVX512 inline __m256i lo256(const __m512i& v) {
  __m256i r;
  std::memcpy(&r, &v, 32);
  return r;
}

// vdpbf16ps: the model follows the SDM (two fused steps, odd pair first, DAZ in, FTZ out, RNE). The
// kernels need the pairing and the order right, not the last bit, so agreement here is within 2 ulps of
// the largest term (or 2^-125 absolute, where DAZ/FTZ decide), both NaN, or the same infinity: a model
// that paired the wrong halves or dropped a product is off by whole terms and still fails.
FK_TARGET_AVX512 bool same_dot(__m512 hw, __m512 model, __m512 src, __m512bh a, __m512bh b) {
  float x[16], y[16], s[16];
  uint16_t pa[32], pb[32];
  std::memcpy(x, &hw, 64);
  std::memcpy(y, &model, 64);
  std::memcpy(s, &src, 64);
  std::memcpy(pa, &a, 64);
  std::memcpy(pb, &b, 64);
  for (int j = 0; j < 16; ++j) {
    if (std::isnan(x[j]) && std::isnan(y[j])) continue;
    if (std::isinf(x[j]) || std::isinf(y[j])) {
      if (x[j] != y[j]) return false;
      continue;
    }
    if (std::isnan(x[j]) || std::isnan(y[j])) return false;
    double big = std::fabs(static_cast<double>(s[j]));
    for (int h = 0; h < 2; ++h)
      big = std::max(big, std::fabs(static_cast<double>(fke_f32(static_cast<uint32_t>(pa[2 * j + h]) << 16)) *
                                    static_cast<double>(fke_f32(static_cast<uint32_t>(pb[2 * j + h]) << 16))));
    if (std::fabs(static_cast<double>(x[j]) - y[j]) > std::max(std::ldexp(big, -22), std::ldexp(1.0, -125))) return false;
  }
  return true;
}

// Runs every comparison once on the operands; returns the names of the intrinsics that disagreed.
FK_TARGET_AVX512 std::string disagreements(const operands& o) {
  std::string bad;
  const __m512 a = _mm512_loadu_ps(o.f[0]), b = _mm512_loadu_ps(o.f[1]), c = _mm512_loadu_ps(o.f[2]);
  const __m512i ia = _mm512_loadu_si512(o.u[0]), ib = _mm512_loadu_si512(o.u[1]);
  const __mmask16 k16 = static_cast<__mmask16>(o.k);
  const __mmask32 k32 = o.k;
  const __mmask8 k8 = static_cast<__mmask8>(o.k);
  alignas(64) unsigned char n[64], m[64];
  auto check = [&](const char* name, bool ok) {
    if (!ok) bad += std::string(bad.empty() ? "" : ", ") + name;
  };
#define FKT_PS(name, native, model)                          \
  {                                                          \
    const __m512 x_ = (native), y_ = (model);                \
    std::memcpy(n, &x_, 64);                                 \
    std::memcpy(m, &y_, 64);                                 \
    check(name, same32(n, m, 16, true));                     \
  }
#define FKT_SI(name, native, model)                          \
  {                                                          \
    const __m512i x_ = (native), y_ = (model);               \
    std::memcpy(n, &x_, 64);                                 \
    std::memcpy(m, &y_, 64);                                 \
    check(name, same32(n, m, 16, false));                    \
  }
  FKT_PS("add_ps", _mm512_add_ps(a, b), fke_mm512_add_ps(a, b));
  FKT_PS("sub_ps", _mm512_sub_ps(a, b), fke_mm512_sub_ps(a, b));
  FKT_PS("mul_ps", _mm512_mul_ps(a, b), fke_mm512_mul_ps(a, b));
  FKT_PS("div_ps", _mm512_div_ps(a, b), fke_mm512_div_ps(a, b));
  FKT_PS("max_ps", _mm512_max_ps(a, b), fke_mm512_max_ps(a, b));
  FKT_PS("min_ps", _mm512_min_ps(a, b), fke_mm512_min_ps(a, b));
  FKT_PS("fmadd_ps", _mm512_fmadd_ps(a, b, c), fke_mm512_fmadd_ps(a, b, c));
  FKT_PS("fmsub_ps", _mm512_fmsub_ps(a, b, c), fke_mm512_fmsub_ps(a, b, c));
  FKT_PS("fnmadd_ps", _mm512_fnmadd_ps(a, b, c), fke_mm512_fnmadd_ps(a, b, c));
  {  // a compiler's sequence of maxps, not an instruction: with a NaN lane, whether a NaN comes out depends
     // on the compiler's operand order, and which zero comes out of +0 vs -0 too; compared without those
    bool nan = false;
    for (float v : o.f[0]) nan = nan || std::isnan(v);
    const float x = _mm512_reduce_max_ps(a), y = fke_mm512_reduce_max_ps(a);
    check("reduce_max_ps", nan || x == y);
  }
  // scalef as the kernels use it: b an integer-valued exponent (the exp's n), a finite
  const __m512 e = _mm512_roundscale_ps(_mm512_min_ps(_mm512_max_ps(b, _mm512_set1_ps(-300.0f)), _mm512_set1_ps(300.0f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  FKT_PS("scalef_ps", _mm512_scalef_ps(a, e), fke_mm512_scalef_ps(a, e));
  FKT_PS("scalef_ps (any b)", _mm512_scalef_ps(a, b), fke_mm512_scalef_ps(a, b));
  FKT_PS("roundscale_ps 0x08", _mm512_roundscale_ps(a, 0x08), fke_mm512_roundscale_ps(a, 0x08));
  FKT_PS("roundscale_ps 0x09", _mm512_roundscale_ps(a, 0x09), fke_mm512_roundscale_ps(a, 0x09));
  FKT_PS("roundscale_ps 0x0a", _mm512_roundscale_ps(a, 0x0a), fke_mm512_roundscale_ps(a, 0x0a));
  FKT_PS("roundscale_ps 0x0b", _mm512_roundscale_ps(a, 0x0b), fke_mm512_roundscale_ps(a, 0x0b));
  FKT_PS("roundscale_ps 0x18", _mm512_roundscale_ps(a, 0x18), fke_mm512_roundscale_ps(a, 0x18));
  check("cmp_ps_mask GT_OQ", _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ) == fke_mm512_cmp_ps_mask(a, b, _CMP_GT_OQ));
  check("cmp_ps_mask EQ_OQ", _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ) == fke_mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ));
  check("cmp_ps_mask LT_OS", _mm512_cmp_ps_mask(a, b, _CMP_LT_OS) == fke_mm512_cmp_ps_mask(a, b, _CMP_LT_OS));
  check("cmp_ps_mask NEQ_UQ", _mm512_cmp_ps_mask(a, b, _CMP_NEQ_UQ) == fke_mm512_cmp_ps_mask(a, b, _CMP_NEQ_UQ));
  check("cmp_ps_mask UNORD_Q", _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q) == fke_mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q));
  check("cmp_ps_mask NLE_UQ", _mm512_cmp_ps_mask(a, b, _CMP_NLE_UQ) == fke_mm512_cmp_ps_mask(a, b, _CMP_NLE_UQ));
  check("cmp_ps_mask GE_OQ", _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ) == fke_mm512_cmp_ps_mask(a, b, _CMP_GE_OQ));
  FKT_PS("mask_mov_ps", _mm512_mask_mov_ps(a, k16, b), fke_mm512_mask_mov_ps(a, k16, b));
  FKT_PS("maskz_mov_ps", _mm512_maskz_mov_ps(k16, b), fke_mm512_maskz_mov_ps(k16, b));
  FKT_SI("mask_mov_epi32", _mm512_mask_mov_epi32(ia, k16, ib), fke_mm512_mask_mov_epi32(ia, k16, ib));
  FKT_SI("and_si512", _mm512_and_si512(ia, ib), fke_mm512_and_si512(ia, ib));
  FKT_SI("or_si512", _mm512_or_si512(ia, ib), fke_mm512_or_si512(ia, ib));
  FKT_SI("add_epi32", _mm512_add_epi32(ia, ib), fke_mm512_add_epi32(ia, ib));
  FKT_SI("slli_epi32 3", _mm512_slli_epi32(ia, 3), fke_mm512_slli_epi32(ia, 3));
  FKT_SI("slli_epi32 16", _mm512_slli_epi32(ia, 16), fke_mm512_slli_epi32(ia, 16));
  FKT_SI("srli_epi32 16", _mm512_srli_epi32(ia, 16), fke_mm512_srli_epi32(ia, 16));
  FKT_SI("srli_epi32 31", _mm512_srli_epi32(ia, 31), fke_mm512_srli_epi32(ia, 31));
  check("cmpgt_epu32_mask", _mm512_cmpgt_epu32_mask(ia, ib) == fke_mm512_cmpgt_epu32_mask(ia, ib));
  FKT_SI("unpacklo_epi32", _mm512_unpacklo_epi32(ia, ib), fke_mm512_unpacklo_epi32(ia, ib));
  FKT_SI("unpackhi_epi32", _mm512_unpackhi_epi32(ia, ib), fke_mm512_unpackhi_epi32(ia, ib));
  FKT_SI("unpacklo_epi64", _mm512_unpacklo_epi64(ia, ib), fke_mm512_unpacklo_epi64(ia, ib));
  FKT_SI("unpackhi_epi64", _mm512_unpackhi_epi64(ia, ib), fke_mm512_unpackhi_epi64(ia, ib));
  FKT_SI("shuffle_i32x4 0x44", _mm512_shuffle_i32x4(ia, ib, 0x44), fke_mm512_shuffle_i32x4(ia, ib, 0x44));
  FKT_SI("shuffle_i32x4 0xee", _mm512_shuffle_i32x4(ia, ib, 0xee), fke_mm512_shuffle_i32x4(ia, ib, 0xee));
  FKT_SI("shuffle_i32x4 0x88", _mm512_shuffle_i32x4(ia, ib, 0x88), fke_mm512_shuffle_i32x4(ia, ib, 0x88));
  FKT_SI("shuffle_i32x4 0xdd", _mm512_shuffle_i32x4(ia, ib, 0xdd), fke_mm512_shuffle_i32x4(ia, ib, 0xdd));
  FKT_SI("shuffle_i32x4 0x1b", _mm512_shuffle_i32x4(ia, ib, 0x1b), fke_mm512_shuffle_i32x4(ia, ib, 0x1b));
  {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(o.h));
    FKT_SI("cvtepu16_epi32", _mm512_cvtepu16_epi32(h), fke_mm512_cvtepu16_epi32(h));
    const __m256i x = _mm512_cvtepi32_epi16(ia), y = fke_mm512_cvtepi32_epi16(ia);
    check("cvtepi32_epi16", std::memcmp(&x, &y, 32) == 0);
  }
  {
    const __m256 x = _mm512_extractf32x8_ps(a, 1), y = fke_mm512_extractf32x8_ps(a, 1);
    const __m256 x0 = _mm512_castps512_ps256(a), y0 = fke_mm512_castps512_ps256(a);
    check("extractf32x8_ps / castps512_ps256", std::memcmp(&x, &y, 32) == 0 && std::memcmp(&x0, &y0, 32) == 0);
  }
  {
    const __m256 x = _mm256_permutex2var_ps(_mm512_castps512_ps256(a), lo256(ib), _mm512_castps512_ps256(b));
    const __m256 y = fke_mm256_permutex2var_ps(_mm512_castps512_ps256(a), lo256(ib), _mm512_castps512_ps256(b));
    check("permutex2var_ps (256)", same32(&x, &y, 8, true));
  }
  // masked loads and stores (in bounds here; that masked-out elements are never read is what the
  // model adds, and ASan checks it in the emulated suite)
  FKT_PS("maskz_loadu_ps", _mm512_maskz_loadu_ps(k16, o.f[2]), fke_mm512_maskz_loadu_ps(k16, o.f[2]));
  FKT_SI("maskz_loadu_epi16", _mm512_maskz_loadu_epi16(k32, o.h), fke_mm512_maskz_loadu_epi16(k32, o.h));
  {
    const __m256 x = _mm256_maskz_loadu_ps(k8, o.f[0]), y = fke_mm256_maskz_loadu_ps(k8, o.f[0]);
    const __m256i xh = _mm256_maskz_loadu_epi16(k16, o.h), yh = fke_mm256_maskz_loadu_epi16(k16, o.h);
    const __m128i xq = _mm_maskz_loadu_epi16(k8, o.h), yq = fke_mm_maskz_loadu_epi16(k8, o.h);
    check("256/128-bit maskz loads", same32(&x, &y, 8, true) && std::memcmp(&xh, &yh, 32) == 0 && std::memcmp(&xq, &yq, 16) == 0);
    alignas(64) float sx[16], sy[16];
    std::memcpy(sx, o.f[1], 64);
    std::memcpy(sy, o.f[1], 64);
    _mm512_mask_storeu_ps(sx, k16, a);
    fke_mm512_mask_storeu_ps(sy, k16, a);
    alignas(64) uint16_t hx[16], hy[16];
    std::memcpy(hx, o.h + 16, 32);
    std::memcpy(hy, o.h + 16, 32);
    _mm256_mask_storeu_epi16(hx, k16, lo256(ia));
    fke_mm256_mask_storeu_epi16(hy, k16, lo256(ia));
    check("masked stores", std::memcmp(sx, sy, 64) == 0 && std::memcmp(hx, hy, 32) == 0);
  }
  // bf16: conversion of two f32 vectors, and the dot product with its DAZ / FTZ / fused steps
  {
    const __m512bh x = _mm512_cvtne2ps_pbh(a, b), y = fke_mm512_cvtne2ps_pbh(a, b);
    std::memcpy(n, &x, 64);
    std::memcpy(m, &y, 64);
    check("cvtne2ps_pbh", same16(n, m, 32));
    const __m512bh p = fke_mm512_cvtne2ps_pbh(b, c), q = (__m512bh)_mm512_loadu_si512(o.h);
    check("dpbf16_ps", same_dot(_mm512_dpbf16_ps(a, p, q), fke_mm512_dpbf16_ps(a, p, q), a, p, q));
    check("dpbf16_ps (converted operands)", same_dot(_mm512_dpbf16_ps(c, y, p), fke_mm512_dpbf16_ps(c, y, p), c, y, p));
  }
#undef FKT_PS
#undef FKT_SI
  return bad;
}

}  // namespace

TEST_CASE("the AVX-512 model used by test_kernels_emulated matches the instructions") {
  if (fk_isa_detect() < FK_ISA_AVX512BF16) {
    MESSAGE("skipping: this CPU lacks AVX-512 BF16, so the model cannot be compared with the instructions here");
    return;
  }
  for (int trial = 0; trial < 2000; ++trial) {
    const operands o = random_operands();
    const std::string bad = disagreements(o);
    INFO("trial " << trial);
    CHECK_MESSAGE(bad.empty(), "model and hardware disagree on: " << bad);
    if (!bad.empty()) break;
  }
}

// Every pair of the awkward values (quiet and signalling NaNs of both signs among them) through
// vscalefps and its model: the random trials above meet the special-case table only by chance.
FK_TARGET_AVX512 bool scalef_agrees(float a, float b) {
  const __m512 x = _mm512_scalef_ps(_mm512_set1_ps(a), _mm512_set1_ps(b));
  const __m512 y = fke_mm512_scalef_ps(_mm512_set1_ps(a), _mm512_set1_ps(b));
  return std::memcmp(&x, &y, 4) == 0;  // bit for bit, NaN payloads too
}

TEST_CASE("vscalefps and its model agree on the special-case table, bit for bit") {
  if (fk_isa_detect() < FK_ISA_AVX512BF16) {
    MESSAGE("skipping: this CPU lacks AVX-512, so the model cannot be compared with the instruction here");
    return;
  }
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.0f, 1.5f, -0.5f, 1e-40f, -1e-42f, 1.17549435e-38f, 3.4e38f, -3.4e38f,
                               INFINITY, -INFINITY, 127.0f, 128.0f, -126.0f, -149.5f, -150.0f, 300.0f, -300.0f, 401.0f, -401.0f};
  for (const uint32_t nan : {0x7fc00000u, 0xffc00000u, 0x7fc12345u, 0x7f800001u, 0xff812345u}) {
    float f;
    std::memcpy(&f, &nan, 4);
    values.push_back(f);
  }
  for (const float a : values)
    for (const float b : values) {
      INFO("a = " << a << ", b = " << b);
      CHECK(scalef_agrees(a, b));
    }
}
#else
TEST_CASE("the AVX-512 model used by test_kernels_emulated matches the instructions") { MESSAGE("skipping: not x86-64"); }
#endif
