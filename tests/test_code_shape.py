"""The shape the code promises in docs/architecture.md, checked: every module is named there, no
module holds two concerns by size (over 400 lines), no function in ``flamino_core`` runs past
60 lines (a longer one is doing two jobs; issue 21). Read from the source files, no import.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("flamino_core", "app_pages")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def _modules(package: str) -> list[Path]:
    return sorted(p for p in (ROOT / package).rglob("*.py") if p.name != "__init__.py")


def test_every_module_is_named_in_the_architecture_page():
    page = (ROOT / "docs" / "architecture.md").read_text()
    unnamed = [str(p.relative_to(ROOT)) for package in PACKAGES for p in _modules(package) if p.stem not in page]
    assert unnamed == [], f"add these to docs/architecture.md: {unnamed}"


def test_no_module_is_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for package in PACKAGES for p in _modules(package)
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_no_function_in_flamino_core_is_over_60_lines():
    long = {}
    for path in (ROOT / "flamino_core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.name}"] = lines
    assert long == {}


@pytest.mark.parametrize("limit_check", [test_no_module_is_over_400_lines, test_no_function_in_flamino_core_is_over_60_lines])
def test_the_checks_can_fail(limit_check, monkeypatch):
    """Each size check fails when its limit is set below what the code has (so it reads the files)."""
    monkeypatch.setattr(sys.modules[__name__], "MAX_MODULE_LINES", 10)
    monkeypatch.setattr(sys.modules[__name__], "MAX_FUNCTION_LINES", 5)
    with pytest.raises(AssertionError):
        limit_check()
