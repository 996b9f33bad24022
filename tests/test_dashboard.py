"""The dashboard (/ui) in a real browser: Debian's headless Chromium driven by Playwright, against a real
`clawrecall serve` process. Each step checks what the page shows after it; a screenshot of each main
page is saved in test-artifacts/dashboard/ (ignored by git); axe-core (bundled by axe-playwright-python)
checks each main page's accessibility.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect, sync_playwright
from live_server import db, home  # noqa: F401 (fixtures)

from clawrecall.auth import TokenStore
from clawrecall.server.spawn import spawn_server

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts" / "dashboard"

ALICE_TEA = "Alice drinks green tea every morning"
ALICE_SCRIPT = "<script>window.__pwned = 1; document.title = 'pwned'</script> Alice's note about scripts"
# a page changes after a click when the server has answered: assertions wait for it, as long as a busy
# machine needs
expect.set_options(timeout=60_000)
BOB_SECRET = "Bob keeps his bank PIN 4921 in a note titled zebra-lantern"


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """Debian's chromium, installed here when missing and we may (as CI does); else one clear skip."""
    path = shutil.which("chromium")
    if path is None and hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, check=False)
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], capture_output=True, check=False,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        path = shutil.which("chromium")
    if path is None:
        pytest.skip("dashboard browser tests need Debian's chromium (apt-get install chromium), which cannot be installed here")
    return path


@pytest.fixture(scope="module")
def server(db, home, tokens):
    """The server, its idle event streams speaking every 0.5 s so a closed page's stream ends at once."""
    env = {"CLAWRECALL_HOME": str(home / "home"), "CLAWRECALL_INSIGHT__EVENTS_KEEPALIVE_S": "0.5"}
    with spawn_server(db, env=env) as running:
        yield running


@pytest.fixture(scope="module")
def tokens(db) -> dict[str, str]:
    store = TokenStore(db)
    made = {
        "alice": store.create(user_id="alice")[1],
        "bob": store.create(user_id="bob")[1],
        "reader": store.create(user_id="alice", scopes=["global"], name="read global")[1],
        "service": store.create(kind="service")[1],
        "carol": store.create(user_id="carol")[1],
    }
    store.close()
    return made


@pytest.fixture(scope="module")
def seeded(server, tokens) -> dict[str, str]:
    ids = {}
    for who, text, extra in (
        ("alice", ALICE_TEA, {"category": "preference", "tags": ["drink"]}),
        ("alice", ALICE_SCRIPT, {"category": "entity"}),
        ("bob", BOB_SECRET, {"category": "fact"}),
    ):
        r = httpx.post(f"{server.url}/v1/memories", json={"content": text, **extra},
                       headers={"Authorization": f"Bearer {tokens[who]}"}, timeout=60)
        assert r.status_code == 201, r.text
        ids[text] = r.json()["id"]
    for i in range(60):  # more than a page
        r = httpx.post(f"{server.url}/v1/memories", json={"content": f"Alice's errand number {i}", "tags": ["errand"],
                       "category": "action_item"}, headers={"Authorization": f"Bearer {tokens['alice']}"}, timeout=60)
        assert r.status_code == 201, r.text
    return ids


@pytest.fixture(scope="module")
def browser(chromium_path):
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def signed_in(browser, server, tokens, seeded, request):
    """A page signed in as the token the test's `who` parameter names (alice by default)."""
    who = getattr(request, "param", "alice")
    context = browser.new_context(base_url=server.url)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto("/ui")
    assert page.url.endswith("/ui/signin")
    page.get_by_label("API token").fill(tokens[who])
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/ui/memories")
    page.errors = errors
    yield page
    context.close()


def shot(page, tmp_path_factory, name: str) -> None:
    """A screenshot of the page as a test artifact (test-artifacts/dashboard/, as CI keeps it)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"dashboard-{name}.png"), full_page=True)


def test_sign_in_rejects_a_bad_token_and_signs_out(browser, server, tokens, seeded, tmp_path_factory):
    context = browser.new_context(base_url=server.url)
    page = context.new_page()
    page.goto("/ui/memories")
    assert page.url.endswith("/ui/signin")
    shot(page, tmp_path_factory, "signin")
    page.get_by_label("API token").fill("cr_nothing_wrong")
    page.get_by_role("button", name="Sign in").click()
    assert "invalid or revoked token" in page.get_by_role("alert").inner_text()
    page.get_by_label("API token").fill(tokens["alice"])
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/ui/memories")
    cookie = next(c for c in context.cookies() if c["name"] == "clawrecall_ui")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and tokens["alice"] not in cookie["value"]
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/ui/signin")
    page.goto("/ui/memories")
    assert page.url.endswith("/ui/signin")
    context.close()


def test_list_pages_through_every_memory_and_filters(signed_in, tmp_path_factory):
    page = signed_in
    rows = page.locator("li.row")
    assert rows.count() == 50 and page.get_by_role("link", name="Next").is_visible()
    shot(page, tmp_path_factory, "memories")
    page.get_by_role("link", name="Next").click()
    expect(page.locator("li.row")).to_have_count(12)  # 62 in all: nothing is capped
    page.goto("/ui/memories")
    page.get_by_label("Tag").fill("drink")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**tag=drink**")
    assert page.locator("li.row").all_inner_texts() == [f"{ALICE_TEA}\nmemory · user:alice · preference · #drink · "
                                                        + page.locator("li.row .meta").inner_text().rsplit(" · ", 1)[1]]
    page.get_by_label("Sort").select_option("oldest")  # the script submits the filter at once
    page.wait_for_url("**order=oldest**")
    assert page.locator("li.row").count() == 1



@pytest.mark.parametrize("signed_in", ["carol"], indirect=True)
def test_pages_follow_the_last_row_even_through_equal_times(signed_in, server, tokens):
    """Pages start where the last one ended (its time, past the memories at that time already shown),
    so memories that share one time are neither repeated nor skipped at a page's edge."""
    same = "2026-03-01T09:00:00+00:00"
    for i in range(55):
        r = httpx.post(f"{server.url}/v1/memories", json={"content": f"Carol's reading list entry {i}", "created_at": same, "dedup": False},
                       headers={"Authorization": f"Bearer {tokens['carol']}"}, timeout=60)
        assert r.status_code == 201, r.text
    page = signed_in
    page.goto("/ui/memories")
    seen = page.locator("li.row .text").all_inner_texts()
    page.get_by_role("link", name="Next").click()
    page.wait_for_url("**skip=**")  # the next page, not the one still unloading
    seen += page.locator("li.row .text").all_inner_texts()
    assert not page.get_by_role("link", name="Next").count()
    assert sorted(seen) == sorted(f"Carol's reading list entry {i}" for i in range(55))
    page.get_by_role("link", name="First page").click()
    expect(page.locator("li.row")).to_have_count(50)


def test_search_explains_each_stage_and_says_nothing_relevant(signed_in, tmp_path_factory):
    page = signed_in
    page.get_by_role("link", name="Search").click()
    page.get_by_label("Query").fill("green tea morning")
    page.get_by_role("button", name="Search").click()
    first = page.locator("li.row").first
    assert ALICE_TEA in first.inner_text()
    page.locator("details summary").first.click()
    assert page.locator("details dl dt").count() >= 2  # one line per stage
    shot(page, tmp_path_factory, "search")
    page.get_by_label("Query").fill("quantum chromodynamics gauge bosons")
    page.get_by_role("button", name="Search").click()
    shown = page.locator("main").inner_text()
    assert "Nothing relevant" in shown and page.locator("li.row").count() == 0, shown


def test_open_edit_delete_undelete_and_forget(signed_in, seeded, tmp_path_factory):
    page = signed_in
    page.goto("/ui/memories?order=oldest")
    page.get_by_role("link", name=ALICE_TEA).click()
    assert page.locator("#content-text").inner_text() == ALICE_TEA
    page.get_by_label("Text").fill("Alice drinks jasmine tea every morning")
    page.get_by_label("Visibility").select_option("private")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#content-text")).to_have_text("Alice drinks jasmine tea every morning")
    history = page.locator("ol.history").inner_text()
    assert "update" in history and ALICE_TEA in history and "jasmine" in history  # before and after
    shot(page, tmp_path_factory, "memory")
    page.get_by_role("button", name="Delete").click()
    assert "Deleted" in page.locator("p.readonly").first.inner_text()
    page.goto("/ui/memories?tag=drink")
    expect(page.get_by_text("No memory matches.")).to_be_visible()
    page.goto("/ui/memories?tag=drink&deleted=only")
    page.get_by_role("link", name="jasmine").click()
    page.get_by_role("button", name="Undelete").click()
    expect(page.get_by_role("button", name="Delete")).to_be_visible()
    page.get_by_role("button", name="Forget for good…").click()
    assert "cannot be undone" in page.get_by_role("alert").inner_text()
    page.get_by_role("button", name="Forget it for good").click()
    assert "is erased" in page.get_by_role("status").inner_text()
    page.goto(f"/ui/m/{seeded[ALICE_TEA]}")
    assert page.locator("h1").inner_text() == "Refused" and "not_found" in page.get_by_role("alert").inner_text()


def bulk_delete(page, url: str, n: int) -> None:
    """Delete what the list at `url` shows, by its filter: the page says how many first, then that they went."""
    page.goto(url)
    page.get_by_role("button", name="Delete every memory that matches…").click()
    expect(page.get_by_text(f"{n} memories match")).to_be_visible()
    page.get_by_role("button", name=f"Delete {n} memories").click()
    assert f"Deleted {n} memories" in page.get_by_role("status").inner_text()


def test_bulk_undelete_and_visibility_on_a_filter_go_through_the_write_path(signed_in, server, tokens):
    alice = {"Authorization": f"Bearer {tokens['alice']}"}
    made = [httpx.post(f"{server.url}/v1/memories", json={"content": f"Alice's chore {i}", "tags": ["chore"]},
                       headers=alice, timeout=60).json()["id"] for i in range(3)]
    page = signed_in
    bulk_delete(page, "/ui/memories?tag=chore", 3)
    page.goto("/ui/memories?tag=chore&deleted=only")
    assert page.get_by_role("button", name="Delete every memory that matches…", exact=True).count() == 0  # none active
    page.get_by_role("button", name="Undelete every memory that matches…").click()
    expect(page.get_by_text("3 memories match and would be restored")).to_be_visible()
    page.get_by_role("button", name="Undelete 3 memories").click()
    assert "Restored 3 memories" in page.get_by_role("status").inner_text()
    page.get_by_role("link", name="Back to the memories").click()
    expect(page.locator("li.row")).to_have_count(3)  # the list, not the page still unloading
    assert sorted(_texts(page)) == [f"Alice's chore {i}" for i in range(3)] and page.locator("li.row.deleted").count() == 0
    page.get_by_label("Visibility for every memory that matches").select_option("private")
    page.get_by_role("button", name="Change visibility…").click()
    expect(page.get_by_text("3 memories match and would be made private")).to_be_visible()
    page.get_by_role("button", name="Make private 3 memories").click()
    assert "Made 3 memories private" in page.get_by_role("status").inner_text()
    page.goto("/ui/memories?tag=chore")
    assert all("private" in meta for meta in page.locator("li.row .meta").all_inner_texts())
    for memory_id in made:  # through the one write path: REST reads the change, history has it
        assert httpx.get(f"{server.url}/v1/memories/{memory_id}", headers=alice, timeout=60).json()["visibility"] == "private"
        history = httpx.get(f"{server.url}/v1/memories/{memory_id}/history", headers=alice, timeout=60).json()
        assert [h["action"] for h in (history["history"] if isinstance(history, dict) else history)][-3:] == [
            "delete", "undelete", "update"]


def test_bulk_delete_on_a_filter_asks_then_deletes(signed_in):
    page = signed_in
    bulk_delete(page, "/ui/memories?tag=errand", 60)
    page.goto("/ui/memories?tag=errand")
    expect(page.get_by_text("No memory matches.")).to_be_visible()
    page.goto("/ui/memories?tag=errand&deleted=only")
    assert page.locator("li.row.deleted").count() == 50


@pytest.mark.parametrize("signed_in", ["bob"], indirect=True)
def test_a_user_never_sees_another_users_memory(signed_in, seeded):
    page = signed_in
    for url in ("/ui/memories", "/ui/memories?deleted=yes", "/ui/memories?scope=user:alice",
                "/ui/search?q=note+about+scripts", "/ui/search?q=errand+number", f"/ui/m/{seeded[ALICE_SCRIPT]}",
                f"/ui/m/{seeded[ALICE_SCRIPT]}?scope=user:alice", "/ui/memories?user=alice", "/ui/memories?order=recalls",
                "/ui/memories?order=importance&deleted=yes", "/ui/memories?source=message", "/ui/insight",
                "/ui/insight?scope=user:alice", "/ui/clusters", "/ui/conversations"):
        page.goto(url)
        shown = page.locator("li.row, #content-text, dl.fields, main a").all_inner_texts()
        shown += page.locator("svg.plot").all_text_contents()  # labels, titles and descriptions
        assert not any("Alice" in text or "user:alice" in text for text in shown), (url, shown)
    page.goto("/ui/memories")
    assert BOB_SECRET in page.locator("main").inner_text()


@pytest.mark.parametrize("signed_in", ["reader"], indirect=True)
def test_a_read_only_scope_shows_read_only_and_the_engine_refuses(signed_in, server, seeded, tokens):
    page = signed_in
    page.goto("/ui/memories?scope=global")
    expect(page.get_by_text("Read-only")).to_be_visible()


def test_stored_script_stays_text(signed_in, seeded):
    page = signed_in
    page.goto("/ui/memories?category=entity")
    assert "<script>" in page.locator("li.row").first.inner_text()
    page.goto(f"/ui/m/{seeded[ALICE_SCRIPT]}")
    assert page.locator("#content-text").inner_text() == ALICE_SCRIPT
    assert page.evaluate("window.__pwned") is None and page.title() != "pwned"
    assert not page.errors  # nothing the CSP had to block either


def test_forms_refuse_other_origins_and_missing_csrf(server, tokens, seeded):
    with httpx.Client(base_url=server.url, timeout=60) as c:
        r = c.post("/ui/signin", data={"token": tokens["alice"]}, headers={"Origin": "http://evil.example"})
        assert r.status_code == 403 and "clawrecall_ui" not in r.headers.get("set-cookie", "")
        r = c.post("/ui/signin", data={"token": tokens["alice"]}, headers={"Origin": server.url})
        assert r.status_code == 303
        c.cookies.set("clawrecall_ui", r.cookies["clawrecall_ui"], path="/ui")
        page = c.get("/ui/memories")
        assert page.headers["content-security-policy"].startswith("default-src 'none'; script-src 'self'")
        r = c.post(f"/ui/m/{seeded[ALICE_SCRIPT]}/delete", data={}, headers={"Origin": server.url})
        assert r.status_code == 403 and "CSRF" in r.text
        r = c.post(f"/ui/m/{seeded[ALICE_SCRIPT]}/delete", data={}, headers={"Origin": "http://evil.example"})
        assert r.status_code == 403
        assert c.get(f"/ui/m/{seeded[ALICE_SCRIPT]}").text.count("Deleted ") == 0


def test_every_field_has_a_label_and_the_keyboard_reaches_the_controls(signed_in, seeded):
    page = signed_in
    for url in ("/ui/memories", "/ui/search?q=tea", f"/ui/m/{seeded[ALICE_SCRIPT]}"):
        page.goto(url)
        unlabelled = page.evaluate("""() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
            .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')).map(el => el.name)""")
        assert unlabelled == [], (url, unlabelled)
    page.goto("/ui/memories")
    reached = []
    for _ in range(45):
        page.keyboard.press("Tab")
        reached.append(page.evaluate("document.activeElement.id || document.activeElement.textContent.trim()"))
    for control in ("Memories", "Search", "Conversations", "Insight", "Sign out", "f-scope", "f-tag", "f-user", "f-agent",
                    "f-visibility", "f-source", "f-order", "Filter"):
        assert control in reached, (control, reached)
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "f-scope"


def test_conversations_list_open_and_search(signed_in, server, tokens, tmp_path_factory):
    said = "The shed roof needs cedar shingles before winter"
    r = httpx.post(f"{server.url}/v1/conversations/messages", headers={"Authorization": f"Bearer {tokens['alice']}"},
                   json={"session_id": "garden-talk", "messages": [{"role": "user", "content": said}]}, timeout=60)
    assert r.status_code == 200, r.text
    page = signed_in
    page.get_by_role("link", name="Conversations").click()
    page.get_by_role("link", name="garden-talk").click()
    assert said in page.locator("main").inner_text()
    shot(page, tmp_path_factory, "conversation")
    page.get_by_role("link", name="Conversations").click()
    page.get_by_label("Search what was said").fill("cedar shingles shed roof")
    page.get_by_role("button", name="Search").click()
    deadline = time.monotonic() + 30  # the server embeds the message after answering
    while said not in " ".join(page.locator("li.row").all_inner_texts()) and time.monotonic() < deadline:
        page.reload()
    assert said in page.locator("li.row").first.inner_text() and "message" in page.locator("li.row .meta").first.inner_text()
    assert page.get_by_label("Source").input_value() == "message"


def wait_for(predicate, timeout_s: float = 60.0):
    """The predicate's first true value, asked again until it comes (a condition, not a fixed sleep)."""
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        assert time.monotonic() < deadline, "the condition never came true"
        time.sleep(0.05)
    return value


def test_a_memory_page_says_where_it_came_from_and_when_searches_found_it(signed_in, server, tokens):
    page = signed_in
    alice = {"Authorization": f"Bearer {tokens['alice']}"}
    made = httpx.post(f"{server.url}/v1/memories", json={"content": "Alice's bicycle is a green Brompton"},
                      headers=alice, timeout=60).json()["id"]
    httpx.post(f"{server.url}/v1/search", json={"query": "green Brompton bicycle"}, headers=alice, timeout=60)
    recalls = f"{server.url}/v1/insight/memories/{made}/recalls"
    wait_for(lambda: httpx.get(recalls, headers=alice, timeout=60).json()["recalls"])  # the log is written off the request
    page.goto(f"/ui/m/{made}")
    assert "added through the API" in page.locator("#origin").inner_text()
    found = page.locator("#recalls").inner_text()
    assert "green Brompton bicycle" in found and "rest" in found


def test_a_superseded_fact_shows_its_versions_and_what_was_true_then(signed_in, server, tokens):
    page = signed_in
    alice = {"Authorization": f"Bearer {tokens['alice']}"}
    old = httpx.post(f"{server.url}/v1/memories", json={"content": "Alice lives in Brno", "category": "fact",
                     "valid_from": "2024-01-01T00:00:00Z"}, headers=alice, timeout=60).json()["id"]
    new = httpx.post(f"{server.url}/v1/memories/{old}/supersede", json={"content": "Alice lives in Prague",
                     "valid_from": "2025-06-01T00:00:00Z"}, headers=alice, timeout=60).json()["id"]
    page.goto(f"/ui/m/{new}")
    versions = page.locator("ol.timeline li")
    assert versions.count() == 2
    assert "Alice lives in Brno" in versions.nth(0).inner_text() and "until" in versions.nth(0).inner_text()
    assert versions.nth(1).get_attribute("aria-current") == "true" and "until now" in versions.nth(1).inner_text()
    versions.nth(0).get_by_role("link", name="what was true then").click()
    listed = page.locator("main").inner_text()
    assert "Alice lives in Brno" in listed and "Alice lives in Prague" not in listed


def test_a_secret_is_masked_and_saving_its_page_keeps_its_text(signed_in, server, tokens):
    page = signed_in
    alice = {"Authorization": f"Bearer {tokens['alice']}"}
    code = "Alice's locker code is 0451"
    made = httpx.post(f"{server.url}/v1/memories", json={"content": code, "visibility": "secret"},
                      headers=alice, timeout=60).json()["id"]
    page.goto(f"/ui/m/{made}")
    assert "0451" not in page.content() and page.get_by_label("Text").count() == 0
    assert page.get_by_label("Visibility").input_value() == "secret"
    page.get_by_label("Importance").fill("0.9")
    page.get_by_role("button", name="Save").click()
    assert "0451" not in page.content()
    kept = httpx.get(f"{server.url}/v1/memories/{made}", headers=alice, timeout=60).json()
    assert (kept["content"], kept["importance"], kept["visibility"]) == (code, 0.9, "secret")
    page.goto("/ui/memories?visibility=secret")  # listed, masked
    assert page.locator("li.row").count() == 1 and "0451" not in page.content()


def _as(tokens, user: str, agent: str | None = None) -> dict[str, str]:
    """Headers of the service token acting as a user (and agent), as a gateway does."""
    return {"Authorization": f"Bearer {tokens['service']}", "X-Clawrecall-User": user,
            **({"X-Clawrecall-Agent": agent} if agent else {})}


@pytest.fixture(scope="module")
def dana(server, tokens) -> dict[str, str]:
    """Dana's memories: one by her agent `scout`, private and important, one extracted fact, one plain;
    and one search that found the plain one (so it is the most recalled)."""
    made = {}
    for key, body, agent in (
        ("scout", {"content": "Dana's scout found the trailhead behind the old mill", "visibility": "private",
                   "importance": 0.95, "category": "fact"}, "scout"),
        ("fact", {"content": "Dana is allergic to hazelnuts", "source_type": "extraction", "category": "fact"}, None),
        ("plain", {"content": "Dana waters the orchids on Sundays", "importance": 0.2, "category": "action_item"}, None),
    ):
        r = httpx.post(f"{server.url}/v1/memories", json=body, headers=_as(tokens, "dana", agent), timeout=60)
        assert r.status_code == 201, r.text
        made[key] = r.json()["id"]
    r = httpx.post(f"{server.url}/v1/search", json={"query": "orchids Sundays watering"}, headers=_as(tokens, "dana"), timeout=60)
    assert r.status_code == 200, r.text
    recalls = f"{server.url}/v1/insight/memories/{made['plain']}/recalls"
    wait_for(lambda: httpx.get(recalls, headers=_as(tokens, "dana"), timeout=60).json()["recalls"])
    return made


def _texts(page) -> list[str]:
    return page.locator("li.row .text").all_inner_texts()


@pytest.mark.parametrize("signed_in", ["service"], indirect=True)
def test_list_filters_by_agent_user_visibility_and_source_and_sorts(signed_in, dana, tmp_path_factory):
    page = signed_in
    scout, fact, plain = ("Dana's scout found the trailhead behind the old mill", "Dana is allergic to hazelnuts",
                          "Dana waters the orchids on Sundays")
    page.get_by_label("User").fill("dana")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**user=dana**")
    assert sorted(_texts(page)) == sorted([scout, fact, plain])
    page.get_by_label("Agent").fill("scout")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**agent=scout**")
    assert _texts(page) == [scout]
    page.goto("/ui/memories?user=dana&visibility=private")
    assert _texts(page) == [scout]
    page.goto("/ui/memories?user=dana")
    page.get_by_label("Source").select_option("fact")  # the script applies a select at once
    page.wait_for_url("**source=fact**")
    assert _texts(page) == [fact]
    page.goto("/ui/memories?user=dana")
    page.get_by_label("Sort").select_option("importance")
    page.wait_for_url("**order=importance**")
    assert _texts(page)[0] == scout and _texts(page)[-1] == plain
    page.get_by_label("Sort").select_option("recalls")
    page.wait_for_url("**order=recalls**")
    assert _texts(page)[0] == plain and sorted(_texts(page)) == sorted([scout, fact, plain])  # the rest follow: no cap
    shot(page, tmp_path_factory, "memories-filtered")


@pytest.mark.parametrize("signed_in", ["service"], indirect=True)
def test_bulk_delete_on_the_new_filters_goes_through_the_write_path(signed_in, server, tokens, dana):
    page = signed_in
    bulk_delete(page, "/ui/memories?user=dana&visibility=private", 1)
    page.goto("/ui/memories?user=dana")
    assert "Dana's scout found the trailhead behind the old mill" not in _texts(page) and len(_texts(page)) == 2
    kept = httpx.get(f"{server.url}/v1/memories/{dana['scout']}", headers=_as(tokens, "dana", "scout"), timeout=60)
    assert kept.json()["deleted_at"] is not None  # deleted for REST too, by the one write path (restorable)
    httpx.post(f"{server.url}/v1/memories/{dana['scout']}/undelete", headers=_as(tokens, "dana", "scout"), timeout=60)


@pytest.mark.parametrize("signed_in", ["reader"], indirect=True)
def test_a_read_only_scope_offers_no_bulk_action(signed_in, seeded):
    page = signed_in
    page.goto("/ui/memories?scope=global&category=fact")
    expect(page.get_by_text("Read-only")).to_be_visible()
    for action in ("Delete", "Undelete"):
        assert page.get_by_role("button", name=f"{action} every memory that matches…", exact=True).count() == 0
    assert page.get_by_role("button", name="Change visibility…").count() == 0
    page.goto("/ui/memories?scope=global&category=fact&deleted=only")
    assert page.get_by_role("button", name="Undelete every memory that matches…").count() == 0


def test_insight_plots_what_memory_holds_and_what_it_was_asked(signed_in, server, tokens, tmp_path_factory):
    page = signed_in
    alice = {"Authorization": f"Bearer {tokens['alice']}"}
    made = httpx.post(f"{server.url}/v1/memories", json={"content": "Alice's passport expires in March", "category": "fact"},
                      headers=alice, timeout=60).json()["id"]
    httpx.post(f"{server.url}/v1/search", json={"query": "when does the passport expire"}, headers=alice, timeout=60)
    recalls = f"{server.url}/v1/insight/memories/{made}/recalls"
    wait_for(lambda: httpx.get(recalls, headers=alice, timeout=60).json()["recalls"])
    page.get_by_role("link", name="Insight").click()
    page.locator("[data-part][aria-busy=false]").nth(3).wait_for(state="attached")  # each part drawn after the frame
    titles = page.locator("svg.plot title").all_text_contents()
    assert {"Memories added per month, by category", "Rows added per month, by source", "Searches per day, last 30 days",
            "Embedding coverage by kind of row", "Memories found most by searches"} <= set(titles), titles
    described = " ".join(page.locator("svg.plot desc").all_text_contents())
    assert "fact: " in described and "memory: " in described  # by category, by source
    assert "Alice's passport expires in March" in page.locator("#recalled").inner_text()
    shot(page, tmp_path_factory, "insight")
    page.get_by_role("link", name="The largest clusters of near-identical memories").click()
    assert page.locator("h1").inner_text() == "Clusters"
    assert not page.errors  # the plots break no CSP rule
    page.goto("/ui/insight/coverage")  # a part is a page of its own (what the page links to without its script)
    assert page.locator("svg.plot title").all_text_contents() == ["Embedding coverage by kind of row"]


def test_a_memory_added_from_the_cli_appears_live(signed_in, db):
    page = signed_in
    page.goto("/ui/memories")
    page.locator("#live[data-state=open]").wait_for()  # the stream is connected
    text = "Alice booked the ferry to Hydra for May 3"
    done = subprocess.run([sys.executable, "-m", "clawrecall.cli", "--db", str(db), "add", text, "--user", "alice"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    page.locator("li.row.new", has_text=text).wait_for()  # no reload: the page's own stream brought it
    assert page.locator("li.row .text").first.inner_text() == text
    assert "1 new memory" in page.locator("#live").inner_text()
    hidden = "Bob's ferry ticket is in the blue folder"
    done = subprocess.run([sys.executable, "-m", "clawrecall.cli", "--db", str(db), "add", hidden, "--user", "bob"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    last = "Alice packed sunscreen for Hydra"
    subprocess.run([sys.executable, "-m", "clawrecall.cli", "--db", str(db), "add", last, "--user", "alice"],
                   capture_output=True, text=True, timeout=120, check=True)
    page.locator("li.row.new", has_text=last).wait_for()  # after Bob's, in commit order: his was not sent
    assert hidden not in page.locator("main").inner_text()


def test_conversation_shows_the_facts_extracted_from_it(signed_in, server, tokens):
    alice = {"Authorization": f"Bearer {tokens['alice']}"}
    r = httpx.post(f"{server.url}/v1/conversations/messages", headers=alice, timeout=60,
                   json={"session_id": "trip-talk", "messages": [{"role": "user", "content": "I get seasick on small boats"}]})
    assert r.status_code == 200, r.text
    segment = httpx.get(f"{server.url}/v1/conversations/trip-talk/segments", headers=alice, timeout=60).json()
    segment_id = (segment["segments"] if isinstance(segment, dict) else segment)[0]["id"]
    r = httpx.post(f"{server.url}/v1/memories", headers={**alice, "X-Clawrecall-Session": "trip-talk"}, timeout=60, json={
        "content": "Alice gets seasick on small boats", "source_type": "extraction", "source_id": segment_id,
        "category": "fact"})
    assert r.status_code == 201, r.text
    page = signed_in
    page.goto("/ui/conversations/trip-talk")
    facts = page.get_by_role("list", name="Facts extracted from this segment")
    assert facts.inner_text() == "Alice gets seasick on small boats"
    facts.get_by_role("link").click()
    assert page.locator("#content-text").inner_text() == "Alice gets seasick on small boats"


def test_axe_core_finds_no_accessibility_violation(signed_in, seeded, browser, server):
    from axe_playwright_python.sync_playwright import Axe

    page = signed_in
    axe = Axe()
    for url in ("/ui/memories", "/ui/search?q=tea", f"/ui/m/{seeded[ALICE_SCRIPT]}", "/ui/conversations",
                "/ui/conversations/garden-talk", "/ui/insight", "/ui/insight/recalled", "/ui/clusters", "/ui/memories?tag=errand&deleted=yes"):
        page.goto(url)
        result = axe.run(page).response
        found = result["violations"]
        assert result["passes"] and found == [], (url, [(v["id"], v["help"], [n["target"] for n in v["nodes"]][:3]) for v in found])
    context = browser.new_context(base_url=server.url)
    signin = context.new_page()
    signin.goto("/ui/signin")
    assert axe.run(signin).response["violations"] == []
    context.close()


def test_a_message_hit_opens_in_its_conversation_and_a_chunk_in_its_file(signed_in, server, tokens, db, tmp_path):
    said = "The lighthouse keeper repaints the lamp room every April"
    r = httpx.post(f"{server.url}/v1/conversations/messages", headers={"Authorization": f"Bearer {tokens['alice']}"},
                   json={"session_id": "coast-talk", "messages": [{"role": "user", "content": "Hello there"},
                                                                  {"role": "user", "content": said}]}, timeout=60)
    assert r.status_code == 200, r.text
    message_id = r.json()["ids"][1]
    page = signed_in

    def found() -> bool:
        page.goto("/ui/search?q=lighthouse+keeper+lamp+room&source=message")  # embedded after the answer
        return said in " ".join(_texts(page))
    wait_for(found)
    page.locator("li.row .text", has_text=said).click()
    page.wait_for_url(f"**/ui/conversations/coast-talk?**#msg-{message_id}")
    assert page.locator("h1").inner_text() == "Conversation coast-talk"
    assert said in page.locator(f"#msg-{message_id}").inner_text()
    assert page.locator(".row:target").inner_text() == page.locator(f"#msg-{message_id}").inner_text()
    notes = tmp_path / "boat-notes.md"
    notes.write_text("# Boat\n\nThe dinghy's outboard takes two-stroke oil mixed fifty to one.\n")
    done = subprocess.run([sys.executable, "-m", "clawrecall.cli", "--db", str(db), "files", "add", str(notes),
                           "--user", "alice", "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    page.goto("/ui/memories?source=chunk")
    page.locator("li.row .text", has_text="two-stroke oil").click()
    page.wait_for_url("**/ui/files/**#chunk-**")
    assert page.locator("h1").inner_text() == f"File {notes}"
    assert "two-stroke oil mixed fifty to one" in page.locator(".row:target").inner_text()
    bob = browser_page_as(page, tokens["bob"])  # another user: neither page is there for him
    for url in (page.url, f"/ui/conversations/coast-talk#msg-{message_id}"):
        bob.goto(url)
        assert "two-stroke" not in bob.content() and said not in bob.content()
    bob.context.close()


def browser_page_as(page, token: str):
    """A new page in its own browser context, signed in with `token`."""
    context = page.context.browser.new_context(base_url=page.url.split("/ui/")[0])
    other = context.new_page()
    other.goto("/ui/signin")
    other.get_by_label("API token").fill(token)
    other.get_by_role("button", name="Sign in").click()
    other.wait_for_url("**/ui/memories")
    return other
