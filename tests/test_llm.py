"""The LLM clients, through the real openai and anthropic SDKs, against a scripted server on 127.0.0.1
(tests/llm_stub_server.py): every branch on both providers."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest

from clawrecall.config import LLMConfig, load_config
from clawrecall.errors import ConfigError, LLMError, LLMRefusedError, LLMUnavailableError
from clawrecall.llm import Completion, create_llm

SECRET = "sk-test-SECRET-4242424242"
SCHEMA = {
    "type": "object",
    "properties": {"facts": {"type": "array", "items": {"type": "string"}}},
    "required": ["facts"],
    "additionalProperties": False,
}
ASK = [{"role": "system", "content": "You extract facts."}, {"role": "user", "content": "I moved to Brno in May"}]
PROVIDERS = ["openai", "anthropic"]


def make(stub, provider: str, **settings):
    """A client of `provider` aimed at the stub, quick to give up and to back off."""
    base_url = stub.openai_base_url if provider == "openai" else stub.anthropic_base_url
    config = LLMConfig(**{"provider": provider, "model": "stub-model", "base_url": base_url, "api_key": SECRET,
                          "timeout_s": 2.0, "max_retries": 2, **settings})
    llm = create_llm(config)
    llm.backoff_base_s = 0.01
    return llm


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_schema_is_sent_in_the_providers_structured_mode_and_the_answer_is_its_json(llm_stub, provider):
    llm_stub.script.append({"json": {"facts": ["On 2026-05-01 the user moved to Brno"]}})
    answer = make(llm_stub, provider).complete(ASK, schema=SCHEMA, schema_name="extraction", max_tokens=300)
    assert json.loads(answer.text) == {"facts": ["On 2026-05-01 the user moved to Brno"]}
    assert answer.model == "stub-model" and answer.refusal is None
    body = llm_stub.requests[0].body
    assert body["model"] == "stub-model" and body["max_tokens"] == 300
    if provider == "openai":
        assert body["response_format"] == {
            "type": "json_schema", "json_schema": {"name": "extraction", "schema": SCHEMA, "strict": True},
        }
        assert body["messages"] == ASK and body["temperature"] == 0.0
        assert answer.finish_reason == "stop"
    else:
        assert body["tools"][0]["name"] == "extraction" and body["tools"][0]["input_schema"] == SCHEMA
        assert body["tool_choice"] == {"type": "tool", "name": "extraction"}
        assert body["system"] == "You extract facts." and body["messages"] == ASK[1:]
        assert answer.finish_reason == "tool_use"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_without_a_schema_the_answer_is_plain_text(llm_stub, provider):
    llm_stub.script.append({"text": "Brno is in Moravia."})
    answer = make(llm_stub, provider).complete([{"role": "user", "content": "Where is Brno?"}])
    assert answer.text == "Brno is in Moravia."
    body = llm_stub.requests[0].body
    assert "response_format" not in body and "tools" not in body


@pytest.mark.parametrize("provider", PROVIDERS)
def test_malformed_json_comes_back_as_text_for_the_caller_to_judge(llm_stub, provider):
    llm_stub.script.append({"text": '{"facts": ["unterminated'})
    answer = make(llm_stub, provider).complete(ASK, schema=SCHEMA)
    assert answer.text == '{"facts": ["unterminated'


@pytest.mark.parametrize("status", [400, 422])
def test_a_server_without_json_schema_is_asked_for_json_object_from_then_on(llm_stub, status):
    llm_stub.script += [
        {"status": status, "message": "response_format type json_schema is not supported by this server"},
        {"json": {"facts": []}},
        {"json": {"facts": ["again"]}},
    ]
    llm = make(llm_stub, "openai")
    assert json.loads(llm.complete(ASK, schema=SCHEMA).text) == {"facts": []}
    assert json.loads(llm.complete(ASK, schema=SCHEMA).text) == {"facts": ["again"]}
    first, fallback, later = (r.body for r in llm_stub.requests)
    assert first["response_format"]["type"] == "json_schema"
    assert fallback["response_format"] == later["response_format"] == {"type": "json_object"}
    # the schema then travels in words, which is also what json_object mode requires ("JSON" in the messages)
    assert fallback["messages"][:2] == ASK and json.dumps(SCHEMA) in fallback["messages"][-1]["content"]


def test_json_schema_mode_does_not_fall_back_and_other_400s_do_not_either(llm_stub):
    llm_stub.script.append({"status": 400, "message": "json_schema is not supported"})
    with pytest.raises(LLMError, match="HTTP 400 .*json_schema is not supported") as caught:
        make(llm_stub, "openai", structured_output="json_schema").complete(ASK, schema=SCHEMA)
    assert type(caught.value) is LLMError
    llm_stub.script.append({"status": 400, "message": "model not found"})
    with pytest.raises(LLMError, match="model not found"):
        make(llm_stub, "openai").complete(ASK, schema=SCHEMA)
    assert len(llm_stub.requests) == 2  # no retry, no fallback


@pytest.mark.parametrize("mode", ["json_object", "none"])
def test_the_configured_mode_is_the_one_used(llm_stub, mode):
    llm_stub.script.append({"json": {"facts": []}})
    make(llm_stub, "openai", structured_output=mode).complete(ASK, schema=SCHEMA)
    body = llm_stub.requests[0].body
    assert body.get("response_format") == ({"type": "json_object"} if mode == "json_object" else None)
    assert json.dumps(SCHEMA) in body["messages"][-1]["content"]


@pytest.fixture
def waits(monkeypatch):
    """The clients' waits between attempts and for the rate limit, recorded instead of slept."""
    from clawrecall.llm import base

    slept: list[float] = []
    monkeypatch.setattr(base, "_sleep", slept.append)
    return slept


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_server_that_does_not_answer_in_time_is_asked_again_then_reported_unavailable(llm_stub, provider, waits):
    llm_stub.default = {"delay": 3, "text": "too late"}
    llm = make(llm_stub, provider, timeout_s=0.3, max_retries=2)
    with pytest.raises(LLMUnavailableError, match=r"unavailable \(after 3 attempts\): no answer within 0.3s") as caught:
        llm.complete(ASK)
    assert len(llm_stub.requests) == 3 and caught.value.retry_after is None
    assert len(waits) == 2 and all(0 <= w <= 0.04 for w in waits)  # backoff with full jitter, the server named none
    assert caught.value.status == 503 and caught.value.code == "llm_unavailable"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_429_waits_as_long_as_retry_after_says(llm_stub, provider, waits):
    llm_stub.script += [{"status": 429, "headers": {"Retry-After": "1"}}, {"json": {"facts": []}}]
    assert make(llm_stub, provider).complete(ASK, schema=SCHEMA).text == '{"facts": []}'
    assert waits == [1.0] and len(llm_stub.requests) == 2


def test_retry_after_as_an_http_date_is_honoured(llm_stub, waits):
    when = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=30), usegmt=True)
    llm_stub.script += [{"status": 503, "headers": {"Retry-After": when}}, {"text": "ok"}]
    make(llm_stub, "openai").complete(ASK)
    [wait] = waits
    assert 20 <= wait <= 30  # the date has whole seconds


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_long_retry_after_is_capped_and_reported_when_the_retries_are_spent(llm_stub, provider, waits):
    llm_stub.default = {"status": 429, "headers": {"Retry-After": "120"}, "message": "rate limited"}
    llm = make(llm_stub, provider, max_retries=2, max_retry_after_s=0.2)
    with pytest.raises(LLMUnavailableError, match="after 3 attempts.*HTTP 429.*rate limited") as caught:
        llm.complete(ASK)
    assert waits == [0.2, 0.2]
    assert caught.value.retry_after == 120.0  # what the server asked for, for whoever reschedules the work


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_500_then_an_answer_succeeds(llm_stub, provider):
    llm_stub.script += [{"status": 500}, {"status": 502}, {"text": "fine"}]
    assert make(llm_stub, provider, max_retries=2).complete(ASK).text == "fine"
    assert len(llm_stub.requests) == 3


def test_backoff_without_retry_after_grows_with_full_jitter(llm_stub):
    llm = make(llm_stub, "openai")
    llm.backoff_base_s, llm.backoff_max_s = 1.0, 3.0
    waits = [[llm._wait(attempt, None) for _ in range(300)] for attempt in range(4)]
    assert [max(w) <= cap for w, cap in zip(waits, [1, 2, 3, 3])] == [True] * 4
    assert min(waits[0]) < 0.1 and max(waits[2]) > 2.5  # spread over the whole range
    assert llm._wait(0, 5.0) == 5.0 and llm._wait(0, 500.0) == llm.config.max_retry_after_s


def test_an_unreachable_server_is_unavailable(llm_stub):
    url = llm_stub.openai_base_url
    llm_stub.stop()
    llm = create_llm(LLMConfig(provider="openai", model="m", base_url=url, max_retries=1))
    llm.backoff_base_s = 0.01
    with pytest.raises(LLMUnavailableError, match=r"after 2 attempts\): cannot connect to http://127.0.0.1:\d+/v1: .*refused"):
        llm.complete(ASK)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_refusal_is_an_llm_refused_error_that_keeps_what_it_cost(llm_stub, provider):
    llm_stub.script.append({"refusal": "I can't help with that"})
    with pytest.raises(LLMRefusedError, match="refused: I can't help with that") as caught:
        make(llm_stub, provider).complete(ASK, schema=SCHEMA)
    completion = caught.value.completion
    assert completion.refusal == "I can't help with that" and completion.output_tokens == 5
    assert len(llm_stub.requests) == 1  # a refusal is not retried


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_content_filter_stop_is_a_refusal(llm_stub, provider):
    reason = "content_filter" if provider == "openai" else "refusal"
    llm_stub.script.append({"text": "", "finish_reason": reason})
    with pytest.raises(LLMRefusedError):
        make(llm_stub, provider).complete(ASK)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_refused_key_is_said_without_the_key(llm_stub, provider, caplog):
    caplog.set_level(logging.DEBUG)
    # a server that echoes the key back, and a 500 before it so the retry is logged too
    llm_stub.script += [{"status": 500, "message": f"crash for {SECRET}"},
                        {"status": 401, "message": f"Incorrect API key provided: {SECRET}"}]
    llm = make(llm_stub, provider)
    with pytest.raises(LLMError, match=r"the API key was refused \(HTTP 401") as caught:
        llm.complete(ASK)
    assert type(caught.value) is LLMError and len(llm_stub.requests) == 2  # a 401 is not retried
    assert llm_stub.requests[0].headers.get("authorization") == f"Bearer {SECRET}"  # it was sent
    shown = [str(caught.value), repr(caught.value), repr(llm), str(llm.config), repr(llm.config), caplog.text]
    assert caplog.text and not [text for text in shown if SECRET in text]
    assert "Incorrect API key provided: ***" in str(caught.value)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_at_most_max_concurrency_requests_are_in_flight(llm_stub, provider):
    llm_stub.default = {"delay": 0.15, "text": "ok"}
    llm = make(llm_stub, provider, max_concurrency=3)
    threads = [threading.Thread(target=llm.complete, args=(ASK,)) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(llm_stub.requests) == 10 and llm_stub.max_in_flight == 3


def test_the_rate_limit_spaces_requests_across_threads(llm_stub):
    llm = make(llm_stub, "openai", requests_per_minute=600)  # 10 a second, at most 10 at once
    started = time.monotonic()
    threads = [threading.Thread(target=llm.complete, args=(ASK,)) for _ in range(25)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(llm_stub.requests) == 25 and time.monotonic() - started >= 1.4  # 10 at once, then 15 at 0.1 s each


def test_the_rate_limit_lets_a_seconds_worth_through_at_once_then_spaces_them(monkeypatch, waits):
    from clawrecall.llm import base

    now = [100.0]
    monkeypatch.setattr(base, "_monotonic", lambda: now[-1])
    monkeypatch.setattr(base, "_sleep", lambda s: (waits.append(s), now.append(now[-1] + s)))
    bucket = base.TokenBucket(8.0)  # waits of 1/8 s: exact in binary, as the clock's sums
    for _ in range(11):
        bucket.take()
    assert waits == [0.125, 0.125, 0.125]
    now.append(now[-1] + 60)  # a quiet minute refills one second's worth, no more
    for _ in range(9):
        bucket.take()
    assert waits == [0.125] * 4


@pytest.mark.parametrize("provider", PROVIDERS)
def test_usage_comes_from_the_provider_and_cost_from_the_configured_prices(llm_stub, provider):
    llm_stub.script.append({"text": "one two three four"})
    llm = make(llm_stub, provider, price_input_per_mtok=0.15, price_output_per_mtok=0.6)
    answer = llm.complete([{"role": "user", "content": "five words in this prompt"}])
    assert (answer.input_tokens, answer.output_tokens) == (5, 4)
    assert (llm_stub.input_tokens, llm_stub.output_tokens) == (5, 4)
    assert llm.cost(answer) == pytest.approx((5 * 0.15 + 4 * 0.6) / 1e6)
    assert make(llm_stub, provider).cost(answer) is None


def test_cost_of_a_known_completion():
    llm = create_llm(LLMConfig(provider="openai", model="gpt-4o-mini", api_key=SECRET,
                               price_input_per_mtok=0.15, price_output_per_mtok=0.6))
    assert llm.name == "openai/gpt-4o-mini" and SECRET not in repr(llm)
    assert llm.cost(Completion("x", 1_000_000, 2_000_000, "gpt-4o-mini", "stop")) == pytest.approx(1.35)


def test_no_provider_means_no_client():
    assert LLMConfig().provider == "none" and create_llm(LLMConfig()) is None


@pytest.mark.parametrize(
    ("llm", "message"),
    [
        ({"provider": "gemini", "model": "m"}, "llm.provider: Input should be 'none', 'openai' or 'anthropic'"),
        ({"provider": "openai"}, "llm provider 'openai' needs llm.model"),
        ({"provider": "anthropic", "model": " "}, "needs llm.model"),
        ({"provider": "openai", "model": "m", "base_url": "localhost:11434"}, "llm.base_url must be an http"),
        ({"price_input_per_mtok": 1.0}, "set both llm.price_input_per_mtok and llm.price_output_per_mtok"),
        ({"max_concurrency": 0}, "llm.max_concurrency"),
        ({"structured_output": "xml"}, "llm.structured_output"),
        ({"colour": "red"}, "unknown keys: llm.colour"),
    ],
)
def test_config_validation(llm, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        load_config(env={}, overrides={"llm": llm})


def test_the_llm_section_comes_from_the_environment_too():
    config = load_config(env={"CLAWRECALL_LLM__PROVIDER": "anthropic", "CLAWRECALL_LLM__MODEL": "claude-x",
                              "CLAWRECALL_LLM__REQUESTS_PER_MINUTE": "50"})
    assert (config.llm.provider, config.llm.model, config.llm.requests_per_minute) == ("anthropic", "claude-x", 50)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_key_comes_from_the_providers_variable_or_the_one_named(llm_stub, provider, monkeypatch):
    default_env = "OPENAI_API_KEY" if provider == "openai" else "ANTHROPIC_API_KEY"
    monkeypatch.delenv(default_env, raising=False)
    with pytest.raises(ConfigError, match=f"needs an API key: set {default_env} or llm.api_key"):
        create_llm(LLMConfig(provider=provider, model="m"))  # the provider's own API needs a key
    monkeypatch.setenv(default_env, SECRET)
    monkeypatch.setenv("MY_LLM_KEY", SECRET + "-named")
    base_url = llm_stub.openai_base_url if provider == "openai" else llm_stub.anthropic_base_url
    create_llm(LLMConfig(provider=provider, model="m", base_url=base_url)).complete(ASK)
    create_llm(LLMConfig(provider=provider, model="m", base_url=base_url, api_key_env="MY_LLM_KEY")).complete(ASK)
    monkeypatch.delenv(default_env)
    create_llm(LLMConfig(provider=provider, model="m", base_url=base_url)).complete(ASK)  # a local server needs none
    keys = [r.headers.get("authorization") for r in llm_stub.requests]
    assert keys == [f"Bearer {SECRET}", f"Bearer {SECRET}-named", "Bearer unused"]


def test_importing_clawrecall_and_its_llm_package_loads_no_sdk():
    code = "import sys, clawrecall, clawrecall.llm, clawrecall.cli; print(sorted({'openai', 'anthropic'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("body", [{"hello": 1}, ["a list"], "a string"])
def test_an_answer_that_is_no_completion_is_an_llm_error(llm_stub, provider, body):
    llm_stub.script.append({"body": body})
    with pytest.raises(LLMError, match="unexpected answer from http://127.0.0.1"):
        make(llm_stub, provider).complete(ASK)


def test_the_script_may_compute_each_answer_from_the_request(llm_stub):
    """How a test answers extraction prompts: a callable gets the request (its text and schema)."""
    llm_stub.script.append(lambda request: {"json": {"facts": [request.text.split()[-1]]}})
    llm_stub.default = lambda request: {"text": f"schema: {request.schema is not None}"}
    for provider in PROVIDERS:
        llm = make(llm_stub, provider)
        answers = [llm.complete(ASK, schema=SCHEMA).text, llm.complete(ASK).text]
        assert answers == (['{"facts": ["May"]}', "schema: False"] if provider == "openai" else ["schema: True", "schema: False"])
    assert [r.path for r in llm_stub.requests] == ["/v1/chat/completions"] * 2 + ["/v1/messages"] * 2
    assert llm_stub.requests[2].schema == SCHEMA and "You extract facts." in llm_stub.requests[2].text


def test_messages_never_show_credentials_in_the_base_url(llm_stub):
    url = llm_stub.openai_base_url.replace("http://", "http://alice:hunter2@")
    llm_stub.script.append({"status": 403, "message": "no"})
    llm = create_llm(LLMConfig(provider="openai", model="m", base_url=url))
    with pytest.raises(LLMError, match=r"HTTP 403 from http://127\.0\.0\.1:\d+/v1: no") as caught:
        llm.complete(ASK)
    assert "hunter2" not in str(caught.value) + repr(llm)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("3", 3.0), ("0.5", 0.5), ("-2", 0.0), ("soon", None), ("nan", None), ("inf", None), (None, None),
     ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0)],  # a date in the past: at once
)
def test_retry_after_is_read_as_seconds_or_a_date(header, seconds):
    from clawrecall._time import retry_after_seconds

    assert retry_after_seconds(header) == seconds
