// All NN ops: each header holds one op's shape rule, in-place capability and kernel variants.
#pragma once
#include "ops/adamw.hpp"
#include "ops/sgd.hpp"
#include "ops/attention.hpp"
#include "ops/causal_attention.hpp"
#include "ops/cross_entropy.hpp"
#include "ops/elementwise.hpp"
#include "ops/embed.hpp"
#include "ops/kv_write.hpp"
#include "ops/linear.hpp"
#include "ops/rms_norm.hpp"
#include "ops/rope.hpp"
#include "ops/take_last.hpp"
