"""What the hook tests share: a caller as an agent runtime identifies it, chat messages, and writes held back."""

from __future__ import annotations

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
