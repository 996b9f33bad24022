"""The record holds each message once, whatever OpenClaw sends again.

The fixtures in tests/fixtures/openclaw are the `agent_end` bodies the plugin sent `clawrecall serve`
in real OpenClaw turns (tests/fixtures/openclaw/capture.py made them): every turn carries the
session's transcript again, and the user's message of the running turn is stamped seconds later
than the same message in every later turn's transcript.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote

import pytest

from clawrecall import Memory
from clawrecall.hooks.capture import agent_end
from clawrecall.scopes import Caller

FIXTURES = sorted((Path(__file__).parent / "fixtures" / "openclaw").glob("*.jsonl"))
T0 = 1_700_000_000_000  # ms, in the past: a stamp later than now is stored as now


def _requests(fixture: Path) -> list[tuple[Caller, dict]]:
    out = []
    for line in fixture.read_text().splitlines():
        r = json.loads(line)
        h = {k: unquote(v) for k, v in r["headers"].items()}
        out.append((Caller(h["x-clawrecall-user"], h["x-clawrecall-agent"], h["x-clawrecall-session"]), r["body"]))
    return out


def _text(message: dict) -> str:
    return "\n".join(p.get("text") or p.get("thinking") or p.get("name", "") for p in message["content"])


def _said(requests: list[tuple[Caller, dict]]) -> dict[str, list[tuple[str, str]]]:
    """Each session's messages as said: the scripted prompts are all different, so a user message is its
    words; any other message is its words and its stamp (the same words twice are two replies)."""
    said: dict[str, dict[tuple, tuple[str, str]]] = {}
    for caller, body in requests:
        seen = said.setdefault(caller.session_id, {})
        for m in body["messages"]:
            if m["role"] == "user" and _text(m).startswith("/"):
                continue  # a command (/compact) is OpenClaw's, not a message of the conversation
            key = (m["role"], _text(m)) if m["role"] == "user" else (m["role"], _text(m), m["timestamp"])
            seen.setdefault(key, (m["role"], _text(m)))
    return {s: list(v.values()) for s, v in said.items()}


def _open(db_target: str) -> Memory:
    return Memory.open(db_target, hooks={"capture": {"enabled": False}})


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.stem for f in FIXTURES])
def test_real_openclaw_transcripts_are_recorded_once_each_message(db_target, fixture):
    requests = _requests(fixture)
    assert len(requests) >= 5 and any(len(b["messages"]) > 2 for _, b in requests)
    with _open(db_target) as mem:
        for caller, body in requests:
            agent_end(mem, body, caller)
        for session, said in _said(requests).items():
            reader = Caller("alice", "main")
            record = [(m.role, m.content) for m in mem.conversations.show(session, caller=reader)]
            users = [text for role, text in record if role == "user"]
            assert sorted(users) == sorted({t for r, t in said if r == "user"}), record  # each once
            assert len(record) == len(said), record
        # the whole capture sent again (a gateway restarted: the plugin forgot what was acknowledged)
        again = sum(agent_end(mem, body, caller)["recorded"] for caller, body in requests)
        assert again == 0


def _turn(*messages: tuple[str, str, int]) -> dict:
    return {"messages": [{"role": r, "content": [{"type": "text", "text": t}], "timestamp": T0 + at}
                         for r, t, at in messages]}


def test_words_said_again_are_a_new_message_and_a_restamped_copy_is_not(db_target):
    alice = Caller("alice", "main", "chat")
    with _open(db_target) as mem:
        # turn 1 as the running turn sends it (its prompt stamped at the model call, 4 s after the turn began)
        assert agent_end(mem, _turn(("user", "yes", 4_000), ("assistant", "Shall I book it?", 4_100)), alice)["recorded"] == 2
        # turn 2: turn 1 from the session file (the prompt stamped when the turn began), then "yes" again
        turn2 = _turn(("user", "yes", 0), ("assistant", "Shall I book it?", 4_100),
                      ("user", "yes", 60_000), ("assistant", "Booked.", 60_100))
        assert agent_end(mem, turn2, alice)["recorded"] == 2
        # turn 3 replays both; a client logging turn by turn says "yes" a third time, stamped later
        turn3 = _turn(("user", "yes", 0), ("assistant", "Shall I book it?", 4_100),
                      ("user", "yes", 56_000), ("assistant", "Booked.", 60_100))
        assert agent_end(mem, turn3, alice)["recorded"] == 0
        assert agent_end(mem, _turn(("user", "yes", 90_000)), alice)["recorded"] == 1
        record = [(m.role, m.content) for m in mem.conversations.show("chat", caller=alice)]
        assert record == [("user", "yes"), ("assistant", "Shall I book it?"), ("user", "yes"), ("assistant", "Booked."),
                          ("user", "yes")]


def test_a_copy_stamped_long_before_the_first_is_not_taken_for_it(db_target):
    """Past `RESTAMPED_WITHIN` the same words are another message (said an hour apart)."""
    alice = Caller("alice", "main", "chat")
    with _open(db_target) as mem:
        agent_end(mem, _turn(("user", "ok", 3_600_000)), alice)
        assert agent_end(mem, _turn(("user", "ok", 0)), alice)["recorded"] == 1


def test_messages_with_their_own_ids_sent_out_of_order_are_both_kept(db_target):
    """A message a provider's id names is known by it: an earlier "yes" logged after a later one (a client's
    retry, an import newest first) is a message of its own, not a copy sent again."""
    alice = Caller("alice", "main", "chat")
    with _open(db_target) as mem:
        later = {"id": "msg-2", "role": "user", "content": "yes", "timestamp": T0 + 120_000}
        earlier = {"id": "msg-1", "role": "user", "content": "yes", "timestamp": T0}
        assert mem.conversations.log([later], caller=alice).stored == 1
        assert mem.conversations.log([earlier], caller=alice).stored == 1
        assert [m.content for m in mem.conversations.show("chat", caller=alice)] == ["yes", "yes"]


def test_a_copy_from_a_clock_ahead_of_the_servers_is_still_known(db_target):
    """A stamp later than now is stored as now; its copy sent again (stamped earlier, still ahead of the
    server) is compared with what was stored, not with what was sent."""
    import time

    alice = Caller("alice", "main", "chat")
    ahead = int(time.time() * 1000) + 3_600_000  # an hour ahead of the server
    with _open(db_target) as mem:
        assert agent_end(mem, _turn(("user", "Remember that my bike is red.", ahead + 4_000)), alice)["recorded"] == 1
        assert agent_end(mem, _turn(("user", "Remember that my bike is red.", ahead),
                                    ("assistant", "Noted.", ahead + 5_000)), alice)["recorded"] == 1
        assert [m.content for m in mem.conversations.show("chat", caller=alice)] == [
            "Remember that my bike is red.", "Noted."]
