// Fuzzes tokenizer::encode and decode on arbitrary bytes. Invariants checked:
//   - every id is a known token;
//   - decode(encode(x)) is the NFC form of x, where ill-formed UTF-8 in x reads as U+FFFD
//     (so for valid NFC input it is x itself: the round trip is exact);
//   - the streaming decoder, fed one id at a time, adds up to decode().
// The first byte picks allow_special, so special tokens are fuzzed both as tokens and as text.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <fused/io/tokenizer.hpp>

#include "demo_tokenizer.hpp"

namespace fuzz::tokenizer_encode {

int one_input(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const bool allow_special = (data[0] & 1) != 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  const auto ids = demo_tokenizer().encode(text, allow_special);
  for (const std::int32_t id : ids) require(!demo_tokenizer().token(id).empty(), "encode produced an unknown id");

  std::string valid;
  fused::io::tokenization::append_utf8_lossy(text, valid);
  std::string nfc_storage;
  const std::string_view expected = fused::io::tokenization::normalizer({fused::io::tokenization::normal_form::nfc}).apply(valid, nfc_storage);
  const std::string decoded = demo_tokenizer().decode(ids);
  require(decoded == expected, "decode(encode(x)) != NFC(x)");

  fused::io::tokenizer::stream_decoder stream(demo_tokenizer());
  std::string streamed;
  for (const std::int32_t id : ids) streamed += stream.push(id);
  streamed += stream.finish();
  require(streamed == decoded, "stream_decoder disagrees with decode");
  return 0;
}

}  // namespace fuzz::tokenizer_encode
