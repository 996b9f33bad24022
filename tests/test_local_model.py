"""The bundled local model on its two runtimes: ONNX Runtime (default) and PyTorch."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from clawrecall.config import EmbeddingConfig
from clawrecall.embeddings import _onnx
from clawrecall.embeddings.local import LocalEmbedder, bundled_model_dir
from clawrecall.errors import ConfigError, EmbeddingError

pytestmark = pytest.mark.model

TEXTS = [
    "User prefers dark mode in every editor",
    "x",
    "Alice moved to Lisbon in March and started a new job at a bakery near the river. " * 12,  # > 256 tokens
    "用户喜欢喝绿茶",
]


def test_onnx_and_torch_give_the_same_vectors():
    onnx = LocalEmbedder(runtime="onnx", query_cache_size=0)
    torch = LocalEmbedder(runtime="torch", query_cache_size=0)
    assert onnx.active_runtime == "onnx" and torch.active_runtime == "torch"
    for kind in ("passage", "query"):
        a, b = onnx.embed(TEXTS, kind), torch.embed(TEXTS, kind)
        assert a.shape == b.shape == (len(TEXTS), 384)
        assert np.abs(a - b).max() < 1e-4
    # one text alone (the query path) equals the same text inside a padded batch
    assert np.abs(onnx.embed([TEXTS[0]])[0] - onnx.embed(TEXTS)[0]).max() < 1e-5


def test_a_large_batch_keeps_its_order_through_sorting_and_parallel_runs():
    onnx = LocalEmbedder(runtime="onnx", query_cache_size=0, batch_size=16)
    texts = [f"{'very ' * (i % 9)}short note number {i}" for i in range(53)] + TEXTS
    batch = onnx.embed(texts)
    alone = np.stack([onnx.embed([t])[0] for t in texts])
    assert np.abs(batch - alone).max() < 1e-5


def test_a_stream_starts_at_once_reads_batches_in_order_and_stops_when_closed(model_runs):
    onnx = LocalEmbedder(runtime="onnx", query_cache_size=0, batch_size=32)
    runs = model_runs(onnx)
    texts = [f"note {i}: {'and more words ' * (i % 7)}" for i in range(2000)]
    stream = onnx.stream(texts)
    deadline = time.monotonic() + 10
    while not runs and time.monotonic() < deadline:
        time.sleep(0.01)
    assert runs  # the model works before anything is read
    positions, first = next(stream)
    lengths = onnx._lengths(texts)
    assert len(positions) == 32 and max(lengths[p] for p in positions) <= min(
        lengths[p] for p in range(len(texts)) if p not in positions
    )  # the shortest texts first
    stream.close()
    assert sum(runs) <= 32 + _onnx._AHEAD + 32  # the batch read, the look-ahead, one batch over
    assert np.abs(first - onnx.embed([texts[p] for p in positions])).max() < 1e-5


def test_auto_prefers_onnx_and_a_process_never_imports_torch_once_exported():
    assert LocalEmbedder().active_runtime == "onnx"
    code = (
        "import sys; from clawrecall.embeddings.local import LocalEmbedder; "
        "v = LocalEmbedder().embed(['hello there'], 'query'); print(v.shape[1], 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ.copy())
    assert out.stdout.split() == ["384", "False"]


def test_export_is_cached_by_weights_digest_and_written_atomically(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAWRECALL_MODEL_CACHE", str(tmp_path / "cache"))
    model = tmp_path / "my-model"
    shutil.copytree(bundled_model_dir(), model)
    first = _onnx.load(model)
    files = list((tmp_path / "cache").iterdir())
    assert len(files) == 1 and files[0].suffix == ".onnx"  # no .part file left behind
    stamp = files[0].stat().st_mtime_ns
    _onnx.load(model)
    assert files[0].stat().st_mtime_ns == stamp  # reused, not exported again
    # other weights → another export, never the stale one
    with (model / "model.safetensors").open("ab") as fh:
        fh.write(b"\0")
    assert _onnx.weights_digest(model) != _onnx.weights_digest(bundled_model_dir())
    assert first.dimensions == 384


def test_a_model_onnx_cannot_run_falls_back_or_fails_clearly(tmp_path):
    model = tmp_path / "odd-model"
    shutil.copytree(bundled_model_dir(), model)
    config = model / "1_Pooling" / "config.json"
    pooling = json.loads(config.read_text())
    pooling.update(pooling_mode_mean_tokens=False, pooling_mode_max_tokens=True)
    config.write_text(json.dumps(pooling))
    assert _onnx.plain_encoder(model) is None
    assert LocalEmbedder(str(model)).active_runtime == "torch"
    with pytest.raises(EmbeddingError, match="cannot run on ONNX Runtime: it is not a local folder holding a plain"):
        LocalEmbedder(str(model), runtime="onnx").embed(["hi"])


def test_runtime_is_validated():
    assert EmbeddingConfig(runtime="torch").runtime == "torch"
    with pytest.raises(Exception, match="runtime"):
        EmbeddingConfig(runtime="cuda")


def test_runtime_from_config_file(tmp_path):
    from clawrecall.config import load_config

    path = tmp_path / "c.toml"
    path.write_text('[embedding]\nruntime = "gpu"\n')
    with pytest.raises(ConfigError, match="runtime"):
        load_config(path)


def test_auto_falls_back_to_torch_when_the_export_cannot_be_read(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAWRECALL_MODEL_CACHE", str(tmp_path / "cache"))
    model = tmp_path / "broken-cache-model"
    shutil.copytree(bundled_model_dir(), model)
    exported = _onnx.cache_dir() / f"{model.name}-{_onnx.weights_digest(model)[:16]}-v{_onnx._EXPORT_VERSION}.onnx"
    exported.parent.mkdir(parents=True)
    exported.write_bytes(b"not an onnx model")
    assert LocalEmbedder(str(model)).active_runtime == "torch"
    with pytest.raises(EmbeddingError, match="cannot load exported model"):
        LocalEmbedder(str(model), runtime="onnx").embed(["hi"])


def test_the_export_is_readable_by_other_users(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAWRECALL_MODEL_CACHE", str(tmp_path / "cache"))
    model = tmp_path / "shared-model"
    shutil.copytree(bundled_model_dir(), model)
    _onnx.load(model)
    (exported,) = (tmp_path / "cache").iterdir()
    assert exported.stat().st_mode & 0o044 == 0o044
