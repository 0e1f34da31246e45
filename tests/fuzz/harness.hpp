// What every harness shares. All harnesses are one program, fuzz_fused (harness_main.cpp): each
// tests/fuzz/fuzz_<name>.cpp defines fuzz::<name>::one_input, and the program runs the one its name
// says: build-fuzz/tests/fuzz/fuzz_<name> is a link to fuzz_fused. One program compiles the library
// code the harnesses share once: 193 s of CPU as one unit against 341 s as eight programs (clang 16,
// -O1, ASan + UBSan + libFuzzer, AMD EPYC).
#pragma once
#include <cstddef>
#include <cstdint>

namespace fuzz {

// An invariant of the code under test broke: stop here, so that libFuzzer keeps the input.
inline void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace fuzz
