"""What the hook tests share: a caller as an agent runtime identifies it, and chat messages."""

from __future__ import annotations

from clawrecall import Caller


def ctx(user_id="alice", agent_id="main", session_id="s1"):
    return Caller(user_id, agent_id, session_id)


def user(text):
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def assistant(text):
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}
