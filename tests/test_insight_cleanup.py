"""Insight's clean-up side on both backends: groups of near-identical memories (clusters) found on a
planted set and at a size where not every pair is compared, and the clean-up report with its
confirmed deletion through the one write path, in Python, the CLI and REST."""

from __future__ import annotations

import json
from datetime import timedelta

import numpy as np
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from clawrecall import Caller, Memory, NotFoundError
from clawrecall._time import utcnow
from clawrecall.auth import TokenStore
from clawrecall.cli import cli
from clawrecall.insight.clusters import EXACT_ROWS, groups
from clawrecall.server import create_app

ALICE, BOB = Caller("alice"), Caller("bob")
TEA = ["Alice drinks oolong tea every morning", "Alice drinks oolong tea every morning at home",
       "Every morning Alice drinks oolong tea"]
BIKE = ["Alice rides a red bicycle to work", "Alice rides her red bicycle to work"]


def plant(mem: Memory) -> dict[str, list[str]]:
    ids = {
        "tea": [mem.add(t, caller=ALICE, dedup=False, importance=0.5 + i / 10).id for i, t in enumerate(TEA)],
        "bike": [mem.add(t, caller=ALICE, dedup=False).id for t in BIKE],
        "other": [mem.add("The quarterly tax return is due in April", caller=ALICE).id],
        "bob": [mem.add(TEA[0].replace("Alice", "Bob"), caller=BOB, dedup=False).id,
                mem.add(TEA[1].replace("Alice", "Bob"), caller=BOB, dedup=False).id],
    }
    return ids


def test_clusters_group_near_identical_memories_per_scope_in_what_the_caller_reads(mem):
    ids = plant(mem)
    found = mem.insight.clusters(caller=ALICE)
    assert [(c.scope, sorted(m.id for m in c.memories)) for c in found] == [
        ("user:alice", sorted(ids["tea"])), ("user:alice", sorted(ids["bike"]))]
    tea = found[0]
    assert tea.keep == ids["tea"][2] and sorted(tea.remove) == sorted(ids["tea"][:2])  # the most important stays
    assert 0.8 <= tea.min_similarity <= tea.mean_similarity <= 1
    # bob's near-copies are his: alice never sees them, the administrator sees both users'
    assert {c.scope for c in mem.insight.clusters()} == {"user:alice", "user:bob"}
    stricter = mem.insight.clusters(caller=ALICE, threshold=0.99)
    assert sum(c.size for c in stricter) < sum(c.size for c in found) and all(c.min_similarity >= 0.99 for c in stricter)
    # an agent clusters what its household lets it read: not another agent's private memories
    drjones, main = Caller("carol", "drjones"), Caller("carol", "main")
    for text in TEA[:2]:
        mem.add(text.replace("Alice", "Carol"), caller=drjones, visibility="private", dedup=False)
    assert mem.insight.clusters(caller=main) == [] and len(mem.insight.clusters(caller=drjones)) == 1


def test_groups_beyond_exact_size_find_every_planted_pair_and_invent_none():
    rng = np.random.default_rng(7)
    n, dims = EXACT_ROWS + 2_000, 64
    vectors = rng.normal(size=(n, dims)).astype(np.float32)
    planted = []
    for i in range(0, 400, 2):  # pairs at cosine ~0.95
        noise = rng.normal(size=dims).astype(np.float32)
        vectors[i + 1] = vectors[i] / np.linalg.norm(vectors[i]) + 0.33 * noise / np.linalg.norm(noise)
        planted.append([i, i + 1])
    found = groups(vectors, 0.8)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    assert sorted(g.members for g in found) == planted  # random 64-d vectors are never 0.8 alike by chance
    assert all(abs(float(unit[a] @ unit[b]) - g.similarities[0]) < 1e-3 for g in found for a, b in [g.members])


def test_the_cleanup_report_names_each_reason_and_deletes_only_what_is_confirmed(mem):
    old = utcnow() - timedelta(days=200)
    made = {
        "empty": mem.add("ok then", caller=ALICE).id,
        "noise": mem.add("Thanks, that's helpful.", caller=ALICE).id,
        "question": mem.add("What is the name of my dentist?", caller=ALICE).id,
        "placeholder": mem.add("My name is [your name] and I live in YYYY", caller=ALICE).id,
        "stale": mem.add("Alice once owned a green canoe", caller=ALICE, created_at=old).id,
        "good": mem.add("Alice's dentist is Dr. Novak in Brno", caller=ALICE).id,
    }
    copies = [mem.add(t, caller=ALICE, dedup=False).id for t in (BIKE[0], BIKE[0] + ".")]
    mem.search("dentist in Brno", caller=ALICE)
    mem.upkeep.runtime.drain()
    report = mem.insight.cleanup(caller=ALICE, duplicate_threshold=0.95)
    reasons = {i.memory.id: i.reasons for i in report.items}
    assert "near_empty" in reasons[made["empty"]] and "noise" in reasons[made["noise"]]
    assert reasons[made["question"]] == ["question"] and reasons[made["placeholder"]] == ["placeholder"]
    assert reasons[made["stale"]] == ["never_recalled"]
    assert made["good"] not in reasons
    [copy] = [i for i in report.items if "duplicate" in i.reasons]
    assert copy.memory.id in copies and copy.duplicate_of in copies and copy.duplicate_of != copy.memory.id
    assert report.scanned == 8 and report.items[0].memory.id == made["stale"]  # oldest first
    assert report.counts["duplicate"] == 1 and report.counts["never_recalled"] == 1
    assert mem.list(caller=ALICE, limit=100) and len(mem.list(caller=ALICE, limit=100)) == 8  # a report changes nothing
    # a confirmed deletion goes through the one write path: soft, restorable, and only what the caller may delete
    deleted = mem.insight.confirm_cleanup([made["noise"], made["question"]], caller=ALICE)
    assert [m.id for m in deleted] == [made["noise"], made["question"]] and all(m.deleted_at for m in deleted)
    assert {m.id for m in mem.list(caller=ALICE, limit=100)} == set(made.values()) - {made["noise"], made["question"]} | set(copies)
    assert [h.action for h in mem.history(made["noise"], caller=ALICE)][-1] == "delete"
    mem.undelete(made["noise"], caller=ALICE)
    with pytest.raises(NotFoundError):
        mem.insight.confirm_cleanup([made["good"]], caller=BOB)


def test_clusters_and_cleanup_over_the_cli_and_rest(db_target):
    with Memory.open(db_target) as mem:
        ids = plant(mem)
        noise = mem.add("hello there!", caller=ALICE).id
        tokens = TokenStore.for_memory(mem)
        client = TestClient(create_app(mem, tokens=tokens, allow_anonymous=True), base_url="http://127.0.0.1:8765")
        alice = {"X-Clawrecall-User": "alice"}
        clusters = client.get("/v1/insight/clusters", headers=alice).json()["clusters"]
        assert [c["size"] for c in clusters] == [3, 2] and clusters[0]["keep"] == ids["tea"][2]
        assert client.get("/v1/insight/clusters", params={"threshold": 0.2}, headers=alice).status_code == 422
        report = client.get("/v1/insight/cleanup", headers=alice).json()
        flagged = {i["memory"]["id"]: i["reasons"] for i in report["items"]}
        assert flagged[noise] == ["noise"] and set(flagged) - {noise} <= set(ids["tea"] + ids["bike"])
        posted = client.post("/v1/insight/cleanup", json={"ids": [noise]}, headers=alice)
        assert posted.status_code == 200 and posted.json()["memories"][0]["deleted_at"]
        assert client.post("/v1/insight/cleanup", json={"ids": [ids["bob"][0]]}, headers=alice).status_code == 404
        client.close()

    runner = CliRunner()
    listed = runner.invoke(cli, ["--db", db_target, "insight", "clusters", "--user", "alice", "--json"])
    assert listed.exit_code == 0, listed.output
    assert [c["size"] for c in json.loads(listed.output)] == [3, 2]
    pruned = runner.invoke(cli, ["--db", db_target, "insight", "clusters", "--user", "alice", "--yes"])
    assert pruned.exit_code == 0 and "Deleted 3 memories, kept one of each group." in pruned.output, pruned.output
    again = runner.invoke(cli, ["--db", db_target, "insight", "clusters", "--user", "alice"])
    assert "No near-identical memories." in again.output
    with Memory.open(db_target) as mem:
        mem.add("n/a", caller=ALICE)
    shown = runner.invoke(cli, ["--db", db_target, "insight", "cleanup", "--user", "alice", "--reason", "near_empty", "--json"])
    assert shown.exit_code == 0, shown.output
    body = json.loads(shown.output)
    assert [i["memory"]["content"] for i in body["items"]] == ["n/a"] and body["deleted"] == []
    done = runner.invoke(cli, ["--db", db_target, "insight", "cleanup", "--user", "alice", "--reason", "near_empty", "--yes", "--json"])
    assert len(json.loads(done.output)["deleted"]) == 1
    after = runner.invoke(cli, ["--db", db_target, "insight", "cleanup", "--user", "alice", "--reason", "near_empty"])
    assert after.exit_code == 0 and after.output.startswith("Nothing to clean up in"), after.output


def test_memory_why_tells_an_agent_where_a_memory_came_from_in_a_marked_block(mem):
    from clawrecall.tools import run_tool

    stored = run_tool(mem, ALICE, "memory_store", {"content": "Alice's dentist is Dr. Novak in Brno"}).details["id"]
    mem.search("dentist", caller=ALICE)
    mem.upkeep.runtime.drain()
    why = run_tool(mem, ALICE, "memory_why", {"id": stored[:8]})
    assert not why.is_error, why.text
    assert why.details["origin"] == "tool" and why.details["changes"] == ["add"] and why.details["recalls"] == 1
    assert "UNTRUSTED DATA" in why.text and "Dr. Novak" in why.text.split("UNTRUSTED DATA", 2)[1]  # inside the block
    assert run_tool(mem, BOB, "memory_why", {"id": stored}).details["error"]["code"] == "not_found"
