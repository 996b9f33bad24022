"""The exception tree: every deliberate error is declared in `clawrecall.errors` with a code and an HTTP
status, and the REST server answers a raised one with exactly that status, whatever module raised it."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError as PydanticValidationError

import clawrecall
from clawrecall import Memory, errors
from clawrecall.auth import TokenStore
from clawrecall.errors import AmbiguousIdError, ClawrecallError, pydantic_message
from clawrecall.models import NewMemory, StartupEntry
from clawrecall.server import create_app


def _every_error() -> list[type[ClawrecallError]]:
    """Every subclass of ClawrecallError in any clawrecall module, after importing them all."""
    for module in pkgutil.walk_packages(clawrecall.__path__, "clawrecall."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    found, todo = [], [ClawrecallError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return sorted(set(found), key=lambda c: c.__name__)


ERRORS = _every_error()


def _instance(cls: type[ClawrecallError]) -> ClawrecallError:
    return cls("abcd1234", ["abcd1234-1", "abcd1234-2"]) if cls is AmbiguousIdError else cls("it went wrong")


def test_the_walk_finds_errors_raised_outside_the_engine():
    names = {cls.__name__ for cls in ERRORS}
    assert {"AuthError", "ForbiddenError", "UnknownToolError", "PayloadTooLargeError", "StorageError"} <= names


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: c.__name__)
def test_every_error_is_declared_in_errors_with_its_own_code_and_status(cls):
    assert cls.__module__ == "clawrecall.errors" and getattr(errors, cls.__name__) is cls
    assert "code" in vars(cls) and "status" in vars(cls), f"{cls.__name__} must declare its own code and status"
    assert isinstance(cls.code, str) and cls.code and 400 <= cls.status <= 599


def test_codes_are_distinct():
    codes = [cls.code for cls in ERRORS]
    assert len(codes) == len(set(codes))


@pytest.fixture(scope="module")
def raising_client(tmp_path_factory):
    """An in-process server (no model) with one extra route that raises the error it is told to."""
    with Memory.open(tmp_path_factory.mktemp("errors") / "m.db", check_embedding=False) as mem:
        store = TokenStore.for_memory(mem)
        app = create_app(mem, tokens=store, allow_anonymous=True)
        by_name = {cls.__name__: cls for cls in ERRORS}

        def boom(name: str) -> None:
            raise _instance(by_name[name])

        app.add_api_route("/test/raise/{name}", boom, methods=["GET"])
        yield TestClient(app, base_url="http://127.0.0.1:8765")
        store.close()


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: c.__name__)
def test_the_server_answers_each_error_with_its_status_and_code(raising_client, cls):
    response = raising_client.get(f"/test/raise/{cls.__name__}")
    assert response.status_code == cls.status
    assert response.json() == {"error": {"code": cls.code, "message": str(_instance(cls))}}
    assert ("www-authenticate" in response.headers) == (cls is errors.AuthError)


def test_real_triggers_keep_their_statuses(raising_client):
    assert raising_client.get("/v1/memories/00000000-0000-0000-0000-000000000000").status_code == 404
    assert raising_client.get("/v1/memories/not-an-id").status_code == 404  # a path that names nothing
    assert raising_client.post("/v1/tools/no_such_tool", json={}).status_code == 404
    invalid = raising_client.get("/v1/memories", params={"limit": "many"})
    assert invalid.status_code == 422 and invalid.json()["error"]["code"] == "invalid_request"
    assert invalid.json()["error"]["message"].startswith("query.limit: ")


def _pydantic_error(model, data) -> PydanticValidationError:
    with pytest.raises(PydanticValidationError) as caught:
        model.model_validate(data)
    return caught.value


def test_one_formatter_for_pydantic_errors():
    exc = _pydantic_error(NewMemory, {"content": "x", "importance": 7, "tags": "a", "bogus": 1})
    assert pydantic_message(exc) == (
        "tags: Input should be a valid list; importance: Input should be less than or equal to 1; "
        "bogus: Extra inputs are not permitted"
    )
    assert pydantic_message(exc, NewMemory).split("; ")[1] == "importance: must be between 0 and 1, got 7"
    # the bounds are the field's own, not 0 and 1 for everything
    entry = _pydantic_error(StartupEntry, {"key": "k", "content": "c", "priority": 12, "updated_at": "2026-01-01T00:00"})
    assert pydantic_message(entry, StartupEntry) == "priority: must be between 0 and 9, got 12"
    # errors raised by a validator lose pydantic's "Value error, " prefix; a rule across fields has no location
    assert pydantic_message([{"loc": (), "msg": "Value error, a and b disagree"}]) == "a and b disagree"


def test_the_engine_names_each_fields_own_bounds(tmp_path):
    with Memory.open(tmp_path / "bounds.db") as mem:
        with pytest.raises(errors.ValidationError, match=r"^importance: must be between 0 and 1, got 7$"):
            mem.add_many([{"content": "x", "importance": 7}])
        with pytest.raises(errors.ValidationError, match=r"^priority: must be between 0 and 9, got 12$"):
            mem.startup.set("soul", "You are terse.", priority=12)
