"""``FLAMINO_*`` is read in one module (flamino_core/settings.py), when asked, and its table in
docs/settings.md names exactly the settings it declares. Read from the source files (an AST walk
over flamino_core, app_pages and app.py), plus the settings' own parsing."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from flamino_core import settings

ROOT = Path(__file__).resolve().parents[2]
HOME = ROOT / "flamino_core" / "settings.py"
READS = {"get", "pop", "setdefault", "__getitem__"}  # os.environ.<these>(key) read a variable
# Keys that are neither a literal nor a name bound to one in the same file, with why they are no
# FLAMINO_ variable. A new one must be added here with its reason.
UNRESOLVED_OK = {
    ("flamino_core/jobs/ray_pool.py", "name"): "Ray's own RAY_ENABLE_... switch, saved and restored",
}


def product_files() -> list[Path]:
    return [ROOT / "app.py", *sorted((ROOT / "flamino_core").rglob("*.py")),
            *sorted((ROOT / "app_pages").rglob("*.py"))]


def _is_environ(node: ast.AST) -> bool:
    """``os.environ`` or a bare ``environ``."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name)
            and node.value.id == "os") or (isinstance(node, ast.Name) and node.id == "environ")


def environment_reads(source: str, where: str) -> list[str]:
    """Each read of an environment variable in ``source`` whose name is (or may be) ``FLAMINO_*``,
    as "where:line: name"."""
    tree = ast.parse(source)
    bound = {}  # NAME = "text" anywhere in the file (module constants, locals)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    bound.setdefault(target.id, node.value.value)
    keys = []  # (key expression, line)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in READS and _is_environ(f.value):
                keys.append((node.args[0], node.lineno))
            elif (isinstance(f, ast.Attribute) and f.attr == "getenv" and isinstance(f.value, ast.Name)
                  and f.value.id == "os") or (isinstance(f, ast.Name) and f.id == "getenv"):
                keys.append((node.args[0], node.lineno))
        elif isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load):
            keys.append((node.slice, node.lineno))
        elif isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators):
            keys.append((node.left, node.lineno))
    found = []
    for key, line in keys:
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            name = key.value
        elif isinstance(key, ast.Name) and key.id in bound:
            name = bound[key.id]
        elif isinstance(key, ast.Name) and (where, key.id) in UNRESOLVED_OK:
            continue
        else:  # an attribute, a call, an unbound name: which variable it reads cannot be told here
            name = f"<{ast.unparse(key)}>"
        if not re.fullmatch(r"[A-Z0-9_]+", name) or name.startswith("FLAMINO_"):
            found.append(f"{where}:{line}: {name}")
    return found


def test_only_the_settings_module_reads_flamino_variables():
    found = []
    for path in product_files():
        if path != HOME:
            found += environment_reads(path.read_text(), path.relative_to(ROOT).as_posix())
    assert not found, "read FLAMINO_* through flamino_core.settings:\n" + "\n".join(found)


@pytest.mark.parametrize("planted", [
    'import os\nos.environ.get("FLAMINO_NEW", "")\n',
    'import os\nNEW_ENV = "FLAMINO_NEW"\ndef f():\n    return os.environ[NEW_ENV]\n',
    'import os\nx = os.getenv("FLAMINO_NEW")\n',
    'import os\nx = "FLAMINO_NEW" in os.environ\n',
    'import os\nx = os.environ.pop(settings.NEW.name, "")\n',  # a key this walk cannot resolve
])
def test_the_walk_finds_a_planted_read(planted):
    assert environment_reads(planted, "planted.py"), planted


def test_copying_the_environment_for_a_child_and_other_variables_are_not_reads():
    source = ('import os\nenv = {**os.environ, "FLAMINO_WORKER_SHARE": "10;"}\nos.environ.get("HF_HUB_OFFLINE")\n'
              'x = dict(os.environ)\n')
    assert environment_reads(source, "ok.py") == []


# Reads at import that stay, each with why: Streamlit's cache of a page function takes its size when
# the decorator runs, and these bounds size a cache made once per server process. A change to
# FLAMINO_HOSTED or these limits counts from the server's next start (docs/settings.md says so).
IMPORT_TIME_OK = {
    "app.py": "not an import: Streamlit runs the app's script again on every page run",
    "app_pages/_ui/input/reading.py": "st.cache_data(max_entries=...) of the parsed inputs",
    "app_pages/_ui/input/uploads.py": "the upload store's bounds (files kept, bytes), made once per process",
    "app_pages/_ui/structure/loaded_structure.py": "the parsed-structure cache's byte budget, made once per process",
    "app_pages/_ui/predict_from_labels/fit_results.py": "st.cache_data(max_entries=...) of the tables and fits",
    "app_pages/_ui/variants/suggestions.py": "st.cache_data(max_entries=...) of the suggestions",
    "app_pages/_ui/variants/scoring.py": "st.cache_data(max_entries=...) of the DMS tables and scores",
    "app_pages/_ui/results/one_record.py": "st.cache_data(max_entries=...) of embeddings, attention, contacts",
}


def _is_setting_read(call: ast.Call) -> bool:
    """``hosted_mode()``, ``settings.hosted()``, ``settings.X.get()``/``take()``."""
    f = call.func
    if isinstance(f, ast.Name):
        return f.id == "hosted_mode"
    if isinstance(f, ast.Attribute) and f.attr in ("get", "take") and isinstance(f.value, ast.Attribute):
        return isinstance(f.value.value, ast.Name) and f.value.value.id == "settings"
    return isinstance(f, ast.Attribute) and f.attr == "hosted" and isinstance(f.value, ast.Name) \
        and f.value.id == "settings"


def import_time_reads(source: str) -> list[int]:
    """Lines that read a setting when the module is imported: outside every function body (a
    decorator's arguments and a default value run at import)."""
    found = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for part in [*node.decorator_list, *node.args.defaults, *node.args.kw_defaults]:
                if part is not None:
                    visit(part)
            return
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, ast.Call) and _is_setting_read(node):
            found.append(node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source))
    return found


def test_no_setting_is_read_at_import_but_the_caches_sized_once():
    found = {}
    for path in product_files():
        lines = import_time_reads(path.read_text())
        if lines:
            found[path.relative_to(ROOT).as_posix()] = lines
    assert set(found) <= set(IMPORT_TIME_OK), {k: v for k, v in found.items() if k not in IMPORT_TIME_OK}
    assert set(IMPORT_TIME_OK) <= set(found), f"no longer read at import: {sorted(set(IMPORT_TIME_OK) - set(found))}"


@pytest.mark.parametrize("planted, lines", [
    ("HOSTED = hosted_mode()\n", [1]),
    ("from flamino_core import settings\nLIMIT = settings.MAX_RECORDS.get() or 5\n", [2]),
    ("@cache(size=4 if settings.hosted() else 8)\ndef f():\n    return settings.hosted()\n", [1]),
    ("def f(limit=settings.MAX_RECORDS.get()):\n    return hosted_mode()\n", [1]),
])
def test_the_import_time_walk_finds_a_planted_read(planted, lines):
    assert import_time_reads(planted) == lines


def test_every_flamino_name_in_the_code_is_a_declared_setting_and_the_docs_table_names_them_all():
    declared = {s.name for s in settings.ALL}
    assert len(declared) == len(settings.ALL)  # no variable declared twice
    named = set()
    for path in product_files():
        named |= set(re.findall(r"\bFLAMINO_[A-Z0-9_]*[A-Z0-9]", path.read_text()))
    assert named <= declared, f"named in the code but not declared in settings.py: {sorted(named - declared)}"
    table = set(re.findall(r"^\| `(FLAMINO_[A-Z0-9_]+)`", (ROOT / "docs" / "settings.md").read_text(), re.M))
    assert table == declared, f"docs/settings.md lacks {sorted(declared - table)}, has {sorted(table - declared)}"


def test_a_setting_is_read_when_asked_not_at_import(monkeypatch):
    monkeypatch.delenv("FLAMINO_HOSTED", raising=False)
    assert settings.hosted() is False
    monkeypatch.setenv("FLAMINO_HOSTED", " Yes ")
    assert settings.hosted() is True
    monkeypatch.setenv("FLAMINO_MAX_RECORDS", "0")  # the hosted limits are at least 1
    assert settings.MAX_RECORDS.get() == 1
    monkeypatch.setenv("FLAMINO_MAX_RECORDS", "many")  # unusable: the default, as the server always did
    assert settings.MAX_RECORDS.get() == 100
    monkeypatch.setenv("FLAMINO_STORE_MAX_MB", "0.5")
    assert settings.STORE_MAX_BYTES.get() == 1 << 19
    monkeypatch.setenv("FLAMINO_STORE_MAX_MB", "lots")  # a strict one says which variable is wrong
    with pytest.raises(ValueError, match="FLAMINO_STORE_MAX_MB='lots'"):
        settings.STORE_MAX_BYTES.get()
    monkeypatch.setenv("FLAMINO_HOSTED_MODELS", "")  # empty: no other models, unlike unset
    assert settings.HOSTED_MODELS.get() == ()
    monkeypatch.delenv("FLAMINO_HOSTED_MODELS")
    assert settings.HOSTED_MODELS.get() is None
    monkeypatch.setenv("FLAMINO_ALLOW_EMULATED_BF16", "yes")  # only 1 opens it
    assert settings.ALLOW_EMULATED_BF16.get() is False


def test_take_removes_the_variable(monkeypatch):
    import os

    monkeypatch.setenv("FLAMINO_WORKER_SHARE", "10;0,1")
    assert settings.WORKER_SHARE.take() == "10;0,1"
    assert "FLAMINO_WORKER_SHARE" not in os.environ and settings.WORKER_SHARE.take() == ""
