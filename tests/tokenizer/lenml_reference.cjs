// Reference encodings from @lenml/tokenizers (a JavaScript port of Hugging Face tokenizers, by way
// of transformers.js): an implementation that shares no code with fused's, for the small
// tokenizers made for the tests. Each output line is {text, ids, tokens, decoded}.
//
//   mkdir /tmp/lenml && cd /tmp/lenml && npm install @lenml/tokenizers@3.7.2
//   NODE_PATH=/tmp/lenml/node_modules node tests/tokenizer/lenml_reference.cjs \
//       tests/data/tokenizer/llama3_tiny/tokenizer.json tests/data/tokenizer/llama3_tiny/hard_strings.json \
//       > tests/data/tokenizer/llama3_tiny/reference_encodings.jsonl
//
// Texts are encoded as tokenizers' encode(text, add_special_tokens=False) and decoded with
// skip_special_tokens=False, clean_up_tokenization_spaces=False: what fused's encode and decode do.
// The generic tokenizer class is used, so no model-specific JavaScript rule alters the result.
const fs = require('fs');
const { TokenizerLoader } = require('@lenml/tokenizers');

const [json_path, texts_path] = process.argv.slice(2);
const tok = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(fs.readFileSync(json_path, 'utf8')),
  tokenizerConfig: { tokenizer_class: 'PreTrainedTokenizer', clean_up_tokenization_spaces: false },
});
for (const text of JSON.parse(fs.readFileSync(texts_path, 'utf8'))) {
  const ids = tok.encode(text, { add_special_tokens: false });
  const tokens = tok.model.convert_ids_to_tokens(ids);
  // decode() refuses an empty list; the text of no tokens is empty.
  const decoded = ids.length === 0 ? '' : tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false });
  process.stdout.write(JSON.stringify({ text, ids, tokens, decoded }) + '\n');
}
