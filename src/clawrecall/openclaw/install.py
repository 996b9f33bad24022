"""Write the clawrecall plugin's entries into a user's `openclaw.json`, keeping everything else as it was.

`openclaw.json` is JSON5, usually hand-edited, with comments worth keeping. The file is parsed
with json-five, whose model knows where every value starts and ends, and each change is a small
splice of the original text at those positions: a new key before the closing brace of the object
it belongs to, a changed value in place, a new list element after the last one. Comments,
key order, quoting and blank lines elsewhere stay byte for byte.

OpenClaw loads a plugin of kind "memory" only while it holds the memory slot, so both modes put
clawrecall in `plugins.slots.memory`; they differ in memory-core:
- `beside` (default): memory-core stays enabled and keeps running beside clawrecall (its
  Markdown memory_search/memory_get and dreaming);
- `slot`: memory-core is disabled and clawrecall serves memory_search/memory_get itself.

OpenClaw warns on every start that it "can't verify where this plugin came from" unless the plugin
is named in `plugins.allow` or OpenClaw holds an install record for its folder. `plugins.allow` is
an exclusive allowlist (every plugin it does not name stops loading, bundled ones included: the
model providers, memory-core, the browser), so it is extended only when the user already keeps
one; otherwise `record_provenance` has OpenClaw record the folder the way its docs say for a
local plugin, `openclaw plugins install --link`.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Mapping

from ..errors import ValidationError

PLUGIN_ID = "clawrecall"
Mode = Literal["beside", "slot"]
MODES: tuple[Mode, ...] = ("beside", "slot")
INDENT = 2


@dataclass(frozen=True)
class Change:
    path: str  # dotted, as OpenClaw's docs name config keys
    old: Any
    new: Any
    append: bool = False  # `new` was added to the list at `path`

    def shown(self) -> "Change":
        """This change as it may be printed: a secret's values masked."""
        if self.path.rsplit(".", 1)[-1] not in SECRET_KEYS:
            return self
        return Change(self.path, mask(self.old), mask(self.new), self.append)

    def describe(self) -> str:
        c = self.shown()
        if c.append:
            return f"{c.path}: added {json.dumps(c.new, ensure_ascii=False)}"
        if c.old is None:
            return f"{c.path}: set to {json.dumps(c.new, ensure_ascii=False)}"
        return f"{c.path}: {json.dumps(c.old, ensure_ascii=False)} -> {json.dumps(c.new, ensure_ascii=False)}"


SECRET_KEYS = frozenset({"token"})


def mask(value: Any) -> Any:
    """A secret as output may show it: clawrecall's token prefix and the last 4 characters, enough to
    tell tokens apart; a short value not even that."""
    if not isinstance(value, str) or not value:
        return value
    if len(value) < 16:
        return "(hidden)"
    return f"{'cr_' if value.startswith('cr_') else ''}…{value[-4:]}"


def planned_settings(
    data: dict[str, Any], mode: Mode, plugin_dir: Path, plugin_config: dict[str, Any]
) -> tuple[list[tuple[tuple[str, ...], Any]], list[tuple[tuple[str | int, ...], str]]]:
    """(values to set, list elements to add) for this config and mode."""
    if mode not in MODES:
        raise ValidationError(f"mode is beside or slot, not {mode!r}")
    entry = ("plugins", "entries", PLUGIN_ID)
    sets: list[tuple[tuple[str, ...], Any]] = [
        (("plugins", "slots", "memory"), PLUGIN_ID),
        ((*entry, "enabled"), True),
        ((*entry, "hooks", "allowConversationAccess"), True),
        ((*entry, "config", "mode"), mode),
        *(((*entry, "config", key), value) for key, value in plugin_config.items()),
        (("plugins", "entries", "memory-core", "enabled"), mode == "beside"),
    ]
    adds: list[tuple[tuple[str | int, ...], str]] = [(("plugins", "load", "paths"), str(plugin_dir))]
    plugins = given if isinstance(given := data.get("plugins"), dict) else {}
    if plugins.get("allow"):  # an allowlist loads only what it names
        adds.append((("plugins", "allow"), PLUGIN_ID))
    adds += _tool_allowance(data, ())
    # every agent of the roster: its own tool policy may hide the plugin's tools from it
    agents = given.get("list") if isinstance(given := data.get("agents"), dict) else None
    for n, agent in enumerate(agents if isinstance(agents, list) else []):
        if isinstance(agent, dict):
            adds += _tool_allowance(agent, ("agents", "list", n))
    return sets, adds


def roster(config_path: Path) -> list[str]:
    """The ids of the agents `openclaw.json` lists (`agents.list[].id`), else OpenClaw's default `main`:
    each recalls and writes as itself (the plugin sends its `agentId`; docs/agents.md)."""
    path = Path(config_path)
    data = Json5Document(path.read_text(encoding="utf-8"), str(path)).data if path.exists() else {}
    agents = given.get("list") if isinstance(given := data.get("agents"), dict) else None
    ids = [a["id"] for a in agents if isinstance(a, dict) and isinstance(a.get("id"), str)] if isinstance(agents, list) else []
    return ids or ["main"]


def _tool_allowance(holder: dict[str, Any], at: tuple[str | int, ...]) -> list[tuple[tuple[str | int, ...], str]]:
    """What lets the plugin's tools through a tool policy (`tools` of the config or of one agent): an
    allowlist names the plugin; the minimal profile, which hides plugin tools, gets `alsoAllow`
    (OpenClaw refuses a policy with both)."""
    tools = given if isinstance(given := holder.get("tools"), dict) else {}
    if tools.get("allow"):
        return [((*at, "tools", "allow"), PLUGIN_ID)]
    if tools.get("profile") == "minimal":
        return [((*at, "tools", "alsoAllow"), PLUGIN_ID)]
    return []


def install_entries(
    config_path: Path, *, mode: Mode = "beside", plugin_dir: Path, plugin_config: dict[str, Any] | None = None,
    dry_run: bool = False,
) -> list[Change]:
    """Apply the plugin's settings to `config_path` (created if missing); the changes, in order.

    With `dry_run` nothing is written. Running it again changes nothing.
    """
    path = Path(config_path)
    text = path.read_text(encoding="utf-8") if path.exists() else "{\n}\n"
    document = Json5Document(text, str(path))
    sets, adds = planned_settings(document.data, mode, Path(plugin_dir).resolve(), plugin_config or {})
    changes = [c for c in (document.set(keys, value) for keys, value in sets) if c]
    changes += [c for c in (document.append(keys, value) for keys, value in adds) if c]
    if changes and not dry_run:
        write_atomically(path, document.text)
    return changes


@dataclass(frozen=True)
class Provenance:
    """Whether OpenClaw now holds an install record for the plugin's folder, the command that made it (or
    that the user should run) and what OpenClaw said."""

    recorded: bool
    command: str
    detail: str


def provenance_command(plugin_dir: Path, openclaw: str = "openclaw") -> list[str]:
    """OpenClaw's documented install of a local plugin folder, without copying it or asking (the consent
    is the user's running of `clawrecall openclaw install`)."""
    return [openclaw, "plugins", "install", "--link", str(Path(plugin_dir).resolve()), "--force", "--accept-capabilities"]


def record_provenance(
    config_path: Path, plugin_dir: Path, openclaw: str | None, *, env: Mapping[str, str] | None = None,
    timeout_s: float = 300,
) -> Provenance:
    """Have OpenClaw record where the plugin comes from, so it loads without the provenance warning.

    OpenClaw keeps the record in its state folder (`$OPENCLAW_STATE_DIR`, else ~/.openclaw) and also
    rewrites the config it is given as plain JSON, dropping comments: it is given a private copy of
    `config_path` (already holding our entries), and the user's file stays as `install_entries` left it.
    `env`: OpenClaw's environment (default: this process's)."""
    shown = shlex.join(provenance_command(plugin_dir))
    if openclaw is None:
        return Provenance(False, shown, "the openclaw command was not found: run this command to record it")
    with tempfile.TemporaryDirectory(prefix="clawrecall-openclaw-") as folder:  # 0700: the copy holds tokens
        copy = Path(folder) / "openclaw.json"
        shutil.copyfile(config_path, copy)
        try:
            done = subprocess.run(
                provenance_command(plugin_dir, openclaw), env={**(os.environ if env is None else env), "OPENCLAW_CONFIG_PATH": str(copy)},
                capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Provenance(False, shown, f"{openclaw} could not run: {exc}")
    said = (done.stdout + done.stderr).strip().splitlines()
    if done.returncode != 0:
        return Provenance(False, shown, f"{openclaw} failed (exit {done.returncode}): {' '.join(said[-3:])}")
    return Provenance(True, shown, said[-1] if said else "recorded")


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` by `text` through a synced temporary file with the original's permissions (0600 for a new file):
    openclaw.json holds tokens, and a 0600 file must not come back 0644."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o600
    tmp = path.with_name(path.name + ".clawrecall-tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), mode)  # the umask narrowed os.open's mode; an existing tmp kept its own
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class Json5Document:
    """A JSON5 text changed by splices at the positions json-five reports; re-parsed after every change."""

    def __init__(self, text: str, name: str):
        self.text = text
        self.name = name
        self._parse()

    def _parse(self) -> None:
        import json5
        from json5.loader import ModelLoader

        try:
            self.data = json5.loads(self.text)
            self.model = json5.loads(self.text, loader=ModelLoader()).value
        except Exception as exc:  # json-five raises its own error types
            raise ValidationError(f"{self.name} is not valid JSON5: {exc}") from None
        if not isinstance(self.data, dict):
            raise ValidationError(f"{self.name} must hold a JSON object")

    # -- lookups -----------------------------------------------------------------------------
    def _offset(self, line: int, col: int) -> int:
        start = 0
        for _ in range(line - 1):
            start = self.text.index("\n", start) + 1
        return start + col

    def _start(self, node: Any) -> int:
        return self._offset(node.lineno, node.col_offset)

    def _end(self, node: Any) -> int:
        return self._offset(node.end_lineno, node.end_col_offset)

    @staticmethod
    def _member(obj: Any, key: str) -> Any:
        for pair in obj.key_value_pairs:
            name = getattr(pair.key, "name", None)
            if name is None:
                name = getattr(pair.key, "characters", None)
            if name == key:
                return pair.value
        return None

    def _walk(self, keys: tuple[str | int, ...]) -> tuple[Any, int, Any]:
        """(deepest object node on the way, how many keys it covers, the node at the full path or None);
        an int key is a list's index (`agents.list.1`)."""
        node, value = self.model, self.data
        for depth, key in enumerate(keys):
            if isinstance(key, int):
                child = node.values[key] if type(node).__name__ == "JSONArray" and key < len(node.values) else None
            else:
                child = self._member(node, key) if type(node).__name__ == "JSONObject" else None
            if child is None:
                return node, depth, None
            if not isinstance(value[key], (dict, list)) and depth < len(keys) - 1:
                raise ValidationError(f"{self.name}: {_dotted(keys[: depth + 1])} is not an object")
            node, value = child, value[key]
        return node, len(keys), node

    def _value(self, keys: tuple[str | int, ...]) -> Any:
        value: Any = self.data
        for key in keys:
            if isinstance(key, int):
                value = value[key] if isinstance(value, list) and key < len(value) else None
            else:
                value = value.get(key) if isinstance(value, dict) else None
        return value

    def _indent_of(self, offset: int) -> str:
        line_start = self.text.rfind("\n", 0, offset) + 1
        line = self.text[line_start:]
        return line[: len(line) - len(line.lstrip(" \t"))]

    def _splice(self, at: int, until: int, new: str) -> None:
        self.text = self.text[:at] + new + self.text[until:]
        self._parse()

    # -- edits -------------------------------------------------------------------------------
    def set(self, keys: tuple[str | int, ...], value: Any) -> Change | None:
        old = self._value(keys)
        if old == value and type(old) is type(value):
            return None
        parent, depth, node = self._walk(keys)
        dotted = _dotted(keys)
        if node is not None:
            if type(node).__name__ in ("JSONObject", "JSONArray"):
                raise ValidationError(f"{self.name}: {dotted} is an object or list, not a value")
            self._splice(self._start(node), self._end(node), json.dumps(value))
            return Change(dotted, old, value)
        nested: Any = value
        for key in reversed(keys[depth + 1:]):
            nested = {key: nested}
        self._insert_member(parent, keys[depth], nested)
        return Change(dotted, None, value)

    def append(self, keys: tuple[str | int, ...], item: str) -> Change | None:
        current = self._value(keys)
        if isinstance(current, list) and item in current:
            return None
        parent, depth, node = self._walk(keys)
        dotted = _dotted(keys)
        if node is None:
            nested: Any = [item]
            for key in reversed(keys[depth + 1:]):
                nested = {key: nested}
            self._insert_member(parent, keys[depth], nested)
        elif type(node).__name__ != "JSONArray":
            raise ValidationError(f"{self.name}: {dotted} is not a list")
        elif node.values:
            at = self._end(node.values[-1])
            if node.trailing_comma:  # keep the list's trailing-comma style
                at = self.text.index(",", at) + 1
                self._splice(at, at, f" {json.dumps(item)},")
            else:
                self._splice(at, at, f", {json.dumps(item)}")
        else:
            close = self._end(node) - 1
            self._splice(close, close, json.dumps(item))
        return Change(dotted, None, item, append=True)

    def _insert_member(self, obj: Any, key: str | int, value: Any) -> None:
        """Add `key: value` as the last member of `obj`, in the object's own layout."""
        if isinstance(key, int):  # the list changed under the edit: an index is never added
            raise ValidationError(f"{self.name}: no item {key} where one was read")
        close = self._end(obj) - 1  # the closing brace
        pairs = obj.key_value_pairs
        closing_indent = self._indent_of(close)
        on_own_line = self.text[self.text.rfind("\n", 0, close) + 1: close].strip() == ""
        if pairs:
            member_indent = self._indent_of(self._start(pairs[0].key))
            multiline = self.text.rfind("\n", 0, self._start(pairs[0].key)) > self._start(obj)
        else:
            member_indent, multiline = closing_indent + " " * INDENT, on_own_line
        rendered = _render(value, member_indent) if multiline else json.dumps(value)
        member = f"{json.dumps(key)}: {rendered}"
        comma = "," if obj.trailing_comma else ""
        if pairs and not obj.trailing_comma:
            last_end = self._end(pairs[-1].value)
            self._splice(last_end, last_end, ",")
            close += 1
        if multiline and on_own_line:
            line_start = self.text.rfind("\n", 0, close) + 1
            self._splice(line_start, line_start, f"{member_indent}{member}{comma}\n")
        elif multiline:
            self._splice(close, close, f"\n{member_indent}{member}{comma}\n{closing_indent}")
        else:
            self._splice(close, close, f"{' ' if pairs else ''}{member}{comma}{' ' if pairs else ''}")


def _dotted(keys: tuple[str | int, ...]) -> str:
    return ".".join(map(str, keys))


def _render(value: Any, indent: str) -> str:
    """JSON for a value placed at `indent`: nested lines indented under it."""
    return json.dumps(value, indent=INDENT, ensure_ascii=False).replace("\n", "\n" + indent)
