"""Files as searchable text: reading each format (`readers.py`), counting tokens as the embedding model
does (`tokens.py`) and cutting the text into overlapping chunks that keep their line or page range
(`chunking.py`). `mem.files` (engine/_files.py) stores the chunks."""

from .chunking import Chunk, chunk
from .readers import FILE_TYPES, FileType, Limits, file_type, read, text_lines
from .tokens import Tokens, tokens_for

__all__ = ["FILE_TYPES", "Chunk", "FileType", "Limits", "Tokens", "chunk", "file_type", "read", "text_lines", "tokens_for"]
