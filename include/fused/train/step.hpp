// A train step as one program: the forward pass a model wrote, then (appended here) its loss, the
// backward steps (graph/reverse.hpp) and the optimizer's update of every parameter (AdamW, or SGD
// with momentum). Parameters, the moments or momentum buffers and the step count are state: each update writes its own state's bytes (state in ->
// state out), so calling the program again trains another step. The learning rate is an input
// (f32 [1]), so a schedule needs no new plan.
#pragma once
#include <cstdint>
#include <vector>

#include "../graph/reverse.hpp"
#include "../ops.hpp"
#include "../ops/graph_ops.hpp"

namespace fused::train {

// torch.optim.AdamW's hyperparameters (the learning rate is the program's input "learning_rate").
struct adamw {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
};

// torch.optim.SGD's (L2 weight decay added to the gradient; Nesterov needs momentum and no dampening).
struct sgd_momentum {
  double momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
};

enum class method { adamw, sgd };

// The state tensor counting the optimizer's steps (AdamW's t; SGD's first step starts its momentum).
inline constexpr const char* step_count_name = "optimizer.step";
// The fewest tokens a train step's sequence may hold, the loss predicting each next one, and the
// sentence that refuses fewer (the static plan's static_assert says it too, as a literal).
inline constexpr std::int64_t min_sequence_tokens = 2;
inline constexpr const char* too_few_tokens = "a train step's sequences need at least 2 tokens (the loss predicts each next one)";
// The most tokens one train step takes, its sequences together.
inline constexpr std::int64_t max_step_tokens = std::int64_t{1} << 20;
// A data-parallel shard's input numbering its dropout draw: (steps taken) * micro-batches + the
// micro-batch + 1, so that every micro-batch of every step draws its own masks, whatever the ranks.
inline constexpr const char* dropout_draw_name = "dropout_draw";

struct options {
  adamw optimizer{};          // with method::adamw
  sgd_momentum sgd{};         // with method::sgd
  method use = method::adamw;
  bool keep_gradients = false;  // the gradients stay readable after the call (train-step's outputs)
  // One shard of a data-parallel step (train/shards.hpp): the program ends at the gradients (kept),
  // its loss divides by the input "label_count" (the labels of the whole batch, so that the shards'
  // losses and gradients add up to the batch's), and the update is a program of its own
  // (update_program), run once the shards' gradients are summed.
  bool gradients_only = false;
  std::uint64_t seed = 0;  // draws dropout's masks (train::dropout_key)
};

// The optimizer's update of each parameter (f32 state) by its gradient: new parameters, moments or
// momentum buffers and step count as state out. The tail of a train step, or a whole update program.
// `step_count`: the step count state when the forward pass made it already (its dropout reads it), else -1.
constexpr std::vector<trained_parameter> append_update(graph_builder& g, const std::vector<tensor_id>& parameters, const std::vector<tensor_id>& grads,
                                                       const options& o, tensor_id step_count = -1) {
  std::vector<trained_parameter> trained;
  const tensor_id lr = g.input({"learning_rate"}, dtype::f32, shape(1));
  const tensor_id count = step_count >= 0 ? step_count : g.state({step_count_name}, dtype::i32, shape(1));
  const tensor_id next_count = g.apply(ops::advance_step, {count}, {.i = {1, 0, 0, 0}}, {"optimizer.step.next"});
  g.carry_state(count, next_count);
  const adamw& h = o.optimizer;
  const sgd_momentum& s = o.sgd;
  const bool adam = o.use == method::adamw;
  if (!adam && s.nesterov && (s.momentum <= 0 || s.dampening != 0)) {
    g.fail(error_kind::bad_program, "Nesterov momentum needs momentum above 0 and no dampening");
    return trained;
  }
  const tensor_id factors =
      adam ? g.apply(ops::adamw_factors, {next_count, lr}, {.f = h.beta1, .extra = {h.beta2, h.weight_decay, 0}}, {"optimizer.factors"}) : -1;
  trained.reserve(parameters.size());
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const tensor_id p = parameters[i], grad = grads[i];
    const tensor_info& pt = g.peek().tensor(p);
    const name_ref pn = pt.name;
    const shape ps = pt.shp;
    if (!adam) {
      tensor_id p_next = -1;
      if (s.momentum > 0) {
        const tensor_id buf = g.state({pn.pattern, pn.index, ".momentum"}, dtype::f32, ps);
        const tensor_id buf_next = g.apply(ops::sgd_momentum, {buf, grad, p, next_count}, {.f = s.momentum, .extra = {s.dampening, s.weight_decay, 0}},
                                           {pn.pattern, pn.index, ".momentum.next"});
        p_next = g.apply(ops::sgd_momentum_update, {p, grad, buf_next, lr}, {.i = {s.nesterov ? 1 : 0, 0, 0, 0}, .f = s.momentum, .extra = {s.weight_decay, 0, 0}},
                         {pn.pattern, pn.index, ".next"});
        g.carry_state(buf, buf_next);
      } else {
        p_next = g.apply(ops::sgd_update, {p, grad, lr}, {.f = s.weight_decay}, {pn.pattern, pn.index, ".next"});
      }
      g.carry_state(p, p_next);
      trained.push_back({.value = p, .gradient = grad, .next = p_next});
      continue;
    }
    const tensor_id m = g.state({pn.pattern, pn.index, ".adam_m"}, dtype::f32, ps), v = g.state({pn.pattern, pn.index, ".adam_v"}, dtype::f32, ps);
    const tensor_id m_next = g.apply(ops::adam_first_moment, {m, grad}, {.f = h.beta1}, {pn.pattern, pn.index, ".adam_m.next"});
    const tensor_id v_next = g.apply(ops::adam_second_moment, {v, grad}, {.f = h.beta2}, {pn.pattern, pn.index, ".adam_v.next"});
    const tensor_id p_next = g.apply(ops::adamw_update, {p, m_next, v_next, factors}, {.f = h.eps}, {pn.pattern, pn.index, ".next"});
    g.carry_state(m, m_next);
    g.carry_state(v, v_next);
    g.carry_state(p, p_next);
    trained.push_back({.value = p, .gradient = grad, .next = p_next});
  }
  return trained;
}

// Appends to `g` the loss (mean next-token cross-entropy of `logits` [T, V] against the input
// "labels" i32 [T], -100 skipping a row), output "loss"; the gradients of every tensor of `parameters`
// (f32 state feeds); one optimizer step over each (none with options::gradients_only); and marks the
// program as training. `step_count`: the optimizer's step count if the forward pass made it (-1: none).
constexpr void append_train_step(graph_builder& g, tensor_id logits, const std::vector<tensor_id>& parameters, const options& o,
                                 tensor_id step_count = -1) {
  if (!g.peek().ok()) return;
  const dim rows = g.peek().tensor(logits).shp[0];
  const tensor_id labels = g.input({"labels"}, dtype::i32, shape(rows));
  const tensor_id loss = o.gradients_only ? g.apply(ops::cross_entropy, {logits, labels, g.input({"label_count"}, dtype::f32, shape(1))}, {}, {"loss"})
                                          : g.apply(ops::cross_entropy, {logits, labels}, {}, {"loss"});
  g.output("loss", loss);
  const tensor_id seed = g.apply(ops::full, {}, {.i = {1, no_value, no_value, no_value}, .f = 1.0}, {"loss.grad"});
  const std::vector<tensor_id> grads = append_backward(g, loss, seed, parameters, ops::add);
  if (!g.peek().ok()) return;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    if (grads[i] >= 0) continue;
    g.fail(error_kind::bad_program, "parameter '" + g.peek().tensor(parameters[i]).name.str() + "' does not reach the loss, so it has no gradient to train it with");
    return;
  }
  if (o.gradients_only) {
    std::vector<trained_parameter> trained;
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      g.keep(grads[i]);
      trained.push_back({.value = parameters[i], .gradient = grads[i]});
    }
    g.train(loss, std::move(trained));
    return;
  }
  if (o.keep_gradients)
    for (tensor_id grad : grads) g.keep(grad);
  std::vector<trained_parameter> trained = append_update(g, parameters, grads, o, step_count);
  g.train(loss, std::move(trained));
}

// A parameter as an update program declares it: its name (the gradient program's) and shape.
struct parameter_shape {
  name_ref name;
  shape shp;
};

// The update of a data-parallel step (options::gradients_only): each parameter f32 state, its gradient
// (summed over the shards) the input "<name>.grad", the learning rate the input "learning_rate"; the
// optimizer's steps exactly as a whole train step appends them.
constexpr program update_program(const std::vector<parameter_shape>& parameters, const options& o) {
  graph_builder g;
  std::vector<tensor_id> values, grads;
  for (const parameter_shape& p : parameters) {
    values.push_back(g.state(p.name, dtype::f32, p.shp));
    grads.push_back(g.input({p.name.pattern, p.name.index, ".grad"}, dtype::f32, p.shp));
  }
  std::vector<trained_parameter> trained = append_update(g, values, grads, o);
  g.train(-1, std::move(trained));
  return std::move(g).finish();
}

}  // namespace fused::train
