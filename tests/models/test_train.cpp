// A train step as one program (train/step.hpp, graph/reverse.hpp, models/decoder_train.hpp):
// tiny_a's loss and loss after one AdamW step against torch (train_reference.json), every family's
// gradients against finite differences of its own loss, the loss falling over steps, one verified
// plan, bitwise the same on 1 and 2 threads, and a clear error for an op with no backward rule.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <fstream>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>

#include <fused/core/json_text.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fused/core/text_string.hpp>
#include <fused/models/decoder_static_train.hpp>
#include <fused/models/decoder_train.hpp>
#include <fused/models/hf_config.hpp>
#include <fused/ops/graph_ops.hpp>
#include <fused/plan/json.hpp>
#include <fused/runtime/static_run.hpp>

#include "../reference_presets.hpp"

namespace {

std::string dir_of(const std::string& name) { return std::string(FUSED_TEST_DATA) + "/reference/" + name; }

struct tiny {
  fused::decoder::hf_model_info info;
  fused::decoder::trainer t;
  std::vector<fused::tensor_info> stored;

  tiny(const std::string& name, std::int64_t tokens, fused::train::options o = {.keep_gradients = true})
      : info(fused::decoder::load_hf_model_info(dir_of(name))), t(*info.family, info.arch, {.sequences = 1, .tokens = tokens}, {.train = o}),
        stored(t.checkpoint_tensors()) {
    t.load(fused::runtime::weight_store::load(dir_of(name), stored, info.arch.tie_word_embeddings));
  }
};

// tiny_llama's config (with attention dropout p where one is given) and the weights its trainer
// stores, as loaded: the setup the batch, data-parallel and dropout tests share.
struct tiny_llama {
  fused::decoder::hf_model_info info;
  fused::runtime::weight_store w;
  explicit tiny_llama(std::optional<double> attention_dropout = std::nullopt)
      : info(with_dropout(fused::decoder::load_hf_model_info(dir_of("tiny_llama")), attention_dropout)),
        w(fused::runtime::weight_store::load(dir_of("tiny_llama"),
                                             fused::decoder::trainer(*info.family, info.arch, {.tokens = 9}).checkpoint_tensors(),
                                             info.arch.tie_word_embeddings)) {}
  static fused::decoder::hf_model_info with_dropout(fused::decoder::hf_model_info i, std::optional<double> p) {
    if (p) i.arch.attention_dropout = *p;
    return i;
  }
};

std::vector<std::int32_t> tokens_of(std::int64_t n, std::int64_t vocab, std::uint32_t seed) {
  std::vector<std::int32_t> ids;
  std::uint32_t s = seed;
  for (std::int64_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    ids.push_back(static_cast<std::int32_t>((s >> 8) % static_cast<std::uint32_t>(vocab)));
  }
  return ids;
}

}  // namespace

TEST_CASE("tiny_a: one train step's loss and the loss after AdamW match torch") {
  std::ifstream f(dir_of("tiny_a") + "/train_reference.json");
  REQUIRE(f.good());
  const nlohmann::json ref = fused::json_text::parse(f);
  const std::vector<std::int32_t> ids = ref["tokens"].get<std::vector<std::int32_t>>();
  const auto& h = ref["adamw"];
  tiny m("tiny_a", static_cast<std::int64_t>(ids.size()),
         {.optimizer = {.beta1 = h["betas"][0], .beta2 = h["betas"][1], .eps = h["eps"], .weight_decay = h["weight_decay"]}});
  const auto lr = h["lr"].get<float>();
  const float loss = m.t.step(ids, lr), loss_after = m.t.step(ids, lr);
  const double want = ref["loss"], want_after = ref["loss_after"];
  CHECK(std::fabs(loss - want) <= 1e-5 * want);
  CHECK(std::fabs(loss_after - want_after) <= 1e-4 * want_after);
}

TEST_CASE("tiny_a: three SGD steps (momentum, dampening, Nesterov, weight decay) follow torch.optim.SGD") {
  std::ifstream f(dir_of("tiny_a") + "/train_sgd_reference.json");
  REQUIRE(f.good());
  const nlohmann::json ref = fused::json_text::parse(f);
  const std::vector<std::int32_t> ids = ref["tokens"].get<std::vector<std::int32_t>>();
  const auto lr = ref["lr"].get<float>();
  for (const auto& c : ref["cases"]) {
    CAPTURE(c["momentum"].get<double>());
    CAPTURE(c["dampening"].get<double>());
    CAPTURE(c["nesterov"].get<bool>());
    tiny m("tiny_a", static_cast<std::int64_t>(ids.size()),
           {.sgd = {.momentum = c["momentum"], .dampening = c["dampening"], .weight_decay = c["weight_decay"], .nesterov = c["nesterov"]},
            .use = fused::train::method::sgd});
    const auto& want = c["losses"];
    const auto steps = ref["steps"].get<std::size_t>();
    REQUIRE(want.size() == steps + 1);
    for (std::size_t k = 0; k < steps; ++k) {
      CAPTURE(k);
      const float loss = m.t.step(ids, lr);
      CHECK(std::fabs(loss - want[k].get<double>()) <= 1e-5 * want[k].get<double>());
    }
    double worst = 0;  // the parameters after `steps` steps, at the reference's sampled elements
    for (std::size_t k = 0; k < m.t.prog().parameters.size(); ++k) {
      const std::span<float> p = m.t.parameter(k);
      for (const auto& [index, value] : c["parameters_after"][m.t.parameter_name(k)].items())
        worst = std::max(worst, std::fabs(static_cast<double>(p[std::stoul(index)]) - value.get<double>()));
    }
    const float after = m.t.step(ids, lr);  // this call's loss is the parameters' after the last step
    CHECK(std::fabs(after - want[steps].get<double>()) <= 1e-5 * want[steps].get<double>());
    CHECK(worst < 2e-6);
  }
}

TEST_CASE("an f32 checkpoint's values are the master weights exactly, not rounded to bf16") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "fused_test_train_f32";
  fs::create_directories(dir);
  fs::copy_file(dir_of("tiny_a") + "/config.json", dir / "config.json", fs::copy_options::overwrite_existing);
  // tiny_a's bf16 weights widened, with low mantissa bits no bf16 holds.
  const fused::io::safetensors_file bf16 = fused::io::safetensors_file::open(dir_of("tiny_a") + "/model.safetensors");
  std::vector<std::vector<float>> values;
  std::vector<fused::io::tensor_data> out;
  for (const fused::io::tensor_view& t : bf16.tensors()) {
    std::vector<float> v = fused::io::to_f32_owned(t);
    for (std::size_t i = 0; i < v.size(); ++i) {
      std::uint32_t bits = 0;
      std::memcpy(&bits, &v[i], 4);
      bits |= (static_cast<std::uint32_t>(i) * 2654435761u) >> 17;  // 15 low bits, never all zero for i > 0
      std::memcpy(&v[i], &bits, 4);
    }
    values.push_back(std::move(v));
    out.push_back({t.name, fused::io::dtype::F32, t.shape, std::as_bytes(std::span(values.back()))});
  }
  fused::io::write_safetensors(dir / "model.safetensors", out);

  const auto info = fused::decoder::load_hf_model_info(dir);
  fused::decoder::trainer t(*info.family, info.arch, {.sequences = 1, .tokens = 4}, {.train = {}});
  t.load(fused::runtime::weight_store::load(dir, t.checkpoint_tensors(), info.arch.tie_word_embeddings));
  std::size_t checked = 0;
  for (std::size_t k = 0; k < t.prog().parameters.size(); ++k) {
    const auto at = std::find_if(out.begin(), out.end(), [&](const auto& d) { return d.name == t.parameter_name(k); });
    REQUIRE(at != out.end());
    const std::vector<float>& want = values[static_cast<std::size_t>(at - out.begin())];
    const std::span<float> got = t.parameter(k);
    REQUIRE(got.size() == want.size());
    CHECK(std::memcmp(got.data(), want.data(), want.size() * 4) == 0);
    ++checked;
  }
  CHECK(checked == t.prog().parameters.size());
  fs::remove_all(dir);
}

TEST_CASE("every family's gradients agree with finite differences of its loss") {
  for (const char* name : {"tiny_a", "tiny_llama", "tiny_qwen3", "tiny_mha"}) {
    CAPTURE(name);
    const std::int64_t T = 9;
    tiny m(name, T, {.optimizer = {.weight_decay = 0}, .keep_gradients = true});
    const std::vector<std::int32_t> ids = tokens_of(T, m.info.arch.vocab_size, 7);
    // lr 0: a step leaves every parameter as it was, so each call is a plain evaluation of the loss.
    m.t.step(ids, 0.0f);
    for (std::size_t k = 0; k < m.t.prog().parameters.size(); ++k) {
      CAPTURE(m.t.parameter_name(k));
      const std::vector<float> grad(m.t.gradient(k).begin(), m.t.gradient(k).end());
      // The element with the largest gradient, and one in the middle of the tensor.
      const auto largest = static_cast<std::size_t>(std::max_element(grad.begin(), grad.end(), [](float a, float b) { return std::fabs(a) < std::fabs(b); }) - grad.begin());
      const float scale = std::fabs(grad[largest]);
      if (scale < 1e-4f) continue;  // too flat for a float difference to resolve
      for (const std::size_t i : {largest, grad.size() / 2}) {
        float& p = m.t.parameter(k)[i];
        const float keep = p, h = 1e-2f * std::max(1.0f, std::fabs(keep));
        p = keep + h;
        const float up = m.t.step(ids, 0.0f);
        p = keep - h;
        const float down = m.t.step(ids, 0.0f);
        p = keep;
        const double numeric = (static_cast<double>(up) - down) / (2.0 * static_cast<double>(h));
        CHECK(std::fabs(numeric - grad[i]) <= 2e-2 * scale);
      }
    }
  }
}

TEST_CASE("training lowers the loss; the plan is verified; steps are bitwise the same on 1 and 2 threads") {
  const std::int64_t T = 16;
  tiny one("tiny_a", T), two("tiny_a", T);
  const std::vector<std::int32_t> ids = tokens_of(T, one.info.arch.vocab_size, 3);
  CHECK(fused::verify(one.t.prog(), one.t.mem()).ok);
  CHECK(one.t.prog().training);
  // Forward, backward and update share one arena; nothing but the outputs outlives its last reader.
  CHECK(one.t.mem().arena_bytes() <= one.t.mem().lower_bound + one.t.mem().lower_bound / 4);

  const int saved = fk_get_threads();
  const long long saved_min_work = fk__parallel_min_work();
  fk__set_parallel_min_work(0);  // the tiny model's kernels fork too: the split is what is tested
  std::vector<float> losses;
  for (int s = 0; s < 8; ++s) {
    fk_set_threads(1);
    const float a = one.t.step(ids, 3e-3f);
    fk_set_threads(2);
    const float b = two.t.step(ids, 3e-3f);
    CHECK(std::memcmp(&a, &b, sizeof a) == 0);
    losses.push_back(a);
  }
  fk_set_threads(saved);
  fk__set_parallel_min_work(saved_min_work);
  for (std::size_t k = 0; k < one.t.prog().parameters.size(); ++k) {
    const auto p1 = one.t.parameter(k), p2 = two.t.parameter(k);
    CHECK(std::memcmp(p1.data(), p2.data(), p1.size_bytes()) == 0);
  }
  INFO("losses: " << losses[0] << " " << losses[1] << " ... " << losses.back());
  CHECK(losses.back() < 0.5f * losses.front());
  for (std::size_t s = 1; s < 4; ++s) CHECK(losses[s] < losses[s - 1]);  // later steps memorize to ~0 and may wobble
}

TEST_CASE("an op without a backward rule on the way to the loss fails the program, naming the step") {
  fused::graph_builder g;
  const fused::tensor_id x = g.input({"x"}, fused::dtype::f32, fused::shape(2, 3));
  const fused::tensor_id w = g.state({"w"}, fused::dtype::f32, fused::shape(3));
  const fused::tensor_id y = g.apply(fused::ops::rms_norm, {x, w}, {.f = 1e-6}, {"normed"});
  const fused::tensor_id e = g.apply(fused::ops::exp, {y}, {}, {"exp"});
  const fused::tensor_id labels = g.input({"labels"}, fused::dtype::i32, fused::shape(2));
  const fused::tensor_id loss = g.apply(fused::ops::cross_entropy, {e, labels}, {}, {"loss"});
  const fused::tensor_id seed = g.apply(fused::ops::full, {}, {.i = {1, fused::no_value, fused::no_value, fused::no_value}, .f = 1.0}, {"seed"});
  const std::vector<fused::tensor_id> grads = fused::append_backward(g, loss, seed, {w}, fused::ops::add);
  REQUIRE_FALSE(g.peek().ok());
  CHECK(fused::to_string(g.peek().message) == "step 1 'exp' (exp): the op has no backward rule, so a training program cannot differentiate it");
  CHECK(grads == std::vector<fused::tensor_id>{-1});
}

TEST_CASE("a parameter the loss does not reach is refused, not trained with a zero gradient") {
  fused::graph_builder g;
  const fused::tensor_id x = g.input({"x"}, fused::dtype::f32, fused::shape(2, 3));
  const fused::tensor_id w = g.state({"w"}, fused::dtype::f32, fused::shape(3));
  const fused::tensor_id unused = g.state({"unused"}, fused::dtype::f32, fused::shape(3));
  const fused::tensor_id y = g.apply(fused::ops::rms_norm, {x, w}, {.f = 1e-6}, {"normed"});
  fused::train::append_train_step(g, y, {w, unused}, {});
  REQUIRE_FALSE(g.peek().ok());
  CHECK(fused::to_string(g.peek().message) == "parameter 'unused' does not reach the loss, so it has no gradient to train it with");
}

TEST_CASE("a batch of packed sequences trains as the mean of its sequences") {
  const std::int64_t T = 9;
  const tiny_llama model;
  const fused::decoder::hf_model_info& info = model.info;
  const fused::runtime::weight_store& w = model.w;
  const fused::decoder::graph_options o{.train = {.keep_gradients = true}};
  fused::decoder::trainer batch(*info.family, info.arch, {.sequences = 2, .tokens = T}, o), first(*info.family, info.arch, {.tokens = T}, o),
      second(*info.family, info.arch, {.tokens = T}, o);
  for (auto* t : {&batch, &first, &second}) t->load(w);
  const std::vector<std::int32_t> ids = tokens_of(2 * T, info.arch.vocab_size, 11);
  const std::span<const std::int32_t> all(ids);
  const float both = batch.step(all, 0.0f), a = first.step(all.first(T), 0.0f), b = second.step(all.last(T), 0.0f);
  CHECK(std::fabs(both - (a + b) / 2) <= 1e-5f * both);
  for (std::size_t k = 0; k < batch.prog().parameters.size(); ++k) {
    CAPTURE(batch.parameter_name(k));
    const auto g = batch.gradient(k), ga = first.gradient(k), gb = second.gradient(k);
    float scale = 1e-6f, worst = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
      scale = std::max(scale, std::fabs(g[i]));
      worst = std::max(worst, std::fabs(g[i] - (ga[i] + gb[i]) / 2));
    }
    CHECK(worst <= 1e-4f * scale);
  }
}

// Ranks as threads of one process: each pair of ranks a queue of messages.
class mailbox {
 public:
  explicit mailbox(int ranks) : ranks_(ranks), queues_(static_cast<std::size_t>(ranks * ranks)) {}
  void post(int from, int to, std::span<const float> v) {
    {
      const std::lock_guard<std::mutex> lock(m_);
      queue(from, to).emplace_back(v.begin(), v.end());
    }
    ready_.notify_all();
  }
  void take(int from, int to, std::span<float> v) {
    std::unique_lock<std::mutex> lock(m_);
    ready_.wait(lock, [&] { return !queue(from, to).empty(); });
    const std::vector<float> got = std::move(queue(from, to).front());
    queue(from, to).pop_front();
    if (got.size() != v.size()) throw std::logic_error("a message of the wrong size");
    std::copy(got.begin(), got.end(), v.begin());
  }

 private:
  std::deque<std::vector<float>>& queue(int from, int to) { return queues_[static_cast<std::size_t>(from * ranks_ + to)]; }
  int ranks_;
  std::vector<std::deque<std::vector<float>>> queues_;
  std::mutex m_;
  std::condition_variable ready_;
};

class thread_rank final : public fused::train::communicator {
 public:
  thread_rank(mailbox& box, int rank, int ranks) : box_(box), rank_(rank), ranks_(ranks) {}
  int rank() const override { return rank_; }
  int ranks() const override { return ranks_; }
  void send(int to, std::span<const float> v) override { box_.post(rank_, to, v); }
  void receive(int from, std::span<float> v) override { box_.take(from, rank_, v); }

 private:
  mailbox& box_;
  int rank_, ranks_;
};

// Two steps of a batch in `micro` micro-batches over `ranks` ranks: every rank's losses, gradients of
// the second step and parameters after it, one vector each.
struct parallel_run {
  std::vector<float> losses, gradients, parameters;
};
std::vector<parallel_run> train_in_parallel(const fused::decoder::hf_model_info& info, const fused::runtime::weight_store& w, fused::decoder::batch_shape shape,
                                            std::int64_t micro, int ranks, std::span<const std::int32_t> ids, int steps = 2) {
  mailbox box(ranks);
  std::vector<thread_rank> comms;
  for (int r = 0; r < ranks; ++r) comms.emplace_back(box, r, ranks);
  std::vector<std::unique_ptr<fused::decoder::trainer>> trainers;
  for (int r = 0; r < ranks; ++r) {
    trainers.push_back(std::make_unique<fused::decoder::trainer>(*info.family, info.arch, shape, fused::decoder::graph_options{},
                                                                 fused::decoder::data_parallel{.micro_batches = micro, .ranks = &comms[static_cast<std::size_t>(r)]}));
    trainers.back()->load(w);
  }
  std::vector<parallel_run> runs(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      fused::decoder::trainer& t = *trainers[static_cast<std::size_t>(r)];
      parallel_run& run = runs[static_cast<std::size_t>(r)];
      for (int s = 0; s < steps; ++s) run.losses.push_back(t.step(ids, 1e-2f));
      for (std::size_t k = 0; k < t.prog().parameters.size(); ++k) {
        const auto g = t.gradient(k);
        const auto p = t.parameter(k);
        run.gradients.insert(run.gradients.end(), g.begin(), g.end());
        run.parameters.insert(run.parameters.end(), p.begin(), p.end());
      }
    });
  for (std::thread& t : threads) t.join();
  return runs;
}

TEST_CASE("data parallel: any rank count dividing the micro-batches takes the same step, bit for bit") {
  const std::int64_t T = 9;
  const tiny_llama model;
  const fused::decoder::hf_model_info& info = model.info;
  const fused::runtime::weight_store& w = model.w;
  const fused::decoder::batch_shape batch{.sequences = 6, .tokens = T};
  std::vector<std::int32_t> ids = tokens_of(6 * T, info.arch.vocab_size, 23);

  const parallel_run alone = train_in_parallel(info, w, batch, 6, 1, ids).front();
  for (const int ranks : {2, 3, 6}) {
    CAPTURE(ranks);
    for (const parallel_run& r : train_in_parallel(info, w, batch, 6, ranks, ids)) {
      CHECK(r.losses == alone.losses);
      CHECK(r.gradients == alone.gradients);
      CHECK(r.parameters == alone.parameters);
    }
  }
  const parallel_run pairs = train_in_parallel(info, w, batch, 2, 1, ids).front();
  for (const parallel_run& r : train_in_parallel(info, w, batch, 2, 2, ids)) CHECK(r.parameters == pairs.parameters);
  // With attention dropout each micro-batch draws its own masks (dropout_draw), whatever the ranks.
  fused::decoder::hf_model_info dropping = info;
  dropping.arch.attention_dropout = 0.2;
  const parallel_run masked = train_in_parallel(dropping, w, batch, 6, 1, ids).front();
  CHECK(masked.losses != alone.losses);
  for (const int ranks : {2, 3})
    for (const parallel_run& r : train_in_parallel(dropping, w, batch, 6, ranks, ids)) {
      CHECK(r.losses == masked.losses);
      CHECK(r.parameters == masked.parameters);
    }

  // The same step as one program: the same mean, summed in another order. The gradients are
  // compared after the first step: AdamW's first step moves a parameter by about lr whatever its
  // gradient's size, so where rounding gives a near-zero gradient another sign the second step starts
  // from parameters 2 lr apart (at lr 1e-2 the second step's gradients differ by ~1e-4 of their largest).
  fused::decoder::trainer whole(*info.family, info.arch, batch, {.train = {.keep_gradients = true}});
  whole.load(w);
  std::vector<float> losses, gradients;
  for (int s = 0; s < 2; ++s) {
    losses.push_back(whole.step(ids, 1e-2f));
    if (s > 0) continue;
    for (std::size_t k = 0; k < whole.prog().parameters.size(); ++k) {
      const auto g = whole.gradient(k);
      gradients.insert(gradients.end(), g.begin(), g.end());
    }
  }
  for (std::size_t s = 0; s < 2; ++s) CHECK(std::fabs(losses[s] - alone.losses[s]) <= 1e-5f * losses[s]);
  const parallel_run first_step = train_in_parallel(info, w, batch, 6, 1, ids, 1).front();
  float scale = 0, worst = 0;
  for (std::size_t i = 0; i < gradients.size(); ++i) {
    scale = std::max(scale, std::fabs(gradients[i]));
    worst = std::max(worst, std::fabs(gradients[i] - first_step.gradients[i]));
  }
  CHECK(worst <= 1e-5f * scale);

  // One micro-batch on one rank is the whole step, the same bits.
  fused::decoder::trainer one(*info.family, info.arch, batch, {}, {.micro_batches = 1});
  one.load(w);
  CHECK(one.layout().micro_batches == 1);
  CHECK(one.step(ids, 1e-2f) == losses[0]);
}

TEST_CASE("a step stopped before one of its micro-batches is dropped: nothing moves, and the next is the same step") {
  const std::int64_t T = 9;
  const tiny_llama model;
  const fused::decoder::hf_model_info& info = model.info;
  const fused::runtime::weight_store& w = model.w;
  const fused::decoder::batch_shape batch{.sequences = 6, .tokens = T};
  const std::vector<std::int32_t> ids = tokens_of(6 * T, info.arch.vocab_size, 23);
  fused::decoder::trainer straight(*info.family, info.arch, batch, {}, {.micro_batches = 6});
  straight.load(w);
  const float loss = straight.step(ids, 1e-2f);

  fused::decoder::trainer stopped(*info.family, info.arch, batch, {}, {.micro_batches = 6});
  stopped.load(w);
  const std::vector<std::byte> before(stopped.state().begin(), stopped.state().end());
  int asked = 0;
  CHECK_FALSE(stopped.step_unless(ids, 1e-2f, [&] { return ++asked == 4; }).has_value());
  CHECK(asked == 4);  // before micro-batches 0 to 3; the fourth answer stops it, none is asked again
  CHECK(stopped.steps_taken() == 0);
  CHECK(std::vector<std::byte>(stopped.state().begin(), stopped.state().end()) == before);  // parameters, moments, step count
  const std::optional<float> taken = stopped.step_unless(ids, 1e-2f, [] { return false; });
  REQUIRE(taken.has_value());
  CHECK(*taken == loss);
  CHECK(stopped.steps_taken() == 1);
  for (std::size_t k = 0; k < straight.prog().parameters.size(); ++k) {
    const auto a = straight.parameter(k), b = stopped.parameter(k);
    CHECK(std::equal(a.begin(), a.end(), b.begin(), b.end()));
  }
}

TEST_CASE("data parallel: batches and rank counts that do not split are refused") {
  const fused::decoder::hf_model_info info = fused::decoder::load_hf_model_info(dir_of("tiny_llama"));
  CHECK_THROWS_WITH_AS(fused::decoder::trainer(*info.family, info.arch, {.sequences = 6, .tokens = 4}, {}, {.micro_batches = 4}),
                       "a batch of 6 sequences does not split into 4 micro-batches of equal size", std::invalid_argument);
  mailbox box(4);
  thread_rank four(box, 0, 4);
  CHECK_THROWS_WITH_AS(fused::decoder::trainer(*info.family, info.arch, {.sequences = 6, .tokens = 4}, {}, {.micro_batches = 6, .ranks = &four}),
                       "a batch of 6 micro-batches does not split evenly over 4 ranks (the rank count must divide the micro-batch count)",
                       std::invalid_argument);
}

TEST_CASE("dropout honours the program's training flag: the identity in eval, its mask when training") {
  for (const bool training : {false, true}) {
    CAPTURE(training);
    fused::graph_builder g;
    const fused::tensor_id x = g.input({"x"}, fused::dtype::f32, fused::shape(4096));
    const fused::tensor_id step = g.input({"step"}, fused::dtype::i32, fused::shape(1));
    g.output("y", g.apply(fused::ops::dropout, {x, step}, {.i = {5, 0, 0, 0}, .f = 0.5}, {"y"}));
    if (training) g.train(-1, {});
    fused::decoder::detail::bound_program run(fused::decoder::plan_built(std::move(g).finish(), fused::binding{}, [](const fused::oversize&, const fused::program&) {
      return std::string("a dropout");
    }));
    REQUIRE(run.plan.prog.steps.size() == 1);
    CHECK(run.plan.prog.steps[0].mode_sensitive);
    const nlohmann::ordered_json plan_json = fused::plan_to_json(run.plan.prog, run.plan.mem);
    CHECK(plan_json["steps"][0].value("mode_sensitive", false));
    CHECK(plan_json.value("training", false) == training);
    std::vector<float> values(4096);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = 1.0f + static_cast<float>(i);
    const std::int32_t count = 9;
    run.write("x", values.data(), values.size() * sizeof(float));
    run.write("step", &count, sizeof count);
    run.run();
    const std::span<const float> y = run.floats(run.plan.prog.output("y"));
    std::size_t dropped = 0, doubled = 0;
    for (std::size_t i = 0; i < values.size(); ++i) {
      dropped += y[i] == 0.0f;
      doubled += y[i] == 2.0f * values[i];
    }
    if (!training) {
      CHECK(std::equal(y.begin(), y.end(), values.begin()));
    } else {
      CHECK(dropped + doubled == values.size());
      CHECK(dropped > 1800);
      CHECK(dropped < 2300);
    }
  }
}


TEST_CASE("attention dropout in a train step: seeded, new at each step, and differentiated with its own mask") {
  const tiny_llama plain(0.0), dropped(0.3);
  const std::vector<std::int32_t> ids = tokens_of(2 * 9, plain.info.arch.vocab_size, 31);
  auto losses = [&](const tiny_llama& m, std::uint32_t seed) {
    fused::decoder::trainer t(*m.info.family, m.info.arch, {.sequences = 2, .tokens = 9}, {.train = {.seed = seed}});
    t.load(m.w);
    std::vector<float> l;
    for (int s = 0; s < 3; ++s) l.push_back(t.step(ids, 0.0f));  // lr 0: the same parameters, a new mask each step
    return l;
  };
  const std::vector<float> none = losses(plain, 1), a = losses(dropped, 1), again = losses(dropped, 1), other = losses(dropped, 2);
  CHECK(none[0] == none[1]);
  CHECK(a == again);
  CHECK(a[0] != none[0]);
  CHECK(a[0] != a[1]);
  CHECK(a[0] != other[0]);

  // d loss along the gradient's own direction, by central differences with the mask fixed (a fresh
  // load: the same step count), against the gradient's norm: a backward with another mask than the
  // forward's would not agree.
  for (const tiny_llama* m : {&plain, &dropped}) {
    CAPTURE(m->info.arch.attention_dropout);
    fused::decoder::trainer t(*m->info.family, m->info.arch, {.sequences = 2, .tokens = 9}, {.train = {.keep_gradients = true, .seed = 4}});
    t.load(m->w);
    t.step(ids, 0.0f);
    double squares = 0;
    std::vector<std::vector<float>> direction;
    for (std::size_t k = 0; k < t.prog().parameters.size(); ++k) {
      const auto g = t.gradient(k);
      direction.emplace_back(g.begin(), g.end());
      for (const float e : g) squares += static_cast<double>(e) * e;
    }
    const double analytic = std::sqrt(squares);
    for (auto& d : direction)
      for (float& e : d) e = static_cast<float>(e / analytic);
    auto loss_at = [&](float eps) {
      t.load(m->w);
      for (std::size_t k = 0; k < direction.size(); ++k) {
        const auto p = t.parameter(k);
        for (std::size_t i = 0; i < p.size(); ++i) p[i] += eps * direction[k][i];
      }
      return static_cast<double>(t.step(ids, 0.0f));
    };
    const float eps = 1e-2f;
    const double numeric = (loss_at(eps) - loss_at(-eps)) / (2.0 * eps);
    CHECK(std::fabs(numeric - analytic) <= 2e-2 * std::fabs(analytic));
  }
}

// tiny_a's train step planned in constant evaluation: verified by static_assert, and run through the
// same calls as the run-time trainer's program, it computes the same bits.
using static_train = fused::decoder::static_train_plan<fused_test::tiny_a, 16>;
static_assert(static_train::plan.failure.empty());
static_assert(static_train::plan.arena_bytes() > 0 && static_train::plan.arena_bytes() % 64 == 0);
// SGD with Nesterov momentum plans and verifies at compile time too (with dampening it does not:
// compile_fail_nesterov_dampening).
static_assert(fused::decoder::static_train_plan<fused_test::tiny_a, 8, 1,
                                                fused::train::options{.sgd = {.momentum = 0.9, .nesterov = true}, .use = fused::train::method::sgd}>::plan.failure.empty());

TEST_CASE("the static train step computes what the run-time one does, bit for bit") {
  tiny m("tiny_a", 16, {});
  const auto& plan = static_train::plan;
  REQUIRE(static_cast<std::int64_t>(m.t.state().size()) == plan.state_bytes());
  fused::runtime::aligned_bytes state(static_cast<std::size_t>(plan.state_bytes())), arena(static_cast<std::size_t>(plan.arena_bytes()));
  std::memcpy(state.data(), m.t.state().data(), state.size());  // the same parameters, fresh moments
  const std::vector<std::int32_t> ids = tokens_of(16, 1000, 5);
  std::vector<std::int32_t> labels(ids.begin() + 1, ids.end());
  labels.push_back(FK_IGNORE_LABEL);
  const float lr = 1e-3f;
  static_assert(static_train::plan.offset_of("input_ids") >= 0 && static_train::plan.offset_of("labels") >= 0 && static_train::plan.offset_of("loss") >= 0);
  for (int s = 0; s < 2; ++s) {  // inputs are written before every call: the arena reuses their bytes
    std::memcpy(arena.data() + plan.offset_of("input_ids"), ids.data(), ids.size() * 4);
    std::memcpy(arena.data() + plan.offset_of("labels"), labels.data(), labels.size() * 4);
    std::memcpy(arena.data() + plan.offset_of("learning_rate"), &lr, 4);
    const float loss = m.t.step(ids, lr);
    fused::runtime::static_run<static_train>::run({nullptr, state.data(), arena.data()});
    float static_loss = 0;
    std::memcpy(&static_loss, arena.data() + plan.offset_of("loss"), 4);
    CHECK(std::memcmp(&loss, &static_loss, 4) == 0);
    CHECK(std::memcmp(state.data(), m.t.state().data(), state.size()) == 0);
  }
}
