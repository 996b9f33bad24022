"""Fuzz every operation of the live server's `/openapi.json` with schemathesis: no input may cause a 5xx,
and every answer conforms to the description: its status is documented, its content type is, and its
body matches the schema documented for that status (an error's too).

Bounded (a few examples per operation) so the whole run stays within a minute; the server is a
real `clawrecall serve` process, called with a user token.
"""

from __future__ import annotations

import json

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from clawrecall.auth import TokenStore
from clawrecall.server.spawn import spawn_server

EXAMPLES_PER_OPERATION = 6
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
# answered with a stream that stays open (Server-Sent Events): checked by its status and head, then closed
STREAMS = {"/v1/events"}


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    home = tmp_path_factory.mktemp("fuzz")
    store = TokenStore(home / "memory.db")
    token = store.create(user_id="alice", agent_id="main")[1]
    store.close()
    with spawn_server(home / "memory.db", env={"CLAWRECALL_HOME": str(home / "home")}) as server:
        yield server, {"Authorization": f"Bearer {token}"}


def test_no_input_causes_a_server_error_and_every_answer_is_as_described(live):
    server, auth = live
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 20
    failures: list[str] = []
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(case=operation.as_strategy(generation_mode=mode))
            def fuzz(case: schemathesis.Case) -> None:
                if operation.path in STREAMS:
                    _open_stream(case, auth, server.url, documented=set(operation.definition.raw["responses"]))
                else:
                    case.call_and_validate(headers=auth, checks=CHECKS, timeout=60)

            try:
                fuzz()
            except Unsatisfiable:  # no invalid input exists for an operation that takes none
                assert mode is GenerationMode.NEGATIVE
            except Exception as exc:  # a check's failure (schemathesis groups them), with how to reproduce it
                failures.append(f"{operation.label} ({mode.value}): {_first_lines(exc)}")
    assert not failures, "\n".join(failures)
    answered = [r["status"] for r in server.records() if r["logger"] == "clawrecall.access"]
    assert sum(200 <= status < 300 for status in answered) > 2 * len(operations)  # the fuzz got past the door


def _open_stream(case: schemathesis.Case, auth: dict[str, str], base_url: str, documented: set[str]) -> None:
    """A streaming route's answer to a generated request: a documented status, never a 5xx; an event stream
    when it is 200, else a JSON error body. The stream is closed once its head is read."""
    sent = case.as_transport_kwargs(base_url=base_url, headers=auth)
    with httpx.Client(timeout=60) as client, client.stream(
            sent["method"], sent["url"], params=sent.get("params"), headers={**sent["headers"], **auth}) as answer:
        assert answer.status_code < 500 and str(answer.status_code) in documented, (answer.status_code, sent)
        if answer.status_code == 200:
            assert answer.headers["content-type"].startswith("text/event-stream"), answer.headers
        else:
            assert "error" in json.loads(answer.read()), sent


def _first_lines(exc: BaseException) -> str:
    """What failed, on one line: each check's failure, what was sent and what came back."""
    return " ".join(str(exc).split())[:1200]
