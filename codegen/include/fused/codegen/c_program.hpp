// What the C emitter prints: a decoder program (any family) planned for its two modes (prefill of up to max_seq
// tokens, decode of one) over one KV cache of max_ctx positions, with the kernel calls each mode
// lowers to (runtime/calls.hpp). Built from either source the C++ executors use:
//   from_static<Preset, S, C, Options>()   the static model's compile-time plans and call arrays;
//   from_runtime(family, config, S, C, o)   the run-time model's plans (decoder::plan_for) and calls.
// Both give the same value for one config (the golden test checks it), so the CMake generator and
// `fused gen-c` print the same text. Nothing here re-derives a shape or an offset: the emitter
// reads the calls, and the tensors/buffers only name what the calls point at.
// from_runtime can add a third mode, `generate`: generation as one program (decoder_generate.hpp),
// its loop and conditional kept as regions, over the same weights and KV cache.
#pragma once
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fused/core/text_string.hpp>
#include <fused/models/decoder_generate.hpp>
#include <fused/models/decoder_model.hpp>
#include <fused/models/family.hpp>
#include <fused/runtime/calls.hpp>
#include <fused/runtime/session.hpp>

namespace fused::codegen {

// A name as a C macro's part: upper case, anything else '_'.
inline std::string upper_ident(std::string_view s) {
  std::string out;
  for (char ch : s) out += std::isalnum(static_cast<unsigned char>(ch)) ? static_cast<char>(std::toupper(static_cast<unsigned char>(ch))) : '_';
  return out;
}

// One mode's plan as plain vectors (the static plan's arrays or the run-time plan, copied).
struct mode_plan {
  const char* mode = "prefill";
  binding bind{};
  std::vector<tensor_info> tensors;  // index == tensor id
  std::vector<step> steps;           // schedule order
  std::vector<buffer> buffers;       // index == tensor id
  std::vector<const char*> kernels;  // index == schedule position
  std::array<std::int64_t, region_count> region_bytes{};
  std::int64_t lower_bound = 0;
  strategy chosen = strategy::greedy_by_size;
  std::vector<runtime::call> calls;  // one per step, schedule order
  runtime::io_layout io{};
  std::vector<region_info> regions;  // control flow (the generate mode's loop and conditional)
  std::vector<loop_carry> carries;
  std::vector<std::string> idents;  // index == tensor id: its C name, unique within its region

  std::int64_t bytes(region r) const { return region_bytes[static_cast<std::size_t>(r)]; }
  const tensor_info& tensor(tensor_id t) const { return tensors[static_cast<std::size_t>(t)]; }
  const buffer& of(tensor_id t) const { return buffers[static_cast<std::size_t>(t)]; }
  // The step with this id (steps are stored in schedule order).
  const step& step_by_id(int id) const {
    for (const auto& s : steps)
      if (s.id == id) return s;
    throw std::logic_error("codegen: no step " + std::to_string(id));
  }
};

struct c_program {
  std::string name;  // C identifier prefix, e.g. "qwen2" -> qwen2.h, qwen2_prefill()
  std::string_view model_type;  // the family ("qwen2", "llama", ...)
  decoder::config cfg{};
  std::int64_t max_seq = 1;  // most tokens one prefill call runs
  std::int64_t max_ctx = 1;  // KV-cache positions
  decoder::graph_options options{};
  mode_plan prefill, decode;
  std::optional<mode_plan> generate;          // generation as one program, when asked for
  decoder::generation_options generation{};   // its options
  std::shared_ptr<const decoder::generation_program> generation_source;  // owns the names its tensors point into
  std::vector<named_output> outputs;  // tensors with role::output, in id order
  std::vector<std::int64_t> node_of_step;  // a graph file's program: the node of each step id (-1: none); else empty
  std::vector<state_pair> state;      // state feed -> the step result that carries it to the next call
  std::vector<trained_parameter> trained;  // a train step's parameters (emit_train_c.hpp), else none
  std::int64_t train_sequences = 0;         // and its batch: sequences of max_seq tokens each

  bool all_rows() const { return options.logits == decoder::logits_rows::all; }
  std::int64_t weights_bytes() const { return prefill.bytes(region::weights); }
  std::int64_t state_bytes() const { return prefill.bytes(region::state); }
  std::int64_t arena_bytes() const {
    const std::int64_t both = std::max(prefill.bytes(region::activations), decode.bytes(region::activations));
    return generate ? std::max(both, generate->bytes(region::activations)) : both;
  }
  // The modes, in the order the C names them (mode 0 prefill, 1 decode, 2 generate).
  std::vector<const mode_plan*> modes() const {
    std::vector<const mode_plan*> m{&prefill, &decode};
    if (generate) m.push_back(&*generate);
    return m;
  }
  // The prefill state feed at `offset` (its macro names those bytes in every mode).
  tensor_id state_feed_at(std::int64_t offset) const {
    for (const auto& t : prefill.tensors)
      if (t.is_feed && t.kind == role::state && prefill.of(t.id).offset == offset) return t.id;
    throw std::logic_error("codegen: no state feed at offset " + std::to_string(offset));
  }
};

// The safetensors and JSON reader the generated mains include beside the kernel headers.
inline constexpr const char* support_header = "fused_safetensors.h";

namespace detail {

template <class Tensors, class Steps, class Buffers, class Kernels, class Calls>
mode_plan copy_mode(const char* mode, const binding& b, const Tensors& tensors, const Steps& steps, const Buffers& buffers,
                    const Kernels& kernels, const std::array<std::int64_t, region_count>& region_bytes, std::int64_t lower_bound,
                    strategy chosen, const Calls& calls) {
  mode_plan m;
  m.mode = mode;
  m.bind = b;
  m.tensors.assign(tensors.begin(), tensors.end());
  m.steps.assign(steps.begin(), steps.end());
  m.buffers.assign(buffers.begin(), buffers.end());
  m.kernels.assign(kernels.begin(), kernels.end());
  m.region_bytes = region_bytes;
  m.lower_bound = lower_bound;
  m.chosen = chosen;
  m.calls.assign(calls.begin(), calls.end());
  // Tensor names need not be unique (a train step's gradient contributions share their tensor's
  // ".grad" name, and "a.b" and "a_b" spell one C name): a later one takes its id as a suffix.
  std::array<std::set<std::string>, region_count> taken;
  for (const tensor_info& t : m.tensors) {
    std::string ident = upper_ident(to_string(t.name));
    auto& used = taken[static_cast<std::size_t>(m.of(t.id).where)];
    while (used.contains(ident)) ident.append(1, '_').append(std::to_string(t.id));
    used.insert(ident);
    m.idents.push_back(std::move(ident));
  }
  return m;
}

// The logits: the program's output tensor (the static model's rule: the result of the last step the
// graph adds; both give the lm head's result).
inline tensor_id logits_of(const mode_plan& m) {
  int last = -1;
  tensor_id id = -1;
  for (const auto& s : m.steps)
    if (s.id > last) last = s.id, id = s.result;
  return id;
}

// Outputs and state pairs, read off the plan: outputs are the tensors marked role::output; a state
// pair joins a state feed and the step result written over the same bytes (in place).
inline void derive_program_facts(c_program& p) {
  const mode_plan& m = p.prefill;
  p.outputs.clear();
  p.state.clear();
  for (const auto& t : m.tensors)
    if (t.kind == role::output) p.outputs.push_back({t.name.pattern, t.id});
  for (const auto& s : m.steps) {
    const buffer& out = m.of(s.result);
    if (out.where != region::state) continue;
    tensor_id feed = -1;
    for (const auto& t : m.tensors)
      if (t.is_feed && t.kind == role::state && m.of(t.id).offset == out.offset) feed = t.id;
    if (feed < 0) throw std::logic_error("codegen: state result '" + to_string(m.tensor(s.result).name) + "' has no state feed");
    p.state.push_back({feed, s.result});
  }
  std::sort(p.state.begin(), p.state.end(), [](const state_pair& a, const state_pair& b) { return a.in < b.in; });
}

// Every call must point where the plan's buffers say (a mismatch means the two disagree: refuse to print).
inline void check_calls(const mode_plan& m) {
  if (m.calls.size() != m.steps.size())
    throw std::logic_error(std::string("codegen: ") + m.mode + ": " + std::to_string(m.calls.size()) + " calls for " +
                           std::to_string(m.steps.size()) + " steps");
  const std::vector<std::int32_t> slot = runtime::weight_slots(m.tensors);
  auto check = [&](const runtime::operand& o, const runtime::call& c) {
    const buffer& b = m.of(o.tensor);
    const bool ok = o.where == b.where &&
                    (o.where == region::weights ? o.slot == slot[static_cast<std::size_t>(o.tensor)] : o.offset == b.offset);
    if (!ok)
      throw std::logic_error(std::string("codegen: ") + m.mode + " step " + std::to_string(c.step) + ": operand '" +
                             to_string(m.tensor(o.tensor).name) + "' differs from its buffer");
  };
  for (std::size_t i = 0; i < m.calls.size(); ++i) {
    const runtime::call& c = m.calls[i];
    if (c.k == runtime::kernel::unknown || c.step != m.steps[i].id)
      throw std::logic_error(std::string("codegen: ") + m.mode + ": call " + std::to_string(i) + " is not step " + std::to_string(m.steps[i].id));
    for (int k = 0; k < c.n_in; ++k) check(c.in[static_cast<std::size_t>(k)], c);
    check(c.out, c);
  }
}

// The generate mode shares the weights and the KV cache: each weight at prefill's offset (by name),
// each state tensor on a prefill state feed's bytes.
inline void check_generate(const c_program& p) {
  const mode_plan& g = *p.generate;
  for (const auto& t : g.tensors) {
    const buffer& b = g.of(t.id);
    if (b.where == region::weights) {
      bool same = false;
      for (const auto& u : p.prefill.tensors)
        if (u.kind == role::weight && to_string(u.name) == to_string(t.name)) same = p.prefill.of(u.id).offset == b.offset;
      if (!same) throw std::logic_error("codegen: generate: weight '" + to_string(t.name) + "' is not where prefill has it");
    }
    if (b.where == region::state) p.state_feed_at(b.offset);
  }
  if (g.bytes(region::weights) != p.prefill.bytes(region::weights) || g.bytes(region::state) != p.prefill.bytes(region::state))
    throw std::logic_error("codegen: generate disagrees with prefill on the weights or state layout");
  for (const auto& c : g.calls)
    if (c.k == runtime::kernel::host) throw std::logic_error("codegen: generate: step " + std::to_string(c.step) + " has no C kernel");
}

// The generate mode of `p` (prefill and decode already there): the generation program planned for
// prefill's binding (a prompt of up to max_seq tokens, max_ctx KV positions), verified, lowered.
inline void add_generate(c_program& p, const decoder::family_entry& family, const decoder::generation_options& generation) {
  p.generation_source = std::make_shared<const decoder::generation_program>(decoder::generation(family, p.cfg, generation));
  const program& prog = p.generation_source->prog;
  const memory_plan mem = plan_memory(prog, p.prefill.bind);
  if (const verdict v = verify(prog, mem); !v.ok) throw graph_error("codegen: the generate plan failed verification: " + to_string(v.what));
  runtime::lowering_error e{};
  const std::vector<runtime::call> calls = runtime::lower_calls(prog.tensors, prog.steps, mem.buffers, mem.kernels, mem.bind, prog.training, decoder::sym_tokens, &e);
  if (calls.size() != prog.steps.size()) throw graph_error("codegen: generate: step " + std::to_string(e.step) + ": " + std::string(e.what));
  p.generate = copy_mode("generate", mem.bind, prog.tensors, prog.steps, mem.buffers, mem.kernels, mem.region_bytes, mem.lower_bound, mem.chosen, calls);
  p.generate->regions = prog.regions;
  p.generate->carries = prog.carries;
  p.generation = generation;
}

// Every symbol and file the C has starts with the program's name.
inline void check_c_identifier(const std::string& name) {
  bool ok = !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_');
  for (char ch : name) ok = ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_');
  if (!ok) throw std::invalid_argument("codegen: the name '" + (name.size() > 64 ? name.substr(0, 64) + "..." : name) + "' is not a C identifier");
  // Every file is named by it (<name>_generate_main.c the longest): far from a file name's 255 bytes.
  constexpr std::size_t max_chars = 64;
  if (name.size() > max_chars)
    throw std::invalid_argument("codegen: the name '" + name.substr(0, max_chars) + "...' is longer than " + std::to_string(max_chars) + " characters");
  std::string lower = name;
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (const std::string_view taken : {"fk", "fst"})  // the kernels' and the safetensors reader's prefixes
    if (lower == taken || lower.starts_with(std::string(taken) + "_"))
      throw std::invalid_argument("codegen: the name '" + name + "' " + (lower == taken ? "is " + std::string(taken) : "starts with " + std::string(taken) + "_") +
                                  ", the prefix of the kernels' or the safetensors reader's symbols; choose another name");
  // <name>.h beside the headers the C includes must not be one of them (a case-insensitive file system: compared lower-case).
  if (lower + ".h" == support_header)
    throw std::invalid_argument("codegen: the name '" + name + "' would make " + lower + ".h, the name of a header the C includes; choose another name");
}

inline void finish(c_program& p) {
  check_c_identifier(p.name);
  decoder::detail::check_kernel_limits(p.cfg);
  for (mode_plan* m : {&p.prefill, &p.decode}) {
    check_calls(*m);
    m->io = runtime::find_io(m->tensors, m->buffers, logits_of(*m), m->bind, decoder::sym_tokens);
  }
  bool same_schedule = p.prefill.steps.size() == p.decode.steps.size();
  for (std::size_t i = 0; same_schedule && i < p.prefill.steps.size(); ++i) same_schedule = p.prefill.steps[i].id == p.decode.steps[i].id;
  if (!same_schedule) throw std::logic_error("codegen: prefill and decode schedule the steps differently");
  if (p.prefill.bytes(region::weights) != p.decode.bytes(region::weights) || p.prefill.bytes(region::state) != p.decode.bytes(region::state))
    throw std::logic_error("codegen: prefill and decode disagree on the weights or state layout");
  derive_program_facts(p);
  if (p.generate) {
    check_calls(*p.generate);
    check_generate(p);
  }
}

}  // namespace detail

// From the static model's compile-time plans and call arrays (the CMake generator's path).
template <class Preset, std::int64_t MaxSeq, std::int64_t MaxCtx, decoder::graph_options Options = decoder::graph_options{}>
c_program from_static(std::string name) {
  using model = decoder::static_model<Preset, MaxSeq, MaxCtx, Options>;
  constexpr auto& pp = model::plans::prefill;
  constexpr auto& dp = model::plans::decode;
  c_program p;
  p.name = std::move(name);
  p.model_type = model::plans::family::model_type;
  p.cfg = model::cfg;
  p.max_seq = MaxSeq;
  p.max_ctx = MaxCtx;
  p.options = Options;
  p.prefill = detail::copy_mode("prefill", pp.bind, pp.tensors, pp.steps, pp.buffers, pp.kernels, pp.region_bytes, pp.lower_bound,
                                pp.chosen, model::prefill_calls);
  p.decode = detail::copy_mode("decode", dp.bind, dp.tensors, dp.steps, dp.buffers, dp.kernels, dp.region_bytes, dp.lower_bound,
                               dp.chosen, model::decode_calls);
  detail::finish(p);
  return p;
}

// `p` (from_static's) with the generate mode of `family` added (fused_generate_c's GENERATE).
inline c_program with_generation(c_program p, const decoder::family_entry& family, const decoder::generation_options& generation) {
  detail::add_generate(p, family, generation);
  detail::finish(p);
  return p;
}

// From a config known at run time (`fused gen-c`): the run-time model's plans and calls.
// With `generation`, the generate mode too: that program planned for a prompt of up to max_seq
// tokens and a KV cache of max_ctx positions.
inline c_program from_runtime(std::string name, const decoder::family_entry& family, const decoder::config& cfg, std::int64_t max_seq,
                              std::int64_t max_ctx, decoder::graph_options options = {},
                              const std::optional<decoder::generation_options>& generation = std::nullopt) {
  const decoder::model m(family, cfg, max_seq, max_ctx, options);
  c_program p;
  p.name = std::move(name);
  p.model_type = family.model_type;
  p.cfg = cfg;
  p.max_seq = max_seq;
  p.max_ctx = max_ctx;
  p.options = options;
  auto copy = [](const char* mode, const decoder::planned& pl, const std::vector<runtime::call>& calls) {
    return detail::copy_mode(mode, pl.mem.bind, pl.prog.tensors, pl.prog.steps, pl.mem.buffers, pl.mem.kernels, pl.mem.region_bytes,
                             pl.mem.lower_bound, pl.mem.chosen, calls);
  };
  p.prefill = copy("prefill", m.prefill_plan(), m.prefill_calls());
  p.decode = copy("decode", m.decode_plan(), m.decode_calls());
  if (generation) detail::add_generate(p, family, *generation);
  detail::finish(p);
  // The derived facts must be the program's own.
  const program& prog = m.prefill_plan().prog;
  bool same = prog.state.size() == p.state.size() && prog.outputs.size() == p.outputs.size();
  for (std::size_t i = 0; same && i < p.state.size(); ++i) same = prog.state[i].in == p.state[i].in && prog.state[i].out == p.state[i].out;
  for (std::size_t i = 0; same && i < p.outputs.size(); ++i) same = prog.outputs[i].id == p.outputs[i].id;
  if (!same) throw std::logic_error("codegen: the outputs or state pairs read off the plan differ from the program's");
  return p;
}

}  // namespace fused::codegen
