"""What the hook tests share: a caller context as an agent runtime passes it, and chat messages."""

from __future__ import annotations

from types import SimpleNamespace


def ctx(user_id="alice", agent_id="main", session_id="s1"):
    return SimpleNamespace(user_id=user_id, agent_id=agent_id, session_id=session_id)


def user(text):
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def assistant(text):
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}
