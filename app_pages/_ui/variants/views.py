"""The Variants page's inputs and tables: the mutation list (pasted, uploaded, or from a link),
the DMS upload kept across page switches, the strategy choice with the hosted PLL limit, and
the table of scores with its filters."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from flamino_core.inputs import TableError, table_text
from flamino_core.options import STRATEGIES, names
from flamino_core.variants import (COLUMN as STRUCTURE_COLUMN, OK, filter_scored, in_structure_numbers,
                                   output_columns, pass_plan, structure_number)

from app_pages._ui.input.reading import upload_limit_words, upload_size_mb
from app_pages._ui.server.policy import current_limits
from app_pages._ui.frame.docs import explain
from app_pages._ui.frame.views import OPTIONS
from app_pages._ui.frame.widgets import counted, kept_number_input, kept_radio, kept_text_area, plain, widget_key

LIST_TEXT = "mutation_text"  # the list the page scores (its text area's kept value)
LINK_LIST, LINK_TOO_LONG = "muts", "mlong"  # what the link carries (views.OPTIONS)
DMS_FILE = "_dms_file"  # (file name, bytes) of the uploaded DMS table, kept across pages
UPLOAD_PROBLEM = "_variants_upload_problem"
FILTERED_ON = "_vfilter_on"  # (source, first, last) of the table the filters were last drawn on


# --- the mutation list ------------------------------------------------------------------------------
def _use_list_upload() -> None:
    """Put the uploaded list or CSV into the text box (so a short one also travels in links)."""
    ss = st.session_state
    ss.pop(UPLOAD_PROBLEM, None)
    file = ss.get("_mutation_upload")
    if file is None:
        return
    problem = current_limits().check_upload(file.size, "the file")
    try:  # decoded as every uploaded table is (UTF-16 from Excel, gzip, Latin-1 read too)
        text = None if problem else table_text(file.getvalue(), what=file.name)
    except TableError as err:
        problem = str(err)
    if problem:
        ss[UPLOAD_PROBLEM] = problem
        return
    ss[LIST_TEXT] = ss[widget_key(LIST_TEXT)] = text


def mutation_list() -> str:
    """The text box and upload for the list; keeps what the share link carries in step."""
    ss = st.session_state
    if LIST_TEXT not in ss and ss.get(LINK_LIST):  # a session opened from a link with the list
        ss[LIST_TEXT] = ss[LINK_LIST]
    text = kept_text_area(
        "Variants: one per line, or separated by commas or spaces; or a CSV with a mutant column "
        "(and an optional label column, e.g. benign / pathogenic)",
        LIST_TEXT,
        height=170,
        placeholder="E6V\nK17E:E6V\np.(Lys8Ala)\np.[Glu6Val;Lys8Ala]\np.Lys8del\np.Thr12_Ala13insGlyVal\np.Trp37Ter",
    )
    st.file_uploader(
        f"…or upload a list or CSV{upload_limit_words().replace(';', ',', 1)}",
        key="_mutation_upload",
        on_change=_use_list_upload,
        max_upload_size=upload_size_mb(),
        help="Its text is put in the box above.",
    )
    if ss.get(UPLOAD_PROBLEM):
        st.error(plain(ss[UPLOAD_PROBLEM]))
    if text.strip():  # the link carries a short list, or says that it was too long
        fits = OPTIONS[LINK_LIST].kind.valid(text)
        ss[LINK_LIST], ss[LINK_TOO_LONG] = (text, None) if fits else (None, True)
    else:  # nothing pasted yet: a link's "too long" stays, so the page can say so
        ss[LINK_LIST] = None
    return text


def list_missing() -> None:
    """What to do when the box is empty: paste, or paste again after a link."""
    if st.session_state.get(LINK_TOO_LONG):
        st.warning(
            "The mutation list was too long to travel in the link: paste it again (or upload its "
            "file) to see the scores.",
            icon=":material/link_off:",
        )
    else:
        st.info("Paste your variants above (ProteinGym's A23V or A23V:G45D, or HGVS such as p.Ala23Val; "
                "deletions, insertions, delins, duplications, stops and frameshifts such as p.Lys8del, "
                "p.Thr12_Ala13insGlyVal, p.Val18_Asn19delinsTrp, p.Ala27_Gly29dup, p.Trp37Ter, p.Trp15ProfsTer2).")


# --- the DMS table ---------------------------------------------------------------------------------
def _keep_dms_upload() -> None:
    ss = st.session_state
    ss.pop(UPLOAD_PROBLEM, None)
    file = ss.get("_dms_upload")
    if file is None:
        ss.pop(DMS_FILE, None)
        return
    problem = current_limits().check_upload(file.size, "the DMS table")
    if problem:
        ss[UPLOAD_PROBLEM] = problem
        ss.pop(DMS_FILE, None)
        return
    ss[DMS_FILE] = (file.name, file.getvalue())


def dms_upload() -> tuple[str, bytes] | None:
    """The DMS table's file name and bytes (the last upload of this session), or None."""
    st.file_uploader(
        "DMS table (CSV or TSV in ProteinGym's format: mutant and DMS_score; mutated_sequence and "
        "DMS_score_bin optional; higher DMS_score = fitter; or ProteinGym's indel layout, mutated_sequence "
        f"and DMS_score without mutant, against the selected record as wild type{upload_limit_words()})",
        key="_dms_upload",
        on_change=_keep_dms_upload,
        max_upload_size=upload_size_mb(),
    )
    ss = st.session_state
    if ss.get(UPLOAD_PROBLEM):
        st.error(plain(ss[UPLOAD_PROBLEM]))
    stored = ss.get(DMS_FILE)
    if stored is None:
        st.info("Upload a deep mutational scanning table to compare the model with your experiment. "
                "(DMS tables do not travel in share links: upload it again after opening one.)")
    elif ss.get("_dms_upload") is None:  # Streamlit's uploader forgets its file on a page switch; the table is kept
        row = st.container(horizontal=True, vertical_alignment="center")
        row.caption(plain(f"Using {stored[0]} ({len(stored[1]):,} bytes), kept from your upload; upload "
                          "another file above to replace it."))
        row.button("Remove", key="_dms_forget", on_click=lambda: ss.pop(DMS_FILE, None), icon=":material/close:",
                   help="Forget the kept DMS table")
    return stored


# --- scoring choices and results ---------------------------------------------------------------------
def strategy_picker(sequence: str, variants: list) -> str | None:
    """The kept strategy, or None (after saying why) when this server refuses to score these
    variants with it (more passes than one request may run: pll, or joint-masked on many
    multi-mutants). Under a sequence strategy the pass plan is said before any work (the wild
    type's passes counted once); under a substitution strategy, that the list's indels, stops
    and frameshifts need a sequence strategy."""
    strategy = kept_radio("Score", "vstrategy")
    whole = STRATEGIES[strategy].whole_sequences
    edits = [v for v in variants if v.edits]
    scored = variants if whole else [v for v in variants if not v.edits]
    problem = current_limits().check_passes(sequence, scored, strategy)
    if problem:
        st.error(plain(f"Not scored with {strategy}: {problem}."), icon=":material/block:")
        return None
    if edits and not whole:
        which = counted(len(edits), "entry is an indel, stop or frameshift", "entries are indels, stops or frameshifts")
        st.info(f"{which}: {strategy} scores substitutions only, so they are listed as not scored. "
                f"{', '.join(names('sequence'))} score them (wt-pll-approx is the cheap one).",
                icon=":material/info:")
    if whole:
        st.caption(plain(f"Pass plan: {pass_plan(sequence, scored, strategy).describe(len(scored))}."))
    return strategy


def _reset_filters(first: int, last: int) -> None:
    """The table's filters back to showing every scored row (the kept values and their widgets)."""
    ss = st.session_state
    for key, value in (("vfrom", first), ("vto", last), ("veffect", OPTIONS["veffect"].default)):
        ss[key] = value
        ss.pop(widget_key(key), None)  # the widget is seeded from the kept value on its next draw


def _fit_filters(source: str, first: int, last: int) -> None:
    """Filters set on one table start over on another (another record, list source or upload):
    a "From position 16" kept from a record numbered from 16 hid 84 rows of a DMS table numbered
    from 1, unsaid (issue 50). The first table of a session keeps them (a link's filters)."""
    ss, on = st.session_state, (source, first, last)
    if ss.get(FILTERED_ON) not in (None, on):
        _reset_filters(first, last)
    ss[FILTERED_ON] = on


def _filters_words(low: int, high: int, effect: str, first: int, last: int) -> list[str]:
    """The filters that hide rows, as the widgets name them."""
    words = [f"From position {low:,}"] if low != first else []
    words += [f"To position {high:,}"] if high != last else []
    veffect = OPTIONS["veffect"]
    words += [f"Predicted effect {veffect.kind.labels[effect]}"] if effect != veffect.default else []
    return words


def scores_table(table: pd.DataFrame, first: int, last: int, columns: list[str], source: str = "",
                 structure=None) -> pd.DataFrame:
    """The scored rows with the position and effect filters; returns the rows shown. ``source``
    names the data (the record, the upload): the filters start over when it changes, and those
    that hide rows are said under the table with a Reset. ``structure``: (its numbering, the
    record's) for a list read in a structure's numbering: positions and filters in its numbers."""
    full = table
    if structure is not None:  # S195A is at 195 on 1GBT's every scale, not at the record's 192
        author, numbering = structure
        table = in_structure_numbers(table, author, numbering)
        numbers = [structure_number(author, i) for i in range(len(author.labels))]
        first, last = min(numbers), max(numbers)
    _fit_filters(source, first, last)
    left, middle, right = st.columns([1, 1, 3])
    with left:
        low = kept_number_input("From position", "vfrom", min_value=first, max_value=last, default=first)
    with middle:
        high = kept_number_input("To position", "vto", min_value=first, max_value=last, default=last)
    with right:
        effect = kept_radio("Predicted effect", "veffect", horizontal=True)
    shown = filter_scored(table, low, high, effect)
    view = shown[columns].copy()
    shown = full.loc[shown.index]  # the caller's rows (positions in the record's numbering)
    if "positions" in view:
        view["positions"] = [", ".join(map(str, p)) for p in view["positions"]]
    st.dataframe(view, hide_index=True, width="stretch", height=min(420, 38 + 35 * max(len(view), 1)))
    scored = int((table["status"] == OK).sum())
    filters = _filters_words(low, high, effect, first, last)
    if not filters:
        st.caption(f"{len(shown):,} of {scored:,} scored variants shown (click a column header to sort).")
        return shown
    row = st.container(horizontal=True, vertical_alignment="center")
    row.caption(plain(f"Showing {len(shown):,} of {scored:,} scored variants: {'; '.join(filters)}."))
    row.button("Reset", key="_vfilter_reset", on_click=_reset_filters, args=(first, last), type="tertiary",
               icon=":material/filter_alt_off:", help="Show every scored variant")
    return shown


def explain_scores(strategy: str, kinds) -> None:
    """Under a sequence strategy's table, what its scores are where they are shown: a sum's
    leaning towards deletions, a stop's min-llr; each with the docs' passage, opened in place.
    ``kinds``: the scored rows' ``Variant.kind`` (stops and frameshifts are scored by min-llr)."""
    if not STRATEGIES[strategy].whole_sequences:
        return
    kinds = set(kinds)
    if STRATEGIES[strategy].per_residue:
        st.caption("per-residue: each PLL divided by its sequence's length before the difference, so a deletion is "
                   "not favoured for holding fewer terms.")
    else:
        st.caption("sum: PLL(mutant) − PLL(wild type) over whole sequences. A deletion's PLL has fewer (negative) "
                   "terms, so a sum favours deletions and penalises insertions beyond what their residues say; "
                   f"{strategy}-per-residue divides each PLL by its length first.")
    explain("Sums or per residue", "variants.md", "**Sums or per residue.**")
    if kinds & {"stop", "frameshift"}:
        st.caption("min-llr (stops and frameshifts): the lowest log p(a) − log p(wild type) over every amino acid a "
                   "at every lost residue, read from the wild type's passes (ESM Variants' stop-gain score): at most "
                   "0, the worst single change in the lost part, not a likelihood of the truncated protein.")
        explain("Stops and frameshifts", "variants.md", "**Stops and frameshifts**")


def download_frame(table: pd.DataFrame, strategy: str) -> pd.DataFrame:
    """The scores CSV: the command's columns (``output_columns``) with, after ``mutant`` as typed
    (``p.Ala14Glu``), the variant normalised (``A14E``; ``V1A:A2G`` for a multi-mutant) and its
    position(s) in the record's numbering (``14``; ``1;2``), empty for entries not scored; for a
    record made of a structure, the variant in the structure's numbering (``structure_numbering``)."""
    frame = table[output_columns(strategy)].copy()
    at = frame.columns.get_loc("mutant") + 1
    frame.insert(at, "variant", table["variant"].to_numpy())
    frame.insert(at + 1, "position", [";".join(map(str, p)) for p in table["positions"]])
    if STRUCTURE_COLUMN in table:  # a record made of a structure: the variant in the file's numbering too
        frame.insert(at + 2, STRUCTURE_COLUMN, table[STRUCTURE_COLUMN].to_numpy())
    return frame


def skipped(table: pd.DataFrame, name: str = "mutant") -> None:
    """The entries that were not scored, each with its reason."""
    bad = table[table["status"] != OK]
    if len(bad):
        with st.expander(f"{len(bad):,} not scored", icon=":material/warning:"):
            st.dataframe(bad[[name, "status"]], hide_index=True, width="stretch")
