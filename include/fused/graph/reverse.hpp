// Reverse-mode differentiation of a program as it is built: each step from the last to the first
// appends, through its op's backward rule (op_def::backward), the steps that turn d loss / d result
// into d loss / d inputs; a tensor read by several steps sums its gradients in that (fixed) order.
// The backward steps join the same program, so one plan covers forward and backward: activations a
// backward step reads live until it, gradients reuse dead activations' bytes. No tape, no run-time
// graph: in constant evaluation this is part of building a static program.
#pragma once
#include <vector>

#include "../core/vector.hpp"
#include "builder.hpp"

namespace fused {

// Appends to `g` (straight-line, no control flow) the gradients of `loss` (seeded with `seed`, the
// tensor holding d loss / d loss) with respect to each tensor of `by`, returned in that order (-1:
// the loss does not depend on it). `accumulate` adds two gradients of one shape (ops::add).
// A step on the way from `by` to the loss whose op has no backward rule fails the program, naming it.
constexpr std::vector<tensor_id> append_backward(graph_builder& g, tensor_id loss, tensor_id seed, const std::vector<tensor_id>& by,
                                                 const op_def& accumulate) {
  std::vector<tensor_id> grads_of_by;
  for (std::size_t i = 0; i < by.size(); ++i) grads_of_by.push_back(-1);
  const program& p = g.peek();
  if (!p.ok()) return grads_of_by;
  if (!p.regions.empty()) {
    g.fail(error_kind::bad_program, "a training program cannot differentiate control flow (conditionals, loops)");
    return grads_of_by;
  }
  const std::size_t nt = p.tensors.size(), ns = p.steps.size();  // the forward part: steps in id order
  // Which tensors need a gradient: those that depend on a tensor of `by` and that the loss depends on.
  scratch<char> from_by(nt, 0), to_loss(nt, 0);
  for (tensor_id t : by) from_by[static_cast<std::size_t>(t)] = 1;
  for (std::size_t s = 0; s < ns; ++s) {
    const step& st = p.steps[s];
    for (int k = 0; k < st.n_inputs; ++k)
      if (from_by[static_cast<std::size_t>(st.inputs[k])]) from_by[static_cast<std::size_t>(st.result)] = 1;
  }
  to_loss[static_cast<std::size_t>(loss)] = 1;
  for (std::size_t s = ns; s-- > 0;) {
    const step& st = p.steps[s];
    if (!to_loss[static_cast<std::size_t>(st.result)]) continue;
    for (int k = 0; k < st.n_inputs; ++k) to_loss[static_cast<std::size_t>(st.inputs[k])] = 1;
  }
  auto needs = [&](tensor_id t) { return from_by[static_cast<std::size_t>(t)] != 0 && to_loss[static_cast<std::size_t>(t)] != 0; };

  scratch<tensor_id> grad(nt, -1);
  grad[static_cast<std::size_t>(loss)] = seed;
  for (std::size_t s = ns; s-- > 0;) {
    const step st = g.peek().steps[s];  // a copy: the rule's steps grow the vector
    const tensor_id dy = grad[static_cast<std::size_t>(st.result)];
    if (dy < 0 || !needs(st.result)) continue;
    if (!st.op->has_backward) {
      g.fail(error_kind::bad_program, "step " + to_text(st.id) + " '" + st.op->name + "' (" + g.peek().tensor(st.result).name.str() +
                                          "): the op has no backward rule, so a training program cannot differentiate it");
      return grads_of_by;
    }
    backward_args a{};
    a.forward = &st;
    a.grad = dy;
    for (int k = 0; k < st.n_inputs; ++k) a.wants[k] = needs(st.inputs[k]);
    st.op->backward(g, a);
    if (!g.peek().ok()) return grads_of_by;
    for (int k = 0; k < st.n_inputs; ++k) {
      if (!a.wants[k] || a.out[k] < 0) continue;
      tensor_id& into = grad[static_cast<std::size_t>(st.inputs[k])];
      const tensor_info& x = g.peek().tensor(st.inputs[k]);
      into = into < 0 ? a.out[k] : g.apply(accumulate, {into, a.out[k]}, {}, {x.name.pattern, x.name.index, ".grad.sum"});
    }
  }
  for (std::size_t i = 0; i < by.size(); ++i) grads_of_by[i] = grad[static_cast<std::size_t>(by[i])];
  return grads_of_by;
}

}  // namespace fused
