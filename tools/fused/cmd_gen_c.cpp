// `fused gen-c`: a Hugging Face model's config, planned at run time (decoder::plan_for, the
// run-time model's calls), printed as standalone C11 by the same emitter fused_generate_c() runs at
// build time (codegen/, docs/GENERATOR.md).
//
//   fused gen-c --model DIR --out OUTDIR [--name N] [--max-seq S] [--max-ctx C] [--logits all|last]
//               [--generate N [--stop-ids A,B]]   also <name>_generate: generation as one program
//   fused gen-c --graph FILE --out OUTDIR ...     a graph file `fused graph export` wrote: the same C
//                                                 as its config gives (its logits option is the file's)
//   fused gen-c --model DIR --train --out OUTDIR [--max-seq S] [--batch B] [--optimizer adamw|sgd]
//               [--betas ..] [--momentum ..] ...  a train step (forward, loss, backward, update) of B
//                                                 sequences of S tokens: <name>.h, <name>.c and
//                                                 <name>_main.c with the `fused train-step` interface
//   fused gen-c --graph FILE --out OUTDIR [--bind NAME=VALUE ...]
//                                                 any other graph file whose steps all have C kernels,
//                                                 control flow included: <name>.h, <name>.c and
//                                                 <name>_main.c with the `fused graph run` interface
//
// OUTDIR gets <name>.h, <name>.c, <name>_main.c (a scorer with the `fused score` interface; only with
// --logits all, the default), <name>_generate_main.c (with --generate), memory_layout.json, graph.json
// and the C headers they include:
//   cc -O2 -march=native -std=c11 OUTDIR/*.c -o scorer -lm -fopenmp -lpthread
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <fused/ir/lower.hpp>
#include <fused/ir/plan.hpp>
#include <fused/models/decoder_graph_file.hpp>
#include <fused/models/hf_config.hpp>

#include "../../codegen/include/fused/codegen.hpp"
#include "cli.hpp"
#include "train_flags.hpp"

namespace fused::cli::cmd_gen_c {

namespace fs = std::filesystem;

// Where the kernel headers and fused_safetensors.h are: --kernels, else $FUSED_KERNELS_DIR, else an
// installed tree next to this binary (bin/../include/fused/kernels) or the source tree this binary was
// built from; fused_safetensors.h from that directory if it has one, else bin/../share/fused/codegen/c or
// the source tree. A directory given must be one and must hold every kernel header the C needs (else
// "cannot find the C header"): a typo or a partial copy would otherwise fall through to the defaults
// and mix other headers with the ones asked for.
std::vector<fs::path> header_dirs(const std::string& given) {
  std::vector<fs::path> dirs;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  const bool found_exe = !ec;
  const fs::path source = fs::path(__FILE__).parent_path().parent_path().parent_path();
  const char* env = std::getenv("FUSED_KERNELS_DIR");
  if (!given.empty()) {
    if (!fs::is_directory(given, ec)) throw fused::cli::usage_error("--kernels: " + given + " is not a directory");
    dirs.emplace_back(given);
  } else if (env && *env) {
    if (!fs::is_directory(env, ec)) throw std::runtime_error(std::string("FUSED_KERNELS_DIR: ") + env + " is not a directory");
    dirs.emplace_back(env);
  } else {
    if (found_exe) dirs.push_back(exe.parent_path().parent_path() / "include" / "fused" / "kernels");
    dirs.push_back(source / "kernels");
  }
  if (found_exe) dirs.push_back(exe.parent_path().parent_path() / "share" / "fused" / "codegen" / "c");
  dirs.push_back(source / "codegen" / "c");
  return dirs;
}

struct options {
  std::string model, graph, out, name = "model", logits = "all", kernels;
  std::optional<std::int64_t> max_seq, max_ctx;
  long long generate = 0;     // > 0: <name>_generate too, of up to this many tokens
  std::vector<std::string> stop_ids;  // its stop ids as given, parse_ids's forms (default: the model's eos_token_id)
  std::vector<std::string> bind;  // a graph program's symbols, NAME=VALUE
  bool train = false;             // a train step instead of prefill and decode
  long long batch = 1;            // its sequences
  fused::cli::optimizer_flags optimizer;  // its update
};

// Writes the files and the headers they include into --out, having refused any of them that is a
// file gen-c reads (the bundle's own graph.json over --graph's, say).
std::vector<fs::path> write_out(std::vector<fused::codegen::emitted_file> files, const options& o) {
  const fused::codegen::bundle_files bundle = fused::codegen::plan_bundle(std::move(files), header_dirs(o.kernels));
  for (const fs::path& path : fused::codegen::bundle_paths(bundle, o.out))
    fused::cli::require_out_elsewhere("--out", path.string(), "the C", {{.path = o.graph, .owner = "the --graph"}, {.path = o.model, .owner = "the model's"}});
  return fused::codegen::write_bundle(bundle, o.out);
}

// The train step of --model as C (emit_train_c.hpp).
int train_step_c(const options& o) {
  if (o.model.empty()) throw fused::cli::usage_error("--train takes --model (the train step is planned from the config)");
  if (o.generate > 0 || o.max_ctx) throw fused::cli::usage_error("--train plans a train step: --generate and --max-ctx are for inference programs");
  const fused::decoder::hf_model_info info = fused::decoder::load_hf_config(o.model);
  const std::int64_t seq = o.max_seq.value_or(std::min<std::int64_t>(256, info.arch.max_position_embeddings));
  fused::cli::check_train_shape(info.arch, {.batch = o.batch, .micro_batches = 1, .tokens = seq, .sequence = "--max-seq " + std::to_string(seq)});
  fused::decoder::graph_options graph{};
  graph.train = o.optimizer.options();
  const fused::codegen::c_program p = fused::codegen::train_program_for_c(o.name, *info.family, info.arch, {.sequences = o.batch, .tokens = seq}, graph);
  const auto written = write_out(fused::codegen::emit_train(p), o);
  std::fprintf(stderr, "fused gen-c: %s (a train step of %lld x %lld tokens: %zu steps, %zu parameters, arena %lld bytes, state %lld bytes) -> %s: %zu files\n",
               o.name.c_str(), o.batch, static_cast<long long>(seq), p.prefill.steps.size(), p.trained.size(),
               static_cast<long long>(p.prefill.bytes(fused::region::activations)), static_cast<long long>(p.state_bytes()), o.out.c_str(), written.size());
  return 0;
}

// A graph file that is no decoder's export: the program itself, planned for --bind, as C.
int graph_program_c(const options& o, const fused::ir::loaded_graph& loaded) {
  fused::binding b{};
  try {
    b = fused::ir::bind(loaded.doc, fused::cli::parse_binds(o.bind));
  } catch (const std::invalid_argument& e) {
    throw fused::cli::usage_error(o.graph + ": " + e.what());
  }
  const fused::memory_plan mem = fused::ir::plan(loaded.graph.prog, b);
  fused::codegen::c_program p;
  try {
    p = fused::codegen::program_for_c(o.name, loaded.graph.prog, mem, loaded.graph.node_of_step());
  } catch (const std::exception& e) {
    throw fused::graph_error(o.graph + ": " + e.what());
  }
  const auto written = write_out(fused::codegen::emit_program(p), o);
  std::fprintf(stderr, "fused gen-c: %s (a graph program: %zu steps, %zu control-flow regions, arena %lld bytes) -> %s: %zu files\n", o.name.c_str(),
               p.prefill.steps.size(), p.prefill.regions.size(), static_cast<long long>(p.prefill.bytes(fused::region::activations)), o.out.c_str(),
               written.size());
  return 0;
}

int run_gen_c(const options& o) {
  if (o.model.empty() && o.graph.empty()) throw fused::cli::usage_error("one of --model or --graph is required");
  if (o.train) return train_step_c(o);
  fused::decoder::decoder_source source;
  std::optional<fused::decoder::generation_options> generation;
  if (!o.graph.empty()) {
    if (o.generate > 0) throw fused::cli::usage_error("--generate takes --model (the generation program is planned from the config)");
    const fused::ir::loaded_graph loaded = fused::ir::load_graph(o.graph);
    if (!loaded.doc.metadata.contains("model")) return graph_program_c(o, loaded);
    if (!o.bind.empty()) throw fused::cli::usage_error("--bind is for graph programs; a decoder's graph is planned from its config");
    if (const auto& meta = loaded.doc.metadata; meta.contains("options") && meta["options"].is_object() && meta["options"].contains("generate"))
      throw fused::graph_error(o.graph + ": a generation program (metadata.options.generate, from `fused graph export --generate`): " +
                               "gen-c prints that one from the model, `fused gen-c --model DIR --generate N`");
    try {
      source = fused::decoder::decoder_source_of(loaded.doc, loaded.graph.prog);
    } catch (const fused::graph_error& e) {
      throw fused::graph_error(o.graph + ": " + e.what() + "; gen-c prints a decoder's graph as exported, or a graph without metadata.model as a program");
    }
  } else {
    const fused::decoder::hf_model_info info = fused::decoder::load_hf_config(o.model);
    source = {.family = info.family, .cfg = info.arch, .options = {}};
    source.options.logits = o.logits == "all" ? fused::decoder::logits_rows::all : fused::decoder::logits_rows::last;
    const std::vector<int> stop_ids = fused::cli::stop_ids(o.stop_ids);
    fused::cli::require_in_vocabulary(stop_ids, "--stop-ids", info.arch.vocab_size);
    if (o.generate > 0) generation = fused::decoder::generation_options{.max_new_tokens = o.generate, .stop_ids = stop_ids.empty() ? info.eos_token_ids : stop_ids};
  }
  const fused::decoder::config& cfg = source.cfg;
  const std::int64_t ctx = o.max_ctx.value_or(std::min<std::int64_t>(4096, cfg.max_position_embeddings));
  const std::int64_t seq = o.max_seq.value_or(std::min<std::int64_t>(512, ctx));
  // Flags the config cannot take are usage errors (exit 2), as in run and plan.
  if (ctx > cfg.max_position_embeddings)
    throw fused::cli::usage_error(fmt::format("--max-ctx {} exceeds max_position_embeddings {}", ctx, cfg.max_position_embeddings));
  if (seq > ctx)
    throw fused::cli::usage_error(fmt::format("--max-ctx {}{} cannot hold the prefill of --max-seq {} tokens", ctx, o.max_ctx ? "" : " (the default)", seq));
  if (generation && o.generate > ctx)  // a prompt of T tokens and N new take T + N - 1 positions
    throw fused::cli::usage_error(fmt::format("--generate {}: the KV cache of --max-ctx {}{} cannot hold a prompt and {} more tokens", o.generate, ctx,
                                              o.max_ctx ? "" : " (the default)", o.generate));
  const fused::codegen::c_program p = fused::codegen::from_runtime(o.name, *source.family, cfg, seq, ctx, source.options, generation);
  const std::string logits = fused::decoder::name_of(source.options.logits);
  const auto written = write_out(fused::codegen::emit_all(p), o);
  std::fprintf(stderr, "fused gen-c: %s (prefill up to %lld tokens, KV cache %lld, logits %s) -> %s: %zu files, fingerprint %s\n", o.name.c_str(),
               static_cast<long long>(seq), static_cast<long long>(ctx), logits.c_str(), o.out.c_str(), written.size(),
               fused::codegen::hex64(fused::codegen::layout_fingerprint(p)).c_str());
  return 0;
}

const fused::cli::command gen_c_cmd{
    "gen-c", "standalone C11 for a model (docs/GENERATOR.md)", [](CLI::App& app) -> fused::cli::runner {
      auto o = std::make_shared<options>();
      using fused::cli::integer_in;
      auto* model = app.add_option("-m,--model", o->model, "a Hugging Face model directory (or its config.json)")->check(fused::cli::not_empty("give a model directory"));
      auto* graph = app.add_option("--graph", o->graph, "a graph file instead of --model: a decoder's (fused graph export), or any program with C kernels");
      model->excludes(graph);
      app.add_option("--out", o->out, "the directory to write")->required()->check(fused::cli::not_empty("give a directory (. for this one)"));
      app.add_option("--name", o->name, "the C prefix of every symbol and file")->check([](const std::string& name) -> std::string {
        try {
          fused::codegen::detail::check_c_identifier(name);
          return {};
        } catch (const std::invalid_argument& e) {
          return std::string(e.what()).substr(std::string_view("codegen: ").size());
        }
      });
      app.add_option("--max-seq", o->max_seq, "most tokens one prefill call takes")->default_str("min(512, --max-ctx)")->transform(integer_in(1, 1 << 24));
      app.add_option("--max-ctx", o->max_ctx, "KV cache positions")->default_str("min(4096, max_position_embeddings)")->transform(integer_in(1, 1 << 30));
      app.add_option("--logits", o->logits, "all positions' logits (the scorer needs them) or the last one's")
          ->check(fused::cli::one_of({"all", "last"}))
          ->excludes(graph);
      auto* generate = app.add_option("--generate", o->generate, "also <name>_generate: the prompt and up to N greedy tokens as one program")
                           ->transform(integer_in(1, 1 << 24));
      app.add_option("--stop-ids", o->stop_ids, "token ids that end --generate (up to 4; default: the model's eos_token_id)")
          ->needs(generate);
      app.add_option("--bind", o->bind, "a graph program's symbol, NAME=VALUE (repeatable)")->needs(graph);
      auto* train = app.add_flag("--train", o->train, "a train step (forward, loss, backward, AdamW) with the `fused train-step` interface")->excludes(graph);
      app.add_option("--batch", o->batch, "--train: sequences per step, each of --max-seq tokens (default: 1 of min(256, max_position_embeddings))")->transform(integer_in(1, 1 << 20))->needs(train);
      o->optimizer.add_to(app, train);
      app.add_option("--kernels", o->kernels, "where the kernel headers are (default: installed tree, then the source tree)");
      return [o] { return run_gen_c(*o); };
    }};

}  // namespace fused::cli::cmd_gen_c
