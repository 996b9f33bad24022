"""The conversation record (`mem.conversations`): every message once, durable at the answer, in segments
that close on a pause, a size or the session's end (also after a restart), searchable with memories
and never by another user. Both backends."""

from __future__ import annotations

import io
import json
import logging
from datetime import datetime, timedelta, timezone

import pytest

from clawrecall import Memory, NotFoundError, ValidationError
from clawrecall.hooks import agent_end, before_prompt_build
from clawrecall.scopes import Caller

ALICE = Caller("alice", "main", "s1")
BOB = Caller("bob", "main", "s9")
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


def transcript(turns: int, *, start: datetime = T0, every: timedelta = timedelta(seconds=20), ids: bool = False,
               timestamps: bool = True) -> list[dict]:
    """`turns` user/assistant pairs, `every` apart, as OpenClaw sends them (timestamps in ms)."""
    out = []
    for n in range(turns):
        for k, (role, text) in enumerate((("user", f"Question {n} about the garden shed roof"),
                                          ("assistant", f"Answer {n}: use cedar shingles"))):
            message: dict = {"role": role, "content": text}
            if timestamps:
                message["timestamp"] = int((start + every * (2 * n + k)).timestamp() * 1000)
            if ids:
                message["id"] = f"msg-{n}-{k}"
            out.append(message)
    return out


def stored(mem: Memory, caller: Caller = ALICE, session: str = "s1") -> list:
    return mem.conversations.show(session, caller=caller)


@pytest.mark.parametrize("shape", ["timestamps", "ids", "positions"])
def test_a_transcript_sent_turn_by_turn_is_stored_once(mem, shape):
    """OpenClaw sends the whole session every turn: a 30-message transcript sent message by message, each
    time from the start, stores 30 messages, in order."""
    full = transcript(15, ids=shape == "ids", timestamps=shape != "positions")
    for end in range(1, len(full) + 1):
        mem.conversations.log(full[:end], caller=ALICE, now=T0 + timedelta(hours=1))
    messages = stored(mem)
    assert [m.content for m in messages] == [m["content"] for m in full]
    assert [m.role for m in messages[:2]] == ["user", "assistant"]
    again = mem.conversations.log(full, caller=ALICE, now=T0 + timedelta(hours=1))
    assert (again.stored, again.skipped) == (0, 30)


def test_parts_become_reasoning_response_and_tool_call_with_model_and_tokens(mem):
    message = {
        "role": "assistant", "timestamp": int(T0.timestamp() * 1000), "model": "claude-x",
        "usage": {"input": 120, "output": 30},
        "content": [{"type": "thinking", "thinking": "They want the weather."},
                    {"type": "text", "text": "Let me check."},
                    {"type": "toolCall", "name": "weather", "arguments": {"city": "Brno"}}],
    }
    result = {"role": "toolResult", "timestamp": int(T0.timestamp() * 1000) + 1, "content": [{"type": "text", "text": "12 °C"}]}
    mem.conversations.log([{"role": "user", "content": "Weather in Brno?"}, message, result], caller=ALICE, now=T0)
    got = [(m.role, m.content, m.model, m.output_tokens) for m in stored(mem)]
    assert got == [
        ("user", "Weather in Brno?", None, None),
        ("reasoning", "They want the weather.", "claude-x", None),
        ("assistant", "Let me check.", "claude-x", 30),
        ("tool_call", 'weather({"city": "Brno"})', None, None),
        ("tool_result", "12 °C", None, None),
    ]


def test_envelopes_and_our_own_recall_block_are_not_recorded(mem):
    text = ("<relevant-memories>\n[UNTRUSTED DATA]\n- [fact] old\n[END UNTRUSTED DATA]\n</relevant-memories>\n"
            "[Mon 2026-03-02 04:21 GMT+8] I moved to Brno")
    mem.conversations.log([{"role": "user", "content": text}], caller=ALICE, now=T0)
    assert [m.content for m in stored(mem)] == ["I moved to Brno"]


def test_a_users_own_mention_of_the_recall_tag_is_kept_and_a_block_cut_short_is_not(mem):
    asked = "Why does my plugin print <relevant-memories> in the output? My code is: print(block)"
    cut = "I moved to Brno\n<relevant-memories>\n[UNTRUSTED DATA — notes]\n- [fact] old"
    mem.conversations.log([{"role": "user", "content": asked}, {"role": "user", "content": cut}], caller=ALICE, now=T0)
    assert [m.content for m in stored(mem)] == [asked, "I moved to Brno"]


def test_a_long_response_gets_a_summary_and_a_huge_part_is_cut_not_refused(mem):
    long = "The shed needs a new roof. " + "Cedar lasts longer than asphalt in wet climates. " * 40
    huge = "x" * 150_000
    mem.conversations.log([{"role": "user", "content": "Roof?"}, {"role": "assistant", "content": long},
                           {"role": "toolResult", "content": huge}], caller=ALICE, now=T0)
    user, answer, tool = stored(mem)
    assert answer.summary is not None and answer.summary.startswith("The shed needs a new roof.") and len(answer.summary) <= 240
    assert user.summary is None and len(tool.content) <= 100_000 and tool.content.endswith("characters cut]")


def test_bad_messages_are_refused_naming_the_message_and_nothing_is_stored(mem):
    with pytest.raises(ValidationError, match=r"message 1: unknown role 'wizard'"):
        mem.conversations.log([{"role": "user", "content": "fine"}, {"role": "wizard", "content": "x"}], caller=ALICE)
    with pytest.raises(ValidationError, match="message 0: the message text must not contain NUL"):
        mem.conversations.log([{"role": "user", "content": "a\x00b"}], caller=ALICE)
    with pytest.raises(ValidationError, match="session id"):
        mem.conversations.log([{"role": "user", "content": "no session"}], caller=Caller("alice"))
    with pytest.raises(ValidationError, match="timestamp"):
        mem.conversations.log([{"role": "user", "content": "t", "timestamp": "yesterday-ish"}], caller=ALICE)
    assert mem.conversations.sessions(caller=ALICE) == []


# -- segments ------------------------------------------------------------------------------------


def test_a_pause_closes_the_segment_and_writes_its_jsonl(mem, tmp_path):
    mem.config.conversations.dir = str(tmp_path / "conversations")
    first = transcript(2)
    later = transcript(1, start=T0 + timedelta(minutes=30))
    mem.conversations.log(first + later, caller=ALICE, now=T0 + timedelta(hours=1))
    old, new = sorted(mem.conversations.segments(caller=ALICE, session_id="s1"), key=lambda s: s.started_at)
    assert (old.close_reason, old.turn_count, old.message_count) == ("pause", 2, 4)
    assert new.closed_at is None and new.message_count == 2
    assert old.title == "Question 0 about the garden shed roof"
    lines = (tmp_path / "conversations" / old.file).read_text().splitlines()
    assert old.file == f"2026-03-02-09-00-question-0-about-the-garden-shed-{old.id[:8]}.jsonl"
    assert json.loads(lines[0])["segment"]["id"] == old.id
    assert [json.loads(line)["content"] for line in lines[1:]] == [m["content"] for m in first]


def test_a_segment_closes_at_its_size(mem):
    mem.config.conversations.max_turns = 3
    mem.conversations.log(transcript(7), caller=ALICE, now=T0 + timedelta(hours=1))
    found = sorted(mem.conversations.segments(caller=ALICE), key=lambda s: s.started_at)
    assert [(s.turn_count, s.close_reason) for s in found] == [(3, "size"), (3, "size"), (1, None)]


def test_the_session_end_closes_it_and_a_new_session_in_the_recall_hook_too(mem):
    mem.conversations.log(transcript(2), caller=ALICE, now=T0 + timedelta(minutes=2))
    closed = mem.conversations.end("s1", caller=ALICE)
    assert closed is not None and closed.close_reason == "session_end" and closed.file
    assert mem.conversations.end("s1", caller=ALICE) is None  # nothing open any more
    mem.conversations.log(transcript(1, start=T0 + timedelta(minutes=3)), caller=ALICE, now=T0 + timedelta(minutes=4))
    before_prompt_build(mem, {"prompt": "hello there friend", "messages": []}, ALICE)  # `/new`: an empty history
    assert [s.close_reason for s in mem.conversations.segments(caller=ALICE)] == ["session_end", "session_end"]


def test_segments_that_should_have_closed_while_nothing_ran_close_at_the_next_start(db_target, tmp_path):
    with Memory.open(db_target, conversations={"dir": str(tmp_path / "c")}) as mem:
        mem.conversations.log(transcript(2, start=datetime.now(timezone.utc) - timedelta(minutes=20)), caller=ALICE)
    with Memory.open(db_target, conversations={"dir": str(tmp_path / "c")}) as mem:
        swept = mem.upkeep.sweep()
        assert swept.segments_closed == 1
        [segment] = mem.conversations.segments(caller=ALICE)
        assert segment.close_reason == "pause" and (tmp_path / "c" / segment.file).exists()


def test_close_listeners_hear_every_closed_segment_inside_its_transaction(mem):
    heard = []
    mem.upkeep.on("segment_closed", lambda e: heard.append((e.segment.close_reason, e.segment.closed_at is not None)))
    mem.conversations.log(transcript(1) + transcript(1, start=T0 + timedelta(hours=2)), caller=ALICE,
                          now=T0 + timedelta(hours=3))
    mem.conversations.end("s1", caller=ALICE)
    assert heard == [("pause", True), ("session_end", True)]

    def refuse(event):
        raise RuntimeError("the job could not be queued")

    mem.upkeep.on("segment_closed", refuse)  # a listener's failure undoes the close: no close without its job
    mem.conversations.log(transcript(1, start=T0 + timedelta(hours=5)), caller=ALICE, session_id="s2",
                          now=T0 + timedelta(hours=5))
    with pytest.raises(RuntimeError):
        mem.conversations.end("s2", caller=ALICE)
    assert [s.closed_at for s in mem.conversations.segments(caller=ALICE, session_id="s2")] == [None]


def test_retention_erases_old_segments_with_their_messages_and_files_and_keeps_the_open_one(mem, tmp_path):
    mem.config.conversations.dir = str(tmp_path / "c")
    mem.conversations.log(transcript(2), caller=ALICE, now=T0 + timedelta(days=1))  # closed by the next one's pause
    mem.conversations.log(transcript(1, start=T0 + timedelta(days=1)), caller=ALICE, now=T0 + timedelta(days=1))
    [old] = [s for s in mem.conversations.segments(caller=ALICE) if s.closed_at is not None]
    assert (tmp_path / "c" / old.file).exists()
    assert mem.conversations.prune(now=T0 + timedelta(days=40)).model_dump() == {"messages": 0, "segments": 0, "files": 0}  # keep
    mem.config.conversations.retention_days = 30
    assert mem.conversations.prune(now=T0 + timedelta(days=40)).model_dump() == {"messages": 4, "segments": 1, "files": 1}
    assert not (tmp_path / "c" / old.file).exists()
    assert [m.content for m in stored(mem)] == [m["content"] for m in transcript(1)]
    assert mem.search("garden shed roof", caller=ALICE, sources=["message"], mode="bm25", limit=50)[0].content == "Question 0 about the garden shed roof"
    assert len(mem.search("garden shed roof", caller=ALICE, sources=["message"], mode="bm25", limit=50)) == 2


def test_the_sweep_purges_memories_soft_deleted_longer_ago_than_their_retention(mem):
    """ShadowDB purges soft-deleted records once their retention has passed; `clawrecall serve` sweeps so too."""
    kept = mem.add("Deleted a moment ago, kept for its retention", user_id="alice", dedup=False)
    mem.delete(kept.id, user_id="alice")
    assert mem.upkeep.sweep().memories_purged == 0 and mem.count(user_id="alice", include_deleted=True) == 1
    mem.config.writes.retention_days = 0
    mem.config.writes.purge_every_hours = 1e-9  # due again at once (the schedule: test_backup.py)
    assert mem.upkeep.sweep().memories_purged == 1 and mem.count(user_id="alice", include_deleted=True) == 0


# -- search and isolation -------------------------------------------------------------------------


def test_messages_are_found_by_meaning_after_the_backfill_and_by_words_before(mem):
    tea = [{"role": "user", "content": "Just so you know, my favourite tea is oolong."}]
    mem.conversations.log(tea, caller=ALICE)
    words = mem.search("oolong", caller=ALICE, sources=["message"], mode="bm25")
    assert [h.content for h in words] == [tea[0]["content"]] and words[0].source == "message"
    mem.upkeep.backfill()  # with what the background run after `log` did, every row has its vector
    assert mem.upkeep.runtime.drain(30) and mem.upkeep.unembedded() == 0
    assert mem.search("favourite tea oolong", caller=ALICE, sources=["message"], mode="vector")
    hits = mem.search("favourite tea oolong", caller=ALICE, sources=["memory", "message"])
    assert hits and hits[0].origin["session_id"] == "s1" and hits[0].origin["role"] == "user"
    assert [h.source for h in mem.search("favourite tea oolong", caller=ALICE)] == ["message"]  # as recall finds it
    assert mem.search("favourite tea oolong", caller=ALICE, sources=["memory"]) == []  # memories only, when asked
    assert mem.list(caller=ALICE) == [] and mem.count(caller=ALICE) == 0 and mem.stats().total == 0
    assert mem.stats().by_kind == {"message": 1}


def test_another_user_never_finds_a_conversation(mem):
    mem.conversations.log([{"role": "user", "content": "My locker code is 4711"}], caller=ALICE)
    mem.upkeep.backfill()
    assert mem.search("locker code 4711", caller=BOB, sources=["memory", "message", "chunk"]) == []
    assert mem.conversations.sessions(caller=BOB) == [] and mem.conversations.segments(caller=BOB) == []
    assert mem.conversations.stats(caller=BOB) == []
    for not_bobs in (lambda: mem.conversations.show("s1", caller=BOB),
                     lambda: mem.conversations.segments(caller=BOB, session_id="s1"),
                     lambda: mem.conversations.export(io.StringIO(), caller=BOB, session_id="s1"),
                     lambda: mem.conversations.end("s1", caller=BOB)):
        with pytest.raises(NotFoundError, match="no conversation with session id 's1'"):  # as if there were none
            not_bobs()
    assert mem.search("locker code 4711", caller=ALICE, sources=["message"])
    assert [s.session_id for s in mem.conversations.segments(caller=ALICE, session_id="s1")] == ["s1"]


def test_a_conversation_is_a_users_or_an_agents_never_everyones(mem, caplog):
    with pytest.raises(ValidationError, match="a conversation is a user's or an agent's"):
        mem.conversations.log([{"role": "user", "content": "My salary is 91000 euros"}], caller=Caller(session_id="s1"))
    # the hook records nothing for a turn that names no one, and fails nothing
    answer = agent_end(mem, {"messages": [{"role": "user", "content": "My salary is 91000 euros"}]}, Caller(session_id="s1"))
    assert answer["recorded"] == 0 and mem.conversations.sessions(caller=Caller()) == []
    agents = mem.conversations.log([{"role": "user", "content": "Deploy at noon"}], caller=Caller(None, "ops", "s2"))
    assert agents.stored == 1 and mem.conversations.show("s2", caller=Caller(None, "ops"))[0].scope == "agent:ops"
    with pytest.raises(ValidationError, match="a session id is 1 to 200 characters"):
        mem.conversations.log([{"role": "user", "content": "hi"}], caller=ALICE, session_id="s" * 201)
    # a new session with nothing recorded, or a turn without a session: nothing to close, and nothing logged
    before_prompt_build(mem, {"prompt": "hello there friend", "messages": []}, Caller("carol", "main", "new"))
    before_prompt_build(mem, {"prompt": "hello there friend", "messages": []}, Caller("carol", "main"))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    for blank in ("", "  "):
        with pytest.raises(ValidationError, match="needs a session id"):
            mem.conversations.show(blank, caller=ALICE)


def test_recall_draws_on_an_earlier_session_but_not_on_the_current_one(mem):
    """What a user said in passing ("my favourite tea is oolong": no capture rule keeps it) is recalled
    in the next session; the current session's messages are in the prompt already."""
    said = [{"role": "user", "content": "Just so you know, my favourite tea is oolong."},
            {"role": "assistant", "content": "Noted."}]
    out = agent_end(mem, {"messages": said}, ALICE)
    assert out["recorded"] == 2 and out["queued"] == 0  # recorded, not captured
    mem.upkeep.backfill()
    same = before_prompt_build(mem, {"prompt": "favourite tea oolong?"}, ALICE)
    assert same["prependContext"] is None
    next_session = Caller("alice", "main", "s2")
    recalled = before_prompt_build(mem, {"prompt": "favourite tea oolong?"}, next_session)
    assert "my favourite tea is oolong" in recalled["prependContext"] and "[user said]" in recalled["prependContext"]


def test_after_a_new_session_the_earlier_transcript_is_recalled_though_the_session_key_is_the_same(mem):
    """OpenClaw keeps a chat's session key across `/new`: what was said before it is no longer in the
    prompt, so recall may bring it back; what was said since is in the prompt, so it may not."""
    old = T0 - timedelta(days=1)
    mem.conversations.log([{"role": "user", "content": "My favourite tea is oolong, remember it",
                            "timestamp": int(old.timestamp() * 1000)}], caller=ALICE)
    mem.upkeep.backfill()
    assert before_prompt_build(mem, {"prompt": "favourite tea oolong?"}, ALICE)["prependContext"] is None
    before_prompt_build(mem, {"prompt": "hello again my friend", "messages": []}, ALICE)  # `/new`
    mem.conversations.log([{"role": "user", "content": "Do I like oolong tea or green tea?"}], caller=ALICE)
    mem.upkeep.backfill()
    block = before_prompt_build(mem, {"prompt": "favourite tea oolong?"}, ALICE)["prependContext"]
    assert "My favourite tea is oolong" in block and "Do I like oolong" not in block


def _said_at(mem: Memory, caller: Caller, session: str, at: datetime, *texts: str) -> None:
    mem.conversations.log([{"role": "user" if n % 2 == 0 else "assistant", "content": text,
                            "timestamp": int((at + timedelta(seconds=n)).timestamp() * 1000)}
                           for n, text in enumerate(texts)], caller=caller, session_id=session)


def test_a_question_that_names_only_a_time_lists_what_was_said_then(mem):
    """"What did we talk about yesterday?" has no word the legs could search: the time is the question.
    The hits are yesterday's, the caller's only, memories before messages, newest first, noise left out."""
    now = datetime.now(timezone.utc)
    yesterday = datetime.combine(now.date() - timedelta(days=1), datetime.min.time(), timezone.utc) + timedelta(hours=10)
    _said_at(mem, ALICE, "kitchen", yesterday, "We should repaint the kitchen a pale green.", "Pale green suits oak.", "ok")
    _said_at(mem, ALICE, "dentist", yesterday - timedelta(days=4), "My dentist appointment moved to Thursday.")
    _said_at(mem, BOB, "bob", yesterday, "My locker code is 4711.")
    fact = mem.add("Alice is repainting her kitchen pale green", caller=ALICE, created_at=yesterday + timedelta(hours=1)).id
    mem.upkeep.backfill()
    sources = ["memory", "message", "chunk"]
    hits = mem.search("What did we talk about yesterday?", caller=ALICE, sources=sources, explain=True)
    assert [h.content for h in hits] == ["Alice is repainting her kitchen pale green", "Pale green suits oak.",
                                         "We should repaint the kitchen a pale green."]
    assert hits[0].id == fact and [h.score for h in hits] == [1.0, 0.8, 0.8]  # the source weights
    assert all(h.matched == ["time"] and h.similarity is None and h.explain["when"] == 1.0 for h in hits)
    assert hits[1].origin["session_id"] == "kitchen"
    for same in ("yesterday", "what did I say yesterday", "o čem jsme mluvili včera", "о чём мы говорили вчера"):
        assert [h.id for h in mem.search(same, caller=ALICE, sources=sources)] == [h.id for h in hits], same
    assert [h.content for h in mem.search("what did we talk about yesterday", caller=BOB, sources=sources)] == [
        "My locker code is 4711."]
    # the caller's own filters still hold: a session, a `since` inside the day, a limit
    assert [h.id for h in mem.search("yesterday", caller=ALICE, sources=sources, session_id="dentist")] == []
    assert [h.id for h in mem.search("yesterday", caller=ALICE, sources=sources, limit=1)] == [fact]
    late = mem.search("yesterday", caller=ALICE, sources=sources, since=yesterday + timedelta(minutes=30))
    assert [h.id for h in late] == [fact]
    week = mem.search("what did we discuss in the last 7 days", caller=ALICE, sources=sources)
    assert "My dentist appointment moved to Thursday." in [h.content for h in week]
    # a busy day: the memory still leads 60 newer messages, each conversation has its turn, small talk is left out
    _said_at(mem, ALICE, "busy", yesterday + timedelta(hours=2), *(f"Step {n}: configure the router VLAN" for n in range(60)))
    _said_at(mem, ALICE, "evening", yesterday + timedelta(hours=9), "Great, thanks!", "Sure thing.", "Bye!", "díky")
    busy = mem.search("what did we talk about yesterday?", caller=ALICE, sources=sources, limit=4)
    assert busy[0].id == fact and [h.content for h in busy[1:]] == [
        "Step 59: configure the router VLAN", "Pale green suits oak.", "Step 58: configure the router VLAN"]
    # a topic beside the time searches as before: the time lifts what was said then
    topic = mem.search("What did we say about the kitchen yesterday?", caller=ALICE, sources=sources, explain=True)
    assert topic and all(h.matched != ["time"] for h in topic) and "when" in topic[0].explain


def test_a_file_read_in_today_is_not_what_was_said_today(mem, tmp_path):
    manual = tmp_path / "manual.md"
    manual.write_text("# Washing machine\n\nProgram 35 washes wool at 30 degrees.\n")
    mem.files.ingest(manual, caller=ALICE)
    mem.conversations.log([{"role": "user", "content": "Book the car service for Monday."}], caller=ALICE)
    said = mem.search("what did we talk about today?", caller=ALICE, sources=["memory", "message", "chunk"])
    assert [h.content for h in said] == ["Book the car service for Monday."]
    read = mem.search("what did we talk about today?", caller=ALICE, sources=["chunk"])  # asked for alone
    assert [h.source for h in read] == ["chunk"] and "Program 35" in read[0].content


def test_recall_answers_what_did_we_talk_about_yesterday_from_the_record(mem):
    now = datetime.now(timezone.utc)
    yesterday = datetime.combine(now.date() - timedelta(days=1), datetime.min.time(), timezone.utc) + timedelta(hours=10)
    _said_at(mem, ALICE, "s0", yesterday, "Let's plan the trip to Lisbon in May.", "Lisbon in May is lovely.")
    mem.upkeep.backfill()
    block = before_prompt_build(mem, {"prompt": "What did we talk about yesterday?"}, Caller("alice", "main", "s2"))
    assert "Let's plan the trip to Lisbon in May." in block["prependContext"]
    assert "Lisbon in May is lovely." in block["prependContext"]


def test_deleting_a_conversation_erases_its_messages_segments_files_jobs_and_occurrences(mem):
    from clawrecall.models import Occurrence

    mem.conversations.log(transcript(2), caller=ALICE)
    closed = mem.conversations.end("s1", caller=ALICE)
    mem.conversations.log(transcript(1, start=T0 + timedelta(hours=1)), caller=ALICE)  # a second segment, open
    mem.conversations.log(transcript(1), caller=ALICE, session_id="keep")
    mem.conversations.log(transcript(1), caller=BOB, session_id="s1")  # bob's own s1
    file = mem.conversations.folder() / closed.file
    assert file.exists()
    fact = mem.add("Alice's shed roof gets cedar shingles", caller=ALICE).id
    said = [m.id for m in stored(mem)]
    mem._store.occurrences.insert([
        Occurrence(id="00000000-0000-4000-8000-000000000001", memory_id=fact, scope="user:alice", segment_id=closed.id,
                   session_id="s1", at=T0, snippet="use cedar shingles", message_ids=said[:2]),
        Occurrence(id="00000000-0000-4000-8000-000000000002", memory_id=fact, scope="user:alice", at=T0, message_ids=[]),
    ])
    assert mem.jobs.enqueue("extract", scope="user:alice", subject_id=closed.id) is not None
    assert mem.jobs.enqueue("extract", scope="user:alice", subject_id="another-segment") is not None

    expected = {"messages": 6, "segments": 2, "occurrences": 1, "jobs": 1}
    assert mem.conversations.delete("s1", caller=ALICE, dry_run=True).model_dump() == {"scope": "user:alice", "deleted": expected}
    assert len(stored(mem)) == 6 and file.exists()  # a dry run changes nothing
    with pytest.raises(NotFoundError, match="no conversation with session id 's1'"):
        mem.conversations.delete("s1", caller=Caller("carol", "main"))  # carol reads no s1
    assert mem.conversations.delete("s1", caller=ALICE).model_dump() == {"scope": "user:alice", "deleted": expected}
    assert not file.exists()
    with pytest.raises(NotFoundError):
        stored(mem)
    assert mem.conversations.segments(caller=ALICE, session_id="keep")
    assert mem.search("garden shed roof", caller=ALICE, sources=["message"], mode="bm25")  # the other session's
    assert all(h.origin["session_id"] == "keep"
               for h in mem.search("garden shed roof", caller=ALICE, sources=["message"], mode="bm25"))
    assert [o.id for o in mem._store.occurrences.of(fact)] == ["00000000-0000-4000-8000-000000000002"]
    assert [j.subject_id for j in mem.jobs.list(caller=Caller())] == ["another-segment"]
    assert mem.get(fact, caller=ALICE).content.startswith("Alice's shed roof")  # the facts stay
    assert len(stored(mem, BOB)) == 2  # bob's s1 is his
    with pytest.raises(NotFoundError):
        mem.conversations.delete("s1", caller=ALICE)  # gone: nothing left to erase


def test_a_delete_takes_one_conversation_the_callers_own_or_the_scope_named(mem):
    """A session id names a conversation per scope: alice's "chat", agent main's own "chat" (recorded with
    no user) and bob's are three. Alice deletes hers; the administrator names the scope."""
    for caller in (ALICE, Caller(None, "main"), BOB):
        mem.conversations.log(transcript(1), caller=caller, session_id="chat")
    assert mem.conversations.delete("chat", caller=ALICE).deleted["messages"] == 2
    with pytest.raises(NotFoundError, match=r"'chat' in user:alice \(there is one in agent:main: name its scope\)"):
        mem.conversations.delete("chat", caller=ALICE)  # hers is gone; agent main's, which she reads, is not hers
    assert {c.scope for c in mem.conversations.sessions(caller=Caller())} == {"agent:main", "user:bob"}
    with pytest.raises(NotFoundError, match="no conversation with session id 'chat' in global"):
        mem.conversations.delete("chat", caller=Caller(), scope="global")
    assert mem.conversations.delete("chat", caller=Caller(), scope="user:bob", dry_run=True).deleted["messages"] == 2
    from clawrecall.errors import ScopeError
    with pytest.raises(ScopeError):
        mem.conversations.delete("chat", caller=ALICE, scope="user:bob")  # not hers to read
    assert mem.conversations.delete("chat", caller=Caller(), scope="user:bob").deleted["messages"] == 2
    assert mem.conversations.delete("chat", caller=Caller(None, "main")).model_dump() == {
        "scope": "agent:main", "deleted": {"messages": 2, "segments": 1, "occurrences": 0, "jobs": 0}}
    assert mem.conversations.sessions(caller=Caller()) == []


def test_a_scope_picks_one_of_the_conversations_that_share_a_session_id(mem):
    for caller, words in ((ALICE, "cedar"), (Caller(None, "main"), "spruce"), (BOB, "larch")):
        mem.conversations.log([{"role": "user", "content": f"Use {words} for the shed"}], caller=caller, session_id="chat")
    admin = Caller()
    assert len(mem.conversations.show("chat", caller=admin)) == 3  # every scope the administrator reads
    assert [m.content for m in mem.conversations.show("chat", caller=admin, scope="user:bob")] == ["Use larch for the shed"]
    assert [c.scope for c in mem.conversations.sessions(caller=admin, scope="agent:main")] == ["agent:main"]
    assert [g.scope for g in mem.conversations.segments(caller=admin, session_id="chat", scope="user:alice")] == ["user:alice"]
    out = io.StringIO()
    assert mem.conversations.export(out, caller=admin) == 3  # each conversation once, though they share an id
    assert sorted(json.loads(line)["content"] for line in out.getvalue().splitlines()) == [
        "Use cedar for the shed", "Use larch for the shed", "Use spruce for the shed"]
    out = io.StringIO()
    assert mem.conversations.export(out, caller=admin, session_id="chat", scope="user:alice") == 1
    from clawrecall.errors import ScopeError
    with pytest.raises(ScopeError):
        mem.conversations.show("chat", caller=ALICE, scope="user:bob")
    with pytest.raises(NotFoundError):
        mem.conversations.show("chat", caller=admin, scope="user:carol")
    with pytest.raises(ValidationError, match="name one scope, not"):
        mem.conversations.delete("chat", caller=admin, scope="*")
    # a recap of today, for the administrator: three conversations, each its turn, though they share an id
    mem.conversations.log([{"role": "user", "content": "And the door needs oiling"}], caller=BOB, session_id="chat")
    today = mem.search("what did we talk about today?", caller=admin, sources=["message"], limit=4)
    assert sorted(h.memory.scope for h in today[:3]) == ["agent:main", "user:alice", "user:bob"]
    assert today[3].content == "Use larch for the shed"  # bob's second line, after everyone's first


def test_a_message_logged_while_its_conversation_is_deleted_starts_a_conversation_of_its_own(mem, db_target):
    """The delete locks the session's segments before it reads their messages: a message logged meanwhile
    waits, then opens a new segment, and is never left in a segment that is gone."""
    import threading

    mem.conversations.log(transcript(1), caller=ALICE)
    find, late = mem._store.segments.find, []
    at_the_lock = until_another_thread_waits_for_the_store(mem, db_target)

    def find_then_log(*args, **kwargs):
        found = find(*args, **kwargs)
        if kwargs.get("for_update") and not late:
            late.append(threading.Thread(target=mem.conversations.log, args=(
                [{"role": "user", "content": "said during the delete"}],), kwargs={"caller": ALICE}))
            late[0].start()
            at_the_lock()  # it reaches the lock the delete holds
        return found

    mem._store.segments.find = find_then_log
    assert mem.conversations.delete("s1", caller=ALICE).deleted["messages"] == 2
    late[0].join(30)
    assert [m.content for m in stored(mem)] == ["said during the delete"]
    [segment] = mem.conversations.segments(caller=ALICE, session_id="s1")
    assert segment.message_count == 1 and {m.segment_id for m in stored(mem)} == {segment.id}


def until_another_thread_waits_for_the_store(mem: Memory, db_target: str):
    """A function that returns once another thread waits for what this one's transaction holds: on SQLite, the
    store's lock (watched from now on); on PostgreSQL, a lock the server has not granted."""
    import threading
    import time

    if not db_target.startswith("postgresql"):
        store, waiting, holder = mem._store, threading.Event(), threading.get_ident()

        class Watched:
            def __init__(self, lock):
                self.lock = lock

            def __enter__(self):
                if threading.get_ident() != holder:
                    waiting.set()
                return self.lock.__enter__()

            def __exit__(self, *exc):
                return self.lock.__exit__(*exc)

        store._lock = Watched(store._lock)

        def until_the_lock_is_waited_for() -> None:
            assert waiting.wait(60), "no one waits for the delete's lock"

        return until_the_lock_is_waited_for

    import psycopg

    def until_a_lock_is_waited_for() -> None:
        deadline = time.monotonic() + 60
        with psycopg.connect(db_target, autocommit=True) as conn:
            while not conn.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()[0]:
                assert time.monotonic() < deadline, "no one waits for the delete's locks"
                time.sleep(0.01)

    return until_a_lock_is_waited_for


def test_a_conversation_readable_but_not_erasable_is_refused(db_target):
    """A conversation in `global` (where an earlier release recorded one that named no user), written by no
    one the caller is: every user reads it; only a caller who may write `global` erases it."""
    from clawrecall.errors import ScopeError

    with Memory.open(db_target, access={"scopes": {"global": {"write": ["user:carol"]}}}) as mem:
        mem.conversations.log([{"role": "user", "content": "Shared notes from the old days"}], caller=Caller(None, "ops"),
                              session_id="old")
        mem._store.run("UPDATE memories SET scope = 'global', agent_id = NULL WHERE kind = 'message'")
        mem._store.run("UPDATE messages SET scope = 'global'")
        mem._store.run("UPDATE segments SET scope = 'global', agent_id = NULL")
        assert mem.conversations.show("old", caller=ALICE)
        with pytest.raises(NotFoundError):
            mem.conversations.delete("old", caller=ALICE)  # her own conversation "old": there is none
        with pytest.raises(ScopeError, match="may be read but not erased"):
            mem.conversations.delete("old", caller=ALICE, scope="global")
        assert len(mem.conversations.show("old", caller=ALICE)) == 1
        assert mem.conversations.delete("old", caller=Caller("carol", "main"), scope="global").deleted == {
            "messages": 1, "segments": 1, "occurrences": 0, "jobs": 0}


def test_the_hook_refuses_an_unknown_role_in_the_turn_that_just_finished(mem):
    turn = [{"role": "user", "content": "I like sailing on lakes"}, {"role": "wizard", "content": "x"}]
    with pytest.raises(ValidationError, match="a message of this turn: unknown role 'wizard'"):
        agent_end(mem, {"messages": turn}, ALICE)
    assert mem.conversations.sessions(caller=ALICE) == []  # nothing of the request stored
    later = agent_end(mem, {"messages": [*turn, {"role": "user", "content": "Remember that my badge is 42"}]}, ALICE)
    assert later["recorded"] == 2  # an earlier turn's refused message is left out, not refused again


def test_the_hook_skips_a_message_an_earlier_turn_could_not_store(mem):
    bad = {"role": "user", "content": "PIN \x00 1234"}
    with pytest.raises(ValidationError, match="a message of this turn"):
        agent_end(mem, {"messages": [bad]}, ALICE)
    later = agent_end(mem, {"messages": [bad, {"role": "assistant", "content": "ok"},
                                         {"role": "user", "content": "Remember that my badge is 42"}]}, ALICE)
    assert later["recorded"] == 2 and later["queued"] == 1
    assert [m.content for m in stored(mem)] == ["ok", "Remember that my badge is 42"]
