"""The extraction benchmarks' own parts that run without an LLM: the labelled set and its scoring
(bench/extraction.py), and the counting stub both systems are measured through (bench/llm_tokens.py)."""

import json
import sys
import urllib.request
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import extraction  # noqa: E402
import llm_tokens  # noqa: E402


@pytest.fixture(scope="module")
def data() -> dict:
    return json.loads(extraction.DATA.read_text())


def test_the_set_is_consistent_and_the_scoring_checks_pass(data):
    assert extraction.self_check(data) == []
    info = extraction.describe(data)
    assert info["updates"] >= 30 and info["chit_chat_segments"] >= 5
    assert info["languages"]["cs"] == 3 and info["languages"]["ru"] == 3


def test_overlapping_labels_are_reported(data):
    first = data["conversations"][0]["segments"][0]["facts"]
    broken = {**data, "conversations": [{**data["conversations"][0], "segments": [
        {**data["conversations"][0]["segments"][0], "facts": [first[0], {**first[1], "must": ["FTP"]}]}]}]}
    assert any("also matches" in p for p in extraction.check_data(broken))


def test_an_extraction_that_keeps_everything_as_new_loses_updates_and_precision(data):
    conv = next(c for c in data["conversations"] if c["id"] == "c01")
    produced = extraction.perfect(conv, ignore_updates=True)
    produced.append(extraction.Produced("dup", "FTP is 262 W", "fact"))  # the new value stored twice
    s = extraction.score(conv, produced)
    assert s.updates_ok == 0 and s.stale == s.updates == 2
    assert s.duplicates == 1 and s.correct == len(produced) - 1


@pytest.fixture
def stub():
    s = llm_tokens.Stub(llm_tokens.Counter(llm_tokens.default_tokenizer()))
    yield s
    s.close()


def post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def test_stub_answers_mem0s_additive_prompt_and_counts_what_it_was_sent(stub):
    prompt = ("## Summary\n\n\n## Existing Memories\n[]\n\n## New Messages\n"
              "user: Caroline: I went to a LGBTQ support group yesterday and it was so powerful.\n"
              "assistant: Melanie: Wow cool!\n\n## Observation Date\n2026-01-01\n\n# Output:")
    messages = [{"role": "system", "content": "You are a Memory Extractor."}, {"role": "user", "content": prompt}]
    r = post(stub.base_url + "/chat/completions", {"model": "m", "messages": messages, "response_format": {"type": "json_object"}})
    answer = json.loads(r["choices"][0]["message"]["content"])
    # one fact per message of five words or more, its relative time left out
    assert [m["text"] for m in answer["memory"]] == ["Caroline: I went to a LGBTQ support group and it was so powerful."]
    count = stub.count
    assert r["usage"]["prompt_tokens"] == count("You are a Memory Extractor.") + count(prompt)
    assert r["usage"]["completion_tokens"] == count(r["choices"][0]["message"]["content"])
    assert stub.snapshot()["input_tokens"] == r["usage"]["prompt_tokens"]


def test_stub_fills_a_json_schema_and_bills_the_schema_as_input(stub):
    schema = {"type": "object", "required": ["facts"], "properties": {"facts": {"type": "array", "items": {"$ref": "#/$defs/F"}}},
              "$defs": {"F": {"type": "object", "properties": {
                  "text": {"type": "string"}, "action": {"enum": ["new", "repeat", "update"]},
                  "source": {"type": "array", "items": {"type": "integer"}}, "existing": {"anyOf": [{"type": "null"}, {"type": "string"}]}}}}}
    content = "[1] user (2026-01-05): My FTP is 262 W now, up from 250.\n[2] assistant: Nice!"
    fmt = {"type": "json_schema", "json_schema": {"name": "facts", "schema": schema, "strict": True}}
    r = post(stub.base_url + "/chat/completions", {"model": "m", "messages": [{"role": "user", "content": content}], "response_format": fmt})
    answer = json.loads(r["choices"][0]["message"]["content"])
    assert answer == {"facts": [{"text": "My FTP is 262 W, up from 250.", "action": "new", "source": [1], "existing": None}]}
    assert r["usage"]["prompt_tokens"] == stub.count(content) + stub.count(json.dumps(schema))


def test_stub_embeddings_are_deterministic_unit_vectors(stub):
    r1 = post(stub.base_url + "/embeddings", {"model": "e", "input": ["my FTP is 262 W", "dinner plans"]})
    r2 = post(stub.base_url + "/embeddings", {"model": "e", "input": "my FTP is 262 W", "dimensions": 64})
    a, b = (d["embedding"] for d in r1["data"])
    assert r2["data"][0]["embedding"] == a and len(a) == 64
    assert abs(sum(x * x for x in a) - 1) < 1e-9 and a != b
    assert stub.snapshot()["requests"] == 0 and stub.snapshot()["embedding_requests"] == 2
