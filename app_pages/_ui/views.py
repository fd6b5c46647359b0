"""The app's pages and their shareable options, each declared once, here.

Everything else reads this registry: the navigation (``app.py``), the link codec (``links.py``:
which query keys a link may carry and how each is parsed), the link's start of a session
(``session.py``: which options a page's link carries), and the kept widgets (``widgets.py``: an
option's default, its choices and their labels, its bounds, and whether a kept value is still
valid). Adding a page option is one ``ViewOption`` in ``OPTIONS`` plus one ``kept_*`` widget
call on its page; adding a page is one ``Page`` in ``PAGES`` plus its file in ``app_pages/``.

Pure data and parsers, no Streamlit: the link codec and its tests import this without the app.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

MAX_INT = 10_000_000  # bounds any number a link carries; 8 digits at most


@dataclasses.dataclass(frozen=True)
class Integer:
    """A whole number in ``[low, high]``, written in a link as plain digits."""

    low: int = 0
    high: int = MAX_INT

    def parse(self, text: str) -> int | None:
        if not re.fullmatch(r"-?[0-9]{1,8}" if self.low < 0 else r"[0-9]{1,8}", text):
            return None
        return self._bounded(int(text))

    def format(self, value: int) -> str:
        return str(value)

    def valid(self, value: object) -> bool:
        return self._bounded(value) is not None

    def _bounded(self, value: object) -> int | None:
        # bool is an int to Python, but never a position or a layer.
        ok = isinstance(value, int) and not isinstance(value, bool) and self.low <= value <= self.high
        return value if ok else None


@dataclasses.dataclass(frozen=True)
class Choice:
    """One of a few fixed values, written as itself; ``labels`` says what the widget shows."""

    labels: Mapping[str, str]  # value -> label, in the order the widget lists them

    def parse(self, text: str) -> str | None:
        return text if text in self.labels else None

    def format(self, value: str) -> str:
        return value

    def valid(self, value: object) -> bool:
        return isinstance(value, str) and value in self.labels


@dataclasses.dataclass(frozen=True)
class Flag:
    """On or off, written as ``1`` or ``0``."""

    def parse(self, text: str) -> bool | None:
        return {"1": True, "0": False}.get(text)

    def format(self, value: bool) -> str:
        return "1" if value else "0"

    def valid(self, value: object) -> bool:
        return isinstance(value, bool)


@dataclasses.dataclass(frozen=True)
class Span:
    """A stretch of residues ``(start, end)``, 1-based and inclusive, written ``start-end``.

    Always indices into the analysed sequence, whatever its numbering: the widget shows the
    residues' numbers, the link and session state keep where they are.
    """

    def parse(self, text: str) -> tuple[int, int] | None:
        match = re.fullmatch(r"([0-9]{1,8})-([0-9]{1,8})", text)
        return self._valid(int(match[1]), int(match[2])) if match else None

    def format(self, value: tuple[int, int]) -> str:
        return f"{value[0]}-{value[1]}"

    def valid(self, value: object) -> bool:
        return isinstance(value, tuple) and len(value) == 2 and self._valid(*value) is not None

    @staticmethod
    def _valid(start: object, end: object) -> tuple[int, int] | None:
        ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end))
        return (start, end) if ints and 1 <= start <= end <= MAX_INT else None


Kind = Integer | Choice | Flag | Span


@dataclasses.dataclass(frozen=True)
class ViewOption:
    """A page selection that links carry and kept widgets restore.

    ``key`` is both the query key and the session-state key. ``page`` is the page whose links
    carry it (None: every page's). ``default`` is None where the page supplies it at run time
    (the final layer depends on the model). ``per_record``: the value belongs to the selected
    record (its numbering, its window, the residues shown) and is forgotten when another
    record is chosen (``numbering.follow_record``).
    """

    key: str
    page: str | None
    kind: Kind
    default: object = None
    per_record: bool = False


@dataclasses.dataclass(frozen=True)
class Page:
    """A page of the app: ``key`` is its link's ``page=`` value and its URL path."""

    key: str
    title: str
    icon: str
    file: str  # relative to the repository root, as ``st.Page`` and ``st.switch_page`` take it


PAGES: dict[str, Page] = {
    page.key: page
    for page in (
        Page("input", "Input", ":material/edit_note:", "app_pages/input.py"),
        Page("predictions", "Masked predictions", ":material/grid_on:", "app_pages/predictions.py"),
        Page("embeddings", "Embeddings", ":material/scatter_plot:", "app_pages/embeddings.py"),
        Page("attention", "Attention", ":material/hub:", "app_pages/attention.py"),
    )
}
DEFAULT_PAGE = "input"

OPTIONS: dict[str, ViewOption] = {
    option.key: option
    for option in (
        ViewOption("pos", "predictions", Integer(1), 1),  # the masked position, 1-based
        ViewOption("k", "predictions", Integer(1, 20), 3),  # top-k predictions per position
        ViewOption(
            "scan",
            "predictions",
            Choice(
                {
                    "wt": "wt-marginals — fast: one unmasked pass",
                    "masked": "masked-marginals — exact: one pass per position (slower), gives "
                    "pseudo-perplexity",
                }
            ),
            "wt",
        ),
        ViewOption("elayer", "embeddings", Integer(0, 1000)),  # default: the final layer
        ViewOption("dims", "embeddings", Choice({"2": "2D", "3": "3D"}), "2"),
        ViewOption(
            "colour",
            "embeddings",
            Choice({"position": "position", "residue": "residue", "class": "residue class"}),
            "position",
        ),
        ViewOption("alayer", "attention", Integer(1, 1000)),  # default: the final layer
        # The number of the record's first residue (default: its id's /start-end suffix).
        ViewOption("first", None, Integer(-MAX_INT, MAX_INT), per_record=True),
        # Hosted mode, a record over the per-record limit: where its analysed window starts (1-based).
        ViewOption("win", None, Integer(1), 1, per_record=True),
        # The residues the analysis pages show (default: all, or the first 500 of long ones).
        ViewOption("range", None, Span(), per_record=True),
        ViewOption("head", "attention", Integer(0, 1000), 0),  # 0: the average of all heads
        ViewOption("apc", "attention", Flag(), False),
        ViewOption("special", "attention", Flag(), False),
    )
}


def page_options(page: str) -> tuple[ViewOption, ...]:
    """The options a link to ``page`` carries: its own and those of every page."""
    return tuple(option for option in OPTIONS.values() if option.page in (page, None))
