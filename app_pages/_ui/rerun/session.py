"""A session's start (defaults, then whatever its link carries) and its link, kept in the address
bar and shown in the sidebar.

The codec is ``links.py``, the options a page's link carries are declared in ``views.py``, and
which model a link may switch to is decided in ``policy.py``; this module applies them.
"""

from __future__ import annotations

import dataclasses
import urllib.parse

import streamlit as st

from flamino_core.wording import byte_size
from flamino_core.inputs import to_fasta

from app_pages._ui.input import numbering
from app_pages._ui.frame.downloads import IMAGE_FORMAT, IMAGE_FORMATS, text_button
from app_pages._ui.rerun.context import PageContext
from app_pages._ui.input.reading import FASTA, LINK_RECORD, RECORD, link_text
from app_pages._ui.frame.links import MAX_FASTA_CHARS, SharedView, decode_view, encode_fasta, encode_view
from app_pages._ui.input.model_picker import LOCAL_CHOICE, LOCAL_PATH, MODEL_CHOICE, model_label
from app_pages._ui.input.model_loading import MODEL
from app_pages._ui.server.policy import current_limits, model_from_link, public_model_name
from app_pages._ui.frame.views import OPTIONS, page_options
from app_pages._ui.frame.widgets import counted, plain

MAX_LINK_CHARS = 8_000  # longer links are refused by some browsers and chat tools
LINK_PROBLEM = "_link_problem"  # a message for the next run, about the link the session came with
LINK_PAGE = "_link_page"
LINK_MODEL = "_link_model"  # what the link's model became: banner while the session uses another
LINK_NOTE = "_link_note"  # set by the page on each run: what its link does not carry


def init_session() -> None:
    """Defaults for a new session, then whatever its link carries (once per session)."""
    from flamino_core.weights import default_model  # imports Flax (via convert): not at import

    ss = st.session_state
    if "_initialised" in ss:
        return
    ss["_initialised"] = True
    ss.setdefault(FASTA, "")
    ss.setdefault(MODEL, default_model())
    ss.setdefault(IMAGE_FORMAT, IMAGE_FORMATS[0])
    params = st.query_params.to_dict()
    if not params:
        return
    view = decode_view(params)
    if view is None:
        ss[LINK_PROBLEM] = (
            "This link could not be read (it may have been cut short when it was copied); "
            "starting with an empty input."
        )
        return
    apply_view(view)


def apply_view(view: SharedView) -> None:
    """Put what a decoded link carries into the session; the model only as the policy allows."""
    ss = st.session_state
    if view.fasta:
        ss[FASTA] = view.fasta
    if view.record:
        ss[RECORD] = ss[LINK_RECORD] = view.record  # said so on the pages if the input lacks it
    if view.model:
        decision = model_from_link(view.model, current_limits())
        if decision.use:
            ss[MODEL] = decision.use
        elif decision.local_path:
            ss[MODEL_CHOICE] = LOCAL_CHOICE
            ss[LOCAL_PATH] = decision.local_path
        ss[LINK_MODEL] = decision
    for key, value in view.options.items():
        ss[key] = value
    if any(OPTIONS[key].per_record for key in view.options):
        ss[numbering.OPTIONS_FOR] = numbering.ADOPT  # they belong to the record the link shows
    if view.page:
        ss[LINK_PAGE] = view.page


def take_link_page() -> str | None:
    """The page a link asked for, once."""
    return st.session_state.pop(LINK_PAGE, None)


def link_model_banner() -> None:
    """Say plainly, on every page, when this view does not use the model the link was made with:
    its numbers then differ from the ones the link's author saw."""
    ss = st.session_state
    decision = ss.get(LINK_MODEL)
    if decision is None or (decision.use is not None and ss[MODEL] == decision.use):
        return
    if decision.local_path is not None and ss[MODEL] == decision.local_path:
        return
    current = model_label(ss[MODEL])
    if decision.local_path is not None:
        why = (f"The link was made with the checkpoint {plain(decision.local_path)}, a file on the link "
               "author's machine; it is filled in under *Local checkpoint* in the sidebar: click "
               "**Load checkpoint** to use it if this machine has it.")
    elif decision.refused is not None:
        why = plain(f"{decision.refused}.")
    else:
        why = plain(f"The link was made with {public_model_name(decision.use, current_limits())}.")
    st.warning(
        f"**This view uses a different model than the link:** {plain(current)}. {why} "
        "Its predictions and scores differ from the ones the link was made with.",
        icon=":material/swap_horiz:",
    )
    st.button("Dismiss", key="dismiss_link_model", on_click=lambda: ss.pop(LINK_MODEL, None))


def take_link_problem() -> str | None:
    """What was wrong with the link the session came with, once."""
    return st.session_state.pop(LINK_PROBLEM, None)


def current_view(ctx: PageContext) -> SharedView:
    """The view to put in the link: model, page, the page's selections and the input."""
    ss = st.session_state
    options = {option.key: ss.get(option.key) for option in page_options(ctx.page)}
    model = ss.get(MODEL)
    return SharedView(
        model=public_model_name(model, current_limits()) if model else None,  # hosted: never a path
        page=ctx.page,
        fasta=link_text(ctx.records_read) or None,  # the pasted text, or all records when files were uploaded
        record=ss.get(RECORD),
        options={k: v for k, v in options.items() if v is not None},
    )


def link_params(ctx: PageContext) -> tuple[dict[str, str], str | None]:
    """Query parameters for the current view and a note when the input had to be shortened."""
    view = current_view(ctx)
    if view.fasta and len(view.fasta) > MAX_FASTA_CHARS:  # no link could carry it back
        params = None
    else:
        params = encode_view(view)
    if params is not None and len(urllib.parse.urlencode(params)) <= MAX_LINK_CHARS:
        return params, None
    records = len(ctx.records_read)
    size = f"{counted(records, 'record')}, {byte_size(len(encode_fasta(view.fasta)))} compressed" if view.fasta else ""
    whole = (f"The whole input ({size}) is more than a link can hold ({byte_size(MAX_LINK_CHARS)}): send its "
             "FASTA file (below) with the link, to be uploaded on the Input page.")
    record = ctx.record_read
    if record is not None and records > 1:
        shortened = encode_view(dataclasses.replace(view, fasta=f">{record.id}\n{record.sequence}\n"))
        if len(urllib.parse.urlencode(shortened)) <= MAX_LINK_CHARS:
            return shortened, f"This link carries only the selected record, {record.id}. {whole}"
    return encode_view(dataclasses.replace(view, fasta=None)), (
        f"This link carries the model and the selections but no sequence. {whole}"
    )


def publish_link(ctx: PageContext, slot) -> None:
    """Keep the browser's address bar in sync with the view and show the link in ``slot``."""
    params, note = link_params(ctx)
    st.query_params.from_dict(params)
    base = st.context.url or ""
    with slot.container(), st.expander("Share this view", icon=":material/link:"):
        st.caption("Opening this link reproduces the page, model, selections and input.")
        if left_out := st.session_state.pop(LINK_NOTE, None):  # what a page's link leaves out (its upload)
            st.caption(plain(left_out))
        st.code(f"{base}?{urllib.parse.urlencode(params)}", language=None, wrap_lines=True)
        if note:  # said plainly: the recipient would otherwise see other records than the sender
            st.warning(plain(note), icon=":material/link_off:")
            records = ctx.records_read
            text_button("The input (FASTA)", lambda: to_fasta(records), "input.fasta", "text/plain", key="share_fasta")
