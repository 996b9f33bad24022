"""The configuration of the systems clawrecall users come from, translated into clawrecall's.

One table per system (`importers.systems.SYSTEMS`), one rule per key of theirs: the key of ours it
becomes and how its value changes (milliseconds to seconds, a connection string to `db`, `e5-local`
to `e5`), or why it has none. `clawrecall config import FILE --from SYSTEM` runs it; docs/configuration.md
shows the same tables, and a test keeps the two equal.

Why a translation and not their keys as aliases in `Config`: a translated file is explicit (the
user sees, once, what each old setting became and which ones have no equivalent, instead of a
config that silently means something else), the one config model keeps one name per setting
(five systems' spellings in it would make every message, doc and `CLAWRECALL_*` variable
ambiguous), and values that need converting (units, scales, provider names, defaults that
differ) are converted once, where the reason can be written down.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from pydantic import ValidationError as PydanticValidationError

from ..config import Config, substitute_env, toml_value
from ..errors import ConfigError, ValidationError, pydantic_message
from .systems import NOTHING, SYSTEMS, Dropped, Partial, Several, System, lookup


@dataclass
class Untranslated:
    key: str
    reason: str


@dataclass
class Translation:
    system: str
    found_at: str  # where in the file their config was ("" for the whole file)
    config: dict[str, Any]
    untranslated: list[Untranslated] = field(default_factory=list)
    filled: list[str] = field(default_factory=list)  # their keys given their default, which differs from ours
    translated: list[str] = field(default_factory=list)
    origins: dict[str, str] = field(default_factory=dict, repr=False)  # our key -> their key that set it

    def as_dict(self) -> dict[str, Any]:
        return {
            "system": self.system, "found_at": self.found_at or None, "config": self.config,
            "translated": self.translated, "filled_with_their_defaults": self.filled,
            "untranslated": [{"key": u.key, "reason": u.reason} for u in self.untranslated],
        }

    def toml(self) -> str:
        """Our config as TOML, headed by comments naming what was not translated (a file that explains itself)."""
        lines = [f"# Translated by `clawrecall config import` from {SYSTEMS[self.system].title}'s configuration."]
        if self.filled:
            lines.append(f"# Left out there, so given {SYSTEMS[self.system].title}'s default: {', '.join(self.filled)}.")
        if self.untranslated:
            lines.append("# Not translated, or not quite:")
            lines += [f"#   {u.key}: {u.reason}" for u in self.untranslated]
        body = dumps_toml(self.config)
        return "\n".join(lines) + "\n" + (f"\n{body}" if body else "")


def dumps_toml(data: Mapping[str, Any]) -> str:
    """A nested dict as TOML: each table's plain values under its `[header]`, then its nested tables."""
    lines: list[str] = []

    def table(node: Mapping[str, Any], path: list[str]) -> None:
        plain = [(k, v) for k, v in node.items() if not isinstance(v, Mapping)]
        if path and plain:
            lines.extend([""] if lines else [])
            lines.append(f"[{'.'.join(map(_toml_key, path))}]")
        lines.extend(f"{_toml_key(k)} = {toml_value(v)}" for k, v in plain)
        for key, value in node.items():
            if isinstance(value, Mapping):
                table(value, [*path, key])

    table(data, [])
    return "\n".join(lines) + "\n" if lines else ""


def _toml_key(key: str) -> str:
    return key if key and all(c.isalnum() or c in "_-" for c in key) and key.isascii() else json.dumps(key)


# -- reading their file and translating it -----------------------------------------------------------
def read_source(path: Path) -> Any:
    """Their file: JSON5 (OpenClaw's openclaw.json is JSON5; plain JSON is JSON5 too)."""
    import json5

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValidationError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return json5.loads(text)
    except Exception as exc:  # json-five raises its own error types
        try:  # json-five reads the bare key `e5Endpoint` as a number's exponent: quote bare keys, try again
            return json5.loads(quote_bare_keys(text))
        except Exception:
            raise ValidationError(f"{path} is not valid JSON or JSON5: {exc}") from None


def quote_bare_keys(text: str) -> str:
    """JSON5 text with every unquoted object key quoted (strings and comments left as they are)."""
    out: list[str] = []
    i, n, last = 0, len(text), ""  # last: the previous character outside strings, comments and spaces
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i, last = j + 1, c
        elif text.startswith("//", i) or text.startswith("/*", i):
            j = text.find("\n" if c == "/" and text[i + 1] == "/" else "*/", i + 2)
            j = n if j < 0 else j + (1 if text[i + 1] == "/" else 2)
            out.append(text[i:j])
            i = j
        elif (c.isalpha() or c in "_$") and last in "{,":
            j = i
            while j < n and (text[j].isalnum() or text[j] in "_$"):
                j += 1
            k = j
            while k < n and text[k] in " \t\r\n":
                k += 1
            out.append(f'"{text[i:j]}"' if k < n and text[k] == ":" else text[i:j])
            i, last = j, text[j - 1]
        else:
            out.append(c)
            if not c.isspace():
                last = c
            i += 1
    return "".join(out)


def locate(data: Any, system: System, name: str = "the file") -> tuple[dict[str, Any], str]:
    """Their config inside `data`: an openclaw.json's `plugins.entries.<id>.config`, a plugin entry
    (`{enabled, config}`), or the config object itself."""
    if not isinstance(data, dict):
        raise ValidationError(f"{name} must hold a JSON object")
    entries = lookup(data, "plugins.entries")
    if isinstance(entries, dict):
        for plugin_id in system.plugin_ids:
            if plugin_id in entries:
                entry = entries[plugin_id] or {}
                config = entry.get("config", {}) if isinstance(entry, dict) else None
                if not isinstance(config, dict):
                    raise ValidationError(f"plugins.entries.{plugin_id}.config in {name} is not an object")
                return config, f"plugins.entries.{plugin_id}.config"
        wanted = " or ".join(system.plugin_ids) or "(none: it is not an OpenClaw plugin)"
        raise ValidationError(f"{name} is an OpenClaw config without a {system.title} entry: plugins.entries has "
                              f"{', '.join(entries) or 'nothing'}, {system.title}'s would be {wanted}")
    if "config" in data and isinstance(data["config"], dict) and set(data) <= {"enabled", "config", "hooks"}:
        return data["config"], "config"
    return data, ""


def translate(data: Mapping[str, Any], system_name: str, *, found_at: str = "") -> Translation:
    """Their config (the plugin's config object) → ours, checked to load; what has no equivalent, listed."""
    system = SYSTEMS[system_name]
    source = _without_nulls(data) if system.drop_nulls else copy.deepcopy(dict(data))  # fills write into it
    result = Translation(system.name, found_at, {})
    for key, fill in system.fills:
        section, _, leaf = key.rpartition(".")
        parent = lookup(source, section) if section else source
        if isinstance(parent, dict) and leaf not in parent and (value := fill(source)) is not None:
            parent[leaf] = value
            result.filled.append(key)
    for path, value in _leaves(source, system):
        rule = next((r for r in system.rules if r.matches(path)), None)
        if rule is None:
            result.untranslated.append(Untranslated(path, f"not a {system.title} setting clawrecall knows (a typo, "
                                                          "or a newer version's)"))
            continue
        _apply(result, path, rule.apply(value, source))
    _check(result)
    return result


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


def _leaves(source: Mapping[str, Any], system: System, prefix: str = "") -> list[tuple[str, Any]]:
    """(dotted key, value) for each setting: a section a rule covers whole (`decay.*`, a map) is one setting."""
    out: list[tuple[str, Any]] = []
    for key, value in source.items():
        path = f"{prefix}{key}"
        whole = any(r.source == path or (r.source.endswith(".*") and r.matches(path)) for r in system.rules)
        if isinstance(value, dict) and not whole:
            out += _leaves(value, system, path + ".")  # an empty section sets nothing
        else:
            out.append((path, value))
    return out


def _apply(result: Translation, path: str, ours: Any) -> None:
    if isinstance(ours, Partial):
        result.untranslated.append(Untranslated(path, f"translated, but: {ours.reason}"))
        ours = ours.value
    if isinstance(ours, Dropped):
        result.untranslated.append(Untranslated(path, ours.reason))
        return
    result.translated.append(path)
    if ours is NOTHING:
        return
    rule_target = next(r.target for r in SYSTEMS[result.system].rules if r.matches(path))
    values = ours.values if isinstance(ours, Several) else {rule_target: ours}
    for target, value in values.items():
        _set(result.config, target, value)
        result.origins[target] = path


def _set(config: dict[str, Any], target: str, value: Any) -> None:
    node = config
    *parents, leaf = target.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    if isinstance(value, dict) and isinstance(node.get(leaf), dict):
        node[leaf] = {**node[leaf], **value}
    else:
        node[leaf] = value


class _AnyVariable(dict):
    """The environment for checking a translation: a `${VAR}` it keeps is the user's to set later."""

    def __contains__(self, name: object) -> bool:
        return True

    def __missing__(self, name: str) -> str:
        return os.environ.get(name, "1")


def _check(result: Translation) -> None:
    """Validate the translation as `load_config` would; a value ours refuses (out of range, say) moves to
    the untranslated list with the reason, so what is written always loads."""
    while True:
        try:
            Config.model_validate(substitute_env(result.config, _AnyVariable()))
            return
        except PydanticValidationError as exc:
            error = exc.errors()[0]
            loc = [str(p) for p in error["loc"]]
            if not loc or not _pop(result.config, loc):
                raise ConfigError(f"the translation does not load: {pydantic_message(exc)}") from None
            ours = ".".join(loc)
            theirs = max((t for t in result.origins if ours == t or ours.startswith(t + ".") or t.startswith(ours + ".")),
                         key=len, default=None)
            key = result.origins.get(theirs, ours) if theirs else ours
            if key in result.translated:
                result.translated.remove(key)
            result.untranslated.append(Untranslated(key, f"clawrecall refuses the value for {ours}: {error['msg']}"))


def _pop(config: dict[str, Any], loc: list[str]) -> bool:
    """Remove the value at the deepest key of `loc` that exists (and the tables it leaves empty)."""
    for depth in range(len(loc), 0, -1):
        node: Any = config
        trail = []
        for part in loc[: depth - 1]:
            if not isinstance(node, dict) or part not in node:
                break
            trail.append((node, part))
            node = node[part]
        else:
            if isinstance(node, dict) and loc[depth - 1] in node:
                del node[loc[depth - 1]]
                for parent, key in reversed(trail):
                    if not parent[key]:
                        del parent[key]
                return True
    return False


def import_file(path: Path, system_name: str) -> Translation:
    """Read their file, find their config in it, translate it."""
    if system_name not in SYSTEMS:
        raise ValidationError(f"unknown system {system_name!r} (choose one of: {', '.join(SYSTEMS)})")
    config, found_at = locate(read_source(path), SYSTEMS[system_name], str(path))
    return translate(config, system_name, found_at=found_at)


def markdown_table(system_name: str) -> str:
    """The system's rules as the table docs/configuration.md shows."""
    rows = ["| their key | clawrecall | how |", "|---|---|---|"]
    for rule in SYSTEMS[system_name].rules:
        target = f"`{rule.target}`" if rule.target else "—"
        rows.append(f"| `{rule.source}` | {target} | {rule.note} |")
    return "\n".join(rows)
