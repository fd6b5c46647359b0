"""The Variants page's results: a mutation list or a DMS table scored, cached for every session.

Cached like ``results.py`` (``st.cache_data`` keyed by model identifier, sequence and the
user's text or bytes), and queued like its masked scan: all scoring, whatever the strategy, goes
through the process-wide heavy-job queue one chunk of passes at a time, with a progress bar
counting the passes.
"""

from __future__ import annotations

import contextlib

import streamlit as st

from flamino_core.variants.dms import DmsError, DmsScores, DmsTable, parse_dms, score_dms, table_variants
from flamino_core.variants.notation import Variant, parse_mutations
from flamino_core.variants.scoring import VariantScores, score_variants

from .models import load_engine
from .policy import current_limits, hosted_mode
from .results import heavy_slot

HOSTED = hosted_mode()
CHUNK_PASSES = 64  # passes between two turns in the queue (as a masked scan's chunk of positions)


@contextlib.contextmanager
def _queued(what: str, text: str):
    """Scoring in the heavy-job queue, whatever the strategy (one pass of a long sequence is
    heavy too), with a progress bar over passes. The progress callback it yields gives the slot
    way every ``CHUNK_PASSES`` passes, so a long scoring holds it one chunk at a time, and it
    updates the page, which is where Streamlit stops the job of a session that was closed."""
    with heavy_slot(what) as give_way:
        bar, update = _passes_bar(text)
        turned = [0]

        def progress(done: int, total: int) -> None:
            update(done, total)
            if done - turned[0] >= CHUNK_PASSES and done < total:
                turned[0] = done
                give_way()

        try:
            yield progress
        finally:
            bar.empty()


def _passes_bar(text: str):
    """A progress bar over model passes, moving in steps of 5% at most (see ``results._bar``)."""
    bar = st.progress(0.0, text=text)
    last = [0.0]

    def update(done: int, total: int) -> None:
        fraction = done / max(total, 1)
        if fraction - last[0] >= 0.05 or done == total:
            bar.progress(min(fraction, 1.0), text=f"{text} ({done:,}/{total:,} passes)")
            last[0] = fraction

    return bar, update


@st.cache_data(show_spinner=False, max_entries=16 if HOSTED else 64)
def list_scores(model: str, sequence: str, text: str, offset: int, strategy: str, record_id: str) -> VariantScores:
    """The mutation list ``text`` checked against ``sequence`` and scored (queued)."""
    variants, issues = parse_mutations(text, sequence, offset, max_chars=current_limits().max_upload_bytes,
                                       reference=record_id)
    with _queued("scoring the variants", f"Scoring {len(variants):,} variants ({strategy})") as progress:
        return score_variants(load_engine(model), sequence, variants, strategy, issues=issues,
                              record_id=record_id, progress=progress)


@st.cache_data(show_spinner="Reading the DMS table…", max_entries=8 if HOSTED else 32)
def dms_table(data: bytes, wild_type: str | None, offset: int) -> DmsTable | str:
    """The DMS table read with its wild type, or the message saying why it cannot be used (a
    hosted server also refuses a wild type longer than its limit per record, before any work)."""
    try:
        return parse_dms(data, wild_type, offset, max_wild_type=current_limits().max_residues_per_record)
    except DmsError as err:
        return str(err)


@st.cache_data(show_spinner=False, max_entries=8 if HOSTED else 32)
def dms_variants(data: bytes, wild_type: str | None, offset: int) -> list[Variant]:
    """The table's mutants read against its wild type (what the strategy check counts passes of);
    ``dms_table`` must accept it."""
    return table_variants(dms_table(data, wild_type, offset))[0]


@st.cache_data(show_spinner=False, max_entries=8 if HOSTED else 32)
def dms_scores(model: str, data: bytes, wild_type: str | None, offset: int, strategy: str,
               record_id: str) -> DmsScores:
    """Every row of the DMS table scored (queued); ``dms_table`` must accept it."""
    table = dms_table(data, wild_type, offset)
    with _queued("scoring the DMS table", f"Scoring {len(table.frame):,} rows ({strategy})") as progress:
        return score_dms(load_engine(model), table, strategy, record_id=record_id, progress=progress)
