"""``import flamino_core`` and ``flamino --help`` stay light: no JAX, Streamlit or Ray until used.

Each check runs in a fresh interpreter and reads ``sys.modules`` there, so an import anywhere
down the chain (not only in the module's own import lines) is caught.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("jax", "jaxlib", "flax", "orbax", "streamlit", "ray", "torch")


def heavy_modules_after(code: str) -> list[str]:
    """Top-level heavy packages in ``sys.modules`` after running ``code`` in a new process."""
    probe = code + f"\nimport sys, json\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r})))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_importing_the_package_loads_no_heavy_library():
    assert heavy_modules_after("import flamino_core") == []


def test_the_public_names_still_load_on_first_use():
    assert heavy_modules_after("import flamino_core\nflamino_core.PRESETS\nflamino_core.parse_fasta_text") == []
    loaded = heavy_modules_after("import flamino_core\nassert flamino_core.Engine.__name__ == 'Engine'")
    assert "jax" in loaded  # the probe itself can see JAX arrive


def test_the_family_neutral_face_names_every_family_and_stays_light():
    """Issue #49: the package's face is not ESM-2's alone: the families, the config, the model id
    and the numbering values are exported, and reading them loads no heavy library."""
    probe = ("import flamino_core as f\n"
             "assert set(f.FAMILIES) == {'esm2', 'esm1b', 'esm1v', 'esmc', 'saprot'}, sorted(f.FAMILIES)\n"
             "assert f.ModelConfig is f.ESM2Config and f.Family.__name__ == 'Family'\n"
             "assert f.Numbering(16).number(0) == 16\n"
             "assert f.ModelId.__name__ == 'ModelId'")
    assert heavy_modules_after(probe) == []


def test_every_door_loads_nothing_heavy():
    """A package's door (``flamino_core/doors.py``) imports its modules on first use only: the
    pages import through doors and may not load JAX before a model is loaded."""
    from pathlib import Path

    core = Path(__file__).resolve().parents[2] / "flamino_core"
    doors = sorted(".".join(p.parent.relative_to(core.parent).parts) for p in core.rglob("__init__.py")
                   if "lazy_door(" in p.read_text())
    assert "flamino_core.structure" in doors and "flamino_core.engine" in doors  # the probe sees the doors
    assert heavy_modules_after("\n".join(f"import {door}" for door in doors)) == []


@pytest.mark.parametrize("argv", [["--help"], ["embed", "--help"], ["score", "--help"], ["variants", "--help"],
                                  ["dms", "--help"], ["batch", "embed", "--help"],
                                  ["fit", "--help"], ["predict", "--help"], ["suggest", "--help"],
                                  ["campaign", "propose", "--help"]])
def test_help_loads_no_heavy_library(argv):
    code = (
        "import contextlib, io\nfrom flamino_core.cli import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()):\n    assert main({argv!r}) == 0"
    )
    assert heavy_modules_after(code) == []


@pytest.mark.parametrize(
    "module",
    ["alphabet", "model.config", "options", "progress", "atomic", "inputs.formats", "inputs.fasta_records",
     "inputs.fasta", "inputs.fasta_reader", "inputs.flat_files", "inputs.tables", "records.metadata",
     "records.protspace", "inputs.three_letter", "variants.substitution_maps", "engine.planner",
     "engine.windows", "engine.memory", "analysis.outputs", "figures", "cli", "batch"],
)
def test_modules_the_light_paths_use_do_not_load_jax(module):
    assert heavy_modules_after(f"import flamino_core.{module}") == []


def _imports_of(path, module: str, modules: set[str]) -> set[str]:
    """flamino_core modules that ``module`` imports anywhere in its file (top level or inside a
    function: a lazy import is an edge too). ``from pkg import name`` counts as importing the
    submodule ``pkg.name`` when there is one, otherwise ``pkg`` itself."""
    import ast

    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = ".".join(parts[: len(parts) - node.level + 1] + [node.module or ""]).strip(".") if node.level else node.module
            subs = {f"{base}.{alias.name}" for alias in node.names} & modules
            found |= subs | ({base} if len(subs) < len(node.names) else set())
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return (found & modules) - {module}


def test_no_import_cycle_in_flamino_core_not_even_a_lazy_one():
    """Following every import statement, including ones inside functions: no module reaches
    itself (a cycle hidden by a lazy import is still a cycle)."""
    import graphlib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "flamino_core"
    files = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {module: _imports_of(path, module, set(files)) for module, path in files.items()}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as err:
        pytest.fail(f"import cycle: {' -> '.join(err.args[1])}")


# What one `flamino embed` must not load (issue #68 item 2: the start of one protein against the
# JAX floor): tables, plots, the app, the reference libraries, the cluster and the old checkpoint
# reader. Each is tens to hundreds of milliseconds of import.
NOT_FOR_ONE_EMBED = ("pandas", "scipy", "sklearn", "plotly", "streamlit", "transformers", "torch", "ray", "orbax",
                     "h5py", "pyarrow", "matplotlib")


def test_one_embed_imports_none_of_the_heavy_libraries(tmp_path):
    """The whole `flamino embed` of one protein, from the argv to the written .npz, in a new process:
    ``-X importtime`` logs every module the moment it is imported (the CLI ends with ``os._exit``, so
    ``sys.modules`` at exit cannot be read), and none of the libraries above may appear."""
    import os

    fasta = tmp_path / "one.fa"
    fasta.write_text(">p19\nPQCKTSPLSNWHTFLFEYK\n")
    out = tmp_path / "one.npz"
    env = {**os.environ, "FLAMINO_CACHE": str(tmp_path / "cache")}
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "from flamino_core.cli import run; run()", "embed", str(fasta),
         "-m", "random:tiny", "-o", str(out), "--include", "mean,per_tok"],
        capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert out.exists()
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in result.stderr.splitlines()
                if line.startswith("import time:")}
    assert {"jax", "flamino_core"} <= imported  # the log is read: the embed's own imports are in it
    assert sorted(imported & set(NOT_FOR_ONE_EMBED)) == []
