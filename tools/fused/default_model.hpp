// Where the default model is: installed beside the tool (FUSED_DEFAULT_MODEL_FROM_BIN, relative to the
// directory of the running executable: the install layout's bin -> share/fused/models/<name>), else
// in the source tree the tool was built from. tools/CMakeLists.txt defines both.
#pragma once
#include <filesystem>
#include <stdexcept>
#include <string>

namespace fused::cli {

inline std::filesystem::path default_model_dir() {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string tried;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = (exe.parent_path() / FUSED_DEFAULT_MODEL_FROM_BIN).lexically_normal();
    if (fs::is_regular_file(installed / "config.json", ec)) return installed;
    tried = installed.string() + ", ";
  }
  const fs::path source = FUSED_DEFAULT_MODEL_SOURCE_DIR;
  if (fs::is_regular_file(source / "config.json", ec)) return source;
  throw std::runtime_error("the default model is not here (looked in " + tried + source.string() +
                           "): install fused with `cmake --install`, or give a model with -m DIR");
}

}  // namespace fused::cli
