"""Text is read into values at the doors, and values pass inside (#65): outside the doors below,
no ``ModelId.parse`` call, no comparison with a scoring strategy's or a precision mode's name
written as text (``== "pll"``, ``!= "fp32"``, ``in ("bf16", ...)``: the value's declaration says
what callers ask, ``options.Strategy``'s properties, ``options.Precision``), and no fold test
model's name written out (``"random:esmfold-tiny"``: ``model_id.RANDOM_FOLD_MODELS`` holds it, and
``ModelId`` tells a fold model by it). Read from the source files, no import, as test_layers.py.

A door is where text comes in: the command line (``flamino_core/cli/``, argparse and the
commands reading their arguments), the declarations themselves (``options.py``,
``model/model_id.py``), the library's entry point for weights (``load_weights``: a Python
caller's text, docs/architecture.md says why it stays a door) and, in the app, the functions
where a model choice is read: the context builder (the session's model, once per rerun), a
link's, the server's environment's, a page's comparison's and fold panel's (named with their
files below).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from flamino_core.model.model_id import RANDOM_FOLD_MODELS
from flamino_core.options import STRATEGIES, Precision

ROOT = Path(__file__).resolve().parents[2]
NAMES = set(STRATEGIES) | {p.value for p in Precision}
# Whole files that are doors: the command line, and the modules that declare the values.
DOOR_FILES = ("flamino_core/cli/", "flamino_core/options.py", "flamino_core/model/model_id.py")
# Functions that are doors: (file, function) -> what comes in there.
DOOR_FUNCTIONS = {
    ("app_pages/_ui/rerun/context.py", "build"): "the session's model, read once per rerun into PageContext.model_id",
    ("app_pages/_ui/server/policy.py", "model_from_link"): "a share link's model",
    ("app_pages/_ui/server/policy.py", "hosted_models"): "FLAMINO_HOSTED_MODELS and FLAMINO_MODEL, the environment",
    ("app_pages/_ui/server/policy.py", "operator_model"): "FLAMINO_MODEL, the environment",
    ("app_pages/_ui/input/model_loading.py", "other_engine"): "a page's Compare models choice",
    ("app_pages/_ui/input/model_loading.py", "offered_models"): "the server's list (Limits keeps ModelId keys as text)",
    ("app_pages/_ui/input/model_picker.py", "model_picker"): "the sidebar's choice: the session's model before the "
                                                             "context is built from it",
    ("app_pages/_ui/input/model_picker.py", "model_label"): "the picker's options, as the widget holds them (text)",
    ("app_pages/_ui/input/model_picker.py", "model_details"): "the picker's chosen option (text)",
    ("flamino_core/weights/loading.py", "_parsed"): "load_weights and available_now: a Python caller's text",
    ("app_pages/_ui/structure/prediction.py", "offer"): "the ESMFold panel's model choice",
    ("app_pages/_ui/structure/complex_prediction.py", "offer"): "the ESMFold2 panel's model choice",
    ("app_pages/_ui/structure/variant_structure.py", "section"): "the Structure page's fold model, read here again",
    ("flamino_core/batch/run.py", "_checked_fold_model"): "flamino batch fold's -m (the job keeps the text)",
    ("flamino_core/batch/fold_shards.py", "__init__"): "the batch job manifest's fold model, read back in an actor",
}
# Not moved yet: parses outside a door, each file's count, which may only shrink. Empty since
# 2026-12-07 (the picker's functions are the sidebar's door; its banner reads offered values).
NOT_YET: dict[str, int] = {}


def source_files() -> list[Path]:
    files = [ROOT / "app.py"]
    for package in ("flamino_core", "app_pages"):
        files += sorted((ROOT / package).rglob("*.py"))
    return files


def _constants(node: ast.AST) -> list[str]:
    """The text constants a comparison's operand is or holds (a tuple, list or set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [c for e in node.elts for c in _constants(e)]
    return []


def _functions(tree: ast.AST) -> dict[int, str]:
    """Each node's id -> the top-level function (or method) it sits in."""
    where = {}
    for top in ast.walk(tree):
        if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(top):
                where.setdefault(id(inner), top.name)
    return where


def strings_inside(path: Path) -> list[str]:
    """``path:line: what`` for every parse, comparison with a name and fold model name outside a door."""
    rel = path.relative_to(ROOT).as_posix()
    if rel.startswith(DOOR_FILES):
        return []
    tree = ast.parse(path.read_text(), str(path))
    in_function = _functions(tree)
    found = []
    for node in ast.walk(tree):
        if (rel, in_function.get(id(node))) in DOOR_FUNCTIONS:
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "parse" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "ModelId":
            found.append(f"{rel}:{node.lineno}: ModelId.parse")
        elif isinstance(node, ast.Compare):
            named = [c for operand in [node.left, *node.comparators] for c in _constants(operand) if c in NAMES]
            found += [f"{rel}:{node.lineno}: compared with {name!r}" for name in named]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in RANDOM_FOLD_MODELS.values():
            found.append(f"{rel}:{node.lineno}: {node.value!r} written out")
    return found


def test_text_is_read_at_the_doors_only():
    found = [line for path in source_files() for line in strings_inside(path)]
    counts = {}
    for line in found:
        counts[line.split(":")[0]] = counts.get(line.split(":")[0], 0) + 1
    new = [line for line in found if line.split(":")[0] not in NOT_YET]
    assert new == [], "read text into a value at the door (ModelId, options.Strategy, options.Precision)"
    # each file not moved yet holds at most what it held: the list shrinks, never grows
    assert {f: n for f, n in counts.items() if n > NOT_YET[f]} == {}
    assert set(NOT_YET) <= set(counts), f"moved: take {set(NOT_YET) - set(counts)} off NOT_YET"


@pytest.mark.parametrize("line", ['    return strategy == "pll"\n', '    return precision in ("bf16", "int8")\n',
                                  '    return ModelId.parse(text)\n', '    return "random:esmfold2-tiny"\n'])
def test_a_string_inside_fails(line, tmp_path, monkeypatch):
    """A core module that compares a strategy's or precision's name, parses an identifier or
    writes a fold test model's name is caught; the same line in the command line is not."""
    for where in ("flamino_core/variants", "flamino_core/cli"):
        (tmp_path / where).mkdir(parents=True)
        (tmp_path / where / "inside.py").write_text(f"def f(strategy, precision, text):\n{line}")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    assert strings_inside(tmp_path / "flamino_core/variants/inside.py") != []
    assert strings_inside(tmp_path / "flamino_core/cli/inside.py") == []
