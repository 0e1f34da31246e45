/* fk_pointwise_ops.h: the op codes of fk_unary_f32 and fk_binary_f32 (fk_pointwise.h). One list,
 * read by the kernels and by the ops that lower to them (fused/ops/graph_ops.hpp); no code here. */
#ifndef FK_POINTWISE_OPS_H
#define FK_POINTWISE_OPS_H

enum fk_unary_op { FK_NEG = 0, FK_EXP = 1, FK_RELU = 2, FK_SIGMOID = 3, FK_SILU = 4, FK_GELU = 5 };

/* FK_GT and after compare: their result is a bool byte (0 or 1). */
enum fk_binary_op { FK_SUB = 0, FK_MUL = 1, FK_DIV = 2, FK_GT = 3, FK_LT = 4, FK_GE = 5, FK_LE = 6, FK_EQ = 7, FK_NE = 8 };

#endif /* FK_POINTWISE_OPS_H */
