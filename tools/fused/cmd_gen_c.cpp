// `fused gen-c`: a Hugging Face Qwen2 model's config, planned at run time (qwen2::plan_for, the
// run-time model's calls), printed as standalone C11 by the same emitter fused_generate_c() runs at
// build time (codegen/, docs/GENERATOR.md).
//
//   fused gen-c --model DIR --out OUTDIR [--name N] [--max-seq S] [--max-ctx C] [--logits all|last]
//
// OUTDIR gets <name>.h, <name>.c, <name>_main.c (a scorer with the `fused score` interface; only with
// --logits all, the default), memory_layout.json, graph.json and the C headers they include:
//   cc -O2 -march=native -std=c11 OUTDIR/*.c -o scorer -lm -fopenmp -lpthread
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fused/io/hf_config.hpp>

#include "../../codegen/include/fused/codegen.hpp"
#include "cli.hpp"

namespace {

namespace fs = std::filesystem;

// Where the kernel headers and fused_safetensors.h are: --kernels, $FUSED_KERNELS_DIR, an installed
// tree next to this binary (bin/../include/fused/kernels, bin/../share/fused/codegen/c), or the source tree this binary was built from.
std::vector<fs::path> header_dirs(const std::string& given) {
  std::vector<fs::path> dirs;
  if (!given.empty()) dirs.emplace_back(given);
  if (const char* env = std::getenv("FUSED_KERNELS_DIR")) dirs.emplace_back(env);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    dirs.push_back(exe.parent_path().parent_path() / "include" / "fused" / "kernels");
    dirs.push_back(exe.parent_path().parent_path() / "share" / "fused" / "codegen" / "c");
  }
  const fs::path source = fs::path(__FILE__).parent_path().parent_path().parent_path();
  dirs.push_back(source / "kernels");
  dirs.push_back(source / "codegen" / "c");
  return dirs;
}

const fused::cli::command gen_c_cmd{
    "gen-c", "standalone C for a model: --model DIR --out OUTDIR [--name N] [--max-seq S] [--max-ctx C] [--logits all|last]",
    [](const std::vector<std::string>& a) {
      fused::cli::args_reader args(a);
      const std::string model = args.required("--model");
      const std::string out = args.required("--out");
      const std::string name = args.value_or("--name", "model");
      const std::string logits = args.value_or("--logits", "all");
      const std::string kernels = args.value_or("--kernels", "");
      std::string seq_text, ctx_text;
      const bool has_seq = args.value("--max-seq", seq_text), has_ctx = args.value("--max-ctx", ctx_text);
      args.finish();
      if (logits != "all" && logits != "last") throw fused::cli::usage_error("--logits must be all or last");

      const fused::qwen2::config cfg = fused::io::load_hf_config(model).arch;
      auto number = [](const char* flag, const std::string& v) {
        std::size_t used = 0;
        long long x = 0;
        try {
          x = std::stoll(v, &used);
        } catch (...) {
          used = 0;
        }
        if (used != v.size() || x < 1) throw fused::cli::usage_error(std::string(flag) + ": '" + v + "' is not a positive integer");
        return static_cast<std::int64_t>(x);
      };
      const std::int64_t ctx = has_ctx ? number("--max-ctx", ctx_text) : std::min<std::int64_t>(4096, cfg.max_position_embeddings);
      const std::int64_t seq = has_seq ? number("--max-seq", seq_text) : std::min<std::int64_t>(512, ctx);
      fused::qwen2::graph_options o;
      o.logits = logits == "all" ? fused::qwen2::logits_rows::all : fused::qwen2::logits_rows::last;
      const fused::codegen::c_program p = fused::codegen::from_runtime(name, cfg, seq, ctx, o);
      const auto written = fused::codegen::write_bundle(fused::codegen::emit_all(p), out, header_dirs(kernels));
      std::fprintf(stderr, "fused gen-c: %s (prefill up to %lld tokens, KV cache %lld, logits %s) -> %s: %zu files, fingerprint %s\n", name.c_str(),
                   static_cast<long long>(seq), static_cast<long long>(ctx), logits.c_str(), out.c_str(), written.size(),
                   fused::codegen::hex64(fused::codegen::layout_fingerprint(p)).c_str());
      return 0;
    }};

}  // namespace
