"""Extraction as it runs: a segment closes, its job is queued in the same transaction, a worker asks the
LLM (a scripted OpenAI- and Anthropic-compatible server on 127.0.0.1) and applies the answer. Every
branch on both backends: a new fact, a repeat, an update, malformed JSON (repaired, or given up for the
rules), a timeout, a 429, a refusal, a server that is down; and a worker killed mid-job."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import pytest

from clawrecall import Caller, Handlers, Memory
from clawrecall._time import utcnow
from clawrecall.engine import _jobs
from clawrecall.hooks.recall import before_prompt_build

ALICE = Caller("alice", "main", "s1")
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
JOBS = {"backoff_base_s": 0.05, "backoff_max_s": 0.2, "poll_s": 0.05}


def open_mem(db_target, stub, *, provider: str = "openai", **overrides) -> Memory:
    base = stub.openai_base_url if provider == "openai" else stub.anthropic_base_url
    llm = {"provider": provider, "base_url": base, "model": "stub-model", "api_key": "sk-test-secret",
           "max_retries": 0, "timeout_s": 2.0, **overrides.pop("llm", {})}
    return Memory.open(db_target, llm=llm, jobs={**JOBS, **overrides.pop("jobs", {})}, **overrides)


def ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def say(mem: Memory, texts: list[str], *, start: datetime, session: str = "s1", end: bool = True):
    """A conversation of alternating user/assistant texts, logged, and (by default) its session ended."""
    transcript = [{"role": "user" if i % 2 == 0 else "assistant", "content": t, "timestamp": ms(start + timedelta(minutes=i))}
                  for i, t in enumerate(texts)]
    mem.conversations.log(transcript, caller=ALICE, session_id=session, now=start + timedelta(minutes=len(texts)))
    return mem.conversations.end(session, caller=ALICE) if end else None


def drain(mem: Memory, limit: int = 20) -> list:
    """Run ready jobs until none is ready."""
    done = []
    while (job := mem.upkeep.run_job("test-worker")) is not None and len(done) < limit:
        done.append(job)
    return done


def fact(text: str, *, action: str = "new", existing: str | None = None, source=(1,), category: str = "fact",
         valid_from: str | None = None) -> dict:
    return {"text": text, "category": category, "entities": ["user"], "importance": 0.6, "confidence": 0.9,
            "valid_from": valid_from, "sentiment": "update" if action == "update" else "neutral", "source": list(source),
            "action": action, "existing": existing, "visibility": None}


def known_as(request, word: str) -> str:
    """The F<n> the prompt gave the known fact that contains `word`."""
    found = re.search(rf"^F(\d+) \[[a-z_]+\] [^\n]*{word}", request.text, re.M)
    assert found, f"no known fact with {word!r} was shown:\n{request.text}"
    return f"F{found[1]}"


def facts_of(mem: Memory) -> list:
    return mem.list(caller=ALICE, category="fact", include_deleted=False, limit=100)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_closed_segment_becomes_facts_a_summary_and_keys(db_target, llm_stub, provider):
    llm_stub.script.append({"json": {"facts": [
        fact("In February 2026 the user moved to Brno.", source=[1], valid_from="2026-02-01"),
        fact("On 2026-03-02 the user's FTP was 250 W.", source=[3], valid_from="2026-03-02"),
    ], "summary": "The user moved to Brno and did a ramp test."}})
    with open_mem(db_target, llm_stub, provider=provider) as mem:
        closed = say(mem, ["I moved to Brno last month, by the way.", "Nice!", "Ramp test done: 250 watts.", "Great work."],
                     start=T0)
        queued = mem.jobs.list(caller=Caller())
        assert {(j.kind, j.subject_id, j.status) for j in queued} == {("extract", closed.id, "queued"),
                                                                       ("summarize", closed.id, "queued")}
        ran = drain(mem)
        assert [j.status for j in ran] == ["done", "done"], [j.last_error for j in ran]
        extract = next(j for j in ran if j.kind == "extract")
        assert extract.input_tokens > 100 and extract.output_tokens > 20  # the stub's counts, kept per job
        sent = llm_stub.requests[0]
        assert sent.schema is not None and "moved to Brno" in sent.text and "[UNTRUSTED DATA]" in sent.text
        assert "sk-test-secret" not in sent.text
        texts = {m.content: m for m in facts_of(mem)}
        assert set(texts) == {"In February 2026 the user moved to Brno.", "On 2026-03-02 the user's FTP was 250 W."}
        brno = texts["In February 2026 the user moved to Brno."]
        assert brno.source_type == "extraction" and brno.valid_from == datetime(2026, 2, 1, tzinfo=timezone.utc)
        assert mem._store.segments.get(closed.id).summary == "The user moved to Brno and did a ramp test."
        [summary] = mem.list(caller=ALICE, category="session_summary")
        assert "The user moved to Brno and did a ramp test." in summary.content and summary.session_id == "s1"
        # the message a fact came from is found by the fact's words too (its text is unchanged)
        hits = mem.search("functional FTP watts", caller=ALICE, sources=["message"], min_score=0)
        assert any(h.memory.content == "Ramp test done: 250 watts." for h in hits)
        assert mem.jobs.stats(caller=Caller()).by_kind["extract"].input_tokens == extract.input_tokens


def test_a_repeat_counts_an_occurrence_and_an_update_supersedes(db_target, llm_stub):
    with open_mem(db_target, llm_stub) as mem:
        llm_stub.script.append({"json": {"facts": [fact("On 2026-03-02 the user's FTP was 250 W.", source=[1],
                                                        valid_from="2026-03-02")], "summary": None}})
        say(mem, ["Ramp test: FTP 250 W.", "Noted.", "Legs are fine.", "Good."], start=T0, session="a")
        drain(mem)
        [old] = facts_of(mem)

        llm_stub.script.append(lambda r: {"json": {"facts": [
            fact("On 2026-03-09 the user said the FTP was still 250 W.", action="repeat", existing=known_as(r, "FTP"))],
            "summary": None}})
        say(mem, ["FTP still 250, legs tired.", "Rest then.", "Will do.", "Good."], start=T0 + timedelta(days=7), session="b")
        drain(mem)
        assert [m.id for m in facts_of(mem)] == [old.id]
        assert [o.at.date().isoformat() for o in mem.insight.occurrences(old.id, caller=ALICE)] == ["2026-03-02", "2026-03-09"]

        llm_stub.script.append(lambda r: {"json": {"facts": [
            fact("On 2026-03-16 the user's FTP was 262 W.", action="update", existing=known_as(r, "FTP"),
                 valid_from="2026-03-16")], "summary": None}})
        say(mem, ["New ramp test today: FTP is 262 now!", "Congrats.", "Thanks!", "Keep going."], start=T0 + timedelta(days=14), session="c")
        drain(mem)
        [new] = facts_of(mem)
        assert new.content == "On 2026-03-16 the user's FTP was 262 W." and new.supersedes == old.id
        closed = mem.get(old.id, caller=ALICE)
        assert closed.superseded_by == new.id and closed.valid_to == datetime(2026, 3, 16, tzinfo=timezone.utc)
        then = mem.search("FTP", caller=ALICE, as_of=datetime(2026, 3, 10, tzinfo=timezone.utc), min_score=0)
        assert old.id in {h.memory.id for h in then} and new.id not in {h.memory.id for h in then}
        # the recall block says how often a fact was discussed
        block = before_prompt_build(mem, {"prompt": "what was my FTP again"}, Caller("alice", "main", "s9"))
        assert "262 W" in block["prependContext"] and "discussed on 2026-03-16" in block["prependContext"]


def test_malformed_json_is_repaired_once(db_target, llm_stub):
    llm_stub.script += [{"text": "Sure! Here are the facts: the user likes tea"},
                        {"json": {"facts": [fact("The user prefers green tea.", category="preference")], "summary": None}}]
    with open_mem(db_target, llm_stub) as mem:
        say(mem, ["I really prefer green tea over coffee.", "Noted.", "Mostly sencha.", "Nice."], start=T0)
        [job] = [j for j in drain(mem) if j.kind == "extract"]
        assert job.status == "done"
        assert len(llm_stub.requests) == 2 and "That answer has errors" in llm_stub.requests[1].text
        assert (job.input_tokens, job.output_tokens) == (llm_stub.input_tokens, llm_stub.output_tokens)  # both calls
        assert [m.content for m in mem.list(caller=ALICE, category="preference")] == ["The user prefers green tea."]


def test_an_answer_invalid_twice_or_refused_falls_back_to_the_rules(db_target, llm_stub):
    llm_stub.script += [{"text": "no"}, {"json": {"facts": [fact("today the user likes tea")], "summary": None}},
                        {"refusal": "I can't help with that."}]
    with open_mem(db_target, llm_stub) as mem:
        say(mem, ["Remember that I always drink tea at 4pm.", "Sure.", "Thanks.", "Anytime."], start=T0, session="a")
        say(mem, ["Remember that my bike is a Canyon Ultimate.", "Nice bike.", "Thanks.", "Anytime."], start=T0 + timedelta(hours=1), session="b")
        jobs = [j for j in drain(mem) if j.kind == "extract"]
        assert [j.status for j in jobs] == ["done", "done"] and len(llm_stub.requests) == 3
        kept = {m.content: m for m in mem.list(caller=ALICE, limit=100) if m.source_type == "extraction"}
        assert set(kept) == {"Remember that I always drink tea at 4pm.", "Remember that my bike is a Canyon Ultimate."}
        assert all(m.confidence == 0.5 for m in kept.values())  # found by the rules, not checked by a model


@pytest.mark.parametrize("trouble", [
    {"status": 500, "message": "upstream down"},
    {"status": 429, "headers": {"Retry-After": "3"}, "message": "slow down"},
    {"delay": 3, "json": {"facts": [], "summary": None}},  # longer than the client's timeout
])
def test_an_llm_that_fails_makes_the_job_wait_and_nothing_is_lost(db_target, llm_stub, trouble):
    llm_stub.script.append(trouble)
    llm_stub.default = {"json": {"facts": [fact("The user prefers window seats on trains.", category="preference")],
                                 "summary": None}}
    with open_mem(db_target, llm_stub, llm={"timeout_s": 1.0}) as mem:
        closed = say(mem, ["I prefer window seats on trains.", "Noted.", "And quiet coaches.", "Sure."], start=T0)
        started = datetime.now(timezone.utc)
        first = mem.upkeep.run_job("w1", kinds=["extract"])
        assert first is not None and first.status == "queued" and first.attempts == 0  # waiting, not failed
        assert "unavailable" in first.last_error and first.run_after > started
        if trouble.get("status") == 429:  # the provider's Retry-After is the wait
            assert first.run_after >= started + timedelta(seconds=2.9)
        assert mem._store.messages.in_segment(closed.id)  # the record is kept meanwhile
        assert mem.jobs.stats(caller=Caller()).retrying == 1
        while (job := mem.upkeep.run_job("w1", kinds=["extract"])) is None or job.status == "queued":
            time.sleep(0.1)
        assert job.status == "done"
        assert [m.content for m in mem.list(caller=ALICE, category="preference")] == ["The user prefers window seats on trains."]


def test_without_an_llm_nothing_is_queued_and_the_record_works(db_target):
    with Memory.open(db_target) as mem:
        closed = say(mem, ["I prefer window seats on trains.", "Noted."], start=T0)
        assert closed is not None and mem.jobs.list(caller=Caller()) == [] and mem.upkeep.handlers() == Handlers(events={"segment_closed": [], "vectors_stored": ["conversations.check_topics", "retrieval.warm"]}, jobs={})
        assert mem.search("window seats", caller=ALICE, sources=["message"], min_score=0)


def test_segments_with_too_few_turns_are_not_sent_to_the_model_but_the_session_is_summarised(db_target, llm_stub):
    with open_mem(db_target, llm_stub, extraction={"min_turns": 2}) as mem:
        closed = say(mem, ["hi", "hello"], start=T0)
        assert sorted(j.kind for j in mem.jobs.list(caller=Caller())) == ["extract", "summarize"]
        assert [j.status for j in drain(mem)] == ["done", "done"]
        assert mem.list(caller=ALICE, limit=100) == [] and not llm_stub.requests
        assert closed.turn_count == 1


def test_with_an_llm_one_writer_makes_facts_the_segments_job(db_target, llm_stub):
    """A recorded turn's facts come from its segment's job alone: the model's for a long segment, the rules' for
    one too short for it; `agent_end` records the turn and writes no fact of its own. A turn that is not
    recorded (no session) is never extracted, so the rules still keep its facts at once."""
    from clawrecall.hooks import agent_end

    llm_stub.default = {"json": {"facts": [fact("The user's bike is a red Canyon.", category="fact")], "summary": None}}
    with open_mem(db_target, llm_stub) as mem:
        turn = {"messages": [{"role": "user", "content": "Remember that my bike is a red Canyon."},
                             {"role": "assistant", "content": "Noted."}]}
        answer = agent_end(mem, turn, Caller("alice", "main", "s1"))
        assert (answer["recorded"], answer["queued"], answer["skipped"]) == (2, 0, "extraction")
        assert mem.upkeep.runtime.drain(30) and mem.list(caller=ALICE, limit=100) == []
        mem.conversations.end("s1", caller=ALICE)
        drain(mem)
        # one turn: the rules' fact, once (without the change the hook's capture wrote it too)
        assert [(m.content, m.source_type) for m in mem.list(caller=ALICE, limit=100)] == [
            ("Remember that my bike is a red Canyon.", "extraction")]
        assert not llm_stub.requests

        unrecorded = agent_end(mem, turn, Caller("bob", "main"))
        assert (unrecorded["recorded"], unrecorded["queued"], unrecorded["skipped"]) == (0, 1, None)
        assert mem.upkeep.runtime.drain(30)
        assert [m.source_type for m in mem.list(caller=Caller("bob", "main"), limit=100)] == ["capture"]


WORKER = """
import sys
from clawrecall import Memory
mem = Memory.open(sys.argv[1], llm={{"provider": "openai", "base_url": "{base}", "model": "m", "max_retries": 0,
                  "timeout_s": 60}}, jobs={{"lease_s": {lease}, "poll_s": 0.05}})
print("ready", flush=True)
while mem.upkeep.run_job("{name}") is None:
    pass
print("finished", flush=True)
"""


def test_a_worker_killed_mid_job_leaves_no_half_written_facts_and_the_job_runs_again(db_target, llm_stub, tmp_path,
                                                                                     monkeypatch):
    answer = {"json": {"facts": [fact("The user prefers aisle seats.", category="preference"),
                                 fact("The user's bike is a Canyon.", source=[3])], "summary": None}}
    llm_stub.script.append({**answer, "delay": 30})  # the first worker dies while waiting for this
    llm_stub.default = answer
    with open_mem(db_target, llm_stub, extraction={"summaries": False}) as mem:
        say(mem, ["I prefer aisle seats.", "Noted.", "My bike is a Canyon.", "Nice."], start=T0)
    script = tmp_path / "worker.py"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    script.write_text(WORKER.format(base=llm_stub.openai_base_url, lease=1.0, name="doomed"))
    doomed = subprocess.Popen([sys.executable, str(script), str(db_target)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert doomed.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 30
        while not llm_stub.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        assert llm_stub.requests, "the worker never asked the LLM"
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(10)
    finally:
        doomed.kill()
    with open_mem(db_target, llm_stub, jobs={"lease_s": 1.0}) as mem:
        [job] = mem.jobs.list(caller=Caller())
        assert job.status == "running" and job.worker == "doomed"
        assert mem.list(caller=ALICE, limit=100, category="preference") == []  # nothing half-written
        later = utcnow() + timedelta(seconds=2)  # the dead worker's lease (1 s) has run out
        monkeypatch.setattr(_jobs, "utcnow", lambda: later)
        again = mem.upkeep.run_job("rescuer")
        assert again is not None and again.status == "done" and again.attempts == 2 and again.worker == "rescuer"
        assert [m.content for m in mem.list(caller=ALICE, limit=100, category="preference")] == ["The user prefers aisle seats."]
        assert len([m for m in mem.list(caller=ALICE, limit=100) if m.source_type == "extraction"]) == 2


def test_doctor_says_whether_the_llm_answers(db_target, llm_stub, tmp_path):
    from click.testing import CliRunner

    from clawrecall.cli import cli

    config = tmp_path / "llm.toml"
    config.write_text(f'[llm]\nprovider = "openai"\nbase_url = "{llm_stub.openai_base_url}"\nmodel = "stub-model"\n'
                      'api_key = "sk-test-secret"\nmax_retries = 0\n')
    Memory.open(db_target).close()

    def doctor() -> dict:
        result = CliRunner().invoke(cli, ["--db", str(db_target), "--config", str(config), "doctor", "--json"])
        assert "sk-test-secret" not in result.output
        return next(c for c in json.loads(result.stdout)["checks"] if c["name"] == "llm")

    assert doctor()["status"] == "ok" and "answers" in doctor()["detail"]
    llm_stub.script.append({"status": 503, "message": "overloaded"})
    down = doctor()
    assert down["status"] == "warn" and "wait and retry" in down["detail"]
    no_llm = CliRunner().invoke(cli, ["--db", str(db_target), "doctor", "--json"])
    check = next(c for c in json.loads(no_llm.stdout)["checks"] if c["name"] == "llm")
    assert check["status"] == "ok" and check["detail"].startswith("none configured")


def test_erasing_the_person_while_the_model_answers_writes_nothing_of_the_erased_conversation(db_target, llm_stub):
    """The extract job of a conversation in the user's scope goes with the agent's erasure (its segments are the
    agent's): the worker loses its lease, and neither the facts nor their snippets come back."""
    with open_mem(db_target, llm_stub) as mem:
        closed = say(mem, ["I moved to Brno last month.", "Nice!", "And I started a new job.", "Congrats."], start=T0)
        erased = {}

        def erase_then_answer(request):
            erased.update(mem.erase(agent_id="main").erased)  # while the worker waits for the model
            return {"json": {"facts": [fact("In February 2026 the user moved to Brno.")], "summary": "Moving."}}

        llm_stub.script.append(erase_then_answer)
        job = mem.upkeep.run_job("w1", kinds=["extract"])
        assert erased["segments"] == 1 and erased["jobs"] == 2  # the extract and summarize jobs, though in user:alice
        assert job is None or job.status != "done"
        assert mem._store.segments.get(closed.id) is None
        assert mem.list(caller=Caller(), limit=100) == []  # no fact, no message
        assert mem._store.run("SELECT count(*) FROM fact_occurrences")[0][0] == 0


def test_an_embedding_provider_that_is_down_makes_the_job_wait_before_the_llm_is_asked(db_target, llm_stub, monkeypatch):
    import numpy as np

    llm_stub.default = {"json": {"facts": [fact("The user prefers aisle seats.", category="preference")], "summary": None}}
    with open_mem(db_target, llm_stub, extraction={"summaries": False}) as mem:
        say(mem, ["I prefer aisle seats.", "Noted.", "On every flight.", "Sure."], start=T0)
        mem.add("The user flies to Lisbon often.", caller=ALICE)  # a known fact to look for by meaning
        embed = type(mem.upkeep.embedder)._embed_batch
        dims = mem.upkeep.embedder.dimensions
        monkeypatch.setattr(type(mem.upkeep.embedder), "_embed_batch",
                            lambda self, texts, kind: np.zeros((len(texts), dims), dtype=np.float32))
        waiting = mem.upkeep.run_job("w1")
        assert waiting.status == "queued" and waiting.attempts == 0 and "embedding provider" in waiting.last_error
        assert llm_stub.requests == []  # no tokens spent on a job that could not finish
        monkeypatch.setattr(type(mem.upkeep.embedder), "_embed_batch", embed)
        mem._store.run(f"UPDATE jobs SET run_after = created_at WHERE id = {mem._store.dialect.p}", (waiting.id,))
        assert mem.upkeep.run_job("w1").status == "done"
        assert [m.content for m in mem.list(caller=ALICE, category="preference")] == ["The user prefers aisle seats."]
