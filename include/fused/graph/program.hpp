// FusedProgram: a model as a value. Feeds (inputs, weights, state) are the tensors no step produces;
// steps apply ops to tensors; outputs are named; state pairs say which tensor carries each state feed
// to the next call. Control flow is structured: a step may belong to a region (a Conditional's
// branch or a Loop's body), and regions nest (docs/GRAPH_FORMAT.md, "Control flow"). The same type
// is built in constant evaluation (static model) or at run time (a config.json known only then). It knows nothing of neural networks: ops come in as `op_def`s.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "../core/dtype.hpp"
#include "../core/shape.hpp"
#include "../core/text.hpp"
#include "../core/vector.hpp"

namespace fused {

enum class role : std::uint8_t { input, weight, state, activation, output };

constexpr const char* name_of(role r) {
  switch (r) {
    case role::input: return "input";
    case role::weight: return "weight";
    case role::state: return "state";
    case role::activation: return "activation";
    case role::output: return "output";
  }
  return "?";
}

using tensor_id = int;
inline constexpr int max_inputs = 5;

struct tensor_info {
  tensor_id id = -1;
  name_ref name{};
  dtype type = dtype::f32;
  shape shp{};
  role kind = role::activation;
  int producer = -1;  // id of the step that writes it; -1 for a feed
  bool is_feed = false;
};

// Op attributes: a few integers and reals (eps, rope theta; `extra`: rope scaling's factors);
// their meaning belongs to the op.
struct attrs {
  std::int64_t i[4]{};
  double f = 0;
  double extra[3]{};
  friend constexpr bool operator==(const attrs&, const attrs&) = default;
};

struct op_def;

// Where a named attribute of an op lives in `attrs`: graph files (fused/ir/) write attributes by
// name, and this is the one place an op says which name is which field.
// `ints`: a list of up to four integers in i[0..3], the rest no_value (reshape's shape, a perm).
enum class attr_slot : std::uint8_t { i0, i1, i2, i3, f, extra0, extra1, extra2, ints };

constexpr bool is_integer(attr_slot s) { return s <= attr_slot::i3; }

inline constexpr std::int64_t no_value = INT64_MIN;

struct attr_field {
  const char* name;
  attr_slot slot;
};

// How a tensor's elements are arranged in its bytes, where a pair of kernels agrees on more than
// row-major order: the attention kernels read a KV cache's keys and its values in orders of their
// own (kernels/fk_attention.h), which the cache's writer must use. An op declares the layout it reads
// an input in (op_def::input_layouts); graph_builder::finish gives every value on the same bytes
// (in place, a merge's branches, a loop carry, a state's next value) that layout, and refuses a
// program that reads one set of bytes in two or gives them to an op that would take them for
// row-major; an op that writes a laid-out value takes the kernel for its layout
// (op_def::kernels_by_layout).
enum class data_layout : std::uint8_t { plain, key_cache, value_cache };
inline constexpr int data_layout_count = 3;

constexpr const char* name_of(data_layout l) {
  switch (l) {
    case data_layout::plain: return "plain";
    case data_layout::key_cache: return "key cache";
    case data_layout::value_cache: return "value cache";
  }
  return "?";
}

struct step {
  int id = -1;                       // stable: the order in which the model added it
  const op_def* op = nullptr;
  tensor_id inputs[max_inputs]{-1, -1, -1, -1, -1};
  int n_inputs = 0;
  attrs at{};
  tensor_id result = -1;
  tensor_id work = -1;               // the step's workspace tensor (op_def::work), or -1
  bool mode_sensitive = false;
  int level = 0;                     // longest path from the feeds (set by the scheduler)
  int region = -1;                   // the region it runs in (program::regions), -1: the top level
  data_layout layout = data_layout::plain;  // its result's, as its readers read it (graph_builder::finish)

  // The input whose bytes the result takes over (the op's in-place input slot), or -1.
  constexpr tensor_id in_place_source() const;
};

struct named_output {
  const char* name = "";
  tensor_id id = -1;
};

struct state_pair {
  tensor_id in = -1;   // the state feed
  tensor_id out = -1;  // the tensor holding its value after the call
};

// What an op's shape rule returns: the result's type and shape, or a sentence saying what is wrong.
struct inferred {
  dtype type = dtype::f32;
  shape shp{};
  text error{};  // empty: fine
  int culprit = -1;     // the input slot the error is about
};

// A host kernel's view of one operand or result: where its bytes are and its bound shape.
struct host_tensor {
  std::byte* data = nullptr;  // an input's bytes are read only
  dtype type = dtype::f32;
  int rank = 0;
  std::int64_t dims[max_rank]{};
  constexpr std::int64_t elements() const {
    std::int64_t e = 1;
    for (int i = 0; i < rank; ++i) e *= dims[i];
    return e;
  }
};

struct host_args {
  const host_tensor* in = nullptr;
  int n_in = 0;
  host_tensor out{};
  const attrs* at = nullptr;
};

class graph_builder;

// What an op's backward rule (op_def::backward) is given and fills in: the forward step, d loss / d
// its result, which inputs need a gradient, and for each of those the tensor holding d loss / d it.
struct backward_args {
  const step* forward = nullptr;
  tensor_id grad = -1;
  bool wants[max_inputs]{};
  tensor_id out[max_inputs]{-1, -1, -1, -1, -1};
};

// The kernel name of an op whose work is its host function (op_def::host), not a C kernel.
inline constexpr const char* host_kernel_name = "host";

// An op as the generic machinery sees it. NN ops (fused/ops/) are constexpr instances of this.
struct op_def {
  const char* name;       // "linear"
  const char* category;   // "matmul", "norm", "attention", "elementwise", "memory": for pictures
  int min_inputs;
  int max_inputs;
  inferred (*infer)(const tensor_info* const* in, int n, const attrs& a);
  int in_place_input = -1;  // input slot whose bytes the result may take over, or -1
  // Honours the program's `training` flag: dropout's mask, which the executors leave out (the
  // identity) when the program does not train. Written to graph.json per step.
  bool mode_sensitive = false;
  // Kernel variant for a bound mode: the name both the C++ runtime and the C generator call.
  const char* (*kernel)(const binding& b, const tensor_info* const* in, int n, const tensor_info& out) = nullptr;
  // Layouts (data_layout): the one each input slot is read in (none listed: plain), and for an op
  // whose result's layout is its readers' (kv_write), its kernel per layout instead of `kernel`.
  std::span<const data_layout> input_layouts{};
  std::span<const char* const> kernels_by_layout{};
  // Optional workspace: scratch memory the kernels may use during the step only (the TFLite Micro
  // "scratch buffer" idea); a kernel writes what it reads there within the same call. The builder
  // makes it a tensor named after the result + ".work", written by the step and read by none, so the
  // planner gives it a lifetime of that one step in the arena. Its rule must depend on the first
  // input alone: consecutive steps of the same op on the same first input (q/k/v, gate/up) share
  // one workspace, live across those steps (`step::work` names it in each).
  // `has_work` says whether there is one: constant evaluation under g++'s UBSan instrumentation
  // rejects comparing a lambda's function pointer with null, so the pointer is never tested.
  inferred (*work)(const tensor_info* const* in, int n, const attrs& a) = nullptr;
  bool has_work = false;
  // A host kernel: C++ that run-time executors call when `kernel` names host_kernel_name (ops only
  // graph files use, and a program's own ops). Static models and the C generator take none.
  void (*host)(const host_args&) = nullptr;
  bool has_host = false;
  // The op's attributes by name (all required); fields of `attrs` not named here stay zero.
  std::span<const attr_field> attributes{};
  // Control flow's merge (graph/control.hpp): input 0 is a Conditional's condition, inputs 1 and 2
  // the values its branches yield; the result is the taken branch's, so it may sit on the bytes
  // of either (the planner and the verifier know; at most one of them was written).
  bool selects = false;
  // Reads positions (rope, kv_write, attention): row 0 sits at the call's position unless the step
  // is given all `max_inputs`, the last an i32 [1] holding it (a generation loop's position, which
  // changes from trip to trip). ops::position_input checks that input.
  bool positional = false;
  // Which op a kernel that serves several computes (fk_unary_f32's FK_RELU, fk_binary_f32's FK_SUB:
  // kernels/fk_pointwise_ops.h): the call's int0.
  std::int32_t variant = 0;
  // Reverse mode (graph/reverse.hpp): appends to the builder the steps that compute d loss / d input k
  // for each input the pass wants, from d loss / d result (an input's gradient may simply be that
  // tensor: a residual add's). An op without one cannot be part of a training program.
  void (*backward)(graph_builder& g, backward_args& a) = nullptr;
  bool has_backward = false;
};

constexpr tensor_id step::in_place_source() const {
  const int k = op->in_place_input;
  return k >= 0 && k < n_inputs ? inputs[k] : -1;
}

enum class error_kind : std::uint8_t { none, shape_mismatch, unbound_feed, cycle, bad_program };

constexpr const char* name_of(error_kind k) {
  switch (k) {
    case error_kind::none: return "none";
    case error_kind::shape_mismatch: return "shape mismatch";
    case error_kind::unbound_feed: return "unbound feed";
    case error_kind::cycle: return "cycle";
    case error_kind::bad_program: return "bad program";
  }
  return "?";
}

// Structured control flow. A Conditional is two regions made together, its then branch at index i
// and its else branch at i + 1; a Loop is one region. A region's steps (its nested regions' too)
// sit at consecutive schedule positions [first, first + count), set by the scheduler.
enum class region_kind : std::uint8_t { then_branch, else_branch, loop_body };

constexpr const char* name_of(region_kind k) {
  switch (k) {
    case region_kind::then_branch: return "then";
    case region_kind::else_branch: return "else";
    case region_kind::loop_body: return "loop";
  }
  return "?";
}

struct region_info {
  region_kind kind = region_kind::loop_body;
  int parent = -1;              // the enclosing region, -1: the top level
  // A branch runs when (then) or unless (else) this bool holds; a loop runs a trip while it holds,
  // checked after the first `header` steps of each trip (those it depends on).
  tensor_id condition = -1;
  std::int64_t max_trips = 0;   // a loop's bound: it ends after this many trips at the latest
  int first = 0, count = 0, header = 0;  // set by the scheduler
  constexpr int end() const { return first + count; }
  constexpr bool holds(int position) const { return position >= first && position < first + count; }
};

// A value a loop carries from trip to trip: `value` is made before the first trip by a copy step
// (control.hpp) of its initial value, placed just before the loop's body and run once; body
// steps and the steps after the loop read it; after each trip `next` is copied into its bytes.
struct loop_carry {
  int loop = -1;
  tensor_id value = -1;
  tensor_id next = -1;
};

// The schedule position of each step id, for `n` steps in schedule order whose ids are 0..n-1 (a
// program's, or a frozen static plan's).
constexpr scratch<int> schedule_positions(const step* steps, std::size_t n) {
  scratch<int> pos(n, -1);
  for (std::size_t i = 0; i < n; ++i) pos[static_cast<std::size_t>(steps[i].id)] = static_cast<int>(i);
  return pos;
}

// A parameter of a training program: its value (a state feed), d loss / d it, and its value after
// the optimizer's step (the in-place update of that state; -1 in a program that only differentiates).
struct trained_parameter {
  tensor_id value = -1;
  tensor_id gradient = -1;
  tensor_id next = -1;
};

struct program {
  int version = 1;
  std::vector<tensor_info> tensors;   // index == id
  std::vector<step> steps;            // schedule order once scheduled: (level, id)
  std::vector<named_output> outputs;
  std::vector<state_pair> state;
  std::vector<region_info> regions;   // control flow; empty for a straight-line program
  std::vector<loop_carry> carries;
  // Training (graph/reverse.hpp): mode-sensitive ops run their training behaviour; `loss` is the
  // tensor the backward steps differentiate, `parameters` what they differentiate it by.
  bool training = false;
  tensor_id loss = -1;
  std::vector<trained_parameter> parameters;
  // The first mistake found while building or scheduling; the program is unusable while set.
  error_kind error = error_kind::none;
  text message{};

  constexpr bool ok() const { return error == error_kind::none; }
  constexpr const tensor_info& tensor(tensor_id t) const { return tensors[static_cast<std::size_t>(t)]; }
  constexpr std::vector<tensor_id> feeds() const {
    std::vector<tensor_id> f;
    for (const auto& t : tensors)
      if (t.is_feed) f.push_back(t.id);
    return f;
  }
  // Position of each step id in the schedule.
  constexpr scratch<int> position_of_step() const { return schedule_positions(steps.data(), steps.size()); }
  // Per schedule position: the innermost loop whose body holds it, or -1 (positions set by the scheduler).
  constexpr scratch<int> innermost_loops() const {
    scratch<int> at(steps.size(), -1);
    const std::size_t nr = regions.size();
    scratch<int> depth(nr, 0);
    int deepest = 0;
    for (std::size_t r = 0; r < nr; ++r) {
      for (int a = regions[r].parent; a >= 0; a = regions[static_cast<std::size_t>(a)].parent) depth[r] += regions[static_cast<std::size_t>(a)].kind == region_kind::loop_body;
      deepest = depth[r] > deepest ? depth[r] : deepest;
    }
    for (int d = 0; d <= deepest; ++d)  // outer loops first, so the innermost is written last
      for (std::size_t r = 0; r < nr; ++r)
        if (regions[r].kind == region_kind::loop_body && depth[r] == d)
          for (int s = regions[r].first; s < regions[r].end(); ++s) at[static_cast<std::size_t>(s)] = static_cast<int>(r);
    return at;
  }
  // The loop enclosing region r (r itself excluded), or -1.
  constexpr int enclosing_loop(int r) const {
    for (int a = regions[static_cast<std::size_t>(r)].parent; a >= 0; a = regions[static_cast<std::size_t>(a)].parent)
      if (regions[static_cast<std::size_t>(a)].kind == region_kind::loop_body) return a;
    return -1;
  }
  // The loop whose carry `t` is, or -1.
  constexpr int carried_by(tensor_id t) const {
    for (const auto& c : carries)
      if (c.value == t) return c.loop;
    return -1;
  }
  // Whether region `inner` is `outer` or nested in it (-1: the top level holds everything).
  constexpr bool within(int inner, int outer) const {
    for (int r = inner; r >= 0; r = regions[static_cast<std::size_t>(r)].parent)
      if (r == outer) return true;
    return outer < 0;
  }
  constexpr tensor_id output(std::string_view name) const {
    for (const auto& o : outputs)
      if (std::string_view(o.name) == name) return o.id;
    return -1;
  }
};

}  // namespace fused
