// `fused plan`: the schedule and memory map of a model for one mode, computed at run time from a
// Hugging Face config.json or a graph file by the same pipeline a static model runs in constant
// evaluation (build, schedule, lower, plan, verify).
//
//   fused plan --config config.json --mode prefill --seq 512            -> text table
//   fused plan --config model_dir/ --mode decode --ctx 4096 --format json
//   fused plan --config config.json --mode decode --format svg > plan.svg
//   fused plan --graph model.msgpack --mode prefill --seq 512 --format json
//   fused plan --graph mlp.json --mode prefill --bind batch=8
//
// The JSON format is documented in docs/PLAN_FORMAT.md.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <map>

#include <fmt/format.h>

#include <fused/models/hf_config.hpp>
#include <fused/ir/lower.hpp>
#include <fused/ir/plan.hpp>
#include <fused/models/decoder_graph_file.hpp>
#include <fused/models/decoder_plan.hpp>
#include <fused/plan/print.hpp>

#include "cli.hpp"

namespace fused::cli::cmd_plan {

using fused::cli::usage_error;

struct options {
  std::string config, graph, mode, format = "text", logits = "last";
  std::optional<std::int64_t> seq, ctx;
  std::vector<std::string> bind;
};

// Each line of `text` through printable(): control characters and stray bytes escaped, lines kept.
std::string printable_lines(const std::string& text) {
  std::string out;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    out += fused::cli::printable(std::string_view(text).substr(at, end - at));
    if (end < text.size()) out += '\n';
    at = end + 1;
  }
  return out;
}

void write_out(const std::string& out) {
  if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0)
    throw std::runtime_error("cannot write the plan to standard output");
}


// A plan of a graph file (fused/ir/): --mode/--seq/--ctx bind its symbols "tokens" and "ctx" when
// it has them (a decoder's), --bind any symbol. A file exported from a config plans, and prints,
// exactly as that config does.
int run_plan_graph(const options& o) {
  const fused::ir::loaded_graph loaded = fused::ir::load_graph(o.graph);
  const fused::ir::document& doc = loaded.doc;
  const fused::ir::lowered& g = loaded.graph;
  auto has = [&](const char* name) { return std::find(g.symbols.begin(), g.symbols.end(), name) != g.symbols.end(); };
  // --seq and --ctx bind a decoder's symbols; on a graph without them they would be ignored silently.
  if (o.seq && !has("tokens")) throw usage_error(fmt::format("--seq binds the symbol \"tokens\", which {} does not declare (--bind NAME=VALUE binds its own)", o.graph));
  if (o.ctx && !has("ctx")) throw usage_error(fmt::format("--ctx binds the symbol \"ctx\", which {} does not declare (--bind NAME=VALUE binds its own)", o.graph));
  const bool prefill = o.mode == "prefill";
  std::map<std::string, std::int64_t> values;
  const std::map<std::string, std::int64_t> binds = fused::cli::parse_binds(o.bind);
  std::optional<std::int64_t> bound_ctx;
  for (const auto& [name, v] : binds) {
    // A decoder's "tokens" is the mode's: one in decode, --seq in prefill.
    if (name == "tokens" && has("tokens"))
      throw usage_error(fmt::format("--bind tokens={}: --mode sets \"tokens\" (decode: 1; prefill: --seq)", v));
    if (name == "ctx" && o.ctx) throw usage_error(fmt::format("--bind ctx={} and --ctx both set \"ctx\"", v));
    if (name == "ctx" && has("ctx")) bound_ctx = v;
  }
  const fused::ir::json mode_head = [&] {
    fused::ir::json m = fused::ir::json::object();
    m["phase"] = o.mode;
    if (has("tokens")) {
      const std::int64_t tokens = prefill ? o.seq.value_or(512) : 1;
      values["tokens"] = tokens;
      m["tokens"] = tokens;
    }
    if (has("ctx")) {
      std::int64_t max_ctx = 4096;
      for (const auto& c : doc.constraints)
        if (c.kind == fused::ir::constraint_kind::range && c.symbols[0] == "ctx") max_ctx = std::min(max_ctx, c.max);
      const std::int64_t tokens = values.count("tokens") ? values["tokens"] : 1;
      const std::int64_t ctx = bound_ctx ? *bound_ctx : o.ctx.value_or(std::max(max_ctx, tokens));
      if ((o.ctx || bound_ctx) && ctx < tokens)
        throw usage_error(fmt::format("{} cannot hold the prefill of --seq {} tokens", bound_ctx ? fmt::format("--bind ctx={}", ctx) : fmt::format("--ctx {}", ctx), tokens));
      values["ctx"] = ctx;
      m["ctx"] = ctx;
    }
    for (const auto& [name, v] : binds) {
      values[name] = v;
      m[name] = v;
    }
    if (doc.metadata.contains("options") && doc.metadata["options"].is_object() && doc.metadata["options"].contains("logits"))
      m["logits"] = fused::decoder::name_of(fused::decoder::logits_option(doc.metadata));
    return m;
  }();
  fused::binding b{};
  try {
    b = fused::ir::bind(doc, values);
  } catch (const std::invalid_argument& e) {
    throw usage_error(e.what());
  }
  const fused::memory_plan mem = fused::ir::plan(g.prog, b);
  const std::string title = fmt::format("{}: {}", o.graph, fused::json_text::dump(mode_head));
  if (o.format == "json") {
    nlohmann::ordered_json head = nlohmann::ordered_json::object();
    // The config it was exported from, and that config's fields, as `plan --config` records them.
    if (doc.metadata.contains("source")) head["config"] = doc.metadata["source"];
    else head["graph"] = o.graph;
    if (doc.metadata.contains("model")) head["model"] = doc.metadata["model"];
    head["mode"] = mode_head;
    head.update(fused::plan_to_json(g.prog, mem));
    write_out(fused::dump_plan_json(head));
  } else if (o.format == "svg") {
    write_out(fused::plan_to_svg(g.prog, mem, title));
  } else {
    write_out(printable_lines(fused::plan_to_text(g.prog, mem, title)));  // a graph file's names may hold any character
  }
  return 0;
}

int run_plan(const options& o) {
  if (!o.graph.empty()) {
    if (!o.config.empty()) throw usage_error("--config and --graph exclude each other");
    if (o.mode != "prefill" && o.seq) throw usage_error("--seq applies to --mode prefill only (decode takes one token)");
    return run_plan_graph(o);
  }
  if (o.config.empty()) throw usage_error("one of --config or --graph is required");
  if (!o.bind.empty()) throw usage_error("--bind applies to --graph only");
  const std::string& config_path = o.config;
  const std::string& mode_name = o.mode;
  const std::string& format = o.format;
  const std::string& logits = o.logits;
  const bool has_seq = o.seq.has_value(), has_ctx = o.ctx.has_value();
  const std::int64_t seq_flag = o.seq.value_or(0), ctx_flag = o.ctx.value_or(0);
  const bool prefill = mode_name == "prefill";
  if (!prefill && has_seq) throw usage_error("--seq applies to --mode prefill only (decode takes one token)");

  const std::int64_t seq = has_seq ? seq_flag : 512;

  const fused::decoder::hf_model_info info = fused::decoder::load_hf_config(config_path);
  const fused::decoder::config& cfg = info.arch;
  const std::int64_t max_pos = cfg.max_position_embeddings;
  const std::int64_t tokens = prefill ? seq : 1;
  std::int64_t ctx = std::max<std::int64_t>(std::min<std::int64_t>(4096, max_pos), tokens);
  if (has_ctx) {
    ctx = ctx_flag;
    if (ctx < tokens) throw usage_error(fmt::format("--ctx {} cannot hold the prefill of --seq {} tokens", ctx, tokens));
  }
  if (ctx > max_pos)
    throw usage_error(fmt::format("{} {} exceeds max_position_embeddings {} of {}", has_ctx ? "--ctx" : "--seq", has_ctx ? ctx : tokens,
                                  max_pos, config_path));

  const fused::decoder::mode m = prefill ? fused::decoder::mode::prefill(tokens, ctx) : fused::decoder::mode::decode(ctx);
  fused::decoder::graph_options options{};
  options.logits = logits == "all" ? fused::decoder::logits_rows::all : fused::decoder::logits_rows::last;
  const fused::decoder::planned plan = fused::decoder::plan_for(*info.family, cfg, m, options);

  const std::string title = prefill ? fmt::format("{}: prefill of {} tokens, KV capacity {}, logits {}", config_path, tokens, ctx, logits)
                                    : fmt::format("{}: decode, KV capacity {}, logits {}", config_path, ctx, logits);
  std::string out;
  if (format == "json") {
    nlohmann::ordered_json doc = fused::plan_to_json(plan.prog, plan.mem);
    nlohmann::ordered_json head = nlohmann::ordered_json::object();
    head["config"] = config_path;
    head["model"] = fused::decoder::config_json(*info.family, cfg);
    head["mode"] = {{"phase", mode_name}, {"tokens", tokens}, {"ctx", ctx}, {"logits", logits}};
    head.update(doc);  // the plan's own keys follow the header
    out = fused::dump_plan_json(head);
  } else if (format == "svg") {
    out = fused::plan_to_svg(plan.prog, plan.mem, title);
  } else {
    out = fused::plan_to_text(plan.prog, plan.mem, title);
  }
  write_out(out);
  return 0;
}

const fused::cli::command plan_cmd{
    "plan", "the schedule and memory map of a model in one mode", [](CLI::App& app) -> fused::cli::runner {
      auto o = std::make_shared<options>();
      using fused::cli::one_of;
      app.add_option("--config", o->config, "a config.json, or a model directory holding one");
      auto* graph = app.add_option("--graph", o->graph, "a graph file (docs/GRAPH_FORMAT.md), JSON or MessagePack, instead of --config");
      app.add_option("--bind", o->bind, "--graph: a symbol's value, NAME=VALUE (repeatable)");
      app.add_option("--mode", o->mode, "prefill or decode")->required()->check(one_of({"prefill", "decode"}));
      app.add_option("--seq", o->seq, "prefill: tokens per call")->default_str("512")->transform(fused::cli::integer_in(1, std::int64_t{1} << 24));
      app.add_option("--ctx", o->ctx, "KV cache positions")->default_str("min(4096, max_position_embeddings)")
          ->transform(fused::cli::integer_in(1, std::int64_t{1} << 31));
      app.add_option("--format", o->format, "text, json (docs/PLAN_FORMAT.md) or svg")->check(one_of({"text", "json", "svg"}));
      app.add_option("--logits", o->logits, "logits of the last position or of all (a graph file's are as exported)")
          ->check(one_of({"last", "all"}))
          ->excludes(graph);
      return [o] { return run_plan(*o); };
    }};

}  // namespace fused::cli::cmd_plan
