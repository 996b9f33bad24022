"""The configuration of the systems clawrecall users come from: one table per system (`SYSTEMS`),
one rule per key of theirs: the key of ours it becomes and how its value changes (milliseconds to
seconds, a connection string to `db`, `e5-local` to `e5`), or why it has none. `importers.config`
translates a file with them, and the config's loader names the system whose keys it refuses
(`owners`): so this module imports no config.
"""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from ..models import DEFAULT_CATEGORIES


class _Nothing:
    """A value understood and needing nothing of ours (a backend ours already is, an endpoint folded into another key)."""


NOTHING = _Nothing()


@dataclass(frozen=True)
class Dropped:
    """This value has no equivalent: the key is reported with `reason`."""

    reason: str


@dataclass(frozen=True)
class Partial:
    """Written as `value`, and reported too, since it does not mean quite the same."""

    value: Any
    reason: str


@dataclass(frozen=True)
class Several:
    """One key of theirs setting several of ours."""

    values: dict[str, Any]


Convert = Callable[[Any, Mapping[str, Any]], Any]  # (their value, their whole config) -> ours


@dataclass(frozen=True)
class Rule:
    """Their key `source` (dotted; `decay.*` covers a section) becomes our `target` ("" for none).
    `note` says how the value changes, or why there is no equivalent."""

    source: str
    target: str
    note: str = ""
    convert: Convert | None = None

    def apply(self, value: Any, source: Mapping[str, Any]) -> Any:
        """Ours for their `value` (`source`: their whole config)."""
        return (self.convert or _same)(value, source)

    def matches(self, path: str) -> bool:
        if self.source.endswith(".*"):
            return path == self.source[:-2] or path.startswith(self.source[:-1])
        return path == self.source


@dataclass(frozen=True)
class System:
    name: str
    title: str  # how the docs and messages name it
    plugin_ids: tuple[str, ...]  # its entry names under `plugins.entries` in openclaw.json
    rules: tuple[Rule, ...]
    # their defaults that differ from ours where a key left out would change what is reached or what
    # the agent is shown (the provider that made their vectors, the user they connected as, recall
    # turned off): (their key, its value for their config), filled in when the key's section is
    # there and the key is not
    fills: tuple[tuple[str, Callable[[Mapping[str, Any]], Any]], ...] = ()
    drop_nulls: bool = False  # null means "not set" (nova-memory's postgres.json)


# -- value conversions ---------------------------------------------------------------------------
def _same(value: Any, source: Mapping[str, Any]) -> Any:
    return value


def _scaled(factor: float) -> Convert:
    return lambda value, source: value * factor if _number(value) else Dropped(f"{value!r} is not a number")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _choice(mapping: Mapping[Any, Any], what: str) -> Convert:
    """A value from a fixed set: theirs → ours (NOTHING: understood, nothing to set; Dropped: no equivalent)."""

    def convert(value: Any, source: Mapping[str, Any]) -> Any:
        key = value.strip().lower() if isinstance(value, str) else value
        if key not in mapping:
            return Dropped(f"{value!r} is not one of the {what} clawrecall knows ({', '.join(map(str, mapping))})")
        return mapping[key]

    return convert


def lookup(source: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted `path` of their config (None where there is none)."""
    node: Any = source
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _no(reason: str) -> Convert:
    return lambda value, source: Dropped(reason)


def _none(source: str, reason: str) -> Rule:
    return Rule(source, "", reason, _no(reason))


def _to(source: str, target: str, note: str = "", convert: Convert = _same) -> Rule:
    return Rule(source, target, note, convert)


# -- openclaw-memory-pgvector ------------------------------------------------------------------------
# Their database holds their tables, and clawrecall's share names with them (`memories`): opening it
# fails ("relation memories already exists"). The server and credentials carry over; the database does not.
_OWN_DATABASE = ("its database holds {system}'s tables, whose names clawrecall's share: clawrecall needs a "
                 "database of its own on the same server, `clawrecall` by default (`createdb clawrecall`)")
ZAI_CODING_URL = "https://api.z.ai/api/coding/paas/v4"


def _pgvector_provider(value: Any, source: Mapping[str, Any]) -> Any:
    ours = _choice({"openai": "openai", "e5-local": "e5", "zai": "zai"}, "openclaw-memory-pgvector providers")(value, source)
    if ours == "zai":  # the address its Z.AI client called (ours defaults to Z.AI's general API)
        return Several({"embedding.provider": "zai", "embedding.base_url": ZAI_CODING_URL})
    return ours


def _pgvector_model(value: Any, source: Mapping[str, Any]) -> Any:
    if lookup(source, "embedding.provider") == "e5-local":
        return Dropped("its e5-local client sends no model: the E5 server picks it, and clawrecall reads it from the "
                       "server's /health")
    return value


def _pgvector_e5_endpoint(value: Any, source: Mapping[str, Any]) -> Any:
    if lookup(source, "embedding.provider") != "e5-local":
        return Dropped("read only by the e5-local provider, which this config does not use")
    return value


PGVECTOR = System(
    "openclaw-memory-pgvector", "openclaw-memory-pgvector", ("memory-pgvector", "openclaw-memory-pgvector"),
    (
        _to("database.host", "database.host"),
        _to("database.port", "database.port"),
        _none("database.database", _OWN_DATABASE.format(system="openclaw-memory-pgvector")),
        _to("database.user", "database.user"),
        _to("database.password", "database.password", "`${PGPASSWORD}` stays a variable: clawrecall reads it the same way"),
        _to("database.ssl", "database.ssl"),
        Rule("embedding.provider", "embedding.provider", "`openai` → `openai`, `e5-local` → `e5`, `zai` → `zai` "
             f"(with `embedding.base_url = \"{ZAI_CODING_URL}\"`, the Z.AI address it called)", _pgvector_provider),
        Rule("embedding.model", "embedding.model", "dropped for `e5-local`, whose server picks the model", _pgvector_model),
        _to("embedding.apiKey", "embedding.api_key"),
        Rule("embedding.e5Endpoint", "embedding.base_url", "only with `e5-local`", _pgvector_e5_endpoint),
        _to("autoCapture", "hooks.capture.enabled"),
        _to("autoRecall", "hooks.recall.enabled"),
        _none("sessionSummaries", "clawrecall writes no LLM session summaries; it keeps the conversation itself "
              "(`conversations.record`, on by default) and searches its messages"),
        _none("zaiApiKey", "the key of its Z.AI (GLM) summaries, which clawrecall does not write; Z.AI embeddings "
              "take `embedding.apiKey` or $ZAI_API_KEY"),
    ),
)


# -- ShadowDB ----------------------------------------------------------------------------------------
def _shadowdb_backend(value: Any, source: Mapping[str, Any]) -> Any:
    return _choice({
        "postgres": NOTHING,
        "sqlite": Dropped("ShadowDB's SQLite file holds ShadowDB's tables; clawrecall's SQLite store is a file of "
                          "its own (`db`, by default memory.db in the data directory)"),
        "mysql": Dropped("clawrecall runs on SQLite or PostgreSQL; `clawrecall import --from shadowdb mysql://…` "
                         "reads the MySQL database's memories"),
    }, "ShadowDB backends")(value, source)


def _shadowdb_connection(value: Any, source: Mapping[str, Any]) -> Any:
    if (source.get("backend") or "postgres") != "postgres":
        return Dropped(f"a {source.get('backend')} location, which clawrecall cannot use (see backend)")
    return _own_database(value)


def _own_database(url: Any) -> Any:
    """The same server and credentials, clawrecall's own database (see _OWN_DATABASE)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(str(url))
    if parts.scheme not in ("postgres", "postgresql"):
        return Dropped("not a postgresql:// URL")
    if parts.path.strip("/") in ("", "clawrecall"):
        return url
    return Partial(urlunsplit(parts._replace(path="/clawrecall")),
                   _OWN_DATABASE.format(system="ShadowDB") + f"; {parts.path.strip('/')!r} became 'clawrecall'")


_SHADOWDB_PROVIDERS = {
    "ollama": "ollama", "openai": "openai", "openai-compatible": "openai-compatible", "openai_compatible":
    "openai-compatible", "openai-compatible-api": "openai-compatible", "voyage": "voyage", "gemini": "gemini",
    "google": "gemini", "command": "command", "external": "command", "custom": "command",
}
# The part of the path ShadowDB appends to a provider's baseUrl that clawrecall's base_url includes.
_SHADOWDB_API_PATHS = {"openai": "/v1", "openai-compatible": "/v1", "voyage": "/v1", "gemini": "/v1beta"}


def _shadowdb_provider(source: Mapping[str, Any]) -> str:
    value = lookup(source, "embedding.provider")
    return _SHADOWDB_PROVIDERS.get(value.strip().lower(), "ollama") if isinstance(value, str) else "ollama"


def _shadowdb_base_url(value: Any, source: Mapping[str, Any]) -> Any:
    provider = _shadowdb_provider(source)
    if provider in ("ollama", "command"):
        return Dropped(f"not read by the {provider} provider (ollama's address is embedding.ollamaUrl)")
    suffix = _SHADOWDB_API_PATHS[provider]
    base = str(value).rstrip("/")
    return base if base.endswith(suffix) else base + suffix


def _shadowdb_ollama_url(value: Any, source: Mapping[str, Any]) -> Any:
    if _shadowdb_provider(source) != "ollama":
        return Dropped("read only by the ollama provider, which this config does not use")
    return value


def _shadowdb_command(value: Any, source: Mapping[str, Any]) -> Any:
    args = lookup(source, "embedding.commandArgs") or []
    return [value, *args] if isinstance(args, list) else Dropped("embedding.commandArgs is not a list")


def _purge_after(value: Any, source: Mapping[str, Any]) -> Any:
    if value == 0:
        return Partial(365_000, "0 (never purge) has no equivalent; the longest period, 365000 days, is written")
    return value


def _rerank_enabled(value: Any, source: Mapping[str, Any]) -> Any:
    if value is False:
        return Several({"retrieval.rerank.provider": "none"})
    base = str(lookup(source, "reranker.baseUrl") or "http://127.0.0.1:9000").rstrip("/")
    return Several({"retrieval.rerank.provider": "http", "retrieval.rerank.url": f"{base}/rerank"})


def _startup_rules(prefix: str) -> tuple[Rule, ...]:
    return (
        _to(f"{prefix}.enabled", "hooks.startup.enabled"),
        _to(f"{prefix}.mode", "hooks.startup.mode", "`always`, `first-run` and `digest` mean the same",
            _choice({"always": "always", "first-run": "first-run", "digest": "digest"}, "startup modes")),
        _to(f"{prefix}.maxChars", "hooks.startup.max_chars"),
        _to(f"{prefix}.maxCharsByModel", "hooks.startup.max_chars_by_model", "the same rule: the first fragment found "
            "in the model's name, ignoring case"),
        _to(f"{prefix}.cacheTtlMs", "hooks.startup.ttl_s", "milliseconds → seconds", _scaled(0.001)),
    )


SHADOWDB = System(
    "shadowdb", "ShadowDB", ("memory-shadowdb", "shadowdb"),
    (
        Rule("backend", "", "`postgres` needs nothing more; `sqlite` and `mysql` have no equivalent (their data: "
             "`clawrecall import --from shadowdb`, [importing.md](importing.md#shadowdb))", _shadowdb_backend),
        _to("connectionString", "db", "the same `postgresql://` URL with clawrecall's own database, `clawrecall`, "
            "in it (ShadowDB's holds ShadowDB's tables, whose names clawrecall's share)", _shadowdb_connection),
        _none("configPath", "the path of its ~/.shadowdb.json: translate that file too (`--from shadowdb`)"),
        _none("table", "clawrecall's table names are fixed"),
        _to("embedding.provider", "embedding.provider", "the same names (`google` → `gemini`, `external`/`custom` → "
            "`command`); left out, its default `ollama` is written", lambda value, source: _shadowdb_provider(source)),
        _to("embedding.apiKey", "embedding.api_key"),
        _to("embedding.model", "embedding.model"),
        _to("embedding.dimensions", "embedding.dimensions"),
        _to("embedding.ollamaUrl", "embedding.base_url", "with the ollama provider", _shadowdb_ollama_url),
        _to("embedding.baseUrl", "embedding.base_url", "ours includes the API's version path: `/v1` is appended for "
            "openai, openai-compatible and voyage, `/v1beta` for gemini, unless it is there", _shadowdb_base_url),
        _none("embedding.headers", "clawrecall sends no custom headers (the key goes in `embedding.api_key`)"),
        _none("embedding.voyageInputType", "clawrecall tells Voyage `query` or `document` per text, by its use"),
        _none("embedding.geminiTaskType", "clawrecall tells Gemini the task per text, by its use"),
        _to("embedding.command", "embedding.command", "with `embedding.commandArgs` appended: one argv list",
            _shadowdb_command),
        Rule("embedding.commandArgs", "embedding.command", "folded into `embedding.command`", lambda v, s: NOTHING),
        _to("embedding.commandTimeoutMs", "embedding.timeout_s", "milliseconds → seconds", _scaled(0.001)),
        _none("search.maxResults", "a search's `limit` (memory_search's `maxResults`) is the caller's; no config default"),
        _none("search.minScore", "a floor on RRF scores (0.005); clawrecall's `retrieval.min_score` is an estimated "
              "probability of relevance, another scale: keep its default 0.1"),
        _none("search.minVectorScore", "clawrecall has no cosine pre-filter; `retrieval.min_score` gates on the "
              "absolute relevance score"),
        Rule("search.vectorWeight", "retrieval.vector.weight", "with `retrieval.fusion = \"rrf\"`: ShadowDB fuses by "
             "reciprocal rank", lambda v, s: Several({"retrieval.vector.weight": v, "retrieval.fusion": "rrf"})),
        Rule("search.textWeight", "retrieval.bm25.weight", "with `retrieval.fusion = \"rrf\"`",
             lambda v, s: Several({"retrieval.bm25.weight": v, "retrieval.fusion": "rrf"})),
        Rule("search.recencyWeight", "retrieval.recency_weight", "reported too: ShadowDB ranks hits by age as one more "
             "RRF leg; clawrecall adds w·exp(−age/recency_half_life_days) to the fused score, the same role on "
             "another scale", lambda v, s: Partial(v, "an RRF leg there, an additive boost here: the same role, "
                                                  "another scale; check it with `search --explain`")),
        _none("search.maxChars", "clawrecall's tools return whole memories; hook budgets are `hooks.recall.*`"),
        _none("search.maxCharsByModel", "see search.maxChars"),
        _to("writes.enabled", "writes.enabled", "ShadowDB's gates its agent's write tools; ours every write (CLI, "
            "REST, hooks), and defaults to true"),
        Rule("writes.autoEmbed", "", "clawrecall embeds every memory as it is written: `true` needs nothing",
             _choice({True: NOTHING, False: Dropped("clawrecall embeds every memory as it is written")}, "values")),
        _to("writes.retention.purgeAfterDays", "writes.retention_days", "the same days; `0` (never) becomes 365000",
            _purge_after),
        Rule("reranker.enabled", "retrieval.rerank.provider", "`http` at `{baseUrl}/rerank` (the same request), "
             "`false` → `none`; a `reranker` section without it is enabled, as in ShadowDB", _rerank_enabled),
        Rule("reranker.baseUrl", "retrieval.rerank.url", "`{baseUrl}/rerank`, through reranker.enabled",
             lambda v, s: NOTHING),
        _to("reranker.timeoutMs", "retrieval.rerank.timeout_s", "milliseconds → seconds", _scaled(0.001)),
        _to("reranker.rerankTopK", "retrieval.rerank.top_k"),
        _to("reranker.model", "retrieval.rerank.model"),
        _none("reranker.minCandidates", "clawrecall reranks whatever the candidates are"),
        *_startup_rules("startup"),
        *_startup_rules("primer"),  # the name its code uses for the startup section
        # ~/.shadowdb.json, read when the plugin config names no connection
        _to("postgres.connection_string", "db", "as connectionString", lambda v, s: _own_database(v)),
        _to("postgres.host", "database.host"),
        _to("postgres.port", "database.port"),
        _to("postgres.user", "database.user"),
        _to("postgres.password", "database.password"),
        _none("postgres.database", _OWN_DATABASE.format(system="ShadowDB")),
        Rule("reinforce", "", "clawrecall always honours startup entries marked `reinforce`", lambda v, s: NOTHING),
    ),
    fills=(
        ("embedding.provider", lambda source: "ollama"),
        ("reranker.enabled", lambda source: True),
    ),
)


# -- memory-lancedb-pro ------------------------------------------------------------------------------
def _lancedb_provider(value: Any, source: Mapping[str, Any]) -> Any:
    if value == "azure-openai":
        return Dropped("clawrecall has no Azure OpenAI client (an Azure endpoint with an OpenAI-compatible "
                       "route works as `openai-compatible`)")
    if value not in (None, "openai-compatible"):
        return Dropped(f"{value!r} is not one of its providers")
    # no baseURL: its OpenAI client's default address, which is our `openai` provider
    return "openai-compatible" if lookup(source, "embedding.baseURL") else "openai"


def _api_key(value: Any, source: Mapping[str, Any]) -> Any:
    if isinstance(value, list):
        return Partial(value[0], "a list of keys for rotation; clawrecall uses one, the first") if value else Dropped("empty")
    return value


def _lancedb_rerank(value: Any, source: Mapping[str, Any]) -> Any:
    if value != "cross-encoder":
        return Several({"retrieval.rerank.provider": "none"})
    if not lookup(source, "retrieval.rerankApiKey") and not lookup(source, "retrieval.rerankEndpoint"):
        return Several({"retrieval.rerank.provider": "none"})  # it needs a key for its default (Jina) endpoint
    url = lookup(source, "retrieval.rerankEndpoint") or "https://api.jina.ai/v1/rerank"
    return Several({"retrieval.rerank.provider": "http", "retrieval.rerank.url": url,
                    "retrieval.rerank.model": lookup(source, "retrieval.rerankModel") or "jina-reranker-v3"})


def _lancedb_mode(value: Any, source: Mapping[str, Any]) -> Any:
    return _choice({"hybrid": NOTHING, "vector": Several({"retrieval.bm25.enabled": False, "retrieval.trigram.enabled":
                    False})}, "retrieval modes")(value, source)


def _recency_half_life(value: Any, source: Mapping[str, Any]) -> Any:
    return Several({"retrieval.recency_weight": 0.0}) if value == 0 else Several({"retrieval.recency_half_life_days": value})


def _recall_mode(value: Any, source: Mapping[str, Any]) -> Any:
    return _choice({"full": NOTHING, "off": Several({"hooks.recall.enabled": False}),
                    "summary": Dropped("clawrecall injects the memories themselves, within hooks.recall's budgets"),
                    "adaptive": Dropped("clawrecall always skips greetings and short prompts (hooks.recall.min_length); "
                                        "there is no other mode")}, "recall modes")(value, source)


def _agent_access(value: Any, source: Mapping[str, Any]) -> Any:
    """{agent: [scopes]} → the members of each shared scope (`write`, which reads too, as it could there)."""
    if not isinstance(value, Mapping):
        return Dropped("not an object of agent ids and their scopes")
    scopes: dict[str, dict[str, list[str]]] = {}
    left_out: list[str] = []
    for agent, names in value.items():
        for scope in names if isinstance(names, list) else []:
            if scope == f"agent:{agent}":
                continue  # an agent's own scope is its own here without a grant
            if scope.partition(":")[0] in ("global", "project", "custom"):
                scopes.setdefault(scope, {"write": []})["write"].append(f"agent:{agent}")
            else:
                left_out.append(f"{agent} → {scope}")
    ours = Several({"access.scopes": scopes}) if scopes else NOTHING
    if left_out:
        reason = f"another's user: or agent: scope is its owner's alone in clawrecall: {', '.join(left_out)}"
        return Partial(ours, reason) if scopes else Dropped(reason)
    return ours


_LLM_YET = ("clawrecall's own LLM extraction has no configuration yet; its rule-based capture is "
            "hooks.capture")

LANCEDB_PRO = System(
    "memory-lancedb-pro", "memory-lancedb-pro", ("memory-lancedb-pro",),
    (
        _to("embedding.provider", "embedding.provider", "`openai-compatible` (with no `baseURL`: `openai`, the address "
            "its client used); `azure-openai` has no equivalent", _lancedb_provider),
        _to("embedding.apiKey", "embedding.api_key", "a list (key rotation) gives its first key", _api_key),
        _to("embedding.model", "embedding.model"),
        _to("embedding.baseURL", "embedding.base_url"),
        _to("embedding.dimensions", "embedding.dimensions"),
        _none("embedding.omitDimensions", "clawrecall sends a size only to APIs that take one"),
        _none("embedding.taskQuery", "clawrecall tells providers that take one the task per text, by its use"),
        _none("embedding.taskPassage", "see embedding.taskQuery"),
        _none("embedding.normalized", "clawrecall normalises every vector itself"),
        _none("embedding.chunking", "a memory is embedded whole; long documents go in as files (`clawrecall files "
              "add`), which are chunked"),
        _none("embedding.apiVersion", "Azure OpenAI only"),
        _none("dbPath", "a LanceDB folder, which clawrecall cannot open; its store is `db` (by default memory.db "
              "in the data directory)"),
        _none("enableManagementTools", "clawrecall's management tools (memory_list, memory_stats, …) are always served"),
        _none("sessionStrategy", "no session summaries or reflections; the conversation itself is kept "
              "(`conversations.record`)"),
        _to("autoCapture", "hooks.capture.enabled"),
        _to("autoRecall", "hooks.recall.enabled", "its default is false, ours true: an explicit value is kept"),
        _to("autoRecallMinLength", "hooks.recall.min_length"),
        _to("autoRecallMinRepeated", "hooks.recall.min_repeat_turns"),
        _to("autoRecallMaxItems", "hooks.recall.max_items"),
        _to("autoRecallMaxChars", "hooks.recall.max_chars"),
        _to("autoRecallPerItemMaxChars", "hooks.recall.per_item_max_chars"),
        _none("maxRecallPerTurn", "hooks.recall.max_items is the one cap"),
        _to("recallMode", "hooks.recall.enabled", "`full` needs nothing, `off` → `false`; `summary` and `adaptive` "
            "have no equivalent", _recall_mode),
        _to("captureAssistant", "hooks.capture.capture_assistant"),
        _none("smartExtraction", _LLM_YET),
        _none("extractMinMessages", _LLM_YET),
        _none("extractMaxChars", _LLM_YET),
        _none("extractionThrottle.*", _LLM_YET),
        _none("admissionControl.*", _LLM_YET),
        _none("llm.*", _LLM_YET),
        _to("retrieval.mode", "retrieval.bm25.enabled", "`hybrid` needs nothing; `vector` turns the bm25 and trigram "
            "legs off", _lancedb_mode),
        _to("retrieval.vectorWeight", "retrieval.vector.weight", "both weigh min-max scaled leg scores"),
        _to("retrieval.bm25Weight", "retrieval.bm25.weight"),
        _none("retrieval.minScore", "a floor on its fused score; clawrecall's `retrieval.min_score` is an estimated "
              "probability of relevance, another scale: keep its default 0.1"),
        _none("retrieval.hardMinScore", "see retrieval.minScore"),
        _to("retrieval.rerank", "retrieval.rerank.provider", "`cross-encoder` with a key or an endpoint → `http` at "
            "`rerankEndpoint` (default Jina's) with `rerankModel`; otherwise `none`", _lancedb_rerank),
        _to("retrieval.rerankApiKey", "retrieval.rerank.api_key"),
        Rule("retrieval.rerankModel", "retrieval.rerank.model", "through retrieval.rerank", lambda v, s: NOTHING),
        Rule("retrieval.rerankEndpoint", "retrieval.rerank.url", "through retrieval.rerank", lambda v, s: NOTHING),
        _to("retrieval.rerankProvider", "", "`jina` and `siliconflow` speak the request clawrecall sends; the others "
            "have no equivalent", _choice({"jina": NOTHING, "siliconflow": NOTHING}, "rerank request shapes")),
        _to("retrieval.candidatePoolSize", "retrieval.candidates"),
        _to("retrieval.recencyHalfLifeDays", "retrieval.recency_half_life_days", "`0` (off) → "
            "`retrieval.recency_weight = 0`", _recency_half_life),
        _to("retrieval.recencyWeight", "retrieval.recency_weight", "the same additive boost"),
        _to("retrieval.filterNoise", "retrieval.noise_filter"),
        _to("retrieval.lengthNormAnchor", "retrieval.length_norm_anchor"),
        _to("retrieval.timeDecayHalfLifeDays", "retrieval.time_decay_half_life_days"),
        _none("retrieval.reinforcementFactor", "clawrecall does not count recalls, so nothing slows the decay"),
        _none("retrieval.maxHalfLifeMultiplier", "see retrieval.reinforcementFactor"),
        _none("decay.*", "no Weibull decay engine: time decay is retrieval.time_decay_half_life_days"),
        _none("tier.*", "no memory tiers"),
        _none("sessionMemory.*", "no session summaries; the conversation itself is kept (`conversations.record`)"),
        _none("memoryReflection.*", "no reflections (LLM session notes)"),
        _none("selfImprovement.*", "no self-improvement notes"),
        _none("scopes.default", "a write goes to the caller's own scope (user:, else agent:), else global; a "
              "`--scope` names another"),
        _none("scopes.definitions", "scopes need no declaring: a project: or custom: scope exists once written, and "
              "access.scopes says who shares it"),
        _to("scopes.agentAccess", "access.scopes", "each global, project: and custom: scope an agent may use lists "
            "`agent:<id>` as a `write` member (who reads too); an agent's own scope needs no grant", _agent_access),
        _none("mdMirror.*", "no Markdown mirror; `clawrecall export` writes JSONL"),
        _none("workspaceBoundary.*", "no workspace files"),
        _none("memoryCompaction.*", "no compaction: near-duplicates are refused at write (dedup.threshold)"),
        _none("sessionCompression.*", "no session compression"),
    ),
    fills=(
        ("embedding.provider", lambda source: "openai-compatible"),
        ("autoRecall", lambda source: False),  # off there by default, on here: an agent that never had it keeps it off
    ),
)


# -- nova-memory -------------------------------------------------------------------------------------
def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "postgres"


NOVA = System(
    "nova-memory", "nova-memory", (),
    (
        _to("host", "database.host"),
        _to("port", "database.port", "a number given as text is read as a number",
            lambda v, s: int(v) if isinstance(v, str) and v.isdigit() else v),
        _to("user", "database.user", "left out, the login name (as nova-memory does) is written"),
        _to("password", "database.password"),
        _none("database", _OWN_DATABASE.format(system="nova-memory")),
    ),
    fills=(("user", lambda source: _login()),),
    drop_nulls=True,
)


# -- memento-local -----------------------------------------------------------------------------------
def _memento_embedding(value: Any, source: Mapping[str, Any]) -> Any:
    if not isinstance(value, str) or not value.startswith("hf:"):
        return Dropped("a local GGUF file, which clawrecall cannot run: set embedding.model to a "
                       "sentence-transformers model")
    name = value[3:]
    for suffix in ("-gguf", "-GGUF"):
        if name.endswith(suffix):
            return Partial(Several({"embedding.provider": "local", "embedding.model": name[: -len(suffix)]}),
                           "the same model from its sentence-transformers weights, not the GGUF file")
    return Several({"embedding.provider": "local", "embedding.model": name})


def _visibility_rules(value: Any, source: Mapping[str, Any]) -> Any:
    """Their category → level rules. A rule names a configured category, so categories clawrecall lacks
    (memento-local's example has medical, credentials, operational) join `categories`: the model may then
    file facts under them, as memento-local's extractor does."""
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        return Dropped(f"{value!r} is not a map of category → level")
    extra = [k for k in value if k not in DEFAULT_CATEGORIES]
    if not extra:
        return value
    return Partial(Several({"extraction.visibility.rules": value, "categories": [*DEFAULT_CATEGORIES, *extra]}),
                   f"their categories {', '.join(extra)} join clawrecall's `categories`")


# OpenClaw's `provider/model` references → clawrecall's llm section (docs/llm.md): the providers it
# speaks to itself, and the OpenAI-compatible servers OpenClaw names by provider
_LLM_PROVIDERS: dict[str, dict[str, str]] = {
    "anthropic": {"llm.provider": "anthropic"},
    "openai": {"llm.provider": "openai"},
    "openrouter": {"llm.provider": "openai", "llm.base_url": "https://openrouter.ai/api/v1",
                   "llm.api_key_env": "OPENROUTER_API_KEY"},
    "ollama": {"llm.provider": "openai", "llm.base_url": "http://localhost:11434/v1"},
}


def _extraction_model(value: Any, source: Mapping[str, Any]) -> Any:
    """The LLM memento-local extracts with, as the `llm` section."""
    provider, _, model = str(value).partition("/")
    if provider not in _LLM_PROVIDERS or not model:
        return Dropped(f"{value!r}: not a `provider/model` clawrecall's llm section reaches "
                       f"({', '.join(_LLM_PROVIDERS)}); set llm.* by hand (docs/llm.md)")
    return Several({**_LLM_PROVIDERS[provider], "llm.model": model})

MEMENTO = System(
    "memento-local", "memento-local", ("memento-local", "memento", "openclaw-memento-local"),
    (
        _to("extractionModel", "llm.model", "`anthropic/<model>` → `llm.provider = \"anthropic\"` and `llm.model`; "
            "likewise `openai/`, and `openrouter/`, `ollama/` as `openai` at their addresses", _extraction_model),
        _to("embeddingModel", "embedding.model", "`hf:<repo>` → the `local` provider with that model (`-gguf` cut "
            "off: the same model's sentence-transformers weights)", _memento_embedding),
        _to("pauseTimeoutMs", "conversations.pause_minutes", "milliseconds → minutes", _scaled(1 / 60_000)),
        _to("maxBufferTurns", "conversations.max_turns"),
        _to("autoCapture", "conversations.record", "its capture is the conversation record"),
        _to("autoRecall", "hooks.recall.enabled"),
        _to("visibility.defaultLevel", "extraction.visibility.default"),
        _to("visibility.rules", "extraction.visibility.rules", "the rules of categories clawrecall has", _visibility_rules),
        _none("dataDir", "where it keeps its own SQLite file; clawrecall's store is `db` (or $CLAWRECALL_HOME)"),
        _to("extraction.autoExtract", "extraction.enabled", "extraction also needs the `llm` section (extractionModel)"),
        _to("extraction.minTurnsForExtraction", "extraction.min_turns"),
        _to("extraction.includeExistingFactsCount", "extraction.known_facts"),
        _to("extraction.maxExtractionsPerMinute", "llm.requests_per_minute", "a limit on every LLM request, not only "
            "extractions (one extraction is one request, two with its repair)"),
        _to("recall.maxFacts", "hooks.recall.max_items"),
        _to("recall.maxContextChars", "hooks.recall.max_chars"),
        _to("recall.minQueryLength", "hooks.recall.min_length"),
        _to("recall.crossAgentRecall", "access.agents.*.master", "every agent reads the other agents' shared "
            "memories (the master knowledge base), or none does; per agent: `access.agents.<id>.master`"),
    ),
)

SYSTEMS: dict[str, System] = {s.name: s for s in (PGVECTOR, SHADOWDB, LANCEDB_PRO, NOVA, MEMENTO)}


def owners(keys: Iterable[str]) -> list[str]:
    """The systems whose settings some of `keys` (dotted, refused by our config) are."""
    keys = list(keys)

    def theirs(key: str, rule: Rule) -> bool:
        return rule.matches(key) or rule.source.startswith(key + ".")

    return [s.name for s in SYSTEMS.values() if any(theirs(key, r) for key in keys for r in s.rules)]
