// A decoder's train step at run time: the family's forward pass built in training mode (train/step.hpp),
// planned and verified like prefill and decode, lowered once, and run on regions this object owns.
// The state region holds the parameters (f32), AdamW's moments and its step count; each step() is one
// call of the program, which updates them in place.
//
//   decoder::trainer t(*info.family, info.arch, {.sequences = 8, .tokens = 256}, {.train = {.optimizer = {.weight_decay = 0.01}}});
//   t.load(weights);                     // a weight_store bound to t.checkpoint_tensors()
//   float loss = t.step(ids, 1e-3f);     // 8 x 256 ids; labels: each sequence's ids shifted by one
// A batch is its sequences packed as rows (graph_options::packed): rope positions restart and
// attention stays within each sequence, and the loss is the mean over all predicted positions.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "../io/safetensors.hpp"
#include "../runtime/execute.hpp"
#include "../runtime/session.hpp"
#include "../runtime/weights.hpp"
#include "decoder_plan.hpp"

namespace fused::decoder {

// The batch of one train step: `sequences` sequences of `tokens` tokens each.
struct batch_shape {
  std::int64_t sequences = 1;
  std::int64_t tokens = 0;
};

// A decoder's train step on batches of `shape`, built in training mode (options.train: the optimizer),
// planned and verified: what trainer runs and `fused gen-c --train` prints. Throws
// std::invalid_argument naming the size or config field at fault, graph_error for a program the
// pipeline refuses (an op with no backward rule, a parameter the loss does not reach).
inline planned plan_train(const family_entry& f, const config& c, batch_shape shape, graph_options o = {}) {
  if (shape.tokens < 2) throw std::invalid_argument("a train step's sequences need at least 2 tokens (the loss predicts each next one), got " + std::to_string(shape.tokens));
  if (shape.sequences < 1) throw std::invalid_argument("a train step needs at least one sequence");
  check_positions(c, shape.tokens, "sequences of " + std::to_string(shape.tokens) + " tokens exceed");
  if (shape.sequences > (std::int64_t{1} << 20) / shape.tokens) throw std::invalid_argument("a batch of " + std::to_string(shape.sequences) + " x " + std::to_string(shape.tokens) + " tokens is too large");
  if (const auto p = check_sizes(c)) throw std::invalid_argument(std::string("config field \"") + p->field + "\": " + p->message);
  o.training = true;
  o.logits = logits_rows::all;
  o.packed = shape.sequences > 1 ? shape.tokens : 0;
  binding b{};
  b.value[sym_tokens] = shape.sequences * shape.tokens;
  b.value[sym_ctx] = shape.tokens;
  return plan_built(f.graph(c, o), b, [&](const oversize&, const program&) {
    return "a batch of " + std::to_string(shape.sequences) + " x " + std::to_string(shape.tokens) + " tokens";
  });
}

class trainer {
 public:
  trainer(const family_entry& f, const config& c, batch_shape shape, graph_options o = {}) : shape_(shape), plan_(plan_train(f, c, shape, o)) {
    tokens_ = shape.sequences * shape.tokens;
    const std::vector<wire_state> wires(plan_.prog.tensors.size(), wire_state{.bound = true});
    calls_ = runtime::lower_all(plan_.prog, plan_.mem, wires);
    for (const runtime::call& k : calls_)
      if (k.k == runtime::kernel::host) throw graph_error("step " + std::to_string(k.step) + ": a train step runs C kernels only, not an op's host function");
    state_ = runtime::aligned_bytes(static_cast<std::size_t>(plan_.mem.region_bytes[static_cast<int>(region::state)]));
    arena_ = runtime::aligned_bytes(static_cast<std::size_t>(plan_.mem.arena_bytes()));
  }

  const program& prog() const { return plan_.prog; }
  const memory_plan& mem() const { return plan_.mem; }
  std::int64_t tokens() const { return tokens_; }  // of the whole batch
  // The state region: parameters, moments, step count, at the plan's offsets.
  std::span<std::byte> state() { return {state_.data(), state_.size()}; }
  batch_shape shape() const { return shape_; }

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
  // Sets every parameter from `w` (bound to checkpoint_tensors(), slot k = parameter k) exactly as
  // the checkpoint stores it (BF16 and F16 widened, F32 copied; a store without its sources gives
  // its bf16), and starts the optimizer afresh (moments and step count zero).
  void load(const runtime::weight_store& w) {
    std::memset(state_.data(), 0, state_.size());
    const auto& params = plan_.prog.parameters;
    if (w.count() != params.size()) throw std::invalid_argument("trainer::load: the store binds " + std::to_string(w.count()) + " tensors, the program has " + std::to_string(params.size()) + " parameters");
    for (std::size_t k = 0; k < params.size(); ++k) {
      std::span<float> p = parameter(k);
      if (const io::tensor_view* stored = w.source(k); stored != nullptr && stored->dtype != io::dtype::BF16) {
        const std::vector<float> exact = io::to_f32_owned(*stored);
        std::copy(exact.begin(), exact.end(), p.begin());
        continue;
      }
      const std::uint16_t* from = w.table()[k];
      for (std::size_t i = 0; i < p.size(); ++i) {
        const std::uint32_t bits = static_cast<std::uint32_t>(from[i]) << 16;
        std::memcpy(&p[i], &bits, 4);
      }
    }
  }

  // One train step on `ids` (tokens() of them: the batch's sequences one after another) against
  // `labels` (as many; -100 skips a position) at learning rate `lr`: returns the loss before the update.
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
  // The same with next-token labels: in each sequence label t = ids[t + 1], its last position skipped.
  float step(std::span<const std::int32_t> ids, float lr) {
    std::vector<std::int32_t> labels(ids.size(), FK_IGNORE_LABEL);
    const auto per = static_cast<std::size_t>(shape_.tokens);
    for (std::size_t t = 0; t + 1 < ids.size(); ++t)
      if ((t + 1) % per != 0) labels[t] = ids[t + 1];
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

  // The parameters rounded to bf16 under their Hugging Face names: a model.safetensors that
  // `fused run` and transformers load (config.json unchanged).
  void save_checkpoint(const std::filesystem::path& file) {
    std::vector<std::vector<std::uint16_t>> bf16(plan_.prog.parameters.size());
    std::vector<io::tensor_data> out;
    for (std::size_t k = 0; k < bf16.size(); ++k) {
      const std::span<const float> p = parameter(k);
      bf16[k].resize(p.size());
      fk_f32_to_bf16(p.data(), bf16[k].data(), p.size());
      out.push_back({parameter_name(k), io::dtype::BF16, dims_of(plan_.prog.parameters[k].value), std::as_bytes(std::span(bf16[k]))});
    }
    io::write_safetensors(file, out);
  }
  // Everything a step carries to the next (f32 master parameters, AdamW's moments, its step count),
  // by the program's tensor names: what resume() reads back.
  void save_state(const std::filesystem::path& file) {
    std::vector<io::tensor_data> out;
    for (const tensor_info& t : plan_.prog.tensors)
      if (t.kind == role::state && t.is_feed)
        out.push_back({to_string(t.name.str()), t.type == dtype::i32 ? io::dtype::I32 : io::dtype::F32, dims_of(t.id),
                       std::span<const std::byte>(bytes_of(t.id), static_cast<std::size_t>(fused::bytes_of(t, plan_.mem.bind)))});
    io::write_safetensors(file, out);
  }
  // Continues from save_state's file: every state tensor must be there with its dtype and shape.
  void resume(const std::filesystem::path& file) {
    const io::safetensors_file f = io::safetensors_file::open(file);
    for (const tensor_info& t : plan_.prog.tensors) {
      if (t.kind != role::state || !t.is_feed) continue;
      const std::string name = to_string(t.name.str());
      const io::tensor_view* v = f.find(name);
      const io::dtype want = t.type == dtype::i32 ? io::dtype::I32 : io::dtype::F32;
      if (v == nullptr) throw std::invalid_argument(file.string() + ": tensor \"" + name + "\" is missing: a train state holds every parameter, the optimizer's state (AdamW's moments or SGD's momentum) and the step count, saved by the same optimizer");
      if (v->dtype != want || v->shape != dims_of(t.id))
        throw std::invalid_argument(file.string() + ": tensor \"" + name + "\" is " + std::string(io::dtype_name(v->dtype)) + " " + io::shape_string(v->shape) +
                                    ", this train step needs " + std::string(io::dtype_name(want)) + " " + io::shape_string(dims_of(t.id)));
      std::memcpy(bytes_of(t.id), v->data, v->bytes);
    }
  }
  // The optimizer's step count (steps taken since load()).
  std::int32_t steps_taken() {
    std::int32_t n = 0;
    std::memcpy(&n, bytes_of(named(role::state, train::step_count_name)), sizeof n);
    return n;
  }

 private:
  std::byte* bytes_of(tensor_id t) {
    const buffer& b = plan_.mem.of(t);
    return (b.where == region::state ? state_.data() : arena_.data()) + b.offset;
  }
  std::vector<std::int64_t> dims_of(tensor_id t) const {
    std::vector<std::int64_t> d;
    const fused::shape& s = plan_.prog.tensor(t).shp;
    for (int i = 0; i < s.rank; ++i) d.push_back(plan_.mem.bind(s[i]));
    return d;
  }
  std::span<float> floats(tensor_id t) {
    return {reinterpret_cast<float*>(bytes_of(t)), static_cast<std::size_t>(plan_.prog.tensor(t).shp.elements(plan_.mem.bind))};
  }
  // The tensor of this role and name (an input, or the step count); the program always has it.
  tensor_id named(role r, std::string_view name) const {
    for (const tensor_info& t : plan_.prog.tensors)
      if (t.kind == r && to_string(t.name.str()) == name) return t.id;
    throw std::logic_error("a train step has no " + std::string(name_of(r)) + " " + std::string(name));
  }
  void write(std::string_view input, const void* data, std::size_t bytes) { std::memcpy(bytes_of(named(role::input, input)), data, bytes); }


  batch_shape shape_;
  planned plan_;
  std::int64_t tokens_ = 0;
  std::vector<runtime::call> calls_;
  runtime::aligned_bytes state_, arena_;
};

}  // namespace fused::decoder
