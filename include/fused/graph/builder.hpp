// The graph builder: a constexpr API in which a model appends feeds and ops. Each op's shape rule
// runs as the op is added; the first mistake is recorded (kind + a sentence naming the op and the
// tensors) and everything after it is ignored, so a model template never needs error handling.
// `finish()` schedules the program. Control flow: `conditional`, `loop` and `set_region` put the
// steps that follow into a branch or a loop body, `merge` and `carry` join values across them
// (program.hpp, "Structured control flow"). At compile time a recorded mistake becomes a static_assert
// (fused/graph/diagnose.hpp); at run time it becomes a `graph_error`.
#pragma once
#include <initializer_list>
#include <string_view>
#include <type_traits>
#include <utility>

#include "control.hpp"
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
    s.region = region_;
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
      if (prev.work >= 0 && prev.inputs[0] == s.inputs[0] && prev.region == region_ && std::string_view(prev.op->name) == op.name)
        shared_work = prev.work;
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

  // Control flow. Steps added go to the current region (-1: the top level).
  constexpr int region() const { return region_; }
  constexpr void set_region(int r) {
    if (!p_.ok()) return;
    if (r < -1 || r >= static_cast<int>(p_.regions.size())) return fail(error_kind::bad_program, "region " + to_text(r) + " does not exist");
    region_ = r;
  }
  // A Conditional on `condition` (one bool) in the current region: returns its then branch; its
  // else branch is the index after. Neither is entered.
  constexpr int conditional(tensor_id condition) {
    if (!condition_ok(condition, "a conditional")) return -1;
    const int then_branch = static_cast<int>(p_.regions.size());
    p_.regions.push_back({.kind = region_kind::then_branch, .parent = region_, .condition = condition});
    p_.regions.push_back({.kind = region_kind::else_branch, .parent = region_, .condition = condition});
    return then_branch;
  }
  // The Conditional's result (in its parent region, where the current region must be): the then
  // branch's value when the condition held, else the else branch's.
  constexpr tensor_id merge(int then_branch, tensor_id then_value, tensor_id else_value, name_ref result = {}) {
    if (!p_.ok()) return -1;
    if (then_branch < 0 || then_branch >= static_cast<int>(p_.regions.size()) || p_.regions[static_cast<std::size_t>(then_branch)].kind != region_kind::then_branch) {
      fail(error_kind::bad_program, "merge names region " + to_text(then_branch) + ", which is not a conditional's then branch");
      return -1;
    }
    const region_info& c = p_.regions[static_cast<std::size_t>(then_branch)];
    if (c.parent != region_) {
      fail(error_kind::bad_program, "the merge of conditional " + to_text(then_branch) + " must be added in the conditional's own region");
      return -1;
    }
    attrs a{};
    a.i[0] = then_branch;
    return apply(control::merge, {c.condition, then_value, else_value}, a, result);
  }
  // A Loop of at most `max_trips` trips in the current region; not entered.
  constexpr int loop(std::int64_t max_trips) {
    if (!p_.ok()) return -1;
    if (max_trips < 0) {
      fail(error_kind::bad_program, "a loop's bound must be 0 or more trips, got " + to_text(max_trips));
      return -1;
    }
    p_.regions.push_back({.kind = region_kind::loop_body, .parent = region_, .max_trips = max_trips});
    return static_cast<int>(p_.regions.size()) - 1;
  }
  // A value the loop carries, starting as `initial` (added in the loop's parent region, the current
  // one). Body steps read the returned tensor; `carry_next` says what it holds after each trip.
  constexpr tensor_id carry(int loop_region, tensor_id initial, name_ref name = {}) {
    if (!loop_ok(loop_region, "carry")) return -1;
    if (p_.regions[static_cast<std::size_t>(loop_region)].parent != region_) {
      fail(error_kind::bad_program, "the carries of loop " + to_text(loop_region) + " must be added in the loop's own region");
      return -1;
    }
    const tensor_id value = apply(control::copy, {initial}, {}, name);
    if (value >= 0) p_.carries.push_back({.loop = loop_region, .value = value, .next = -1});
    return value;
  }
  constexpr void carry_next(tensor_id value, tensor_id next) {
    if (!p_.ok()) return;
    for (auto& c : p_.carries)
      if (c.value == value) {
        if (next < 0 || next >= static_cast<tensor_id>(p_.tensors.size()) || p_.tensor(next).type != p_.tensor(value).type || !(p_.tensor(next).shp == p_.tensor(value).shp))
          return fail(error_kind::shape_mismatch, "the next value of carry '" + p_.tensor(value).name.str() + "' must be a tensor of its type and shape");
        c.next = next;
        return;
      }
    fail(error_kind::bad_program, "tensor " + to_text(value) + " is not a loop carry");
  }
  // The loop runs a trip while `condition` (one bool, usually computed in its body from its carries) holds.
  constexpr void loop_while(int loop_region, tensor_id condition) {
    if (!loop_ok(loop_region, "loop_while") || !condition_ok(condition, "a loop")) return;
    p_.regions[static_cast<std::size_t>(loop_region)].condition = condition;
  }

  // Validates what the builder cannot see step by step (declared tensors never written, control
  // flow's scopes) and schedules.
  constexpr program finish() && {
    if (p_.ok())
      for (const auto& t : p_.tensors)
        if (!t.is_feed && t.producer < 0) {
          fail(error_kind::unbound_feed, "tensor '" + t.name.str() + "' (id " + to_text(t.id) +
                                             ") was declared but no step produces it and it is not a feed");
          break;
        }
    if (p_.ok() && !p_.regions.empty()) check_scopes();
    if (p_.ok()) resolve_layouts();
    if (p_.ok()) schedule(p_);
    return std::move(p_);
  }

  constexpr const program& peek() const { return p_; }
  // Makes this a training program (graph/reverse.hpp): its loss and parameters.
  constexpr void train(tensor_id loss, std::vector<trained_parameter> parameters) {
    if (!p_.ok()) return;
    p_.training = true;
    p_.loss = loss;
    p_.parameters = std::move(parameters);
  }
  // Records a mistake the builder's own checks cannot see (the reverse pass's): the first one wins.
  constexpr void fail(error_kind k, text msg) {
    if (!p_.ok()) return;
    p_.error = k;
    p_.message = std::move(msg);
  }
  // Keeps a tensor to the end of the call, readable by the caller like an output.
  constexpr void keep(tensor_id t) {
    if (p_.ok() && t >= 0 && t < static_cast<tensor_id>(p_.tensors.size())) p_.tensors[static_cast<std::size_t>(t)].kind = role::output;
  }

 private:
  constexpr bool condition_ok(tensor_id c, const char* what) {
    if (!p_.ok()) return false;
    if (c < 0 || c >= static_cast<tensor_id>(p_.tensors.size()) || !control::is_condition(p_.tensor(c))) {
      fail(error_kind::shape_mismatch, text("the condition of ") + what + " must be a tensor of one bool ([] or [1])");
      return false;
    }
    return true;
  }
  constexpr bool loop_ok(int r, const char* what) {
    if (!p_.ok()) return false;
    if (r < 0 || r >= static_cast<int>(p_.regions.size()) || p_.regions[static_cast<std::size_t>(r)].kind != region_kind::loop_body) {
      fail(error_kind::bad_program, text(what) + " names region " + to_text(r) + ", which is not a loop");
      return false;
    }
    return true;
  }
  // The region a tensor is made in (feeds: the top level).
  constexpr int home_of(tensor_id t) const {
    const tensor_info& ti = p_.tensor(t);
    return ti.producer < 0 ? -1 : p_.steps[static_cast<std::size_t>(ti.producer)].region;
  }
  // Whether a step in region `reader` may read tensor t: t is made in that region or one enclosing
  // it, or t is a carry of a loop whose own region encloses the reader (its last value, after the
  // loop, or its current one, inside).
  constexpr bool visible(tensor_id t, int reader) const {
    if (const int loop = p_.carried_by(t); loop >= 0) return p_.within(reader, p_.regions[static_cast<std::size_t>(loop)].parent);
    return p_.within(reader, home_of(t));
  }
  // data_layout: the values on one set of bytes (joined through in-place results, merges, loop
  // carries and states' next values) take the layout their readers read them in; two readers that
  // disagree are refused. Each step whose op picks its kernel by layout records its result's.
  constexpr void resolve_layouts() {
    // (Lean: a 32-layer static model's plan is near clang's default -fconstexpr-steps.)
    const std::size_t nt = p_.tensors.size();
    scratch<int> up(nt);  // union-find over tensor ids
    scratch<data_layout> layout(nt);  // a root's: its set of bytes'
    for (std::size_t t = 0; t < nt; ++t) {
      up[t] = static_cast<int>(t);
      layout[t] = data_layout::plain;
    }
    auto find = [&](int t) {
      while (up[static_cast<std::size_t>(t)] != t) t = up[static_cast<std::size_t>(t)] = up[static_cast<std::size_t>(up[static_cast<std::size_t>(t)])];
      return t;
    };
    auto join = [&](tensor_id a, tensor_id b) {
      if (a >= 0 && b >= 0) up[static_cast<std::size_t>(find(a))] = find(b);
    };
    for (const step& s : p_.steps) {
      if (s.op->in_place_input >= 0) join(s.in_place_source(), s.result);
      if (s.op->selects) {
        join(s.inputs[1], s.result);
        join(s.inputs[2], s.result);
      }
    }
    for (const loop_carry& c : p_.carries) join(c.value, c.next);
    for (const state_pair& sp : p_.state) join(sp.in, sp.out);
    // The first step that reads root g's bytes in their layout (for a message).
    auto read_by = [&](std::size_t g) -> const step& {
      for (const step& s : p_.steps)
        for (int k = 0; k < s.n_inputs && k < static_cast<int>(s.op->input_layouts.size()); ++k)
          if (s.op->input_layouts[static_cast<std::size_t>(k)] == layout[g] && static_cast<std::size_t>(find(s.inputs[k])) == g) return s;
      return p_.steps[0];
    };
    for (const step& s : p_.steps)
      for (int k = 0; k < s.n_inputs && k < static_cast<int>(s.op->input_layouts.size()); ++k) {
        const data_layout want = s.op->input_layouts[static_cast<std::size_t>(k)];
        if (want == data_layout::plain) continue;
        const auto g = static_cast<std::size_t>(find(s.inputs[k]));
        if (layout[g] == data_layout::plain) {
          layout[g] = want;
        } else if (layout[g] != want) {
          const step& first = read_by(g);
          return fail(error_kind::bad_program, "step " + to_text(s.id) + " '" + s.op->name + "' reads '" + p_.tensor(s.inputs[k]).name.str() +
                                                   "' as a " + name_of(want) + ", but step " + to_text(first.id) + " '" + first.op->name +
                                                   "' reads the same bytes as a " + name_of(layout[g]) +
                                                   ", and one set of bytes holds one layout");
        }
      }
    // Other readers would see the layout's order as if it were row-major: only a step that writes the
    // bytes in place (kv_write into the cache, a carry's copy) or a merge that passes them on may take them.
    // Checked at run time (graph files), not in constant evaluation: a static model's graph template is
    // the library's own, and a 32-layer one is near clang's default -fconstexpr-steps already.
    if (!std::is_constant_evaluated())
      for (const step& s : p_.steps)
        for (int k = 0; k < s.n_inputs; ++k) {
          const auto g = static_cast<std::size_t>(find(s.inputs[k]));
          if (layout[g] == data_layout::plain) continue;
          const bool declared = k < static_cast<int>(s.op->input_layouts.size()) && s.op->input_layouts[static_cast<std::size_t>(k)] == layout[g];
          const bool passes_on = k == s.op->in_place_input || (s.op->selects && k > 0);
          if (declared || passes_on) continue;
          const step& reader = read_by(g);
          return fail(error_kind::bad_program, "step " + to_text(s.id) + " '" + s.op->name + "' reads '" + p_.tensor(s.inputs[k]).name.str() +
                                                   "', which step " + to_text(reader.id) + " '" + reader.op->name + "' reads as a " +
                                                   name_of(layout[g]) + ": its elements are in that reader's order, not row-major");
        }
    for (step& s : p_.steps)
      if (!s.op->kernels_by_layout.empty()) s.layout = layout[static_cast<std::size_t>(find(s.result))];
  }

  constexpr void check_scopes() {
    auto where = [&](const step& s) { return "step " + to_text(s.id) + " '" + s.op->name + "'"; };
    for (const step& s : p_.steps) {
      for (int k = 0; k < s.n_inputs; ++k) {
        const tensor_id t = s.inputs[k];
        int reader = s.region;
        if (s.op->selects && k > 0) reader = static_cast<int>(s.at.i[0]) + (k - 1);  // a merge reads each branch's value in its branch
        if (!visible(t, reader))
          return fail(error_kind::bad_program, where(s) + " reads '" + p_.tensor(t).name.str() +
                                                   "', which is made inside a branch or loop the step is not in (only a merge or a loop carry takes a value out)");
      }
    }
    for (std::size_t r = 0; r < p_.regions.size(); ++r) {
      const region_info& reg = p_.regions[r];
      if (reg.kind != region_kind::loop_body) continue;
      if (reg.condition >= 0 && !visible(reg.condition, static_cast<int>(r)))
        return fail(error_kind::bad_program, "the condition of loop " + to_text(static_cast<std::int64_t>(r)) + " is made where the loop cannot read it");
      bool has_step = false;
      for (const step& s : p_.steps) has_step = has_step || p_.within(s.region, static_cast<int>(r));
      if (!has_step) return fail(error_kind::bad_program, "loop " + to_text(static_cast<std::int64_t>(r)) + " has no step in its body");
    }
    for (const loop_carry& c : p_.carries) {
      if (c.next < 0) return fail(error_kind::bad_program, "carry '" + p_.tensor(c.value).name.str() + "' has no next value (carry_next)");
      if (!visible(c.next, c.loop))
        return fail(error_kind::bad_program, "the next value of carry '" + p_.tensor(c.value).name.str() + "' is made where its loop cannot read it");
    }
    for (std::size_t r = 0; r < p_.regions.size(); ++r) {
      const region_info& reg = p_.regions[r];
      if (reg.kind == region_kind::loop_body || reg.condition < 0) continue;
      if (!visible(reg.condition, reg.parent)) return fail(error_kind::bad_program, "the condition of conditional " + to_text(static_cast<std::int64_t>(r)) + " is made where the conditional cannot read it");
    }
  }

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
  program p_{};
  int region_ = -1;
};

// Runs a model's build function for its sizes only: no shape rules, no storage. A static plan needs
// the tensor and step counts as template arguments before it builds the program for real; counting
// with the model's own code keeps one source of truth at a small fraction of a real build's cost.
class counting_builder {
 public:
  struct counts {
    std::size_t tensors = 0;
    std::size_t steps = 0;
    std::size_t regions = 0;  // control flow
    std::size_t carries = 0;
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
  constexpr int region() const { return region_; }
  constexpr void set_region(int r) { region_ = r; }
  constexpr int conditional(tensor_id) { return static_cast<int>((c_.regions += 2) - 2); }
  constexpr tensor_id merge(int, tensor_id, tensor_id, name_ref = {}) { return step_of_one_tensor(); }
  constexpr int loop(std::int64_t) { return static_cast<int>(c_.regions++); }
  constexpr tensor_id carry(int, tensor_id, name_ref = {}) {
    ++c_.carries;
    return step_of_one_tensor();
  }
  constexpr void carry_next(tensor_id, tensor_id) {}
  constexpr void loop_while(int, tensor_id) {}
  constexpr counts finish() && { return c_; }

 private:
  constexpr tensor_id next() { return static_cast<tensor_id>(c_.tensors++); }
  constexpr tensor_id step_of_one_tensor() {  // merge and copy: no workspace
    ++c_.steps;
    last_work_op_ = "";
    return next();
  }
  counts c_{};
  int region_ = -1;
  std::string_view last_work_op_;  // the previous step's op if it has a workspace (by name), else ""
  tensor_id last_first_ = -1;      // and its first input
};

}  // namespace fused
