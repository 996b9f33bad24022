"""Token counts as the embedding model sees them, so a chunk fits the model's window.

A local model that ships its tokenizer (the bundled all-MiniLM-L6-v2, a model folder) counts with
it, and its window (`max_seq_length`, 256 tokens for MiniLM) less the special tokens and any E5
prefix is the default chunk size. Other providers are counted as characters / 4 (English text runs
at about four characters a token); their windows are large, so the default there is 256 tokens.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import EmbeddingConfig

if TYPE_CHECKING:
    from ..embeddings._wordpiece import Tokenizer

DEFAULT_CHUNK_TOKENS = 256
CHARS_PER_TOKEN = 4


class Tokens:
    """Counts tokens and cuts a text at token boundaries; `window` is how many one chunk may hold."""

    def __init__(self, window: int, tokenizer: Tokenizer | None = None):
        self.window = window
        self.tokenizer = tokenizer

    @property
    def exact(self) -> bool:
        return self.tokenizer is not None

    def count(self, texts: list[str]) -> list[int]:
        if self.tokenizer is None:
            return [-(-len(t) // CHARS_PER_TOKEN) for t in texts]
        return [len(e.ids) for e in self.tokenizer.encode_batch(texts, add_special_tokens=False)]

    def split(self, text: str, size: int) -> list[str]:
        """`text` in consecutive pieces of at most `size` tokens (a line too long for one chunk)."""
        if self.tokenizer is None:
            step = size * CHARS_PER_TOKEN
            return [text[i : i + step] for i in range(0, len(text), step)]
        offsets = self.tokenizer.encode(text, add_special_tokens=False).offsets
        starts = [offsets[i][0] for i in range(0, len(offsets), size)]
        starts[0] = 0
        return [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]


def tokens_for(cfg: EmbeddingConfig, chunk_tokens: int | None = None) -> Tokens:
    """The counter for the configured model; `chunk_tokens` overrides the window (never beyond the model's)."""
    found = _local_tokenizer(cfg)
    if found is None:
        return Tokens(chunk_tokens or DEFAULT_CHUNK_TOKENS)
    tokenizer, window = found
    return Tokens(min(chunk_tokens or window, window), tokenizer)


def _local_tokenizer(cfg: EmbeddingConfig) -> tuple[Tokenizer, int] | None:
    """The local model's tokenizer and the tokens left for text in its window, when it has a `tokenizer.json`."""
    if cfg.provider != "local":
        return None
    from ..embeddings.local import DEFAULT_MODEL, bundled_model_dir

    model = cfg.model or DEFAULT_MODEL
    folder = bundled_model_dir() if model == DEFAULT_MODEL else Path(model).expanduser()
    if not (folder / "tokenizer.json").is_file():
        return None
    return _load(str(folder.resolve()), model)


@lru_cache(maxsize=4)
def _load(folder: str, model: str) -> tuple[Tokenizer, int]:
    from ..embeddings import _wordpiece
    from ..embeddings.base import e5_prefix

    tokenizer = _wordpiece.load(Path(folder) / "tokenizer.json")
    try:
        window = int(json.loads((Path(folder) / "sentence_bert_config.json").read_text())["max_seq_length"])
    except (OSError, ValueError, KeyError):
        window = 512
    overhead = len(tokenizer.encode(e5_prefix(model, [""], "passage")[0]).ids)  # [CLS] [SEP] and "passage: "
    return tokenizer, window - overhead
