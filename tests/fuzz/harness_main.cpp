// The one fuzzing program: libFuzzer's entry points, dispatching to the harness named by the name
// the program runs under (fuzz_<name>, a link to fuzz_fused that CMake makes beside it). The list
// of harnesses, fuzz_harnesses.inc, is generated from the tests/fuzz/fuzz_*.cpp files.
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "harness.hpp"

#define FUSED_FUZZ_HARNESS(name) \
  namespace fuzz::name {         \
  int one_input(const std::uint8_t* data, std::size_t size); \
  }
#include "fuzz_harnesses.inc"
#undef FUSED_FUZZ_HARNESS

namespace {

struct harness {
  std::string_view program;
  int (*one_input)(const std::uint8_t*, std::size_t);
};

#define FUSED_FUZZ_HARNESS(name) harness{"fuzz_" #name, &fuzz::name::one_input},
constexpr harness harnesses[] = {
#include "fuzz_harnesses.inc"
};
#undef FUSED_FUZZ_HARNESS

int (*chosen)(const std::uint8_t*, std::size_t) = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  std::string_view program = *argc > 0 ? (*argv)[0] : "";
  program = program.substr(program.find_last_of('/') + 1);  // (npos + 1 == 0: no '/', the whole name)
  for (const harness& h : harnesses)
    if (h.program == program) {
      chosen = h.one_input;
      return 0;
    }
  std::fprintf(stderr, "%.*s: runs the harness its name says; run it as one of the links beside it:\n",
               static_cast<int>(program.size()), program.data());
  for (const harness& h : harnesses) std::fprintf(stderr, "  %.*s\n", static_cast<int>(h.program.size()), h.program.data());
  std::exit(2);
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { return chosen(data, size); }
