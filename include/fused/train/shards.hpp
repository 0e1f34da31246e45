// Data-parallel training: a batch split into K micro-batches of equal shape, each rank computing the
// gradients of a contiguous block of K / R of them, and the sum over all K formed in one fixed
// pairwise tree whatever R is. Each node of the tree is added by the rank holding its first
// micro-batch, which receives the node's right half from the rank holding that half's first; a rank
// adds its own micro-batches in the same tree. So 1, 2 or any R ranks dividing K form bit for bit the
// same sum, and take the same optimizer step (docs/TRAINING.md, "Data parallelism").
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace fused::train {

// How the ranks of a data-parallel run exchange values: point to point, blocking, messages between
// two ranks arriving in the order they were sent (MPI_Send / MPI_Recv in `fused train`).
class communicator {
 public:
  virtual ~communicator() = default;
  virtual int rank() const = 0;
  virtual int ranks() const = 0;
  virtual void send(int to, std::span<const float> values) = 0;
  virtual void receive(int from, std::span<float> values) = 0;
};

// One process alone: nothing to exchange.
class single_rank final : public communicator {
 public:
  int rank() const override { return 0; }
  int ranks() const override { return 1; }
  void send(int, std::span<const float>) override { throw std::logic_error("single_rank: there is no other rank to send to"); }
  void receive(int, std::span<float>) override { throw std::logic_error("single_rank: there is no other rank to receive from"); }
};

// K micro-batches over R ranks: rank r holds micro-batches [r K/R, (r+1) K/R).
struct shard_layout {
  std::int64_t micro_batches = 1;
  int ranks = 1;

  // Throws std::invalid_argument unless R divides K.
  void check() const {
    if (micro_batches < 1 || ranks < 1 || micro_batches % ranks != 0)
      throw std::invalid_argument("a batch of " + std::to_string(micro_batches) + " micro-batches does not split evenly over " + std::to_string(ranks) +
                                  " ranks (the rank count must divide the micro-batch count)");
  }
  std::int64_t per_rank() const { return micro_batches / ranks; }
  int owner(std::int64_t micro_batch) const { return static_cast<int>(micro_batch / per_rank()); }
  std::int64_t first_of(int rank) const { return rank * per_rank(); }
};

namespace detail {
// The sum over micro-batches [lo, hi) into `out` on the rank owning lo; the tree splits at
// lo + ceil((hi - lo) / 2). Ranks outside [owner(lo), owner(hi - 1)] take no part.
template <class Leaf>
void tree_node(communicator& c, const shard_layout& l, std::int64_t lo, std::int64_t hi, std::span<float> out, std::vector<std::vector<float>>& scratch,
               std::size_t depth, Leaf& leaf) {
  const int me = c.rank();
  if (me < l.owner(lo) || me > l.owner(hi - 1)) return;
  if (hi - lo == 1) {
    leaf(lo, out);
    return;
  }
  const std::int64_t mid = lo + (hi - lo + 1) / 2;
  std::vector<float>& right = scratch.at(depth);  // sized by tree_sum: no reallocation under this reference
  right.resize(out.size());
  tree_node(c, l, lo, mid, out, scratch, depth + 1, leaf);
  tree_node(c, l, mid, hi, std::span<float>(right), scratch, depth + 1, leaf);
  const int left_owner = l.owner(lo), right_owner = l.owner(mid);
  if (me != left_owner) {
    if (me == right_owner) c.send(left_owner, right);
    return;
  }
  if (right_owner != me) c.receive(right_owner, right);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] += right[i];
}
}  // namespace detail

// Sums, over the K micro-batches of `layout`, the values `leaf(k, out)` writes for micro-batch k
// (called on the rank holding k, for its micro-batches in increasing order), in the fixed tree; every
// rank gets the total in `total`. `scratch` keeps its buffers (one per tree level) from call to call.
template <class Leaf>
void tree_sum(communicator& c, const shard_layout& layout, std::span<float> total, std::vector<std::vector<float>>& scratch, Leaf&& leaf) {
  layout.check();
  if (layout.ranks != c.ranks()) throw std::invalid_argument("tree_sum: the layout has " + std::to_string(layout.ranks) + " ranks, the communicator " + std::to_string(c.ranks()));
  std::size_t levels = 0;
  for (std::int64_t n = layout.micro_batches; n > 1; n = (n + 1) / 2) ++levels;
  if (scratch.size() < levels) scratch.resize(levels);
  detail::tree_node(c, layout, 0, layout.micro_batches, total, scratch, 0, leaf);
  if (c.rank() == 0) {
    for (int r = 1; r < c.ranks(); ++r) c.send(r, total);
  } else {
    c.receive(0, total);
  }
}

}  // namespace fused::train
