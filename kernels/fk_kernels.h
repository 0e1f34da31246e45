/* fk_kernels.h: every fused kernel (C11 / C++20). See each header for its contract and paths. */
#ifndef FK_KERNELS_H
#define FK_KERNELS_H

#include "fk_cpu.h"
#include "fk_convert.h"
#include "fk_elementwise.h"
#include "fk_linear.h"
#include "fk_rope.h"
#include "fk_attention.h"
#include "fk_sample.h"

#endif /* FK_KERNELS_H */
