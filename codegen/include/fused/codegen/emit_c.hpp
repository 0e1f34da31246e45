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

#include "c_program.hpp"
#include "layout.hpp"

namespace fused::codegen {

// The kernel headers the generated .c includes (each one's own includes are copied with it).
inline const std::vector<std::string>& kernel_headers() {
  static const std::vector<std::string> h{"fk_cpu.h", "fk_convert.h", "fk_elementwise.h", "fk_linear.h", "fk_rope.h", "fk_attention.h"};
  return h;
}
inline constexpr const char* support_header = "fused_safetensors.h";

namespace detail {

inline std::string float_literal(float v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.9gf", static_cast<double>(v));  // 9 digits: the float round-trips
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s.insert(s.size() - 1, ".0");
  return s;
}

// `n * times` rows as C: the tokens of this call (`n`) when the rows follow them, else a constant.
// In decode the symbol is bound to 1 (one token), as the C++ session binds it.
inline std::string rows_times(const runtime::rows_t& r, bool decode, std::int64_t times) {
  if (r.symbol != 0 && r.symbol != decoder::sym_tokens) throw std::logic_error("codegen: rows follow a symbol other than the tokens");
  const std::int64_t k = r.n * times;
  if (r.symbol == 0 || decode) return std::to_string(k);
  return k == 1 ? "n" : "n * " + std::to_string(k);
}

// An operand as C: W(..) a weight, S16(..) the bf16 state, and in the arena F(..) f32, I32(..) i32,
// A16(..) a bf16 workspace. The C compiler checks each against the kernel's parameter type.
inline std::string operand(const c_program& p, const mode_plan& m, const runtime::operand& o) {
  const tensor_info& t = m.tensor(o.tensor);
  const std::string mac = offset_macro(p, m, o.tensor);
  if (o.where == region::weights) return "W(" + mac + ")";
  if (o.where == region::state) return "S16(" + mac + ")";
  if (t.type == dtype::f32) return "F(" + mac + ")";
  if (t.type == dtype::i32) return "I32(" + mac + ")";
  if (t.type == dtype::bf16) return "A16(" + mac + ")";
  throw std::logic_error("codegen: tensor '" + tensor_name(t) + "' has a type no kernel reads");
}

// One argument of a call as C, as runtime::invoke computes it (kernel_specs names both).
inline std::string argument(const c_program& p, const mode_plan& m, const runtime::call& c, runtime::arg a, bool dec) {
  using runtime::arg;
  const auto number = [](std::int64_t v) { return std::to_string(v); };
  switch (a) {
    case arg::input0: return operand(p, m, c.in[0]);
    case arg::input1: return operand(p, m, c.in[1]);
    case arg::input2: return operand(p, m, c.in[2]);
    case arg::bias: return c.n_in == 3 ? operand(p, m, c.in[2]) : "NULL";
    case arg::output: return operand(p, m, c.out);
    case arg::work: return c.work.tensor >= 0 ? operand(p, m, c.work) : "NULL";
    case arg::rows: return rows_times(c.rows, dec, 1);
    case arg::elements: return rows_times(c.rows, dec, c.sizes.cols);
    case arg::pos0: return c.position >= 0 ? "(size_t)" + operand(p, m, c.in[static_cast<std::size_t>(c.position)]) + "[0]" : "pos0";
    case arg::cols:
    case arg::out_cols:
    case arg::heads:
    case arg::kv_heads:
    case arg::head_dim:
    case arg::capacity:
    case arg::original_max: return number(runtime::size_value(a, c));
    case arg::eps:
    case arg::theta:
    case arg::factor:
    case arg::low_freq_factor:
    case arg::high_freq_factor: return float_literal(runtime::real_value(a, c));
  }
  throw std::logic_error("codegen: an argument of no kind");
}

// One step as C: the comment naming the op and its tensors, then the kernel call (after the copy
// an in-place kernel makes when its input and output do not share bytes, as invoke does).
inline std::string call_text(const c_program& p, const mode_plan& m, const runtime::call& c, std::size_t pos) {
  const bool dec = m.mode == std::string_view("decode");
  const step& s = m.step_by_id(c.step);
  const tensor_info& out_t = m.tensor(s.result);
  std::string comment = "  /* " + tensor_name(out_t) + " = " + s.op->name + "(";
  for (int k = 0; k < s.n_inputs; ++k) comment += (k ? ", " : "") + tensor_name(m.tensor(s.inputs[static_cast<std::size_t>(k)]));
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
  code += std::string(spec.name) + "(";
  for (std::size_t i = 0; i < spec.arity; ++i) code += (i ? ", " : "") + argument(p, m, c, spec.args[i], dec);
  code += ");";
  return comment + "  " + code + "\n  CANARY_CHECK(" + (dec ? "1" : "0") + ", " + std::to_string(pos) + ");\n";
}

// Layer of a step, from its result's name index (-1 outside the layers), for section comments.
inline int layer_of(const mode_plan& m, const step& s) {
  const tensor_info& t = m.tensor(s.result);
  return std::string_view(t.name.pattern).find("layers.{}") != std::string_view::npos ? t.name.index : -1;
}

inline std::string mode_function(const c_program& p, const mode_plan& m) {
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

}  // namespace detail

// ---- <name>.h ---------------------------------------------------------------------------------------
inline std::string emit_header(const c_program& p, std::string_view generator) {
  const std::string P = upper_ident(p.name), n = p.name;
  const mode_plan& pf = p.prefill;
  const mode_plan& dc = p.decode;
  std::string h;
  h += "/* " + n + ".h: a Qwen2 model as plain C11, generated by " + std::string(generator) + ". Do not edit.\n"
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
       (p.all_rows() ? "every position" : "the last position only") + " */\n\n";
  h += "/* The layout */\n";
  h += "#define " + P + "_MEM_ALIGN 64\n";
  h += "#define " + P + "_FINGERPRINT " + hex64(layout_fingerprint(p)) + "ULL /* graph, dtypes, offsets */\n";
  h += "#define " + P + "_WEIGHTS_FINGERPRINT " + hex64(weights_fingerprint(p)) + "ULL /* the weights region alone */\n";
  h += "#define " + P + "_WEIGHT_COUNT " + std::to_string(runtime::weight_count(pf.tensors)) + "\n";
  h += "#define " + P + "_WEIGHTS_BYTES " + std::to_string(p.weights_bytes()) + "\n";

  const debug_region dstate = with_canaries(pf, region::state);
  const debug_region dpf = with_canaries(pf, region::activations), ddc = with_canaries(dc, region::activations);
  auto sizes = [&](std::int64_t state, std::int64_t a_pf, std::int64_t a_dc) {
    std::string s;
    s += "#define " + P + "_STATE_BYTES " + std::to_string(state) + "\n";
    s += "#define " + P + "_PREFILL_ARENA_BYTES " + std::to_string(a_pf) + "\n";
    s += "#define " + P + "_DECODE_ARENA_BYTES " + std::to_string(a_dc) + "\n";
    s += "#define " + P + "_ARENA_BYTES " + std::to_string(std::max(a_pf, a_dc)) + " /* one arena serves both modes */\n";
    return s;
  };
  h += "#ifndef FUSED_DEBUG_CANARIES\n" + sizes(p.state_bytes(), pf.bytes(region::activations), dc.bytes(region::activations));
  h += "#else\n#define " + P + "_CANARY_BYTES " + std::to_string(canary_bytes) + "\n" + sizes(dstate.bytes, dpf.bytes, ddc.bytes) + "#endif\n\n";

  h += "/* Weights region: byte offset of each tensor (bf16, Hugging Face name and shape) */\n";
  for (const auto& t : pf.tensors)
    if (t.kind == role::weight)
      h += "#define " + offset_macro(p, pf, t.id) + " " + std::to_string(pf.of(t.id).offset) + " /* " + tensor_name(t) + " " +
           bound_shape(t, pf.bind) + " */\n";

  auto offsets = [&](bool debug) {
    std::string s;
    s += "/* State region (the KV cache; a *_NEXT tensor is its update, in place) */\n";
    for (const auto& t : pf.tensors)
      if (pf.of(t.id).where == region::state)
        s += "#define " + offset_macro(p, pf, t.id) + " " +
             std::to_string(debug ? dstate.offset[static_cast<std::size_t>(t.id)] : pf.of(t.id).offset) + " /* " + name_of(t.type) + " " +
             bound_shape(t, pf.bind) + ", " + std::to_string(pf.of(t.id).bytes) + " bytes */\n";
    for (const mode_plan* m : {&pf, &dc}) {
      const debug_region& dr = m == &pf ? dpf : ddc;
      s += "/* " + std::string(m == &pf ? "Prefill" : "Decode") + " arena: each tensor's offset (tensors never live at once may share bytes) */\n";
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
  h += "void " + n + "_free(" + n + "_model* m);\n\n";
  h += "/* Runs ids[0..n) at m->pos, in chunks of at most " + P + "_MAX_SEQ, and returns the logits of the last\n"
       " * chunk: [m->logits_rows, " + P + "_VOCAB_SIZE] floats in the arena, valid until the next call. NULL on error. */\n";
  h += "const float* " + n + "_prefill(" + n + "_model* m, const int32_t* ids, size_t n);\n";
  h += "/* One token at m->pos; returns its logits [" + P + "_VOCAB_SIZE]. NULL on error. */\n";
  h += "const float* " + n + "_decode(" + n + "_model* m, int32_t id);\n";
  h += "/* Forgets the context: the next prefill starts at position 0. */\n";
  h += "void " + n + "_reset(" + n + "_model* m);\n";
  h += "/* Threads the kernels use (n <= 0: the default, env FUSED_THREADS or OpenMP's); results do not depend on it. */\n";
  h += "void " + n + "_set_threads(int n);\n";
  h += "/* The instruction set the kernels run (\"avx512bf16\", \"avx2\", ...), and this build's " + P + "_FINGERPRINT. */\n";
  h += "const char* " + n + "_isa(void);\nuint64_t " + n + "_fingerprint(void);\n\n";
  h += "#ifdef FUSED_DEBUG_CANARIES\n"
       "/* Test hook, debug builds only: called after each step's kernel, before the canaries are checked, with\n"
       " * the step's output buffer (schedule position `pos`, mode 0 prefill / 1 decode). */\n"
       "extern void (*" + n + "_debug_after_step)(int mode, int pos, void* out, size_t out_bytes);\n#endif\n\n";
  h += "#ifdef __cplusplus\n}\n#endif\n\n#endif /* " + P + "_H */\n";
  return h;
}

// ---- <name>.c ---------------------------------------------------------------------------------------
inline std::string emit_source(const c_program& p, std::string_view generator) {
  const std::string P = upper_ident(p.name), n = p.name;
  const mode_plan& pf = p.prefill;
  const mode_plan& dc = p.decode;
  std::string c;
  c += "/* " + n + ".c: Qwen2 prefill and decode as straight-line kernel calls, generated by " + std::string(generator) + ". Do not edit.\n"
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
  c += "#if defined(__GNUC__) && !defined(__clang__)\n#pragma GCC diagnostic pop\n#endif\n";
  c += "#include \"" + std::string(support_header) + "\"\n\n";
  c += "/* Operands: W = bf16 weights, S16 = bf16 state (KV cache), F = f32 and I32 = i32 activations. */\n"
       "#define W(off) ((const uint16_t*)(const void*)(m->weights + (off)))\n"
       "#define S16(off) ((uint16_t*)(void*)(m->state + (off)))\n"
       "#define F(off) ((float*)(void*)(m->arena + (off)))\n"
       "#define I32(off) ((const int32_t*)(const void*)(m->arena + (off)))\n"
       "#define A16(off) ((uint16_t*)(void*)(m->arena + (off)))\n\n";

  // Weights table.
  c += "/* The weights region, by Hugging Face name: offset, shape, tensor id in the plan. */\n";
  c += "static const fst_weight " + n + "__weights[" + P + "_WEIGHT_COUNT] = {\n";
  for (const auto& t : pf.tensors)
    if (t.kind == role::weight) {
      c += "    {\"" + tensor_name(t) + "\", " + offset_macro(p, pf, t.id) + ", " + std::to_string(t.shp.rank) + ", {";
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
      c += "    {\"" + tensor_name(t) + "\", " + offset_macro(p, pf, t.id) + ", " + std::to_string(pf.of(t.id).bytes) + ", 0, 0},\n";
  c += "};\n";
  for (const mode_plan* m : {&pf, &dc}) {
    c += "static const " + n + "__buffer " + n + "__" + m->mode + "_buffers[] = {\n";
    for (const auto& t : m->tensors) {
      const buffer& b = m->of(t.id);
      if (b.where == region::activations)
        c += "    {\"" + tensor_name(t) + "\", " + offset_macro(p, *m, t.id) + ", " + std::to_string(b.bytes) + ", " + std::to_string(b.first) + ", " +
             std::to_string(b.last) + "},\n";
    }
    c += "};\n";
    c += "static const " + n + "__step " + n + "__" + m->mode + "_steps[] = {\n";
    for (std::size_t i = 0; i < m->steps.size(); ++i) {
      const step& s = m->steps[i];
      const buffer& b = m->of(s.result);
      c += "    {" + std::to_string(s.id) + ", \"" + tensor_name(m->tensor(s.result)) + "\", \"" + s.op->name + "\", \"" +
           std::string(m->kernels[i] ? m->kernels[i] : "") + "\", " + (b.where == region::state ? "1" : "0") + ", " + offset_macro(p, *m, s.result) +
           ", " + std::to_string(b.bytes) + "},\n";
    }
    c += "};\n";
  }
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
       "  const " + n + "__buffer* b = mode ? " + n + "__decode_buffers : " + n + "__prefill_buffers;\n"
       "  const size_t count = mode ? sizeof " + n + "__decode_buffers / sizeof b[0] : sizeof " + n + "__prefill_buffers / sizeof b[0];\n"
       "  size_t k;\n"
       "  for (k = 0; k < count; ++k)\n"
       "    if (b[k].first == pos) " + n + "__arm(m->arena, &b[k]);\n}\n";
  c += "/* After the step at schedule position `pos`: every live buffer's canary must be intact. */\n"
       "static int " + n + "__after_step(" + n + "_model* m, int mode, int pos) {\n"
       "  const " + n + "__buffer* b = mode ? " + n + "__decode_buffers : " + n + "__prefill_buffers;\n"
       "  const size_t count = mode ? sizeof " + n + "__decode_buffers / sizeof b[0] : sizeof " + n + "__prefill_buffers / sizeof b[0];\n"
       "  const " + n + "__step* s = mode ? &" + n + "__decode_steps[pos] : &" + n + "__prefill_steps[pos];\n"
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
       "             mode ? \"decode\" : \"prefill\", s->id, s->result, s->op, s->kernel, bad->name, in_state ? \"state\" : \"arena\", bad->offset, bad->bytes);\n"
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
  return c;
}

// ---- <name>_main.c: the scorer ------------------------------------------------------------------------
// Needs logits of every prefill position (graph_options::logits == all).
inline std::string emit_scorer(const c_program& p, std::string_view generator) {
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
  c += R"(static int usage(const char* argv0) {
  fprintf(stderr, "usage: %s --model DIR --input-ids 1,2,3 [--continue-ids 4,5] --out FILE.safetensors [--threads N]\n", argv0);
  return 2;
}

/* "1,2,3", "1 2 3" and "[1, 2, 3]" are all accepted. */
static int parse_ids(const char* s, int32_t** ids, size_t* n) {
  size_t cap = 16;
  *n = 0;
  if (!(*ids = (int32_t*)malloc(cap * sizeof(int32_t)))) return -1;
  while (*s) {
    char* end;
    long v;
    if (strchr(",[] \t\n", *s)) { ++s; continue; }
    v = strtol(s, &end, 10);
    if (end == s || v < 0 || v > 2147483647L || (*end && !strchr(",[] \t\n", *end))) return -1;
    if (*n == cap) {
      int32_t* bigger = (int32_t*)realloc(*ids, (cap *= 2) * sizeof(int32_t));
      if (!bigger) return -1;
      *ids = bigger;
    }
    (*ids)[(*n)++] = (int32_t)v;
    s = end;
  }
  return 0;
}

)";
  c += "/* The directory's config.json, when there is one, must describe the model this scorer was generated for. */\n"
       "static int check_config(const char* dir, char* err, size_t errn) {\n"
       "  char path[1024];\n  size_t len = 0;\n  char* text;\n  fst_json j;\n  int rc = 0;\n"
       "  const struct { const char* key; double want; double fallback; } fields[] = {\n"
       "      {\"vocab_size\", " + P + "_VOCAB_SIZE, -1}, {\"hidden_size\", " + P + "_HIDDEN_SIZE, -1},\n"
       "      {\"intermediate_size\", " + P + "_INTERMEDIATE_SIZE, -1}, {\"num_hidden_layers\", " + P + "_NUM_HIDDEN_LAYERS, -1},\n"
       "      {\"num_attention_heads\", " + P + "_NUM_ATTENTION_HEADS, -1}, {\"num_key_value_heads\", " + P + "_NUM_KEY_VALUE_HEADS, " + P +
       "_NUM_ATTENTION_HEADS},\n"
       "      {\"rms_norm_eps\", " + P + "_RMS_NORM_EPS, -1}, {\"tie_word_embeddings\", " + P + "_TIE_WORD_EMBEDDINGS, 0}};\n"
       "  size_t k;\n"
       "  snprintf(path, sizeof path, \"%s/config.json\", dir);\n"
       "  if (!(text = fst_read_text(path, &len))) return 0; /* a .safetensors file, or a directory without one */\n"
       "  if (fst_json_parse(text, len, path, &j, err, errn)) {\n    free(text);\n    return -1;\n  }\n  free(text);\n"
       "  for (k = 0; k < sizeof fields / sizeof fields[0] && !rc; ++k) {\n"
       "    const fst_json* v = fst_json_get(&j, fields[k].key);\n"
       "    const double got = v && (v->type == FST_NUMBER || v->type == FST_BOOL) ? v->num : fields[k].fallback;\n"
       "    if (got != fields[k].want) {\n"
       "      fst__fail(err, errn, \"%s: field \\\"%s\\\": this model was generated for %.9g, the file says %.9g\", path, fields[k].key, fields[k].want, got);\n"
       "      rc = -1;\n    }\n  }\n"
       "  fst_json_free(&j);\n  return rc;\n}\n\n";
  c += "int main(int argc, char** argv) {\n"
       "  const char *model = NULL, *input = NULL, *cont = NULL, *out = NULL;\n"
       "  int32_t *ids = NULL, *next = NULL;\n  size_t T = 0, N = 0, at, k;\n  int i, threads = 0;\n"
       "  char err[1024];\n  fst_file_list files;\n  " + n + "_model m;\n  float *prefill, *decode = NULL;\n  const float* logits;\n"
       "  const size_t V = " + P + "_VOCAB_SIZE;\n"
       "  if (argc % 2 == 0) return usage(argv[0]);\n"
       "  for (i = 1; i + 1 < argc; i += 2) {\n"
       "    const char* a = argv[i];\n"
       "    const char* v = argv[i + 1];\n"
       "    if (!strcmp(a, \"--model\")) model = v;\n"
       "    else if (!strcmp(a, \"--input-ids\")) input = v;\n"
       "    else if (!strcmp(a, \"--continue-ids\")) cont = v;\n"
       "    else if (!strcmp(a, \"--out\")) out = v;\n"
       "    else if (!strcmp(a, \"--threads\")) threads = atoi(v);\n"
       "    else return usage(argv[0]);\n"
       "  }\n"
       "  if (!model || !input || !out) return usage(argv[0]);\n"
       "  if (parse_ids(input, &ids, &T) || T == 0 || (cont && parse_ids(cont, &next, &N))) {\n"
       "    fprintf(stderr, \"" + n + ": --input-ids and --continue-ids take lists of token ids like 1,2,3 (at least one input id)\\n\");\n"
       "    return 2;\n  }\n"
       "  if (T + (N > 1 ? N - 1 : 0) > " + P + "_MAX_CTX) {\n"
       "    fprintf(stderr, \"" + n + ": %zu input and %zu continue ids need %zu positions; this model was generated for %d (--max-ctx)\\n\", T, N,\n"
       "            T + (N > 1 ? N - 1 : 0), " + P + "_MAX_CTX);\n    return 1;\n  }\n"
       "  if (threads > 0) " + n + "_set_threads(threads);\n"
       "  if (check_config(model, err, sizeof err) || fst_model_files(model, &files, err, sizeof err)) {\n"
       "    fprintf(stderr, \"" + n + ": %s\\n\", err);\n    return 1;\n  }\n"
       "  if (" + n + "_init_safetensors(&m, (const char* const*)files.files, files.count, NULL, NULL)) {\n"
       "    fprintf(stderr, \"" + n + ": %s\\n\", m.error);\n    return 1;\n  }\n"
       "  fst_file_list_free(&files);\n"
       "  prefill = (float*)malloc(T * V * sizeof(float));\n"
       "  if (N) decode = (float*)malloc(N * V * sizeof(float));\n"
       "  if (!prefill || (N && !decode)) {\n    fprintf(stderr, \"" + n + ": out of memory\\n\");\n    return 1;\n  }\n"
       "  /* The prompt in chunks of at most " + P + "_MAX_SEQ, as the model's own prefill runs it, keeping every row. */\n"
       "  for (at = 0; at < T; at += k) {\n"
       "    k = T - at < " + P + "_MAX_SEQ ? T - at : " + P + "_MAX_SEQ;\n"
       "    if (!(logits = " + n + "_prefill(&m, ids + at, k))) {\n      fprintf(stderr, \"" + n + ": %s\\n\", m.error);\n      return 1;\n    }\n"
       "    memcpy(prefill + at * V, logits, k * V * sizeof(float));\n  }\n"
       "  if (N) memcpy(decode, prefill + (T - 1) * V, V * sizeof(float));\n"
       "  for (k = 0; k + 1 < N; ++k) {\n"
       "    if (!(logits = " + n + "_decode(&m, next[k]))) {\n      fprintf(stderr, \"" + n + ": %s\\n\", m.error);\n      return 1;\n    }\n"
       "    memcpy(decode + (k + 1) * V, logits, V * sizeof(float));\n  }\n"
       "  {\n"
       "    fst_out t[2];\n"
       "    memset(t, 0, sizeof t);\n"
       "    t[0].name = \"prefill_logits\";\n    t[0].dtype = \"F32\";\n    t[0].rank = 2;\n"
       "    t[0].shape[0] = (int64_t)T;\n    t[0].shape[1] = (int64_t)V;\n    t[0].data = prefill;\n    t[0].bytes = T * V * sizeof(float);\n"
       "    t[1] = t[0];\n    t[1].name = \"decode_logits\";\n    t[1].shape[0] = (int64_t)N;\n    t[1].data = decode;\n    t[1].bytes = N * V * sizeof(float);\n"
       "    if (fst_write(out, t, N ? 2 : 1, err, sizeof err)) {\n      fprintf(stderr, \"" + n + ": %s\\n\", err);\n      return 1;\n    }\n"
       "  }\n"
       "  fprintf(stderr, \"" + n + ": %zu prompt + %zu continue ids -> %s (%s)\\n\", T, N, out, " + n + "_isa());\n"
       "  free(prefill);\n  free(decode);\n  free(ids);\n  free(next);\n  " + n + "_free(&m);\n  return 0;\n}\n";
  return c;
}

}  // namespace fused::codegen
