// dropout: x f32 [...] and the step count i32 [1] -> f32 [...]: in a training program each element
// kept with probability 1 - p and scaled by 1 / (1 - p), else 0; attrs.f = p, attrs.i[0] = the key
// that names this dropout site (train::dropout_key). The mask is a function of (key, step, element)
// (fk_dropout_f32): seeded, the same on any thread count, new at every optimizer step. Mode
// sensitive: in a program that does not train it is the identity. Its backward is itself, applied to
// the gradient with the same key and step.
#pragma once
#include <cstdint>

#include "common.hpp"

namespace fused::ops {

inline constexpr char dropout_kernel[] = "fk_dropout_f32";
inline constexpr attr_field dropout_attributes[] = {{"p", attr_slot::f}, {"key", attr_slot::i0}};

inline constexpr op_def dropout{
    .name = "dropout",
    .category = "elementwise",
    .min_inputs = 2,
    .max_inputs = 2,
    .infer = [](const tensor_info* const* in, int, const attrs& a) -> inferred {
      if (in[0]->type != dtype::f32) return mismatch(0, "input must be f32, got " + describe(*in[0]));
      if (!is_one_i32(*in[1])) return mismatch(1, "the step count must be i32 [1], got " + describe(*in[1]));
      if (!(a.f >= 0 && a.f < 1)) return mismatch(-1, "p must be in [0, 1)");
      return result(dtype::f32, in[0]->shp);
    },
    .in_place_input = 0,
    .mode_sensitive = true,
    .kernel = kernel_named<dropout_kernel>,
    .attributes = dropout_attributes,
    .backward = [](graph_builder& g, backward_args& a) {
      if (a.wants[0]) a.out[0] = g.apply(dropout, {a.grad, input_of(a, 1)}, a.forward->at, grad_name(g, input_of(a, 0)));
    },
    .has_backward = true};

}  // namespace fused::ops

namespace fused::train {

// The key of dropout site `site` (a layer's attention, say) in a run seeded `seed`: the pair hashed
// (splitmix64's finalizer), so that nearby seeds and sites give unrelated masks.
constexpr std::int64_t dropout_key(std::uint64_t seed, std::uint32_t site) {
  std::uint64_t x = (seed << 20) ^ site ^ 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(x >> 32));
}

}  // namespace fused::train
