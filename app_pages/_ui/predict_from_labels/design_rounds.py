"""The Predict page's Design rounds section: a campaign (``flamino_core.design``) held in this
session's own folder; upload each round's measurements, propose the next plate with its predicted
values and 80% intervals, download the plate and the campaign (.zip, which ``flamino campaign``
reads once unpacked and this section takes back). One-hot features, no model: the proposals
mean the same on any server (docs/predict.md "Design rounds")."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pandas as pd
import streamlit as st

from app_pages._ui.frame.downloads import csv_button, file_button, safe_name
from app_pages._ui.frame.widgets import kept_number_input, kept_selectbox, kept_text_input, plain
from app_pages._ui.input import reading as inputs
from app_pages._ui.server.policy import current_limits, hosted_mode
from flamino_core.design import campaign as campaigns
from flamino_core.numbering import Numbering
from flamino_core.design import (ACQUISITIONS, DEFAULT_ACQUISITION, DEFAULT_BATCH, DesignError, Settings,
                                 propose)

FOLDER = "_design_folder"  # this session's campaign folder (a temporary folder of its own)
# A hosted server fits its process on at most this many measurements (its cost grows as n^3: 3,000
# rows are seconds, 30,000 would be an hour of a shared server); locally there is no bound.
HOSTED_MAX_MEASURED = 3_000
SHOWN = ["rank", "mutant", "kind", "prediction", "low", "high", "additive", "why"]


def _folder() -> Path | None:
    path = st.session_state.get(FOLDER)
    return Path(path) if path and (Path(path) / campaigns.JSON_NAME).exists() else None


def _new_folder() -> Path:
    old = st.session_state.get(FOLDER)
    if old:
        shutil.rmtree(old, ignore_errors=True)
    path = tempfile.mkdtemp(prefix="flamino-campaign-")
    st.session_state[FOLDER] = path
    return Path(path)


def uploaded_wild_type(upload: tuple[str, bytes] | None):
    """``(name, DmsTable)`` of the page's uploaded table when its wild type is derived from the
    table (its ``mutated_sequence``, the page's "Wild type of the mutant column" not set to the
    record), else None: a campaign is then offered on that wild type first (issue 50: it was
    offered only on the selected record, another protein)."""
    from app_pages._ui.frame.views import OPTIONS
    from flamino_core.variants import DmsError, parse_dms

    if upload is None or st.session_state.get("pwt", OPTIONS["pwt"].default) == "record":
        return None
    try:  # read as the Variant effects page reads it (the same limits), its wild type from the table
        table = parse_dms(upload[1], None, Numbering(), limits=current_limits().table_limits())
    except DmsError:
        return None
    return Path(upload[0]).stem, table


def _init(sequence: str, target: str, numbering: Numbering, seed: int, record_id: str) -> None:
    try:
        campaigns.init(_new_folder(), sequence, target.strip(), numbering=numbering, seed=int(seed),
                       record_id=record_id)
    except DesignError as err:
        st.error(plain(str(err)))


def _start(ctx, uploaded=None) -> None:
    """Start a campaign on the uploaded table's wild type (``uploaded_wild_type``) or the selected
    record, or resume one from its .zip."""
    left, right = st.columns(2)
    with left:
        target = kept_text_input("Measured column (the target of every round's table)", "design_target",
                                 default="DMS_score")
        seed = kept_number_input("Seed (every random choice of every round)", "design_seed", min_value=0,
                                 max_value=2**31 - 1, default=0)
        if uploaded is not None:
            name, table = uploaded
            if st.button(f"Start a campaign on {name}'s wild type", key="_design_start_table", type="primary",
                         icon=":material/science:",
                         help=f"{len(table.wild_type):,} residues, {table.wild_type_source}"):
                _init(table.wild_type, target, table.numbering, seed, name)
        if ctx.record is None:
            st.info("Choose the wild type on the Input page to start a campaign on it.")
        elif st.button("Start a campaign on the selected record", key="_design_start", icon=":material/science:",
                       help=f"{ctx.record.id}: {len(ctx.sequence):,} residues"):
            _init(ctx.sequence, target, ctx.numbering, seed, ctx.record.id)
    with right:
        resumed = st.file_uploader("Or resume a campaign (.zip from this section)", type=["zip"],
                                   key="_design_resume", max_upload_size=inputs.upload_size_mb())
        if resumed is not None and st.button("Resume this campaign", key="_design_resume_go"):
            try:
                campaigns.from_zip(resumed.getvalue(), _new_folder(), current_limits().table_limits())
            except DesignError as err:
                st.error(plain(f"{resumed.name}: {err}"))


def _measurements(found) -> None:
    number = found.next_round
    upload = st.file_uploader(f"Round {number}'s measurements (CSV: a mutant column and {found.target})",
                              key=f"_design_measured_{number}", max_upload_size=inputs.upload_size_mb())
    if upload is not None and st.button(f"Add as round {number}", key=f"_design_add_{number}",
                                        icon=":material/upload:"):
        limits = current_limits()
        problem = limits.check_upload(upload.size, upload.name)
        if problem:
            st.error(plain(problem))
            return
        try:
            stored, rows, issues = found.add_round(upload.getvalue(), upload.name, limits.table_limits())
        except DesignError as err:
            st.error(plain(str(err)))
            return
        st.success(plain(f"Round {stored}: {rows:,} measured values stored."))
        for issue in issues:
            st.caption(plain(issue))


def _settings(found) -> Settings:
    base = found.settings
    cells = st.columns(4)
    with cells[0]:
        batch = kept_number_input("Proposals", "design_batch", min_value=1, max_value=384,
                                  default=base.batch or DEFAULT_BATCH)
    with cells[1]:
        acquisition = kept_selectbox("Acquisition", "design_acquisition", ACQUISITIONS, default=DEFAULT_ACQUISITION)
    with cells[2]:
        per_position = kept_number_input("Proposals per position (0: any)", "design_per_position", min_value=0,
                                         max_value=19, default=1)
    with cells[3]:
        most = kept_number_input("Mutations per variant at most", "design_max", min_value=1, max_value=6,
                                 default=base.max_mutations)
    keep = kept_text_input("Positions to keep (e.g. 1-20,45)", "design_keep", default=base.keep)
    avoid = kept_text_input("Amino acids to avoid (e.g. C,P)", "design_avoid", default=base.avoid)
    return Settings(batch=int(batch), acquisition=acquisition, per_position=int(per_position) or None,
                    max_mutations=int(most), keep=keep, avoid=avoid)


def _proposals(found) -> None:
    number = found.next_round
    settings = _settings(found)
    if st.button(f"Propose round {number}", type="primary", key=f"_design_propose_{number}",
                 icon=":material/auto_awesome:"):
        n = len(found.measured(before=number))
        if hosted_mode() and n > HOSTED_MAX_MEASURED:
            st.error(f"This server proposes from at most {HOSTED_MAX_MEASURED:,} measurements; the campaign has "
                     f"{n:,}. Run flamino campaign locally.", icon=":material/block:")
            return
        try:
            made = propose(found.wild_type, found.numbering, found.measured(before=number), settings, seed=found.seed,
                           round_number=number, given=found.given())
        except DesignError as err:
            st.error(plain(str(err)))
            return
        found.save_proposals(made)
    plate = found.stored_proposals(number)
    if plate is None:
        return
    record = found.round(number)["proposal"]
    calibration = record.get("calibration") or {}
    if calibration.get("coverage") is not None:
        verdict = "within" if calibration["within"] else "NOT within"
        st.caption(plain(f"80% intervals on held-out folds: {calibration['coverage']:.0%} of {calibration['n']} "
                         f"measured inside ({verdict} 10 points of 80%)."))
    for note in record.get("notes") or []:
        st.caption(plain(f"Note: {note}"))
    st.markdown(f"**Round {number}: {len(plate)} proposals** by {plain(record['acquisition'])}")
    shown = plate[[c for c in SHOWN if c in plate.columns]].copy()
    for column in ("prediction", "low", "high", "additive"):  # 3 significant digits on screen; the CSV keeps all
        shown[column] = pd.to_numeric(shown[column], errors="coerce").map(lambda v: float(f"{v:.3g}"))
    st.dataframe(shown, hide_index=True, width="stretch")
    csv_button(f"Plate of round {number} (CSV)", lambda: plate, f"{_stem(found)}_round{number}_plate.csv",
               f"_design_plate_{number}")


def _stem(found) -> str:
    return safe_name(found.data.get("record_id") or "campaign")


def section(ctx, upload: tuple[str, bytes] | None = None) -> None:
    """The Design rounds section of the Predict page; ``upload``: the page's uploaded table."""
    st.subheader("Design rounds")
    st.markdown("Measured a plate? Upload it as a round, and get the next one: variants chosen by a Gaussian "
                "process on one-hot residues (predicted value with its 80% interval), at most one per position, "
                "within your constraints, and multi-mutants of the singles that measured well. Every round is "
                "kept in the campaign: download it to continue later or with `flamino campaign`.")
    folder = _folder()
    if folder is None:
        _start(ctx, uploaded_wild_type(upload))
        folder = _folder()
        if folder is None:
            return
    _measurements(campaigns.load(folder))
    found = campaigns.load(folder)  # with a round just added
    st.caption(plain(f"Campaign on {found.data.get('record_id') or 'the wild type'} ({len(found.wild_type):,} "
                     f"residues), target {found.target}, seed {found.seed}; next round {found.next_round}."))
    _proposals(found)
    st.markdown("**Round history**")
    st.dataframe(campaigns.history(found), hide_index=True, width="stretch")
    row = st.container(horizontal=True)
    with row:
        file_button("Campaign (.zip)", lambda: campaigns.to_zip(found), f"{_stem(found)}_campaign.zip",
                    "_design_zip", "application/zip")
        if st.button("Close this campaign", key="_design_close"):
            shutil.rmtree(folder, ignore_errors=True)
            st.session_state.pop(FOLDER, None)
            st.rerun()
