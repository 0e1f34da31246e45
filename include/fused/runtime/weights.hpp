// Weights bound to a plan's weight slots, once, by Hugging Face name.
//
// A plan numbers its weights (runtime/calls.hpp: weight slots, tensor-id order) and the executors
// read them through a table of pointers. This header fills that table:
//   - from a Hugging Face checkpoint (a directory with model.safetensors, or sharded files listed
//     by model.safetensors.index.json, or one .safetensors file), memory-mapped: BF16 tensors are
//     used in place (copied when a file puts one at an odd offset), F32/F16 ones converted once;
//     every tensor the plan needs must be present with its shape; a tensor the plan does not use is
//     an error naming it (except lm_head.weight of the embedding's shape when the embeddings are
//     tied: transformers ignores it too);
//     a sharded checkpoint's index is checked before any tensor is bound: "weight_map" is a
//     non-empty object of file names in the model directory itself (no '/', '\\', "." or ".."),
//     every shard it names opens as a valid safetensors file, every tensor it maps is in the shard
//     it names, and no tensor is in two shards. A tensor that a shard holds and the map leaves out
//     is used like any other of that shard (transformers loads whole shards: the map only says
//     which files to read), and is reported as unexpected if the plan does not use it;
//   - from one caller blob laid out as the plan's weights region (the generated C's layout);
//   - from a deterministic generator (synthetic weights of a config's shape, for benchmarks).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../core/json_text.hpp"
#include "../core/non_finite.hpp"
#include "../core/text_string.hpp"
#include "../io/json_config.hpp"
#include "../io/load_error.hpp"
#include "../io/safetensors.hpp"
#include "session.hpp"

namespace fused::runtime {

class weight_store {
 public:
  weight_store() = default;
  weight_store(weight_store&&) noexcept = default;
  weight_store& operator=(weight_store&&) noexcept = default;

  // Told after each tensor: bytes of the checkpoint bound so far, and of all the plan's weights
  // (as stored: a converted F32 tensor counts its F32 bytes).
  using load_progress = std::function<void(std::int64_t done_bytes, std::int64_t total_bytes)>;

  // `path`: a model directory or a .safetensors file. `tensors`: the plan's tensors (weights are
  // the ones with role::weight, bound in slot order). `tied`: lm_head.weight may be present unused.
  template <class Tensors>
  static weight_store load(const std::filesystem::path& path, const Tensors& tensors, bool tied, const load_progress& progress = {}) {
    weight_store w;
    w.open_files(path);
    std::int64_t total_bytes = 0, done_bytes = 0;
    if (progress)
      for (const auto& t : tensors)
        if (t.kind == role::weight)
          for (const auto& f : w.files_)
            if (const io::tensor_view* v = f.find(to_string(t.name))) {
              total_bytes += static_cast<std::int64_t>(v->bytes);
              break;
            }
    for (const auto& t : tensors) {
      if (t.kind != role::weight) continue;
      const std::string name = to_string(t.name);
      std::vector<std::int64_t> shp;
      for (int i = 0; i < t.shp.rank; ++i) shp.push_back(t.shp[i].n);
      io::safetensors_file& f = w.file_for(name, shp);
      const io::tensor_view* v = f.find(name);
      w.sources_.push_back(v);
      // A BF16 tensor at an odd file offset (legal, if rare: a header of odd length) is copied, as
      // an F32 one is converted: kernels read bf16 as uint16_t.
      if (v->dtype == io::dtype::BF16 && reinterpret_cast<std::uintptr_t>(v->data) % 2 == 0) {
        w.table_.push_back(reinterpret_cast<const std::uint16_t*>(f.bind(name, io::dtype::BF16, shp).data));
      } else {
        if (v->dtype != io::dtype::F32 && v->dtype != io::dtype::F16 && v->dtype != io::dtype::BF16)
          throw io::load_error(f.file_name() + ": tensor \"" + name + "\" has dtype " + std::string(io::dtype_name(v->dtype)) +
                               "; only BF16, F16 and F32 are read");  // (as the generated C's reader says)
        w.owned_.push_back(io::to_bf16_owned(f.bind(name, shp)));
        w.converted_bytes_ += static_cast<std::int64_t>(v->bytes);
        w.table_.push_back(w.owned_.back().data());
      }
      if (progress) progress(done_bytes += static_cast<std::int64_t>(v->bytes), total_bytes);
    }
    // transformers ignores a stored lm_head.weight when the embeddings are tied: so do we, but as it
    // does, not one of another shape than the embedding it would be tied to.
    std::vector<std::int64_t> tied_shape;
    for (const auto& t : tensors)
      if (t.kind == role::weight && to_string(t.name) == "model.embed_tokens.weight")
        for (int i = 0; i < t.shp.rank; ++i) tied_shape.push_back(t.shp[i].n);
    for (auto& f : w.files_) {
      if (const io::tensor_view* head = f.find("lm_head.weight"); tied && head)
        f.bind(head->name, tied_shape.empty() ? std::span<const std::int64_t>(head->shape) : std::span<const std::int64_t>(tied_shape));
      // RoPE's inverse frequencies, which older conversions stored (transformers computes and ignores them).
      for (const io::tensor_view& t : f.tensors())
        if (std::string_view(t.name).ends_with("rotary_emb.inv_freq")) f.bind(t.name, t.shape);
      f.require_all_bound();
    }
    return w;
  }

  // The shape the checkpoint at `path` stores for each of the plan's weights (by tensor id; empty
  // for a weight it lacks and for tensors that are not weights), binding nothing: what a runner
  // reports before load() would stop at the first missing or misshapen weight.
  template <class Tensors>
  static std::vector<std::optional<std::vector<std::int64_t>>> shapes_in(const std::filesystem::path& path, const Tensors& tensors) {
    weight_store w;
    w.open_files(path);
    std::vector<std::optional<std::vector<std::int64_t>>> out;
    for (const auto& t : tensors) {
      out.emplace_back();
      if (t.kind != role::weight) continue;
      for (const auto& f : w.files_)
        if (const io::tensor_view* v = f.find(to_string(t.name))) {
          out.back() = v->shape;
          break;
        }
    }
    return out;
  }

  // A blob laid out as the plan's weights region: slot k points at base + the offset of weight k.
  template <class Tensors, class Buffers>
  static weight_store from_blob(const std::byte* base, const Tensors& tensors, const Buffers& buffers) {
    weight_store w;
    for (const auto& t : tensors)
      if (t.kind == role::weight)
        w.table_.push_back(reinterpret_cast<const std::uint16_t*>(base + buffers[static_cast<std::size_t>(t.id)].offset));
    return w;
  }

  // Deterministic synthetic weights of the plan's shapes, in one blob laid out as the weights region:
  // matrices uniform in +-1/sqrt(in_features), norm weights near 1, biases small. Same seed, same bits.
  template <class Tensors, class Buffers>
  static weight_store synthetic(const Tensors& tensors, const Buffers& buffers, std::int64_t region_bytes, std::uint64_t seed) {
    aligned_bytes blob(static_cast<std::size_t>(region_bytes));
    for (const auto& t : tensors) {
      if (t.kind != role::weight) continue;
      auto* p = reinterpret_cast<std::uint16_t*>(blob.data() + buffers[static_cast<std::size_t>(t.id)].offset);
      std::int64_t n = 1;
      for (int i = 0; i < t.shp.rank; ++i) n *= t.shp[i].n;
      const std::string name = to_string(t.name);
      const bool norm = name.find("norm") != std::string::npos;
      const float scale = t.shp.rank == 2 ? 1.0f / std::sqrt(static_cast<float>(t.shp[1].n)) : norm ? 0.1f : 0.02f;
      std::uint64_t s = seed ^ (0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(t.id + 1));
      for (std::int64_t i = 0; i < n; ++i) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const float u = static_cast<float>((s >> 40) & 0xFFFFFF) / 16777216.0f * 2.0f - 1.0f;  // [-1, 1)
        p[i] = fk_f32_to_bf16_1((norm ? 1.0f : 0.0f) + u * scale);
      }
    }
    weight_store w = from_blob(blob.data(), tensors, buffers);
    w.blob_ = std::move(blob);
    return w;
  }

  const std::uint16_t* const* table() const { return table_.data(); }
  std::size_t count() const { return table_.size(); }
  // The blob of synthetic weights (empty for other stores).
  std::span<const std::byte> blob() const { return {blob_.data(), blob_.size()}; }
  // Bytes of checkpoint tensors converted to bf16 at load (0 for a bf16 checkpoint: used in place).
  std::int64_t converted_bytes() const { return converted_bytes_; }
  // Weight k as the checkpoint stores it (BF16, F16 or F32), for a reader that wants more than bf16
  // (a trainer's f32 master weights); nullptr for a blob or synthetic store.
  const io::tensor_view* source(std::size_t k) const { return k < sources_.size() ? sources_[k] : nullptr; }

  // The first checkpoint weight that holds a NaN or an infinity as the model reads it (bf16), e.g.
  // `tensor "model.norm.weight" holds NaN at element 7 (3 of 896 values are not finite)`; a finite
  // F32 value that bf16 cannot hold is named as one (`holds 3.4e+38 at element 0, beyond bf16's
  // range (...)`). Empty when every one is finite or the store has no checkpoint. It reads every
  // weight: for a diagnosis.
  std::string first_non_finite() const { return first_non_finite(false); }
  // The same for the values as stored (F32, F16 or BF16, exactly): what a trainer's f32 master
  // weights start from.
  std::string first_non_finite_stored() const { return first_non_finite(true); }

 private:
  std::string first_non_finite(bool as_stored) const {
    for (std::size_t k = 0; k < sources_.size() && k < table_.size(); ++k) {
      const io::tensor_view& source = *sources_[k];
      const auto n = static_cast<std::size_t>(source.numel());
      const std::vector<float> stored = as_stored ? io::to_f32_owned(source) : std::vector<float>{};
      const auto value = [&](std::size_t i) { return as_stored ? stored[i] : fk_bf16_to_f32_1(table_[k][i]); };
      const non_finite_count bad = count_non_finite(n, value);
      if (!bad.count) continue;
      float as_written = value(bad.first);
      if (source.dtype == io::dtype::F32) std::memcpy(&as_written, source.data + bad.first * sizeof(float), sizeof(float));
      if (std::isfinite(as_written))
        return fmt::format("tensor \"{}\" holds {:g} at element {}, beyond bf16's range ({} of {} values are not finite in bf16)",
                           source.name, as_written, bad.first, bad.count, n);
      return non_finite_sentence(source.name, as_written, bad, n);
    }
    return {};
  }

  void open_files(const std::filesystem::path& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) {
      files_.push_back(io::safetensors_file::open(path));
      return;
    }
    if (!fs::is_directory(path, ec)) throw io::load_error(path.string() + ": no such file or directory");
    const fs::path single = path / "model.safetensors", index = path / "model.safetensors.index.json";
    if (fs::exists(single)) {
      files_.push_back(io::safetensors_file::open(single));
      return;
    }
    if (!fs::exists(index))
      throw io::load_error(path.string() + ": neither model.safetensors nor model.safetensors.index.json is there");
    open_shards(path, index);
  }

  // The shards model.safetensors.index.json lists, checked against each other (see the top).
  void open_shards(const std::filesystem::path& dir, const std::filesystem::path& index_path) {
    const std::string index = index_path.string();
    source_ = index;
    const nlohmann::json j = json_text::parse(io::detail::read_text_file(index_path), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      throw io::load_error(index + ": not a JSON object with a \"weight_map\" object");
    const nlohmann::json& map = j["weight_map"];
    if (map.empty()) throw io::load_error(index + ": \"weight_map\" is empty; it must name the shard of every tensor");
    std::map<std::string, std::size_t> file_index;
    std::vector<std::pair<std::string, std::size_t>> mapped;  // tensor, shard
    for (const auto& [name, file] : map.items()) {
      if (!file.is_string()) throw io::load_error(index + ": weight_map[\"" + name + "\"] is not a file name");
      const std::string fname = file.get<std::string>();
      if (!is_plain_file_name(fname))
        throw io::load_error(index + ": weight_map[\"" + name + "\"] names " + json_text::dump(nlohmann::json(fname)) +
                             ", which is not a plain file name (a shard is read from the model directory itself)");  // quoted as JSON: "a\nb"
      auto [it, fresh] = file_index.try_emplace(fname, files_.size());
      if (fresh) {
        try {
          files_.push_back(io::safetensors_file::open(dir / fname));
        } catch (const io::load_error& e) {
          throw io::load_error(index + ": weight_map[\"" + name + "\"] names shard \"" + fname + "\": " + e.what());
        }
      }
      mapped.emplace_back(name, it->second);
    }
    for (const auto& [name, shard] : mapped)
      if (!files_[shard].find(name))
        throw io::load_error(index + ": weight_map puts tensor \"" + name + "\" in \"" + shard_name(shard) +
                             "\", which does not contain it");
    for (std::size_t k = 0; k < files_.size(); ++k)
      for (const io::tensor_view& t : files_[k].tensors())
        if (auto [it, fresh] = shard_of_.try_emplace(t.name, k); !fresh)
          throw io::load_error(index + ": tensor \"" + t.name + "\" is in two shards, \"" + shard_name(it->second) +
                               "\" and \"" + shard_name(k) + "\"; which one to load is ambiguous");
  }
  // A name that opens a file in the directory itself: not empty, ".", "..", a path or a control code.
  static bool is_plain_file_name(const std::string& name) {
    return !name.empty() && name != "." && name != ".." &&
           std::ranges::none_of(name, [](char c) { return c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20; });
  }
  std::string shard_name(std::size_t k) const {
    return std::filesystem::path(files_[k].file_name()).filename().string();
  }
  io::safetensors_file& file_for(const std::string& name, const std::vector<std::int64_t>& shp) {
    if (source_.empty()) {  // one file
      if (files_.front().find(name)) return files_.front();
      throw io::load_error(files_.front().file_name() + ": tensor \"" + name +
                           "\" is missing; the model needs it with shape " + io::shape_string(shp));
    }
    if (const auto it = shard_of_.find(name); it != shard_of_.end()) return files_[it->second];
    throw io::load_error(source_ + ": tensor \"" + name + "\" is in none of the " + std::to_string(files_.size()) +
                         " shard" + (files_.size() == 1 ? "" : "s") + " it lists; the model needs it with shape " +
                         io::shape_string(shp));
  }

  std::vector<io::safetensors_file> files_;
  std::string source_;                            // the index, for a sharded checkpoint
  std::map<std::string, std::size_t> shard_of_;  // tensor -> files_ index, for a sharded checkpoint
  std::vector<std::vector<std::uint16_t>> owned_;
  aligned_bytes blob_;
  std::vector<const std::uint16_t*> table_;
  std::vector<const io::tensor_view*> sources_;  // slot k's tensor in files_ (load() only)
  std::int64_t converted_bytes_ = 0;
};

}  // namespace fused::runtime
