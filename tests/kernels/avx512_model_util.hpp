// Shared by the two tests of the AVX-512 models (test_avx512_model.cpp: against the instructions on an
// AVX-512 CPU; test_avx512_model_avx2.cpp: against the AVX2 instructions they overlap): the operands
// (random values mixed with awkward ones) and lane-by-lane agreement.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

namespace fkt {

inline std::mt19937& model_gen() {
  static std::mt19937 g(20261124);
  return g;
}

// A float operand: a quarter each awkward (signed zeros, denormals, the largest finite values,
// infinities, NaN, rounding ties at several magnitudes, values that round to a power of two), any bit
// pattern, and (a half) uniform in [-8, 8).
inline float awkward_float() {
  static const float special[] = {0.0f,     -0.0f,     1.0f,     -1.0f,   0.5f,          -0.5f,        1.5f,
                                  2.5f,     -2.5f,     1e-40f,   -1e-42f, 1.17549435e-38f, 3.4e38f,    -3.4e38f,
                                  INFINITY, -INFINITY, NAN,      1.00390625f, 1.005859375f, 130.0f,   -126.0f,
                                  -126.5f,  4194304.5f, 8388609.0f};
  std::uniform_int_distribution<int> pick(0, 3);
  std::uniform_int_distribution<std::size_t> which(0, sizeof special / sizeof special[0] - 1);
  std::uniform_int_distribution<uint32_t> bits;
  std::uniform_real_distribution<float> u(-8.0f, 8.0f);
  switch (pick(model_gen())) {
    case 0: return special[which(model_gen())];
    case 1: {
      const uint32_t b = bits(model_gen());
      float f;
      std::memcpy(&f, &b, 4);
      return f;
    }
    default: return u(model_gen());
  }
}

// Lane-by-lane agreement of two results of n 32-bit lanes; float lanes: both NaN also agree (which NaN
// an operation returns depends on operand order, which a compiler may swap for commutative ones).
inline bool same32(const void* a, const void* b, int n, bool floats) {
  for (int i = 0; i < n; ++i) {
    uint32_t x, y;
    std::memcpy(&x, static_cast<const char*>(a) + 4 * i, 4);
    std::memcpy(&y, static_cast<const char*>(b) + 4 * i, 4);
    float fx, fy;
    std::memcpy(&fx, &x, 4);
    std::memcpy(&fy, &y, 4);
    if (floats && std::isnan(fx) && std::isnan(fy)) continue;
    if (x != y) return false;
  }
  return true;
}

}  // namespace fkt
