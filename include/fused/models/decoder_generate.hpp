// Generation as one program: a family's forward pass placed twice in one program, once over the
// prompt and once, inside a Loop, over one token a trip, with greedy picking and the stop test as
// steps. What `fused run --temp 0` does with a host loop, planned statically: one memory map holds
// the prompt's pass, every trip's pass and the KV cache, and the executor runs no code of its own.
//
//   prompt:  logits = forward(input_ids) at positions pos0..; token = argmax(logits)
//            position = next_position(input_ids); count = 0; ids = [-1] * N
//   loop of at most N-1 trips, while not_in(token, stop ids):
//            ids[count] = token; count += 1
//            logits = forward(token) at `position` (the KV caches carried); token = argmax(logits); position += 1
//   after:   if not_in(token, stop ids): ids[count] = token; count += 1   (a Conditional)
//   outputs: generated (the ids) i32 [N] (unused entries -1), generated_count i32 [1], positions i32 [1] (the
//            positions the KV cache holds afterwards: the prompt and every generated token fed back)
//
// The last token is stored after the loop rather than in a trip so that no forward pass runs for a
// token nobody reads (`fused run` decodes N-1 times for N tokens, and so does this). The forward
// pass is the family's own graph function, replayed: the loop's copy reads the prompt copy's weights,
// takes its token from the loop and its position from the `position` carry (op_def::positional),
// and writes the caches the prompt copy wrote, in place, as loop carries; its names start "trip.".
#pragma once
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "../core/text_string.hpp"
#include "../graph/builder.hpp"
#include "../graph/graph_error.hpp"
#include "../ops/sequence_ops.hpp"
#include "family.hpp"

namespace fused::decoder {

struct generation_options {
  std::int64_t max_new_tokens = 16;  // N: the most tokens generated
  std::vector<int> stop_ids;         // a token among these ends generation, unstored (up to 4)
};

// The program and the storage its loop copy's names point into.
struct generation_program {
  program prog;
  std::deque<std::string> names;
};

namespace detail {

// Replays `fwd` (a family's program, steps in id order) into `b`. `map` takes fwd's tensor ids to
// b's: feeds already mapped stay (the loop copy's weights, token and caches), others are made.
// `prefix` renames results (the loop copy's), `position` feeds positional ops (-1: the call's).
inline void replay(const program& fwd, graph_builder& b, std::vector<tensor_id>& map, std::deque<std::string>& names, const std::string& prefix,
                   tensor_id position) {
  auto feed = [&](tensor_id t) {
    tensor_id& m = map[static_cast<std::size_t>(t)];
    if (m >= 0) return m;
    const tensor_info& ti = fwd.tensor(t);
    switch (ti.kind) {
      case role::weight: m = b.weight(ti.name, ti.type, ti.shp); break;
      case role::state: m = b.state(ti.name, ti.type, ti.shp); break;
      default: m = b.input(ti.name, ti.type, ti.shp); break;
    }
    return m;
  };
  const scratch<int> at = fwd.position_of_step();
  for (std::size_t id = 0; id < fwd.steps.size(); ++id) {
    const step& s = fwd.steps[static_cast<std::size_t>(at[id])];
    tensor_id in[max_inputs]{-1, -1, -1, -1, -1};
    int n = s.n_inputs;
    for (int k = 0; k < n; ++k) {
      const tensor_id t = s.inputs[k];
      in[k] = fwd.tensor(t).is_feed ? feed(t) : map[static_cast<std::size_t>(t)];
    }
    if (position >= 0 && s.op->positional) in[n++] = position;
    name_ref result = fwd.tensor(s.result).name;
    if (!prefix.empty()) result.pattern = names.emplace_back(prefix + result.pattern).c_str();  // deque: stable
    tensor_id out = -1;
    switch (n) {
      case 0: out = b.apply(*s.op, {}, s.at, result); break;
      case 1: out = b.apply(*s.op, {in[0]}, s.at, result); break;
      case 2: out = b.apply(*s.op, {in[0], in[1]}, s.at, result); break;
      case 3: out = b.apply(*s.op, {in[0], in[1], in[2]}, s.at, result); break;
      default: out = b.apply(*s.op, {in[0], in[1], in[2], in[3]}, s.at, result); break;
    }
    map[static_cast<std::size_t>(s.result)] = out;
  }
}

}  // namespace detail

inline generation_program generation(const family_entry& f, const config& c, const generation_options& o) {
  if (o.max_new_tokens < 1 || o.max_new_tokens > INT32_MAX) throw graph_error("generation: the most new tokens must be 1 .. 2^31-1");
  if (o.stop_ids.size() > 4) throw graph_error("generation: at most 4 stop ids, got " + std::to_string(o.stop_ids.size()));
  for (const int id : o.stop_ids)
    if (id < 0 || id >= c.vocab_size) throw graph_error("generation: stop id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
  const program fwd = f.graph(c, {.logits = logits_rows::last, .layers = -1});
  if (!fwd.ok()) throw graph_error(std::string(f.model_type) + ": " + to_string(fwd.message));
  tensor_id input_ids = -1;
  for (const tensor_info& t : fwd.tensors)
    if (t.kind == role::input) input_ids = t.id;
  if (input_ids < 0 || fwd.outputs.size() != 1) throw graph_error(std::string(f.model_type) + ": a decoder program has one input and one output");
  const tensor_id logits = fwd.outputs.front().id;

  generation_program g;
  graph_builder b;
  b.reserve(2 * fwd.tensors.size() + 24, 2 * fwd.steps.size() + 16);
  attrs stops{};
  for (int k = 0; k < 4; ++k) stops.i[k] = k < static_cast<int>(o.stop_ids.size()) ? o.stop_ids[static_cast<std::size_t>(k)] : no_value;
  attrs one{};
  one.i[0] = 1;
  auto filled = [](std::int64_t value, std::int64_t n) {
    attrs a{};
    a.f = static_cast<double>(value);
    a.i[0] = n;
    a.i[1] = a.i[2] = a.i[3] = no_value;
    return a;
  };

  auto renamed = [&](name_ref n) {
    n.pattern = g.names.emplace_back(std::string("trip.") + n.pattern).c_str();
    return n;
  };

  // The prompt.
  std::vector<tensor_id> prompt(fwd.tensors.size(), -1);
  detail::replay(fwd, b, prompt, g.names, "", -1);
  const tensor_id first_token = b.apply(ops::argmax, {prompt[static_cast<std::size_t>(logits)]}, {}, {"token.first"});
  const tensor_id first_position = b.apply(ops::next_position, {prompt[static_cast<std::size_t>(input_ids)]}, {}, {"position.first"});
  const tensor_id no_count = b.apply(ops::full_int, {}, filled(0, 1), {"count.first"});
  const tensor_id no_ids = b.apply(ops::full_int, {}, filled(-1, o.max_new_tokens), {"ids.first"});

  // The loop: its carries, then a trip.
  const int loop = b.loop(o.max_new_tokens - 1);
  const tensor_id token = b.carry(loop, first_token, {"token"});
  const tensor_id position = b.carry(loop, first_position, {"position"});
  const tensor_id count = b.carry(loop, no_count, {"count"});
  const tensor_id ids = b.carry(loop, no_ids, {"ids"});  // the tokens stored so far
  std::vector<tensor_id> trip(fwd.tensors.size(), -1);
  for (const state_pair& s : fwd.state)
    trip[static_cast<std::size_t>(s.in)] = b.carry(loop, prompt[static_cast<std::size_t>(s.out)], renamed(fwd.tensor(s.in).name));
  for (std::size_t t = 0; t < fwd.tensors.size(); ++t)
    if (fwd.tensors[t].kind == role::weight) trip[t] = prompt[t];
  trip[static_cast<std::size_t>(input_ids)] = token;
  b.set_region(loop);
  b.loop_while(loop, b.apply(ops::not_in, {token}, stops, {"go_on"}));
  b.carry_next(ids, b.apply(ops::store_at, {ids, token, count}, {}, {"ids.next"}));
  b.carry_next(count, b.apply(ops::increment, {count}, one, {"count.next"}));
  detail::replay(fwd, b, trip, g.names, "trip.", position);
  b.carry_next(token, b.apply(ops::argmax, {trip[static_cast<std::size_t>(logits)]}, {}, {"token.next"}));
  b.carry_next(position, b.apply(ops::increment, {position}, one, {"position.next"}));
  for (const state_pair& s : fwd.state) b.carry_next(trip[static_cast<std::size_t>(s.in)], trip[static_cast<std::size_t>(s.out)]);
  b.set_region(-1);

  // The last token, unless it stops.
  const int keep_last = b.conditional(b.apply(ops::not_in, {token}, stops, {"last.go_on"}));
  b.set_region(keep_last);
  const tensor_id stored_last = b.apply(ops::store_at, {ids, token, count}, {}, {"ids.last"});
  const tensor_id counted_last = b.apply(ops::increment, {count}, one, {"count.last"});
  b.set_region(-1);
  b.output("generated", b.merge(keep_last, stored_last, ids, {"generated"}));
  b.output("generated_count", b.merge(keep_last, counted_last, count, {"generated_count"}));
  b.output("positions", position);  // what the KV cache holds afterwards: the prompt and every token fed back
  for (const state_pair& s : fwd.state) b.carry_state(prompt[static_cast<std::size_t>(s.in)], trip[static_cast<std::size_t>(s.in)]);
  g.prog = std::move(b).finish();
  if (!g.prog.ok()) throw graph_error("generation program: " + std::string(name_of(g.prog.error)) + ": " + to_string(g.prog.message));
  return g;
}

}  // namespace fused::decoder
