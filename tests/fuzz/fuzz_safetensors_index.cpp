// libFuzzer harness: arbitrary bytes as model.safetensors.index.json -> weight_store::load, in a
// temporary model directory beside two fixed shards (a.safetensors: x BF16 [2], y F32 [3];
// b.safetensors: z BF16 [2, 2]) and a file that is not safetensors (c.safetensors). The plan needs
// x, y and z. Every input must load or end in a load_error; anything else escaping (another
// exception type, a crash, an ASan/UBSan report) is a bug. What loads holds the shards' bytes.
#include "fused/core/shape.hpp"
#include "fused/core/text.hpp"
#include "fused/graph/program.hpp"
#include "fused/io/safetensors.hpp"
#include "fused/runtime/weights.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "harness.hpp"

namespace fuzz::safetensors_index {

namespace {

namespace fs = std::filesystem;
using fused::io::dtype;

struct plan_tensor {
  fused::role kind = fused::role::weight;
  fused::text name;
  fused::shape shp;
};

const std::uint16_t x_data[2] = {0x3F80, 0xBF80};
const float y_data[3] = {1.0f, -2.0f, 0.5f};
const std::uint16_t z_data[4] = {1, 2, 3, 4};

struct model_dir {
  fs::path path = fs::temp_directory_path() / ("fused_fuzz_index_" + std::to_string(::getpid()));
  std::vector<plan_tensor> plan{{fused::role::weight, "x", fused::shape(std::int64_t{2})},
                                {fused::role::weight, "y", fused::shape(std::int64_t{3})},
                                {fused::role::weight, "z", fused::shape(std::int64_t{2}, std::int64_t{2})}};
  model_dir() {
    fs::create_directories(path);
    fused::io::write_safetensors(path / "a.safetensors", {{"x", dtype::BF16, {2}, std::as_bytes(std::span(x_data))},
                                                          {"y", dtype::F32, {3}, std::as_bytes(std::span(y_data))}});
    fused::io::write_safetensors(path / "b.safetensors", {{"z", dtype::BF16, {2, 2}, std::as_bytes(std::span(z_data))}});
    std::ofstream(path / "c.safetensors") << "not a safetensors file";
  }
  ~model_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

int one_input(const std::uint8_t* data, std::size_t size) {
  static const model_dir dir;
  {
    std::ofstream out(dir.path / "model.safetensors.index.json", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    const auto w = fused::runtime::weight_store::load(dir.path, dir.plan, false);
    check(w.count() == 3);
    check(std::memcmp(w.table()[0], x_data, sizeof x_data) == 0);
    check(w.table()[1][0] == 0x3F80 && w.table()[1][1] == 0xC000 && w.table()[1][2] == 0x3F00);  // y, to bf16
    check(std::memcmp(w.table()[2], z_data, sizeof z_data) == 0);
  } catch (const fused::io::load_error&) {
  }
  return 0;
}

}  // namespace fuzz::safetensors_index
