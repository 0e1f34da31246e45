#!/usr/bin/env python3
"""An independent, slow reference for the byte-level BPE in include/fused/io/tokenizer.hpp.

It shares no code or library with the C++ one: the `regex` module instead of PCRE2 (its \\s is
White_Space, as in Oniguruma, which Hugging Face uses), Python's unicodedata instead of utf8proc,
and the textbook merge loop instead of the heap. tests/tokenizer/hard_strings_{qwen2,kjv}.jsonl were made with it:

    python3 tests/tokenizer/reference_tokenizer.py TOKENIZER.json < texts.jsonl > hard_strings_qwen2.jsonl

where each input line is a JSON string. It supports exactly what the Qwen2 tokenizer.json uses.
"""
import json
import sys
import unicodedata

import regex


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


class Reference:
    def __init__(self, path):
        t = json.load(open(path, encoding="utf-8"))
        assert t["normalizer"]["type"] == "NFC"
        split = t["pre_tokenizer"]["pretokenizers"][0]
        assert split["type"] == "Split" and split["behavior"] == "Isolated"
        self.pattern = regex.compile(split["pattern"]["Regex"])
        self.vocab = t["model"]["vocab"]
        merges = [m.split(" ") if isinstance(m, str) else m for m in t["model"]["merges"]]
        self.ranks = {tuple(m): i for i, m in enumerate(merges)}
        self.added = sorted(((a["content"], a["id"]) for a in t["added_tokens"]), key=lambda x: -len(x[0]))
        self.byte_char = bytes_to_unicode()

    def bpe(self, piece):
        word = [self.byte_char[b] for b in piece.encode("utf-8")]
        while len(word) > 1:
            best = min(range(len(word) - 1), key=lambda i: (self.ranks.get((word[i], word[i + 1]), 1 << 60), i))
            if (word[best], word[best + 1]) not in self.ranks:
                break
            word[best:best + 2] = [word[best] + word[best + 1]]
        return [self.vocab[w] for w in word]

    def encode_text(self, text):
        text = unicodedata.normalize("NFC", text)
        ids, pos = [], 0
        for m in self.pattern.finditer(text):
            if m.start() > pos:
                ids += self.bpe(text[pos:m.start()])
            ids += self.bpe(m.group())
            pos = m.end()
        if pos < len(text):
            ids += self.bpe(text[pos:])
        return ids

    def encode(self, text):
        ids, i, start = [], 0, 0
        while i < len(text):
            hit = next(((c, t) for c, t in self.added if text.startswith(c, i)), None)
            if hit is None:
                i += 1
                continue
            ids += self.encode_text(text[start:i]) + [hit[1]]
            i += len(hit[0])
            start = i
        return ids + self.encode_text(text[start:])


if __name__ == "__main__":
    ref = Reference(sys.argv[1])
    for line in sys.stdin:
        if line.strip():
            text = json.loads(line)
            print(json.dumps({"text": text, "ids": ref.encode(text)}, ensure_ascii=False))
