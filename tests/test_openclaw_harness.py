"""The OpenClaw test harness may skip the end-to-end test only when the npm registry is unreachable;
without npm, or when npm fails otherwise, the test must fail."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from openclaw_harness import OpenClawSetupError, OpenClawUnavailable, ensure_openclaw


def _fake_npm(folder: Path, stderr: str) -> None:
    folder.mkdir()
    npm = folder / "npm"
    npm.write_text(f"#!/bin/sh\necho '{stderr}' >&2\nexit 1\n")
    npm.chmod(npm.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAWRECALL_OPENCLAW_CACHE", str(tmp_path / "cache"))
    return tmp_path


def test_no_npm_is_a_failure_that_says_so(empty_cache, monkeypatch):
    monkeypatch.setenv("PATH", str(empty_cache / "nothing-here"))
    with pytest.raises(OpenClawSetupError, match="npm is not on PATH"):
        ensure_openclaw()


def test_an_unreachable_registry_is_the_only_reason_to_skip(empty_cache, monkeypatch):
    _fake_npm(empty_cache / "offline", "npm error code ENOTFOUND")
    monkeypatch.setenv("PATH", str(empty_cache / "offline"))
    with pytest.raises(OpenClawUnavailable, match="cannot be reached"):
        ensure_openclaw()
    _fake_npm(empty_cache / "broken", "npm error code E403 forbidden")
    monkeypatch.setenv("PATH", str(empty_cache / "broken"))
    with pytest.raises(OpenClawSetupError, match="E403"):
        ensure_openclaw()
