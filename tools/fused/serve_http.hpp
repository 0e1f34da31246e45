// The HTTP side of `fused serve` (cpp-httplib): routes, request checking, responses in the OpenAI
// format, streaming. `fused serve` runs it; `fused bench serve` runs it in-process to measure it.
#pragma once
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>
#include <cstdio>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "generation.hpp"
#include "serve_engine.hpp"

namespace fused::cli::serving {


using json = nlohmann::json;

struct serve_options {
  std::string model_dir, host = "127.0.0.1", api_key, alias, chat_template;
  int port = 8080, parallel = 1;
  long long ctx = 0, threads = 0, queue = 16, max_body = 1 << 20;
  fused::cli::sampling how;
  bool log_requests = true;  // a line on stderr per request
};

// A request the client got wrong: answered with `status` and an OpenAI-style error body.
struct bad_request : std::runtime_error {
  bad_request(int status_, std::string message, std::string param_ = {}, std::string code_ = {})
      : std::runtime_error(std::move(message)), status(status_), param(std::move(param_)), code(std::move(code_)) {}
  int status;
  std::string param, code;
};

// The offset of the first byte that is not part of well-formed UTF-8; npos when there is none.
inline std::size_t first_invalid_utf8(std::string_view s) {
  if (fused::io::tokenization::is_valid_utf8(s)) return std::string_view::npos;
  for (std::size_t i = 0; i < s.size();) {
    const auto unit = fused::io::tokenization::next_utf8_unit(s, i);
    if (unit.kind != fused::io::tokenization::utf8_unit::valid) return i;
    i += unit.size;
  }
  return std::string_view::npos;
}

inline json error_body(const std::string& message, const std::string& type, const std::string& param = {}, const std::string& code = {}) {
  return {{"error", {{"message", message}, {"type", type}, {"param", param.empty() ? json(nullptr) : json(param)},
                     {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

inline void send_error(httplib::Response& res, int status, const std::string& message, const std::string& param = {}, const std::string& code = {}) {
  const char* type = status == 401 ? "authentication_error" : status == 503 ? "server_busy" : status >= 500 ? "server_error" : "invalid_request_error";
  res.status = status;
  res.set_content(fused::json_text::dump(error_body(message, type, param, code), -1, fused::json_text::invalid_utf8::replace), "application/json");
}

// Whether httplib reads the body in chunks: it does for a Transfer-Encoding of exactly "chunked", in
// any case (httplib 0.11's is_chunked_transfer_encoding, which its shared library keeps to itself).
inline bool chunked(const httplib::Request& req) {
  const std::string coding = req.get_header_value("Transfer-Encoding");
  return coding.size() == 7 && std::equal(coding.begin(), coding.end(), "chunked", [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
}

// A Content-Length that is not a count of bytes: httplib reads "-5" as a huge one (a 413) and "abc"
// as 0 (the body then read as the next request). Both are the request's fault: a 400 naming it.
inline bool content_length_garbled(const httplib::Request& req) {
  if (!req.has_header("Content-Length")) return false;
  const std::string length = req.get_header_value("Content-Length");
  return length.empty() || length.find_first_not_of("0123456789") != std::string::npos;
}
inline void send_garbled_length(const httplib::Request& req, httplib::Response& res) {
  send_error(res, 400, "the Content-Length header '" + req.get_header_value("Content-Length") + "' is not a number of bytes");
}

// The request's fields, checked: a wrong type or value names the field.
class fields {
 public:
  explicit fields(const json& j) : j_(j) {}
  const json* get(const char* name) const {
    const auto it = j_.find(name);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  double number(const char* name, double fallback, double lo, double hi) const {
    const json* v = get(name);
    if (!v) return fallback;
    if (!v->is_number() || !(v->get<double>() >= lo && v->get<double>() <= hi))
      throw bad_request(400, std::string(name) + " must be a number in [" + fmt(lo) + ", " + fmt(hi) + "], got " + fused::json_text::dump(*v), name);
    return v->get<double>();
  }
  long long integer(const char* name, long long fallback, long long lo, long long hi) const {
    const json* v = get(name);
    if (!v) return fallback;
    // JSON's non-negative integers are unsigned (up to 2^64 - 1): compared as such, against both bounds.
    const bool in_range = v->is_number_integer() &&
                          (v->is_number_unsigned() ? hi >= 0 && v->get<std::uint64_t>() <= static_cast<std::uint64_t>(hi) &&
                                                         (lo <= 0 || v->get<std::uint64_t>() >= static_cast<std::uint64_t>(lo))
                                                   : v->get<long long>() >= lo && v->get<long long>() <= hi);
    if (!in_range)
      throw bad_request(400, std::string(name) + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + fused::json_text::dump(*v), name);
    return v->get<long long>();
  }
  // An integer in [0, 2^64 - 1] (a seed, as fused run -s takes one).
  std::uint64_t unsigned_integer(const char* name, std::uint64_t fallback) const {
    const json* v = get(name);
    if (!v) return fallback;
    if (!v->is_number_unsigned()) throw bad_request(400, std::string(name) + " must be an integer in [0, 18446744073709551615], got " + fused::json_text::excerpt(*v), name);
    return v->get<std::uint64_t>();
  }
  bool boolean(const char* name, bool fallback) const {
    const json* v = get(name);
    if (!v) return fallback;
    if (!v->is_boolean()) throw bad_request(400, std::string(name) + " must be true or false", name);
    return v->get<bool>();
  }

 private:
  static std::string fmt(double x) {
    std::string s = std::to_string(x);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }
  const json& j_;
};

// The credentials of an Authorization header "Bearer TOKEN"; the scheme is case-insensitive (RFC 9110).
inline std::string bearer_token(const std::string& header) {
  if (header.size() < 7 || header[6] != ' ') return {};
  std::string scheme = header.substr(0, 6);
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return scheme == "bearer" ? header.substr(7) : std::string{};
}

// httplib's ThreadPool, whose threads all start at once: where the system gives fewer (a memory
// limit, a thread cap), its constructor throws with the started threads joinable, and the process
// aborts. This pool stops and joins those and throws a sentence instead, before the server listens.
class connection_pool final : public httplib::TaskQueue {
 public:
  explicit connection_pool(std::size_t threads) {
    try {
      for (std::size_t k = 0; k < threads; ++k) threads_.emplace_back([this] { work(); });
    } catch (const std::system_error& e) {
      const std::size_t started = threads_.size();
      shutdown();
      throw std::runtime_error("cannot start " + std::to_string(threads) + " connection threads (started " + std::to_string(started) +
                               ": " + e.what() + "); lower --queue or --parallel");
    }
  }
  ~connection_pool() override { shutdown(); }
  void enqueue(std::function<void()> job) override {
    {
      std::lock_guard lock(mutex_);
      jobs_.push_back(std::move(job));
    }
    wake_.notify_one();
  }
  void shutdown() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_)
      if (t.joinable()) t.join();
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stopping, and every accepted connection served
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }
  std::vector<std::thread> threads_;
  std::deque<std::function<void()>> jobs_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
};

class server {
 public:
  server(const serve_options& o, fused::cli::loaded_model& l, std::optional<fused::io::chat_template> tmpl)
      : o_(o), l_(l), tmpl_(std::move(tmpl)), engine_(l, o.parallel, static_cast<std::size_t>(o.queue), o.log_requests) {
    // One thread per connection, from its first byte: the sessions, the queue, and 32 more for /health,
    // refusals and clients still sending their request (a browser's idle preconnects, a slow link:
    // httplib 0.11 bounds each read to 5 s, not the whole request; docs/SERVING.md).
    const std::size_t threads = static_cast<std::size_t>(o.parallel) + static_cast<std::size_t>(o.queue) + 32;
    pool_ = std::make_unique<connection_pool>(threads);  // here, where a failure is a sentence, not in listen()
    http_.new_task_queue = [this, threads]() -> httplib::TaskQueue* { return pool_ ? pool_.release() : new connection_pool(threads); };
    http_.set_payload_max_length(static_cast<std::size_t>(o.max_body));
    // One request per connection: each response says "Connection: close". httplib 0.11 reads each
    // request of a kept-alive connection through a buffer of its own, so a request sent before the
    // previous one's answer (pipelining) was read into the old buffer and dropped, its client left
    // waiting; closing tells it, as HTTP/1.1 says, that what it sent after was not read (RFC 9112
    // 9.3.2, 9.6). It also keeps idle connections from holding the pool's threads for the keep-alive
    // timeout. A new connection costs well under a millisecond; a completion, milliseconds to seconds.
    http_.set_keep_alive_max_count(1);
    // httplib's default options add SO_REUSEPORT, with which a second server binds a port in use and
    // the kernel splits the connections between the two; SO_REUSEADDR alone still lets a restarted
    // server bind while the old one's connections linger in TIME_WAIT.
    http_.set_socket_options([](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      // A refusal of a request whose body's end is unknown: the body is not read, so the connection
      // closes (whatever follows on it would be read as the next request).
      const auto closing = [&res] {
        res.set_header("Connection", "close");
        return httplib::Server::HandlerResponse::Handled;
      };
      // Two Content-Length headers leave where the body ends ambiguous (RFC 9112 6.3: refuse such a
      // request); httplib would read the first.
      if (const std::size_t lengths = req.get_header_value_count("Content-Length"); lengths > 1) {
        send_error(res, 400, "the request has " + std::to_string(lengths) + " Content-Length headers; send one");
        return closing();
      }
      if (content_length_garbled(req)) {
        send_garbled_length(req, res);
        return closing();
      }
      // A POST whose body has no stated end: httplib 0.11 would wait out its read timeout for one.
      if (req.method == "POST" && !req.has_header("Content-Length") && !chunked(req)) {
        send_error(res, 411, "a POST needs a Content-Length header (or Transfer-Encoding: chunked)");
        return closing();
      }
      if (o_.api_key.empty() || req.path.rfind("/v1/", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
      if (bearer_token(req.get_header_value("Authorization")) == o_.api_key) return httplib::Server::HandlerResponse::Unhandled;
      send_error(res, 401, "invalid or missing API key (send Authorization: Bearer KEY)", "", "invalid_api_key");
      return httplib::Server::HandlerResponse::Handled;
    });
    // Expect: 100-continue with a Content-Length over --max-body: refused before the client sends the
    // body (httplib answered 100, read all of it, then 413).
    http_.set_expect_100_continue_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!req.has_header("Content-Length") || content_length_garbled(req)) return 100;  // the pre-routing handler answers those
      const std::string length = req.get_header_value("Content-Length");
      std::uint64_t bytes = 0;
      const std::errc error = std::from_chars(length.data(), length.data() + length.size(), bytes).ec;
      if (error == std::errc() && bytes <= static_cast<std::uint64_t>(o_.max_body)) return 100;
      send_error(res, 413, "the request body is larger than the server's limit (--max-body)");
      return 413;  // httplib closes the connection after it
    });
    // Whatever httplib answers itself (404, 413 for a body over --max-body, 400 for a malformed
    // request line) gets the same kind of body as ours.
    http_.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      const std::string post_only[] = {"/v1/chat/completions", "/v1/completions"}, get_only[] = {"/health", "/v1/models"};
      const bool wants_post = std::find(std::begin(post_only), std::end(post_only), req.path) != std::end(post_only);
      const bool wants_get = std::find(std::begin(get_only), std::end(get_only), req.path) != std::end(get_only);
      if (res.status == 404 && (wants_post || wants_get)) {
        res.set_header("Allow", wants_post ? "POST" : "GET");
        return send_error(res, 405, req.method + " is not allowed on " + req.path + ": use " + (wants_post ? "POST" : "GET"));
      }
      if (res.status == 413 && content_length_garbled(req)) return send_garbled_length(req, res);
      const std::string message = res.status == 404 ? "no route for " + req.method + " " + req.path
                                  : res.status == 413 ? "the request body is larger than the server's limit (--max-body)"
                                                      : "the request could not be read (HTTP " + std::to_string(res.status) + ")";
      res.set_content(fused::json_text::dump(error_body(message, "invalid_request_error"), -1, fused::json_text::invalid_utf8::replace), "application/json");
    });
    http_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr e) {
      std::string what = "internal error";
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        what = x.what();
      } catch (...) {
      }
      send_error(res, 500, what);
    });
    http_.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      // While a signal drains the running requests: 503, so that a load balancer sends no more.
      const bool stopping = engine_.stopping();
      if (stopping) res.status = 503;
      res.set_content(fused::json_text::dump(json{{"status", stopping ? "stopping" : "ok"}, {"sessions", o_.parallel}, {"busy", engine_.busy()}, {"queued", engine_.queued()}}, -1, fused::json_text::invalid_utf8::replace), "application/json");
    });
    http_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(fused::json_text::dump(json{{"object", "list"}, {"data", {{{"id", model_name()}, {"object", "model"}, {"created", started_}, {"owned_by", "fused"}}}}}, -1, fused::json_text::invalid_utf8::replace),
                      "application/json");
    });
    // The routes read their bodies themselves: httplib 0.11 holds a body to --max-body only through its
    // Content-Length, and read a chunked one (Transfer-Encoding: chunked) of any size into memory.
    http_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read) {
      handle(req, res, read, true);
    });
    http_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read) {
      handle(req, res, read, false);
    });
  }

  int bind(const std::string& host, int port) {
    if (port == 0) return http_.bind_to_any_port(host);
    return http_.bind_to_port(host, port) ? port : -1;
  }
  bool listen() { return http_.listen_after_bind(); }
  // SIGINT/SIGTERM: no new requests, the queued ones 503, the running ones finish; then stop.
  void shutdown(bool cancel) {
    if (cancel) engine_.cancel_running();
    engine_.shutdown(!cancel);
    http_.stop();
  }
  void cancel_running() { engine_.cancel_running(); }
  std::size_t state_bytes() const { return engine_.state_bytes(); }

 private:
  std::string model_name() const { return o_.alias.empty() ? l_.name : o_.alias; }

  static std::string text_of_content(const json& content, std::size_t i) {
    const std::string field = "messages[" + std::to_string(i) + "].content";
    if (content.is_string()) return content.get<std::string>();
    if (content.is_null()) return {};
    if (!content.is_array()) throw bad_request(400, field + " must be a string or an array of text parts", field);
    std::string text;
    for (std::size_t k = 0; k < content.size(); ++k) {
      const json& part = content[k];
      const std::string where = field + "[" + std::to_string(k) + "]";
      if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") || !part["text"].is_string())
        throw bad_request(400, where + " must be {\"type\": \"text\", \"text\": \"...\"} (this model reads text only)", where);
      text += part["text"].get<std::string>();
    }
    return text;
  }

  std::vector<fused::io::chat_message> messages_of(const json& body) const {
    const auto it = body.find("messages");
    if (it == body.end()) throw bad_request(400, "messages is required", "messages");
    if (!it->is_array() || it->empty()) throw bad_request(400, "messages must be a non-empty array", "messages");
    std::vector<fused::io::chat_message> messages;
    for (std::size_t i = 0; i < it->size(); ++i) {
      const json& m = (*it)[i];
      const std::string field = "messages[" + std::to_string(i) + "]";
      if (!m.is_object()) throw bad_request(400, field + " must be an object", field);
      const auto role = m.find("role");
      if (role == m.end() || !role->is_string()) throw bad_request(400, field + ".role must be a string", field + ".role");
      const auto content = m.find("content");
      if (content == m.end()) throw bad_request(400, field + ".content is required", field + ".content");
      messages.push_back({role->get<std::string>(), text_of_content(*content, i)});
    }
    return messages;
  }

  std::vector<std::string> stops_of(const fields& f) const {
    const json* v = f.get("stop");
    if (!v) return {};
    std::vector<std::string> stops;
    if (v->is_string()) stops.push_back(v->get<std::string>());
    else if (v->is_array() && v->size() <= 16) {
      for (const json& s : *v) {
        if (!s.is_string()) throw bad_request(400, "stop must be a string or an array of up to 16 strings", "stop");
        stops.push_back(s.get<std::string>());
      }
    } else {
      throw bad_request(400, "stop must be a string or an array of up to 16 strings", "stop");
    }
    for (const std::string& s : stops)
      if (s.empty()) throw bad_request(400, "stop strings must not be empty", "stop");
    return stops;
  }

  // The request as the engine takes it, every field checked.
  std::shared_ptr<request> parse(const std::string& text, bool chat, json& body, bool& stream, bool& usage_in_stream) const {
    if (const std::size_t bad = first_invalid_utf8(text); bad != std::string::npos)
      throw bad_request(400, "the request body is not valid UTF-8 (byte " + std::to_string(bad) + ")");
    // A key twice in one object is refused, not read last-wins (a proxy may have read the first), and
    // nesting is bounded: no request needs more than a few levels.
    std::vector<std::unordered_set<std::string>> keys;  // of each open object
    const auto strict = [&](int depth, json::parse_event_t event, json& parsed) {
      constexpr int max_depth = 32;
      if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) && depth >= max_depth)
        throw bad_request(400, "the request body nests deeper than " + std::to_string(max_depth) + " levels");
      if (event == json::parse_event_t::object_start) keys.emplace_back();
      if (event == json::parse_event_t::object_end) keys.pop_back();
      if (event == json::parse_event_t::key) {
        const std::string& key = parsed.get_ref<const std::string&>();
        if (!keys.back().insert(key).second)
          throw bad_request(400, "the request body has the key " + fused::json_text::excerpt(json(key)) + " twice in one object", key.substr(0, 60));
      }
      return true;
    };
    try {
      body = fused::json_text::parse(text, strict);
    } catch (const json::exception& e) {
      throw bad_request(400, "the request body is not valid JSON: " + fused::json_text::reason(e));
    }
    if (!body.is_object()) throw bad_request(400, "the request body must be a JSON object");
    const fields f(body);
    auto r = std::make_shared<request>();
    if (const json* n = f.get("n"); n && (!n->is_number_integer() || n->get<long long>() != 1))
      throw bad_request(400, "n must be 1 (one choice per request)", "n");
    for (const char* unsupported : {"frequency_penalty", "presence_penalty"})
      if (f.number(unsupported, 0, -2, 2) != 0) throw bad_request(400, std::string(unsupported) + " is not supported (use repeat_penalty)", unsupported);
    // Fields that would change the answer and that fused does not do: refused unless they ask for
    // what it does anyway (an empty logit_bias, best_of 1, echo false, ...), never ignored.
    const auto refuse_unless = [&](const char* name, auto neutral, const char* why) {
      if (const json* v = f.get(name); v && !neutral(*v)) throw bad_request(400, std::string(name) + " " + why, name);
    };
    const auto is_false_or_zero = [](const json& v) { return v == false || v == 0; };
    const auto is_empty = [](const json& v) { return (v.is_object() || v.is_array() || v.is_string()) && v.empty(); };
    refuse_unless("logprobs", [](const json& v) { return v == false; }, "is not supported");  // a completion's 0 asks for the chosen tokens'
    refuse_unless("top_logprobs", is_false_or_zero, "is not supported");
    refuse_unless("logit_bias", is_empty, "is not supported");
    refuse_unless("best_of", [](const json& v) { return v == 1; }, "must be 1 (one choice per request)");
    refuse_unless("echo", is_false_or_zero, "is not supported");
    refuse_unless("suffix", is_empty, "is not supported (no fill-in-the-middle)");
    refuse_unless("response_format", [](const json& v) { return v == json{{"type", "text"}}; }, "is not supported: only {\"type\": \"text\"}");
    refuse_unless("tools", is_empty, "are not supported (no function calling)");
    refuse_unless("functions", is_empty, "are not supported (no function calling)");
    refuse_unless("tool_choice", [](const json& v) { return v == "none" || v == "auto"; }, "is not supported (no function calling)");
    refuse_unless("function_call", [](const json& v) { return v == "none" || v == "auto"; }, "is not supported (no function calling)");
    refuse_unless("modalities", [](const json& v) { return v == json::array({"text"}); }, "is not supported: only [\"text\"]");
    for (const char* output_option : {"audio", "web_search_options", "prediction"})  // present (even {}), each asks for what fused does not do
      refuse_unless(output_option, [](const json&) { return false; }, "is not supported");
    if (const json* model = f.get("model"); model && !model->is_string()) throw bad_request(400, "model must be a string", "model");
    stream = f.boolean("stream", false);
    usage_in_stream = false;
    if (const json* so = f.get("stream_options")) {
      if (!so->is_object()) throw bad_request(400, "stream_options must be an object", "stream_options");
      if (!stream) throw bad_request(400, "stream_options is only for a streamed answer (\"stream\": true)", "stream_options");
      usage_in_stream = fields(*so).boolean("include_usage", false);
    }
    r->how = o_.how;
    r->how.temp = f.number("temperature", o_.how.temp, 0, 100);
    r->how.top_p = f.number("top_p", o_.how.top_p, 0, 1);
    r->how.min_p = f.number("min_p", o_.how.min_p, 0, 1);
    r->how.top_k = f.integer("top_k", o_.how.top_k, 0, 1 << 30);
    r->how.repeat_penalty = f.number("repeat_penalty", o_.how.repeat_penalty, 0.01, 100);
    r->seed = f.unsigned_integer("seed", std::random_device{}());
    // Two names of one limit (max_tokens is the older): both may be given only alike.
    const long long max_completion_tokens = f.integer("max_completion_tokens", -1, 0, 1 << 30);
    r->max_tokens = f.integer("max_tokens", max_completion_tokens, 0, 1 << 30);
    if (max_completion_tokens >= 0 && r->max_tokens != max_completion_tokens)
      throw bad_request(400, "max_tokens (" + std::to_string(r->max_tokens) + ") and max_completion_tokens (" + std::to_string(max_completion_tokens) +
                                 ") disagree: give one", "max_tokens");
    r->stops = stops_of(f);
    r->stop_ids = l_.eos;
    if (chat) {
      if (!tmpl_) throw bad_request(400, "this model has no chat template fused renders: start the server with --chat-template chatml|llama2|llama3|mistral");
      const std::vector<fused::io::chat_message> messages = messages_of(body);
      try {
        r->prompt = tmpl_->encode(l_.tok, messages);
      } catch (const std::invalid_argument& e) {
        throw bad_request(400, e.what(), "messages");
      }
      if (r->prompt.empty()) throw bad_request(400, "the messages render to no tokens with this chat template", "messages");
      for (const std::int32_t id : tmpl_->end_of_turn_ids(l_.tok)) r->stop_ids.push_back(id);
    } else {
      const json* prompt = f.get("prompt");
      if (prompt && prompt->is_array() && prompt->size() == 1) prompt = &(*prompt)[0];
      if (!prompt || !prompt->is_string()) throw bad_request(400, "prompt must be a string (or an array of one string)", "prompt");
      r->prompt = l_.tok.encode(prompt->get<std::string>(), false);
      if (r->prompt.empty()) throw bad_request(400, "the prompt encodes to no tokens", "prompt");
      r->prompt.insert(r->prompt.begin(), l_.tok.prompt_prefix().begin(), l_.tok.prompt_prefix().end());
    }
    const std::int64_t capacity = l_.model->capacity();
    if (static_cast<std::int64_t>(r->prompt.size()) + 1 > capacity)
      throw bad_request(400, fused::cli::prompt_too_long(static_cast<std::int64_t>(r->prompt.size()), capacity), chat ? "messages" : "prompt",
                        "context_length_exceeded");
    return r;
  }

  json usage_of(const request& r) const {
    return {{"prompt_tokens", r.prompt_tokens}, {"completion_tokens", r.completion_tokens}, {"total_tokens", r.prompt_tokens + r.completion_tokens}};
  }

  // The body, read up to --max-body (a longer one is left unread: the connection closes after the 413).
  // A failed read leaves its status in `res`: 413 for a Content-Length over the limit, 400 otherwise.
  std::optional<std::string> read_body(const httplib::ContentReader& read, httplib::Response& res) const {
    std::string text;
    bool over = false;
    const bool complete = read([&](const char* data, std::size_t size) {
      over = size > static_cast<std::size_t>(o_.max_body) - text.size();
      if (!over) text.append(data, size);
      return !over;
    });
    if (complete) return text;
    if (over) res.status = 413;
    if (res.status != 413) res.status = 400;
    return std::nullopt;
  }

  // The reply goes out as it is written: in chunks to HTTP/1.1, and to HTTP/1.0 (which has no chunked
  // encoding: RFC 9112 7.1) as a body the closed connection ends.
  template <class Provider>
  static void reply_with(const httplib::Request& req, httplib::Response& res, const char* type, Provider&& provider,
                         std::function<void(bool)> on_end) {
    if (req.version == "HTTP/1.0") {
      res.set_content_provider(type, std::forward<Provider>(provider), std::move(on_end));
    } else {
      res.set_chunked_content_provider(type, std::forward<Provider>(provider), std::move(on_end));
    }
  }

  void handle(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read, bool chat) {
    const std::optional<std::string> body_text = read_body(read, res);
    if (!body_text) return;  // the error handler writes the body
    json body;
    bool stream = false, usage_in_stream = false;
    std::shared_ptr<request> r;
    try {
      r = parse(*body_text, chat, body, stream, usage_in_stream);
    } catch (const bad_request& e) {
      return send_error(res, e.status, e.what(), e.param, e.code);
    }
    r->id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(++next_id_);
    if (!engine_.submit(r))
      return send_error(res, 503, engine_.stopping() ? "the server is shutting down"
                                                     : "the server is busy: every session is in use and the queue is full; try again later");
    // Wait for a session (or the shutdown's rejection), then for the prompt's run and the first token,
    // before the status goes out: a rejection is a 503, a model that fails on the prompt (logits not
    // finite) a 500. The prompt runs as one call, which a client that goes away would not stop either.
    {
      std::unique_lock lk(r->m);
      r->cv.wait(lk, [&] { return r->at == request::phase::done || r->at == request::phase::rejected || r->completion_tokens > 0; });
      if (r->at == request::phase::rejected || !r->error.empty()) {
        const int status = r->at == request::phase::rejected ? 503 : 500;
        const std::string error = r->error;
        lk.unlock();
        return send_error(res, status, error);
      }
    }
    const std::string id = r->id;
    const std::time_t created = std::time(nullptr);
    const std::string model = model_name();
    const auto on_end = [r](bool success) {
      if (!success) r->cancelled = true;  // the client went away: its session is freed
    };
    if (stream) {
      res.set_header("Cache-Control", "no-cache");
      reply_with(
          req, res, "text/event-stream",
          [this, r, id, created, model, chat, usage_in_stream, first = true](std::size_t, httplib::DataSink& sink) mutable {
            bool finished = false;
            const std::string text = r->take(std::chrono::milliseconds(500), &finished);
            const auto send = [&](const json& chunk) {
              const std::string event = "data: " + fused::json_text::dump(chunk, -1, fused::json_text::invalid_utf8::replace) + "\n\n";
              return sink.write(event.data(), event.size());
            };
            const auto chunk_of = [&](const std::string& piece, const json& finish) {
              json choice = chat ? json{{"index", 0}, {"delta", json::object()}, {"finish_reason", finish}}
                                 : json{{"index", 0}, {"text", piece}, {"logprobs", nullptr}, {"finish_reason", finish}};
              if (chat && first) choice["delta"]["role"] = "assistant";
              if (chat && !piece.empty()) choice["delta"]["content"] = piece;
              first = false;
              return json{{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"}, {"created", created}, {"model", model},
                          {"choices", json::array({choice})}};
            };
            if (!text.empty() && !send(chunk_of(text, nullptr))) return false;
            if (!finished) {
              // Nothing new: a comment line, so that a client that has gone away is noticed.
              static constexpr char keep_alive[] = ": waiting\n\n";
              return text.empty() ? sink.write(keep_alive, sizeof keep_alive - 1) : true;
            }
            std::lock_guard lk(r->m);
            if (!r->error.empty()) {
              const std::string event = "data: " + fused::json_text::dump(error_body(r->error, "server_error"), -1, fused::json_text::invalid_utf8::replace) + "\n\n";
              sink.write(event.data(), event.size());
            } else {
              if (!send(chunk_of("", r->finish_reason))) return false;
              if (usage_in_stream) {
                json u = chunk_of("", nullptr);
                u["choices"] = json::array();
                u["usage"] = usage_of(*r);
                if (!send(u)) return false;
              }
            }
            static constexpr char done[] = "data: [DONE]\n\n";
            sink.write(done, sizeof done - 1);
            sink.done();
            return true;
          },
          on_end);
      return;
    }
    // Not streamed: the body is sent when the reply is complete; until then a space now and then
    // (JSON allows leading whitespace) finds out whether the client is still there.
    reply_with(
        req, res, "application/json",
        [this, r, id, created, model, chat, reply = std::string(), last_write = std::chrono::steady_clock::now()](std::size_t,
                                                                                                                 httplib::DataSink& sink) mutable {
          bool finished = false;
          reply += r->take(std::chrono::milliseconds(250), &finished);
          if (!finished) {
            if (std::chrono::steady_clock::now() - last_write < std::chrono::milliseconds(250)) return true;
            last_write = std::chrono::steady_clock::now();
            return sink.write(" ", 1);
          }
          std::lock_guard lk(r->m);
          json out;
          if (!r->error.empty()) {
            out = error_body(r->error, "server_error");
          } else {
            json choice = chat ? json{{"index", 0}, {"message", {{"role", "assistant"}, {"content", reply}}}, {"finish_reason", r->finish_reason}}
                               : json{{"index", 0}, {"text", reply}, {"logprobs", nullptr}, {"finish_reason", r->finish_reason}};
            out = {{"id", id}, {"object", chat ? "chat.completion" : "text_completion"}, {"created", created}, {"model", model},
                   {"choices", json::array({choice})}, {"usage", usage_of(*r)}};
          }
          const std::string text = fused::json_text::dump(out, -1, fused::json_text::invalid_utf8::replace);
          sink.write(text.data(), text.size());
          sink.done();
          return true;
        },
        on_end);
  }

  const serve_options& o_;
  fused::cli::loaded_model& l_;
  std::optional<fused::io::chat_template> tmpl_;
  fused::cli::engine engine_;
  httplib::Server http_;
  std::unique_ptr<connection_pool> pool_;  // handed to http_ when it listens
  std::atomic<std::uint64_t> next_id_{0};
  std::time_t started_ = std::time(nullptr);
};

}  // namespace fused::cli::serving
