// cross_entropy: the mean next-token loss of a training program. logits f32 [T, V], labels i32 [T]
// (label -100, Hugging Face's ignore index, skips its row) -> f32 [1] = the mean over the other rows
// of logsumexp(logits[t]) - logits[t][labels[t]] (0 when every row is skipped). An optional third
// input, label_count f32 [1], divides the sum instead of the rows' own count: a data-parallel shard's
// loss and gradients are then its part of the whole batch's mean (train/shards.hpp).
// cross_entropy_grad (logits, labels, d loss [1] [, label_count]) -> d logits [T, V]: softmax fused
// with the one-hot.
#pragma once
#include "common.hpp"

namespace fused::ops {

namespace detail {
constexpr inferred logits_and_labels(const tensor_info& logits, const tensor_info& labels) {
  if (logits.type != dtype::f32 || logits.shp.rank != 2 || logits.shp[1].symbol != 0) return mismatch(0, "logits must be f32 [T, V], got " + describe(logits));
  if (labels.type != dtype::i32 || labels.shp.rank != 1 || !(labels.shp[0] == logits.shp[0]))
    return mismatch(1, "labels must be i32 [" + dim_text(logits.shp[0]) + "], got " + describe(labels));
  return {};
}
constexpr inferred label_count(const tensor_info& count, int slot) {
  if (count.type != dtype::f32 || !(count.shp == shape(1))) return mismatch(slot, "the label count must be f32 [1], got " + describe(count));
  return {};
}
}  // namespace detail

inline constexpr op_def cross_entropy_grad{
    .name = "cross_entropy_grad",
    .category = "loss",
    .min_inputs = 3,
    .max_inputs = 4,
    .infer = [](const tensor_info* const* in, int n, const attrs&) -> inferred {
      if (inferred r = detail::logits_and_labels(*in[0], *in[1]); !r.error.empty()) return r;
      if (in[2]->type != dtype::f32 || !(in[2]->shp == shape(1))) return mismatch(2, "the loss's gradient must be f32 [1], got " + describe(*in[2]));
      if (n > 3) {
        if (inferred r = detail::label_count(*in[3], 3); !r.error.empty()) return r;
      }
      return result(dtype::f32, in[0]->shp);
    },
    .kernel = kernel_named<kernel_names::cross_entropy_backward>};

inline constexpr op_def cross_entropy{
    .name = "cross_entropy",
    .category = "loss",
    .min_inputs = 2,
    .max_inputs = 3,
    .infer = [](const tensor_info* const* in, int n, const attrs&) -> inferred {
      if (inferred r = detail::logits_and_labels(*in[0], *in[1]); !r.error.empty()) return r;
      if (n > 2) {
        if (inferred r = detail::label_count(*in[2], 2); !r.error.empty()) return r;
      }
      return result(dtype::f32, shape(1));
    },
    .kernel = kernel_named<kernel_names::cross_entropy>,
    .backward = [](graph_builder& g, backward_args& a) {
      if (!a.wants[0]) return;
      a.out[0] = a.forward->n_inputs > 2 ? g.apply(cross_entropy_grad, {input_of(a, 0), input_of(a, 1), a.grad, input_of(a, 2)}, {}, grad_name(g, input_of(a, 0)))
                                         : g.apply(cross_entropy_grad, {input_of(a, 0), input_of(a, 1), a.grad}, {}, grad_name(g, input_of(a, 0)));
    },
    .has_backward = true};

}  // namespace fused::ops
