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

from flamino_core.options import CONTACT_CUTOFFS, SEPARATION_RANGES, STRATEGIES, map_strategies, scoring_strategies
from flamino_core.structure import PARAMS, TRACKS, Param

MAX_INT = 10_000_000  # bounds any number a link carries; 8 digits at most


def _span(low: int, high: int | None) -> str:
    return f"≥ {low}" if high is None else f"{low}–{high}"


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
    """One of a few fixed values, written as itself; ``labels`` says what the widget shows.

    ``aliases``: what older links wrote for a value (``wt`` for ``wt-marginals``), still read."""

    labels: Mapping[str, str]  # value -> label, in the order the widget lists them
    aliases: Mapping[str, str] = dataclasses.field(default_factory=dict)  # old value -> value

    def parse(self, text: str) -> str | None:
        text = self.aliases.get(text, text)
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
class Word:
    """A short identifier such as a structure's chain id, written as itself."""

    # PDB chain ids are one character; mmCIF author ids of large assemblies are longer ("AAA", "A-2").
    pattern: str = r"[A-Za-z0-9_.-]{1,8}"

    def parse(self, text: str) -> str | None:
        return text if self.valid(text) else None

    def format(self, value: str) -> str:
        return value

    def valid(self, value: object) -> bool:
        return isinstance(value, str) and re.fullmatch(self.pattern, value) is not None


@dataclasses.dataclass(frozen=True)
class Text:
    """Free text of 1 to ``max_chars`` characters (tabs and line breaks allowed), as written."""

    max_chars: int

    def parse(self, text: str) -> str | None:
        return text if self.valid(text) else None

    def format(self, value: str) -> str:
        return value

    def valid(self, value: object) -> bool:
        return isinstance(value, str) and 0 < len(value) <= self.max_chars and not _CONTROL.search(value)


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # what a text option may not hold


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


Kind = Integer | Choice | Flag | Word | Text | Span


class LiveChoices(Mapping):
    """A ``Choice``'s labels read from a core registry each time they are asked for, so an entry
    registered after this module was imported (a plugin, a test's toy) is offered and linkable."""

    def __init__(self, make):
        self._make = make

    def __getitem__(self, key):
        return self._make()[key]

    def __iter__(self):
        return iter(self._make())

    def __len__(self) -> int:
        return len(self._make())


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
    # What ``context.serve`` draws before the page's ``main(ctx)``: "own" (nothing; the page
    # checks what it needs), "title" (the page needs the records and a loaded model: the title),
    # "record" (the title and the selected record's caption), "range" (and the residue range).
    frame: str = "own"
    blurb: str = ""  # what the Input page says the page shows
    # Whether the page reads a structure-aware model's structure letters (a structure held for the
    # session); on the others such a model reads every residue as '#', which ``context.serve`` says.
    reads_structure: bool = False


PAGES: dict[str, Page] = {
    page.key: page
    for page in (
        Page("input", "Input", ":material/edit_note:", "app_pages/input.py"),
        Page("records", "Records", ":material/table_rows:", "app_pages/records.py", "title",
             "a table of every record"),
        Page("predictions", "Masked predictions", ":material/grid_on:", "app_pages/masked_predictions.py", "range"),
        Page("variants", "Variant effects", ":material/biotech:", "app_pages/variants.py", "own",
             "your mutation list or deep mutational scan, and mutations worth trying", reads_structure=True),
        Page("predict", "Predict from labels", ":material/model_training:", "app_pages/predict_from_labels.py", "own",
             "a predictor fitted on your own measurements"),
        Page("embeddings", "Embeddings", ":material/scatter_plot:", "app_pages/embeddings.py", "range"),
        Page("attention", "Attention", ":material/hub:", "app_pages/attention.py", "range"),
        Page("structure", "Structure", ":material/deployed_code:", "app_pages/structure.py", "own",
             "contacts against your PDB/mmCIF file", reads_structure=True),
    )
}
DEFAULT_PAGE = "input"


def _track_option(param: Param) -> ViewOption:
    """The link option of a track choice, generated from its declaration (``structure.tracks``):
    a choice is carried as itself, a number within its bounds (an optional one left out: 0)."""
    if param.kind == "choice":
        return ViewOption(param.link, "structure", Choice(LiveChoices(lambda: {v: v for v in param.options()})),
                          param.default)
    if param.optional:
        return ViewOption(param.link, "structure", Integer(0, param.high or MAX_INT), 0)
    return ViewOption(param.link, "structure", Integer(param.low or 0, param.high or MAX_INT), param.default)


# Every strategy the app offers is named and labelled as its flamino_core.options.Strategy declares
# it (map strategies for maps of a whole sequence, ``scoring_strategies()`` for the user's
# variants), in widgets and links alike; the short values older links wrote ("wt", "masked") are
# read as the strategies they meant.
OLD_STRATEGY_VALUES = {"wt": "wt-marginals", "masked": "masked-marginals"}
MAP_STRATEGIES = map_strategies()  # the substitution maps the pages draw


def _strategy_choice(names) -> Choice:
    return Choice({name: STRATEGIES[name].label("map") for name in names if name in STRATEGIES}, OLD_STRATEGY_VALUES)


# The Structure page: chain and model in the file, the contact map's range and cutoff, and the
# track on the 3D view with its own choices.
BEST_CHAIN = "best"  # the chain that best matches the sequence
_SEPARATION_LABELS = {name: f"{name} ({_span(*bounds)})" for name, bounds in SEPARATION_RANGES.items()}
STRUCTURE_OPTIONS = (
    ViewOption("schain", "structure", Word(), BEST_CHAIN),
    ViewOption("smodel", "structure", Integer(0, 9999), 0),  # 0-based model in the file
    ViewOption("srange", "structure", Choice(_SEPARATION_LABELS), "all"),
    ViewOption("scut", "structure", Choice({cutoff: f"top {cutoff}" for cutoff in CONTACT_CUTOFFS}), "L"),
    ViewOption("strack", "structure", Choice(LiveChoices(lambda: {name: name for name in TRACKS})), "entropy"),
    # Each track choice (saa, sres, slayer, shead, spc, sscore), from structure.tracks.PARAMS.
    *(_track_option(param) for param in PARAMS.values()),
    # A structure downloaded by PDB id or UniProt accession (AlphaFold DB): downloaded again on
    # opening the link. An uploaded file never travels (the page and the share panel say so).
    ViewOption("sid", "structure", Word(r"[A-Za-z0-9_]{4,12}")),
)
MAX_LINK_MUTATIONS = 1_500  # characters of a mutation list a link carries
# The Variant effects page's strategies, read from the registry each time (a strategy declared
# after this module was imported is offered and linkable too).
VARIANT_CHOICE = Choice(LiveChoices(lambda: {name: STRATEGIES[name].label("variant") for name in scoring_strategies()}))

OPTIONS: dict[str, ViewOption] = {
    option.key: option
    for option in (
        ViewOption("pos", "predictions", Integer(1), 1),  # the masked position, 1-based
        ViewOption("k", "predictions", Integer(1, 20), 3),  # top-k predictions per position
        ViewOption("scan", "predictions", _strategy_choice(MAP_STRATEGIES), "wt-marginals"),  # the map's
        ViewOption("elayer", "embeddings", Integer(0, 1000)),  # default: the final layer
        ViewOption("dims", "embeddings", Choice({"2": "2D", "3": "3D"}), "2"),
        ViewOption(
            "colour",
            "embeddings",
            Choice({"position": "position", "residue": "residue", "class": "residue class"}),
            "position",
        ),
        ViewOption("smap", "embeddings", Choice({"pca": "PCA", "umap": "UMAP"}), "pca"),  # the records' map
        ViewOption("slabels", "embeddings", Flag()),  # record ids on the map; default: on up to 30 records
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
        *STRUCTURE_OPTIONS,
        ViewOption("dna", None, Flag(), False),  # analyse nucleotide sequences as protein anyway
        # The Variants page (docs/variants.md). The mutation list travels only when it is short
        # (a link's budget is shared with the sequence); a longer one leaves "mlong" instead.
        ViewOption("vinput", "variants", Choice({"list": "a mutation list", "dms": "a DMS table"}), "list"),
        ViewOption("vstrategy", "variants", VARIANT_CHOICE, "masked-marginals"),
        # A structure's record: the list's positions as the file numbers them, or along the sequence.
        ViewOption("vnumbering", "variants", Choice({"structure": "the structure's numbering",
                                                     "sequence": "the sequence's numbering"}), "structure"),
        ViewOption("muts", "variants", Text(MAX_LINK_MUTATIONS)),
        ViewOption("mlong", "variants", Flag()),
        ViewOption("vmap", "variants", _strategy_choice(MAP_STRATEGIES), "wt-marginals"),  # the map's
        ViewOption("veffect", "variants", Choice(
            {"all": "all", "below": "score < 0 (the model prefers the wild type)",
             "above": "score ≥ 0 (as likely or more)"}), "all"),
        # The position range of the table, in the record's numbering (default: the whole record).
        ViewOption("vfrom", "variants", Integer(-MAX_INT, MAX_INT)),
        ViewOption("vto", "variants", Integer(-MAX_INT, MAX_INT)),
        ViewOption("singles", "variants", Flag(), False),
        # The Predict page (docs/predict.md); its table does not travel in links.
        ViewOption("pfeat", "predict", Choice(
            {"embedding": "embedding — the model's mean embedding", "augmented": "augmented — one-hot + the "
             "model's zero-shot score (Hsu et al. 2022)", "onehot": "one-hot — no model (the baseline)"}),
            "embedding"),
        ViewOption("pwt", "predict", Choice(
            {"table": "derived from the table's mutated_sequence", "record": "the selected record"}), "table"),
        ViewOption("dmswt", "variants", Choice(
            {"table": "derived from the table's mutated_sequence", "record": "the selected record"}), "table"),
    )
}


def page_options(page: str) -> tuple[ViewOption, ...]:
    """The options a link to ``page`` carries: its own and those of every page."""
    return tuple(option for option in OPTIONS.values() if option.page in (page, None))
