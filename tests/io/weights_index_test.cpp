// Sharded checkpoints (weight_store::load on a directory with model.safetensors.index.json): a real
// model split into shards at test time loads byte for byte what the single file loads, and every
// inconsistency of the index is one load_error naming the index and the field or tensor at fault.
#include "fused/runtime/weights.hpp"

#include "fused/core/shape.hpp"
#include "fused/core/text.hpp"
#include "fused/graph/program.hpp"
#include "fused/io/safetensors.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <fused/core/json_text.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include "load_error_of.hpp"

namespace fs = std::filesystem;
using fused::io::safetensors_file;
using fused::io::tensor_data;
using fused::runtime::weight_store;

using fused_test::load_error_of;

namespace {

const fs::path tiny_mha = fs::path(FUSED_TEST_DATA) / "reference" / "tiny_mha" / "model.safetensors";

// What weight_store::load reads of a plan's tensors: role, name, shape.
struct plan_tensor {
  fused::role kind = fused::role::weight;
  fused::text name;
  fused::shape shp;
};

// A plan that needs every tensor of `f`, with its shape, in name order.
std::vector<plan_tensor> plan_of(const safetensors_file& f) {
  std::vector<plan_tensor> plan;
  for (const fused::io::tensor_view& t : f.tensors()) {
    plan_tensor p{fused::role::weight, fused::text(t.name), {}};
    p.shp.rank = static_cast<int>(t.shape.size());
    for (std::size_t i = 0; i < t.shape.size(); ++i) p.shp[static_cast<int>(i)].n = t.shape[i];
    plan.push_back(p);
  }
  return plan;
}

// A fresh model directory in the system temp directory, removed when the test case ends.
struct model_dir {
  fs::path path;
  explicit model_dir(const std::string& name)
      : path(fs::temp_directory_path() / ("fused_shards_test_" + std::to_string(::getpid()) + "_" + name)) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~model_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path index() const { return path / "model.safetensors.index.json"; }
};

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  REQUIRE(out.good());
}

std::string shard_file(int k, int n) {
  return fmt::format("model-{:05}-of-{:05}.safetensors", k + 1, n);
}

// Writes the tensors of `source` as `n` shards in `dir`, tensor -> shard by `shard_of` (-1 leaves it
// out), and returns the weight_map Hugging Face would write for them.
nlohmann::json write_shards(const fs::path& dir, const safetensors_file& source, int n,
                            const std::function<int(std::size_t, const std::string&)>& shard_of) {
  std::vector<std::vector<tensor_data>> shards(static_cast<std::size_t>(n));
  nlohmann::json map = nlohmann::json::object();
  for (std::size_t i = 0; i < source.tensors().size(); ++i) {
    const fused::io::tensor_view& t = source.tensors()[i];
    const int k = shard_of(i, t.name);
    if (k < 0) continue;
    shards[static_cast<std::size_t>(k)].push_back({t.name, t.dtype, t.shape, std::span(t.data, t.bytes)});
    map[t.name] = shard_file(k, n);
  }
  for (int k = 0; k < n; ++k)
    fused::io::write_safetensors(dir / shard_file(k, n), shards[static_cast<std::size_t>(k)], {{"format", "pt"}});
  return map;
}

void write_index(const model_dir& dir, const nlohmann::json& weight_map) {
  write_text(dir.index(), fused::json_text::dump(nlohmann::json{{"metadata", {{"total_size", 323584}}}, {"weight_map", weight_map}}, 2));
}

// tiny_mha as 3 shards, round robin by name (so that each layer's tensors straddle shards).
nlohmann::json write_three_shards(const model_dir& dir, const safetensors_file& source) {
  return write_shards(dir.path, source, 3, [](std::size_t i, const std::string&) { return static_cast<int>(i % 3); });
}

}  // namespace

TEST_CASE("a model split into shards loads the same bytes as the single file") {
  const safetensors_file source = safetensors_file::open(tiny_mha);
  const std::vector<plan_tensor> plan = plan_of(source);
  REQUIRE(plan.size() == 27);
  const weight_store single = weight_store::load(tiny_mha, plan, false);

  const auto check_same = [&](const weight_store& sharded) {
    REQUIRE(sharded.count() == single.count());
    CHECK(sharded.converted_bytes() == 0);  // BF16 shards are used in place too
    for (std::size_t k = 0; k < plan.size(); ++k) {
      const std::size_t bytes = source.find(fused::to_string(plan[k].name))->bytes;
      CHECK(sharded.table()[k] != single.table()[k]);  // another mapping...
      CHECK(std::memcmp(sharded.table()[k], single.table()[k], bytes) == 0);  // ...with the same bytes
    }
  };

  SUBCASE("three shards, round robin") {
    model_dir dir("three");
    write_index(dir, write_three_shards(dir, source));
    check_same(weight_store::load(dir.path, plan, false));
  }
  SUBCASE("two shards, split in the middle") {
    model_dir dir("two");
    write_index(dir, write_shards(dir.path, source, 2, [](std::size_t i, const std::string&) { return i < 14 ? 0 : 1; }));
    check_same(weight_store::load(dir.path, plan, false));
  }
  SUBCASE("a tensor its shard holds and the map leaves out is used: the map only names the files") {
    model_dir dir("unmapped");
    nlohmann::json map = write_three_shards(dir, source);
    map.erase("model.norm.weight");
    write_index(dir, map);
    check_same(weight_store::load(dir.path, plan, false));
  }
  SUBCASE("model.safetensors wins over an index beside it, as in transformers") {
    model_dir dir("both");
    fs::copy_file(tiny_mha, dir.path / "model.safetensors");
    write_text(dir.index(), "not even JSON");
    check_same(weight_store::load(dir.path, plan, false));
  }
}

TEST_CASE("an index that is not a JSON object with a non-empty weight_map object of strings") {
  model_dir dir("shape");
  const safetensors_file source = safetensors_file::open(tiny_mha);
  const std::vector<plan_tensor> plan = plan_of(source);
  const std::string index = dir.index().string();
  const auto error_for = [&](const std::string& text) {
    write_text(dir.index(), text);
    return load_error_of([&] { weight_store::load(dir.path, plan, false); });
  };
  const std::string not_object = index + ": not a JSON object with a \"weight_map\" object";
  CHECK(error_for("{\"weight_map\": ") == not_object);
  CHECK(error_for("[1, 2]") == not_object);
  CHECK(error_for("{\"metadata\": {}}") == not_object);
  CHECK(error_for("{\"weight_map\": [\"model-00001-of-00001.safetensors\"]}") == not_object);
  CHECK(error_for("{\"weight_map\": {}}") ==
        index + ": \"weight_map\" is empty; it must name the shard of every tensor");
  CHECK(error_for("{\"weight_map\": {\"model.norm.weight\": 1}}") ==
        index + ": weight_map[\"model.norm.weight\"] is not a file name");
  CHECK(error_for("{\"weight_map\": {\"model.norm.weight\": null}}") ==
        index + ": weight_map[\"model.norm.weight\"] is not a file name");

  model_dir none("none");
  CHECK(load_error_of([&] { weight_store::load(none.path, plan, false); }) ==
        none.path.string() + ": neither model.safetensors nor model.safetensors.index.json is there");
}

TEST_CASE("a shard name outside the model directory is refused before anything is opened") {
  model_dir dir("names");
  const safetensors_file source = safetensors_file::open(tiny_mha);
  const std::vector<plan_tensor> plan = plan_of(source);
  const nlohmann::json good = write_three_shards(dir, source);
  nlohmann::json map = good;
  // Real safetensors files at each place the names below lead to, so that only the name is at fault.
  fs::create_directories(dir.path / "sub");
  fs::copy_file(dir.path / shard_file(0, 3), dir.path / "sub" / shard_file(0, 3));
  for (const std::string& bad : std::vector<std::string>{"/etc/passwd", "../" + shard_file(0, 3), "sub/" + shard_file(0, 3), "..", ".", "",
                                "sub\\" + shard_file(0, 3), "model\n.safetensors", std::string("model\0x", 7)}) {
    CAPTURE(bad);
    map["model.embed_tokens.weight"] = bad;
    write_index(dir, map);
    CHECK(load_error_of([&] { weight_store::load(dir.path, plan, false); }) ==
          dir.index().string() + ": weight_map[\"model.embed_tokens.weight\"] names " + fused::json_text::dump(nlohmann::json(bad)) +
              ", which is not a plain file name (a shard is read from the model directory itself)");
  }
  // A name with dots inside is an ordinary file name.
  fs::rename(dir.path / shard_file(0, 3), dir.path / "model..00001.safetensors");
  map = good;
  for (auto& file : map)
    if (file == shard_file(0, 3)) file = "model..00001.safetensors";
  write_index(dir, map);
  CHECK(load_error_of([&] { weight_store::load(dir.path, plan, false); }) == "no error");
}

TEST_CASE("a shard that is missing or not a safetensors file is named with the tensor that maps to it") {
  model_dir dir("bad_shard");
  const safetensors_file source = safetensors_file::open(tiny_mha);
  const std::vector<plan_tensor> plan = plan_of(source);
  const std::string index = dir.index().string();
  nlohmann::json map = write_three_shards(dir, source);

  map["model.norm.weight"] = "model-00004-of-00003.safetensors";
  write_index(dir, map);
  CHECK(load_error_of([&] { weight_store::load(dir.path, plan, false); }) ==
        index + ": weight_map[\"model.norm.weight\"] names shard \"model-00004-of-00003.safetensors\": " +
            (dir.path / "model-00004-of-00003.safetensors").string() + ": cannot open: No such file or directory");

  write_text(dir.path / "model-00004-of-00003.safetensors", "12345");
  CHECK(load_error_of([&] { weight_store::load(dir.path, plan, false); }) ==
        index + ": weight_map[\"model.norm.weight\"] names shard \"model-00004-of-00003.safetensors\": " +
            (dir.path / "model-00004-of-00003.safetensors").string() +
            ": file is 5 bytes, shorter than the 8-byte header length of a safetensors file");

  fs::create_directories(dir.path / "model-00004-of-00003.safetensors.d");
  map["model.norm.weight"] = "model-00004-of-00003.safetensors.d";
  write_index(dir, map);
  CHECK(load_error_of([&] { weight_store::load(dir.path, plan, false); }) ==
        index + ": weight_map[\"model.norm.weight\"] names shard \"model-00004-of-00003.safetensors.d\": " +
            (dir.path / "model-00004-of-00003.safetensors.d").string() + ": not a regular file");
}

TEST_CASE("the map and the shards disagree: misplaced, ambiguous, missing, unused tensors") {
  model_dir dir("disagree");
  const safetensors_file source = safetensors_file::open(tiny_mha);
  const std::vector<plan_tensor> plan = plan_of(source);
  const std::string index = dir.index().string();

  SUBCASE("a tensor mapped to a shard that does not hold it") {
    nlohmann::json map = write_three_shards(dir, source);
    REQUIRE(map["model.norm.weight"] != shard_file(0, 3));
    map["model.norm.weight"] = shard_file(0, 3);
    write_index(dir, map);
    CHECK(load_error_of([&] { weight_store::load(dir.path, plan, false); }) ==
          index + ": weight_map puts tensor \"model.norm.weight\" in \"model-00001-of-00003.safetensors\", which does "
                  "not contain it");
  }
  SUBCASE("a map entry for a tensor no shard holds") {
    nlohmann::json map = write_three_shards(dir, source);
    map["lm_head.weight.extra"] = shard_file(2, 3);
    write_index(dir, map);
    CHECK(load_error_of([&] { weight_store::load(dir.path, plan, false); }) ==
          index + ": weight_map puts tensor \"lm_head.weight.extra\" in \"model-00003-of-00003.safetensors\", which "
                  "does not contain it");
  }
  SUBCASE("a tensor in two shards is ambiguous, whichever of them the map names") {
    // Shard 1 also holds model.norm.weight, which the round robin gives to another shard.
    nlohmann::json map = write_three_shards(dir, source);
    const std::string home = map["model.norm.weight"];
    std::vector<tensor_data> first;
    for (const auto& [name, file] : map.items())
      if (file == shard_file(0, 3) || name == "model.norm.weight") {
        const fused::io::tensor_view& t = *source.find(name);
        first.push_back({t.name, t.dtype, t.shape, std::span(t.data, t.bytes)});
      }
    fused::io::write_safetensors(dir.path / shard_file(0, 3), first);
    write_index(dir, map);
    CHECK(load_error_of([&] { weight_store::load(dir.path, plan, false); }) ==
          index + ": tensor \"model.norm.weight\" is in two shards, \"model-00001-of-00003.safetensors\" and \"" +
              home + "\"; which one to load is ambiguous");
  }
  SUBCASE("a tensor the model needs that no listed shard holds") {
    // model.norm.weight is left out of the shards and of the map; a fourth file holding it is not
    // listed, so it is not read.
    write_index(dir, write_shards(dir.path, source, 3, [](std::size_t i, const std::string& name) {
                  return name == "model.norm.weight" ? -1 : static_cast<int>(i % 3);
                }));
    fused::io::write_safetensors(dir.path / "extra.safetensors",
                                 {{"model.norm.weight", fused::io::dtype::BF16, {64},
                                   std::span(source.find("model.norm.weight")->data, 128)}});
    CHECK(load_error_of([&] { weight_store::load(dir.path, plan, false); }) ==
          index + ": tensor \"model.norm.weight\" is in none of the 3 shards it lists; the model needs it with shape "
                  "[64]");
  }
  SUBCASE("a tensor a shard holds that the model does not use") {
    write_index(dir, write_three_shards(dir, source));
    std::vector<plan_tensor> fewer = plan;
    std::erase_if(fewer, [](const plan_tensor& t) { return t.name == "model.norm.weight"; });
    const std::string shard = (dir.path / shard_file(static_cast<int>(std::ranges::find_if(source.tensors(), [](const auto& t) {
                                                                         return t.name == "model.norm.weight";
                                                                       }) - source.tensors().begin()) % 3, 3)).string();
    CHECK(load_error_of([&] { weight_store::load(dir.path, fewer, false); }) ==
          shard + ": 1 unexpected tensor the model does not use: \"model.norm.weight\"");
  }
}

TEST_CASE("one file: a missing tensor is still named by that file") {
  const safetensors_file source = safetensors_file::open(tiny_mha);
  std::vector<plan_tensor> plan = plan_of(source);
  plan.push_back({fused::role::weight, fused::text("model.extra.weight"), fused::shape(std::int64_t{4}, std::int64_t{2})});
  CHECK(load_error_of([&] { weight_store::load(tiny_mha, plan, false); }) ==
        tiny_mha.string() + ": tensor \"model.extra.weight\" is missing; the model needs it with shape [4, 2]");
}
