// The C emitter: a c_program becomes `<name>.h` (a Glow-style bundle header: a #define per region
// size and per tensor offset, MEM_ALIGN, fingerprints, the API) and `<name>.c` (llama2.c-style: one
// function per mode, straight-line kernel calls, each commented with its op and tensors, every
// offset a constant), plus `<name>_main.c`, a scorer with the `fused score` interface.
//
// The kernel calls are printed from the lowered call lists (runtime/calls.hpp) exactly as
// runtime/invoke.hpp executes them: same kernel, same operands, same sizes, same order; so the
// generated C computes bit for bit what the C++ static model computes.
#pragma once
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include <fused/graph/control_walk.hpp>

#include "c_program.hpp"
#include "layout.hpp"

namespace fused::codegen {

// The kernel headers the generated .c includes (each one's own includes are copied with it).
inline const std::vector<std::string>& kernel_headers() {
  static const std::vector<std::string> h{"fk_cpu.h", "fk_convert.h", "fk_elementwise.h", "fk_linear.h", "fk_rope.h", "fk_attention.h"};
  return h;
}

namespace detail {

// How a run-time message names step `id`: its graph file's node where the program came from one
// (as `fused graph run` says it), else the step.
inline std::string step_label(const c_program& p, int id) {
  const auto i = static_cast<std::size_t>(id);
  return i < p.node_of_step.size() && p.node_of_step[i] >= 0 ? "node " + std::to_string(p.node_of_step[i]) : "step " + std::to_string(id);
}

FUSED_UNOPTIMIZED inline std::string float_literal(float v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.9gf", static_cast<double>(v));  // 9 digits: the float round-trips
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s.insert(s.size() - 1, ".0");
  return s;
}

// `n * times` rows as C: the tokens of this call (`n`) when the rows follow them, else a constant.
// In decode the symbol is bound to 1 (one token), as the C++ session binds it.
FUSED_UNOPTIMIZED inline std::string rows_times(const runtime::rows_t& r, bool decode, std::int64_t times) {
  if (r.symbol != 0 && r.symbol != decoder::sym_tokens) throw std::logic_error("codegen: rows follow a symbol other than the tokens");
  const std::int64_t k = r.n * times;
  if (r.symbol == 0 || decode) return std::to_string(k);
  return k == 1 ? "n" : "n * " + std::to_string(k);
}

// An operand as C: W(..) a weight; in the state S16(..) bf16 (a KV cache), SF(..) f32 and SI32(..) i32
// (a train step's parameters, moments and step count); in the arena F(..) f32, I32(..) i32, U8(..)
// bool, A16(..) a bf16 workspace. The C compiler checks each against the kernel's parameter type.
FUSED_UNOPTIMIZED inline std::string operand(const c_program& p, const mode_plan& m, const runtime::operand& o) {
  const tensor_info& t = m.tensor(o.tensor);
  const std::string mac = bytes_macro(p, m, o.tensor);
  if (o.where == region::weights) return "W(" + mac + ")";
  if (o.where == region::state) {
    if (t.type == dtype::bf16) return "S16(" + mac + ")";
    if (t.type == dtype::f32) return "SF(" + mac + ")";
    if (t.type == dtype::i32) return "SI32(" + mac + ")";
    throw std::logic_error("codegen: state tensor '" + tensor_name(t) + "' has a type no kernel reads");
  }
  if (t.type == dtype::f32) return "F(" + mac + ")";
  if (t.type == dtype::i32) return "I32(" + mac + ")";
  if (t.type == dtype::boolean) return "U8(" + mac + ")";
  if (t.type == dtype::bf16) return "A16(" + mac + ")";
  throw std::logic_error("codegen: tensor '" + tensor_name(t) + "' has a type no kernel reads");
}

// The mode's number in the C (CANARY_CHECK, the canary tables): prefill 0, decode 1, generate 2.
inline int mode_index(const mode_plan& m) { return m.mode == std::string_view("prefill") ? 0 : m.mode == std::string_view("decode") ? 1 : 2; }

// One argument of a call as C, as runtime::invoke computes it (kernel_specs names both).
FUSED_UNOPTIMIZED inline std::string argument(const c_program& p, const mode_plan& m, const runtime::call& c, runtime::arg a, bool dec) {
  using runtime::arg;
  const auto number = [](std::int64_t v) { return std::to_string(v); };
  switch (a) {
    case arg::input0: return operand(p, m, c.in[0]);
    case arg::input1: return operand(p, m, c.in[1]);
    case arg::input2: return operand(p, m, c.in[2]);
    case arg::input3: return operand(p, m, c.in[3]);
    case arg::input4: return operand(p, m, c.in[4]);
    case arg::bias: return c.n_in == 3 ? operand(p, m, c.in[2]) : "NULL";
    case arg::optional2: return c.n_in > 2 ? operand(p, m, c.in[2]) : "NULL";
    case arg::optional3: return c.n_in > 3 ? operand(p, m, c.in[3]) : "NULL";
    case arg::optional4: return c.n_in > 4 ? operand(p, m, c.in[4]) : "NULL";
    case arg::output: return operand(p, m, c.out);
    case arg::work: return c.work.tensor >= 0 ? operand(p, m, c.work) : "NULL";
    case arg::rows: return rows_times(c.rows, dec, 1);
    case arg::elements: return rows_times(c.rows, dec, c.sizes.cols);
    case arg::bytes: return rows_times(c.rows, dec, c.sizes.row_bytes);
    case arg::int0:
    case arg::int1:
    case arg::int2:
    case arg::int3: return number(c.ints[static_cast<std::size_t>(a) - static_cast<std::size_t>(arg::int0)]);
    case arg::pos0: return c.position >= 0 ? "(size_t)" + operand(p, m, c.in[static_cast<std::size_t>(c.position)]) + "[0]" : "pos0";
    case arg::cols:
    case arg::out_cols:
    case arg::heads:
    case arg::kv_heads:
    case arg::head_dim:
    case arg::capacity:
    case arg::original_max:
    case arg::vocab:
    case arg::period:
    case arg::inner0:
    case arg::extent0:
    case arg::inner1:
    case arg::extent1: return number(runtime::size_value(a, c));
    case arg::eps:
    case arg::theta:
    case arg::factor:
    case arg::low_freq_factor:
    case arg::high_freq_factor:
    case arg::value:
    case arg::beta1:
    case arg::beta2:
    case arg::weight_decay:
    case arg::momentum:
    case arg::dampening:
    case arg::dropout: return float_literal(runtime::real_value(a, c));
  }
  throw std::logic_error("codegen: an argument of no kind");
}

// One step as C: the comment naming the op and its tensors, then the kernel call (after the copy
// an in-place kernel makes when its input and output do not share bytes, as invoke does).
FUSED_UNOPTIMIZED inline std::string call_text(const c_program& p, const mode_plan& m, const runtime::call& c, std::size_t pos) {
  const bool dec = m.mode == std::string_view("decode");
  const step& s = m.step_by_id(c.step);
  const tensor_info& out_t = m.tensor(s.result);
  std::string comment = "  /* " + c_comment(tensor_name(out_t)) + " = " + s.op->name + "(";
  for (int k = 0; k < s.n_inputs; ++k) comment += (k ? ", " : "") + c_comment(tensor_name(m.tensor(s.inputs[static_cast<std::size_t>(k)])));
  comment += ")  " + std::string(name_of(out_t.type)) + " " + bound_shape(out_t, m.bind) + " */\n";
  if (c.k == runtime::kernel::unknown) throw std::logic_error("codegen: a call with no kernel");
  const runtime::kernel_spec& spec = runtime::spec_of(c.k);
  std::string code;
  if (spec.copy_into_output >= 0) {
    const runtime::operand& from = c.in[static_cast<std::size_t>(spec.copy_into_output)];
    if (from.where != c.out.where || from.offset != c.out.offset)
      code = "memcpy(" + operand(p, m, c.out) + ", " + operand(p, m, from) + ", " +
             (c.copy_follows_rows ? rows_times(c.rows, dec, c.copy_row_bytes) : std::to_string(c.copy_row_bytes)) + ");\n  ";
  }
  if (c.k == runtime::kernel::embed || c.k == runtime::kernel::embed_f32 || c.k == runtime::kernel::embed_backward) {
    // As the C++ executors check it: an id outside the table would read (or write) out of bounds. A
    // step may have computed the ids, so they are checked when it runs.
    const std::string ids = operand(p, m, c.in[0]), vocab = std::to_string(c.sizes.vocab);
    code += "{\n    size_t row_;\n    for (row_ = 0; row_ < (size_t)(" + rows_times(c.rows, dec, 1) + "); ++row_)\n"
            "      if (" + ids + "[row_] < 0 || " + ids + "[row_] >= " + vocab + ") {\n"
            "        snprintf(m->error, sizeof m->error, \"" + step_label(p, c.step) + ": token id %ld (row %zu) is outside the embedding table [0, " +
            vocab + ")\", (long)" + ids + "[row_], row_);\n        return -1;\n      }\n  }\n  ";
  }
  std::string invocation = std::string(spec.name) + "(";
  for (std::size_t i = 0; i < spec.arity; ++i) invocation += (i ? ", " : "") + argument(p, m, c, spec.args[i], dec);
  invocation += ")";
  // A kernel that refuses an input out of its range returns nonzero, having written nothing.
  if (spec.refuses)
    code += "if (" + invocation + ") return " + p.name + "__fail(m, \"" + p.name + ": " + m.mode + " " + step_label(p, c.step) + " '" +
            s.op->name + "' (" + std::string(spec.name) + "): " + spec.refuses + "\");";
  else
    code += invocation + ";";
  return comment + "  " + code + "\n  CANARY_CHECK(" + std::to_string(mode_index(m)) + ", " + std::to_string(pos) + ");\n";
}

// Layer of a step, from its result's name index (-1 outside the layers), for section comments.
inline int layer_of(const mode_plan& m, const step& s) {
  const tensor_info& t = m.tensor(s.result);
  return std::string_view(t.name.pattern).find("layers.{}") != std::string_view::npos ? t.name.index : -1;
}

FUSED_UNOPTIMIZED inline std::string mode_function(const c_program& p, const mode_plan& m) {
  const bool dec = m.mode == std::string_view("decode");
  std::string s;
  s += dec ? "/* decode: one token at position m->pos; its id is already in the arena. */\n"
              "static int " + p.name + "__decode(" + p.name + "_model* m) {\n"
           : "/* prefill: n tokens (1 <= n <= " + upper_ident(p.name) + "_MAX_SEQ) at positions m->pos ..; their ids are already in the arena. */\n"
              "static int " + p.name + "__prefill(" + p.name + "_model* m, size_t n) {\n";
  s += "  const size_t pos0 = (size_t)m->pos;\n";
  int layer = -2;
  for (std::size_t i = 0; i < m.calls.size(); ++i) {
    const int l = layer_of(m, m.step_by_id(m.calls[i].step));
    if (l != layer) {
      s += l >= 0 ? "\n  /* ---- layer " + std::to_string(l) + " ---- */\n" : "\n";
      layer = l;
    }
    s += call_text(p, m, m.calls[i], i);
  }
  if (!dec) s += "  (void)n;\n";
  s += "  (void)pos0;\n  return 0;\n}\n\n";
  return s;
}

// Text with every line indented by `depth` more levels (two spaces each).
FUSED_UNOPTIMIZED inline std::string indented(const std::string& text, int depth) {
  const std::string pad(static_cast<std::size_t>(2 * depth), ' ');
  std::string out;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = text.find('\n', at);
    const std::string line = text.substr(at, end == std::string::npos ? std::string::npos : end + 1 - at);
    out += (line == "\n" ? "" : pad) + line;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return out;
}

// The bytes a loop whose carries swap (a next value that is another carry) stages its carries in,
// each 64-byte aligned: the most any such loop of `m` needs (0: none swaps). runtime::execute stages
// the same values; the C keeps them in `staging_bytes` past the plan's arena.
inline std::int64_t staging_bytes(const mode_plan& m) {
  const control_walk walk(m.regions, m.carries, m.calls.size());
  std::int64_t most = 0;
  for (std::size_t g = 0; g < m.regions.size(); ++g) {
    if (m.regions[g].kind != region_kind::loop_body || !walk.swaps(static_cast<int>(g))) continue;
    std::int64_t sum = 0;
    for (const loop_carry& c : m.carries)
      if (c.loop == static_cast<int>(g)) sum += align_up(bytes_of(m.tensor(c.value), m.bind));
    most = std::max(most, sum);
  }
  return most;
}

// A mode's calls in schedule order, with its regions as C control flow, as runtime::execute runs
// them (graph/control_walk.hpp): a conditional's taken branch (`if`), a loop's trips (`for` up to
// its bound: the header, the condition, the rest, then each carry's next value moved into the
// carry's bytes unless the plan put them on the same bytes). The generate mode's body, and a graph
// program's (emit_program_c.hpp).
// `canaries`: re-arm the debug layout's canaries where control flow skips the arming step (the
// decoders' C has a debug layout; a graph program's has none). `staging`: the C defines
// <NAME>_STAGING_OFFSET, the arena offset of staging_bytes(m) for swapping carries (without it such
// a loop is refused).
FUSED_UNOPTIMIZED inline std::string program_code(const c_program& p, const mode_plan& m, bool canaries = true, bool staging = false) {
  const std::string n = p.name;
  const control_walk walk(m.regions, m.carries, m.calls.size());
  auto bytes_at = [&](tensor_id t) {
    return std::string(m.of(t).where == region::state ? "(m->state + " : "(m->arena + ") + bytes_macro(p, m, t) + ")";
  };
  auto condition = [&](tensor_id t) { return "*" + operand(p, m, {.where = m.of(t).where, .offset = m.of(t).offset, .tensor = t}); };
  // Debug layout: the canaries of the buffers that come alive at `pos` are armed by the step before
  // it, which control flow skips at a trip's start, a branch's and after a region: arm them there.
  auto arm = [&](int pos) -> std::string {
    if (!canaries) return {};
    return "#ifdef FUSED_DEBUG_CANARIES\n  " + n + "__arm_at(m, " + std::to_string(mode_index(m)) + ", " + std::to_string(pos) + ");\n#endif\n";
  };
  auto emit = [&](auto& self, int begin, int end, int parent) FUSED_UNOPTIMIZED -> std::string {
    std::string out;
    walk.each(begin, end, parent, [&](int at) { out += call_text(p, m, m.calls[static_cast<std::size_t>(at)], static_cast<std::size_t>(at)); },
              [&](int block) {
                const region_info& reg = walk.region(block);
                if (reg.kind == region_kind::then_branch) {
                  const region_info& other = walk.else_of(block);
                  out += "  if (" + condition(reg.condition) + ") {\n" + indented(arm(reg.first) + self(self, reg.first, reg.end(), block), 1) + "  }";
                  if (other.count > 0) out += " else {\n" + indented(arm(other.first) + self(self, other.first, other.end(), block + 1), 1) + "  }";
                  out += "\n" + arm(other.end());
                  return;
                }
                const bool stage = walk.swaps(block);
                if (stage && !staging)
                  throw std::invalid_argument("codegen: loop " + std::to_string(block) +
                                              " moves a carry into another carry, and this C has no staging area for it");
                const std::string trip = "trip_" + std::to_string(block);
                std::string body = arm(reg.first) + self(self, reg.first, reg.first + reg.header, block);
                if (reg.condition >= 0) body += "  if (!" + condition(reg.condition) + ") break;\n";
                body += self(self, reg.first + reg.header, reg.end(), block);
                std::string unstage;  // a swapping loop: every next value into the staging area, then all out
                std::int64_t staged = 0;
                for (const loop_carry& c : m.carries) {
                  if (c.loop != block) continue;
                  const std::string bytes = std::to_string(bytes_of(m.tensor(c.value), m.bind));
                  const std::string what = " /* " + c_comment(tensor_name(m.tensor(c.value))) + " <- " + c_comment(tensor_name(m.tensor(c.next))) + " */\n";
                  if (stage) {
                    const std::string at = "(m->arena + " + upper_ident(n) + "_STAGING_OFFSET + " + std::to_string(staged) + ")";
                    body += "  memcpy(" + at + ", " + bytes_at(c.next) + ", " + bytes + ");" + what;
                    unstage += "  memcpy(" + bytes_at(c.value) + ", " + at + ", " + bytes + ");" + what;
                    staged += align_up(bytes_of(m.tensor(c.value), m.bind));
                    continue;
                  }
                  if (m.of(c.value).where == m.of(c.next).where && m.of(c.value).offset == m.of(c.next).offset) continue;  // in place
                  body += "  memmove(" + bytes_at(c.value) + ", " + bytes_at(c.next) + ", " + bytes + ");" + what;
                }
                body += unstage;
                out += "  for (size_t " + trip + " = 0; " + trip + " < " + std::to_string(reg.max_trips) + "; ++" + trip + ") {\n" +
                       indented(body, 1) + "  }\n" + arm(reg.end());
              });
    return out;
  };
  return emit(emit, 0, static_cast<int>(m.calls.size()), -1);
}

// The generate mode: generation as one program.
FUSED_UNOPTIMIZED inline std::string generate_function(const c_program& p, const mode_plan& m) {
  const std::string n = p.name;
  std::string s;
  s += "static int " + n + "__fail(" + n + "_model* m, const char* what);\n\n";
  s += "/* generate: the prompt (n tokens, 1 <= n <= " + upper_ident(n) + "_MAX_SEQ, already in the arena) at positions m->pos .., then\n"
       " * up to " + upper_ident(n) + "_MAX_NEW_TOKENS tokens picked greedily, as one program: its loop and conditional below. */\n";
  s += "static int " + n + "__generate(" + n + "_model* m, size_t n) {\n";
  s += "  const size_t pos0 = (size_t)m->pos;\n";
  s += program_code(p, m);
  s += "  (void)n;\n  (void)pos0;\n  return 0;\n}\n\n";
  return s;
}

// What the generated mains share: parse_ids (token id lists), check_config (the model directory's
// config.json must be the one this C was generated for) and, for a decoder's, load_model.
inline constexpr std::string_view parse_ids_c = R"(
/* The ids of `flag` as fused's commands read them: "1,2,3", "1 2 3" or "[1, 2, 3]"; an empty id (two
 * commas, one first or last), a stray bracket or anything else is refused, naming the flag (who: the
 * program's name). Returns 0, or -1 after the message. */
static int parse_ids(const char* who, const char* flag, const char* s, int32_t** ids, size_t* n) {
  size_t cap = 16;
  int comma_since_id = 0, opened = 0, closed = 0;
  const char* at;
  *n = 0;
  if (!(*ids = (int32_t*)malloc(cap * sizeof(int32_t)))) {
    fprintf(stderr, "%s: out of memory\n", who);
    return -1;
  }
  for (at = s; *at;) {
    char* end;
    long v;
    const char* wrong = NULL;
    if (*at == ',') {
      if (!*n || comma_since_id) {
        fprintf(stderr, "%s: %s: '%s' has an empty token id (two commas, or one first)\n", who, flag, s);
        return -1;
      }
      comma_since_id = 1;
      ++at;
      continue;
    }
    if (*at == '[' && (opened || *n)) wrong = "has a '[' that does not open the list";
    else if (*at == ']' && (!opened || closed)) wrong = "has a ']' that closes no '['";
    else if (closed && *at != ' ' && *at != '\t' && *at != '\n') wrong = "goes on after the list's ']'";
    if (wrong) {
      fprintf(stderr, "%s: %s: '%s' %s\n", who, flag, s, wrong);
      return -1;
    }
    if (*at == '[' || *at == ']') {
      *(*at == '[' ? &opened : &closed) = 1;
      ++at;
      continue;
    }
    if (*at == ' ' || *at == '\t' || *at == '\n') {
      ++at;
      continue;
    }
    if (!(*at >= '0' && *at <= '9') && *at != '-') {
      fprintf(stderr, "%s: %s: '%s' is not a list of token ids like 1,2,3\n", who, flag, s);
      return -1;
    }
    v = strtol(at, &end, 10);
    if (end == at || (*end && !strchr(",[] \t\n", *end))) {
      fprintf(stderr, "%s: %s: '%s' is not a list of token ids like 1,2,3\n", who, flag, s);
      return -1;
    }
    if (v < 0 || v > 2147483647L) {
      fprintf(stderr, "%s: %s: token id %.*s is outside [0, 2147483647]\n", who, flag, (int)(end - at), at);
      return -1;
    }
    if (*n == cap) {
      int32_t* bigger = (int32_t*)realloc(*ids, (cap *= 2) * sizeof(int32_t));
      if (!bigger) {
        fprintf(stderr, "%s: out of memory\n", who);
        return -1;
      }
      *ids = bigger;
    }
    (*ids)[(*n)++] = (int32_t)v;
    comma_since_id = 0;
    at = end;
  }
  if (opened && !closed) {
    fprintf(stderr, "%s: %s: '%s' has a '[' without its ']'\n", who, flag, s);
    return -1;
  }
  if (comma_since_id) {
    fprintf(stderr, "%s: %s: '%s' ends with a comma (an empty token id)\n", who, flag, s);
    return -1;
  }
  if (!*n) {
    fprintf(stderr, "%s: %s: '%s' holds no token id\n", who, flag, s);
    return -1;
  }
  return 0;
}

/* Every id of `flag` inside the vocabulary, as fused checks it before any work; 0, or -1 after the message. */
static int ids_in_vocabulary(const char* who, const char* flag, const int32_t* ids, size_t n, long vocab) {
  size_t i;
  for (i = 0; i < n; ++i)
    if (ids[i] >= vocab) {
      fprintf(stderr, "%s: %s: token id %ld (at index %zu) is outside the vocabulary [0, %ld)\n", who, flag, (long)ids[i], i, vocab);
      return -1;
    }
  return 0;
}

/* A whole number of `flag` in [lo, hi] into *out; 0, or -1 after the message. */
static int parse_count(const char* who, const char* flag, const char* s, long lo, long hi, int* out) {
  char* end;
  const long v = strtol(s, &end, 10);
  if (end == s || *end || v < lo || v > hi) {
    fprintf(stderr, "%s: %s: '%s' is not a whole number in [%ld, %ld]\n", who, flag, s, lo, hi);
    return -1;
  }
  *out = (int)v;
  return 0;
}

)";

// check_config() reads the fields as <NAME>_<FIELD> macros (config_fields(), printed by the header):
// every field a config.json spells the same way for every family, where transformers 4 or 5 puts it
// (rope_theta at the top or in rope_parameters, the llama3 factors in rope_scaling or
// rope_parameters), with transformers' default when a file leaves it out; and the RoPE kind always,
// so that a llama3 config cannot score with plain RoPE or the reverse. Fields a family reads its own
// way (biases: the tensors' presence checks them) are left to the weights' names and shapes.
FUSED_UNOPTIMIZED inline std::string check_config_c(const c_program& p) {
  const std::string P = upper_ident(p.name);
  const decoder::config& cfg = p.cfg;
  struct where {
    const char* field;  // decoder::config's name (the macro's)
    const char* key;    // config.json's
    const char* alternative;
  };
  static constexpr where places[] = {
      {"vocab_size", "vocab_size", nullptr},
      {"hidden_size", "hidden_size", nullptr},
      {"intermediate_size", "intermediate_size", nullptr},
      {"num_hidden_layers", "num_hidden_layers", nullptr},
      {"num_attention_heads", "num_attention_heads", nullptr},
      {"num_key_value_heads", "num_key_value_heads", nullptr},
      {"head_dim", "head_dim", nullptr},
      {"max_position_embeddings", "max_position_embeddings", nullptr},
      {"rms_norm_eps", "rms_norm_eps", nullptr},
      {"rope_theta", "rope_theta", "rope_parameters.rope_theta"},
      {"tie_word_embeddings", "tie_word_embeddings", nullptr},
      {"rope_factor", "rope_scaling.factor", "rope_parameters.factor"},
      {"rope_low_freq_factor", "rope_scaling.low_freq_factor", "rope_parameters.low_freq_factor"},
      {"rope_high_freq_factor", "rope_scaling.high_freq_factor", "rope_parameters.high_freq_factor"},
      {"rope_original_max_position_embeddings", "rope_scaling.original_max_position_embeddings",
       "rope_parameters.original_max_position_embeddings"},
      {"sliding_window", "sliding_window", nullptr},
  };
  // transformers' value for a key the file leaves out; "-1" where it has none (the file must say).
  const auto fallback = [&](std::string_view field) -> std::string {
    if (field == "num_key_value_heads") return P + "_NUM_ATTENTION_HEADS";
    if (field == "head_dim") return "(" + P + "_HIDDEN_SIZE / " + P + "_NUM_ATTENTION_HEADS)";
    if (field == "tie_word_embeddings") return "0";
    if (field == "rope_theta") return "10000";  // as hf_config.hpp reads a file without one
    return "-1";
  };
  std::string table;
  for (const auto& [field, value] : config_fields(cfg))
    for (const where& w : places)
      if (field == w.field)
        table += std::string(table.empty() ? "" : ",\n") + "      {\"" + w.key + "\", " +
                 (w.alternative ? "\"" + std::string(w.alternative) + "\"" : std::string("NULL")) + ", " + P + "_" + upper_ident(field) +
                 ", " + fallback(field) + "}";
  std::string c;
  c += R"(/* The member at `path` ("a.b": member b of the object a), or NULL. */
static const fst_json* config_value(const fst_json* j, const char* path) {
  const char* dot = strchr(path, '.');
  char head[64];
  const fst_json* v;
  if (!dot) return fst_json_get(j, path);
  snprintf(head, sizeof head, "%.*s", (int)(dot - path), path);
  v = fst_json_get(j, head);
  return v && v->type == FST_OBJECT ? fst_json_get(v, dot + 1) : NULL;
}

/* transformers' RoPE kind: "rope_type" (or "type") in rope_scaling (transformers 4) or rope_parameters (5). */
static const char* config_rope_type(const fst_json* j) {
  static const char* const paths[] = {"rope_scaling.rope_type", "rope_scaling.type", "rope_parameters.rope_type", "rope_parameters.type"};
  size_t k;
  for (k = 0; k < sizeof paths / sizeof paths[0]; ++k) {
    const fst_json* v = config_value(j, paths[k]);
    if (v && v->type == FST_STRING) return v->str;
  }
  return "default";
}

)";
  c += "/* The directory's config.json, when there is one, must describe the model this scorer was generated for. */\n"
       "static int check_config(const char* dir, char* err, size_t errn) {\n"
       "  char path[1024];\n  size_t len = 0;\n  char* text;\n  fst_json j;\n  int rc = 0;\n"
       "  const char* rope_type;\n"
       "  const char* const want_rope_type = \"" + std::string(decoder::name_of(cfg.rope_type)) + "\";\n"
       "  const struct { const char* key; const char* alternative; double want; double fallback; } fields[] = {\n" + table + "};\n"
       "  size_t k;\n"
       "  snprintf(path, sizeof path, \"%s/config.json\", dir);\n"
       "  if (!(text = fst_read_text(path, &len))) return 0; /* a .safetensors file, or a directory without one */\n"
       "  if (fst_json_parse(text, len, path, &j, err, errn)) {\n    free(text);\n    return -1;\n  }\n  free(text);\n"
       "  for (k = 0; k < sizeof fields / sizeof fields[0] && !rc; ++k) {\n"
       "    const fst_json* v = config_value(&j, fields[k].key);\n"
       "    const char* key = fields[k].key; /* the one the file gives, for the message */\n"
       "    double got;\n    int given;\n"
       "    if ((!v || v->type == FST_NULL) && fields[k].alternative) {\n"
       "      const fst_json* alternative = config_value(&j, fields[k].alternative);\n"
       "      if (alternative) {\n        v = alternative;\n        key = fields[k].alternative;\n      }\n    }\n"
       "    given = v && (v->type == FST_NUMBER || v->type == FST_BOOL);\n"
       "    if (v && v->type != FST_NULL && !given) { /* \"256\", a list: the file's fault, not a missing field */\n"
       "      fst__fail(err, errn, \"%s: field \\\"%s\\\" must be a number, got %s\", path, key,\n"
       "                v->type == FST_STRING ? \"a string\" : v->type == FST_ARRAY ? \"a list\" : \"an object\");\n"
       "      rc = -1;\n      break;\n    }\n"
       "    got = given ? v->num : fields[k].fallback;\n"
       "    if (got != fields[k].want) {\n"
       "      if (given || fields[k].fallback != -1)\n"
       "        fst__fail(err, errn, \"%s: field \\\"%s\\\": this model was generated for %.9g, the file says %.9g\", path, key, fields[k].want, got);\n"
       "      else\n"
       "        fst__fail(err, errn, \"%s: field \\\"%s\\\": this model was generated for %.9g, the file does not give it\", path, key, fields[k].want);\n"
       "      rc = -1;\n    }\n  }\n"
       "  if (!rc && strcmp(rope_type = config_rope_type(&j), want_rope_type)) {\n"
       "    fst__fail(err, errn, \"%s: RoPE \\\"rope_type\\\": this model was generated for \\\"%s\\\", the file says \\\"%s\\\"\", path, want_rope_type, rope_type);\n"
       "    rc = -1;\n  }\n"
       "  fst_json_free(&j);\n  return rc;\n}\n\n";
  return c;
}

FUSED_UNOPTIMIZED inline std::string main_helpers(const c_program& p) {
  std::string c = std::string(parse_ids_c) + check_config_c(p);
  c += "/* The model in DIR (its config.json checked first), or 1 with the reason on stderr. */\n"
       "static int load_model(const char* dir, " + p.name + "_model* m) {\n"
       "  char err[1024];\n  fst_file_list files;\n"
       "  if (check_config(dir, err, sizeof err) || fst_model_files(dir, &files, err, sizeof err)) {\n"
       "    fprintf(stderr, \"" + p.name + ": %s\\n\", err);\n    return 1;\n  }\n"
       "  if (" + p.name + "_init_safetensors(m, (const char* const*)files.files, files.count, NULL, NULL)) {\n"
       "    fprintf(stderr, \"" + p.name + ": %s\\n\", m->error);\n    fst_file_list_free(&files);\n    return 1;\n  }\n"
       "  fst_file_list_free(&files);\n  return 0;\n}\n\n";
  return c;
}

}  // namespace detail

// ---- <name>.h ---------------------------------------------------------------------------------------
FUSED_UNOPTIMIZED inline std::string emit_header(const c_program& p, std::string_view generator) {
  const std::string P = upper_ident(p.name), n = p.name;
  const mode_plan& pf = p.prefill;
  std::string h;
  h += "/* " + n + ".h: a " + std::string(p.model_type) + " model as plain C11, generated by " + std::string(generator) + ". Do not edit.\n"
       " *\n"
       " * Three regions, each " + P + "_MEM_ALIGN-aligned, caller-owned or allocated once by init:\n"
       " *   weights  " + std::to_string(p.weights_bytes()) + " bytes, bf16, read-only (" + P + "_W_* offsets)\n"
       " *   state    the KV cache of " + std::to_string(p.max_ctx) + " positions (" + P + "_STATE_* offsets)\n"
       " *   arena    activations of prefill (up to " + std::to_string(p.max_seq) + " tokens a call) or decode (" + P + "_PREFILL_*, " +
       P + "_DECODE_*)\n"
       " * prefill and decode allocate nothing; they refuse (NULL, m->error says why) a call that would pass\n"
       " * the KV capacity or hold a token id outside the vocabulary, before writing anything.\n"
       " * Debug builds (-DFUSED_DEBUG_CANARIES) use a second layout with a " + std::to_string(canary_bytes) + "-byte canary after every\n"
       " * state and activation buffer, checked after every step; the offsets below switch with it. */\n";
  h += "#ifndef " + P + "_H\n#define " + P + "_H\n\n#include <stddef.h>\n#include <stdint.h>\n\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  h += "/* The config (Hugging Face config.json names) and the limits this build was planned for */\n";
  for (const auto& [k, v] : config_fields(p.cfg)) h += "#define " + P + "_" + upper_ident(k) + " " + v + "\n";
  h += "#define " + P + "_MAX_SEQ " + std::to_string(p.max_seq) + "\n";
  h += "#define " + P + "_MAX_CTX " + std::to_string(p.max_ctx) + "\n";
  h += "#define " + P + "_LOGITS_ALL_ROWS " + std::string(p.all_rows() ? "1" : "0") + " /* prefill returns the logits of " +
       (p.all_rows() ? "every position" : "the last position only") + " */\n";
  if (p.generate) {
    std::string stops;
    for (const int id : p.generation.stop_ids) stops += (stops.empty() ? "" : ", ") + std::to_string(id);
    h += "#define " + P + "_MAX_NEW_TOKENS " + std::to_string(p.generation.max_new_tokens) + " /* the most tokens " + n +
         "_generate picks; stop ids: " + (stops.empty() ? "none" : stops) + " */\n";
  }
  h += "\n";
  h += "/* The layout */\n";
  h += "#define " + P + "_MEM_ALIGN 64\n";
  h += "#define " + P + "_FINGERPRINT " + hex64(layout_fingerprint(p)) + "ULL /* graph, dtypes, offsets */\n";
  h += "#define " + P + "_WEIGHTS_FINGERPRINT " + hex64(weights_fingerprint(p)) + "ULL /* the weights region alone */\n";
  h += "#define " + P + "_WEIGHT_COUNT " + std::to_string(runtime::weight_count(pf.tensors)) + "\n";
  h += "#define " + P + "_WEIGHTS_BYTES " + std::to_string(p.weights_bytes()) + "\n";

  const debug_region dstate = with_canaries(pf, region::state);
  const std::vector<const mode_plan*> modes = p.modes();
  std::vector<debug_region> debug_arena;  // per mode
  for (const mode_plan* m : modes) debug_arena.push_back(with_canaries(*m, region::activations));
  auto sizes = [&](std::int64_t state, const std::vector<std::int64_t>& arena) FUSED_UNOPTIMIZED {
    std::string s;
    s += "#define " + P + "_STATE_BYTES " + std::to_string(state) + "\n";
    for (std::size_t k = 0; k < modes.size(); ++k) s += "#define " + P + "_" + upper_ident(modes[k]->mode) + "_ARENA_BYTES " + std::to_string(arena[k]) + "\n";
    s += "#define " + P + "_ARENA_BYTES " + std::to_string(*std::max_element(arena.begin(), arena.end())) + " /* one arena serves " +
         (modes.size() == 2 ? "both modes" : "every mode") + " */\n";
    return s;
  };
  std::vector<std::int64_t> release_arena, debug_arena_bytes;
  for (std::size_t k = 0; k < modes.size(); ++k) {
    release_arena.push_back(modes[k]->bytes(region::activations));
    debug_arena_bytes.push_back(debug_arena[k].bytes);
  }
  h += "#ifndef FUSED_DEBUG_CANARIES\n" + sizes(p.state_bytes(), release_arena);
  h += "#else\n#define " + P + "_CANARY_BYTES " + std::to_string(canary_bytes) + "\n" + sizes(dstate.bytes, debug_arena_bytes) + "#endif\n\n";

  h += "/* Weights region: byte offset of each tensor (bf16, Hugging Face name and shape) */\n";
  for (const auto& t : pf.tensors)
    if (t.kind == role::weight)
      h += "#define " + offset_macro(p, pf, t.id) + " " + std::to_string(pf.of(t.id).offset) + " /* " + c_comment(tensor_name(t)) + " " +
           bound_shape(t, pf.bind) + " */\n";

  auto offsets = [&](bool debug) FUSED_UNOPTIMIZED {
    std::string s;
    s += "/* State region (the KV cache; a *_NEXT tensor is its update, in place) */\n";
    for (const auto& t : pf.tensors)
      if (pf.of(t.id).where == region::state)
        s += "#define " + offset_macro(p, pf, t.id) + " " +
             std::to_string(debug ? dstate.offset[static_cast<std::size_t>(t.id)] : pf.of(t.id).offset) + " /* " + name_of(t.type) + " " +
             bound_shape(t, pf.bind) + ", " + std::to_string(pf.of(t.id).bytes) + " bytes */\n";
    for (std::size_t k = 0; k < modes.size(); ++k) {
      const mode_plan* m = modes[k];
      const debug_region& dr = debug_arena[k];
      std::string mode_name = m->mode;
      mode_name[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(mode_name[0])));
      s += "/* " + mode_name + " arena: each tensor's offset (tensors never live at once may share bytes) */\n";
      for (const auto& t : m->tensors)
        if (m->of(t.id).where == region::activations)
          s += "#define " + offset_macro(p, *m, t.id) + " " +
               std::to_string(debug ? dr.offset[static_cast<std::size_t>(t.id)] : m->of(t.id).offset) + " /* " + name_of(t.type) + " " +
               bound_shape(t, m->bind) + " */\n";
    }
    return s;
  };
  h += "#ifndef FUSED_DEBUG_CANARIES\n" + offsets(false) + "#else /* the debug layout */\n" + offsets(true) + "#endif\n\n";

  h += "/* A model: its regions and its position in the KV cache. */\n"
       "typedef struct " + n + "_model {\n"
       "  const unsigned char* weights; /* " + P + "_WEIGHTS_BYTES */\n"
       "  unsigned char* state;         /* " + P + "_STATE_BYTES */\n"
       "  unsigned char* arena;         /* " + P + "_ARENA_BYTES */\n"
       "  int64_t pos;                  /* KV-cache positions used: the next token's position */\n"
       "  size_t logits_rows;           /* rows of the logits the last prefill/decode returned */\n"
       "  void* owned[3];               /* what init allocated (weights, state, arena); freed by " + n + "_free */\n"
       "  char error[512];              /* why the last call failed */\n"
       "} " + n + "_model;\n\n";
  h += "/* Init: 0 on success, -1 with m->error set. `state` and `arena` may be NULL (allocated here, once)\n"
       " * or caller-owned regions of " + P + "_STATE_BYTES and " + P + "_ARENA_BYTES, " + P + "_MEM_ALIGN-aligned. */\n";
  h += "/* Weights from a blob laid out as the weights region; `weights_fingerprint` is the layout the blob was\n"
       " * packed for (" + P + "_WEIGHTS_FINGERPRINT), checked with its size and alignment. The blob is not copied. */\n";
  h += "int " + n + "_init_blob(" + n + "_model* m, const void* weights, size_t weights_bytes, uint64_t weights_fingerprint, void* state, void* arena);\n";
  h += "/* Weights from safetensors files (a checkpoint's shards), bound by Hugging Face name: every tensor\n"
       " * must be there with its shape; BF16 is copied, F32/F16 rounded to bf16; an unused tensor is an error. */\n";
  h += "int " + n + "_init_safetensors(" + n + "_model* m, const char* const* files, int n_files, void* state, void* arena);\n";
  h += "void " + n + "_free(" + n + "_model* m);\n";
  h += "/* The first weight holding a NaN or an infinity, e.g. `tensor \"model.norm.weight\" holds NaN at element 7 (3 of\n"
       " * 896 values are not finite)`, into out[0..n); 0 and out empty when every one is finite. For a diagnosis. */\n";
  h += "int " + n + "_first_non_finite_weight(const " + n + "_model* m, char* out, size_t n);\n\n";
  h += "/* Runs ids[0..n) at m->pos, in chunks of at most " + P + "_MAX_SEQ, and returns the logits of the last\n"
       " * chunk: [m->logits_rows, " + P + "_VOCAB_SIZE] floats in the arena, valid until the next call. NULL on error. */\n";
  h += "const float* " + n + "_prefill(" + n + "_model* m, const int32_t* ids, size_t n);\n";
  h += "/* One token at m->pos; returns its logits [" + P + "_VOCAB_SIZE]. NULL on error. */\n";
  h += "const float* " + n + "_decode(" + n + "_model* m, int32_t id);\n";
  if (p.generate)
    h += "/* Generation as one program: the prompt ids[0..n) (1 <= n <= " + P + "_MAX_SEQ) from position 0, then up to " + P +
         "_MAX_NEW_TOKENS\n"
         " * tokens, each the argmax of the last logits, until a stop id (not written): the result of `fused run --temp 0`.\n"
         " * Writes them to out[0..count) and returns count, or -1 (m->error says why) before writing anything when the\n"
         " * prompt, an id or n + " + P + "_MAX_NEW_TOKENS positions do not fit. Afterwards m->pos is the positions the KV\n"
         " * cache holds: n + count, or n + count - 1 when the last token (the " + P + "_MAX_NEW_TOKENS-th) was not fed back;\n"
         " * decode may go on from there. */\n"
         "int " + n + "_generate(" + n + "_model* m, const int32_t* ids, size_t n, int32_t* out);\n";
  h += "/* Forgets the context: the next prefill starts at position 0. */\n";
  h += "void " + n + "_reset(" + n + "_model* m);\n";
  h += "/* Threads the kernels use (n <= 0: the default, env FUSED_THREADS or OpenMP's); results do not depend on it. */\n";
  h += "void " + n + "_set_threads(int n);\n";
  h += "/* The instruction set the kernels run (\"avx512bf16\", \"avx2\", ...), and this build's " + P + "_FINGERPRINT. */\n";
  h += "const char* " + n + "_isa(void);\nuint64_t " + n + "_fingerprint(void);\n\n";
  h += "#ifdef FUSED_DEBUG_CANARIES\n"
       "/* Test hook, debug builds only: called after each step's kernel, before the canaries are checked, with\n"
       " * the step's output buffer (schedule position `pos`, mode 0 prefill / 1 decode" + std::string(p.generate ? " / 2 generate" : "") + "). */\n"
       "extern void (*" + n + "_debug_after_step)(int mode, int pos, void* out, size_t out_bytes);\n#endif\n\n";
  h += "#ifdef __cplusplus\n}\n#endif\n\n#endif /* " + P + "_H */\n";
  return h;
}

// ---- <name>.c ---------------------------------------------------------------------------------------
FUSED_UNOPTIMIZED inline std::string emit_source(const c_program& p, std::string_view generator) {
  const std::string P = upper_ident(p.name), n = p.name;
  const mode_plan& pf = p.prefill;
  const mode_plan& dc = p.decode;
  std::string c;
  c += "/* " + n + ".c: " + std::string(p.model_type) + " prefill and decode" + (p.generate ? " (and generation, as one program)" : "") +
       " as straight-line kernel calls, generated by " + std::string(generator) + ". Do not edit.\n"
       " * Every operand is a constant offset in a region (see " + n + ".h); only the tokens of a prefill call (n)\n"
       " * and the position (pos0) are known at run time. Includes the kernel headers and the C library only. */\n";
  c += "#include \"" + n + ".h\"\n\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n\n";
  c += "/* The kernels' scalar a * b + c must round as in the C++ executors, which g++ compiles as gnu++20\n"
       " * (-ffp-contract=fast); ISO C mode (-std=c11) would not contract, so say so here. */\n"
       "#if defined(__GNUC__) && !defined(__clang__)\n#pragma GCC optimize(\"fp-contract=fast\")\n#endif\n";
  c += "/* gcc 12 reports a tail loop the kernels never reach once their sizes are constants here\n"
       " * (-Waggressive-loop-optimizations on fk_kv_store's conversion): not a bug of theirs or ours. */\n"
       "#if defined(__GNUC__) && !defined(__clang__)\n#pragma GCC diagnostic push\n"
       "#pragma GCC diagnostic ignored \"-Waggressive-loop-optimizations\"\n#endif\n";
  for (const auto& k : kernel_headers()) c += "#include \"" + k + "\"\n";
  if (p.generate) c += "#include \"fk_sequence.h\"\n";  // argmax, stop ids, positions: the generation loop's kernels
  c += "#if defined(__GNUC__) && !defined(__clang__)\n#pragma GCC diagnostic pop\n#endif\n";
  c += "#include \"" + std::string(support_header) + "\"\n\n";
  c += "/* Operands: W = bf16 weights, S16 = bf16 state (KV cache), F = f32, I32 = i32 and U8 = bool activations. */\n"
       "#define W(off) ((const uint16_t*)(const void*)(m->weights + (off)))\n"
       "#define S16(off) ((uint16_t*)(void*)(m->state + (off)))\n"
       "#define F(off) ((float*)(void*)(m->arena + (off)))\n"
       "#define I32(off) ((int32_t*)(void*)(m->arena + (off)))\n"
       "#define U8(off) ((uint8_t*)(void*)(m->arena + (off)))\n"
       "#define A16(off) ((uint16_t*)(void*)(m->arena + (off)))\n\n";

  // Weights table.
  c += "/* The weights region, by Hugging Face name: offset, shape, tensor id in the plan. */\n";
  c += "static const fst_weight " + n + "__weights[" + P + "_WEIGHT_COUNT] = {\n";
  for (const auto& t : pf.tensors)
    if (t.kind == role::weight) {
      c += "    {" + c_string(tensor_name(t)) + ", " + offset_macro(p, pf, t.id) + ", " + std::to_string(t.shp.rank) + ", {";
      for (int i = 0; i < 2; ++i) c += (i ? ", " : "") + std::to_string(i < t.shp.rank ? t.shp[i].n : 0);
      c += "}, " + std::to_string(t.id) + "},\n";
    }
  c += "};\n\n";

  // Debug canaries.
  c += "#ifdef FUSED_DEBUG_CANARIES\n";
  c += "/* A buffer's bytes and live range (schedule positions), and each step's names, for the canary report. */\n"
       "typedef struct { const char* name; size_t offset, bytes; int first, last; } " + n + "__buffer;\n"
       "typedef struct { int id; const char* result; const char* op; const char* kernel; int out_in_state; size_t out, out_bytes; } " + n +
       "__step;\n";
  c += "static const " + n + "__buffer " + n + "__state_buffers[] = {\n";
  for (const auto& t : pf.tensors)
    if (t.is_feed && t.kind == role::state)
      c += "    {" + c_string(tensor_name(t)) + ", " + offset_macro(p, pf, t.id) + ", " + std::to_string(pf.of(t.id).bytes) + ", 0, 0},\n";
  c += "};\n";
  const std::vector<const mode_plan*> modes = p.modes();
  for (const mode_plan* m : modes) {
    c += "static const " + n + "__buffer " + n + "__" + m->mode + "_buffers[] = {\n";
    for (const auto& t : m->tensors) {
      const buffer& b = m->of(t.id);
      if (b.where == region::activations)
        c += "    {" + c_string(tensor_name(t)) + ", " + offset_macro(p, *m, t.id) + ", " + std::to_string(b.bytes) + ", " + std::to_string(b.first) + ", " +
             std::to_string(b.last) + "},\n";
    }
    c += "};\n";
    c += "static const " + n + "__step " + n + "__" + m->mode + "_steps[] = {\n";
    for (std::size_t i = 0; i < m->steps.size(); ++i) {
      const step& s = m->steps[i];
      const buffer& b = m->of(s.result);
      c += "    {" + std::to_string(s.id) + ", " + c_string(tensor_name(m->tensor(s.result))) + ", \"" + s.op->name + "\", \"" +
           std::string(m->kernels[i] ? m->kernels[i] : "") + "\", " + (b.where == region::state ? "1" : "0") + ", " + bytes_macro(p, *m, s.result) +
           ", " + std::to_string(b.bytes) + "},\n";
    }
    c += "};\n";
  }
  // The tables by mode number (detail::mode_index).
  auto per_mode = [&](const std::string& declaration, auto item) {
    std::string t = "static " + declaration + "[] = {";
    for (std::size_t k = 0; k < modes.size(); ++k) t += (k ? ", " : "") + item(std::string(modes[k]->mode));
    return t + "};\n";
  };
  c += per_mode("const " + n + "__buffer* const " + n + "__mode_buffers", [&](const std::string& mode) { return n + "__" + mode + "_buffers"; });
  c += per_mode("const size_t " + n + "__mode_buffer_counts",
                [&](const std::string& mode) { return "sizeof " + n + "__" + mode + "_buffers / sizeof(" + n + "__buffer)"; });
  c += per_mode("const " + n + "__step* const " + n + "__mode_steps", [&](const std::string& mode) { return n + "__" + mode + "_steps"; });
  c += per_mode("const char* const " + n + "__mode_names", [&](const std::string& mode) { return "\"" + mode + "\""; });
  c += "void (*" + n + "_debug_after_step)(int mode, int pos, void* out, size_t out_bytes) = NULL;\n\n";
  c += "static void " + n + "__arm(unsigned char* base, const " + n + "__buffer* b) { memset(base + b->offset + b->bytes, 0xFD, " + P +
       "_CANARY_BYTES); }\n";
  c += "static int " + n + "__intact(const unsigned char* base, const " + n + "__buffer* b) {\n"
       "  size_t k;\n"
       "  for (k = 0; k < " + P + "_CANARY_BYTES; ++k)\n"
       "    if (base[b->offset + b->bytes + k] != 0xFD) return 0;\n"
       "  return 1;\n}\n";
  c += "/* Arms the canaries of the buffers that come alive at schedule position `pos`. */\n"
       "static void " + n + "__arm_at(" + n + "_model* m, int mode, int pos) {\n"
       "  const " + n + "__buffer* b = " + n + "__mode_buffers[mode];\n"
       "  const size_t count = " + n + "__mode_buffer_counts[mode];\n"
       "  size_t k;\n"
       "  for (k = 0; k < count; ++k)\n"
       "    if (b[k].first == pos) " + n + "__arm(m->arena, &b[k]);\n}\n";
  c += "/* After the step at schedule position `pos`: every live buffer's canary must be intact. */\n"
       "static int " + n + "__after_step(" + n + "_model* m, int mode, int pos) {\n"
       "  const " + n + "__buffer* b = " + n + "__mode_buffers[mode];\n"
       "  const size_t count = " + n + "__mode_buffer_counts[mode];\n"
       "  const " + n + "__step* s = &" + n + "__mode_steps[mode][pos];\n"
       "  const " + n + "__buffer* bad = NULL;\n"
       "  size_t k;\n"
       "  int in_state = 0;\n"
       "  if (" + n + "_debug_after_step) " + n + "_debug_after_step(mode, pos, (s->out_in_state ? m->state : m->arena) + s->out, s->out_bytes);\n"
       "  for (k = 0; k < count && !bad; ++k)\n"
       "    if (b[k].first <= pos && pos <= b[k].last && !" + n + "__intact(m->arena, &b[k])) bad = &b[k];\n"
       "  for (k = 0; k < sizeof " + n + "__state_buffers / sizeof " + n + "__state_buffers[0] && !bad; ++k)\n"
       "    if (!" + n + "__intact(m->state, &" + n + "__state_buffers[k])) bad = &" + n + "__state_buffers[k], in_state = 1;\n"
       "  if (bad) {\n"
       "    snprintf(m->error, sizeof m->error, \"" + n + ": canary overwritten in %s step %d '%s' (%s, %s): buffer '%s' (%s +%zu, %zu bytes) was written past its end\",\n"
       "             " + n + "__mode_names[mode], s->id, s->result, s->op, s->kernel, bad->name, in_state ? \"state\" : \"arena\", bad->offset, bad->bytes);\n"
       "    fprintf(stderr, \"%s\\n\", m->error);\n"
       "    return -1;\n"
       "  }\n"
       "  " + n + "__arm_at(m, mode, pos + 1);\n"
       "  return 0;\n}\n";
  c += "#define CANARY_CHECK(mode, pos) \\\n  do {                          \\\n    if (" + n +
       "__after_step(m, mode, pos)) return -1; \\\n  } while (0)\n";
  c += "#else\n#define CANARY_CHECK(mode, pos) ((void)0)\n#endif\n\n";

  c += detail::mode_function(p, pf);
  c += detail::mode_function(p, dc);
  if (p.generate) c += detail::generate_function(p, *p.generate);

  // io
  auto io_macro = [&](const mode_plan& m, bool logits) {
    for (const auto& t : m.tensors) {
      const buffer& b = m.of(t.id);
      if (b.where != region::activations) continue;
      if (logits ? (t.kind == role::output && b.offset == m.io.logits_offset) : (t.kind == role::input && b.offset == m.io.ids_offset))
        return offset_macro(p, m, t.id);
    }
    throw std::logic_error("codegen: no tensor at the io offset");
  };
  const std::string pf_ids = io_macro(pf, false), pf_logits = io_macro(pf, true), dc_ids = io_macro(dc, false), dc_logits = io_macro(dc, true);

  c += "/* ---- the session: regions, capacity and vocabulary checks (as fused's C++ session) ---- */\n\n";
  c += "static int " + n + "__fail(" + n + "_model* m, const char* what) {\n"
       "  snprintf(m->error, sizeof m->error, \"%s\", what);\n  return -1;\n}\n\n";
  c += "static void* " + n + "__alloc(size_t bytes) {\n"
       "  const size_t rounded = (bytes + " + P + "_MEM_ALIGN - 1) / " + P + "_MEM_ALIGN * " + P + "_MEM_ALIGN;\n"
       "  void* p = aligned_alloc(" + P + "_MEM_ALIGN, rounded ? rounded : " + P + "_MEM_ALIGN);\n"
       "  if (p) memset(p, 0, rounded);\n  return p;\n}\n\n";
  c += "static int " + n + "__regions(" + n + "_model* m, void* state, void* arena) {\n"
       "  if (((uintptr_t)state | (uintptr_t)arena) % " + P + "_MEM_ALIGN) return " + n + "__fail(m, \"" + n +
       ": the state and arena regions must be " + "64-byte aligned\");\n"
       "  if (!state && !(state = m->owned[1] = " + n + "__alloc(" + P + "_STATE_BYTES))) return " + n + "__fail(m, \"" + n + ": out of memory\");\n"
       "  if (!arena && !(arena = m->owned[2] = " + n + "__alloc(" + P + "_ARENA_BYTES))) return " + n + "__fail(m, \"" + n + ": out of memory\");\n"
       "  m->state = (unsigned char*)state;\n  m->arena = (unsigned char*)arena;\n"
       "#ifdef FUSED_DEBUG_CANARIES\n"
       "  {\n    size_t k;\n"
       "    for (k = 0; k < sizeof " + n + "__state_buffers / sizeof " + n + "__state_buffers[0]; ++k) " + n + "__arm(m->state, &" + n +
       "__state_buffers[k]);\n  }\n"
       "#endif\n"
       "  return 0;\n}\n\n";
  c += "int " + n + "_init_blob(" + n + "_model* m, const void* weights, size_t weights_bytes, uint64_t weights_fingerprint, void* state, void* arena) {\n"
       "  memset(m, 0, sizeof *m);\n"
       "  if (!weights || (uintptr_t)weights % " + P + "_MEM_ALIGN) return " + n + "__fail(m, \"" + n + ": the weights blob must be 64-byte aligned\");\n"
       "  if (weights_bytes != " + P + "_WEIGHTS_BYTES) {\n"
       "    snprintf(m->error, sizeof m->error, \"" + n + ": the weights blob has %zu bytes; this layout's weights region has %llu\", weights_bytes,\n"
       "             (unsigned long long)" + P + "_WEIGHTS_BYTES);\n    return -1;\n  }\n"
       "  if (weights_fingerprint != " + P + "_WEIGHTS_FINGERPRINT) {\n"
       "    snprintf(m->error, sizeof m->error, \"" + n + ": the weights blob was packed for the layout 0x%016llx; this model's is 0x%016llx\",\n"
       "             (unsigned long long)weights_fingerprint, (unsigned long long)" + P + "_WEIGHTS_FINGERPRINT);\n    return -1;\n  }\n"
       "  m->weights = (const unsigned char*)weights;\n"
       "  return " + n + "__regions(m, state, arena);\n}\n\n";
  c += "int " + n + "_init_safetensors(" + n + "_model* m, const char* const* files, int n_files, void* state, void* arena) {\n"
       "  char fingerprint[24];\n"
       "  memset(m, 0, sizeof *m);\n"
       "  snprintf(fingerprint, sizeof fingerprint, \"0x%016llx\", (unsigned long long)" + P + "_WEIGHTS_FINGERPRINT);\n"
       "  if (!(m->owned[0] = " + n + "__alloc(" + P + "_WEIGHTS_BYTES))) return " + n + "__fail(m, \"" + n + ": out of memory\");\n"
       "  m->weights = (const unsigned char*)m->owned[0];\n"
       "  if (fst_bind_weights(" + n + "__weights, " + P + "_WEIGHT_COUNT, " + P + "_TIE_WORD_EMBEDDINGS, files, n_files, fingerprint, (unsigned char*)m->owned[0],\n"
       "                       m->error, sizeof m->error)) {\n"
       "    " + n + "_free(m);\n    return -1;\n  }\n"
       "  if (" + n + "__regions(m, state, arena)) {\n    " + n + "_free(m);\n    return -1;\n  }\n  return 0;\n}\n\n";
  c += "void " + n + "_free(" + n + "_model* m) {\n"
       "  int k;\n  for (k = 0; k < 3; ++k) free(m->owned[k]);\n"
       "  m->owned[0] = m->owned[1] = m->owned[2] = NULL;\n  m->weights = NULL;\n  m->state = m->arena = NULL;\n}\n\n";
  c += "int " + n + "_first_non_finite_weight(const " + n + "_model* m, char* out, size_t n) {\n"
       "  return fst_first_non_finite(" + n + "__weights, " + P + "_WEIGHT_COUNT, m->weights, out, n);\n}\n\n";
  c += "void " + n + "_reset(" + n + "_model* m) { m->pos = 0; }\n";
  c += "void " + n + "_set_threads(int n) { fk_set_threads(n); }\n";
  c += "const char* " + n + "_isa(void) { return fk_isa_name(fk_isa_active()); }\n";
  c += "uint64_t " + n + "_fingerprint(void) { return " + P + "_FINGERPRINT; }\n\n";
  c += "/* Nothing is written unless the whole call fits: the KV capacity, then every id. */\n"
       "static int " + n + "__check(" + n + "_model* m, const int32_t* ids, size_t n) {\n"
       "  size_t i;\n"
       "  if (m->pos + (int64_t)n > " + P + "_MAX_CTX) {\n"
       "    snprintf(m->error, sizeof m->error, \"the KV cache holds %d positions; %lld are used and this call needs %zu more\", " + P + "_MAX_CTX,\n"
       "             (long long)m->pos, n);\n    return -1;\n  }\n"
       "  for (i = 0; i < n; ++i)\n"
       "    if (ids[i] < 0 || ids[i] >= " + P + "_VOCAB_SIZE) {\n"
       "      snprintf(m->error, sizeof m->error, \"token id %ld (at index %zu) is outside the vocabulary [0, %d)\", (long)ids[i], i, " + P +
       "_VOCAB_SIZE);\n      return -1;\n    }\n"
       "  return 0;\n}\n\n";
  c += "const float* " + n + "_prefill(" + n + "_model* m, const int32_t* ids, size_t n) {\n"
       "  size_t at = 0, k = 0;\n"
       "  if (n == 0) {\n    " + n + "__fail(m, \"prefill: no tokens\");\n    return NULL;\n  }\n"
       "  if (" + n + "__check(m, ids, n)) return NULL;\n"
       "  while (at < n) {\n"
       "    k = n - at < " + P + "_MAX_SEQ ? n - at : " + P + "_MAX_SEQ;\n"
       "    memcpy(m->arena + " + pf_ids + ", ids + at, k * sizeof(int32_t));\n"
       "#ifdef FUSED_DEBUG_CANARIES\n    " + n + "__arm_at(m, 0, 0);\n#endif\n"
       "    if (" + n + "__prefill(m, k)) return NULL;\n"
       "    m->pos += (int64_t)k;\n    at += k;\n  }\n"
       "  m->logits_rows = " + (p.all_rows() ? std::string("k") : std::string("1")) + ";\n"
       "  return (const float*)(const void*)(m->arena + " + pf_logits + ");\n}\n\n";
  c += "const float* " + n + "_decode(" + n + "_model* m, int32_t id) {\n"
       "  if (" + n + "__check(m, &id, 1)) return NULL;\n"
       "  memcpy(m->arena + " + dc_ids + ", &id, sizeof id);\n"
       "#ifdef FUSED_DEBUG_CANARIES\n  " + n + "__arm_at(m, 1, 0);\n#endif\n"
       "  if (" + n + "__decode(m)) return NULL;\n"
       "  m->pos += 1;\n  m->logits_rows = 1;\n"
       "  return (const float*)(const void*)(m->arena + " + dc_logits + ");\n}\n";
  if (p.generate) {
    const mode_plan& g = *p.generate;
    // The program's input and outputs by tensor name (decoder_generate.hpp names them; "position",
    // the loop's position carry, is output "positions").
    auto named = [&](std::string_view name, role r) {
      for (const auto& t : g.tensors)
        if (t.kind == r && tensor_name(t) == name) return offset_macro(p, g, t.id);
      throw std::logic_error("codegen: generate has no " + std::string(name));
    };
    c += "\nint " + n + "_generate(" + n + "_model* m, const int32_t* ids, size_t n, int32_t* out) {\n"
         "  int32_t count;\n"
         "  if (n == 0 || n > " + P + "_MAX_SEQ) {\n"
         "    snprintf(m->error, sizeof m->error, \"generate: the prompt holds %zu tokens; this model takes 1 to %d\", n, " + P + "_MAX_SEQ);\n"
         "    return -1;\n  }\n"
         "  m->pos = 0;\n"
         "  if (" + n + "__check(m, ids, n)) return -1;\n"
         "  if (n + " + P + "_MAX_NEW_TOKENS - 1 > " + P + "_MAX_CTX) { /* the last token picked is never fed back */\n"
         "    snprintf(m->error, sizeof m->error, \"generate: %zu prompt tokens and up to %d more need %zu positions; the KV cache holds %d\", n,\n"
         "             " + P + "_MAX_NEW_TOKENS, n + " + P + "_MAX_NEW_TOKENS - 1, " + P + "_MAX_CTX);\n"
         "    return -1;\n  }\n"
         "  memcpy(m->arena + " + named("input_ids", role::input) + ", ids, n * sizeof(int32_t));\n"
         "#ifdef FUSED_DEBUG_CANARIES\n  " + n + "__arm_at(m, 2, 0);\n#endif\n"
         "  if (" + n + "__generate(m, n)) return -1;\n"
         "  memcpy(&count, m->arena + " + named("generated_count", role::output) + ", sizeof count);\n"
         "  memcpy(out, m->arena + " + named("generated", role::output) + ", (size_t)count * sizeof(int32_t));\n"
         "  {\n    int32_t positions;\n"
         "    memcpy(&positions, m->arena + " + named("position", role::output) + ", sizeof positions);\n"
         "    m->pos = positions;\n  }\n"
         "  m->logits_rows = 0;\n"
         "  return count;\n}\n";
  }
  return c;
}

// ---- <name>_main.c: the scorer ------------------------------------------------------------------------
// Needs logits of every prefill position (graph_options::logits == all).
FUSED_UNOPTIMIZED inline std::string emit_scorer(const c_program& p, std::string_view generator) {
  if (!p.all_rows()) throw std::invalid_argument("codegen: the scorer needs the logits of every position (logits: all)");
  const std::string P = upper_ident(p.name), n = p.name;
  std::string c;
  c += "/* " + n + "_main.c: `fused score` for the generated model " + n + ", generated by " + std::string(generator) + ". Do not edit.\n"
       " *   " + n + " --model DIR --input-ids 1,2,3 [--continue-ids 4,5] --out FILE.safetensors [--threads N]\n"
       " * writes prefill_logits [T, V] (every prompt position) and, with --continue-ids, decode_logits [N, V]:\n"
       " * row 0 is the last prefill position, row k the logits after feeding continue ids 0..k-1 (teacher forcing).\n"
       " * DIR: a Hugging Face directory (model.safetensors or an index of shards; its config.json must be the\n"
       " * config this model was generated for) or one .safetensors file. */\n";
  c += "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n\n#include \"" + n + ".h\"\n#include \"" + support_header + "\"\n\n";
  // A scorer left from an earlier gen-c into the same directory must not build against a model that
  // returns the last position's logits only: it would write arena bytes as the other rows.
  c += "#if !" + P + "_LOGITS_ALL_ROWS\n#error \"" + n + "_main.c needs " + n + ".h generated with --logits all: this one returns the last position's logits only\"\n#endif\n\n";
  c += R"(static int usage(const char* argv0) {
  fprintf(stderr, "usage: %s --model DIR --input-ids 1,2,3 [--continue-ids 4,5] --out FILE.safetensors [--threads N]\n", argv0);
  return 2;
}
)";
  c += detail::main_helpers(p);
  c += "/* Logits with a NaN or an infinity are refused, not written out (as fused score refuses them): the\n"
       " * message names the first weight that holds one. Bits, not isfinite(), so that -ffast-math keeps the check. */\n"
       "static int finite_logits(const " + n + "_model* m, const float* logits, size_t count) {\n"
       "  size_t bad = 0, k;\n  char weight[512];\n"
       "  for (k = 0; k < count; ++k) {\n    uint32_t bits;\n    memcpy(&bits, logits + k, sizeof bits);\n"
       "    bad += (bits & 0x7F800000u) == 0x7F800000u;\n  }\n"
       "  if (!bad) return 1;\n"
       "  " + n + "_first_non_finite_weight(m, weight, sizeof weight);\n"
       "  fprintf(stderr, \"" + n + ": the model's logits are not finite (%zu of %zu values are NaN or infinite): %s%s\\n\", bad, count,\n"
       "          weight[0] ? \"its \" : \"every weight is finite, so an activation overflowed\", weight);\n"
       "  return 0;\n}\n\n";
  // Every exit after the arguments goes through `out:`, which frees what was allocated (LeakSanitizer
  // builds of the scorer run the refusals too).
  c += "int main(int argc, char** argv) {\n"
       "  const char *model = NULL, *input = NULL, *cont = NULL, *out = NULL;\n"
       "  int32_t *ids = NULL, *next = NULL;\n  size_t T = 0, N = 0, at, k;\n  int i, threads = 0, rc = 1;\n"
       "  char err[1024];\n  " + n + "_model m;\n  float *prefill = NULL, *decode = NULL;\n  const float* logits;\n"
       "  const size_t V = " + P + "_VOCAB_SIZE;\n"
       "  memset(&m, 0, sizeof m);\n"
       "  if (argc % 2 == 0) return usage(argv[0]);\n"
       "  for (i = 1; i + 1 < argc; i += 2) {\n"
       "    const char* a = argv[i];\n"
       "    const char* v = argv[i + 1];\n"
       "    if (!strcmp(a, \"--model\")) model = v;\n"
       "    else if (!strcmp(a, \"--input-ids\")) input = v;\n"
       "    else if (!strcmp(a, \"--continue-ids\")) cont = v;\n"
       "    else if (!strcmp(a, \"--out\")) out = v;\n"
       "    else if (!strcmp(a, \"--threads\")) {\n"
       "      if (parse_count(\"" + n + "\", a, v, 0, 1024, &threads)) return 2;\n"
       "    } else return usage(argv[0]);\n"
       "  }\n"
       "  if (!model || !input || !out) return usage(argv[0]);\n"
       "  if (parse_ids(\"" + n + "\", \"--input-ids\", input, &ids, &T) || (cont && parse_ids(\"" + n + "\", \"--continue-ids\", cont, &next, &N))) {\n"
       "    rc = 2;\n    goto out;\n  }\n"
       "  if (ids_in_vocabulary(\"" + n + "\", \"--input-ids\", ids, T, " + P + "_VOCAB_SIZE) ||\n"
       "      ids_in_vocabulary(\"" + n + "\", \"--continue-ids\", next, N, " + P + "_VOCAB_SIZE))\n"
       "    goto out;\n"
       "  if (T + (N > 1 ? N - 1 : 0) > " + P + "_MAX_CTX) {\n"
       "    fprintf(stderr, \"" + n + ": %zu input and %zu continue ids need %zu positions; this model was generated for %d (--max-ctx)\\n\", T, N,\n"
       "            T + (N > 1 ? N - 1 : 0), " + P + "_MAX_CTX);\n    goto out;\n  }\n"
       "  if (threads > 0) " + n + "_set_threads(threads);\n"
       "  if (load_model(model, &m)) goto out;\n"
       "  prefill = (float*)malloc(T * V * sizeof(float));\n"
       "  if (N) decode = (float*)malloc(N * V * sizeof(float));\n"
       "  if (!prefill || (N && !decode)) {\n    fprintf(stderr, \"" + n + ": out of memory\\n\");\n    goto out;\n  }\n"
       "  /* The prompt in chunks of at most " + P + "_MAX_SEQ, as the model's own prefill runs it, keeping every row. */\n"
       "  for (at = 0; at < T; at += k) {\n"
       "    k = T - at < " + P + "_MAX_SEQ ? T - at : " + P + "_MAX_SEQ;\n"
       "    if (!(logits = " + n + "_prefill(&m, ids + at, k))) {\n      fprintf(stderr, \"" + n + ": %s\\n\", m.error);\n      goto out;\n    }\n"
       "    if (!finite_logits(&m, logits, k * V)) goto out;\n"
       "    memcpy(prefill + at * V, logits, k * V * sizeof(float));\n  }\n"
       "  if (N) memcpy(decode, prefill + (T - 1) * V, V * sizeof(float));\n"
       "  for (k = 0; k + 1 < N; ++k) {\n"
       "    if (!(logits = " + n + "_decode(&m, next[k]))) {\n      fprintf(stderr, \"" + n + ": %s\\n\", m.error);\n      goto out;\n    }\n"
       "    if (!finite_logits(&m, logits, V)) goto out;\n"
       "    memcpy(decode + (k + 1) * V, logits, V * sizeof(float));\n  }\n"
       "  {\n"
       "    fst_out t[2];\n"
       "    memset(t, 0, sizeof t);\n"
       "    t[0].name = \"prefill_logits\";\n    t[0].dtype = \"F32\";\n    t[0].rank = 2;\n"
       "    t[0].shape[0] = (int64_t)T;\n    t[0].shape[1] = (int64_t)V;\n    t[0].data = prefill;\n    t[0].bytes = T * V * sizeof(float);\n"
       "    t[1] = t[0];\n    t[1].name = \"decode_logits\";\n    t[1].shape[0] = (int64_t)N;\n    t[1].data = decode;\n    t[1].bytes = N * V * sizeof(float);\n"
       "    if (fst_write(out, t, N ? 2 : 1, err, sizeof err)) {\n      fprintf(stderr, \"" + n + ": %s\\n\", err);\n      goto out;\n    }\n"
       "  }\n"
       "  fprintf(stderr, \"" + n + ": %zu prompt + %zu continue ids -> %s (%s)\\n\", T, N, out, " + n + "_isa());\n"
       "  rc = 0;\n"
       "out:\n"
       "  free(prefill);\n  free(decode);\n  free(ids);\n  free(next);\n  " + n + "_free(&m);\n  return rc;\n}\n";
  return c;
}

// ---- <name>_generate_main.c: greedy generation --------------------------------------------------------
// Needs the generate mode (from_runtime with generation options).
FUSED_UNOPTIMIZED inline std::string emit_generate_main(const c_program& p, std::string_view generator) {
  if (!p.generate) throw std::invalid_argument("codegen: the generate main needs the generate mode (--generate N)");
  const std::string P = upper_ident(p.name), n = p.name;
  std::string c;
  c += "/* " + n + "_generate_main.c: greedy generation with " + n + "_generate, generated by " + std::string(generator) + ". Do not edit.\n"
       " *   " + n + "_generate --model DIR --input-ids 1,2,3 [--threads N] [--repeat R]\n"
       " * prints the generated ids (up to " + P + "_MAX_NEW_TOKENS) as 1,2,3 on stdout; on stderr, the median time of R runs\n"
       " * and its tokens per second (prompt and generation together, as one call). */\n";
  c += "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <time.h>\n\n#include \"" + n + ".h\"\n#include \"" +
       support_header + "\"\n\n";
  c += "#ifndef " + P + "_MAX_NEW_TOKENS\n#error \"" + n + "_generate_main.c needs " + n + ".h generated with --generate N\"\n#endif\n\n";
  c += R"(static int usage(const char* argv0) {
  fprintf(stderr, "usage: %s --model DIR --input-ids 1,2,3 [--threads N] [--repeat R]\n", argv0);
  return 2;
}

static double now(void) {
  struct timespec t;
  timespec_get(&t, TIME_UTC);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}
)";
  c += detail::main_helpers(p);
  // Generation picks its tokens inside the program, so the logits never reach this main: weights
  // that are not finite are refused before it runs (fused run refuses the logits they give).
  c += "int main(int argc, char** argv) {\n"
       "  const char *model = NULL, *input = NULL;\n"
       "  int32_t* ids = NULL;\n  int32_t out[" + P + "_MAX_NEW_TOKENS];\n  size_t T = 0;\n  int i, threads = 0, repeat = 1, count = 0, rc = 1;\n"
       "  double* times = NULL;\n  char weight[512];\n  " + n + "_model m;\n"
       "  memset(&m, 0, sizeof m);\n"
       "  if (argc % 2 == 0) return usage(argv[0]);\n"
       "  for (i = 1; i + 1 < argc; i += 2) {\n"
       "    const char* a = argv[i];\n"
       "    const char* v = argv[i + 1];\n"
       "    if (!strcmp(a, \"--model\")) model = v;\n"
       "    else if (!strcmp(a, \"--input-ids\")) input = v;\n"
       "    else if (!strcmp(a, \"--threads\")) {\n"
       "      if (parse_count(\"" + n + "\", a, v, 0, 1024, &threads)) return 2;\n"
       "    } else if (!strcmp(a, \"--repeat\")) {\n"
       "      if (parse_count(\"" + n + "\", a, v, 1, 1000000, &repeat)) return 2;\n"
       "    } else return usage(argv[0]);\n"
       "  }\n"
       "  if (!model || !input) return usage(argv[0]);\n"
       "  if (parse_ids(\"" + n + "\", \"--input-ids\", input, &ids, &T)) {\n    rc = 2;\n    goto out;\n  }\n"
       "  if (ids_in_vocabulary(\"" + n + "\", \"--input-ids\", ids, T, " + P + "_VOCAB_SIZE)) goto out;\n"
       "  if (threads > 0) " + n + "_set_threads(threads);\n"
       "  if (load_model(model, &m)) goto out;\n"
       "  if (" + n + "_first_non_finite_weight(&m, weight, sizeof weight)) {\n"
       "    fprintf(stderr, \"" + n + ": %s: cannot generate from weights that are not finite: %s\\n\", model, weight);\n    goto out;\n  }\n"
       "  if (!(times = (double*)malloc((size_t)repeat * sizeof(double)))) {\n    fprintf(stderr, \"" + n + ": out of memory\\n\");\n    goto out;\n  }\n"
       "  for (i = 0; i < repeat; ++i) {\n"
       "    const double start = now();\n"
       "    if ((count = " + n + "_generate(&m, ids, T, out)) < 0) {\n      fprintf(stderr, \"" + n + ": %s\\n\", m.error);\n      goto out;\n    }\n"
       "    times[i] = now() - start;\n"
       "  }\n"
       "  for (i = 0; i < count; ++i) printf(\"%s%ld\", i ? \",\" : \"\", (long)out[i]);\n"
       "  printf(\"\\n\");\n"
       "  qsort(times, (size_t)repeat, sizeof times[0], by_value);\n"
       "  fprintf(stderr, \"" + n + ": %zu prompt ids -> %d generated in %.6f s (median of %d): %.1f tok/s (%s)\\n\", T, count, times[repeat / 2], repeat,\n"
       "          (double)(T + (size_t)count) / times[repeat / 2], " + n + "_isa());\n"
       "  rc = 0;\n"
       "out:\n"
       "  free(times);\n  free(ids);\n  " + n + "_free(&m);\n  return rc;\n}\n";
  return c;
}

}  // namespace fused::codegen
