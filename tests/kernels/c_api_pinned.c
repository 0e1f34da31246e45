/* A compile-time pinned build, as the generated C uses: FK_PIN_ISA makes fk_isa_active() a constant. */
#define FK_PIN_ISA FK_ISA_SCALAR
#include "fk_kernels.h"

int fk_c_pinned_isa(void) { return (int)fk_isa_active(); }

void fk_c_pinned_rmsnorm(const float* x, const uint16_t* w, size_t rows, size_t dim, float* out) {
  fk_rmsnorm(x, w, rows, dim, 1e-6f, out);
}
