// `fused serve`: an OpenAI-compatible HTTP server (cpp-httplib) over the engine of serve_engine.hpp.
//   POST /v1/chat/completions, POST /v1/completions (streamed as server-sent events, or not),
//   GET /v1/models, GET /health.
// Memory is known before the first request: --parallel sessions of --ctx positions each, their KV
// caches in one region, printed at start. Requests beyond the sessions wait in a queue of
// --queue places; past that they get 503. Bad requests get a 4xx with an OpenAI-style error body.
// SIGINT / SIGTERM: stop accepting, answer the queued requests 503, let the running ones finish
// (a second signal cancels them), exit 0.
#include <netdb.h>
#include <pthread.h>
#include <sys/socket.h>

#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "cli.hpp"
#include "generation.hpp"
#include "serve_http.hpp"

namespace fused::cli::cmd_serve {

using options = fused::cli::serving::serve_options;
using fused::cli::serving::server;

double mib(std::size_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// --host as getaddrinfo reads it, before the model loads: httplib's bind says only that it failed.
void require_resolvable(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (const int error = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); error != 0) {
    const std::string what = "--host " + fused::cli::printable(host) + ": " + ::gai_strerror(error);
    // a name that does not exist is the command line's fault; a lookup that failed is not
    if (error == EAI_AGAIN || error == EAI_SYSTEM || error == EAI_MEMORY || error == EAI_FAIL) throw std::runtime_error(what);
    throw fused::cli::usage_error(what);
  }
  ::freeaddrinfo(found);
}

int serve(const options& o) {
  require_resolvable(o.host);
  if (o.threads > 0) fk_set_threads(static_cast<int>(o.threads));
  // SIGINT and SIGTERM go to a thread of their own (sigwait): blocked here, before any thread starts,
  // so that every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client that closes its connection is an error on write, not a signal

  fused::cli::loaded_model l = fused::cli::load_model(o.model_dir, o.ctx);
  std::optional<fused::io::chat_template> tmpl;
  try {
    tmpl = fused::cli::chat_template_for(l.dir, o.chat_template, l.tok);
  } catch (const fused::io::load_error& e) {
    std::fprintf(stderr, "[fused] /v1/chat/completions is off: %s\n", e.what());
  }
  server s(o, l, tmpl);
  const int port = s.bind(o.host, o.port);
  if (port < 0) throw std::runtime_error("cannot listen on " + o.host + ":" + std::to_string(o.port) + " (in use, or not an address of this host?)");
  const auto each = static_cast<std::size_t>(l.model->state_bytes());
  std::fprintf(stderr,
               "[fused] serve %s (%s, %s, %d threads): %d session%s x %lld positions, KV caches %.2f MiB (%d x %.2f MiB) in one region, "
               "arena %.2f MiB, weights %.2f MiB; queue %lld\n",
               l.name.c_str(), l.model->kind(), fk_isa_name(fk_isa_active()), fk_get_threads(), o.parallel, o.parallel == 1 ? "" : "s",
               static_cast<long long>(l.model->capacity()), mib(s.state_bytes()), o.parallel, mib(each),
               mib(static_cast<std::size_t>(l.model->arena_bytes())), mib(static_cast<std::size_t>(l.model->weights_bytes())), o.queue);
  // An IPv6 address goes in brackets in a URL (RFC 3986 3.2.2).
  const bool ipv6 = o.host.find(':') != std::string::npos;
  std::fprintf(stderr, "[fused] listening on http://%s%s%s:%d\n", ipv6 ? "[" : "", o.host.c_str(), ipv6 ? "]" : "", port);
  std::fflush(stderr);

  std::thread on_signal([&s, signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    std::fprintf(stderr, "[fused] %s: finishing the running requests (again to cancel them)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    std::thread second([&s, signals] {
      int again = 0;
      sigwait(&signals, &again);
      s.cancel_running();
    });
    second.detach();
    s.shutdown(false);
  });
  const bool ok = s.listen();
  if (!ok) pthread_kill(on_signal.native_handle(), SIGTERM);  // listening failed: the signal thread must not wait for ever
  on_signal.join();
  std::fprintf(stderr, "[fused] stopped\n");
  return ok ? 0 : 1;
}

const fused::cli::command serve_cmd{
    "serve", "an OpenAI-compatible HTTP server: /v1/chat/completions, /v1/completions, /v1/models, /health", [](CLI::App& app) -> fused::cli::runner {
      auto o = std::make_shared<options>();
      using fused::cli::integer_in;
      app.add_option("-m,--model", o->model_dir, "Hugging Face model directory; default: the default model, run as a static model")->check(fused::cli::not_empty("give a model directory"));
      app.add_option("--host", o->host, "the address to listen on; 0.0.0.0 = every interface")
          ->check(fused::cli::not_empty("give an address (127.0.0.1: this machine only; 0.0.0.0: every interface)"))
          ->capture_default_str();
      app.add_option("--port", o->port, "the port; 0 = any free one (printed)")->transform(integer_in(0, 65535))->capture_default_str();
      app.add_option("--parallel", o->parallel, "sessions answering at once, each with its own KV cache")->transform(integer_in(1, 256))->capture_default_str();
      app.add_option("--queue", o->queue, "requests that may wait for a session; more get 503")->transform(integer_in(0, 4096))->capture_default_str();
      app.add_option("-c,--ctx", o->ctx, "KV cache positions per session; 0 = max_position_embeddings, at most 4096 (the default model: its 512)")
          ->transform(integer_in(0, 1 << 30));
      app.add_option("--api-key", o->api_key, "require Authorization: Bearer KEY on /v1/ requests")
          ->check(fused::cli::not_empty("an empty key would let every request in: give a key, or leave --api-key out"));
      app.add_option("--alias", o->alias, "the model's name in responses and /v1/models; default: the directory's name")
          ->check(fused::cli::not_empty("give a name, or leave --alias out"));
      app.add_option("--chat-template", o->chat_template, "the chat format instead of the model's chat_template")
          ->check(fused::cli::chat_template_choices());
      app.add_option("--max-body", o->max_body, "largest request body in bytes; larger ones get 413")->transform(integer_in(1024, 1LL << 30))->capture_default_str();
      fused::cli::add_sampling_flags(app, o->how);  // the defaults of requests that give none
      app.add_option("-t,--threads", o->threads, "threads for the kernels; 0 = all cores")->transform(integer_in(0, 1024));
      return [o] { return serve(*o); };
    }};

}  // namespace fused::cli::cmd_serve
