"""The linter and the type checker pass over src/ (their settings: pyproject.toml's [tool.ruff] and
[tool.mypy]), and each reports what it is there to find."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(root: Path, module: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=root, env=env, capture_output=True, text=True,
                          timeout=900)


def test_ruff_finds_nothing_in_src():
    result = run(ROOT, "ruff", "check", "--no-cache", "src")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_finds_nothing_in_src():
    # the cache (.mypy_cache, ignored by git) makes a run after a small change take seconds, not minutes
    result = run(ROOT, "mypy")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout


def test_the_package_says_it_is_typed():
    assert (ROOT / "src" / "clawrecall" / "py.typed").is_file()


def test_the_checks_catch_an_unused_name_and_a_wrong_type(tmp_path):
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    package = tmp_path / "src" / "clawrecall"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "broken.py").write_text("def name(user_id: str | None) -> str:\n    unused = 1\n    return user_id\n")
    lint = run(tmp_path, "ruff", "check", "--no-cache", "src")
    assert lint.returncode == 1 and "F841" in lint.stdout
    types = run(tmp_path, "mypy", "--cache-dir", str(tmp_path / "mypy_cache"), "src/clawrecall/broken.py")
    assert types.returncode == 1
    assert 'Incompatible return value type (got "str | None", expected "str")' in types.stdout
