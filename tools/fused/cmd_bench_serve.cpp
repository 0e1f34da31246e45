// `fused bench serve`: the server under load. For each --parallel count, the HTTP server of
// `fused serve` runs in this process on a loopback port and as many clients (httplib::Client, one
// thread each) send /v1/completions requests back to back until --requests are answered; reported:
// requests per second, generated tokens per second and the median request latency, the median of
// --reps runs, with the ratio to one session measured in the same run.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_util.hpp"
#include "cli.hpp"
#include "generation.hpp"
#include "serve_http.hpp"

namespace fused::cli::cmd_bench_serve {

struct options {
  std::string model_dir;
  std::vector<std::string> parallel{"1,2,4"};  // session counts, fused::cli::integer_list's forms
  long long requests = 32, max_tokens = 64, reps = 3, threads = 0;
};

// Prompts of a few lengths, each request its own seed: the sessions do different work.
constexpr const char* prompts[] = {"In the beginning", "And God said, Let there be light", "The LORD is my shepherd; I shall not want.",
                                   "Blessed are the poor in spirit: for theirs is the kingdom of heaven.", "And the earth was without form"};

struct load_result {
  double requests_per_s = 0, tokens_per_s = 0, latency_ms = 0;
};

load_result run_load(fused::cli::loaded_model& l, const options& o, int parallel) {
  fused::cli::serving::serve_options so;
  so.parallel = parallel;
  so.queue = parallel;  // each client waits for its answer: at most `parallel` requests are ever in flight
  so.log_requests = false;
  fused::cli::serving::server s(so, l, std::nullopt);
  const int port = s.bind("127.0.0.1", 0);
  if (port < 0) throw std::runtime_error("bench serve: cannot listen on a loopback port");
  std::thread listener([&] { s.listen(); });

  std::atomic<long long> next{0}, tokens{0}, failed{0};
  std::vector<std::vector<double>> latencies(static_cast<std::size_t>(parallel));
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < parallel; ++c)
    clients.emplace_back([&, c] {
      httplib::Client http("127.0.0.1", port);
      http.set_read_timeout(600);
      for (long long k; (k = next++) < o.requests;) {
        const nlohmann::json body = {{"prompt", prompts[static_cast<std::size_t>(k) % std::size(prompts)]},
                                     {"max_tokens", o.max_tokens},
                                     {"temperature", 0.8},
                                     {"seed", k}};
        const auto t0 = std::chrono::steady_clock::now();
        const auto res = http.Post("/v1/completions", fused::json_text::dump(body), "application/json");
        latencies[static_cast<std::size_t>(c)].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        if (!res || res->status != 200) {
          ++failed;
          continue;
        }
        tokens += fused::json_text::parse(res->body)["usage"]["completion_tokens"].get<long long>();
      }
    });
  for (std::thread& t : clients) t.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  s.shutdown(false);
  listener.join();
  if (failed) throw std::runtime_error("bench serve: " + std::to_string(failed.load()) + " requests failed");
  std::vector<double> all;
  for (const auto& v : latencies) all.insert(all.end(), v.begin(), v.end());
  return {.requests_per_s = static_cast<double>(o.requests) / wall,
          .tokens_per_s = static_cast<double>(tokens.load()) / wall,
          .latency_ms = fused::bench::median(all)};
}

int bench_serve(const options& o) {
  // Fewest sessions first: the last column compares each row with that one.
  const std::vector<long long> given = fused::cli::integer_list(o.parallel, "--parallel", 1, 256);
  std::vector<int> counts(given.begin(), given.end());
  if (counts.empty()) throw fused::cli::usage_error("--parallel: give at least one session count");
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  if (o.threads > 0) fk_set_threads(static_cast<int>(o.threads));
  fused::cli::loaded_model l = fused::cli::load_model(o.model_dir, 0);
  std::printf("fused bench serve: %s (%s, %lld positions a session), %s path, %d threads; %lld requests of up to %lld tokens per run, "
              "/v1/completions over loopback HTTP, median of %lld runs\n\n",
              l.name.c_str(), l.model->kind(), static_cast<long long>(l.model->capacity()), fk_isa_name(fk_isa_active()), fk_get_threads(),
              o.requests, o.max_tokens, o.reps);
  std::printf("| sessions | requests/s | generated tok/s | median latency (ms) | tok/s vs %d session%s |\n|---:|---:|---:|---:|---:|\n",
              counts.front(), counts.front() == 1 ? "" : "s");
  double one = 0;
  for (const int parallel : counts) {
    std::vector<double> rps, tps, lat;
    for (long long r = 0; r < o.reps; ++r) {
      const load_result x = run_load(l, o, parallel);
      rps.push_back(x.requests_per_s);
      tps.push_back(x.tokens_per_s);
      lat.push_back(x.latency_ms);
    }
    const double tok_s = fused::bench::median(tps);
    if (one == 0) one = tok_s;
    std::printf("| %d | %.1f | %.0f | %.1f | %.2f |\n", parallel, fused::bench::median(rps), tok_s, fused::bench::median(lat), tok_s / one);
    std::fflush(stdout);
  }
  return 0;
}

const fused::cli::command bench_serve_cmd{
    "bench serve", "the server under load: requests/s and tok/s with 1, 2 and 4 sessions", [](CLI::App& app) -> fused::cli::runner {
      auto o = std::make_shared<options>();
      using fused::cli::integer_in;
      app.add_option("-m,--model", o->model_dir, "Hugging Face model directory; default: the default model, run as a static model")->check(fused::cli::not_empty("give a model directory"));
      app.add_option("--parallel", o->parallel, "session counts to measure, e.g. 1,2,4")->default_str("1,2,4");
      app.add_option("--requests", o->requests, "requests per run")->transform(integer_in(1, 1 << 20));
      app.add_option("--max-tokens", o->max_tokens, "max_tokens of each request")->transform(integer_in(1, 1 << 20));
      app.add_option("--reps", o->reps, "runs per session count (the median is reported)")->transform(integer_in(1, 100));
      app.add_option("-t,--threads", o->threads, "threads for the kernels; 0 = all cores")->transform(integer_in(0, 1024));
      return [o] { return bench_serve(*o); };
    }};

}  // namespace fused::cli::cmd_bench_serve
