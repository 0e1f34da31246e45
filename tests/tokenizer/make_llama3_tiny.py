#!/usr/bin/env python3
"""Makes tests/data/tokenizer/llama3_tiny/tokenizer.json: a small tokenizer of the Llama 3 kind.

Byte-level BPE with Llama 3's exact pre-tokenizer (its Split regex, then ByteLevel without its own
regex), `ignore_merges: true` and a few of its special tokens, but a vocabulary of a few hundred
tokens learned here from public-domain text (Genesis 1 in the King James Version, a Greek and a
German line, and a few sentences written for this file), so the repository carries no one else's
vocabulary. Deterministic: running it again gives the same file byte for byte.

    python3 tests/tokenizer/make_llama3_tiny.py > tests/data/tokenizer/llama3_tiny/tokenizer.json

The reference encodings next to it come from an independent implementation (see
tests/tokenizer/lenml_reference.cjs), not from this script.
"""
import collections
import json
import sys

import regex

# Llama 3's tokenizer.json, pre_tokenizer.pretokenizers[0].pattern.Regex, verbatim.
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

CORPUS = """In the beginning God created the heaven and the earth.
And the earth was without form, and void; and darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters.
And God said, Let there be light: and there was light.
And God saw the light, that it was good: and God divided the light from the darkness.
And God called the light Day, and the darkness he called Night. And the evening and the morning were the first day.
And God said, Let there be a firmament in the midst of the waters, and let it divide the waters from the waters.
And God made the firmament, and divided the waters which were under the firmament from the waters which were above the firmament: and it was so.
And God called the firmament Heaven. And the evening and the morning were the second day.
And God said, Let the waters under the heaven be gathered together unto one place, and let the dry land appear: and it was so.
And God called the dry land Earth; and the gathering together of the waters called he Seas: and God saw that it was good.
Ἐν ἀρχῇ ἦν ὁ λόγος, καὶ ὁ λόγος ἦν πρὸς τὸν θεόν.
Im Anfang schuf Gott Himmel und Erde. Und die Erde war wüst und leer.
It's the tester's job: we're sure they'll say it isn't done, and I'm sure you've seen what I'd do.
IT'S WE'RE THEY'LL I'M YOU'VE HE'D DON'T: 'TIS THE SEASON, 'STAR AND 'SUN.
In 1611 there were 1189 chapters and 31102 verses; 2024 - 1611 = 413 years.

    if (verse) {
        print(verse);  // and the evening and the morning


    }
"""

N_MERGES = 400
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
# A word that is one token of the vocabulary although the merges would cut it differently: with
# ignore_merges it must come out whole (added to the vocabulary after training, with no merge).
WHOLE_WORDS = ["Ġjubilee"]


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def main():
    b2u = bytes_to_unicode()
    words = collections.Counter()
    for piece in regex.findall(LLAMA3_PATTERN, CORPUS):
        words[tuple(b2u[b] for b in piece.encode("utf-8"))] += 1

    vocab = {b2u[b]: b for b in range(256)}
    merges = []
    for _ in range(N_MERGES):
        pairs = collections.Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[a, b] += c
        if not pairs:
            break
        # Most frequent pair; ties to the smallest pair, so the result does not depend on hashing.
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merged = best[0] + best[1]
        merges.append(list(best))
        vocab.setdefault(merged, len(vocab))
        new_words = collections.Counter()
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(merged)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new_words[tuple(out)] += c
        words = new_words
    for w in WHOLE_WORDS:
        assert w not in vocab, w
        vocab[w] = len(vocab)

    added = [{"id": len(vocab) + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in enumerate(SPECIALS)]
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_PATTERN}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                  "vocab": vocab, "merges": merges},
    }
    json.dump(tok, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
