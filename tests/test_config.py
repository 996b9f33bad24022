"""Config parsing: file formats, environment, precedence, and the error texts users see."""

from __future__ import annotations

import pytest

from clawrecall.config import build_config, env_overrides, load_config
from clawrecall.errors import ConfigError


def test_defaults():
    cfg = build_config({})
    assert cfg.embedding.provider == "local"
    assert cfg.retrieval.fusion == "weighted" and cfg.retrieval.rrf_k == 60
    assert cfg.writes.enabled and cfg.writes.retention_days == 30
    assert cfg.dedup.threshold == 0.95
    assert "preference" in cfg.categories and "action_item" in cfg.categories


def test_toml_and_json_files(tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text('db = "/tmp/x.db"\n[retrieval]\nfusion = "rrf"\n[retrieval.bm25]\nweight = 0.5\n')
    cfg = load_config(toml, env={})
    assert cfg.db == "/tmp/x.db" and cfg.retrieval.fusion == "rrf" and cfg.retrieval.bm25.weight == 0.5
    js = tmp_path / "c.json"
    js.write_text('{"dedup": {"threshold": 0.9}}')
    assert load_config(js, env={}).dedup.threshold == 0.9


def test_precedence_file_then_env_then_overrides(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("[dedup]\nthreshold = 0.8\nenabled = true\n")
    env = {"CLAWRECALL_DEDUP__THRESHOLD": "0.85", "CLAWRECALL_WRITES__ENABLED": "false"}
    cfg = load_config(f, env=env, overrides={"dedup": {"threshold": 0.9}})
    assert cfg.dedup.threshold == 0.9 and cfg.dedup.enabled is True and cfg.writes.enabled is False


def test_env_db_and_values_parsed_as_json_or_text():
    assert env_overrides({"CLAWRECALL_DB": "/data/m.db", "CLAWRECALL_CATEGORIES": '["a", "b"]'}) == {
        "db": "/data/m.db", "categories": ["a", "b"]}


def test_env_values_of_text_keys_are_taken_as_written():
    env = {"CLAWRECALL_DATABASE__PASSWORD": "12345", "CLAWRECALL_EMBEDDING__API_KEY": "12345",
           "CLAWRECALL_DB": "2024", "CLAWRECALL_EMBEDDING__MODEL": "null", "CLAWRECALL_RETRIEVAL__FUSION": "rrf",
           "CLAWRECALL_DATABASE__PORT": "5433", "CLAWRECALL_WRITES__ENABLED": "false",
           "CLAWRECALL_EMBEDDING__DIMENSIONS": "8", "CLAWRECALL_RETRIEVAL__MMR_THRESHOLD": "null"}
    cfg = load_config(env=env)
    assert cfg.database.password == "12345" and cfg.embedding.api_key == "12345" and cfg.db == "2024"
    assert cfg.embedding.model == "null" and cfg.retrieval.fusion == "rrf"
    assert cfg.database.port == 5433 and cfg.writes.enabled is False and cfg.embedding.dimensions == 8
    assert cfg.retrieval.mmr_threshold is None


def test_documented_non_config_variables_are_not_read_as_keys():
    env = {name: "x" for name in ("CLAWRECALL_HOME", "CLAWRECALL_CONFIG", "CLAWRECALL_MODEL_CACHE",
                                  "CLAWRECALL_TORCH", "CLAWRECALL_USER", "CLAWRECALL_AGENT",
                                  "CLAWRECALL_SESSION", "CLAWRECALL_TEST_PG_URL")}
    assert env_overrides({**env, "CLAWRECALL_DB": "/m.db"}) == {"db": "/m.db"}
    with pytest.raises(ConfigError, match="unknown keys: dbb"):
        build_config(env_overrides({"CLAWRECALL_DBB": "/m.db"}))


def test_unknown_keys_from_the_environment_name_their_variable(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("colour = 1\n")
    env = {"CLAWRECALL_FOO": "1", "CLAWRECALL_EMBEDDING__COLOUR": "red", "CLAWRECALL_BAR__X": "1",
           "CLAWRECALL_BAR__Y": "2"}
    with pytest.raises(ConfigError) as err:
        load_config(f, env=env)
    assert str(err.value) == (
        "clawrecall config has unknown keys: colour, foo (from CLAWRECALL_FOO), embedding.colour (from "
        "CLAWRECALL_EMBEDDING__COLOUR), bar (from CLAWRECALL_BAR__X, CLAWRECALL_BAR__Y)")


def test_a_relative_sqlite_path_in_a_file_is_relative_to_the_file(tmp_path, monkeypatch):
    folder = tmp_path / "conf"
    folder.mkdir()
    f = folder / "c.toml"
    monkeypatch.chdir(tmp_path)
    for db, expected in [
        ("rel.db", str(folder / "rel.db")),
        ("sub/${NAME}.db", str(folder / "sub" / "m.db")),
        ("sqlite:///sub/rel.db", f"sqlite:///{folder}/sub/rel.db"),
        ("/abs/m.db", "/abs/m.db"),
        ("sqlite:////abs/m.db", "sqlite:////abs/m.db"),
        ("~/m.db", "~/m.db"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
    ]:
        f.write_text(f"db = {db!r}\n")
        assert load_config(f, env={"NAME": "m"}).db == expected
        assert load_config("conf/c.toml", env={"NAME": "m"}).db == expected
    f.write_text('db = "rel.db"\n')
    assert load_config(f, env={"CLAWRECALL_DB": "here.db"}).db == "here.db"  # a command-line path: the cwd's
    assert load_config(f, env={}, overrides={"db": "here.db"}).db == "here.db"


def test_variable_substitution(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('[embedding]\nprovider = "openai"\napi_key = "${MY_KEY}"\nbase_url = "http://${HOST}:8000/v1"\n')
    cfg = load_config(f, env={"MY_KEY": "sk-1", "HOST": "127.0.0.1"})
    assert cfg.embedding.api_key == "sk-1" and cfg.embedding.base_url == "http://127.0.0.1:8000/v1"
    assert "sk-1" not in repr(cfg)
    with pytest.raises(ConfigError, match="^Environment variable MY_KEY is not set$"):
        load_config(f, env={"HOST": "h"})


@pytest.mark.parametrize(
    "data, message",
    [
        ({"foo": 1, "bar": 2}, "clawrecall config has unknown keys: foo, bar"),
        ({"embedding": {"provider": "local", "colour": "red"}}, "unknown keys: embedding.colour"),
        ({"embedding": {"provider": "invalid"}}, "Unknown embedding provider: invalid"),
        ({"dedup": {"threshold": 2}}, "dedup.threshold"),
        ({"retrieval": {"fusion": "magic"}}, "retrieval.fusion"),
        ({"categories": []}, "categories must not be empty"),
        ({"categories": ["a", ""]}, "categories must be names without surrounding spaces, got ''"),
        ({"categories": ["a", "b", "a", "b"]}, "categories repeat a, b"),
        ({"categories": ["work", "home"]},
         "^invalid config: categories must include 'other', the category of a memory that names none$"),
        ({"postgres": {"hnsw_m": 32, "hnsw_ef_construction": 40}}, "hnsw_ef_construction must be at least 2 \\* hnsw_m"),
        ({"postgres": {"hnsw_ef_search": 0}}, "postgres.hnsw_ef_search"),
        ({"postgres": {"maintenance_work_mem": "lots"}}, "postgres.maintenance_work_mem"),
        ({"postgres": {"maintenance_work_mem": "1GB; DROP TABLE memories"}}, "postgres.maintenance_work_mem"),
        ({"postgres": {"exact_search_rows": -1}}, "postgres.exact_search_rows"),
    ],
)
def test_errors(data, message):
    with pytest.raises(ConfigError, match=message):
        build_config(data, env={})


def test_missing_or_broken_file(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.toml", env={})
    bad = tmp_path / "bad.toml"
    bad.write_text("this is = = not toml")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad, env={})


def test_default_file_in_data_dir_is_read(tmp_path):
    (tmp_path / "config.toml").write_text("[writes]\nenabled = false\n")
    assert load_config(env={"CLAWRECALL_HOME": str(tmp_path)}).writes.enabled is False


def test_the_recall_hooks_old_similarity_gate_loads_with_a_warning(tmp_path, caplog):
    """`hooks.recall.min_similarity` (earlier releases) is folded into the absolute `min_score`."""
    path = tmp_path / "old.toml"
    path.write_text("[hooks.recall]\nmin_similarity = 0.3\nmax_items = 4\n")
    with caplog.at_level("WARNING", logger="clawrecall.config"):
        cfg = load_config(path)
    assert cfg.hooks.recall.max_items == 4 and cfg.hooks.recall.min_score == 0.3  # the default: the old key sets nothing
    assert any("min_similarity is no longer used" in r.message for r in caplog.records)
