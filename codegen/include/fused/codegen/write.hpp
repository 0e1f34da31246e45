// Writes a generated model's files into one self-contained directory: <name>.h, <name>.c,
// [<name>_main.c,] [<name>_generate_main.c,] memory_layout.json, graph.json, and copies of the C headers they include (the
// kernel headers with their own includes, and fused_safetensors.h), so that
//   cc -O2 -march=native -std=c11 DIR/*.c -o scorer -lm -fopenmp -lpthread
// builds it with nothing else on the include path.
#pragma once
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fused/io/file_replace.hpp>

#include "c_program.hpp"
#include "emit_c.hpp"
#include "emit_json.hpp"

namespace fused::codegen {

struct emitted_file {
  std::string name;
  std::string text;
};

// Named in every generated file. The same for `fused gen-c` and fused_generate_c(): both print the
// same text for one config.
inline constexpr std::string_view generator = "fused's C generator (docs/GENERATOR.md)";

// Every generated text of a program; the scorer when the program keeps the logits of every position.
inline std::vector<emitted_file> emit_all(const c_program& p) {
  const bool scorer = p.all_rows();
  std::vector<emitted_file> f;
  f.push_back({p.name + ".h", emit_header(p, generator)});
  f.push_back({p.name + ".c", emit_source(p, generator)});
  if (scorer) f.push_back({p.name + "_main.c", emit_scorer(p, generator)});
  if (p.generate) f.push_back({p.name + "_generate_main.c", emit_generate_main(p, generator)});
  f.push_back({"memory_layout.json", emit_memory_layout(p)});
  f.push_back({"graph.json", emit_graph(p)});
  return f;
}

namespace detail {
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path.string() + ": cannot read");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
inline void write_file(const std::filesystem::path& path, const std::string& text) {
  io::replace_file(path, std::as_bytes(std::span(text)));
}
// The quoted includes of a C header ("fk_common.h"), in order.
inline std::vector<std::string> local_includes(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto at = line.find("#include \"");
    if (at == std::string::npos || line.find_first_not_of(" \t") != at) continue;
    const auto end = line.find('"', at + 10);
    if (end != std::string::npos) out.push_back(line.substr(at + 10, end - at - 10));
  }
  return out;
}
}  // namespace detail

// The headers the generated C needs (`extra`: beyond the kernels every model calls and the support
// header), with their includes, found in `dirs` (first match wins).
inline std::vector<std::filesystem::path> c_headers_needed(const std::vector<std::filesystem::path>& dirs, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> todo = kernel_headers();
  todo.push_back(support_header);
  todo.insert(todo.end(), extra.begin(), extra.end());
  std::set<std::string> seen;
  std::vector<std::filesystem::path> out;
  while (!todo.empty()) {
    const std::string name = todo.back();
    todo.pop_back();
    if (!seen.insert(name).second) continue;
    std::filesystem::path found;
    for (const auto& d : dirs)
      if (std::filesystem::exists(d / name)) {
        found = d / name;
        break;
      }
    if (found.empty()) {
      std::string looked;
      for (const auto& d : dirs) looked += (looked.empty() ? "" : ", ") + d.string();
      throw std::runtime_error("codegen: cannot find the C header " + name + " (looked in " + looked + ")");
    }
    out.push_back(found);
    for (auto& inc : detail::local_includes(detail::read_file(found))) todo.push_back(inc);
  }
  return out;
}

// A bundle as written: the emitted files, and the headers their C includes (from header_dirs).
struct bundle_files {
  std::vector<emitted_file> files;
  std::vector<std::filesystem::path> headers;  // where each header is read from
};

// The headers `files` need beyond one another; throws std::invalid_argument when an emitted file has
// a header's name (a program named fk_common would be written over by the kernels' fk_common.h).
inline bundle_files plan_bundle(std::vector<emitted_file> files, const std::vector<std::filesystem::path>& header_dirs) {
  std::vector<std::string> included;  // what the emitted files include beyond one another
  for (const auto& f : files)
    for (auto& inc : detail::local_includes(f.text)) included.push_back(inc);
  std::erase_if(included, [&](const std::string& inc) {
    return std::any_of(files.begin(), files.end(), [&](const emitted_file& f) { return f.name == inc; });
  });
  bundle_files b{.files = std::move(files), .headers = c_headers_needed(header_dirs, included)};
  for (const auto& h : b.headers)
    for (const auto& f : b.files)
      if (f.name == h.filename().string())
        throw std::invalid_argument("codegen: the program's " + f.name + " has the name of a header its C includes; choose another name");
  return b;
}

// The paths a bundle takes in `out_dir`, each file's and each header's.
inline std::vector<std::filesystem::path> bundle_paths(const bundle_files& b, const std::filesystem::path& out_dir) {
  std::vector<std::filesystem::path> paths;
  for (const auto& f : b.files) paths.push_back(out_dir / f.name);
  for (const auto& h : b.headers) paths.push_back(out_dir / h.filename());
  return paths;
}

// Writes the bundle into `out_dir` (created if needed). Returns the paths written.
inline std::vector<std::filesystem::path> write_bundle(const bundle_files& b, const std::filesystem::path& out_dir) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec || !std::filesystem::is_directory(out_dir))
    throw std::runtime_error(out_dir.string() + ": cannot be made a directory" + (ec ? ": " + ec.message() : ""));
  for (const auto& f : b.files) detail::write_file(out_dir / f.name, f.text);
  for (const auto& h : b.headers) detail::write_file(out_dir / h.filename(), detail::read_file(h));
  return bundle_paths(b, out_dir);
}

// Writes the files into `out_dir` (created if needed) and copies the headers from `header_dirs`.
// Returns the paths written.
inline std::vector<std::filesystem::path> write_bundle(const std::vector<emitted_file>& files, const std::filesystem::path& out_dir,
                                                       const std::vector<std::filesystem::path>& header_dirs) {
  return write_bundle(plan_bundle(files, header_dirs), out_dir);
}

}  // namespace fused::codegen
