"""Other systems' stores built as their documentation gives them, with realistic rows (the awkward ones
too): what tests/test_import_systems.py imports, and what docs/importing.md's samples are run on."""

from __future__ import annotations

from pathlib import Path

from clawrecall.embeddings.hashing import HashEmbedder

HASH = HashEmbedder("hashed-word-trigrams")  # the tests' store embeds with it: its vectors are reusable there


def lancedb_pro(folder: Path, dims: int) -> None:
    """Its `memories` table as its store creates it (a JavaScript number is a float64 column)."""
    import lancedb
    import pyarrow as pa

    schema = pa.schema([("id", pa.string()), ("text", pa.string()), ("vector", pa.list_(pa.float32(), dims)),
                        ("category", pa.string()), ("scope", pa.string()), ("importance", pa.float64()),
                        ("timestamp", pa.float64()), ("metadata", pa.string())])

    def vec(text: str) -> list[float]:
        return [float(x) for x in HASH.embed([text], kind="passage")[0]] if dims == HASH.dimensions else [0.5] * dims

    rows = [
        ("a1", "Prefers tabs over spaces", vec("zebra xylophone quartet"), "preference", "agent:coder", 0.9,
         1_735_725_600_000, "{}"),
        ("a2", "Team sync is on Mondays", vec("Team sync is on Mondays"), "fact", "global", 0.7, 1_735_812_000_000,
         '{"l0_abstract": "sync day"}'),
        ("a3", "Team sync moved to Tuesdays", vec("Team sync moved to Tuesdays"), "fact", "project:atlas", 0.8,
         1_738_404_000_000, '{"supersedes": "a2"}'),
        ("a4", "Lost the thread when the build broke", vec("x"), "cases", "reflection:agent:coder", 0.5,
         1_738_490_400_000, "{}"),
        ("a5", "Bob is allergic to nuts", vec("Bob is allergic to nuts"), "entity", "user:bob", 0.7,
         1_738_576_800_000, "not json"),
        ("a6", "Old row from before scopes", vec("Old row"), "other", None, 0.7, 1_700_000_000_000, None),
    ]
    table = pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rows], schema=schema)
    lancedb.connect(folder).create_table("memories", table)
