// `fused plan`: the schedule and memory map of a Qwen2 model for one mode, computed at run time
// from a Hugging Face config.json by the same pipeline a static model runs in constant evaluation
// (build, schedule, lower, plan, verify).
//
//   fused plan --config config.json --mode prefill --seq 512            -> text table
//   fused plan --config model_dir/ --mode decode --ctx 4096 --format json
//   fused plan --config config.json --mode decode --format svg > plan.svg
//
// The JSON format is documented in docs/PLAN_FORMAT.md.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <fused/models/hf_config.hpp>
#include <fused/models/decoder_config_fields.hpp>
#include <fused/models/decoder_plan.hpp>
#include <fused/plan/print.hpp>

#include "cli.hpp"

namespace {

using fused::cli::usage_error;

// The config's fields (named by Hana reflection; features only when set): the JSON records what was planned.
nlohmann::ordered_json config_json(const fused::decoder::family_entry& f, const fused::decoder::config& c) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["model_type"] = f.model_type;
  fused::decoder::for_each_printed_field(c, [&](const char* name, auto value) {
    if constexpr (std::is_enum_v<decltype(value)>) j[name] = fused::decoder::name_of(value);
    else j[name] = value;
  });
  return j;
}

struct options {
  std::string config, mode, format = "text", logits = "last";
  std::optional<std::int64_t> seq, ctx;
};

int run_plan(const options& o) {
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
    head["model"] = config_json(*info.family, cfg);
    head["mode"] = {{"phase", mode_name}, {"tokens", tokens}, {"ctx", ctx}, {"logits", logits}};
    head.update(doc);  // the plan's own keys follow the header
    out = fused::dump_plan_json(head);
  } else if (format == "svg") {
    out = fused::plan_to_svg(plan.prog, plan.mem, title);
  } else {
    out = fused::plan_to_text(plan.prog, plan.mem, title);
  }
  if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0)
    throw std::runtime_error("cannot write the plan to standard output");
  return 0;
}

const fused::cli::command plan_cmd{
    "plan", "the schedule and memory map of a model in one mode", [](CLI::App& app) -> fused::cli::runner {
      auto o = std::make_shared<options>();
      using fused::cli::one_of;
      app.add_option("--config", o->config, "a config.json, or a model directory holding one")->required();
      app.add_option("--mode", o->mode, "prefill or decode")->required()->check(one_of({"prefill", "decode"}));
      app.add_option("--seq", o->seq, "prefill: tokens per call")->default_str("512")->check(fused::cli::integer_in(1, std::int64_t{1} << 24));
      app.add_option("--ctx", o->ctx, "KV cache positions")->default_str("min(4096, max_position_embeddings)")
          ->check(fused::cli::integer_in(1, std::int64_t{1} << 31));
      app.add_option("--format", o->format, "text, json (docs/PLAN_FORMAT.md) or svg")->check(one_of({"text", "json", "svg"}));
      app.add_option("--logits", o->logits, "logits of the last position or of all")->check(one_of({"last", "all"}));
      return [o] { return run_plan(*o); };
    }};

}  // namespace
