// `fused`: the command-line front door. Subcommands live in cmd_*.cpp and register themselves.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli.hpp"

namespace {
int usage(std::FILE* to) {
  std::fprintf(to, "usage: fused <command> [options]\n\ncommands:\n");
  for (const auto& e : fused::cli::registry()) std::fprintf(to, "  %-16s %s\n", e.name.c_str(), e.summary.c_str());
  return to == stdout ? 0 : 2;
}
}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return usage(stderr);
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") return usage(stdout);
  // Longest match first: "bench kernels" before "bench".
  const fused::cli::entry* best = nullptr;
  std::size_t words = 0;
  for (const auto& e : fused::cli::registry()) {
    if (args.size() >= 2 && e.name == args[0] + " " + args[1]) { best = &e; words = 2; break; }
    if (e.name == args[0] && !best) { best = &e; words = 1; }
  }
  if (!best) {
    std::fprintf(stderr, "fused: unknown command '%s'\n", args[0].c_str());
    return usage(stderr);
  }
  std::vector<std::string> rest(args.begin() + static_cast<std::ptrdiff_t>(words), args.end());
  try {
    return best->run(rest);
  } catch (const fused::cli::usage_error& e) {
    std::fprintf(stderr, "fused %s: %s\n", best->name.c_str(), e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fused %s: error: %s\n", best->name.c_str(), e.what());
    return 1;
  }
}
