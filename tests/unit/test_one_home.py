"""One rule, one home (issue #65): the progress callback type is declared once (``progress.ProgressFn``)
and every size shown to a user is written by one formatter (``wording.byte_size``, binary units).
Read from the source files of the core, the app's pages and ``app.py``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from flamino_core.wording import byte_size

ROOT = Path(__file__).resolve().parents[2]
# A byte unit right after a formatted value (``{n / 1e6:.1f} MB``, ``{x} GiB``): a second formatter.
UNIT_AFTER_VALUE = re.compile(r"\}\s?(?:[kKMGT]i?B)\b")
PROGRESS_TYPE = re.compile(r"Callable\[\[int, int\], None\]")


def product_files() -> list[Path]:
    return [ROOT / "app.py", *sorted((ROOT / "flamino_core").rglob("*.py")),
            *sorted((ROOT / "app_pages").rglob("*.py"))]


def second_homes(pattern: re.Pattern, home: str, files: list[tuple[str, str]]) -> list[str]:
    return [f"{name}:{number}" for name, text in files if name != home
            for number, line in enumerate(text.splitlines(), start=1) if pattern.search(line)]


def sources() -> list[tuple[str, str]]:
    return [(p.relative_to(ROOT).as_posix(), p.read_text()) for p in product_files()]


def test_sizes_are_formatted_by_byte_size_only():
    found = second_homes(UNIT_AFTER_VALUE, "flamino_core/wording.py", sources())
    assert not found, f"format sizes with flamino_core.wording.byte_size: {found}"


def test_the_progress_callback_type_is_declared_once():
    found = second_homes(PROGRESS_TYPE, "flamino_core/progress.py", sources())
    assert not found, f"import ProgressFn from flamino_core.progress: {found}"


@pytest.mark.parametrize("pattern, planted", [
    (UNIT_AFTER_VALUE, 'message = f"needs {size / 1e9:,.1f} GB"'),
    (UNIT_AFTER_VALUE, 'message = f"{n >> 20} MiB"'),
    (PROGRESS_TYPE, "ProgressFn = Callable[[int, int], None]"),
])
def test_a_planted_second_home_is_found(pattern, planted):
    assert second_homes(pattern, "home.py", [("other.py", planted)]) == ["other.py:1"]


@pytest.mark.parametrize("n, words", [
    (512, "512 bytes"),
    (12 * 1024, "12 KiB"),
    (1_500_000, "1.43 MiB"),  # 1,500,000 / 2^20 = 1.4305
    (920 * 2**20, "920 MiB"),
    (14_066_017_402, "13.1 GiB"),  # / 2^30 = 13.1001
    (2**40, "1,024.0 GiB"),
])
def test_byte_size_says_binary_units(n, words):
    assert byte_size(n) == words
