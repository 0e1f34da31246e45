// libFuzzer harness: arbitrary bytes -> fst_open_stream, the generated C's safetensors reader
// (codegen/c/fused_safetensors.h), on an in-memory stream. Every input must end in success or -1
// with a message naming the file; a crash or an ASan/UBSan report is a bug. What the C reader
// accepts, fused's C++ reader (safetensors_view::parse) must accept too, with the same tensors:
// names, dtypes, shapes, byte ranges and bytes (fst_read). The bytes also go through fst_json_parse
// as a generic JSON document (config.json, the shard index), which must not crash either.
#include "fused_safetensors.h"

#include "fused/io/safetensors.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "harness.hpp"

namespace fuzz::c_safetensors {

int one_input(const std::uint8_t* data, std::size_t size) {
  char err[512] = "";
  fst_json j;
  if (fst_json_parse(reinterpret_cast<const char*>(data), size, "fuzz.json", &j, err, sizeof err) == 0) fst_json_free(&j);
  else check(std::strncmp(err, "fuzz.json: ", 11) == 0);

  if (size == 0) return 0;  // fmemopen refuses an empty buffer
  FILE* stream = fmemopen(const_cast<std::uint8_t*>(data), size, "rb");
  check(stream != nullptr);
  fst_file f;
  err[0] = '\0';
  if (fst_open_stream(&f, stream, "fuzz.safetensors", err, sizeof err) != 0) {
    check(f.f == nullptr && std::strncmp(err, "fuzz.safetensors: ", 18) == 0);
    return 0;
  }

  const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
  fused::io::safetensors_view view;
  try {
    view = fused::io::safetensors_view::parse(input, "fuzz.safetensors");
  } catch (const fused::io::load_error&) {
    check(false);  // the C reader accepted a file the C++ reader refuses
  }
  check(view.tensors().size() == f.count);
  const auto fp = view.metadata().find("fused_weights_fingerprint");
  check(fp == view.metadata().end() ? f.fingerprint == nullptr : f.fingerprint != nullptr && fp->second == f.fingerprint);
  std::vector<unsigned char> bytes;
  for (std::size_t k = 0; k < f.count; ++k) {
    const fst_tensor& t = f.tensors[k];
    const fused::io::tensor_view* r = view.find(t.name);
    check(r != nullptr);
    check(fused::io::dtype_name(r->dtype) == t.dtype_name);
    check(std::vector<std::int64_t>(t.shape, t.shape + t.rank) == r->shape);
    check(f.data_start + t.begin == r->file_offset && t.end - t.begin == r->bytes);
    bytes.assign(r->bytes + 1, 0);
    check(fst_read(&f, &t, bytes.data(), err, sizeof err) == 0);
    check(r->bytes == 0 || std::memcmp(bytes.data(), r->data, r->bytes) == 0);
  }
  fst_close(&f);
  return 0;
}

}  // namespace fuzz::c_safetensors
