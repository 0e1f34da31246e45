/* Compiled as ISO C11 (-std=c11 -pedantic -Wall -Wextra -Werror): the kernels must be valid C, and the
 * C build must compute what the C++ build computes. Called from test_kernels.cpp. */
#include "fk_kernels.h"

/* y = W x for a small fixed problem through the C build's own dispatch; returns the argmax and writes y. */
int fk_c_api_gemv(const float* x, size_t K, const uint16_t* W, size_t N, float* y) {
  fk_gemv_bf16(x, K, W, N, NULL, y);
  return (int)fk_argmax(y, N);
}

int fk_c_api_isa(void) { return (int)fk_isa_active(); }

int fk_c_api_force(int isa) { return fk_isa_force((fk_isa)isa); }
