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
// Data parallel (data_parallel): the batch in K micro-batches, over R ranks; the program then stops at
// the gradients, their sum over the micro-batches is formed in a fixed tree (train/shards.hpp), and an
// update program of its own applies it, so the result is the same bits for any R dividing K.
#pragma once
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "../core/non_finite.hpp"
#include "../io/safetensors.hpp"
#include "../runtime/execute.hpp"
#include "../runtime/session.hpp"
#include "../runtime/weights.hpp"
#include "../train/shards.hpp"
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
  if (shape.tokens < train::min_sequence_tokens) throw std::invalid_argument(std::string(train::too_few_tokens) + ", got " + std::to_string(shape.tokens));
  if (shape.sequences < 1) throw std::invalid_argument("a train step needs at least one sequence");
  check_positions(c, shape.tokens, "sequences of " + std::to_string(shape.tokens) + " tokens exceed");
  if (shape.sequences > train::max_step_tokens / shape.tokens)
    throw std::invalid_argument("a batch of " + std::to_string(shape.sequences) + " x " + std::to_string(shape.tokens) +
                                " tokens is too large: a train step takes at most " + std::to_string(train::max_step_tokens) + " tokens");
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

namespace detail {
// A planned program on regions of its own: the state region (kept from call to call) and the arena.
class bound_program {
 public:
  explicit bound_program(planned p) : plan(std::move(p)) {
    const std::vector<wire_state> wires(plan.prog.tensors.size(), wire_state{.bound = true});
    calls = runtime::lower_all(plan.prog, plan.mem, wires);
    for (const runtime::call& k : calls)
      if (k.k == runtime::kernel::host) throw graph_error("step " + std::to_string(k.step) + ": a train step runs C kernels only, not an op's host function");
    state = runtime::aligned_bytes(static_cast<std::size_t>(plan.mem.region_bytes[static_cast<int>(region::state)]));
    arena = runtime::aligned_bytes(static_cast<std::size_t>(plan.mem.arena_bytes()));
  }

  planned plan;
  std::vector<runtime::call> calls;
  runtime::aligned_bytes state, arena;

  void run() { runtime::execute(plan.prog, plan.mem, calls, {nullptr, state.data(), arena.data()}, plan.mem.bind); }
  std::byte* bytes_of(tensor_id t) {
    const buffer& b = plan.mem.of(t);
    return (b.where == region::state ? state.data() : arena.data()) + b.offset;
  }
  std::span<float> floats(tensor_id t) {
    return {reinterpret_cast<float*>(bytes_of(t)), static_cast<std::size_t>(plan.prog.tensor(t).shp.elements(plan.mem.bind))};
  }
  std::vector<std::int64_t> dims_of(tensor_id t) const {
    std::vector<std::int64_t> d;
    const fused::shape& s = plan.prog.tensor(t).shp;
    for (int i = 0; i < s.rank; ++i) d.push_back(plan.mem.bind(s[i]));
    return d;
  }
  // The tensor of this role and name, or -1.
  tensor_id find(role r, std::string_view name) const {
    for (const tensor_info& t : plan.prog.tensors)
      if (t.kind == r && to_string(t.name.str()) == name) return t.id;
    return -1;
  }
  // The same where the program always has it (an input, or the step count).
  tensor_id named(role r, std::string_view name) const {
    if (const tensor_id t = find(r, name); t >= 0) return t;
    throw std::logic_error("a train step has no " + std::string(name_of(r)) + " " + std::string(name));
  }
  void write(std::string_view input, const void* data, std::size_t bytes) { std::memcpy(bytes_of(named(role::input, input)), data, bytes); }
};
}  // namespace detail

// How a trainer splits its batch: into `micro_batches` micro-batches of equal size, shared by the ranks
// of `ranks` (nullptr: this process alone), their gradients summed in a fixed tree (train/shards.hpp).
// One micro-batch on one rank is the whole step as one program.
struct data_parallel {
  std::int64_t micro_batches = 1;
  train::communicator* ranks = nullptr;
};

class trainer {
 public:
  trainer(const family_entry& f, const config& c, batch_shape shape, graph_options o = {}, data_parallel parallel = {})
      : shape_(shape), step_(plan_train(f, c, sharded_shape(shape, parallel), gradients_only(o, parallel))) {
    tokens_ = shape.sequences * shape.tokens;
    if (!sharded(parallel)) return;
    ranks_ = parallel.ranks;
    layout_ = {.micro_batches = parallel.micro_batches, .ranks = ranks().ranks()};
    layout_.check();
    std::vector<train::parameter_shape> shapes;
    std::size_t values = 0;
    for (const trained_parameter& p : step_.plan.prog.parameters) {
      const tensor_info& t = step_.plan.prog.tensor(p.value);
      shapes.push_back({.name = t.name, .shp = t.shp});
      gradient_at_.push_back(values);
      values += static_cast<std::size_t>(t.shp.elements(step_.plan.mem.bind));
    }
    update_.emplace(plan_built(train::update_program(shapes, o.train), binding{}, [](const oversize&, const program&) { return std::string("the parameters"); }));
    draw_input_ = step_.find(role::input, train::dropout_draw_name);
    sums_.assign(values + 1, 0.0f);  // every gradient, then the loss
  }

  // The forward and backward program (with the update, unless the batch is sharded).
  const program& prog() const { return step_.plan.prog; }
  const memory_plan& mem() const { return step_.plan.mem; }
  std::int64_t tokens() const { return tokens_; }  // of the whole batch
  // The state region that holds the parameters, the optimizer's state and its step count.
  std::span<std::byte> state() {
    detail::bound_program& k = keeper();
    return {k.state.data(), k.state.size()};
  }
  batch_shape shape() const { return shape_; }
  // Micro-batches and ranks (1 and 1 for a step run as one program).
  train::shard_layout layout() const { return layout_; }

  // The parameters as a checkpoint stores them (bf16 weights under their Hugging Face names, in
  // parameter order): what weight_store::load binds before load().
  std::vector<tensor_info> checkpoint_tensors() const {
    std::vector<tensor_info> t;
    for (const trained_parameter& p : step_.plan.prog.parameters) {
      tensor_info w = step_.plan.prog.tensor(p.value);
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
    detail::bound_program& k = keeper();
    std::memset(k.state.data(), 0, k.state.size());
    const std::size_t count = k.plan.prog.parameters.size();
    if (w.count() != count) throw std::invalid_argument("trainer::load: the store binds " + std::to_string(w.count()) + " tensors, the program has " + std::to_string(count) + " parameters");
    for (std::size_t i = 0; i < count; ++i) {
      std::span<float> p = parameter(i);
      if (const io::tensor_view* stored = w.source(i); stored != nullptr && stored->dtype != io::dtype::BF16) {
        const std::vector<float> exact = io::to_f32_owned(*stored);
        std::copy(exact.begin(), exact.end(), p.begin());
        continue;
      }
      const std::uint16_t* from = w.table()[i];
      for (std::size_t e = 0; e < p.size(); ++e) {
        const std::uint32_t bits = static_cast<std::uint32_t>(from[e]) << 16;
        std::memcpy(&p[e], &bits, 4);
      }
    }
    share_state();
  }

  // One train step on `ids` (tokens() of them: the batch's sequences one after another) against
  // `labels` (as many; -100 skips a position) at learning rate `lr`: returns the loss before the update.
  // Every rank of a data-parallel trainer passes the whole batch and gets the same loss and update.
  float step(std::span<const std::int32_t> ids, std::span<const std::int32_t> labels, float lr) { return *step_unless(ids, labels, lr, {}); }
  // The same, unless `stop` answers true before one of its micro-batches (asked on a trainer of one
  // rank; a step of many micro-batches takes minutes, and Ctrl-C should not wait for all of them):
  // then the step is dropped, no update made (the parameters, the optimizer's state and its step count
  // as they were), and the answer is empty. A step run as one program is taken whole.
  std::optional<float> step_unless(std::span<const std::int32_t> ids, std::span<const std::int32_t> labels, float lr,
                                   const std::function<bool()>& stop) {
    if (static_cast<std::int64_t>(ids.size()) != tokens_ || labels.size() != ids.size())
      throw std::invalid_argument("a train step takes " + std::to_string(tokens_) + " token ids and as many labels, got " + std::to_string(ids.size()) + " and " +
                                  std::to_string(labels.size()));
    if (!update_) {
      step_.write("input_ids", ids.data(), ids.size_bytes());
      step_.write("labels", labels.data(), labels.size_bytes());
      step_.write("learning_rate", &lr, sizeof lr);
      step_.run();
      return loss_of(step_);
    }
    const auto label_count = static_cast<float>(std::count_if(labels.begin(), labels.end(), [](std::int32_t l) { return l != FK_IGNORE_LABEL; }));
    const auto micro_tokens = static_cast<std::size_t>(tokens_ / layout_.micro_batches);
    const program& g = step_.plan.prog;
    const std::int64_t first_draw = std::int64_t{steps_taken()} * layout_.micro_batches + 1;
    const bool may_stop = stop && ranks().ranks() == 1;  // ranks would part ways: each waits on the others' sums
    struct stopped_step {};  // thrown by a leaf: the tree's sums still to come would read what no update reads
    try {
      train::tree_sum(ranks(), layout_, std::span<float>(sums_), scratch_, [&](std::int64_t m, std::span<float> out) {
        if (may_stop && stop()) throw stopped_step{};
        const std::size_t first = static_cast<std::size_t>(m) * micro_tokens;
        step_.write("input_ids", ids.data() + first, micro_tokens * sizeof(std::int32_t));
        step_.write("labels", labels.data() + first, micro_tokens * sizeof(std::int32_t));
        step_.write("label_count", &label_count, sizeof label_count);
        if (draw_input_ >= 0) {
          const auto draw = static_cast<std::int32_t>(first_draw + m);
          std::memcpy(step_.bytes_of(draw_input_), &draw, sizeof draw);
        }
        step_.run();
        for (std::size_t k = 0; k < g.parameters.size(); ++k) {
          const std::span<const float> grad = step_.floats(g.parameters[k].gradient);
          std::copy(grad.begin(), grad.end(), out.begin() + static_cast<std::ptrdiff_t>(gradient_at_[k]));
        }
        out.back() = loss_of(step_);
      });
    } catch (const stopped_step&) {
      return std::nullopt;
    }
    detail::bound_program& u = *update_;
    for (std::size_t k = 0; k < g.parameters.size(); ++k) {
      const std::span<const float> sum = gradient(k);
      std::copy(sum.begin(), sum.end(), u.floats(u.plan.prog.parameters[k].gradient).begin());
    }
    u.write("learning_rate", &lr, sizeof lr);
    u.run();
    share_state();
    return sums_.back();
  }
  // The same with next-token labels: in each sequence label t = ids[t + 1], its last position skipped.
  float step(std::span<const std::int32_t> ids, float lr) { return step(ids, next_token_labels(ids), lr); }
  std::optional<float> step_unless(std::span<const std::int32_t> ids, float lr, const std::function<bool()>& stop) {
    return step_unless(ids, next_token_labels(ids), lr, stop);
  }
  std::vector<std::int32_t> next_token_labels(std::span<const std::int32_t> ids) const {
    std::vector<std::int32_t> labels(ids.size(), FK_IGNORE_LABEL);
    const auto per = static_cast<std::size_t>(shape_.tokens);
    for (std::size_t t = 0; t + 1 < ids.size(); ++t)
      if ((t + 1) % per != 0) labels[t] = ids[t + 1];
    return labels;
  }

  // Parameter k (program order: prog().parameters) as it is now, and d loss / d it from the last
  // step (a step run as one program keeps its gradients only with graph_options::train.keep_gradients;
  // a sharded step always has their sum).
  std::span<float> parameter(std::size_t k) {
    detail::bound_program& p = keeper();
    return p.floats(p.plan.prog.parameters.at(k).value);
  }
  // The first parameter, or the first f32 state tensor (parameters and the optimizer's state), that
  // holds a value that is not finite, as a sentence naming it; empty when all are finite. A run
  // checks its last update with these: no later loss would show it.
  std::string first_non_finite_parameter() {
    detail::bound_program& p = keeper();
    for (const auto& parameter : p.plan.prog.parameters)
      if (std::string bad = non_finite_in(p, parameter.value); !bad.empty()) return bad;
    return {};
  }
  std::string first_non_finite_state() {
    detail::bound_program& p = keeper();
    for (const tensor_info& t : p.plan.prog.tensors)
      if (t.kind == role::state && t.is_feed && t.type == dtype::f32)
        if (std::string bad = non_finite_in(p, t.id); !bad.empty()) return bad;
    return {};
  }
  std::span<const float> gradient(std::size_t k) const {
    if (update_) {
      const std::size_t n = static_cast<std::size_t>(step_.plan.prog.tensor(step_.plan.prog.parameters.at(k).value).shp.elements(step_.plan.mem.bind));
      return std::span<const float>(sums_).subspan(gradient_at_[k], n);
    }
    const tensor_id g = step_.plan.prog.parameters.at(k).gradient;
    if (step_.plan.prog.tensor(g).kind != role::output) throw std::logic_error("trainer::gradient: the program does not keep its gradients (train.keep_gradients)");
    return const_cast<detail::bound_program&>(step_).floats(g);
  }
  std::string parameter_name(std::size_t k) const { return to_string(step_.plan.prog.tensor(step_.plan.prog.parameters.at(k).value).name.str()); }

  // The parameters rounded to bf16 under their Hugging Face names: a model.safetensors that
  // `fused run` and transformers load (with config.json's dtype bfloat16); checkpoint_file() is its bytes.
  void save_checkpoint(const std::filesystem::path& file) { io::replace_file(file, checkpoint_file()); }
  std::vector<std::byte> checkpoint_file() {
    detail::bound_program& p = keeper();
    std::vector<std::vector<std::uint16_t>> bf16(p.plan.prog.parameters.size());
    std::vector<io::tensor_data> out;
    for (std::size_t k = 0; k < bf16.size(); ++k) {
      const std::span<const float> values = parameter(k);
      bf16[k].resize(values.size());
      fk_f32_to_bf16(values.data(), bf16[k].data(), values.size());
      out.push_back({parameter_name(k), io::dtype::BF16, p.dims_of(p.plan.prog.parameters[k].value), std::as_bytes(std::span(bf16[k]))});
    }
    return io::serialize_safetensors(out);
  }
  // Everything a step carries to the next (f32 master parameters, the optimizer's state, its step
  // count), by the program's tensor names: what resume() reads back; state_file() is its bytes.
  void save_state(const std::filesystem::path& file) { io::replace_file(file, state_file()); }
  std::vector<std::byte> state_file() {
    detail::bound_program& p = keeper();
    std::vector<io::tensor_data> out;
    for (const tensor_info& t : p.plan.prog.tensors)
      if (t.kind == role::state && t.is_feed)
        out.push_back({to_string(t.name.str()), t.type == dtype::i32 ? io::dtype::I32 : io::dtype::F32, p.dims_of(t.id),
                       std::span<const std::byte>(p.bytes_of(t.id), static_cast<std::size_t>(fused::bytes_of(t, p.plan.mem.bind)))});
    return io::serialize_safetensors(out);
  }
  // Continues from save_state's file: every state tensor must be there with its dtype and shape, and
  // values a step can take on (finite; AdamW's second moments not negative; a step count that can
  // still advance): anything else would make every later step NaN, silently.
  void resume(const std::filesystem::path& file) {
    detail::bound_program& p = keeper();
    const io::safetensors_file f = io::safetensors_file::open(file);
    // A state of another optimizer (AdamW's moments resumed by SGD) must not be dropped silently.
    std::unordered_set<std::string> state_names;
    for (const tensor_info& t : p.plan.prog.tensors)
      if (t.kind == role::state && t.is_feed) state_names.insert(to_string(t.name.str()));
    for (const io::tensor_view& v : f.tensors()) {
      if (!state_names.contains(v.name))
        throw std::invalid_argument(file.string() + ": tensor \"" + v.name + "\" is not part of this train step's state (a state saved by another " +
                                    "optimizer, or with other optimizer flags? --optimizer and --momentum must be those it was saved with)");
    }
    for (const tensor_info& t : p.plan.prog.tensors) {
      if (t.kind != role::state || !t.is_feed) continue;
      const std::string name = to_string(t.name.str());
      const io::tensor_view* v = f.find(name);
      const io::dtype want = t.type == dtype::i32 ? io::dtype::I32 : io::dtype::F32;
      if (v == nullptr) throw std::invalid_argument(file.string() + ": tensor \"" + name + "\" is missing: a train state holds every parameter, the optimizer's state (AdamW's moments or SGD's momentum) and the step count, saved by the same optimizer");
      if (v->dtype != want || v->shape != p.dims_of(t.id))
        throw std::invalid_argument(file.string() + ": tensor \"" + name + "\" is " + std::string(io::dtype_name(v->dtype)) + " " + io::shape_string(v->shape) +
                                    ", this train step needs " + std::string(io::dtype_name(want)) + " " + io::shape_string(p.dims_of(t.id)));
      std::memcpy(p.bytes_of(t.id), v->data, v->bytes);
      const std::string where = file.string() + ": tensor \"" + name + "\" holds ";
      if (want == io::dtype::F32) {
        const std::span<const float> values(reinterpret_cast<const float*>(p.bytes_of(t.id)), v->bytes / sizeof(float));
        const bool second_moment = name.ends_with(".adam_v");
        for (std::size_t i = 0; i < values.size(); ++i) {
          if (!std::isfinite(values[i]))
            throw std::invalid_argument(where + (std::isnan(values[i]) ? "NaN" : "an infinity") + " at element " + std::to_string(i) +
                                        "; a train state must be finite");
          if (second_moment && values[i] < 0)
            throw std::invalid_argument(where + fmt::format("{:g}", values[i]) + " at element " + std::to_string(i) +
                                        "; AdamW's second moment is a mean of squares, never negative");
        }
      } else if (name == train::step_count_name) {
        std::int32_t count = 0;
        std::memcpy(&count, p.bytes_of(t.id), sizeof count);
        if (count < 0 || count == INT32_MAX)
          throw std::invalid_argument(where + std::to_string(count) + "; a step count is 0 .. 2^31 - 2");
      }
    }
    share_state();
  }
  // The optimizer's step count (steps taken since load()).
  std::int32_t steps_taken() {
    detail::bound_program& p = keeper();
    std::int32_t n = 0;
    std::memcpy(&n, p.bytes_of(p.named(role::state, train::step_count_name)), sizeof n);
    return n;
  }

 private:
  // What first_non_finite_* says of tensor t (core/non_finite.hpp's sentence), empty when it is finite.
  static std::string non_finite_in(detail::bound_program& p, tensor_id t) {
    const std::span<const float> values = p.floats(t);
    const non_finite_count bad = count_non_finite(values.size(), [&](std::size_t i) { return values[i]; });
    if (!bad.count) return {};
    return non_finite_sentence(to_string(p.plan.prog.tensor(t).name.str()), values[bad.first], bad, values.size());
  }
  static bool sharded(const data_parallel& p) { return p.micro_batches > 1 || (p.ranks != nullptr && p.ranks->ranks() > 1); }
  static batch_shape sharded_shape(batch_shape whole, const data_parallel& p) {
    if (!sharded(p)) return whole;
    if (p.micro_batches < 1 || whole.sequences % p.micro_batches != 0)
      throw std::invalid_argument("a batch of " + std::to_string(whole.sequences) + " sequences does not split into " + std::to_string(p.micro_batches) +
                                  " micro-batches of equal size");
    return {.sequences = whole.sequences / p.micro_batches, .tokens = whole.tokens};
  }
  static graph_options gradients_only(graph_options o, const data_parallel& p) {
    if (sharded(p)) o.train.gradients_only = true;
    return o;
  }
  static float loss_of(detail::bound_program& p) {
    float loss = 0;
    std::memcpy(&loss, p.bytes_of(p.plan.prog.output("loss")), sizeof loss);
    return loss;
  }
  train::communicator& ranks() { return ranks_ != nullptr ? *ranks_ : alone_; }
  // The program whose state holds the parameters: the update program of a sharded step.
  detail::bound_program& keeper() { return update_ ? *update_ : step_; }
  // A sharded step's gradient program reads the parameters, its only state, from a state region of
  // its own: the update program's values (both list the parameters in one order).
  void share_state() {
    if (!update_) return;
    for (std::size_t k = 0; k < step_.plan.prog.parameters.size(); ++k) {
      const std::span<const float> from = parameter(k);
      std::copy(from.begin(), from.end(), step_.floats(step_.plan.prog.parameters[k].value).begin());
    }
  }

  batch_shape shape_;
  detail::bound_program step_;
  std::optional<detail::bound_program> update_;
  std::int64_t tokens_ = 0;
  train::single_rank alone_;
  train::communicator* ranks_ = nullptr;  // the caller's; nullptr: alone_
  train::shard_layout layout_{};
  std::vector<std::size_t> gradient_at_;  // where parameter k's gradient starts in sums_
  tensor_id draw_input_ = -1;             // a sharded program's dropout_draw input, if it has dropout
  std::vector<float> sums_;
  std::vector<std::vector<float>> scratch_;
};

}  // namespace fused::decoder
