"""The public API is what `clawrecall.__all__` names, and what `Memory` and its namespaces answer to: pinned
here, so a name cannot appear or vanish by accident (docs/architecture.md lists the same surface)."""

from __future__ import annotations

import inspect
import re
import typing
from pathlib import Path

import pytest

from pydantic import BaseModel

import clawrecall
from clawrecall import errors, models

PUBLIC = [
    "AddResult", "AmbiguousIdError", "AuthError", "BackupSummary", "Caller", "ChangePage", "ClawrecallError",
    "CleanupItem", "CleanupReport", "Cluster", "Config", "ConfigError", "Conversation", "ConversationDeleted",
    "CountFilters", "Coverage", "DeleteFilters", "Discussed", "EmbeddingError", "EmbeddingFingerprint",
    "EmbeddingMismatchError", "Erased", "FileRecord", "ForbiddenError", "Handlers", "HistoryEntry", "Imported",
    "Ingested", "InvalidRequestError", "Job", "JobKindStats", "JobStateError", "JobStats", "Journal", "LLMError",
    "LLMRefusedError", "LLMUnavailableError", "LeaseLostError", "ListFilters", "ListOrder", "Logged", "LoggedHit",
    "LoggedSearch", "Memory", "MemoryChanges", "MemoryEvent", "MemoryFields", "MemoryFilters", "MemoryRecord",
    "Message", "NewMemory", "NotFoundError", "Occurrence", "PayloadTooLargeError", "PeriodCount",
    "PermanentJobError", "Provenance", "Pruned", "PurgeRun", "QueryCount", "ReadFilters", "Recall", "RecallCount",
    "ReembedState", "RetryLaterError", "ScopeError", "SearchFilters", "SearchHit", "SearchHits", "SearchMode",
    "SecretKeyError", "SecretRotation", "SecretsStatus", "Segment", "ShuttingDownError", "StartupEntry", "Stats",
    "StatsGroup", "StorageError", "Sweep", "UnknownToolError", "UpdateFields", "ValidationError", "Visibility",
    "WritesDisabledError", "__version__", "load_config",
]


def test_all_is_sorted_and_exactly_the_pinned_names():
    assert clawrecall.__all__ == sorted(clawrecall.__all__)
    assert clawrecall.__all__ == PUBLIC


def test_every_exported_name_exists_and_star_import_gives_exactly_them():
    namespace: dict[str, object] = {}
    exec("from clawrecall import *", namespace)
    assert sorted(k for k in namespace if k != "__builtins__") == PUBLIC


def test_every_error_and_model_a_caller_meets_is_exported():
    """What `Memory`'s verbs raise and return must be importable from the package itself."""
    raised = {n for n, c in vars(errors).items() if inspect.isclass(c) and issubclass(c, errors.ClawrecallError)}
    returned = {
        n for n, c in vars(models).items()
        if inspect.isclass(c) and c.__module__ == models.__name__ and (issubclass(c, BaseModel) or n == "Visibility")
    }
    assert raised <= set(PUBLIC)
    assert returned <= set(PUBLIC)


def test_a_memory_is_built_from_exported_names_only(tmp_path):
    """Config, the caller, the models and the errors: enough to open a store, write, read and fail as a user."""
    config = clawrecall.load_config(None, overrides={"writes": {"enabled": False}})
    assert isinstance(config, clawrecall.Config)
    with clawrecall.Memory.open(tmp_path / "memory.db", writes={"enabled": False}) as mem:
        assert mem.config.writes.enabled is False
        alice = clawrecall.Caller("alice")
        assert mem.list(caller=alice) == []
        try:
            mem.add("x", caller=alice)
        except clawrecall.WritesDisabledError as exc:
            assert isinstance(exc, clawrecall.ClawrecallError)
        else:
            raise AssertionError("a read-only store accepted a write")


# Every public name on `Memory` and on each of its namespaces; machinery (the store, the pipeline, the
# write path, extraction's internals) is private, and what runs the store is `mem.upkeep`.
SURFACE = {
    "Memory": [
        "add", "add_many", "backup", "changes", "close", "config", "conversations", "count", "delete", "delete_bulk",
        "erase", "export_journal", "export_jsonl", "files", "forget", "get", "history", "import_items", "import_jsonl", "insight", "jobs", "list",
        "open", "purge", "reembed", "search", "secrets", "set_visibility_bulk", "startup", "stats", "supersede", "undelete",
        "undelete_bulk", "update", "upkeep", "versions",
    ],
    "startup": ["delete", "list", "set"],
    "conversations": [
        "close_due", "delete", "end", "export", "folder", "import_occurrences", "log", "prune", "segments", "sessions",
        "show", "stats",
    ],
    "files": ["bring", "get", "ingest", "list", "remove"],
    "jobs": ["cancel", "enqueue", "get", "list", "retry", "stats"],
    "insight": [
        "added", "cleanup", "clusters", "confirm_cleanup", "coverage", "never_recalled", "occurrences", "popular", "recalled",
        "recalls", "searched", "searches", "unanswered", "why",
    ],
    "secrets": ["rotate", "status"],
    "changes": ["after", "last", "subscribe"],
    "upkeep": [
        "backend", "backfill", "build_vector_index", "check_fingerprint", "check_llm", "close_feeds",
        "configured_fingerprint", "deferred_vector_index", "embedder", "extracting", "handlers", "integrity_problems",
        "job", "last_purge", "location", "on", "reembed_state", "run_job", "runtime", "saved_backups",
        "scheduled_backup", "schema_version", "start_workers", "stop_workers", "stored_fingerprint", "sweep",
        "unembedded", "worker",
    ],
}
NAMESPACES = [n for n in SURFACE if n != "Memory"]
ROOT = Path(__file__).resolve().parent.parent


def _public(obj: object) -> list[str]:
    """The names a user reaches without an underscore: the class's and the instance's own."""
    return sorted({n for n in dir(type(obj)) if not n.startswith("_")} | {n for n in vars(obj) if not n.startswith("_")})


@pytest.fixture(scope="module")
def mem(tmp_path_factory):
    with clawrecall.Memory.open(tmp_path_factory.mktemp("surface") / "memory.db") as opened:
        yield opened


def test_memory_and_its_namespaces_answer_to_exactly_the_pinned_names(mem):
    assert _public(mem) == SURFACE["Memory"]
    for name in NAMESPACES:
        assert _public(getattr(mem, name)) == SURFACE[name], name


# modules whose objects are the engine's parts, not a user's: the store, the pipeline, the write path, the search
# log, the event registry, the job runner, the change feed's watch
MACHINERY = ("clawrecall.storage", "clawrecall.retrieval", "clawrecall.insight", "clawrecall.engine.", "clawrecall.runtime",
             "clawrecall.embeddings", "clawrecall.llm", "clawrecall.extraction")


def test_no_namespace_hands_out_the_engine_s_parts(mem):
    """Outside `mem.upkeep` (which runs the store, so its `runtime` and `embedder` are parts on purpose), every
    public attribute that is not a verb is a namespace, the config or a plain value: a part made public again
    (`mem.changes.store`, `mem.events`, `mem.jobs.handlers`) fails here even if it is added to the pinned list."""
    namespaces = {id(getattr(mem, n)) for n in NAMESPACES}
    for owner in ["Memory", *NAMESPACES]:
        if owner == "upkeep":
            continue
        obj = mem if owner == "Memory" else getattr(mem, owner)
        for name in _public(obj):
            value = getattr(obj, name)
            if inspect.ismethod(value) or id(value) in namespaces:
                continue
            module = type(value).__module__
            assert isinstance(value, (dict, clawrecall.Config)) or not module.startswith(MACHINERY), (
                f"{owner}.{name} is a {module}.{type(value).__name__}: the engine's machinery")
            assert not isinstance(value, dict), f"{owner}.{name} is a dict: machinery (a registry), not a verb"


def test_the_architecture_doc_lists_the_whole_surface():
    """docs/architecture.md's "The facade" section names every public verb, as `mem.verb` or `mem.namespace.verb`."""
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = doc.split("## The facade", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`(?:mem\.)?([a-z_]+)`", section))
    for name, names in SURFACE.items():
        missing = set(names) - listed
        assert not missing, f"{name}: {sorted(missing)} not in docs/architecture.md"
    assert set(NAMESPACES) <= listed


def test_every_verb_takes_the_caller_one_way(mem):
    """A verb that reads or writes as someone takes `caller=` or `user_id=`/`agent_id=`, all three keyword-only
    and optional (no caller: the local administrator), on `Memory` and on every namespace alike."""
    checked = 0
    for obj in [mem, *(getattr(mem, n) for n in NAMESPACES)]:
        for name in _public(obj):
            verb = getattr(obj, name)
            if not inspect.ismethod(verb) or name == "erase":  # erase's user_id/agent_id name whom to erase
                continue
            params = inspect.signature(verb).parameters
            if "caller" not in params:
                continue
            for who in ("caller", "user_id", "agent_id"):
                assert who in params, f"{name} takes caller but not {who}"
                assert params[who].kind is inspect.Parameter.KEYWORD_ONLY and params[who].default is None, (name, who)
            checked += 1
    assert checked >= 30


def test_verbs_with_many_fields_take_them_typed_and_refuse_unknown_names(mem):
    """Their keywords are TypedDicts a type checker reads; a misspelt one is the TypeError Python gives."""
    typed = {"add": clawrecall.MemoryFields, "search": clawrecall.SearchFilters, "list": clawrecall.ListFilters,
             "count": clawrecall.CountFilters, "update": clawrecall.UpdateFields, "supersede": clawrecall.MemoryChanges,
             "delete_bulk": clawrecall.DeleteFilters, "undelete_bulk": clawrecall.DeleteFilters,
             "set_visibility_bulk": clawrecall.DeleteFilters}
    for name, fields in typed.items():
        [variadic] = [p for p in inspect.signature(getattr(mem, name)).parameters.values()
                      if p.kind is inspect.Parameter.VAR_KEYWORD]
        assert variadic.annotation == f"Unpack[{fields.__name__}]", name
    with_variadic = {n for n in _public(mem) if inspect.ismethod(getattr(mem, n)) and any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in inspect.signature(getattr(mem, n)).parameters.values())}
    assert with_variadic == set(typed) | {"open"}  # open's keywords are config keys, checked by the config model
    alice = clawrecall.Caller("alice")
    kept = mem.add("Alice prefers green tea", caller=alice, category="preference")
    refused = [
        lambda: mem.add("Alice prefers tea", caller=alice, categry="preference"),
        lambda: mem.search("tea", caller=alice, limt=3),
        lambda: mem.list(caller=alice, ordr="oldest"),
        lambda: mem.count(caller=alice, categry="preference"),
        lambda: mem.update(kept.id, caller=alice, contnt="Alice prefers coffee"),
        lambda: mem.supersede(kept.id, "Alice prefers coffee", caller=alice, importanc=0.9),
        lambda: mem.delete_bulk(caller=alice, categry="preference"),
        lambda: mem.undelete_bulk(caller=alice, categry="preference"),
        lambda: mem.set_visibility_bulk("private", caller=alice, categry="preference"),
    ]
    for call, misspelt in zip(refused, ("categry", "limt", "ordr", "categry", "contnt", "importanc", "categry", "categry",
                                        "categry"), strict=True):
        with pytest.raises(TypeError, match=misspelt):
            call()
    [only] = mem.list(caller=alice)  # nothing was written, changed or deleted by the refused calls
    assert only.model_dump() == mem.get(kept.id, caller=alice).model_dump() and only.content == "Alice prefers green tea"
    assert mem.count(caller=alice, category="preference") == 1
    mem.forget(kept.id, caller=alice)


def test_a_search_s_mode_and_a_list_s_order_are_literal_types_checked_at_the_call():
    """A type checker knows the choices; a value outside them is a ValidationError that names them."""
    assert typing.get_type_hints(clawrecall.SearchFilters)["mode"] == clawrecall.SearchMode
    assert typing.get_type_hints(clawrecall.ListFilters)["order"] == clawrecall.ListOrder
    assert typing.get_args(clawrecall.SearchMode) == ("hybrid", "vector", "bm25", "trigram")
    assert typing.get_args(clawrecall.ListOrder) == ("newest", "oldest", "updated", "importance", "recalls")


def test_an_unknown_mode_or_order_is_a_clear_error(mem):
    with pytest.raises(clawrecall.ValidationError, match="unknown search mode 'fuzzy': use hybrid, vector, bm25 or trigram"):
        mem.search("tea", mode="fuzzy")  # type: ignore[typeddict-item]
    with pytest.raises(clawrecall.ValidationError, match="unknown order 'random': use newest, oldest, updated, importance or recalls"):
        mem.list(order="random")  # type: ignore[typeddict-item]


def test_every_public_verb_returns_a_model_not_a_dict():
    """What a verb returns is a model (or a list of them, a number, a path): no plain dict to guess the keys of."""
    from clawrecall.engine._changes import Changes
    from clawrecall.engine._conversations import Conversations
    from clawrecall.engine._files import Files
    from clawrecall.engine._insight import Insight
    from clawrecall.engine._jobs import Jobs
    from clawrecall.engine._secrets import SecretKeys
    from clawrecall.engine._startup import Startup
    from clawrecall.engine._upkeep import Upkeep

    for cls in (clawrecall.Memory, Startup, Conversations, Files, Jobs, Insight, Upkeep, SecretKeys, Changes):
        for name, fn in vars(cls).items():
            if name.startswith("_") or not callable(fn):
                continue
            returned = str(inspect.signature(fn).return_annotation)  # as written: the module postpones annotations
            assert "dict" not in returned, f"{cls.__name__}.{name} returns {returned}"
