"""Layers: the rules on what people say (`conversations`) are a leaf the engine and the doors both read;
the engine never imports a door. Checked on the source, so an upward import fails here, not at runtime."""

from __future__ import annotations

import ast
from pathlib import Path

import clawrecall

ROOT = Path(clawrecall.__file__).parent


def imported(package: str) -> set[str]:
    """The clawrecall packages a package's modules import (at run time, not under TYPE_CHECKING)."""
    found: set[str] = set()
    for path in (ROOT / package).rglob("*.py"):
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                       and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
        package_parts = path.relative_to(ROOT).parts[:-1]  # the module's package, below clawrecall
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or id(node) in typing_only:
                continue
            if node.level:  # `from ..x import y`: from the package `level - 1` folders up
                anchor = package_parts[: len(package_parts) - (node.level - 1)]
                target = [*anchor, *(node.module or "").split(".")]
            elif (node.module or "").startswith("clawrecall."):
                target = (node.module or "").split(".")[1:]
            else:
                continue
            target = [t for t in target if t]
            if target:
                found.add(target[0])
    return found - {package}


def test_the_rules_on_what_people_say_are_a_leaf():
    assert not imported("conversations") & {"engine", "hooks", "tools", "server", "cli", "openclaw", "extraction"}


def test_the_engine_imports_no_door():
    assert not imported("engine") & {"hooks", "tools", "server", "cli", "openclaw"}


def test_extraction_imports_no_door():
    assert not imported("extraction") & {"hooks", "tools", "server", "cli", "openclaw"}
