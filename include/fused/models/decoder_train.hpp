// A decoder's train step at run time: the family's forward pass built in training mode (train/step.hpp),
// planned and verified like prefill and decode, lowered once, and run on regions this object owns.
// The state region holds the parameters (f32), AdamW's moments and its step count; each step() is one
// call of the program, which updates them in place.
//
//   decoder::trainer t(*info.family, info.arch, 16, {.train = {.optimizer = {.weight_decay = 0.01}}});
//   t.load(weights);                     // a weight_store bound to t.checkpoint_tensors()
//   float loss = t.step(ids, 1e-3f);     // labels: ids shifted by one, the last position skipped
#pragma once
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "../runtime/execute.hpp"
#include "../runtime/session.hpp"
#include "../runtime/weights.hpp"
#include "decoder_plan.hpp"

namespace fused::decoder {

class trainer {
 public:
  // A train step over sequences of exactly `tokens` tokens.
  trainer(const family_entry& f, const config& c, std::int64_t tokens, graph_options o = {}) : cfg_(c) {
    o.training = true;
    o.logits = logits_rows::all;
    plan_ = plan_for(f, c, mode::prefill(tokens, tokens), o);
    tokens_ = tokens;
    const std::vector<wire_state> wires(plan_.prog.tensors.size(), wire_state{.bound = true});
    calls_ = runtime::lower_all(plan_.prog, plan_.mem, wires);
    for (const runtime::call& k : calls_)
      if (k.k == runtime::kernel::host) throw graph_error("step " + std::to_string(k.step) + ": a train step runs C kernels only, not an op's host function");
    state_ = runtime::aligned_bytes(static_cast<std::size_t>(plan_.mem.region_bytes[static_cast<int>(region::state)]));
    arena_ = runtime::aligned_bytes(static_cast<std::size_t>(plan_.mem.arena_bytes()));
  }

  const program& prog() const { return plan_.prog; }
  const memory_plan& mem() const { return plan_.mem; }
  std::int64_t tokens() const { return tokens_; }

  // The parameters as a checkpoint stores them (bf16 weights under their Hugging Face names, in
  // parameter order): what weight_store::load binds before load().
  std::vector<tensor_info> checkpoint_tensors() const {
    std::vector<tensor_info> t;
    for (const trained_parameter& p : plan_.prog.parameters) {
      tensor_info w = plan_.prog.tensor(p.value);
      w.id = static_cast<tensor_id>(t.size());
      w.kind = role::weight;
      w.type = dtype::bf16;
      t.push_back(w);
    }
    return t;
  }
  // Sets every parameter from `w` (bound to checkpoint_tensors(), slot k = parameter k), widened to
  // f32 exactly, and starts the optimizer afresh (moments and step count zero).
  void load(const runtime::weight_store& w) {
    std::memset(state_.data(), 0, state_.size());
    const auto& params = plan_.prog.parameters;
    if (w.count() != params.size()) throw std::invalid_argument("trainer::load: the store binds " + std::to_string(w.count()) + " tensors, the program has " + std::to_string(params.size()) + " parameters");
    for (std::size_t k = 0; k < params.size(); ++k) {
      std::span<float> p = parameter(k);
      const std::uint16_t* from = w.table()[k];
      for (std::size_t i = 0; i < p.size(); ++i) {
        const std::uint32_t bits = static_cast<std::uint32_t>(from[i]) << 16;
        std::memcpy(&p[i], &bits, 4);
      }
    }
  }

  // One train step on `ids` (exactly tokens() of them) against `labels` (the same count; -100 skips
  // a position) at learning rate `lr`: returns the loss before the update.
  float step(std::span<const std::int32_t> ids, std::span<const std::int32_t> labels, float lr) {
    if (static_cast<std::int64_t>(ids.size()) != tokens_ || labels.size() != ids.size())
      throw std::invalid_argument("a train step takes " + std::to_string(tokens_) + " token ids and as many labels, got " + std::to_string(ids.size()) + " and " +
                                  std::to_string(labels.size()));
    write("input_ids", ids.data(), ids.size_bytes());
    write("labels", labels.data(), labels.size_bytes());
    write("learning_rate", &lr, sizeof lr);
    runtime::execute(plan_.prog, plan_.mem, calls_, {nullptr, state_.data(), arena_.data()}, plan_.mem.bind);
    float loss = 0;
    std::memcpy(&loss, bytes_of(plan_.prog.output("loss")), sizeof loss);
    return loss;
  }
  // The same with the next-token labels: label t = ids[t + 1], the last position skipped.
  float step(std::span<const std::int32_t> ids, float lr) {
    std::vector<std::int32_t> labels(ids.size(), FK_IGNORE_LABEL);
    for (std::size_t t = 0; t + 1 < ids.size(); ++t) labels[t] = ids[t + 1];
    return step(ids, labels, lr);
  }

  // Parameter k (program order: prog().parameters) as it is now, and d loss / d it from the last
  // step (graph_options::train.keep_gradients must be set for the gradients).
  std::span<float> parameter(std::size_t k) { return floats(plan_.prog.parameters.at(k).value); }
  std::span<const float> gradient(std::size_t k) const {
    const tensor_id g = plan_.prog.parameters.at(k).gradient;
    if (plan_.prog.tensor(g).kind != role::output) throw std::logic_error("trainer::gradient: the program does not keep its gradients (train.keep_gradients)");
    return const_cast<trainer*>(this)->floats(g);
  }
  std::string parameter_name(std::size_t k) const { return to_string(plan_.prog.tensor(plan_.prog.parameters.at(k).value).name.str()); }

 private:
  std::byte* bytes_of(tensor_id t) {
    const buffer& b = plan_.mem.of(t);
    return (b.where == region::state ? state_.data() : arena_.data()) + b.offset;
  }
  std::span<float> floats(tensor_id t) {
    return {reinterpret_cast<float*>(bytes_of(t)), static_cast<std::size_t>(plan_.prog.tensor(t).shp.elements(plan_.mem.bind))};
  }
  void write(std::string_view input, const void* data, std::size_t bytes) {
    for (const tensor_info& t : plan_.prog.tensors)
      if (t.kind == role::input && to_string(t.name.str()) == input) {
        std::memcpy(bytes_of(t.id), data, bytes);
        return;
      }
    throw std::logic_error("a train step has no input " + std::string(input));
  }

  config cfg_;
  planned plan_;
  std::int64_t tokens_ = 0;
  std::vector<runtime::call> calls_;
  runtime::aligned_bytes state_, arena_;
};

}  // namespace fused::decoder
