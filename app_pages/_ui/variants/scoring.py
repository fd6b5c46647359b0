"""The Variants page's results: a mutation list or a DMS table scored.

Every strategy runs as a background job (``background.py``; one unmasked pass of a long
sequence is heavy too), each engine call holding one slot of the heavy-job queue, so other
visitors' work runs between its chunks. Every masked pass goes through the result store (a
mutated position, or a pll mutant's positions, is masked once per
model across pages and sessions; a cancelled job resumes where it stopped), one engine call per
heavy-job slot. Each score is the core's plan (``variants/score_plan.py``: the passes still
needed, their cost, its chunks), run by ``jobs_panel.follow_plan``. The masked sequence
strategies (``pll``, ``pll-per-residue``: every residue of every mutant masked) are scored
``CHUNK_ROWS`` rows at a time, so their rows fill in while they run; the final table is then
assembled from the store without running the model again. Lists
are read with indels, stops and frameshifts (``indels.parse_mutations``): the sequence strategies
score them, the substitution strategies list them as not scored, with the reason.
"""

from __future__ import annotations

import dataclasses
import hashlib

import pandas as pd
import streamlit as st

from flamino_core.jobs import DONE
from flamino_core.variants import (AuthorNumbering, DmsError, DmsScores, DmsTable, ScorePlan, Variant,
                                   VariantScores, dms_plan, list_plan, parse_dms, table_variants)
from flamino_core.options import STRATEGIES
from flamino_core.numbering import Numbering
from flamino_core.variants import indels, structure_numbering

from app_pages._ui.server import background, jobs_panel
from app_pages._ui.server.policy import current_limits, hosted_mode

CHUNK_ROWS = 24  # pll rows scored per step: the step at which rows arrive


@dataclasses.dataclass(frozen=True)
class Scoring:
    """Scores when complete (``done``), else the rows scored so far (``partial``: pll only)."""

    done: VariantScores | DmsScores | None
    partial: pd.DataFrame | None = None


def _digest(*parts) -> str:
    sha = hashlib.sha256()
    for part in parts:
        sha.update(part if isinstance(part, bytes) else str(part).encode())
        sha.update(b"\0")
    return sha.hexdigest()[:24]


def _use(strategy: str) -> None:
    st.session_state["vstrategy"] = st.session_state["_w_vstrategy"] = strategy


def _cheaper(strategy: str, indels: bool = False):
    declared = STRATEGIES[strategy]  # what it declares cheaper (with indels: what also scores them)
    other = declared.cheaper_with_indels if indels else declared.cheaper
    return (f"Use {other} instead", lambda: _use(other)) if other else None


# --- a mutation list ----------------------------------------------------------------------------------
def parse_list(text: str, sequence: str, numbering: Numbering, record_id: str, author: AuthorNumbering | None = None):
    """The mutation list read against ``sequence`` in its ``numbering``, with indels and stops, under
    this server's limits; ``author``: its positions are in a structure's own numbering
    (``structure_numbering.parse_mutations``, as ``flamino variants --structure-numbering`` reads them)."""
    limits = {"max_chars": current_limits().max_upload_bytes, "max_entries": current_limits().max_mutations,
              "reference": record_id}
    if author is not None:
        return structure_numbering.parse_mutations(text, sequence, numbering, author, read=indels.parse_variant,
                                                   **limits)
    return indels.parse_mutations(text, sequence, numbering, **limits)


def list_scores(engine, sequence: str, text: str, numbering: Numbering, strategy: str, record_id: str,
                structure: str | None = None, author: AuthorNumbering | None = None) -> Scoring:
    """The mutation list ``text`` checked against ``sequence`` and scored with ``strategy``;
    ``structure``: a structure-aware model's 3Di letters (``structure_aware.structure_choice``);
    ``numbering``, ``author``: as ``parse_list``."""
    variants, issues = parse_list(text, sequence, numbering, record_id, author)
    key = ("variants", engine.fingerprint, _digest(sequence, text, numbering.first, strategy, record_id,
                                                   structure or "", author.encode() if author else ""))
    plan = list_plan(engine, sequence, variants, strategy, issues=issues, record_id=record_id, chunk_rows=CHUNK_ROWS,
                     structure=structure)
    return _follow(key, plan, f"Scoring {len(variants):,} variants ({strategy})", "scoring the variants")


# --- a DMS table --------------------------------------------------------------------------------------
@st.cache_data(show_spinner="Reading the DMS table…", max_entries=8 if hosted_mode() else 32)
def dms_table(data: bytes, wild_type: str | None, numbering: Numbering) -> DmsTable | str:
    """The DMS table read with its wild type (its ``mutant`` column in ``numbering``), or the message
    saying why it cannot be used (a hosted server refuses a table over its bytes, columns or rows
    before reading it, and a wild type longer than its limit per record before any work:
    ``Limits.table_limits``)."""
    try:
        return parse_dms(data, wild_type, numbering, limits=current_limits().table_limits())
    except DmsError as err:
        return str(err)


@st.cache_data(show_spinner=False, max_entries=8 if hosted_mode() else 32)
def dms_variants(data: bytes, wild_type: str | None, numbering: Numbering, indels: bool = True) -> list[Variant]:
    """The table's mutants read against its wild type (what the strategy check counts passes of),
    indels and stops included unless ``indels`` is False; ``dms_table`` must accept it."""
    return table_variants(dms_table(data, wild_type, numbering), indels=indels)[0]


def dms_scores(engine, data: bytes, wild_type: str | None, numbering: Numbering, strategy: str, record_id: str,
               structure: str | None = None) -> Scoring:
    """Every row of the DMS table scored; ``dms_table`` must accept it. ``structure``: as
    ``list_scores``."""
    table = dms_table(data, wild_type, numbering)
    key = ("dms", engine.fingerprint, _digest(data, wild_type, numbering.first, strategy, record_id, structure or ""))
    variants = dms_variants(data, wild_type, numbering, STRATEGIES[strategy].whole_sequences)
    plan = dms_plan(engine, table, variants, strategy, record_id=record_id, chunk_rows=CHUNK_ROWS, structure=structure)
    return _follow(key, plan, f"Scoring {len(table.frame):,} DMS rows ({strategy})", "scoring the DMS table")


# --- shared -----------------------------------------------------------------------------------------
def _follow(key, plan: ScorePlan, title: str, what: str) -> Scoring:
    done = background.find(key)
    if done is not None and done.state == DONE and not isinstance(done.value, dict):
        return Scoring(done.value)  # scored in this session already
    job = jobs_panel.follow_plan(key, title, plan, plan.engine, what=what,
                                 cheaper=_cheaper(plan.strategy, any(v.edits for v in plan.variants)))
    if job is None:
        return Scoring(None)
    if job.state == DONE and not isinstance(job.value, dict):
        return Scoring(job.value)
    held = job.value.get("partial") if isinstance(job.value, dict) else None
    return Scoring(None, pd.concat(held, ignore_index=True) if held else None)

