"""What the hook tests share: a caller as an agent runtime identifies it, chat messages, and writes held back."""

from __future__ import annotations

import re
import threading

from clawrecall import Caller, Memory


def ctx(user_id="alice", agent_id="main", session_id="s1"):
    return Caller(user_id, agent_id, session_id)


def user(text):
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def assistant(text):
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def slow_adds(mem: Memory, gate: threading.Event) -> None:
    """Make this store's writes wait for `gate` (at most 10 s; our own object, wrapped)."""
    real = mem.add
    mem.add = lambda *a, **k: (gate.wait(10), real(*a, **k))[1]


_HEADER = re.compile(r"^\[UNTRUSTED DATA ([0-9a-f]{16}) — [^\n]* the code \1; [^\n]*\]$", re.MULTILINE)


def untrusted_parts(text):
    """(what comes before, what the one untrusted-data block holds, what comes after). The block starts at a
    header that states its code and ends only at the end marker with that code, found nowhere else."""
    [header] = _HEADER.finditer(text)
    nonce = header.group(1)
    end = f"\n[END UNTRUSTED DATA {nonce}]"
    assert text.count(nonce) == 3 and text.count(end) == 1, text
    stop = text.index(end)
    return text[: header.start()], text[header.end() + 1 : stop], text[stop + len(end) :]
