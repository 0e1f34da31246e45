// The graph builder: a constexpr API in which a model appends feeds and ops. Each op's shape rule
// runs as the op is added; the first mistake is recorded (kind + a sentence naming the op and the
// tensors) and everything after it is ignored, so a model template never needs error handling.
// `finish()` schedules the program. At compile time a recorded mistake becomes a static_assert
// (fused/graph/diagnose.hpp); at run time it becomes a `graph_error`.
#pragma once
#include <initializer_list>
#include <string_view>
#include <utility>

#include "program.hpp"
#include "schedule.hpp"

namespace fused {

class graph_builder {
 public:
  // Storage for about this many tensors and steps, so constant evaluation does not copy them as
  // the vectors grow (a hint: more are fine).
  constexpr void reserve(std::size_t tensors, std::size_t steps) {
    p_.tensors.reserve(tensors);
    p_.steps.reserve(steps);
  }
  constexpr tensor_id input(name_ref name, dtype type, shape shp) { return feed(name, type, shp, role::input); }
  constexpr tensor_id weight(name_ref name, dtype type, shape shp) { return feed(name, type, shp, role::weight); }
  constexpr tensor_id state(name_ref name, dtype type, shape shp) { return feed(name, type, shp, role::state); }

  // A tensor a later `apply(..., into)` will produce. Lets a program refer to a value before the step
  // that writes it exists (and so, wrongly used, form a cycle, which the scheduler reports).
  constexpr tensor_id declare(name_ref name, dtype type, shape shp) {
    return add_tensor(name, type, shp, role::activation, false);
  }

  constexpr tensor_id apply(const op_def& op, std::initializer_list<tensor_id> in, attrs a = {}, name_ref result = {},
                            tensor_id into = -1) {
    if (!p_.ok()) return -1;
    const int n = static_cast<int>(in.size());
    const int sid = static_cast<int>(p_.steps.size());
    if (n < op.min_inputs || n > op.max_inputs) {
      fail(error_kind::bad_program, "step " + to_text(sid) + " '" + op.name + "' takes " + to_text(op.min_inputs) +
                                        ".." + to_text(op.max_inputs) + " inputs, got " + to_text(n));
      return -1;
    }
    step s{};
    s.id = sid;
    s.op = &op;
    s.n_inputs = n;
    s.at = a;
    s.mode_sensitive = op.mode_sensitive;
    const tensor_info* ins[max_inputs]{};
    int k = 0;
    for (tensor_id t : in) {
      if (t < 0 || t >= static_cast<tensor_id>(p_.tensors.size())) {
        fail(error_kind::unbound_feed, "step " + to_text(sid) + " '" + op.name + "' input " + to_text(k) +
                                           " is tensor " + to_text(t) +
                                           ", which is neither a feed (input, weight, state) nor produced by a step");
        return -1;
      }
      s.inputs[static_cast<std::size_t>(k)] = t;
      ins[k++] = &p_.tensors[static_cast<std::size_t>(t)];
    }
    inferred r = op.infer(ins, n, a);
    // Consecutive steps of one op on the same first input share one workspace (q/k/v, gate/up): its
    // rule depends on that input alone (op_def::work), so it is the size this step would ask for.
    tensor_id shared_work = -1;
    if (op.has_work && sid > 0) {
      const step& prev = p_.steps.data()[sid - 1];
      // (Ops compared by name: g++'s UBSan instrumentation rejects comparing their addresses in
      // constant evaluation.)
      if (prev.work >= 0 && prev.inputs[0] == s.inputs[0] && std::string_view(prev.op->name) == op.name) shared_work = prev.work;
    }
    const inferred w = op.has_work && shared_work < 0 && r.error.empty() ? op.work(ins, n, a) : inferred{};  // before tensors grow
    if (!r.error.empty()) {
      // Not `cond ? text + ... : ""`: g++ 12 frees the temporaries of the taken branch too early in
      // constant evaluation ("use of allocated storage after deallocation").
      text who;
      if (r.culprit >= 0) who = " input " + to_text(r.culprit) + " '" + ins[r.culprit]->name.str() + "'";
      text names;
      for (int j = 0; j < n; ++j) names += (j ? ", " : "") + ins[j]->name.str();
      fail(error_kind::shape_mismatch, "step " + to_text(sid) + " '" + op.name + "' (" + result.str() + ")" + who +
                                           ": " + r.error + " [inputs: " + names + "]");
      return -1;
    }
    // A result written over a state feed stays state: it is the feed's next value, in the same bytes.
    role res_role = role::activation;
    if (op.in_place_input >= 0 && op.in_place_input < n && ins[op.in_place_input]->kind == role::state) res_role = role::state;
    tensor_id out = into;
    if (into >= 0) {
      if (into >= static_cast<tensor_id>(p_.tensors.size()) || p_.tensor(into).is_feed || p_.tensor(into).producer >= 0) {
        fail(error_kind::bad_program, "step " + to_text(sid) + " '" + op.name + "' writes tensor " + to_text(into) +
                                          ", which is not a declared, not yet produced tensor");
        return -1;
      }
      auto& t = p_.tensors[static_cast<std::size_t>(into)];
      if (!(t.shp == r.shp) || t.type != r.type) {
        fail(error_kind::shape_mismatch, "step " + to_text(sid) + " '" + op.name + "' produces a result whose shape or dtype differs from the declared tensor '" + t.name.str() + "'");
        return -1;
      }
      t.kind = res_role;
    } else {
      out = add_tensor(result, r.type, r.shp, res_role, false);
    }
    p_.tensors[static_cast<std::size_t>(out)].producer = sid;
    s.result = out;
    if (shared_work >= 0) {
      s.work = shared_work;
    } else if (op.has_work) {
      s.work = add_tensor({result.pattern, result.index, ".work"}, w.type, w.shp, role::activation, false);
      p_.tensors[static_cast<std::size_t>(s.work)].producer = sid;
    }
    p_.steps.push_back(s);
    return out;
  }

  constexpr void output(const char* name, tensor_id t) {
    if (!p_.ok()) return;
    if (t < 0 || t >= static_cast<tensor_id>(p_.tensors.size())) {
      fail(error_kind::unbound_feed, text("output '") + name + "' names tensor " + to_text(t) + ", which does not exist");
      return;
    }
    p_.tensors[static_cast<std::size_t>(t)].kind = role::output;
    p_.outputs.push_back({name, t});
  }

  constexpr void carry_state(tensor_id in, tensor_id out) {
    if (!p_.ok()) return;
    p_.state.push_back({in, out});
  }

  // Validates what the builder cannot see step by step (declared tensors never written) and schedules.
  constexpr program finish() && {
    if (p_.ok())
      for (const auto& t : p_.tensors)
        if (!t.is_feed && t.producer < 0) {
          fail(error_kind::unbound_feed, "tensor '" + t.name.str() + "' (id " + to_text(t.id) +
                                             ") was declared but no step produces it and it is not a feed");
          break;
        }
    if (p_.ok()) schedule(p_);
    return std::move(p_);
  }

  constexpr const program& peek() const { return p_; }

 private:
  constexpr tensor_id feed(name_ref name, dtype type, shape shp, role r) { return add_tensor(name, type, shp, r, true); }
  constexpr tensor_id add_tensor(name_ref name, dtype type, shape shp, role r, bool is_feed) {
    tensor_info t{};
    t.id = static_cast<tensor_id>(p_.tensors.size());
    t.name = name;
    t.type = type;
    t.shp = shp;
    t.kind = r;
    t.is_feed = is_feed;
    p_.tensors.push_back(t);
    return t.id;
  }
  constexpr void fail(error_kind k, text msg) {
    if (!p_.ok()) return;
    p_.error = k;
    p_.message = std::move(msg);
  }

  program p_{};
};

// Runs a model's build function for its sizes only: no shape rules, no storage. A static plan needs
// the tensor and step counts as template arguments before it builds the program for real; counting
// with the model's own code keeps one source of truth at a small fraction of a real build's cost.
class counting_builder {
 public:
  struct counts {
    std::size_t tensors = 0;
    std::size_t steps = 0;
  };
  constexpr tensor_id input(name_ref, dtype, shape) { return next(); }
  constexpr tensor_id weight(name_ref, dtype, shape) { return next(); }
  constexpr tensor_id state(name_ref, dtype, shape) { return next(); }
  constexpr tensor_id declare(name_ref, dtype, shape) { return next(); }
  constexpr tensor_id apply(const op_def& op, std::initializer_list<tensor_id> in, attrs = {}, name_ref = {}, tensor_id into = -1) {
    ++c_.steps;
    const tensor_id r = into >= 0 ? into : next();
    // As graph_builder::apply: a workspace unless the previous step is the same op on the same first input.
    const tensor_id first = in.size() ? *in.begin() : -1;
    if (op.has_work && !(last_work_op_ == op.name && last_first_ == first)) next();
    last_work_op_ = op.has_work ? op.name : "";
    last_first_ = first;
    return r;
  }
  constexpr void reserve(std::size_t, std::size_t) {}
  constexpr void output(const char*, tensor_id) {}
  constexpr void carry_state(tensor_id, tensor_id) {}
  constexpr counts finish() && { return c_; }

 private:
  constexpr tensor_id next() { return static_cast<tensor_id>(c_.tensors++); }
  counts c_{};
  std::string_view last_work_op_;  // the previous step's op if it has a workspace (by name), else ""
  tensor_id last_first_ = -1;      // and its first input
};

}  // namespace fused
