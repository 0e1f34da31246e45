// Ops by name, for programs built at run time from a graph file (fused/ir/): the built-in ops are
// registered here, and a program may register its own (an op_def: shape rule, attributes, kernel
// name) before it reads a graph that uses them. Static models never look ops up by name.
#pragma once
#include <algorithm>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "../ops.hpp"
#include "../graph/control.hpp"
#include "graph_ops.hpp"
#include "sequence_ops.hpp"

namespace fused::ops {

class registry {
 public:
  // The process-wide registry, holding the built-in ops.
  static registry& global() {
    static registry r(with_builtins);
    return r;
  }

  // The op registered under `name`, or nullptr.
  const op_def* find(std::string_view name) const {
    std::lock_guard lock(mutex_);
    for (const op_def* op : ops_)
      if (name == op->name) return op;
    return nullptr;
  }

  // Registers a copy of `op` (its name copied too); a name already taken is refused.
  const op_def& add(const op_def& op) {
    std::lock_guard lock(mutex_);
    for (const op_def* o : ops_)
      if (std::string_view(o->name) == op.name) throw std::invalid_argument(std::string("an op named '") + op.name + "' is registered already");
    names_.emplace_back(op.name);
    op_def& copy = owned_.emplace_back(op);
    copy.name = names_.back().c_str();
    ops_.push_back(&copy);
    return copy;
  }

  std::vector<std::string> names() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> n;
    for (const op_def* op : ops_) n.emplace_back(op->name);
    std::sort(n.begin(), n.end());
    return n;
  }

  // Up to `count` registered names closest to `name` by edit distance, for "did you mean": only
  // those within half the name's length (at least 2 edits), so a short op is no false suggestion.
  std::vector<std::string> closest(std::string_view name, std::size_t count = 3) const {
    std::vector<std::pair<std::size_t, std::string>> scored;
    const std::size_t within = std::max<std::size_t>(2, name.size() / 2);
    for (const std::string& n : names())
      if (const std::size_t d = distance(name, n); d <= within) scored.emplace_back(d, n);
    std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::string> out;
    for (std::size_t i = 0; i < scored.size() && i < count; ++i) out.push_back(scored[i].second);
    return out;
  }

 private:
  enum builtins { with_builtins };
  explicit registry(builtins) {
    for (const op_def* op : {&ops::embed, &ops::rms_norm, &ops::head_rms_norm, &ops::linear, &ops::rope, &ops::rope_llama3, &ops::kv_write,
                             &ops::attention, &ops::add, &ops::swiglu, &ops::take_last, &ops::neg, &ops::exp, &ops::relu,
                             &ops::sigmoid, &ops::silu, &ops::gelu, &ops::sub, &ops::mul, &ops::div, &ops::gt, &ops::lt, &ops::ge,
                             &ops::le, &ops::eq, &ops::ne, &ops::where, &ops::matmul, &ops::softmax, &ops::layer_norm, &ops::sum,
                             &ops::mean, &ops::max, &ops::reshape, &ops::transpose, &ops::concat, &ops::slice, &ops::full, &ops::zeros, &ops::arange, &ops::argmax, &ops::not_in, &ops::store_at,
                             &ops::increment, &ops::next_position, &ops::full_int, &ops::dropout, &control::copy})
      ops_.push_back(op);
  }
  static std::size_t distance(std::string_view a, std::string_view b) {
    if (a.size() > 256) a = a.substr(0, 256);  // a hostile name costs no more than this
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
      std::size_t diag = row[0];
      row[0] = i;
      for (std::size_t j = 1; j <= b.size(); ++j) {
        const std::size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
        diag = up;
      }
    }
    return row[b.size()];
  }

  mutable std::mutex mutex_;
  std::vector<const op_def*> ops_;
  std::deque<op_def> owned_;
  std::deque<std::string> names_;
};

}  // namespace fused::ops
