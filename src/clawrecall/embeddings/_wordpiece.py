"""BERT's WordPiece tokenizer, read from a `tokenizer.json`, in plain Python.

Why: the `tokenizers` package pulls in huggingface-hub and hf-xet (37 MB installed together) to
tokenize what a BERT model needs: normalise (drop control characters, space around CJK
ideographs, strip accents, lowercase), split at spaces and punctuation, then cut each word into
the longest pieces in the vocabulary. This does the same as `tokenizers`' BertNormalizer,
BertPreTokenizer, WordPiece and [CLS] … [SEP] template (tests/test_local_model.py compares the
ids on hundreds of texts); another tokenizer.json needs the `tokenizers` package (`load`).
"""

from __future__ import annotations

import json
import re
import string
import unicodedata
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    import tokenizers

_ASCII_PUNCTUATION = frozenset(string.punctuation)
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # removed, not spaces: the slow path handles them
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+|[^\sA-Za-z0-9]")  # a word, or one punctuation mark
_CJK = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)  # fmt: skip  (0x2B920, not BERT's 0x2B820: as `tokenizers` has it)


class Encoding:
    __slots__ = ("ids", "offsets", "type_ids")

    def __init__(self, ids: list[int], offsets: list[tuple[int, int]]) -> None:
        self.ids = ids
        self.type_ids = [0] * len(ids)
        self.offsets = offsets


class WordPiece:
    def __init__(self, spec: dict, max_length: int | None) -> None:
        norm, model = spec["normalizer"], spec["model"]
        self.clean = norm.get("clean_text", True)
        self.chinese = norm.get("handle_chinese_chars", True)
        self.lowercase = norm.get("lowercase", True)
        strip = norm.get("strip_accents")
        self.strip = self.lowercase if strip is None else strip
        self.vocab: dict[str, int] = model["vocab"]
        self.unk = self.vocab[model["unk_token"]]
        self.prefix = model.get("continuing_subword_prefix", "##")
        self.max_chars = model.get("max_input_chars_per_word", 100)
        self.cls, self.sep = _specials(spec["post_processor"])
        self.max_length = max_length
        added = sorted((t["content"] for t in spec.get("added_tokens", [])), key=len, reverse=True)
        self.added = {t["content"]: t["id"] for t in spec.get("added_tokens", [])}
        self.added_pattern = re.compile("(" + "|".join(map(re.escape, added)) + ")") if added else None
        self.pieces = lru_cache(maxsize=65536)(self._pieces)

    def encode(self, text: str, add_special_tokens: bool = True) -> Encoding:
        ids: list[int] = []
        offsets: list[tuple[int, int]] = []
        start = 0
        for part in self.added_pattern.split(text) if self.added_pattern else [text]:
            if part in self.added:
                ids.append(self.added[part])
                offsets.append((start, start + len(part)))
            elif part:
                for word, a, b in self._words(part):
                    for piece, pa, pb in self.pieces(word):
                        ids.append(piece)
                        offsets.append((start + a[pa], start + b[pb - 1]))
            start += len(part)
        if add_special_tokens:
            if self.max_length is not None:
                del ids[max(self.max_length - 2, 0) :], offsets[max(self.max_length - 2, 0) :]
            ids = [self.cls, *ids, self.sep]
            offsets = [(0, 0), *offsets, (0, 0)]
        elif self.max_length is not None:
            del ids[self.max_length :], offsets[self.max_length :]
        return Encoding(ids, offsets)

    def encode_batch(self, texts: list[str], add_special_tokens: bool = True) -> list[Encoding]:
        return [self.encode(t, add_special_tokens) for t in texts]

    def _words(self, text: str):
        """The normalised words and punctuation marks, each with its characters' start and end in `text`."""
        if text.isascii() and not _ASCII_CONTROL.search(text):  # most text: one character stays one
            if self.lowercase:
                text = text.lower()
            for m in _ASCII_WORD.finditer(text):
                a = m.start()
                yield m.group(), range(a, m.end()), range(a + 1, m.end() + 1)
            return
        word: list[str] = []
        starts: list[int] = []
        ends: list[int] = []
        for i, ch in enumerate(text):
            for c in self._normalized(ch):
                if c.isspace() or _punctuation(c):
                    if word:
                        yield "".join(word), starts, ends
                        word, starts, ends = [], [], []
                    if not c.isspace():
                        yield c, [i], [i + 1]
                else:
                    word.append(c)
                    starts.append(i)
                    ends.append(i + 1)
        if word:
            yield "".join(word), starts, ends

    def _normalized(self, ch: str) -> str:
        """What BertNormalizer makes of one character (nothing, a space, itself padded, or its lowercase letters)."""
        if self.clean:
            if ch in "\0\ufffd" or (ch not in "\t\n\r" and unicodedata.category(ch)[0] == "C"):
                return ""
            if ch.isspace():
                return " "
        pad = self.chinese and _cjk(ord(ch))
        if self.strip:  # NFD also maps a CJK compatibility ideograph to the unified one
            ch = "".join(c for c in unicodedata.normalize("NFD", ch) if unicodedata.category(c) != "Mn")
        if self.lowercase:
            ch = ch.lower()
        return f" {ch} " if pad else ch

    def _pieces(self, word: str) -> tuple[tuple[int, int, int], ...]:
        """The word's vocabulary pieces, longest first, with each one's character span in the word."""
        if len(word) > self.max_chars:
            return ((self.unk, 0, len(word)),)
        out = []
        start = 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                if piece in self.vocab:
                    out.append((self.vocab[piece], start, end))
                    break
                end -= 1
            else:
                return ((self.unk, 0, len(word)),)
            start = end
        return tuple(out)


def _punctuation(c: str) -> bool:
    return c in _ASCII_PUNCTUATION or unicodedata.category(c)[0] == "P"


def _cjk(cp: int) -> bool:
    return any(a <= cp <= b for a, b in _CJK)


def _specials(post: dict | None) -> tuple[int, int]:
    """[CLS] and [SEP] ids of a `[CLS] A [SEP]` post-processor; ValueError for any other."""
    post = post or {}
    if post.get("type") == "BertProcessing":
        return post["cls"][1], post["sep"][1]
    if post.get("type") == "TemplateProcessing":
        single = post["single"]
        if len(single) == 3 and "SpecialToken" in single[0] and "Sequence" in single[1] and "SpecialToken" in single[2]:
            (cls,) = post["special_tokens"][single[0]["SpecialToken"]["id"]]["ids"]
            (sep,) = post["special_tokens"][single[2]["SpecialToken"]["id"]]["ids"]
            return cls, sep
    raise ValueError("not a [CLS] A [SEP] post-processor")


Tokenizer = Union[WordPiece, "tokenizers.Tokenizer"]  # both answer encode/encode_batch the same way


def load(path: Path, max_length: int | None = None) -> Tokenizer:
    """The tokenizer of `path` (a tokenizer.json), cutting encodings to `max_length` tokens: this
    module's for a BERT WordPiece tokenizer, else the `tokenizers` package's."""
    spec = json.loads(Path(path).read_text())
    kinds = (
        (spec.get("normalizer") or {}).get("type"),
        (spec.get("pre_tokenizer") or {}).get("type"),
        (spec.get("model") or {}).get("type"),
    )
    if kinds == ("BertNormalizer", "BertPreTokenizer", "WordPiece"):
        try:
            return WordPiece(spec, max_length)
        except (KeyError, ValueError):
            pass
    try:
        from tokenizers import Tokenizer
    except ImportError:
        from ..errors import EmbeddingError

        raise EmbeddingError(
            f"{path} is not a BERT WordPiece tokenizer; reading it needs the tokenizers package: "
            "pip install 'clawrecall[torch]'"
        ) from None
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_padding()
    if max_length is None:
        tokenizer.no_truncation()
    else:
        tokenizer.enable_truncation(max_length)
    return tokenizer
