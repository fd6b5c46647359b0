"""What a page works on, computed once per rerun by ``app.py``: the ``PageContext``.

Every rerun reads the input once (``inputs.read_input``), looks the model's engine up once
(``models.active_engine``) and settles the record, its numbering and its window before any page
code runs; each page is a ``main(ctx)`` that takes them from here, so no page parses the input
again or asks for the engine again, and nothing travels between modules through session state.

What a page needs before it can draw (a record, a model that loads) is declared once per page in
``views.PAGES`` (``Page.frame``), and ``serve`` draws the shared opening: what is missing, or the
page's title, the record's caption and the residue range it shows.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import TYPE_CHECKING

import streamlit as st

from flamino_core.inputs import Numbering, ParsedInput, ProteinRecord
from flamino_core.model import ModelId

from app_pages._ui.frame.downloads import safe_name
from app_pages._ui.server.policy import visitor_model_name, visitor_short_name
from app_pages._ui.frame.views import DEFAULT_PAGE, PAGES

if TYPE_CHECKING:
    from flamino_core.engine import Engine

    from app_pages._ui.rerun.ranges import Shown


@dataclasses.dataclass(frozen=True)
class PageContext:
    """One rerun's view of the session: the input, the record, the model.

    ``record`` is the selected record as the pages analyse it (a hosted server cuts one over its
    limit to a window), ``record_read`` the same record as read; ``first`` is the number of the
    first residue of ``record`` (position ``i``, 0-based, is ``first + i``); ``shown`` the
    residues the page shows (pages with a range only).
    """

    page: str  # its key in views.PAGES
    parsed: ParsedInput | None  # the validated input; None when there is no text and no file
    counts: tuple[int, ...]  # records kept from the pasted text, then from each uploaded file
    records_read: tuple[ProteinRecord, ...]
    records: tuple[ProteinRecord, ...]  # as analysed
    record_read: ProteinRecord | None
    record: ProteinRecord | None
    window_start: int  # 0-based start of ``record`` in ``record_read`` (hosted windows)
    first: int  # the number of the first residue of ``record``
    model_id: ModelId  # the model the session chose, read once here (``build``)
    engine: Engine | None  # None when it cannot be loaded (``engine_problem`` says why)
    engine_problem: str | None
    missing_link_record: str | None = None  # a link's record id that this input lacks
    shown: Shown | None = None

    @property
    def sequence(self) -> str:
        """The selected record's sequence as analysed ("" without a record)."""
        return self.record.sequence if self.record is not None else ""

    @property
    def model(self) -> str:
        """The chosen model's identifier as written (the result store's and downloads' key)."""
        return self.model_id.text

    @property
    def model_name(self) -> str:
        """The model as downloads' ``model`` column names it (hosted: never a server path)."""
        return visitor_model_name(self.model)

    @property
    def model_stem(self) -> str:
        """The model as a file-name part: a preset's name, a checkpoint's file or folder name."""
        return safe_name(visitor_short_name(self.model))

    @property
    def stem(self) -> str:
        """The selected record's id and the model as a file-name stem, for downloads: two models'
        files of one record could not be told apart."""
        return f"{safe_name(self.record.id) if self.record is not None else 'records'}_{self.model_stem}"

    @property
    def numbering(self) -> Numbering:
        """``record``'s residue numbering (index ``i`` is residue ``first + i``)."""
        return Numbering(self.first)

    @property
    def last(self) -> int:
        """The number of the last residue of ``record``."""
        return self.numbering.last(len(self.sequence))


def build(page: str, parsed: ParsedInput | None, counts: tuple[int, ...], first_read: int | None) -> PageContext:
    """The context of this rerun, once the sidebar has drawn its choices: the app's door for the
    session's model, read into a ``ModelId`` here once and passed as a value to the policy's
    check, the weights' permissions and ``load_weights`` (``models.active_engine``).

    Args:
      page: the page's key.
      parsed, counts: this rerun's one reading of the input (``inputs.read_input``).
      first_read: the number of the selected record's first residue as read, from the sidebar
        (``numbering.numbering_controls``); None without a record.
    """
    from app_pages._ui.input import reading as inputs, model_loading as models, numbering

    records_read = parsed.records if parsed is not None else ()
    record_read = inputs.chosen(records_read)
    selected = record_read.id if record_read is not None else None
    records = numbering.analysed_records(records_read, selected)
    record = next((r for r in records if r.id == selected), None)
    window = numbering.window_start(record_read, selected) if record_read is not None else 0
    base = first_read if first_read is not None else (numbering.id_first_number(record_read) if record_read else 1)
    model = ModelId.parse(models.model_id())  # the session's text, read once per rerun
    engine, problem = models.active_engine(model)
    return PageContext(
        page=page, parsed=parsed, counts=counts, records_read=records_read, records=records,
        record_read=record_read, record=record, window_start=window, first=base + window,
        model_id=model, engine=engine, engine_problem=problem,
        missing_link_record=inputs.missing_link_record(records_read),
    )


def ready(ctx: PageContext, *, record: bool = True) -> bool:
    """Whether the page can draw: a record (when ``record``) and a loaded model; if not, say
    what to do and return False."""
    from app_pages._ui.frame.widgets import plain

    if record and ctx.record is None:
        st.info("Start on the **Input** page: paste a sequence, upload FASTA or pick an example.")
        if st.button("Go to Input"):
            st.switch_page(PAGES[DEFAULT_PAGE].file)
        return False
    if record and ctx.missing_link_record is not None:  # never silently another record
        from app_pages._ui.input.reading import forget_link_record

        st.warning(plain(f"The link names the record {ctx.missing_link_record}, which is not in this input.")
                   + " Choose a record in the sidebar.", icon=":material/link_off:")
        st.button(plain(f"Show {ctx.record.id}"), on_click=forget_link_record)
        return False
    if ctx.engine is None:
        st.info("Choose a model that can be loaded in the sidebar to see this page.")
        return False
    return True


# --- running a page with its context ----------------------------------------------------------------
_serving = threading.local()  # the context of the page this thread (a session's script run) draws


def serve(page, ctx: PageContext) -> None:
    """Draw what every page of its kind opens with (``Page.frame``), then run ``page`` (what
    ``st.navigation`` returned) with ``ctx``."""
    from app_pages._ui.input import reading as inputs
    from app_pages._ui.rerun import ranges

    frame = PAGES[ctx.page].frame
    if frame != "own":
        if not ready(ctx):
            return
        st.header(PAGES[ctx.page].title)
        if frame in ("record", "range"):
            inputs.record_caption(ctx.record, ctx.record_read, ctx.numbering)
        if frame == "range":
            ctx = dataclasses.replace(ctx, shown=ranges.page_range(ctx))
        sequence_only_note(ctx)
    _serving.ctx = ctx
    try:
        page.run()
    finally:
        _serving.ctx = None


def sequence_only_note(ctx: PageContext) -> None:
    """On a page that reads no structure, a structure-aware model (SaProt) reads every residue as
    '#': say so where its numbers are shown (they were shown as if structure-aware)."""
    from app_pages._ui.frame.docs import explain

    if ctx.engine is None or not ctx.engine.family.structure_aware or PAGES[ctx.page].reads_structure:
        return
    title = ctx.engine.family.title
    readers = " and ".join(page.title for page in PAGES.values() if page.reads_structure)
    st.caption(f"{title} reads every residue here as '#' (no structure letter): this page gives the sequence "
               f"alone, which forgoes what {title} gains from structure. The {readers} pages read a structure's "
               "3Di letters when one is loaded.")
    explain(f"What {title} reads without a structure", "models.md", "**Structure letters**")


def current() -> PageContext:
    """The context ``serve`` is running the page with (a page file's ``main(current())``)."""
    ctx = getattr(_serving, "ctx", None)
    if ctx is None:
        raise RuntimeError("a page runs from app.py, which gives it its context (context.serve)")
    return ctx
