// The C emitter for any planned program whose steps all have C kernels (a graph file's, control
// flow included), beside the decoders' (emit_c.hpp). It prints the same calls the C++ executors run
// (one lowering, runtime/calls.hpp), with the same control-flow walk (emit_c.hpp's program_code):
//   <name>.h       region sizes, a macro per tensor offset, the inputs' and outputs' tables, the API:
//                  int <name>_run(<name>_program* m)   0, or -1 with m->error naming the step
//   <name>.c       the run function: kernel calls and if / for over constant offsets
//   <name>_main.c  `<name>_main INPUTS.safetensors OUT.safetensors [WEIGHTS.safetensors ...]`: the
//                  `fused graph run` interface (inputs by name, dtype and shape checked; outputs by name)
// Every symbol is bound when the program is planned: the C has no dynamic size.
#pragma once
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fused/plan/planner.hpp>
#include <fused/plan/verifier.hpp>

#include "emit_c.hpp"
#include "write.hpp"

namespace fused::codegen {

namespace detail {

// The file dtype name of a tensor type (safetensors' names), or refuses the type.
inline const char* file_dtype(const tensor_info& t) {
  switch (t.type) {
    case dtype::f32: return "F32";
    case dtype::i32: return "I32";
    case dtype::boolean: return "BOOL";
    case dtype::bf16: return "BF16";
    default: throw std::invalid_argument("codegen: tensor '" + tensor_name(t) + "' is " + name_of(t.type) + ", which the generated C does not read or write");
  }
}

// The table of some of a program's tensors, each by a name: file dtype, rank, bound dims, offset, bytes.
using named_tensors = std::vector<std::pair<std::string, tensor_id>>;
FUSED_UNOPTIMIZED inline std::string tensor_table(const c_program& p, const mode_plan& m, const named_tensors& tensors, const std::string& table) {
  std::string c = "const " + p.name + "_tensor " + table + "[] = {\n";
  for (const auto& [name, id] : tensors) {
    const tensor_info& t = m.tensor(id);
    c += "    {" + c_string(name) + ", \"" + file_dtype(t) + "\", " + std::to_string(t.shp.rank) + ", {";
    for (int i = 0; i < 4; ++i) c += (i ? ", " : "") + std::to_string(i < t.shp.rank ? m.bind(t.shp[i]) : 0);
    c += "}, " + bytes_macro(p, m, t.id) + ", " + std::to_string(bytes_of(t, m.bind)) + "},\n";
  }
  if (tensors.empty()) c += "    {\"\", \"\", 0, {0, 0, 0, 0}, 0, 0},\n";  // C has no empty arrays
  c += "};\nconst size_t " + table + "_count = " + std::to_string(tensors.size()) + ";\n";
  return c;
}

// The feeds of one role, by their tensor names.
inline named_tensors feeds_of(const mode_plan& m, role kind) {
  named_tensors out;
  for (const auto& t : m.tensors)
    if (t.is_feed && t.kind == kind) out.emplace_back(tensor_name(t), t.id);
  return out;
}
inline named_tensors outputs_of(const c_program& p) {
  named_tensors out;
  for (const auto& o : p.outputs) out.emplace_back(o.name, o.id);
  return out;
}

}  // namespace detail

// The planned program as a c_program of one mode, "run" (its macros are <NAME>_RUN_<TENSOR>).
// Refuses a program with a step no C kernel implements, naming it.
// node_of_step (a graph file's, ir::lowered::node_of_step): the node of each step, so that the C's
// run-time messages name nodes as `fused graph run` does; empty: they name steps.
inline c_program program_for_c(std::string name, const program& prog, const memory_plan& mem, std::vector<std::int64_t> node_of_step = {}) {
  if (const verdict v = verify(prog, mem); !v.ok) throw graph_error("codegen: the plan failed verification: " + to_string(v.what));
  runtime::lowering_error e{};
  const std::vector<runtime::call> calls = runtime::lower_calls(prog.tensors, prog.steps, mem.buffers, mem.kernels, mem.bind, prog.training, 0, &e);
  if (calls.size() != prog.steps.size()) throw graph_error("codegen: step " + std::to_string(e.step) + ": " + std::string(e.what));
  for (std::size_t i = 0; i < calls.size(); ++i)
    if (calls[i].k == runtime::kernel::host)
      throw std::invalid_argument("codegen: step " + std::to_string(prog.steps[i].id) + " '" + prog.steps[i].op->name + "' (result '" +
                                  to_string(prog.tensor(prog.steps[i].result).name) +
                                  "') has no C kernel here: its host function runs in the C++ executors only");
  for (const auto& t : prog.tensors)
    if (t.kind == role::input && mem.buffers[static_cast<std::size_t>(t.id)].where != region::activations)
      throw std::invalid_argument("codegen: input '" + to_string(t.name) + "' is not in the arena; the generated C writes inputs there");
  for (const auto& o : prog.outputs)
    if (mem.buffers[static_cast<std::size_t>(o.id)].where != region::activations)
      throw std::invalid_argument("codegen: output '" + std::string(o.name) + "' is not in the arena; the generated C reads outputs there");
  for (const auto& t : prog.tensors)
    if (t.kind == role::weight && t.shp.rank > 2)
      throw std::invalid_argument("codegen: parameter '" + to_string(t.name) + "' has rank " + std::to_string(t.shp.rank) +
                                  "; the generated C binds parameters of rank 1 or 2");
  detail::check_c_identifier(name);
  c_program p;
  p.name = std::move(name);
  p.model_type = "graph";
  p.prefill = detail::copy_mode("run", mem.bind, prog.tensors, prog.steps, mem.buffers, mem.kernels, mem.region_bytes, mem.lower_bound,
                                mem.chosen, calls);
  p.prefill.regions = prog.regions;
  p.prefill.carries = prog.carries;
  detail::check_calls(p.prefill);
  for (const auto& o : prog.outputs) p.outputs.push_back(o);
  p.node_of_step = std::move(node_of_step);
  return p;
}

FUSED_UNOPTIMIZED inline std::string emit_program_header(const c_program& p, std::string_view by) {
  const std::string P = upper_ident(p.name), n = p.name;
  const mode_plan& m = p.prefill;
  std::string h = "/* " + n + ".h: a planned program as C, generated by " + std::string(by) + ". Do not edit.\n"
                  " * Three caller-owned regions, each " + P + "_MEM_ALIGN-byte aligned: weights (bf16 parameters at the offsets below),\n"
                  " * state and the arena. Write each input at its offset in the arena, call " + n + "_run, read each output at its. */\n";
  h += "#ifndef " + P + "_H\n#define " + P + "_H\n\n#include <stddef.h>\n#include <stdint.h>\n\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  h += "#define " + P + "_MEM_ALIGN " + std::to_string(mem_align) + "\n";
  h += "#define " + P + "_WEIGHTS_BYTES " + std::to_string(m.bytes(region::weights)) + "\n";
  h += "#define " + P + "_STATE_BYTES " + std::to_string(m.bytes(region::state)) + "\n";
  // The arena: the plan's, then the staging area of loops whose carries swap (emit_c.hpp's staging_bytes).
  h += "#define " + P + "_ARENA_BYTES " + std::to_string(m.bytes(region::activations) + detail::staging_bytes(m)) + "\n";
  h += "#define " + P + "_STAGING_OFFSET " + std::to_string(m.bytes(region::activations)) + " /* " + std::to_string(detail::staging_bytes(m)) +
       " bytes */\n\n";
  h += "/* Each tensor's offset in its region. */\n";
  for (const auto& t : m.tensors) h += "#define " + offset_macro(p, m, t.id) + " " + std::to_string(m.of(t.id).offset) + "\n";
  h += "\n/* An input, output or parameter: its name, dtype (as safetensors names it), dims and bytes in its region. */\n"
       "typedef struct {\n  const char* name;\n  const char* dtype;\n  int rank;\n  int64_t shape[4];\n  size_t offset, bytes;\n} " + n + "_tensor;\n";
  h += "extern const " + n + "_tensor " + n + "_inputs[];\nextern const size_t " + n + "_inputs_count;\n";
  h += "extern const " + n + "_tensor " + n + "_outputs[];\nextern const size_t " + n + "_outputs_count;\n";
  h += "extern const " + n + "_tensor " + n + "_parameters[];\nextern const size_t " + n + "_parameters_count;\n";
  h += "/* What one call carries to the next, in the state region (zero before the first call). */\n";
  h += "extern const " + n + "_tensor " + n + "_state[];\nextern const size_t " + n + "_state_count;\n\n";
  h += "typedef struct {\n  const uint8_t* weights;\n  uint8_t* state;\n  uint8_t* arena;\n  char error[256];\n} " + n + "_program;\n\n";
  h += "/* Runs the program once: 0, or -1 with m->error naming the step whose kernel refused its input. */\n"
       "int " + n + "_run(" + n + "_program* m);\n";
  h += "/* Threads the kernels use (n <= 0: all cores). The kernels' state is this file's: set it here, not\n"
       " * with fk_set_threads from another translation unit. */\n"
       "void " + n + "_set_threads(int n);\n\n";
  h += "#ifdef __cplusplus\n}\n#endif\n\n#endif /* " + P + "_H */\n";
  return h;
}

FUSED_UNOPTIMIZED inline std::string emit_program_source(const c_program& p, std::string_view by) {
  const std::string n = p.name;
  const mode_plan& m = p.prefill;
  std::string c = "/* " + n + ".c: a planned program's kernel calls and control flow, generated by " + std::string(by) +
                  ". Do not edit.\n * Every operand is a constant offset in a region (see " + n + ".h). */\n";
  c += "#include \"" + n + ".h\"\n\n#include <stdint.h>\n#include <stdio.h>\n#include <string.h>\n\n";
  c += "#if defined(__GNUC__) && !defined(__clang__)\n#pragma GCC optimize(\"fp-contract=fast\") /* as the C++ executors round */\n#endif\n";
  c += "#include \"fk_kernels.h\"\n\n";
  c += "/* Operands: W = bf16 parameters; S16, SF, SI32 = bf16, f32, i32 state; F = f32, I32 = i32 and U8 = bool activations. */\n"
       "#define W(off) ((const uint16_t*)(const void*)(m->weights + (off)))\n"
       "#define S16(off) ((uint16_t*)(void*)(m->state + (off)))\n"
       "#define SF(off) ((float*)(void*)(m->state + (off)))\n"
       "#define SI32(off) ((int32_t*)(void*)(m->state + (off)))\n"
       "#define F(off) ((float*)(void*)(m->arena + (off)))\n"
       "#define I32(off) ((int32_t*)(void*)(m->arena + (off)))\n"
       "#define U8(off) ((uint8_t*)(void*)(m->arena + (off)))\n"
       "#define A16(off) ((uint16_t*)(void*)(m->arena + (off)))\n"
       "#define CANARY_CHECK(mode, pos) /* graph programs have no debug layout */\n\n";
  c += detail::tensor_table(p, m, detail::feeds_of(m, role::input), n + "_inputs");
  c += detail::tensor_table(p, m, detail::outputs_of(p), n + "_outputs");  // by their Output names
  c += detail::tensor_table(p, m, detail::feeds_of(m, role::weight), n + "_parameters");
  c += detail::tensor_table(p, m, detail::feeds_of(m, role::state), n + "_state") + "\n";
  c += "static int " + n + "__fail(" + n + "_program* m, const char* what) {\n"
       "  snprintf(m->error, sizeof m->error, \"%s\", what);\n  return -1;\n}\n\n";
  c += "void " + n + "_set_threads(int n) { fk_set_threads(n); }\n\n";
  c += "int " + n + "_run(" + n + "_program* m) {\n  const size_t pos0 = 0; /* a positional kernel's first row */\n";
  c += detail::program_code(p, m, false, true);
  c += "  (void)pos0;\n  (void)" + n + "__fail; /* called only where a kernel may refuse */\n  return 0;\n}\n";
  return c;
}

FUSED_UNOPTIMIZED inline std::string emit_program_main(const c_program& p, std::string_view by) {
  const std::string n = p.name;
  std::string c = "/* " + n + "_main.c: runs " + n + " as `fused graph run` does, generated by " + std::string(by) +
                  ". Do not edit.\n *   " + n + "_main INPUTS.safetensors OUT.safetensors [PARAMETERS.safetensors ...]\n"
                  " * Every input by name, with its dtype and shape; every output written by name. Exit 0, or 1 with the reason. */\n";
  c += "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n\n#include \"" + n + ".h\"\n#include \"" + support_header + "\"\n\n";
  c += "/* A zeroed region of at least `bytes`, 64-byte aligned (aligned_alloc takes a multiple of the alignment). */\n"
       "static void* aligned_region(size_t bytes) {\n  const size_t size = (bytes / 64 + 1) * 64;\n  void* p = aligned_alloc(64, size);\n"
       "  if (p) memset(p, 0, size);\n  return p;\n}\n\n";
  c += "/* Reads each tensor of `table` from file `f` into `region`: present (unless `optional`: state starts\n"
       " * at zero), of its dtype and shape. */\n"
       "static int read_tensors(fst_file* f, const " + n + "_tensor* table, size_t count, int optional, unsigned char* region, const char* what, char* err,\n"
       "                        size_t errn) {\n"
       "  size_t k, i;\n  int d;\n"
       "  for (k = 0; k < count; ++k) {\n"
       "    const fst_tensor* t = NULL;\n"
       "    for (i = 0; i < f->count; ++i)\n      if (!strcmp(f->tensors[i].name, table[k].name)) t = &f->tensors[i];\n"
       "    if (!t && optional) continue;\n"
       "    if (!t) {\n      fst__fail(err, errn, \"%s: no tensor \\\"%s\\\" (the %s of that name)\", f->path, table[k].name, what);\n      return -1;\n    }\n"
       "    if (strcmp(t->dtype_name, table[k].dtype) || t->rank != table[k].rank) {\n"
       "      fst__fail(err, errn, \"%s: tensor \\\"%s\\\" is %s of rank %d; the %s is %s of rank %d\", f->path, t->name, t->dtype_name, t->rank, what, table[k].dtype, table[k].rank);\n"
       "      return -1;\n    }\n"
       "    for (d = 0; d < t->rank; ++d)\n      if (t->shape[d] != table[k].shape[d]) {\n"
       "        fst__fail(err, errn, \"%s: tensor \\\"%s\\\" has dim %d = %lld; the %s's is %lld\", f->path, t->name, d, (long long)t->shape[d], what, (long long)table[k].shape[d]);\n"
       "        return -1;\n      }\n"
       "    if (fst_read(f, t, region + table[k].offset, err, errn)) return -1;\n"
       "  }\n  return 0;\n}\n\n";
  c += "/* The parameters from the files after OUT, as `fused graph run --weights` binds them: together the files\n"
       " * hold each parameter once and nothing else (a misspelt name would leave one at zero); a BF16 parameter\n"
       " * is read from BF16, or rounded to it from F32 or F16 (nearest even) as fused's loader does. */\n"
       "static int read_parameters(char** files, int n_files, unsigned char* region, char* err, size_t errn) {\n"
       "  unsigned char* bound = (unsigned char*)calloc(" + n + "_parameters_count + 1, 1);\n"
       "  fst_file f;\n  size_t i, k, e;\n  int a, d, rc = -1;\n"
       "  if (!bound) {\n    fst__fail(err, errn, \"out of memory\");\n    return -1;\n  }\n"
       "  for (a = 0; a < n_files; ++a) {\n"
       "    if (fst_open(&f, files[a], err, errn)) goto out;\n"
       "    for (i = 0; i < f.count; ++i) {\n"
       "      const fst_tensor* t = &f.tensors[i];\n"
       "      const " + n + "_tensor* p = NULL;\n"
       "      for (k = 0; k < " + n + "_parameters_count && !p; ++k)\n        if (!strcmp(t->name, " + n + "_parameters[k].name)) p = &" + n + "_parameters[k];\n"
       "      if (!p) {\n        fst__fail(err, errn, \"%s: tensor \\\"%s\\\" is not a parameter of the program\", f.path, t->name);\n        fst_close(&f);\n        goto out;\n      }\n"
       "      k = (size_t)(p - " + n + "_parameters);\n"
       "      if (bound[k]) {\n        fst__fail(err, errn, \"%s: tensor \\\"%s\\\" is in more than one parameter file\", f.path, t->name);\n        fst_close(&f);\n        goto out;\n      }\n"
       "      bound[k] = 1;\n"
       "      if (t->rank != p->rank) {\n        fst__fail(err, errn, \"%s: tensor \\\"%s\\\" has rank %d; the parameter's is %d\", f.path, t->name, t->rank, p->rank);\n        fst_close(&f);\n        goto out;\n      }\n"
       "      for (d = 0; d < t->rank; ++d)\n        if (t->shape[d] != p->shape[d]) {\n"
       "          fst__fail(err, errn, \"%s: tensor \\\"%s\\\" has dim %d = %lld; the parameter's is %lld\", f.path, t->name, d, (long long)t->shape[d], (long long)p->shape[d]);\n"
       "          fst_close(&f);\n          goto out;\n        }\n"
       "      if (!strcmp(t->dtype_name, p->dtype)) {\n"
       "        if (fst_read(&f, t, region + p->offset, err, errn)) {\n          fst_close(&f);\n          goto out;\n        }\n"
       "      } else if (!strcmp(p->dtype, \"BF16\") && (t->dtype == FST_F32 || t->dtype == FST_F16)) {\n"
       "        const size_t bytes = (size_t)(t->end - t->begin), width = t->dtype == FST_F32 ? 4 : 2;\n"
       "        unsigned char* wide = (unsigned char*)malloc(bytes ? bytes : 1);\n"
       "        if (!wide || fst_read(&f, t, wide, err, errn)) {\n          if (!wide) fst__fail(err, errn, \"out of memory\");\n          free(wide);\n          fst_close(&f);\n          goto out;\n        }\n"
       "        for (e = 0; e < bytes / width; ++e) {\n"
       "          float x;\n          uint16_t h;\n"
       "          if (width == 4) memcpy(&x, wide + 4 * e, 4);\n"
       "          else {\n            memcpy(&h, wide + 2 * e, 2);\n            x = fst__f16_to_f32(h);\n          }\n"
       "          h = fst__f32_to_bf16(x);\n          memcpy(region + p->offset + 2 * e, &h, 2);\n        }\n"
       "        free(wide);\n"
       "      } else {\n        fst__fail(err, errn, \"%s: tensor \\\"%s\\\" is %s; the parameter is %s\", f.path, t->name, t->dtype_name, p->dtype);\n        fst_close(&f);\n        goto out;\n      }\n"
       "    }\n    fst_close(&f);\n  }\n"
       "  for (k = 0; k < " + n + "_parameters_count; ++k)\n"
       "    if (!bound[k]) {\n      fst__fail(err, errn, \"%s: no tensor \\\"%s\\\" (the parameter of that name)\", n_files > 1 ? \"the parameter files\" : files[0], " + n + "_parameters[k].name);\n      goto out;\n    }\n"
       "  rc = 0;\nout:\n  free(bound);\n  return rc;\n}\n\n";
  c += "/* Every tensor of the inputs file is an input or a state input: a misspelt one would be ignored. */\n"
       "static int known_inputs(const fst_file* f, char* err, size_t errn) {\n"
       "  size_t i, k;\n"
       "  for (i = 0; i < f->count; ++i) {\n"
       "    int known = 0;\n"
       "    for (k = 0; k < " + n + "_inputs_count; ++k) known |= !strcmp(f->tensors[i].name, " + n + "_inputs[k].name);\n"
       "    for (k = 0; k < " + n + "_state_count; ++k) known |= !strcmp(f->tensors[i].name, " + n + "_state[k].name);\n"
       "    if (!known) {\n      fst__fail(err, errn, \"%s: tensor \\\"%s\\\" is not an input of the program\", f->path, f->tensors[i].name);\n      return -1;\n    }\n"
       "  }\n  return 0;\n}\n\n";
  c += "int main(int argc, char** argv) {\n"
       "  char err[1024];\n  fst_file f;\n  " + n + "_program m;\n  fst_out* outs;\n  size_t k;\n"
       "  if (argc < 3) {\n    fprintf(stderr, \"usage: %s INPUTS.safetensors OUT.safetensors [PARAMETERS.safetensors ...]\\n\", argv[0]);\n    return 2;\n  }\n"
       "  memset(&m, 0, sizeof m);\n"
       "  m.weights = (const uint8_t*)aligned_region(" + upper_ident(n) + "_WEIGHTS_BYTES);\n"
       "  m.state = (uint8_t*)aligned_region(" + upper_ident(n) + "_STATE_BYTES);\n"
       "  m.arena = (uint8_t*)aligned_region(" + upper_ident(n) + "_ARENA_BYTES);\n"
       "  outs = (fst_out*)calloc(" + n + "_outputs_count + 1, sizeof(fst_out));\n"
       "  if (!m.weights || !m.state || !m.arena || !outs) {\n    fprintf(stderr, \"" + n + ": out of memory\\n\");\n    return 1;\n  }\n"
       "  if (fst_open(&f, argv[1], err, sizeof err) || known_inputs(&f, err, sizeof err) ||\n"
       "      read_tensors(&f, " + n + "_inputs, " + n + "_inputs_count, 0, m.arena, \"input\", err, sizeof err) ||\n"
       "      read_tensors(&f, " + n + "_state, " + n + "_state_count, 1, m.state, \"state input\", err, sizeof err)) {\n"
       "    fprintf(stderr, \"" + n + ": %s\\n\", err);\n    return 1;\n  }\n  fst_close(&f);\n"
       "  if (" + n + "_parameters_count && argc < 4) {\n    fprintf(stderr, \"" + n + ": the program has %zu parameters: name their .safetensors file\\n\", " + n + "_parameters_count);\n    return 1;\n  }\n"
       "  if (argc > 3 && read_parameters(argv + 3, argc - 3, (unsigned char*)m.weights, err, sizeof err)) {\n"
       "    fprintf(stderr, \"" + n + ": %s\\n\", err);\n    return 1;\n  }\n"
       "  if (" + n + "_run(&m)) {\n    fprintf(stderr, \"%s\\n\", m.error);\n    return 1;\n  }\n"
       "  for (k = 0; k < " + n + "_outputs_count; ++k) {\n"
       "    const " + n + "_tensor* t = &" + n + "_outputs[k];\n"
       "    outs[k].name = t->name;\n    outs[k].dtype = t->dtype;\n    outs[k].rank = t->rank;\n"
       "    memcpy(outs[k].shape, t->shape, sizeof t->shape);\n    outs[k].data = m.arena + t->offset;\n    outs[k].bytes = t->bytes;\n  }\n"
       "  if (fst_write(argv[2], outs, (int)" + n + "_outputs_count, err, sizeof err)) {\n    fprintf(stderr, \"" + n + ": %s\\n\", err);\n    return 1;\n  }\n"
       "  free((void*)m.weights);\n  free(m.state);\n  free(m.arena);\n  free(outs);\n  return 0;\n}\n";
  return c;
}

// The three files of a graph program.
FUSED_UNOPTIMIZED inline std::vector<emitted_file> emit_program(const c_program& p) {
  return {{p.name + ".h", emit_program_header(p, generator)},
          {p.name + ".c", emit_program_source(p, generator)},
          {p.name + "_main.c", emit_program_main(p, generator)}};
}

}  // namespace fused::codegen
