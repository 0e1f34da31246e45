// `fused tokenize` and `fused detokenize`: text <-> token ids with a Hugging Face tokenizer.json.
//
//   fused tokenize --tokenizer tokenizer.json "Hello, world!"     -> [9707, 11, 1879, 0]
//   fused tokenize --tokenizer tokenizer.json --file notes.txt
//   fused tokenize --tokenizer tokenizer.json --bench kjv.txt     -> encode speed in MB/s
//   fused detokenize --tokenizer tokenizer.json 9707,11,1879,0    -> Hello, world!
//   fused tokenize ... --file notes.txt | fused detokenize --tokenizer tokenizer.json --file -
#include <cctype>
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <memory>
#include <string>
#include <vector>

#include <fused/io/tokenizer.hpp>

#include "cli.hpp"

namespace fused::cli::cmd_tokenize {

std::string read_all(const std::string& path) { return fused::cli::read_input_file(path, "the text to tokenize"); }

// Encodes the file five times. The first pass starts with an empty word cache; the best of the
// other four is reported too (every word cached: the pre-tokenizer and cache lookups alone).
// Throughput is given per wall-clock second and per CPU second, the latter being the steadier
// figure on a machine shared with other work.
int bench(const fused::io::tokenizer& tok, const std::string& path) {
  const std::string text = read_all(path);
  std::size_t n_tokens = 0;
  struct pass { double wall, cpu; };
  std::vector<pass> passes;
  for (int i = 0; i < 5; ++i) {
    const auto w0 = std::chrono::steady_clock::now();
    const std::clock_t c0 = std::clock();
    n_tokens = tok.encode(text).size();
    passes.push_back({std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count(),
                      static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC});
  }
  pass best = passes[1];
  for (std::size_t i = 2; i < passes.size(); ++i) best = {std::min(best.wall, passes[i].wall), std::min(best.cpu, passes[i].cpu)};
  const double mb = static_cast<double>(text.size()) / 1e6;
  std::printf("%s: %zu bytes -> %zu tokens (%.2f bytes/token)\n", path.c_str(), text.size(), n_tokens,
              static_cast<double>(text.size()) / static_cast<double>(n_tokens ? n_tokens : 1));
  std::printf("encode, first pass (empty word cache): %.1f MB/s wall, %.1f MB/s CPU\n", mb / passes[0].wall, mb / passes[0].cpu);
  std::printf("encode, best warm pass:                %.1f MB/s wall, %.1f MB/s CPU\n", mb / best.wall, mb / best.cpu);
  return 0;
}

struct options {
  std::string tokenizer, text, file, bench_file;
  std::vector<std::string> ids;
  bool no_special = false;
};

int run_tokenize(const options& o, bool has_text) {
  const auto tok = fused::io::tokenizer::from_file(o.tokenizer);
  if (!o.bench_file.empty()) return bench(tok, o.bench_file);
  const std::vector<std::int32_t> ids = tok.encode(has_text ? o.text : read_all(o.file), !o.no_special);
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  out += "]\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

// The ids of --file (a path, or - for standard input) as tokenize prints them, any layout
// parse_ids takes; what is wrong with them is the file's fault (exit 1), not the command line's.
std::vector<std::int32_t> ids_from_file(const std::string& path) {
  const std::string source = path == "-" ? "standard input" : path;
  std::istringstream text(fused::cli::read_input_file(path, "the token ids"));
  const std::vector<std::string> words{std::istream_iterator<std::string>(text), std::istream_iterator<std::string>()};
  std::vector<std::int32_t> ids;
  try {
    ids = fused::cli::parse_ids(words, source);
  } catch (const fused::cli::usage_error& e) {
    throw std::runtime_error(e.what());
  }
  // "[]" is tokenize's answer for empty text, and detokenizes to it; a file with nothing is a mistake.
  std::string joined;
  for (const std::string& w : words) joined += w;
  if (ids.empty() && joined != "[]") throw std::runtime_error(source + ": holds no token ids");
  return ids;
}

int run_detokenize(const options& o, bool from_file) {
  std::vector<std::int32_t> ids;
  if (from_file) {
    ids = ids_from_file(o.file);
  } else {
    ids = fused::cli::parse_ids(o.ids, "ids");
    if (ids.empty()) throw fused::cli::usage_error("give the token ids, e.g. 9707,11,1879");
  }
  const auto tok = fused::io::tokenizer::from_file(o.tokenizer);
  // decode() skips unknown ids, as a model's padded vocabulary needs; asked explicitly, an
  // unknown id is a mistake worth reporting.
  for (const std::int32_t id : ids)
    if (tok.token(id).empty())
      throw std::runtime_error("token id " + std::to_string(id) + " is not in " + o.tokenizer + " (vocab_size " + std::to_string(tok.vocab_size()) + ")");
  const std::string text = tok.decode(ids) + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

const fused::cli::command tokenize_cmd{
    "tokenize", "text -> token ids with a Hugging Face tokenizer.json", [](CLI::App& app) -> fused::cli::runner {
      auto o = std::make_shared<options>();
      app.add_option("--tokenizer", o->tokenizer, "the tokenizer.json")->required();
      auto* text = app.add_option("text", o->text, "the text (one argument: quote it; put -- before a text that starts with -)");
      auto* file = app.add_option("-f,--file", o->file, "encode this file's text (- = standard input)")->check(fused::cli::not_empty("give a file, or - for standard input"));
      auto* bench_file = app.add_option("--bench", o->bench_file, "time encoding this file (MB/s)");
      app.add_flag("--no-special", o->no_special, "encode special tokens' text as plain text");
      text->excludes(file)->excludes(bench_file);
      file->excludes(bench_file);
      return [o, text, file, bench_file] {
        if (text->count() + file->count() + bench_file->count() != 1)
          throw fused::cli::usage_error("give exactly one of TEXT (one argument; quote it), --file PATH, --bench PATH");
        return run_tokenize(*o, text->count() == 1);
      };
    }};

const fused::cli::command detokenize_cmd{
    "detokenize", "token ids -> text with a Hugging Face tokenizer.json", [](CLI::App& app) -> fused::cli::runner {
      auto o = std::make_shared<options>();
      app.add_option("--tokenizer", o->tokenizer, "the tokenizer.json")->required();
      auto* ids = app.add_option("ids", o->ids, "token ids: 1,2,3 or 1 2 3 or [1, 2, 3]");
      auto* file = app.add_option("-f,--file", o->file, "read the ids from this file (- = standard input), as tokenize prints them")->check(fused::cli::not_empty("give a file, or - for standard input"));
      ids->excludes(file);
      return [o, ids, file] {
        if (ids->count() + file->count() == 0) throw fused::cli::usage_error("give the token ids, e.g. 9707,11,1879, or --file PATH");
        return run_detokenize(*o, file->count() == 1);
      };
    }};

}  // namespace fused::cli::cmd_tokenize
