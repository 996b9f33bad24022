"""One `Caller` says who is calling, on every verb: built from `caller=` or from the `user_id=`/`agent_id=`
keywords, with a token's scope allow-list applied by the engine's one scope check (both backends)."""

from __future__ import annotations

import pytest

from clawrecall import Caller, NotFoundError, ScopeError, ValidationError
from clawrecall.config import AccessConfig
from clawrecall.scopes import may_write, read_scopes, write_scope

ALICE = Caller("alice", "main", "s1")
ALICE_TOKEN = Caller("alice", "main", "s1", scopes=("user:alice",))  # a token that may not touch `global`


@pytest.fixture
def seeded(mem):
    ids = {
        "global": mem.add("The office wifi password changes every Monday").id,
        "alice": mem.add("Alice prefers dark mode in every editor", user_id="alice").id,
        "bob": mem.add("Bob keeps his notes in plain text files", user_id="bob").id,
    }
    return mem, ids


def test_keywords_build_the_same_caller_as_caller(seeded):
    mem, ids = seeded
    by_keywords = {r.id for r in mem.list(user_id="alice", agent_id="main")}
    assert by_keywords == {r.id for r in mem.list(caller=ALICE)} == {ids["global"], ids["alice"]}
    assert mem.count(caller=Caller("bob")) == mem.count(user_id="bob") == 2


def test_caller_and_keywords_together_are_an_error(seeded):
    mem, ids = seeded
    for call in (
        lambda: mem.add("x", caller=ALICE, user_id="alice"),
        lambda: mem.search("dark mode", caller=ALICE, agent_id="main"),
        lambda: mem.get(ids["alice"], caller=ALICE, user_id="alice"),
        lambda: mem.startup.list(caller=ALICE, user_id="alice"),
    ):
        with pytest.raises(ValidationError, match="not both"):
            call()
    with pytest.raises(ValidationError, match="caller must be a Caller"):
        mem.list(caller={"user_id": "alice"})
    assert mem.count() == 3  # nothing written


def test_a_write_belongs_to_the_caller_its_session_and_names_it_in_history(mem):
    added = mem.add("Alice's standup moved to 9:30", caller=ALICE)
    assert (added.memory.scope, added.memory.user_id, added.memory.agent_id, added.memory.session_id) == (
        "user:alice", "alice", "main", "s1"
    )
    elsewhere = mem.add("Alice's flight leaves at noon", caller=ALICE, session_id="s2")
    assert elsewhere.memory.session_id == "s2"  # a session named on the call wins
    assert mem.history(added.id)[0].actor == "user:alice agent:main"
    assert mem.history(added.id, caller=ALICE)[0].action == "add"


def test_a_token_allow_list_narrows_every_read_and_write(seeded):
    mem, ids = seeded
    assert {r.id for r in mem.list(caller=ALICE_TOKEN)} == {ids["alice"]}  # not `global`, which ALICE reads
    assert all(h.memory.scope == "user:alice" for h in mem.search("office wifi password", caller=ALICE_TOKEN))
    with pytest.raises(NotFoundError):
        mem.get(ids["global"], caller=ALICE_TOKEN)
    with pytest.raises(ScopeError, match="not among this token's scopes"):
        mem.list(caller=ALICE_TOKEN, scope="global")
    with pytest.raises(ScopeError, match="not among this token's scopes"):
        mem.add("Company holiday on Friday", caller=ALICE_TOKEN, scope="global")
    with pytest.raises(ScopeError, match="item 2: scope 'global' is not among this token's scopes"):
        mem.add_many([{"content": "Alice likes tea"}, {"content": "Everyone likes tea", "scope": "global"}], caller=ALICE_TOKEN)
    with pytest.raises(NotFoundError):
        mem.delete(ids["global"], caller=ALICE_TOKEN)
    assert mem.add("Alice likes green tea", caller=ALICE_TOKEN).memory.scope == "user:alice"
    with pytest.raises(ScopeError, match="not among this token's scopes"):
        mem.startup.set("rules", "Be brief.", caller=ALICE_TOKEN, scope="global")
    assert mem.count(include_deleted=True) == 4 and mem.get(ids["global"]).deleted_at is None


def test_the_one_scope_check_applies_the_allow_list():
    no_grants = AccessConfig()
    assert read_scopes(ALICE_TOKEN, None, access=no_grants) == ["user:alice"]
    assert read_scopes(ALICE, None, access=no_grants) == ["global", "user:alice", "agent:main"]
    assert read_scopes(Caller(), None, access=no_grants) is None  # the administrator reads everything
    assert read_scopes(ALICE, "*", access=no_grants) == ["global", "user:alice", "agent:main"]
    with pytest.raises(ScopeError, match="not among this token's scopes"):
        read_scopes(ALICE_TOKEN, "*", access=no_grants)
    with pytest.raises(ScopeError, match="not accessible to user 'alice'"):
        read_scopes(ALICE, "user:bob", access=no_grants)
    assert write_scope(ALICE_TOKEN, None, access=no_grants) == "user:alice"
    assert may_write(ALICE_TOKEN, access=no_grants) and not may_write(ALICE_TOKEN, "global", access=no_grants)
    assert not may_write(ALICE, "user:bob", access=no_grants)
    assert Caller("alice", scopes=["user:alice"]).scopes == ("user:alice",)  # hashable, like the rest of a Caller
    with pytest.raises(ValidationError, match="invalid user_id"):
        Caller("alice\x00")


@pytest.mark.parametrize("forged, why", [
    ("alice\u200b", "invisible"),  # a zero-width space
    ("ali\u202ece", "invisible"),  # a bidi override
    ("\u3164alice", "NFKC"),  # a Hangul filler
    ("\u0441arol", "mixes scripts"),  # a Cyrillic с before Latin letters
    ("ｃarol", "NFKC"),  # fullwidth
    ("ali\u0301ce", "NFKC"),  # a combining accent: one letter written two ways
])
def test_an_id_that_could_pass_for_another_is_refused_at_every_door(forged, why):
    """Two users whose ids display the same would be told apart by nothing a person reads: refused where a
    caller is built (engine, CLI, tokens, the service headers), with the reason."""
    from clawrecall.auth import identity

    for make in (lambda: Caller(forged), lambda: Caller(None, forged), lambda: identity(forged, None, None)):
        with pytest.raises(ValidationError, match=why):
            make()
    for fine in ("alice", "José", "Ирина", "山田たろう", "Taro山田", "telegram:123", "user.name@example.org"):
        assert Caller(fine).user_id == fine
