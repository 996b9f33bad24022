"""The layers hold: the import contracts in pyproject.toml (`[tool.importlinter]`: each layer imports
only from those below it, no two modules or packages import each other) are kept by the code,
and they catch an upward import and a cycle when one is written."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` over the package under `root`/src, with `root`/pyproject.toml's contracts."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), os.environ.get("PYTHONPATH", "")])}
    code = "import sys; from importlinter.cli import lint_imports_command; lint_imports_command(sys.argv[1:])"
    return subprocess.run(
        [sys.executable, "-c", code, "--no-cache", "--no-logo", str(root / "pyproject.toml")],
        cwd=root, env=env, capture_output=True, text=True, timeout=300,
    )


def test_the_code_keeps_the_import_contracts():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 2 kept, 0 broken." in result.stdout


def copy_of_the_package(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(ROOT / "src" / "clawrecall", tmp_path / "src" / "clawrecall",
                    ignore=shutil.ignore_patterns("_model", "__pycache__"))
    return tmp_path


def add_import(root: Path, module: str, line: str) -> None:
    path = root / "src" / "clawrecall" / module
    text = path.read_text()
    path.write_text(text.replace("from __future__ import annotations\n", f"from __future__ import annotations\n{line}\n", 1))


def test_an_upward_import_breaks_the_layers(tmp_path):
    root = copy_of_the_package(tmp_path)
    add_import(root, "storage/tokens.py", "from ..engine import _reads")  # storage reaching up into the engine
    result = lint_imports(root)
    assert result.returncode == 1
    assert "Each layer imports only from the layers below it BROKEN" in result.stdout
    assert "clawrecall.storage.tokens -> clawrecall.engine._reads" in result.stdout


def test_a_cycle_of_types_breaks_the_contracts(tmp_path):
    root = copy_of_the_package(tmp_path)
    # a table module naming the store that imports it, if only as a type, is a cycle
    add_import(root, "storage/tokens.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sql import Store")
    result = lint_imports(root)
    assert result.returncode == 1
    assert "No import cycles between sibling modules or packages BROKEN" in result.stdout
