// Every kernel compiled in one unit, for a C++ program whose other units define FK_KERNELS_EXTERN
// (fk_common.h): CMake's FUSED_KERNELS_ONCE builds it as the library fused_kernels_once.
#define FK_KERNELS_IMPLEMENTATION
#include "fk_kernels.h"
