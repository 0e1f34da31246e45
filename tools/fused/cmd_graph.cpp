// `fused graph`: graph files (docs/GRAPH_FORMAT.md), the run-time way into the same pipeline.
//
//   fused graph export --config DIR|config.json --out FILE.json|FILE.msgpack [--logits last|all]
//       [--generate N [--stop-ids A,B]]   generation as one program (models/decoder_generate.hpp)
//   fused graph check FILE     every violation, one a line ("error: node 12: rule: ..."), then the lowering; exit 1 if any
//   fused graph run FILE [--weights DIR|FILE.safetensors] --inputs IN.safetensors --out OUT.safetensors [--bind NAME=VALUE ...]
//       inputs and outputs by their Input/Output names; a symbol's value is read from the shapes of the
//       inputs or given by --bind; state Inputs start at zero unless IN holds them; IN holds nothing else.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <fused/io/safetensors.hpp>
#include <fused/ir/format.hpp>
#include <fused/ir/lower.hpp>
#include <fused/ir/plan.hpp>
#include <fused/ir/validate.hpp>
#include <fused/runtime/execute.hpp>
#include <fused/runtime/weights.hpp>
#include <fused/models/decoder_generate.hpp>
#include <fused/models/decoder_graph_file.hpp>
#include <fused/models/hf_config.hpp>

#include "cli.hpp"
#include "generation.hpp"

namespace fused::cli::cmd_graph {

using fused::cli::usage_error;

struct export_options {
  std::string model, config, out, logits = "last";
  long long generate = 0;          // > 0: the generation program of this many tokens
  std::vector<std::string> stop_ids;  // its stop ids as given, parse_ids's forms (default: the model's eos_token_id)
};

int run_export(const export_options& o) {
  if (o.model.empty() == o.config.empty()) throw usage_error("give one of --model or --config");
  const std::string& source = o.model.empty() ? o.config : o.model;
  fused::cli::require_out_elsewhere("--out", o.out, "the graph", {{.path = source, .owner = "the model's"}});
  const fused::decoder::hf_model_info info = fused::decoder::load_hf_config(source);
  fused::decoder::graph_options options{};
  options.logits = o.logits == "all" ? fused::decoder::logits_rows::all : fused::decoder::logits_rows::last;
  if (o.generate > 0 && o.logits == "all") throw usage_error("--generate picks from the last position's logits: it takes no --logits all");
  if (o.generate == 0 && !o.stop_ids.empty()) throw usage_error("--stop-ids end a generation: they need --generate");
  const std::vector<int> stop_ids = fused::cli::stop_ids(o.stop_ids);
  fused::cli::require_in_vocabulary(stop_ids, "--stop-ids", info.arch.vocab_size);
  // The program's ctx is at most max_position_embeddings (its Range): a prompt of T tokens and N new
  // take T + N - 1 positions.
  if (o.generate > info.arch.max_position_embeddings)
    throw usage_error("--generate " + std::to_string(o.generate) + ": a KV cache of at most max_position_embeddings " +
                      std::to_string(info.arch.max_position_embeddings) + " positions cannot hold a prompt and " + std::to_string(o.generate) +
                      " more tokens");
  const fused::ir::document doc =
      o.generate > 0 ? fused::decoder::generation_graph_file(*info.family, info.arch,
                                                             {.max_new_tokens = o.generate, .stop_ids = o.stop_ids.empty() ? info.eos_token_ids : stop_ids},
                                                             source)
                     : fused::decoder::to_graph_file(*info.family, info.arch, options, source);
  const std::size_t bytes = fused::ir::write_file(doc, o.out);
  std::fprintf(stderr, "fused graph export: %s -> %s: %zu nodes, %zu edges, %zu bytes\n", source.c_str(), o.out.c_str(), doc.nodes.size(),
               doc.edges.size(), bytes);
  return 0;
}

int run_check(const std::string& path) {
  const fused::ir::read_result file = fused::ir::read_file(path);
  // Form first: a node that could not be read would make its edges look wrong too.
  const std::vector<fused::ir::issue> errors = file.ok() ? fused::ir::validate(file.doc) : file.errors;
  for (const auto& e : errors) std::printf("%s\n", fused::cli::printable(fused::ir::to_line(e)).c_str());  // a name may hold any character
  if (!errors.empty()) {
    std::fflush(stdout);
    std::fprintf(stderr, "fused graph check: %s: %zu error(s)%s\n", path.c_str(), errors.size(),
                 file.ok() ? "" : " of form (the graph is validated once its form is right)");
    return 1;
  }
  std::size_t count[7]{};
  for (const auto& n : file.doc.nodes) ++count[static_cast<int>(n.type)];
  using fused::ir::node_type;
  auto of = [&](node_type t) { return count[static_cast<int>(t)]; };
  std::string control;  // only a graph that has control flow says so (the summary of others is as before)
  if (of(node_type::conditional) + of(node_type::loop) > 0)
    control = ", " + std::to_string(of(node_type::conditional)) + " conditionals, " + std::to_string(of(node_type::loop)) + " loops, " +
              std::to_string(of(node_type::merge)) + " merges";
  std::printf("%s: ok: %zu nodes (%zu inputs, %zu parameters, %zu calls, %zu outputs%s), %zu edges, %zu symbols\n", path.c_str(),
              file.doc.nodes.size(), of(node_type::input), of(node_type::get_attr), of(node_type::call), of(node_type::output), control.c_str(),
              file.doc.edges.size(), file.doc.symbols.size());
  return 0;
}

struct run_options {
  std::string graph, weights, inputs, out;
  std::vector<std::string> bind;
  long long threads = 0;
};

fused::io::dtype file_dtype(fused::dtype t) {
  switch (t) {
    case fused::dtype::bf16: return fused::io::dtype::BF16;
    case fused::dtype::f16: return fused::io::dtype::F16;
    case fused::dtype::f32: return fused::io::dtype::F32;
    case fused::dtype::i32: return fused::io::dtype::I32;
    case fused::dtype::i64: return fused::io::dtype::I64;
    case fused::dtype::boolean: return fused::io::dtype::BOOL;
  }
  return fused::io::dtype::F32;
}

// A constant shape, for the cut-wire report's "actual" (nullopt past the planner's rank).
std::optional<fused::shape> constant_shape(const std::vector<std::int64_t>& dims) {
  if (dims.size() > static_cast<std::size_t>(fused::max_rank)) return std::nullopt;
  fused::shape s{};
  s.rank = static_cast<int>(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) s.d[i] = fused::dim{dims[i], 0};
  return s;
}

std::vector<std::int64_t> bound_dims(const fused::tensor_info& t, const fused::binding& b) {
  std::vector<std::int64_t> d;
  for (int i = 0; i < t.shp.rank; ++i) d.push_back(b(t.shp[i]));
  return d;
}


int run_graph(const run_options& o) {
  fused::cli::require_out_elsewhere("--out", o.out, "the outputs",
                                    {{.path = o.graph, .owner = "the graph"}, {.path = o.weights, .owner = "the --weights"}, {.path = o.inputs, .owner = "the --inputs"}});
  if (o.threads > 0) fk_set_threads(static_cast<int>(o.threads));
  const fused::ir::loaded_graph loaded = fused::ir::load_graph(o.graph);
  const fused::ir::lowered& g = loaded.graph;
  const fused::program& p = g.prog;
  const fused::io::safetensors_file in = fused::io::safetensors_file::open(o.inputs);

  // Every tensor of the file is an Input or a state Input: a misspelt one would be ignored, and the
  // Input (or the state, which starts at zero) run without it.
  std::vector<std::string> feeds;
  for (const fused::tensor_info& t : p.tensors)
    if (t.kind == fused::role::input || (t.kind == fused::role::state && t.is_feed)) feeds.push_back(fused::to_string(t.name));
  for (const fused::io::tensor_view& v : in.tensors())
    if (std::find(feeds.begin(), feeds.end(), v.name) == feeds.end())
      throw std::invalid_argument(o.inputs + ": tensor \"" + v.name + "\" is not an Input of the graph (its Inputs: " + fmt::format("{}", fmt::join(feeds, ", ")) + ")");

  // Symbols: from --bind, then from the shapes of the inputs given (a disagreement is an error).
  std::map<std::string, std::int64_t> values = fused::cli::parse_binds(o.bind);
  std::map<std::string, std::string> given_by;  // a symbol the inputs gave, not --bind: which tensor's dim
  for (const fused::tensor_info& t : p.tensors) {
    if (t.kind != fused::role::input && t.kind != fused::role::state) continue;
    const fused::io::tensor_view* v = in.find(fused::to_string(t.name));
    if (!v || v->shape.size() != static_cast<std::size_t>(t.shp.rank)) continue;  // the cut-wire check reports it
    for (int i = 0; i < t.shp.rank; ++i) {
      const fused::dim& d = t.shp[i];
      if (d.symbol == 0) continue;
      const std::string& name = g.symbols[d.symbol - 1u];
      // A dim that gives its symbol no positive value is the file's fault, not a missing --bind.
      if (v->shape[i] <= 0 || v->shape[i] % d.n != 0)
        throw std::invalid_argument(o.inputs + ": tensor \"" + v->name + "\" dim " + std::to_string(i) + " is " + std::to_string(v->shape[i]) +
                                    "; the graph's Input is " + fused::ir::detail::named_shape(t.shp, g.symbols) + ", which needs " +
                                    (d.n == 1 ? "a positive value" : "a positive multiple of " + std::to_string(d.n)));
      const std::int64_t value = v->shape[i] / d.n;
      if (const auto it = values.find(name); it != values.end() && it->second != value)
        throw std::invalid_argument(o.inputs + ": tensor \"" + v->name + "\" dim " + std::to_string(i) + " makes symbol \"" + name + "\" " +
                                    std::to_string(value) + ", but it is " + std::to_string(it->second));
      if (!values.count(name)) given_by.emplace(name, "tensor \"" + v->name + "\" dim " + std::to_string(i));  // not by --bind
      values[name] = value;
    }
  }
  fused::binding b{};
  try {
    b = fused::ir::bind(loaded.doc, values);
  } catch (const std::invalid_argument& e) {
    // A symbol no input gave: an Input missing from the file, or of another rank, is the likelier cause.
    for (const fused::tensor_info& t : p.tensors)
      if (t.kind == fused::role::input) {
        const fused::io::tensor_view* v = in.find(fused::to_string(t.name));
        if (!v)
          throw std::invalid_argument(o.inputs + ": no tensor \"" + fused::to_string(t.name) + "\" (the graph's Input of that name), so " + e.what());
        if (v->shape.size() != static_cast<std::size_t>(t.shp.rank))
          throw std::invalid_argument(o.inputs + ": tensor \"" + v->name + "\" has rank " + std::to_string(v->shape.size()) + "; the graph's Input is " +
                                      fused::ir::detail::named_shape(t.shp, g.symbols) + ", so " + e.what());
      }
    // A value out of the symbol's Range is the inputs' fault where one of their shapes gave it.
    const std::string what = e.what();
    for (const auto& [name, source] : given_by)
      if (what.find("\"" + name + "\"") != std::string::npos)
        throw std::invalid_argument(o.inputs + ": " + source + " gives symbol \"" + name + "\" a value the graph refuses: " + what);
    throw usage_error(what);
  }
  const fused::memory_plan mem = fused::ir::plan(p, b);

  // What is bound to each feed, for the cut-wire report of the first step that misses one.
  std::vector<fused::wire_state> wires(p.tensors.size());
  const auto stored = o.weights.empty() ? std::vector<std::optional<std::vector<std::int64_t>>>(p.tensors.size())
                                        : fused::runtime::weight_store::shapes_in(o.weights, p.tensors);
  for (const fused::tensor_info& t : p.tensors) {
    fused::wire_state& w = wires[static_cast<std::size_t>(t.id)];
    std::optional<std::vector<std::int64_t>> actual;
    if (t.kind == fused::role::weight) {
      // A parameter the run cannot bind is the weights' fault (or a missing --weights): said so, naming
      // the file and the GetAttr's target, before the cut-wire report would name the step instead.
      actual = stored[static_cast<std::size_t>(t.id)];
      const std::string name = fused::to_string(t.name);
      if (!actual && o.weights.empty())
        throw usage_error("the graph reads the parameter \"" + name + "\" (a GetAttr node): give --weights, a model directory or a .safetensors file");
      if (!actual) throw std::invalid_argument(o.weights + ": no tensor \"" + name + "\" (the graph's GetAttr of that name)");
      if (*actual != bound_dims(t, b))
        throw std::invalid_argument(o.weights + ": tensor \"" + name + "\" has shape " + fused::io::shape_string(*actual) + "; the graph's GetAttr is " +
                                    fused::io::shape_string(bound_dims(t, b)));
    } else if (t.kind == fused::role::input || t.kind == fused::role::state) {
      if (const fused::io::tensor_view* v = in.find(fused::to_string(t.name))) {
        if (v->dtype != file_dtype(t.type))
          throw std::invalid_argument(o.inputs + ": tensor \"" + v->name + "\" is " + std::string(fused::io::dtype_name(v->dtype)) + "; the graph's Input is " +
                                      fused::name_of(t.type));
        actual = v->shape;
        // The file's fault, said so before the cut-wire report would name the first step that reads it.
        if (*actual != bound_dims(t, b))
          throw std::invalid_argument(o.inputs + ": tensor \"" + v->name + "\" has shape " + fused::io::shape_string(*actual) + "; the graph's Input is " +
                                      fused::ir::detail::named_shape(t.shp, g.symbols) + " = " + fused::io::shape_string(bound_dims(t, b)));
      } else if (t.kind == fused::role::input) {  // the file's fault too (a state starts at zero without one)
        throw std::invalid_argument(o.inputs + ": no tensor \"" + fused::to_string(t.name) + "\" (the graph's Input of that name)");
      }
    }
    w.bound = actual.has_value() || t.kind == fused::role::state;  // state starts at zero
    if (actual && *actual != bound_dims(t, b)) w.actual = constant_shape(*actual);
  }
  fused::check_wires(p, wires);
  const std::vector<fused::runtime::call> calls = fused::runtime::lower_all(p, mem, wires);

  const fused::runtime::weight_store weights =
      o.weights.empty() ? fused::runtime::weight_store{} : fused::runtime::weight_store::load(o.weights, p.tensors, false);
  const auto allocate = [&](std::int64_t bytes, const char* what) {
    try {
      return fused::runtime::aligned_bytes(static_cast<std::size_t>(bytes));
    } catch (const std::bad_alloc&) {
      throw std::runtime_error(fmt::format("{}: cannot allocate its {} of {} bytes ({:.1f} GiB)", o.graph, what, bytes, static_cast<double>(bytes) / (1 << 30)));
    }
  };
  const std::int64_t state_bytes = mem.region_bytes[static_cast<int>(fused::region::state)], arena_bytes = mem.arena_bytes();
  fused::cli::require_memory(o.graph + ": its state and activation arena under this binding", static_cast<double>(state_bytes + arena_bytes));
  fused::runtime::aligned_bytes state = allocate(state_bytes, "state");
  fused::runtime::aligned_bytes arena = allocate(arena_bytes, "activation arena");
  const fused::runtime::regions r{weights.table(), state.data(), arena.data()};
  auto bytes_at = [&](const fused::tensor_info& t) {
    const fused::buffer& buf = mem.buffers[static_cast<std::size_t>(t.id)];
    return (buf.where == fused::region::state ? r.state : r.arena) + buf.offset;
  };
  for (const fused::tensor_info& t : p.tensors)
    if (t.kind == fused::role::input || t.kind == fused::role::state)
      if (const fused::io::tensor_view* v = in.find(fused::to_string(t.name))) std::memcpy(bytes_at(t), v->data, v->bytes);
  try {
    fused::runtime::execute(p, mem, calls, r, b);
  } catch (const std::out_of_range& e) {  // "step 99: ..." names the program's step; the file has nodes
    throw std::out_of_range(fused::ir::detail::steps_as_nodes(e.what(), loaded.graph.node_of_step()));
  }

  std::vector<fused::io::tensor_data> outs;
  for (const fused::named_output& out : p.outputs) {
    const fused::tensor_info& t = p.tensor(out.id);
    const std::vector<std::int64_t> dims = bound_dims(t, b);
    const auto n = static_cast<std::size_t>(fused::bytes_of(t, b));
    outs.push_back({out.name, file_dtype(t.type), dims, std::span<const std::byte>(bytes_at(t), n)});
    // A model's logits (a graph exported from a checkpoint) are held to what `fused score` holds them to.
    if (loaded.doc.metadata.contains("model") && std::string_view(out.name) == "logits" && t.type == fused::dtype::f32)
      fused::cli::require_finite_logits(std::span(reinterpret_cast<const float*>(bytes_at(t)), n / sizeof(float)), weights);
  }
  fused::io::write_safetensors(o.out, outs);
  // An Output that carries a state is that state's next value, a feed of the next call: one run does
  // not write it (docs/GRAPH_FORMAT.md), and says so.
  std::vector<std::string> carried;
  for (const fused::ir::node& nd : loaded.doc.nodes)
    if (nd.type == fused::ir::node_type::output && nd.carries) carried.push_back("\"" + nd.name + "\"");
  std::string unwritten;
  if (!carried.empty())
    unwritten = fmt::format("; not written: the state Output{} {}{}", carried.size() == 1 ? "" : "s",
                            fmt::join(carried.begin(), carried.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(carried.size(), 3)), ", "),
                            carried.size() > 3 ? fmt::format(" and {} more", carried.size() - 3) : std::string());
  std::fprintf(stderr, "fused graph run: %s: %zu steps, arena %lld bytes -> %s (%zu outputs%s)\n", o.graph.c_str(), calls.size(),
               static_cast<long long>(mem.arena_bytes()), o.out.c_str(), outs.size(), fused::cli::printable(unwritten).c_str());
  return 0;
}

const fused::cli::command graph_cmd{"graph", "graph files: export, check, run (docs/GRAPH_FORMAT.md)", [](CLI::App& app) -> fused::cli::runner {
                                      app.require_subcommand(1);
                                      return [] { return 0; };
                                    }};

const fused::cli::command export_cmd{
    "graph export", "a built-in model as a graph file (JSON or MessagePack, by the extension of --out)", [](CLI::App& app) -> fused::cli::runner {
      auto o = std::make_shared<export_options>();
      app.add_option("-m,--model", o->model, "a Hugging Face model directory (or its config.json)")->check(fused::cli::not_empty("give a model directory"));
      app.add_option("--config", o->config, "a config.json, or a model directory holding one");
      app.add_option("--out", o->out, "the file to write: .json, or .msgpack for MessagePack")->required()->check(fused::cli::not_empty("give a file name"));
      app.add_option("--logits", o->logits, "logits of the last position or of all")->check(fused::cli::one_of({"last", "all"}));
      app.add_option("--generate", o->generate, "the program that generates up to N tokens greedily (prompt, then a Loop of decode steps)")
          ->transform(fused::cli::integer_in(1, 1 << 30));
      app.add_option("--stop-ids", o->stop_ids, "token ids that end generation (up to 4; default: the model's eos_token_id)");
      return [o] { return run_export(*o); };
    }};

const fused::cli::command check_cmd{"graph check", "validates a graph file: every violation, one a line", [](CLI::App& app) -> fused::cli::runner {
                                      auto path = std::make_shared<std::string>();
                                      app.add_option("file", *path, "a graph file, JSON or MessagePack")->required();
                                      return [path] { return run_check(*path); };
                                    }};

const fused::cli::command run_cmd{
    "graph run", "runs a graph file once: inputs and outputs as safetensors, by name", [](CLI::App& app) -> fused::cli::runner {
      auto o = std::make_shared<run_options>();
      app.add_option("file", o->graph, "a graph file, JSON or MessagePack")->required();
      app.add_option("--weights", o->weights, "the parameters its GetAttr nodes name: a model directory or a .safetensors file");
      app.add_option("--inputs", o->inputs, "a .safetensors file holding each Input by name")->required();
      app.add_option("--out", o->out, "the .safetensors file to write, each Output by name")->required()->check(fused::cli::not_empty("give a file name"));
      app.add_option("--bind", o->bind, "a symbol's value, NAME=VALUE (repeatable; others come from the inputs' shapes)");
      app.add_option("-t,--threads", o->threads, "threads; 0 = all cores")->transform(fused::cli::integer_in(0, 1024));
      return [o] { return run_graph(*o); };
    }};

}  // namespace fused::cli::cmd_graph
