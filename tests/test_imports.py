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


@pytest.mark.parametrize("argv", [["--help"], ["embed", "--help"], ["score", "--help"], ["variants", "--help"],
                                  ["dms", "--help"], ["batch", "embed", "--help"]])
def test_help_loads_no_heavy_library(argv):
    code = (
        "import contextlib, io\nfrom flamino_core.cli import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()):\n    assert main({argv!r}) == 0"
    )
    assert heavy_modules_after(code) == []


@pytest.mark.parametrize(
    "module",
    ["alphabet", "config", "options", "progress", "atomic", "input_formats", "fasta_records", "fasta",
     "fasta_reader", "flat_files", "record_metadata", "protspace", "three_letter", "scores", "planning",
     "analysis", "figures", "cli", "batch"],
)
def test_modules_the_light_paths_use_do_not_load_jax(module):
    assert heavy_modules_after(f"import flamino_core.{module}") == []
