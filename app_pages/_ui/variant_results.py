"""The Variants page's results: a mutation list or a DMS table scored, cached for every session.

Cached like ``results.py`` (``st.cache_data`` keyed by model identifier, sequence and the
user's text or bytes), and queued like its masked scan: scoring that runs more than one pass
goes through the process-wide heavy-job queue, with a progress bar counting the passes.
"""

from __future__ import annotations

import contextlib

import streamlit as st

from flamino_core.variants.dms import DmsError, DmsScores, DmsTable, parse_dms, score_dms
from flamino_core.variants.notation import parse_mutations
from flamino_core.variants.scoring import VariantScores, score_variants

from .models import load_engine
from .policy import current_limits, hosted_mode
from .results import heavy_slot

HOSTED = hosted_mode()
ONE_PASS = "wt-marginals"  # the strategy that runs one pass (per 1,022-residue window)


def _queued(strategy: str, what: str):
    return contextlib.nullcontext() if strategy == ONE_PASS else heavy_slot(what)


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
    """The mutation list ``text`` checked against ``sequence`` and scored (queued unless one pass)."""
    variants, issues = parse_mutations(text, sequence, offset, max_chars=current_limits().max_upload_bytes,
                                       reference=record_id)
    with _queued(strategy, "scoring the variants"):
        bar, update = _passes_bar(f"Scoring {len(variants):,} variants ({strategy})")
        try:
            return score_variants(load_engine(model), sequence, variants, strategy, issues=issues,
                                  record_id=record_id, progress=update)
        finally:
            bar.empty()


@st.cache_data(show_spinner="Reading the DMS table…", max_entries=8 if HOSTED else 32)
def dms_table(data: bytes, wild_type: str | None, offset: int) -> DmsTable | str:
    """The DMS table read with its wild type, or the message saying why it cannot be used."""
    try:
        return parse_dms(data, wild_type, offset)
    except DmsError as err:
        return str(err)


@st.cache_data(show_spinner=False, max_entries=8 if HOSTED else 32)
def dms_scores(model: str, data: bytes, wild_type: str | None, offset: int, strategy: str,
               record_id: str) -> DmsScores:
    """Every row of the DMS table scored (queued unless one pass); ``dms_table`` must accept it."""
    table = dms_table(data, wild_type, offset)
    with _queued(strategy, "scoring the DMS table"):
        bar, update = _passes_bar(f"Scoring {len(table.frame):,} rows ({strategy})")
        try:
            return score_dms(load_engine(model), table, strategy, record_id=record_id, progress=update)
        finally:
            bar.empty()
