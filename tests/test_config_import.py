"""`clawrecall config import`: each system's real config files (tests/fixtures/config_import, written
from the systems' documented examples) become a clawrecall config that `load_config` loads, with
the values expected, and every key with no equivalent listed with its reason."""

from __future__ import annotations

import json
import re
import stat
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawrecall.cli import cli
from clawrecall.config import Config, build_config, load_config
from clawrecall.importers.config import markdown_table, translate
from clawrecall.importers.systems import SYSTEMS

FIXTURES = Path(__file__).parent / "fixtures" / "config_import"
ENV = {"PGPASSWORD": "pg-secret", "ZAI_API_KEY": "zai-key", "JINA_API_KEY": "jina-key", "JINA_API_KEY_2": "jina-2"}


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def imported(tmp_path: Path, fixture: str, system: str, name: str = "config.toml"):
    """Import a fixture with --write, then load what was written as clawrecall would."""
    target = tmp_path / name
    result = run("config", "import", str(FIXTURES / fixture), "--from", system, "--write", str(target))
    assert result.exit_code == 0, result.output
    return load_config(target, env=ENV), target, result.output


def untranslated(fixture: str, system: str) -> dict[str, str]:
    result = run("config", "import", str(FIXTURES / fixture), "--from", system, "--json")
    assert result.exit_code == 0, result.output
    return {u["key"]: u["reason"] for u in json.loads(result.output)["untranslated"]}


def test_openclaw_memory_pgvector_openclaw_json5(tmp_path):
    cfg, target, output = imported(tmp_path, "pgvector-openclaw.json5", "openclaw-memory-pgvector")
    # the same server and credentials; clawrecall's own database, since openclaw_memory holds the plugin's tables
    assert cfg.database.model_dump() == {"host": "localhost", "port": 5432, "database": "clawrecall",
                                         "user": "postgres", "password": "pg-secret", "ssl": False}
    assert cfg.database.url() == "postgresql://postgres:pg-secret@localhost:5432/clawrecall"
    assert (cfg.embedding.provider, cfg.embedding.base_url, cfg.embedding.model) == ("e5", "http://127.0.0.1:8765", None)
    assert cfg.hooks.capture.enabled is True and cfg.hooks.recall.enabled is False
    assert "${PGPASSWORD}" in target.read_text()  # the variable stays a variable, as the source had it
    missing = untranslated("pgvector-openclaw.json5", "openclaw-memory-pgvector")
    assert set(missing) == {"database.database", "embedding.model", "sessionSummaries", "zaiApiKey"}
    assert "clawrecall needs a database of its own" in missing["database.database"]
    assert "E5 server picks it" in missing["embedding.model"]
    assert "sessionSummaries: clawrecall writes no LLM session summaries" in output


def test_openclaw_memory_pgvector_zai_provider(tmp_path):
    cfg, _, _ = imported(tmp_path, "pgvector-zai.json", "openclaw-memory-pgvector")
    assert (cfg.embedding.provider, cfg.embedding.model, cfg.embedding.api_key) == ("zai", "embedding-3", "zai-key")
    assert cfg.embedding.base_url == "https://api.z.ai/api/coding/paas/v4"  # where its client sent requests
    assert cfg.database.database == "clawrecall"
    assert set(untranslated("pgvector-zai.json", "openclaw-memory-pgvector")) == {"database.database"}


def test_shadowdb_plugin_config(tmp_path):
    cfg, _, _ = imported(tmp_path, "shadowdb-plugin.json", "shadowdb")
    assert cfg.db == "postgresql://shadow:secret@db.internal:5432/clawrecall"
    assert (cfg.embedding.provider, cfg.embedding.model, cfg.embedding.dimensions) == ("ollama", "nomic-embed-text", 768)
    r = cfg.retrieval
    assert (r.fusion, r.vector.weight, r.bm25.weight, r.recency_weight) == ("rrf", 0.7, 0.3, 0.15)
    assert (cfg.writes.enabled, cfg.writes.retention_days) == (True, 30)
    s = cfg.hooks.startup
    assert (s.enabled, s.mode, s.max_chars) == (True, "digest", 6000)
    assert s.max_chars_by_model == {"opus": 6000, "sonnet": 5000, "ministral-8b": 1500, "qwen3": 2000}
    assert list(s.max_chars_by_model) == ["opus", "sonnet", "ministral-8b", "qwen3"]  # first match wins: order kept
    missing = untranslated("shadowdb-plugin.json", "shadowdb")
    assert set(missing) == {"table", "search.recencyWeight", "connectionString"}
    assert "'shadow' became 'clawrecall'" in missing["connectionString"]
    assert missing["search.recencyWeight"].startswith("translated, but:")


def test_shadowdb_home_file(tmp_path):
    cfg, _, _ = imported(tmp_path, "shadowdb-home.json", "shadowdb")
    assert cfg.database.url() == "postgresql://james:pw@localhost:5432/clawrecall"
    assert untranslated("shadowdb-home.json", "shadowdb") == {}  # `reinforce` is always honoured here


def test_shadowdb_conversions():
    source = {
        "embedding": {"baseUrl": "https://api.example.com", "provider": "openai_compatible", "model": "m"},
        "writes": {"retention": {"purgeAfterDays": 0}},
        "primer": {"mode": "first-run", "cacheTtlMs": 120_000},
        "reranker": {"baseUrl": "http://127.0.0.1:9100/", "timeoutMs": 1500, "rerankTopK": 20},
        "backend": "sqlite", "connectionString": "/home/me/shadow.db",
    }
    t = translate(source, "shadowdb")
    assert t.config["embedding"] == {"provider": "openai-compatible", "base_url": "https://api.example.com/v1", "model": "m"}
    assert t.config["writes"] == {"retention_days": 365_000}
    assert t.config["hooks"]["startup"] == {"mode": "first-run", "ttl_s": 120.0}
    assert t.config["retrieval"]["rerank"] == {"provider": "http", "url": "http://127.0.0.1:9100/rerank", "timeout_s": 1.5,
                                               "top_k": 20}
    reasons = {u.key: u.reason for u in t.untranslated}
    assert "never" in reasons["writes.retention.purgeAfterDays"]
    assert "backend" in reasons and "connectionString" in reasons and "db" not in t.config
    # no provider named: ShadowDB's default, ollama, is what the vectors came from
    t = translate({"embedding": {"model": "nomic-embed-text", "commandArgs": []}}, "shadowdb")
    assert t.config["embedding"] == {"provider": "ollama", "model": "nomic-embed-text"}
    assert t.filled == ["embedding.provider"]
    t = translate({"embedding": {"provider": "external", "command": "/usr/bin/embed", "commandArgs": ["--fast"],
                                 "commandTimeoutMs": 15000}}, "shadowdb")
    assert t.config["embedding"] == {"provider": "command", "command": ["/usr/bin/embed", "--fast"], "timeout_s": 15.0}
    assert translate({"reranker": {"enabled": False}}, "shadowdb").config["retrieval"]["rerank"] == {"provider": "none"}


def test_memory_lancedb_pro_openclaw_json(tmp_path):
    cfg, _, _ = imported(tmp_path, "lancedb-pro-openclaw.json", "memory-lancedb-pro")
    e = cfg.embedding
    assert (e.provider, e.api_key, e.model, e.base_url, e.dimensions) == (
        "openai-compatible", "jina-key", "jina-embeddings-v5-text-small", "https://api.jina.ai/v1", 1024)
    rec = cfg.hooks.recall
    assert (rec.enabled, rec.min_length, rec.max_items) == (True, 8, 5)
    assert (cfg.hooks.capture.enabled, cfg.hooks.capture.capture_assistant) == (True, False)
    r = cfg.retrieval
    assert (r.vector.weight, r.bm25.weight, r.candidates, r.recency_half_life_days, r.recency_weight) == (0.7, 0.3, 20, 14, 0.1)
    assert (r.noise_filter, r.length_norm_anchor, r.time_decay_half_life_days) == (True, 500, 60)
    assert (r.rerank.provider, r.rerank.url, r.rerank.model, r.rerank.api_key) == (
        "http", "https://api.jina.ai/v1/rerank", "jina-reranker-v3", "jina-key")
    access = {scope: members.write for scope, members in cfg.access.scopes.items()}
    assert access == {"global": ["agent:coder"], "project:atlas": ["agent:coder", "agent:reviewer"]}
    missing = untranslated("lancedb-pro-openclaw.json", "memory-lancedb-pro")
    assert {"dbPath", "smartExtraction", "llm", "retrieval.minScore", "retrieval.hardMinScore", "scopes.default",
            "scopes.definitions", "sessionMemory", "enableManagementTools", "embedding.taskQuery"} <= set(missing)
    assert "reviewer → agent:coder" in missing["scopes.agentAccess"]  # another agent's own scope is not shareable
    assert "first" in missing["embedding.apiKey"]  # a list of keys: the first one is used


def test_memory_lancedb_pro_without_base_url_is_openai_and_vector_mode():
    t = translate({"embedding": {"apiKey": "k"}, "retrieval": {"mode": "vector", "recencyHalfLifeDays": 0},
                   "recallMode": "off"}, "memory-lancedb-pro")
    assert t.config["embedding"] == {"provider": "openai", "api_key": "k"}  # its client's default address
    assert t.config["retrieval"] == {"bm25": {"enabled": False}, "trigram": {"enabled": False}, "recency_weight": 0.0}
    assert t.config["hooks"] == {"recall": {"enabled": False}}
    # autoRecall was left out: off there, so off here too, and said so
    assert t.filled == ["embedding.provider", "autoRecall"]
    assert translate({"autoRecall": True}, "memory-lancedb-pro").config == {"hooks": {"recall": {"enabled": True}}}


def test_nova_memory_postgres_json(tmp_path):
    cfg, _, _ = imported(tmp_path, "nova-postgres.json", "nova-memory")
    # a port as text is a number, a null is "not set"
    assert cfg.database.url() == "postgresql://nova-agent:nova_password@localhost:5432/clawrecall"
    assert untranslated("nova-postgres.json", "nova-memory") == {}
    t = translate({"host": "db", "database": "nova_memory"}, "nova-memory")  # no user: nova connects as the login
    assert set(t.config["database"]) == {"host", "user"} and t.filled == ["user"]
    assert [u.key for u in t.untranslated] == ["database"]


def test_memento_local_openclaw_json(tmp_path):
    cfg, _, _ = imported(tmp_path, "memento-openclaw.json", "memento-local")
    assert (cfg.embedding.provider, cfg.embedding.model) == ("local", "BAAI/bge-m3")
    assert (cfg.conversations.pause_minutes, cfg.conversations.max_turns, cfg.conversations.record) == (5.0, 50, True)
    assert cfg.hooks.recall.enabled is True
    missing = untranslated("memento-openclaw.json", "memento-local")
    # the LLM memento-local extracted with becomes clawrecall's, and its visibility rules ours, with their categories
    assert (cfg.llm.provider, cfg.llm.model) == ("anthropic", "claude-sonnet-4-6")
    assert set(missing) == {"visibility.rules", "embeddingModel"}
    assert "medical, credentials, operational join" in missing["visibility.rules"]
    assert cfg.extraction.visibility.rules == {"medical": "secret", "credentials": "secret", "operational": "private"}
    assert cfg.extraction.visibility.default == "shared" and {"medical", "other"} <= set(cfg.categories)
    t = translate({"extraction": {"autoExtract": True, "minTurnsForExtraction": 3, "includeExistingFactsCount": 50}},
                  "memento-local")
    assert t.config == {"extraction": {"enabled": True, "min_turns": 3, "known_facts": 50}}
    t = translate({"extractionModel": "ollama/qwen2.5:7b"}, "memento-local")
    assert t.config == {"llm": {"provider": "openai", "base_url": "http://localhost:11434/v1", "model": "qwen2.5:7b"}}
    assert "not a `provider/model`" in translate({"extractionModel": "claude"}, "memento-local").untranslated[0].reason
    # the household: the level every agent's new memories get, and whether agents read each other's shared ones
    t = translate({"visibility": {"defaultLevel": "private"}, "recall": {"crossAgentRecall": False}}, "memento-local")
    assert t.config == {"extraction": {"visibility": {"default": "private"}}, "access": {"agents": {"*": {"master": False}}}}
    assert build_config(t.config, {}).access.agent("drjones").master is False


def test_a_value_clawrecall_refuses_is_listed_under_their_key_and_the_rest_loads():
    t = translate({"recall": {"maxFacts": 50, "maxContextChars": 4000}, "pauseTimeoutMs": 60000}, "memento-local")
    assert t.config == {"hooks": {"recall": {"max_chars": 4000}}, "conversations": {"pause_minutes": 1.0}}
    assert [(u.key, u.reason) for u in t.untranslated] == [
        ("recall.maxFacts", "clawrecall refuses the value for hooks.recall.max_items: Input should be less than or equal to 20")]


def test_unknown_keys_are_listed(tmp_path):
    source = tmp_path / "shadow.json"
    source.write_text(json.dumps({"connectionString": "postgresql://x@h/clawrecall", "serach": {"maxResults": 5},
                                  "embedding": {"colour": "red"}}))
    result = run("config", "import", str(source), "--from", "shadowdb", "--json")
    reasons = {u["key"]: u["reason"] for u in json.loads(result.output)["untranslated"]}
    assert set(reasons) == {"serach.maxResults", "embedding.colour"}
    assert reasons["embedding.colour"] == "not a ShadowDB setting clawrecall knows (a typo, or a newer version's)"


def test_prints_toml_by_default_and_json_with_json():
    text = run("config", "import", str(FIXTURES / "pgvector-zai.json"), "--from", "openclaw-memory-pgvector")
    assert text.exit_code == 0
    assert tomllib.loads(text.output) == {
        "database": {"host": "localhost", "user": "postgres"},
        "embedding": {"provider": "zai", "base_url": "https://api.z.ai/api/coding/paas/v4", "api_key": "${ZAI_API_KEY}",
                      "model": "embedding-3"}}
    as_json = run("--json", "config", "import", str(FIXTURES / "pgvector-zai.json"), "--from", "openclaw-memory-pgvector")
    data = json.loads(as_json.output)
    assert data["config"] == tomllib.loads(text.output) and data["written"] is None
    assert data["found_at"] is None and data["system"] == "openclaw-memory-pgvector"


def test_write_refuses_to_overwrite_without_force_and_writes_json_by_extension(tmp_path):
    target = tmp_path / "config.toml"
    target.write_text("db = 'keep.db'\n")
    result = run("config", "import", str(FIXTURES / "nova-postgres.json"), "--from", "nova-memory", "--write", str(target))
    assert result.exit_code == 1 and f"Error: {target} exists: pass --force to replace it" in result.output
    assert target.read_text() == "db = 'keep.db'\n"
    result = run("config", "import", str(FIXTURES / "nova-postgres.json"), "--from", "nova-memory", "--write", str(target),
                 "--force", "--json")
    assert json.loads(result.output)["written"] == str(target)
    assert load_config(target, env={}).database.host == "localhost"
    as_json = tmp_path / "config.json"
    run("config", "import", str(FIXTURES / "nova-postgres.json"), "--from", "nova-memory", "--write", str(as_json))
    assert stat.S_IMODE(as_json.stat().st_mode) == 0o600  # a new file: it may hold a password
    assert json.loads(as_json.read_text())["database"]["user"] == "nova-agent"
    assert load_config(as_json, env={}).database.user == "nova-agent"


def test_bad_input_is_one_clear_error(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("{ not json")
    result = run("config", "import", str(broken), "--from", "shadowdb", "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["error"]["code"] == "invalid_input"
    result = run("config", "import", str(FIXTURES / "memento-openclaw.json"), "--from", "shadowdb")
    assert result.exit_code == 1
    assert "without a ShadowDB entry: plugins.entries has memento-local" in result.output
    result = run("config", "import", str(broken), "--from", "mem0")
    assert result.exit_code == 2 and "'mem0' is not one of" in result.output


def test_every_rule_names_a_real_key_of_ours_and_plugin_entries_are_found(tmp_path):
    from clawrecall.config import _annotation_at

    for system in SYSTEMS.values():
        for rule in system.rules:
            assert not rule.target or _annotation_at(rule.target.split(".")) is not None, (system.name, rule.target)
    entry = tmp_path / "entry.json"
    entry.write_text(json.dumps({"enabled": True, "config": {"autoRecall": True}}))  # a plugin entry alone
    data = json.loads(run("config", "import", str(entry), "--from", "memento-local", "--json").output)
    assert (data["found_at"], data["config"]) == ("config", {"hooks": {"recall": {"enabled": True}}})
    source = {"embedding": {"model": "nomic-embed-text"}}
    translate(source, "shadowdb")
    assert source == {"embedding": {"model": "nomic-embed-text"}}  # their config is read, never changed


def test_loading_another_systems_config_says_how_to_translate_it(tmp_path):
    from clawrecall.errors import ConfigError

    theirs = tmp_path / "shadowdb.json"
    theirs.write_text(json.dumps({"connectionString": "postgresql://h/db", "writes": {"retention": {"purgeAfterDays": 9}}}))
    with pytest.raises(ConfigError) as info:
        load_config(theirs, env={})
    assert str(info.value) == (
        "clawrecall config has unknown keys: connectionString, writes.retention (settings of shadowdb: "
        "`clawrecall config import FILE --from shadowdb` translates them)")
    with pytest.raises(ConfigError, match=r"unknown keys: colour$"):  # no hint for keys of no system
        build_config({"colour": 1}, env={})
    with pytest.raises(ConfigError, match=r"settings of openclaw-memory-pgvector or memory-lancedb-pro or memento-local"):
        build_config({"autoRecall": False}, env={})


def test_docs_show_each_systems_table_as_the_code_has_it():
    docs = (Path(__file__).parents[1] / "docs" / "configuration.md").read_text()
    for name in SYSTEMS:
        assert markdown_table(name) in docs, f"docs/configuration.md: the table of {name} differs from importers/systems.py"
    # and no rule of one system is documented twice
    assert len(re.findall(r"^\| their key \| clawrecall \| how \|$", docs, re.M)) == len(SYSTEMS)


def test_bare_keys_json_five_misreads_are_quoted_and_strings_and_comments_kept():
    import json5

    from clawrecall.importers.config import quote_bare_keys

    text = "// e5: {x: 1}\n{ e5Endpoint: 'http://h:1', note: \"a: b, c: d\", /* k: v */ list: [{n: 2}], }"
    with pytest.raises(Exception):  # json-five lexes the bare key e5Endpoint as a number's exponent
        json5.loads(text)
    assert json5.loads(quote_bare_keys(text)) == {"e5Endpoint": "http://h:1", "note": "a: b, c: d", "list": [{"n": 2}]}
