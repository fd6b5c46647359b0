"""What the suite costs and what it leaves behind, reported at the end of every run.

- Time by kind (the markers of ``conftest.KINDS``) and the 15 slowest tests: each test's setup,
  call and teardown summed. Under ``pytest -n`` the kinds' times add up to more than the run's
  wall time (two workers run at once); the wall time is printed beside them. Also written to
  ``test-artifacts/suite-times.json`` (read by docs/testing.md's table).
- Isolation: a run writes only in its temporary folders and ``test-artifacts/``. The flamino and
  Hugging Face caches under ``~/.cache``, Ray's ``~/.ray`` (its token file) and the checkout's own
  files are listed before and after the run; anything new or changed there fails the run, named.

Loaded by ``tests/conftest.py``; under pytest-xdist the reports arrive at the controller, which
does the counting and the check (workers do neither).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("unit", "integration", "parity", "app", "browser", "ray")
SLOWEST = 15
# Places a test must never write: a user's caches (a test that forgets its own FLAMINO_CACHE would
# fill them with compiled code or random weights). Tests write in tmp_path or test-artifacts/.
OUTSIDE = (Path.home() / ".cache" / "flamino", Path.home() / ".cache" / "huggingface", Path.home() / ".ray")


def _is_worker(config) -> bool:
    return hasattr(config, "workerinput")


def _files_under(folder: Path) -> dict[str, int]:
    found = {}
    for dirpath, _dirnames, filenames in os.walk(folder):
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                found[path] = os.stat(path).st_mtime_ns
            except OSError:  # gone between the listing and the stat
                pass
    return found


def _checkout_changes() -> set[str]:
    """The checkout's modified and untracked files (not ignored ones: .venv, test-artifacts/,
    build outputs are ignored by .gitignore), as git reports them; empty outside a git checkout,
    or with ``FLAMINO_TEST_EDITING=1`` (someone edits this checkout while the tests run)."""
    if os.environ.get("FLAMINO_TEST_EDITING") == "1":
        return set()
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return set(out.splitlines())


class SuiteTiming:
    def __init__(self) -> None:
        self.started = time.monotonic()
        self.seconds: dict[str, float] = defaultdict(float)
        self.kind: dict[str, str] = {}
        self.outside_before = {str(folder): _files_under(folder) for folder in OUTSIDE}
        self.checkout_before = _checkout_changes()

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report) -> None:
        self.seconds[report.nodeid] += report.duration
        if report.nodeid not in self.kind:
            self.kind[report.nodeid] = next((k for k in KINDS if k in report.keywords), "integration")

    def _written_outside(self) -> list[str]:
        written = []
        for folder in OUTSIDE:
            before = self.outside_before[str(folder)]
            written += [path for path, mtime in _files_under(folder).items() if before.get(path) != mtime]
        written += sorted(_checkout_changes() - self.checkout_before)
        return written

    @pytest.hookimpl
    def pytest_sessionfinish(self, session) -> None:
        written = self._written_outside()
        if written:
            session.config._flamino_written_outside = written
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter, config) -> None:
        written = getattr(config, "_flamino_written_outside", None)
        if not self.seconds and not written:  # --collect-only, or nothing selected
            return
        wall = time.monotonic() - self.started
        by_kind = {k: [0, 0.0] for k in KINDS}
        for nodeid, seconds in self.seconds.items():
            entry = by_kind[self.kind.get(nodeid, "integration")]
            entry[0] += 1
            entry[1] += seconds
        write = terminalreporter.write_line
        write("")
        write(f"time by kind (test time summed; wall time of the run {wall / 60:.1f} min):")
        for kind, (count, seconds) in by_kind.items():
            if count:
                write(f"  {kind:<12} {count:>5} tests  {seconds / 60:6.1f} min")
        write(f"{SLOWEST} slowest tests:")
        for nodeid, seconds in sorted(self.seconds.items(), key=lambda item: -item[1])[:SLOWEST]:
            write(f"  {seconds:7.1f} s  {nodeid}")
        if written:
            write("FAILED: the run wrote outside its temporary folders and test-artifacts/:", red=True)
            for path in written[:20]:
                write(f"  {path}", red=True)
        artifacts = ROOT / "test-artifacts"
        artifacts.mkdir(exist_ok=True)
        (artifacts / "suite-times.json").write_text(json.dumps({
            "wall_seconds": round(wall, 1),
            "workers": getattr(config.option, "numprocesses", None) or 0,
            "by_kind": {k: {"tests": n, "seconds": round(s, 1)} for k, (n, s) in by_kind.items()},
            "tests": {nodeid: round(s, 2) for nodeid, s in sorted(self.seconds.items())},
        }, indent=1))


def pytest_configure(config) -> None:
    if not _is_worker(config):
        config.pluginmanager.register(SuiteTiming(), "flamino-suite-timing")
