// libFuzzer harness: arbitrary bytes -> safetensors_view::parse, the parser safetensors_file::open
// runs on its mapping. Every input must end in a valid file or a load_error; anything else escaping
// (another exception type, a crash, ASan/UBSan report) is a bug. Whatever is accepted must also
// hold up: every tensor's bytes are readable (ASan checks they lie inside the input), conversions
// work, each tensor binds by its own shape, and writing the file back out parses to the same thing.
#include "fused/io/safetensors.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "harness.hpp"

namespace fuzz::safetensors {

int one_input(const std::uint8_t* data, std::size_t size) {
  using namespace fused::io;
  const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
  safetensors_view view;
  try {
    view = safetensors_view::parse(input, "fuzz.safetensors");
  } catch (const load_error&) {
    return 0;
  }

  std::vector<tensor_data> copies;
  for (const tensor_view& t : view.tensors()) {
    check(t.data >= input.data() && t.data + t.bytes <= input.data() + input.size());
    std::size_t sum = 0;  // read every byte, so ASan sees any out-of-bounds view
    for (std::size_t i = 0; i < t.bytes; ++i) sum += std::to_integer<std::size_t>(t.data[i]);
    check(sum <= 255 * t.bytes);

    try {
      if (t.dtype == dtype::F32 || t.dtype == dtype::F16 || t.dtype == dtype::BF16) {
        check(to_bf16_owned(t).size() == static_cast<std::size_t>(t.numel()));
        check(to_f32_owned(t).size() == static_cast<std::size_t>(t.numel()));
      } else {
        (void)to_i64_owned(t);
      }
    } catch (const load_error&) {
      // a dtype without that conversion: refused with a message, as documented
    }
    check(&view.bind(t.name, t.shape) == &t);
    copies.push_back({t.name, t.dtype, t.shape, std::span(t.data, t.bytes)});
  }
  check(view.unbound().empty());

  const std::vector<std::byte> rewritten = serialize_safetensors(copies, view.metadata());
  const safetensors_view again = safetensors_view::parse(rewritten, "rewritten.safetensors");
  check(again.metadata() == view.metadata());
  check(again.tensors().size() == view.tensors().size());
  for (std::size_t i = 0; i < view.tensors().size(); ++i) {
    const tensor_view& a = view.tensors()[i];
    const tensor_view& b = again.tensors()[i];
    check(a.name == b.name && a.dtype == b.dtype && a.shape == b.shape && a.bytes == b.bytes);
    check(a.bytes == 0 || std::memcmp(a.data, b.data, a.bytes) == 0);
  }
  return 0;
}

}  // namespace fuzz::safetensors
