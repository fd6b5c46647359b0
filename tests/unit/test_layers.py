"""Imports run downward only (docs/architecture.md draws the floors): over ``flamino_core``, the
app's ``_ui`` folders, its pages and ``app.py``, every import statement counted, the lazy ones
inside functions and under ``TYPE_CHECKING`` too. Read from the source files, no import.

A package is one unit (``flamino_core/engine/``, ``app_pages/_ui/input/``); a unit may import
itself and any unit on a lower floor. Units on one floor are independent of each other unless
the pair is listed in ``SIDEWAYS`` with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Bottom to top. Names are units: "core.X" for flamino_core/X(.py), "ui.X" for app_pages/_ui/X/.
FLOORS = [
    ["core.alphabet", "core.options", "core.progress", "core.atomic", "core.wording", "core.numbering",
     "core.doors", "core.settings"],  # light, shared by all (doors.py: how a package's __init__ re-exports lazily)
    ["core.inputs", "core.analysis"],  # text and bytes to records; NumPy over model outputs
    ["core.model"],  # the only JAX/Flax network code
    ["core.weights"],  # checkpoints to the model's parameters
    ["core.engine"],  # the engine and its plans
    ["core.store"],  # the result store and the one masked-pass path through it
    ["core.jobs", "core.figures"],  # long work in the background / Plotly builders
    ["core.records", "core.variants"],  # sets of records / the user's mutations and maps
    ["core.structure", "core.predictors"],  # structures / predictors fitted on labels
    ["core.design"],  # design rounds on the predictors
    ["core.batch"],  # proteome-scale jobs on Ray
    ["core.cli"],  # the command line (its `batch` command runs core.batch)
    ["core.__init__"],  # the public face: re-exports from below
    ["ui.frame"],  # the page registry, kept widgets, links, downloads
    ["ui.server"],  # hosting policy, the heavy-job queue, background jobs and their panel
    ["ui.input"],  # the input, its uploads and numbering; the model picker and loading
    ["ui.rerun"],  # the rerun's page context, the session from a link, the residue range
    ["ui.results"],  # one record's results and masked scans, through the store
    ["ui.records", "ui.variants", "ui.predict_from_labels", "ui.structure"],  # one folder per page
    ["pages"],
    ["app"],
]
SIDEWAYS = {
    # The Variant effects page's suggestions rank by the Predict page's fitted predictor when one
    # is in the session.
    ("ui.variants", "ui.predict_from_labels"): "suggestions read the session's predictor",
}
FLOOR = {unit: i for i, units in enumerate(FLOORS) for unit in units}


def unit_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "flamino_core":
        return "core." + (parts[1] if len(parts) > 1 else "__init__")
    if parts[:2] == ["app_pages", "_ui"]:
        return "ui." + parts[2] if len(parts) > 2 else None
    if parts[0] == "app_pages":
        return "pages"
    return "app" if module == "app" else None


def source_files() -> list[Path]:
    files = [ROOT / "app.py"]
    for package in ("flamino_core", "app_pages"):
        files += sorted((ROOT / package).rglob("*.py"))
    return files


def imports(path: Path, run_time_only: bool = False) -> list[tuple[str, int]]:
    """Every module an import statement in ``path`` names, with its line (``from a import b``
    names ``a`` and ``a.b``: b may be a module). ``run_time_only``: leave out the imports under
    ``if TYPE_CHECKING:``, which never run (annotations only)."""
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    package = module.rsplit(".", 1)[0] if path.name != "__init__.py" else module.removesuffix(".__init__")
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
                   for statement in node.body for inner in ast.walk(statement)} if run_time_only else set()
    found = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against the file's package
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            found.append((base, node.lineno))
            found += [(f"{base}.{alias.name}", node.lineno) for alias in node.names]
    return found


def arrows_against_the_floors(files: list[Path]) -> list[str]:
    wrong = {}
    for path in files:
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        source = unit_of(module) if path.name != "__init__.py" or module != "flamino_core" else "core.__init__"
        if source is None:
            continue
        for target_module, line in imports(path):
            target = unit_of(target_module)
            if target is None or target == source or (target_module == "flamino_core" and source.startswith("core.")):
                continue
            if source not in FLOOR or target not in FLOOR:
                wrong[path, line, target] = f"{path.relative_to(ROOT)}:{line}: {source} or {target} has no floor in FLOORS"
            elif FLOOR[target] >= FLOOR[source] and (source, target) not in SIDEWAYS:
                wrong.setdefault((path, line, target), f"{path.relative_to(ROOT)}:{line}: {source} imports "
                                 f"{target_module} ({target}, floor {FLOOR[target]} >= {FLOOR[source]})")
    return list(wrong.values())  # one line per statement and unit it reaches


def test_every_unit_has_a_floor():
    units = {unit_of(".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"))
             for p in source_files()}
    units.discard(None)
    assert units - set(FLOOR) == set(), "place these in FLOORS (and docs/architecture.md)"


def test_imports_run_downward_only():
    assert arrows_against_the_floors(source_files()) == []


@pytest.mark.parametrize("statement", ["from flamino_core.engine.engine import Engine",
                                       "import flamino_core.store.passes",
                                       "from app_pages._ui.server import policy"])
def test_an_upward_import_fails_even_inside_a_function(statement, tmp_path, monkeypatch):
    """The check reads lazy imports too: a function in the model importing the engine (or the
    app's registry importing the hosting policy) is refused."""
    target = "model" if "flamino_core" in statement else "frame"
    folder = tmp_path / ("flamino_core" if target == "model" else "app_pages/_ui") / target
    folder.mkdir(parents=True)
    upward = folder / "upward.py"
    upward.write_text(f"def later():\n    {statement}\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    assert len(arrows_against_the_floors([upward])) == 1


def test_no_import_cycle_in_the_app_not_even_a_lazy_one():
    """Module by module over ``app_pages/`` and ``app.py`` (the core has its own check in
    test_imports): no module reaches itself, through a lazy import either (the model picker and
    the model loading imported each other until round 3)."""
    import graphlib

    modules = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
               for p in source_files() if p.parts[len(ROOT.parts)] != "flamino_core"}
    graph = {}
    for module, path in modules.items():
        named = {name for name, _ in imports(path, run_time_only=True)}
        graph[module] = {m for m in named if m in modules and m != module}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as err:
        pytest.fail(f"import cycle: {' -> '.join(err.args[1])}")


# --- doors ------------------------------------------------------------------------------------
# The app takes the core through each package's door (its __init__'s ``_EXPORTS``,
# ``flamino_core/doors.py``), not through the modules behind it. Left behind a door, each with why
# (the list may only shrink: a module leaving it is a test failing until it is struck off):
APP_INTERNALS = {
    "flamino_core.design.campaign": "a namespace: campaigns.load, campaigns.init (bare load, init say less)",
    "flamino_core.structure.files.fetch": "the page reads fetch.RCSB_URL at call time: tests move it",
    "flamino_core.weights.loading": "tests replace loading.load_weights, which the picker reads at call time",
    "flamino_core.engine.engine": "tests replace engine.Engine, which load_engine reads at call time",
    "flamino_core.predictors.apply": "apply.prediction_map and figures.prediction_map: one name for two things",
    "flamino_core.predictors.figures": "as predictors.apply",
    "flamino_core.variants.figures": "figures.substitution_map beside substitution_maps.substitution_map",
    "flamino_core.predictors.suggest": "its function suggest is its module's name: a door cannot export it",
    "flamino_core.variants.indels": "the scoring helpers' parameter `indels` shadows the name",
    "flamino_core.variants.structure_numbering": "imported on one line with indels",
}


def door_exports(package: str) -> dict[str, str]:
    """A package's door, read from its ``__init__`` (no import): name -> module, relative. A
    package that re-exports eagerly (``figures``, light) names what its ``from`` imports bring."""
    init = ROOT / package.replace(".", "/") / "__init__.py"
    body = ast.parse(init.read_text()).body
    for node in body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["_EXPORTS"]:
            return _unpacked(node.value)
    eager = [node for node in body if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(package + ".")]
    return {a.asname or a.name: node.module.removeprefix(package + ".") for node in eager for a in node.names}


def _unpacked(value: ast.Dict) -> dict[str, str]:
    """``{**dict.fromkeys([...], "module"), "name": "module"}`` read statically."""
    found = {}
    for key, item in zip(value.keys, value.values):
        if key is None:  # **dict.fromkeys([names], module)
            names, module = (ast.literal_eval(arg) for arg in item.args)
            found.update(dict.fromkeys(names, module))
        else:
            found[ast.literal_eval(key)] = ast.literal_eval(item)
    return found


def is_module(dotted: str) -> bool:
    path = ROOT / dotted.replace(".", "/")
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def app_core_imports() -> list[tuple[str, int, str, str]]:
    """(file, line, module, name) of every name the app imports from ``flamino_core`` (lazy
    imports included); ``import flamino_core.x.y`` gives name ''."""
    found = []
    for path in [ROOT / "app.py", *sorted((ROOT / "app_pages").rglob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found += [(path.name, node.lineno, a.name, "") for a in node.names
                          if a.name.startswith("flamino_core.")]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("flamino_core"):
                found += [(path.name, node.lineno, node.module, a.name) for a in node.names]
    return found


def internals_named(imported) -> set[str]:
    """The core modules (not packages) the app imports from or as a namespace."""
    named = set()
    for _, _, module, name in imported:
        target = f"{module}.{name}" if name and is_module(f"{module}.{name}") else module
        if target.count(".") >= 2 and not (ROOT / target.replace(".", "/") / "__init__.py").exists():
            named.add(target)
    return named


def test_the_app_imports_the_core_through_its_doors():
    imported = app_core_imports()
    assert internals_named(imported) == set(APP_INTERNALS), "import it through its package's door"
    def is_package(module: str) -> bool:
        return (ROOT / module.replace(".", "/") / "__init__.py").exists()

    closed = [(f, line, module, name) for f, line, module, name in imported
              if is_package(module) and name and not is_module(f"{module}.{name}") and name not in door_exports(module)]
    assert closed == [], "export these from the package's door (its __init__'s _EXPORTS)"


def test_every_door_names_what_its_modules_define_and_shadows_no_module():
    """Each exported name is defined (or imported) at its module's top level, and no name is a
    module of the package (``from package import module`` would get the name instead)."""
    wrong = []
    for init in sorted((ROOT / "flamino_core").rglob("__init__.py")):
        package = ".".join(init.parent.relative_to(ROOT).parts)
        for name, module in door_exports(package).items():
            source = ROOT / package.replace(".", "/") / (module.replace(".", "/") + ".py")
            tree = ast.parse(source.read_text())
            defined = {getattr(n, "name", None) for n in tree.body} | {
                t.id for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                for target in (n.targets if isinstance(n, ast.Assign) else [n.target])
                for t in ast.walk(target) if isinstance(t, ast.Name)} | {  # A, B = ... too
                a.asname or a.name for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names}
            if name not in defined or is_module(f"{package}.{name}"):
                wrong.append(f"{package}: {name} from {module}")
    assert wrong == []


def test_the_door_check_finds_a_module_imported_past_its_door():
    past = [("page.py", 1, "flamino_core.store.passes", "masked_log_probs")]
    assert internals_named(past) == {"flamino_core.store.passes"}
    assert internals_named([("page.py", 1, "flamino_core.store", "masked_log_probs")]) == set()
