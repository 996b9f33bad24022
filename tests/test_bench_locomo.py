"""bench/locomo.py's fact-key comparison (`--extract`) against a scripted LLM: the extraction jobs run, the
messages get the facts as keys, a search finds a turn by a word only its fact has, and `unkey` takes
that away again, so the benchmark's two runs differ by the keys alone."""

import re
import sys
from pathlib import Path

from llm_stub_server import running_stub

from clawrecall import Memory

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import locomo

SAMPLE = {
    "sample_id": "s1",
    "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a greyhound, Biscuit, from the shelter."},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "That is lovely, how old is Biscuit?"},
            {"speaker": "Ann", "dia_id": "D1:3", "text": "Three, and Biscuit sleeps all day on the sofa."},
        ],
        "session_2_date_time": "10:00 am on 20 May, 2023",
        "session_2": [
            {"speaker": "Ann", "dia_id": "D2:1", "text": "I start a pottery class on Monday."},
            {"speaker": "Bob", "dia_id": "D2:2", "text": "Good luck with the wheel."},
        ],
    },
    "qa": [
        {"question": "What kind of dog does Ann have?", "category": 4, "evidence": ["D1:1"]},
        {"question": "What class does Ann take?", "category": 4, "evidence": ["D2:1"]},
    ],
}
# the prompt's message lines: "[n] 2023-05-08 13:56 user: Ann: text"
_LINE = re.compile(r"^\[(\d+)\] \S+ \S+ user: (\w+): (.+)$", re.MULTILINE)


def one_fact_per_user_message(request):
    facts = [{"text": f"{who} owns a canine pet: {text}" if "greyhound" in text else f"{who} said: {text}",
              "category": "fact", "entities": [who], "importance": 0.5, "confidence": 0.9, "valid_from": None,
              "sentiment": "neutral", "source": [int(n)], "action": "new", "existing": None, "visibility": None}
             for n, who, text in _LINE.findall(request.text)]
    return {"json": {"facts": facts, "summary": None}}


def test_extraction_keys_the_messages_and_unkey_removes_only_the_keys(tmp_path):
    with running_stub() as stub:
        stub.default = one_fact_per_user_message
        mem = Memory.open(str(tmp_path / "locomo.db"), embedding={"provider": "hash"}, extraction={"enabled": True},
                          llm={"provider": "openai", "base_url": stub.openai_base_url, "model": "stub", "api_key": "none"})
        try:
            built = locomo.ingest_messages(mem, [SAMPLE], limit_sessions=1)
            assert [q["evidence"] for q in built.questions["s1"]] == [{"D1:1"}]  # D2:1 lies beyond the sessions logged
            assert built.counters == {"questions_beyond_sessions": 1}
            done = locomo.extract(mem, built)
            assert done["facts"] == 2 and done["messages_keyed"] == 2 and done["extract_jobs"] == {"done": 1}
            assert "dead" not in done["jobs"] and done["input_tokens"] > 0

            messages = locomo.asker(mem, built.message_ids, ["message"])
            facts_find_turns = locomo.asker(mem, built.message_ids, facts_find_turns=True)
            assert messages("s1", "canine", "bm25", 10)[0] == ["D1:1"]  # a word only its fact's text has
            assert ["D1:1"] in facts_find_turns("s1", "canine", "bm25", 10)
            assert locomo.asker(mem, built.message_ids)("s1", "canine", "bm25", 10).count([]) >= 1  # the fact, no turn

            assert locomo.unkey(mem, built) == 2
            assert ["D1:1"] not in messages("s1", "canine", "bm25", 10)
            rows = mem._store.memories.fetch(list(built.message_ids)).values()
            assert all(r.keys is None for r in rows) and len(rows) == 3
            assert messages("s1", "greyhound", "bm25", 10)[0] == ["D1:1"]  # the content is still found
        finally:
            mem.close()
