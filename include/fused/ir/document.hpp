// A graph file as a value: the FX layout (ToRSh FX IR) of nodes, edges, inputs, outputs and metadata,
// extended with what a real pipeline needs (docs/GRAPH_FORMAT.md): per value a type whose dims are
// numbers or named symbols, symbol constraints, Call attributes as an object, node metadata. The
// same document is JSON or MessagePack; reading either gives the same value, and writing a value
// read from one gives back the same document.
//
// Nothing here knows ops or programs: reading checks the document's form (every field's presence
// and type) and records every defect it finds as an `issue`; validate.hpp checks the graph.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../core/dtype.hpp"

namespace fused::ir {

using json = nlohmann::ordered_json;

// The version this library writes; it reads any 1.x (minor versions only add optional fields).
inline constexpr int format_major = 1;
inline constexpr int format_minor = 0;

// Bounds that keep every shape rule's arithmetic far from overflow (dims and integer attributes
// multiply in pairs at most before a size check).
inline constexpr std::int64_t max_dim = std::int64_t{1} << 31;
inline constexpr std::int64_t max_integer_attribute = std::int64_t{1} << 31;
// How deep Conditionals and Loops may sit inside one another: the scheduler walks regions
// recursively, in time that grows with the cube of the depth (2000 levels took minutes).
inline constexpr int max_control_depth = 64;

enum class node_type : std::uint8_t { input, call, output, get_attr, conditional, loop, merge };

inline constexpr const char* node_type_names[] = {"Input", "Call", "Output", "GetAttr", "Conditional", "Loop", "Merge"};

constexpr const char* name_of(node_type t) { return node_type_names[static_cast<int>(t)]; }

// A dim: the constant `n`, or `n` times the value of a named symbol ("tokens", "2*tokens").
struct dim_expr {
  std::int64_t n = 0;
  std::string symbol;  // empty: a constant
  friend bool operator==(const dim_expr&, const dim_expr&) = default;
};

struct value_type {
  dtype type = dtype::f32;
  std::vector<dim_expr> dims;
  friend bool operator==(const value_type&, const value_type&) = default;
};

struct node {
  std::int64_t id = -1;
  node_type type = node_type::call;
  // Input / Output: the value's name (an Output that carries state names the state it writes);
  // GetAttr: the parameter's name (a Hugging Face weight name); Call: its result's name.
  std::string name;
  std::string op;                         // Call: the op's registered name
  json attributes = json::object();       // Call: the op's attributes by name
  std::optional<value_type> value;        // the node's result type (Input, GetAttr: required)
  bool state = false;                     // Input: state carried from call to call (a KV cache)
  std::optional<std::int64_t> carries;    // Output: the state Input whose next value this is
  // Control flow (docs/GRAPH_FORMAT.md, "Control flow"): a Conditional's branches and a Loop's body
  // as lists of node ids, a Loop's bound, the Conditional or Loop a Merge belongs to.
  std::vector<std::int64_t> then_body, else_body, body;
  std::optional<std::int64_t> max_trips;
  std::optional<std::int64_t> of;
  json metadata = json::object();         // source location, original name, free-form attributes
};

struct edge {
  std::int64_t source = -1;
  std::int64_t target = -1;
  std::string name;  // the value's name, as the FX layout writes it
  int slot = 0;      // which argument of the target (a Call's operand order; 0 for an Output)
};

enum class constraint_kind : std::uint8_t { equal, divisible, range };

inline constexpr const char* constraint_kind_names[] = {"Equal", "Divisible", "Range"};

// Equal: symbols[0] == symbols[1]; Divisible: symbols[0] % by == 0; Range: min <= symbols[0] <= max.
struct constraint {
  constraint_kind kind = constraint_kind::range;
  std::vector<std::string> symbols;
  std::int64_t by = 0, min = 0, max = 0;
};

struct symbol_decl {
  std::string name;
  std::string doc;
};

struct document {
  json metadata = json::object();  // always holds "version"
  std::vector<symbol_decl> symbols;
  std::vector<constraint> constraints;
  std::vector<node> nodes;
  std::vector<edge> edges;
  std::vector<std::int64_t> inputs, outputs;

  const node* find(std::int64_t id) const {
    for (const auto& n : nodes)
      if (n.id == id) return &n;
    return nullptr;
  }
};

// One defect: where ("node 12", "edge 3 (1 -> 12)", "graph"), the rule broken, and what was expected.
struct issue {
  std::string where;
  std::string rule;
  std::string message;
};

// "node 12: shape: ...": an issue inside a sentence; to_line is the line `fused graph check` prints.
inline std::string to_phrase(const issue& i) { return i.where + ": " + i.rule + ": " + i.message; }
inline std::string to_line(const issue& i) { return "error: " + to_phrase(i); }

inline std::string node_where(std::int64_t id) { return "node " + std::to_string(id); }
inline std::string edge_where(std::size_t index, const edge& e) {
  return "edge " + std::to_string(index) + " (" + std::to_string(e.source) + " -> " + std::to_string(e.target) + ")";
}

}  // namespace fused::ir
