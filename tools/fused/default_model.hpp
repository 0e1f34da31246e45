// Where the default model is: installed beside the tool (<prefix>/share/fused/models/kjv-qwen2-4m,
// from <prefix>/bin/fused), else in the source tree the tool was built from.
#pragma once
#include <filesystem>
#include <stdexcept>
#include <string>

#ifndef FUSED_DEFAULT_MODEL_DIR
#define FUSED_DEFAULT_MODEL_DIR "examples/models/kjv-qwen2-4m"
#endif

namespace fused::cli {

inline std::filesystem::path default_model_dir() {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string tried;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / "share" / "fused" / "models" / "kjv-qwen2-4m";
    if (fs::is_regular_file(installed / "config.json", ec)) return installed;
    tried = installed.string() + ", ";
  }
  const fs::path source = FUSED_DEFAULT_MODEL_DIR;
  if (fs::is_regular_file(source / "config.json", ec)) return source;
  throw std::runtime_error("the default model is not here (looked in " + tried + source.string() +
                           "): install fused with `cmake --install`, or give a model with --model DIR");
}

}  // namespace fused::cli
