"""Each kind's folder of tests on ``sys.path`` (importing this module puts them there): test
modules import each other's helpers by module name across folders (``from test_app import
start``), as do the benchmarks and load tests that reuse them. pytest's default import mode puts
only a test file's own folder on the path; ``conftest.py`` imports this for the rest."""

from __future__ import annotations

import sys
from pathlib import Path

from suite_timing import KINDS

HERE = Path(__file__).resolve().parent
for _kind in KINDS:
    if str(HERE / _kind) not in sys.path:
        sys.path.insert(0, str(HERE / _kind))
