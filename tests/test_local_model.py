"""The bundled local model on its two runtimes: ONNX Runtime (default, a graph written from the
weights) and PyTorch (the `torch` extra); other models exported once with PyTorch."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from clawrecall.config import EmbeddingConfig
from clawrecall.embeddings import _bert, _onnx
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


def test_a_searchs_two_queries_run_side_by_side_each_as_it_would_alone(model_runs):
    """The whole query and the vector leg's (without its common words) in a run each, on two cores at once."""
    onnx = LocalEmbedder(runtime="onnx", query_cache_size=0)
    runs = model_runs(onnx)
    whole, reduced = "what did alice say about the ferry to the harbour", "alice ferry harbour"
    both = onnx.embed([whole, reduced], kind="query")
    assert runs == [1, 1]  # not one run of two
    assert np.array_equal(both[0], onnx.embed([whole], kind="query")[0])
    assert np.array_equal(both[1], onnx.embed([reduced], kind="query")[0])


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


FIXTURES = Path(__file__).parent / "fixtures"

# Run in a subprocess: a Python with PyTorch, sentence-transformers, transformers and tokenizers
# made unimportable, as in the default install (the `torch` extra absent).
WITHOUT_TORCH = """
import sys
class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "sentence_transformers", "transformers", "tokenizers", "huggingface_hub"):
            raise ImportError(f"No module named {name!r}")
sys.meta_path.insert(0, _Absent())
"""


def run_without_torch(code: str, tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CLAWRECALL_MODEL_CACHE": str(tmp_path / "cache"), "CLAWRECALL_HOME": str(tmp_path / "home")}
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH + code, *args], capture_output=True, text=True, env=env, check=False
    )


def exported_model(tmp_path) -> Path:
    """A copy of the bundled model that the BERT graph does not describe (another activation), so
    it goes through the PyTorch export."""
    model = tmp_path / "my-model"
    shutil.copytree(bundled_model_dir(), model)
    config = json.loads((model / "config.json").read_text())
    config["hidden_act"] = "gelu_new"
    (model / "config.json").write_text(json.dumps(config))
    assert _bert.config_of(model) is None
    return model


def test_the_built_graph_gives_the_vectors_sentence_transformers_gave():
    """Reference vectors made by sentence-transformers on PyTorch from the original float32 weights
    (English, Czech, Russian, CJK, code, and two texts cut at the 256-token window), compared with
    a graph built from the weights the wheel carries (float16: within 1e-6 cosine, measured)."""
    texts = json.loads((FIXTURES / "minilm-reference.json").read_text())["texts"]
    expected = np.load(FIXTURES / "minilm-reference.npy")
    embedder = LocalEmbedder(query_cache_size=0)
    assert isinstance(embedder._load()._graph, bytes)  # built, not exported
    assert max(embedder._lengths(texts)) == 256  # the long ones are cut, as sentence-transformers cuts them
    got = embedder.embed(texts, "passage")
    assert got.shape == expected.shape
    assert (got * expected).sum(axis=1).min() > 1 - 1e-5  # cosine
    assert np.abs(got - expected).max() < 1e-3


TOKENIZER_TEXTS = [
    "Příliš ŽLUŤOUČKÝ kůň úpěl ďábelské ódy",
    "ΣΟΦΟΣ σοφός ΟΔΟΣ",
    "İstanbul ǅemal ß ﬁne naïve café coöperate e\u0301 a\u0308",
    "[MASK] is [CLS]x[SEP] [mask] [UNK]",
    "a\x00b\x0bc\x85d\u2028e\u3000f\u00a0g\u200bh\ufeffi a\x01b",
    "x" * 150 + " ok " + "y" * 100,
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "😀😃🙂 ✨🚀 ไทย العربية עברית हिन्दी",
    "$100 + 5% = <tag> ^ ` | ~ @# snake_case __init__ 5:30 p.m.",
    "¿Qué? ¡Sí! «quote» „low“ — – … ﾃｽﾄ ｔｅｓｔ １２３",
    "한국어 텍스트와 English 用户喜欢喝绿茶 ユーザー 書 𠀀𠀁 \U0002b87e",
    "tab\there\nnew\r\nline  ",
    "",
]


def test_the_wordpiece_tokenizer_cuts_as_tokenizers_does():
    """The Python tokenizer against the `tokenizers` package (the `torch` extra brings it): ids,
    truncation at the window, and where each token starts in the text (files are cut there)."""
    from tokenizers import Tokenizer

    from clawrecall.embeddings import _wordpiece

    path = bundled_model_dir() / "tokenizer.json"
    ours, whole = _wordpiece.load(path, 256), _wordpiece.load(path)
    assert isinstance(ours, _wordpiece.WordPiece)
    theirs = Tokenizer.from_file(str(path))
    theirs.no_padding()
    texts = json.loads((FIXTURES / "minilm-reference.json").read_text())["texts"] + TOKENIZER_TEXTS
    for text in texts:
        theirs.enable_truncation(256)
        assert ours.encode(text).ids == theirs.encode(text).ids, text
        theirs.no_truncation()
        mine, reference = whole.encode(text, add_special_tokens=False), theirs.encode(text, add_special_tokens=False)
        assert mine.ids == reference.ids, text
        assert [a for a, _ in mine.offsets] == [a for a, _ in reference.offsets], text


def test_add_and_search_never_import_torch(tmp_path):
    """The default install has no PyTorch: the CLI's add and search run, and nothing imports it."""
    code = (
        "from clawrecall.cli import main\n"
        "for argv in (['add', 'User prefers dark mode in every editor'], ['search', 'which theme?', '--json']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit as exc:\n"
        "        assert not exc.code, exc.code\n"
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers', 'onnx', 'tokenizers') if m in sys.modules))\n"
    )
    out = run_without_torch(code, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "dark mode" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "[]"
    assert not (tmp_path / "cache").exists()  # nothing written besides the store


def test_without_torch_other_models_and_the_torch_runtime_name_the_extra(tmp_path):
    model = exported_model(tmp_path)
    code = (
        "from clawrecall.embeddings.local import LocalEmbedder\n"
        "from clawrecall.errors import EmbeddingError\n"
        "for model, runtime in ((None, 'torch'), (sys.argv[1], 'auto'), (sys.argv[1], 'onnx')):\n"
        "    try:\n"
        "        LocalEmbedder(model, runtime=runtime).embed(['hi'])\n"
        "    except EmbeddingError as exc:\n"
        "        print(exc)\n"
        "print(LocalEmbedder(sys.argv[2]).active_runtime)\n"
    )
    bert_copy = tmp_path / "bert-copy"
    shutil.copytree(bundled_model_dir(), bert_copy)
    out = run_without_torch(code, tmp_path, str(model), str(bert_copy))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 4
    assert "needs PyTorch, which is not installed: embedding.runtime is 'torch'" in lines[0] and "clawrecall[torch]" in lines[0]
    assert "is not a BERT encoder" in lines[1] and "clawrecall[torch]" in lines[1]
    assert "cannot run on ONNX Runtime" in lines[2] and "clawrecall[torch]" in lines[2]
    assert lines[3] == "onnx"  # another BERT model in a folder runs without PyTorch too


def test_the_graph_reads_the_weights_it_is_given(tmp_path):
    """No stale graph: changed weights give changed vectors (nothing is cached between loads)."""
    model = tmp_path / "scaled"
    shutil.copytree(bundled_model_dir(), model)
    tensors = _bert.read_safetensors(model / "model.safetensors")
    bias = tensors["encoder.layer.5.output.LayerNorm.bias"]
    tensors["encoder.layer.5.output.LayerNorm.bias"] = bias + np.random.default_rng(1).normal(0, 0.1, bias.shape)
    write_safetensors(model / "model.safetensors", tensors)
    before = LocalEmbedder(query_cache_size=0).embed(["a note"])
    after = LocalEmbedder(str(model), query_cache_size=0).embed(["a note"])
    assert (before * after).sum() < 0.999


def test_half_precision_weights_are_read(tmp_path):
    model = tmp_path / "half"
    shutil.copytree(bundled_model_dir(), model)
    write_safetensors(model / "model.safetensors", _bert.read_safetensors(model / "model.safetensors"), np.float16)
    texts = ["User prefers dark mode in every editor", "用户喜欢喝绿茶"]
    full = LocalEmbedder(query_cache_size=0).embed(texts)
    half = LocalEmbedder(str(model), query_cache_size=0).embed(texts)
    assert (full * half).sum(axis=1).min() > 0.999


def write_safetensors(path: Path, tensors: dict[str, np.ndarray], dtype=np.float32) -> None:
    header, blobs, offset = {}, [], 0
    for name, value in tensors.items():
        blob = np.ascontiguousarray(value, dtype=dtype).tobytes()
        header[name] = {"dtype": "F16" if dtype == np.float16 else "F32", "shape": list(value.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    raw = json.dumps(header).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + b"".join(blobs))


def test_auto_prefers_onnx_and_a_process_never_imports_torch():
    assert LocalEmbedder().active_runtime == "onnx"
    code = (
        "import sys; from clawrecall.embeddings.local import LocalEmbedder; "
        "v = LocalEmbedder().embed(['hello there'], 'query'); print(v.shape[1], 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ.copy())
    assert out.stdout.split() == ["384", "False"]


def test_export_is_cached_by_weights_digest_written_atomically_and_readable_by_all(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("CLAWRECALL_MODEL_CACHE", str(tmp_path / "cache"))
    model = exported_model(tmp_path)
    with caplog.at_level("WARNING", logger="clawrecall.embeddings._onnx"):
        first = _onnx.load(model)
    # the one slow step says what it does, and when it is done
    assert [r.getMessage().split(" once")[0].split(" in ")[0] for r in caplog.records] == [
        f"exporting model {model} to ONNX", "exported model my-model to ONNX"]
    files = list((tmp_path / "cache").iterdir())
    assert len(files) == 1 and files[0].suffix == ".onnx"  # no .part file left behind
    assert files[0].stat().st_mode & 0o044 == 0o044  # readable by other users of a shared cache
    stamp = files[0].stat().st_mtime_ns
    caplog.clear()
    _onnx.load(model)
    assert files[0].stat().st_mtime_ns == stamp and not caplog.records  # reused, not exported again
    # other weights → another export, never the stale one
    tensors = _bert.read_safetensors(model / "model.safetensors")
    tensors["pooler.dense.bias"] = tensors["pooler.dense.bias"] + 1  # unused by the encoder: any change counts
    write_safetensors(model / "model.safetensors", tensors)
    assert _onnx.weights_digest(model) != _onnx.weights_digest(bundled_model_dir())
    _onnx.load(model)
    assert len(list((tmp_path / "cache").iterdir())) == 2
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
    model = exported_model(tmp_path)
    exported = _onnx.cache_dir() / f"{model.name}-{_onnx.weights_digest(model)[:16]}-v{_onnx._EXPORT_VERSION}.onnx"
    exported.parent.mkdir(parents=True)
    exported.write_bytes(b"not an onnx model")
    assert LocalEmbedder(str(model)).active_runtime == "torch"
    with pytest.raises(EmbeddingError, match="cannot load exported model"):
        LocalEmbedder(str(model), runtime="onnx").embed(["hi"])


# variables by which onnxruntime knows a CI machine, where it writes no telemetry files on its own
_CI_VARIABLES = {"CI", "TF_BUILD", "GITHUB_ACTIONS", "GITLAB_CI", "CIRCLECI", "TRAVIS", "JENKINS_URL", "CODEBUILD_BUILD_ID",
                 "BUILDKITE", "TEAMCITY_VERSION", "APPVEYOR", "BITBUCKET_BUILD_NUMBER", "SYSTEM_TEAMFOUNDATIONCOLLECTIONURI"}


def test_embedding_leaves_nothing_in_the_users_home(tmp_path):
    """onnxruntime writes a device id and a telemetry database under ~/.cache/Microsoft on import
    unless told not to (or on a CI machine); clawrecall tells it (a user may still set
    ORT_DISABLE_TELEMETRY=0)."""
    code = "from clawrecall.embeddings.local import LocalEmbedder\nprint(LocalEmbedder().embed(['hi']).shape)\n"
    for setting, written in ((None, False), ("0", True)):
        home = tmp_path / f"home-{setting}"
        home.mkdir()
        dropped = {"XDG_CACHE_HOME", "ORT_DISABLE_TELEMETRY", *_CI_VARIABLES}
        env = {k: v for k, v in os.environ.items() if k not in dropped}
        env.update(HOME=str(home), CLAWRECALL_HOME=str(tmp_path / "data"))
        if setting is not None:
            env["ORT_DISABLE_TELEMETRY"] = setting
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
        assert out.returncode == 0 and "(1, 384)" in out.stdout, out.stderr
        assert (home / ".cache" / "Microsoft").exists() is written, sorted(home.rglob("*"))


def test_the_cosine_for_unrelated_text_is_known_for_the_bundled_model_and_measured_once_for_another(tmp_path, monkeypatch):
    bundled = LocalEmbedder()
    assert bundled.cosine_for(0.95) == 0.95 and bundled.cosine_for(0.0) == 0.0  # the thresholds' own scale
    assert bundled._model is None  # known: nothing embedded to say so
    copy = tmp_path / "bert-copy"
    shutil.copytree(bundled_model_dir(), copy)
    other = LocalEmbedder(str(copy))
    assert other.unrelated_cosine() == pytest.approx(0.0599, abs=1e-3)  # the same weights, measured
    monkeypatch.setattr(other, "measure_unrelated", lambda: pytest.fail("measured twice"))
    assert other.unrelated_cosine() == pytest.approx(0.0599, abs=1e-3)
    failing = LocalEmbedder(str(copy))

    def down() -> float:
        raise EmbeddingError("the model is gone")

    monkeypatch.setattr(failing, "measure_unrelated", down)
    assert failing.unrelated_cosine() is None and failing.cosine_for(0.95) == 0.95  # no mapping, no failure
