"""Claims of the docs a test can see, kept true (issue 49: the outside review found the contacts
cache said "per call" where the code kept 8/16, and the project described as ESM-2 only in four
places after ESM-1b, ESM-1v, ESM C and SaProt had joined).

* docs/architecture.md's table of the app's caches: the bound written for each ``st.cache_data``
  / ``st.cache_resource`` function is the ``max_entries`` its decorator sets (hosted and local).
* The project's one-line descriptions (pyproject.toml, app.py's docstring, the README's opening)
  name every model family the code declares (``families.FAMILIES``).
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

from flamino_core.model.families import FAMILIES

ROOT = Path(__file__).resolve().parents[2]


def _cache_rows() -> list[tuple[list[str], str]]:
    """(the functions named in its "where" cell, its "bound" cell) of every row of the caches table."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text[text.index("| kind | where | keyed on | bound |"):]
    rows = []
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        module, names = None, []
        for name in re.findall(r"`([\w.]+)`", cells[1]):
            if "." in name:
                module, name = name.rsplit(".", 1)
            names.append(f"{module}.{name}")
        rows.append((names, cells[3]))
    return rows


def _bounds(qualified: str) -> tuple[int, ...] | None:
    """The ``max_entries`` of the cache decorator of ``module.function`` in app_pages/ (hosted,
    local: both branches of ``A if HOSTED else B``), or None when it has none."""
    module, function = qualified.rsplit(".", 1)
    (path,) = [p for p in (ROOT / "app_pages").rglob(f"{module}.py")]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef) and node.name == function:
            for decorator in node.decorator_list:
                for keyword in getattr(decorator, "keywords", ()):
                    if keyword.arg == "max_entries":
                        value = keyword.value
                        if isinstance(value, ast.IfExp):
                            return ast.literal_eval(value.body), ast.literal_eval(value.orelse)
                        return (ast.literal_eval(value),)
            return None
    raise AssertionError(f"docs/architecture.md names {qualified}, which is not in app_pages/")


def test_the_cache_table_says_the_bounds_the_code_sets():
    checked = 0
    for names, bound in _cache_rows():
        bounds = [b for b in map(_bounds, [n for n in names if not n.startswith(("st.", "byte_cache."))]) if b]
        if not bounds:
            continue
        # One bound written for a run of functions that share it (dms_table, dms_variants: "8 hosted / 32").
        shared = [b for i, b in enumerate(bounds) if i == 0 or b != bounds[i - 1]]
        assert [int(n) for n in re.findall(r"\d+", bound)] == [n for b in shared for n in b], (names, bound)
        checked += 1
    assert checked >= 7  # every st.cache_data row of the table, and the engine's


@pytest.mark.parametrize("where", ["pyproject.toml", "app.py", "README.md"])
def test_the_project_describes_itself_with_every_model_family(where):
    text = (ROOT / where).read_text()
    if where == "pyproject.toml":
        described = tomllib.loads(text)["project"]["description"]
    elif where == "app.py":
        described = ast.get_docstring(ast.parse(text)).split("\n\n")[0]
    else:
        described = text.split("\n\n")[1]  # the opening paragraph, under the title
    missing = [family.title for family in FAMILIES.values() if family.title not in described]
    assert not missing, f"{where}: {described!r} leaves out {missing}"
