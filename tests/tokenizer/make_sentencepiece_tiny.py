#!/usr/bin/env python3
"""Makes the small SentencePiece-style BPE tokenizers of tests/data/tokenizer/sentencepiece_tiny/.

The kind Llama 2, Mistral and TinyLlama ship: BPE over characters with "▁" for a space,
`byte_fallback: true` (a character outside the vocabulary becomes its UTF-8 bytes as <0x..>
tokens) and the decoder Sequence [Replace "▁" -> " ", ByteFallback, Fuse, Strip]. Two files share
one vocabulary of a few hundred tokens learned here from public-domain text (Genesis 1, KJV):

  tokenizer.json            Llama 2 / TinyLlama: normalizer Prepend "▁" + Replace " " -> "▁",
                            no pre-tokenizer, TemplateProcessing adding <s>;
  tokenizer_metaspace.json  Mistral (converted with legacy=False): no normalizer, Metaspace
                            pre-tokenizer with prepend_scheme "first" and split false.

    python3 tests/tokenizer/make_sentencepiece_tiny.py tests/data/tokenizer/sentencepiece_tiny

Deterministic. The reference encodings next to them come from @lenml/tokenizers
(tests/tokenizer/lenml_reference.cjs), not from this script.
"""
import collections
import json
import os
import sys

import regex

CORPUS = """In the beginning God created the heaven and the earth.
And the earth was without form, and void; and darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters.
And God said, Let there be light: and there was light.
And God saw the light, that it was good: and God divided the light from the darkness.
And God called the light Day, and the darkness he called Night. And the evening and the morning were the first day.
And God said, Let there be a firmament in the midst of the waters, and let it divide the waters from the waters.
Und die Erde war wüst und leer, café.
    if (light) {
        divide(waters);
    }
"""
N_MERGES = 250
SPACE = "\u2581"


def learn():
    text = CORPUS.replace("\n", " ").replace(" ", SPACE)
    # SentencePiece learns within pieces that start at a "▁" (runs of "▁" kept together).
    words = collections.Counter(tuple(w) for w in regex.findall(SPACE + "*[^" + SPACE + "]+|" + SPACE + "+", text))
    chars = sorted({c for w in words for c in w})
    merges = []
    for _ in range(N_MERGES):
        pairs = collections.Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[a, b] += c
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        new_words = collections.Counter()
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new_words[tuple(out)] += c
        words = new_words
    return chars, merges


def main():
    out_dir = sys.argv[1]
    chars, merges = learn()
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    for c in chars:
        vocab.setdefault(c, len(vocab))
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, t in enumerate(["<unk>", "<s>", "</s>"])]
    model = {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "vocab": vocab,
             "merges": [a + " " + b for a, b in merges]}
    decoder = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    llama2 = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": SPACE},
            {"type": "Replace", "pattern": {"String": " "}, "content": SPACE}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": decoder, "model": model}
    mistral = dict(llama2)
    mistral["normalizer"] = None
    # add_prefix_space is what older tokenizers wrote beside prepend_scheme; kept so that readers
    # that look only at it (transformers.js) prepend too.
    mistral["pre_tokenizer"] = {"type": "Metaspace", "replacement": SPACE, "add_prefix_space": True,
                                "prepend_scheme": "first", "split": False}
    for name, tok in [("tokenizer.json", llama2), ("tokenizer_metaspace.json", mistral)]:
        with open(os.path.join(out_dir, name), "w", encoding="utf-8") as f:
            json.dump(tok, f, ensure_ascii=False, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
