// `fused train`: fine-tunes a Hugging Face checkpoint on a text file (AdamW or SGD, f32 master weights) and
// writes a checkpoint `fused run` and transformers load, plus the state to resume from.
// `fused train-step`: one optimizer step (AdamW, or SGD) on one sequence (or --batch B of them, the tokens split evenly),
// everything f32, written as safetensors: loss [1] (mean next-token cross-entropy over positions
// 0..T-2 of each sequence), grad.<name> (d loss / d each parameter),
// after.<name> (each parameter after the step) and loss_after [1] (the loss with the updated
// parameters) — the definitions of a torch autograd + torch.optim.AdamW reference (docs/TRAINING.md).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fused/core/json_text.hpp>
#include <fused/io/file_replace.hpp>
#include <fused/io/tokenizer.hpp>

#include <fused/models/decoder_train.hpp>
#include <fused/models/hf_config.hpp>

#include "cli.hpp"
#include "mpi_ranks.hpp"
#include "train_flags.hpp"

namespace fused::cli::cmd_train {

// The weights, once every one is finite: a train step from a NaN or an infinity gives NaN losses,
// gradients and parameters, which the loss check would blame on the learning rate.
fused::runtime::weight_store finite_weights(fused::runtime::weight_store weights, const std::string& model_dir) {
  if (const std::string bad = weights.first_non_finite_stored(); !bad.empty())
    throw std::invalid_argument(model_dir + ": cannot train from weights that are not finite: " + bad);
  return weights;
}

struct options {
  std::string model_dir, tokens, out;
  double lr = 1e-3;
  fused::cli::optimizer_flags optimizer;
  long long threads = 0, batch = 1, micro_batch = 0, seed = 0;
};

// The micro-batches of a batch of `batch` sequences, `micro_batch` each (0: one per rank).
std::int64_t micro_batches(long long batch, long long micro_batch, int ranks) {
  if (micro_batch == 0) {
    if (batch % ranks != 0) throw fused::cli::usage_error("--batch " + std::to_string(batch) + " does not split over " + std::to_string(ranks) + " ranks");
    return ranks;
  }
  if (batch % micro_batch != 0) throw fused::cli::usage_error("--micro-batch " + std::to_string(micro_batch) + " does not divide --batch " + std::to_string(batch));
  const long long count = batch / micro_batch;
  if (count % ranks != 0)
    throw fused::cli::usage_error("--batch " + std::to_string(batch) + " is " + std::to_string(count) + " micro-batches of " + std::to_string(micro_batch) +
                                  ", which do not split evenly over " + std::to_string(ranks) + " ranks");
  return count;
}

// Runs `work` as this rank of the launch; after an error on one rank of several, ends them all.
template <class Work>
int as_rank(fused::cli::launch& l, const char* command, Work&& work) {
  try {
    return work();
  } catch (const std::exception& e) {
    if (l.count() <= 1) throw;
    std::fprintf(stderr, "fused %s: error on rank %d of %d: %s\n", command, l.rank(), l.count(), e.what());
    l.fail(1);
    throw;
  }
}

int train_step(const options& o, fused::cli::launch& l) {
  fused::cli::require_out_elsewhere("--out", o.out, "the step's results", {{.path = o.model_dir, .owner = "the model's"}});
  if (o.threads > 0) fk_set_threads(static_cast<int>(o.threads));
  const std::vector<std::int32_t> ids = fused::cli::parse_ids({o.tokens}, "--tokens");
  const auto sequences = static_cast<std::size_t>(o.batch);
  if (ids.size() % sequences != 0)
    throw fused::cli::usage_error("--tokens: " + std::to_string(ids.size()) + " ids do not split into " + std::to_string(sequences) + " sequences of equal length (--batch)");
  const fused::train::options train = o.optimizer.options(true);
  const fused::decoder::hf_model_info info = fused::decoder::load_hf_model_info(o.model_dir);
  fused::cli::require_in_vocabulary(ids, "--tokens", info.arch.vocab_size);
  const long long tokens = static_cast<long long>(ids.size() / sequences), programs = micro_batches(o.batch, o.micro_batch, l.count());
  fused::cli::check_train_shape(info.arch, {.batch = o.batch, .micro_batches = programs, .tokens = tokens,
                                            .sequence = "--tokens: sequences of " + std::to_string(tokens) + (tokens == 1 ? " id" : " ids")});

  fused::decoder::graph_options graph{};
  graph.train = train;
  graph.train.seed = static_cast<std::uint64_t>(o.seed);
  const fused::decoder::data_parallel parallel{.micro_batches = programs, .ranks = l.ranks.get()};
  fused::decoder::trainer t(*info.family, info.arch, {.sequences = o.batch, .tokens = tokens}, graph, parallel);
  const std::vector<fused::tensor_info> stored = t.checkpoint_tensors();
  t.load(finite_weights(fused::runtime::weight_store::load(o.model_dir, stored, info.arch.tie_word_embeddings), o.model_dir));

  const auto lr = static_cast<float>(o.lr);
  const float loss = t.step(ids, lr);
  // The weights are finite (finite_weights): a loss that is not is an overflow in the step itself, and
  // its NaN gradients and parameters are not results to write.
  if (!std::isfinite(loss))
    throw std::runtime_error("the loss is " + std::to_string(loss) + ": every weight is finite, so an activation overflowed; nothing written");
  // A finite loss can still leave an update past f32's range (an RMSNorm maps an infinity to 0):
  // the parameters written as `after.*` must be finite too.
  if (const std::string bad = t.first_non_finite_parameter(); !bad.empty())
    throw std::runtime_error("the update made the model overflow: " + bad + "; try a smaller --lr; nothing written");
  const std::size_t n = t.prog().parameters.size();
  std::vector<std::vector<float>> grads(n), after(n);
  for (std::size_t k = 0; k < n; ++k) {
    const auto g = t.gradient(k);
    const auto p = t.parameter(k);
    grads[k].assign(g.begin(), g.end());
    after[k].assign(p.begin(), p.end());
  }
  const float loss_after = t.step(ids, lr);  // this call's loss is the updated parameters'; its own update is not kept
  if (!std::isfinite(loss_after))
    throw std::runtime_error("the loss after the step is " + std::to_string(loss_after) + " (the loss before it was " + std::to_string(loss) +
                             "): the update made the model overflow; try a smaller --lr; nothing written");

  std::vector<std::string> names;
  names.reserve(2 * n);
  std::vector<fused::io::tensor_data> out;
  const std::vector<float> loss_v{loss}, loss_after_v{loss_after};
  out.push_back({"loss", fused::io::dtype::F32, {1}, std::as_bytes(std::span(loss_v))});
  out.push_back({"loss_after", fused::io::dtype::F32, {1}, std::as_bytes(std::span(loss_after_v))});
  for (std::size_t k = 0; k < n; ++k) {
    const fused::tensor_info& p = stored[k];
    std::vector<std::int64_t> dims;
    for (int i = 0; i < p.shp.rank; ++i) dims.push_back(p.shp[i].n);
    names.push_back("grad." + t.parameter_name(k));
    out.push_back({names.back(), fused::io::dtype::F32, dims, std::as_bytes(std::span(grads[k]))});
    names.push_back("after." + t.parameter_name(k));
    out.push_back({names.back(), fused::io::dtype::F32, dims, std::as_bytes(std::span(after[k]))});
  }
  if (l.rank() != 0) return 0;  // every rank holds the same values: rank 0 writes them
  fused::io::write_safetensors(o.out, out);
  std::fprintf(stderr, "fused train-step: %zu tokens, %zu parameters, %zu steps, arena %lld bytes (lower bound %lld), state %lld bytes: loss %.6g -> %.6g\n",
               ids.size(), n, t.prog().steps.size(), static_cast<long long>(t.mem().arena_bytes()), static_cast<long long>(t.mem().lower_bound),
               static_cast<long long>(t.mem().region_bytes[static_cast<int>(fused::region::state)]), static_cast<double>(loss),
               static_cast<double>(loss_after));
  return 0;
}

int run_train_step(const options& o) {
  fused::cli::launch l = fused::cli::join_launch();
  return as_rank(l, "train-step", [&] { return train_step(o, l); });
}

struct train_options {
  std::string model_dir, data, out, resume;
  long long sequence = 256, batch = 8, micro_batch = 0, steps = 100, warmup = 0, seed = 0, log_every = 10, threads = 0;
  double lr = 1e-3, min_lr_ratio = 0.1;
  fused::cli::optimizer_flags optimizer;
};

// The learning rate of step `step` (0-based): a linear warmup over `warmup` steps, then a cosine
// from lr down to lr * min_lr_ratio at the last step.
double learning_rate(const train_options& o, long long step) {
  if (step < o.warmup) return o.lr * static_cast<double>(step + 1) / static_cast<double>(o.warmup);
  const long long decay_steps = o.steps - o.warmup;
  // one step of decay is the peak's (as Hugging Face's cosine schedule gives its step 0)
  const double progress = decay_steps > 1 ? static_cast<double>(step - o.warmup) / static_cast<double>(decay_steps - 1) : 0.0;
  const double floor = o.lr * o.min_lr_ratio;
  return floor + (o.lr - floor) * 0.5 * (1.0 + std::cos(3.14159265358979323846 * progress));
}

// The training text. Bytes that are not UTF-8 are tokenized as U+FFFD (as a Python str read with
// errors="replace" gives them to Hugging Face's tokenizer); a file of them is likely not text: said once.
std::string read_text(const std::filesystem::path& path, bool speaks) {
  // At most 16 GiB, and a quarter of the memory: the ids take as much again, and more than the machine
  // has would end in the OOM killer, not in this sentence.
  const double quarter = fused::cli::physical_memory_bytes() / 4;
  const std::size_t cap = std::size_t{16} << 30, max_bytes = quarter > 0 && quarter < static_cast<double>(cap) ? static_cast<std::size_t>(quarter) : cap;
  std::string text = fused::cli::read_input_file(path.string(), "the training text", max_bytes);
  if (fused::io::tokenization::is_valid_utf8(text)) return text;
  std::size_t invalid = 0, first = 0;
  for (std::size_t at = 0; at < text.size();) {
    const fused::io::tokenization::utf8_unit u = fused::io::tokenization::next_utf8_unit(text, at);
    if (u.kind != fused::io::tokenization::utf8_unit::valid && invalid++ == 0) first = at;
    at += u.size;
  }
  if (invalid && speaks)
    std::fprintf(stderr, "[fused] warning: %s is not UTF-8 text: %zu byte sequences are not (the first at byte %zu); each is read as U+FFFD\n",
                 path.string().c_str(), invalid, first);
  return text;
}

// --out's directories that were not there, made at once; removed again (those still empty) unless
// keep() is called: a failed run leaves nothing behind. It is checked by writing a file in it, as the
// run will: access() says yes to root where the file system still says no (a read-only mount, /sys).
class made_directories {
 public:
  made_directories() = default;
  explicit made_directories(const std::filesystem::path& dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const auto fail = [&](const std::string& why) { throw std::runtime_error("--out " + dir.string() + ": " + why); };
    if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) fail("is not a directory");
    std::vector<fs::path> missing;
    for (fs::path p = fs::absolute(dir, ec).lexically_normal(); !p.empty() && !fs::exists(p, ec) && p != p.parent_path(); p = p.parent_path())
      missing.push_back(p);
    for (auto at = missing.rbegin(); at != missing.rend(); ++at) {
      if (!fs::create_directory(*at, ec)) fail("cannot make the directory " + at->string() + ": " + ec.message());
      made_.push_back(*at);
    }
    const fs::path probe = dir / (".fused-train-probe-" + std::to_string(getpid()));
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) fail("cannot write in it: " + std::string(std::strerror(errno)));
    ::close(fd);
    ::unlink(probe.c_str());
  }
  made_directories(made_directories&& other) noexcept : made_(std::move(other.made_)) { other.made_.clear(); }
  made_directories& operator=(made_directories&& other) noexcept {
    std::swap(made_, other.made_);
    return *this;
  }
  ~made_directories() {
    std::error_code ec;
    for (auto at = made_.rbegin(); at != made_.rend(); ++at) std::filesystem::remove(*at, ec);  // only if empty
  }
  void keep() { made_.clear(); }

 private:
  std::vector<std::filesystem::path> made_;
};

// The model's config.json as the trained checkpoint's: its weights are now bf16, whatever the
// config's dtype said (transformers reads "torch_dtype", newer versions "dtype").
std::string written_config(const std::filesystem::path& file) {
  const std::string text = fused::cli::read_input_file(file.string(), "the model's config");
  nlohmann::ordered_json config = fused::json_text::parse_ordered(text);
  bool changed = false;
  for (const char* key : {"torch_dtype", "dtype"})
    if (config.contains(key) && config[key] != "bfloat16") config[key] = "bfloat16", changed = true;
  return changed ? fused::json_text::dump(config, 2) + "\n" : text;
}

int train(const train_options& o, fused::cli::launch& l) {
  namespace fs = std::filesystem;
  if (o.threads > 0) fk_set_threads(static_cast<int>(o.threads));
  const fused::train::options train = o.optimizer.options();
  if (o.warmup >= o.steps) throw fused::cli::usage_error("--warmup must be fewer steps than --steps");
  const fs::path dir = o.model_dir, out = o.out;
  if (!fs::exists(dir / "tokenizer.json")) throw std::invalid_argument(dir.string() + ": no tokenizer.json (the text is tokenized with the model's tokenizer)");
  const fused::decoder::hf_model_info info = fused::decoder::load_hf_model_info(dir);
  const long long programs = micro_batches(o.batch, o.micro_batch, l.count());
  fused::cli::check_train_shape(info.arch, {.batch = o.batch, .micro_batches = programs, .tokens = o.sequence, .sequence = "--seq " + std::to_string(o.sequence)});
  const auto tok = fused::io::tokenizer::from_file(dir / "tokenizer.json");
  const std::vector<std::int32_t> corpus = tok.encode(read_text(o.data, l.rank() == 0), false);
  const auto S = static_cast<std::size_t>(o.sequence);
  if (corpus.size() < S)
    throw std::invalid_argument(o.data + ": " + std::to_string(corpus.size()) + " tokens, fewer than one sequence of --seq " + std::to_string(S));
  for (std::int32_t id : corpus)
    if (id >= info.arch.vocab_size)
      throw std::invalid_argument(o.data + ": the tokenizer gives id " + std::to_string(id) + ", outside the model's vocabulary of " + std::to_string(info.arch.vocab_size));

  // --out is made before the first step, so that one that cannot be fails now, not after the
  // training; a run that fails removes what it made (left empty).
  made_directories made;
  if (l.rank() == 0) made = made_directories(out);

  fused::decoder::graph_options graph{};
  graph.train = train;
  graph.train.seed = static_cast<std::uint64_t>(o.seed);
  const fused::decoder::data_parallel parallel{.micro_batches = programs, .ranks = l.ranks.get()};
  fused::decoder::trainer t(*info.family, info.arch, {.sequences = o.batch, .tokens = o.sequence}, graph, parallel);
  const bool speaks = l.rank() == 0;  // every rank computes the same: rank 0 reports and writes
  if (o.resume.empty()) {
    t.load(finite_weights(fused::runtime::weight_store::load(dir, t.checkpoint_tensors(), info.arch.tie_word_embeddings), dir.string()));
  } else {
    t.resume(fs::path(o.resume) / "train_state.safetensors");
  }
  const long long first = t.steps_taken();
  if (first + o.steps >= INT32_MAX)  // the step count the state carries is an i32, and a state must be able to take a step more (resume)
    throw fused::cli::usage_error("--steps " + std::to_string(o.steps) + ": the state is at step " + std::to_string(first) +
                                  ", and it counts steps up to 2^31 - 2 = " + std::to_string(INT32_MAX - 1));
  if (speaks && t.layout().micro_batches > 1)
    std::fprintf(stderr, "fused train: each step in %lld micro-batches of %lld sequences over %d rank%s, gradients summed in a fixed tree\n",
                 static_cast<long long>(t.layout().micro_batches), o.batch / static_cast<long long>(t.layout().micro_batches), l.count(), l.count() == 1 ? "" : "s");
  if (speaks)
    std::fprintf(stderr,
               "fused train: %s on %s: %zu tokens; %lld x %lld tokens a step, %lld steps from step %lld; a program of %zu steps, arena %.1f MiB "
               "(lower bound %.1f), state %.1f MiB\n",
               dir.string().c_str(), o.data.c_str(), corpus.size(), o.batch, o.sequence, o.steps, first, t.prog().steps.size(),
               static_cast<double>(t.mem().arena_bytes()) / 1048576.0, static_cast<double>(t.mem().lower_bound) / 1048576.0,
               static_cast<double>(t.mem().region_bytes[static_cast<int>(fused::region::state)]) / 1048576.0);

  // Batches: windows of S tokens at seeded uniform starts (the same --seed, the same batches).
  std::uint64_t rng = 0x9E3779B97F4A7C15ull ^ static_cast<std::uint64_t>(o.seed) ^ (static_cast<std::uint64_t>(first) << 32);
  auto next_start = [&] {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return static_cast<std::size_t>(rng % (corpus.size() - S + 1));
  };
  std::vector<std::int32_t> ids(static_cast<std::size_t>(o.batch) * S);
  double window_loss = 0, window_seconds = 0;
  long long window_steps = 0;
  // The steps since the last log line, as one line after step `taken` (1-based), and a new window.
  const auto log_window = [&](long long taken, double lr) {
    if (speaks)
      std::fprintf(stderr, "step %6lld  loss %.4f  lr %.2e  %.0f tok/s\n", taken, window_loss / static_cast<double>(window_steps), lr,
                   static_cast<double>(window_steps * o.batch * o.sequence) / window_seconds);
    window_loss = window_seconds = 0;
    window_steps = 0;
  };
  // Ctrl-C or SIGTERM stops the run after the step in progress (a step of many micro-batches: before
  // its next one, the step dropped) and writes what the steps so far made (--resume goes on from it),
  // exit 128 + the signal; a second signal ends the process. Ranks of a data-parallel run would stop
  // at different steps, each waiting on the others: they keep the default.
  std::optional<fused::cli::interrupt_scope> stop;
  if (l.count() == 1) stop.emplace(fused::cli::interrupt_options{.sigterm_too = true});
  long long last = first + o.steps;  // one past the last step taken
  long long dropped = 0;               // the step a signal cut short, 0 when none
  for (long long step = first; step < last; ++step) {
    for (long long b = 0; b < o.batch; ++b) {
      const std::size_t at = next_start();
      std::copy_n(corpus.begin() + static_cast<std::ptrdiff_t>(at), S, ids.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(b) * S));
    }
    const double lr = learning_rate(o, step - first);
    const auto start = std::chrono::steady_clock::now();
    const std::optional<float> taken = t.step_unless(ids, static_cast<float>(lr), [] { return fused::cli::interrupted != 0; });
    if (!taken) {
      dropped = step + 1;
      last = step;
      break;
    }
    const float loss = *taken;
    window_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!std::isfinite(loss))  // the first step's loss is the loaded parameters' (finite: checked), later ones the updates'
      throw std::runtime_error("step " + std::to_string(step + 1) + ": the loss is " + std::to_string(loss) +
                               (step == first ? std::string(": the parameters are finite, so an activation overflowed")
                                              : std::string(" (the updates made the model overflow: try a smaller --lr)")) +
                               "; nothing written");
    window_loss += loss;
    ++window_steps;
    if (fused::cli::interrupted) last = step + 1;
    if (window_steps == o.log_every || step + 1 == last) log_window(step + 1, lr);
  }

  const int signal = fused::cli::interrupted;
  if (window_steps > 0) log_window(last, learning_rate(o, last - 1 - first));  // the steps a dropped one followed
  if (signal && speaks && dropped)
    std::fprintf(stderr, "fused train: %s during step %lld of %lld, dropped before its last micro-batches: writing what the steps before it made\n",
                 signal == SIGTERM ? "SIGTERM" : "interrupted", dropped, first + o.steps);
  else if (signal && speaks)
    std::fprintf(stderr, "fused train: %s after step %lld of %lld: writing what it made\n", signal == SIGTERM ? "SIGTERM" : "interrupted",
                 last, first + o.steps);
  // The last step's update is seen by no later loss: the state written must be finite, as --resume
  // requires (a NaN checkpoint written over the model in place would lose it).
  if (const std::string bad = t.first_non_finite_state(); !bad.empty())
    throw std::runtime_error("step " + std::to_string(last) + ": the update made the model overflow: " + bad +
                             " (try a smaller --lr); nothing written");
  if (!speaks) return 0;
  // Every file is written beside its name first and renamed over it once all are: training over a
  // checkpoint in place (--out = --model or --resume) keeps the old one whole if a write fails.
  std::vector<std::unique_ptr<fused::io::pending_file>> files;
  const auto stage = [&](const char* name, std::span<const std::byte> bytes) {
    files.push_back(std::make_unique<fused::io::pending_file>(out / name));
    files.back()->write(bytes);
  };
  stage("model.safetensors", t.checkpoint_file());
  stage("train_state.safetensors", t.state_file());
  if (fs::exists(dir / "config.json")) {
    const std::string config = written_config(dir / "config.json");
    stage("config.json", std::as_bytes(std::span(config)));
  }
  for (const char* file : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    if (fs::exists(dir / file) && !fs::equivalent(dir, out)) {
      const std::string bytes = fused::cli::read_input_file((dir / file).string(), file);
      stage(file, std::as_bytes(std::span(bytes)));
    }
  for (const auto& f : files) f->commit();
  made.keep();
  std::fprintf(stderr, "fused train: wrote %s (model.safetensors, bf16; train_state.safetensors, f32, for --resume)\n", out.string().c_str());
  return signal ? 128 + signal : 0;  // as a shell reports a process the signal ended
}

int run_train(const train_options& o) {
  fused::cli::launch l = fused::cli::join_launch();
  return as_rank(l, "train", [&] { return train(o, l); });
}

const fused::cli::command train_cmd{
    "train", "fine-tunes a model on a text file (AdamW or SGD with momentum) and writes a checkpoint fused run and transformers load", [](CLI::App& app) -> fused::cli::runner {
      auto o = std::make_shared<train_options>();
      app.add_option("-m,--model", o->model_dir, "a Hugging Face model directory (config.json, tokenizer.json, *.safetensors)")->check(fused::cli::not_empty("give a model directory"))->required();
      app.add_option("--data", o->data, "the training text (UTF-8), tokenized with the model's tokenizer")->required();
      app.add_option("--out", o->out, "the directory to write: config.json, model.safetensors, train_state.safetensors, the tokenizer")
          ->required()
          ->check(fused::cli::not_empty("give a directory (. for this one)"));
      app.add_option("--seq", o->sequence, "tokens per sequence")->transform(fused::cli::integer_in(2, 1 << 16));
      app.add_option("--batch", o->batch, "sequences per step")->transform(fused::cli::integer_in(1, 4096));
      app.add_option("--micro-batch", o->micro_batch,
                     "sequences per gradient pass: the batch's gradients summed over its micro-batches in a fixed tree, the same bits "
                     "on any number of ranks (mpirun -np R); 0 = the batch over the ranks, in one program on one rank")
          ->transform(fused::cli::integer_in(0, 4096));
      app.add_option("--steps", o->steps, "optimizer steps")->transform(fused::cli::integer_in(1, 1 << 30));
      app.add_option("--lr", o->lr, "peak learning rate")->check(fused::cli::finite_in(0, 1e3));
      app.add_option("--warmup", o->warmup, "steps of linear warmup before the cosine decay")->transform(fused::cli::integer_in(0, 1 << 30));
      app.add_option("--min-lr-ratio", o->min_lr_ratio, "the cosine decay's last learning rate, as a fraction of --lr")->check(fused::cli::finite_in(0, 1));
      o->optimizer.add_to(app);
      app.add_option("--seed", o->seed, "seeds the choice of training windows and dropout's masks (a config's attention_dropout)")
          ->transform(fused::cli::integer_in(0, INT64_MAX));
      app.add_option("--resume", o->resume, "continue from a directory an earlier fused train wrote (its train_state.safetensors)");
      app.add_option("--log-every", o->log_every, "steps between progress lines")->transform(fused::cli::integer_in(1, 1 << 30));
      app.add_option("-t,--threads", o->threads, "threads; 0 = all cores")->transform(fused::cli::integer_in(0, 1024));
      return [o] { return run_train(*o); };
    }};

const fused::cli::command train_step_cmd{
    "train-step", "one optimizer step (AdamW or SGD) on one sequence: loss, gradients and updated parameters as safetensors", [](CLI::App& app) -> fused::cli::runner {
      auto o = std::make_shared<options>();
      app.add_option("-m,--model", o->model_dir, "a Hugging Face model directory")->check(fused::cli::not_empty("give a model directory"))->required();
      app.add_option("--tokens", o->tokens, "the sequence's token ids: 1,2,3 (the loss predicts each from those before it)")->required();
      app.add_option("--batch", o->batch, "the tokens are this many sequences of equal length, one after another")->transform(fused::cli::integer_in(1, 1 << 20));
      app.add_option("--micro-batch", o->micro_batch, "sequences per gradient pass, as fused train's (the same bits on any number of ranks)")
          ->transform(fused::cli::integer_in(0, 1 << 20));
      app.add_option("--lr", o->lr, "learning rate")->check(fused::cli::finite_in(0, 1e3));
      o->optimizer.add_to(app);
      app.add_option("--seed", o->seed, "seeds dropout's masks (a config's attention_dropout)")->transform(fused::cli::integer_in(0, INT64_MAX));
      app.add_option("--out", o->out, "the safetensors file to write")->required()->check(fused::cli::not_empty("give a file name"));
      app.add_option("-t,--threads", o->threads, "threads; 0 = all cores")->transform(fused::cli::integer_in(0, 1024));
      return [o] { return run_train_step(*o); };
    }};

}  // namespace fused::cli::cmd_train
