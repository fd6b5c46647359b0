"""The Variant effects page's "A variant's structure": the record (the wild type) and one or more
variants folded by the same ESMFold model with the same settings (the Structure page's model
choice; each fold a background job in the heavy-job queue, kept in the result store like every
fold), each variant superposed on the wild type and compared residue by residue
(``flamino_core.structure.folding.variant_structures``): the 3D view with the variant coloured by
C-alpha displacement over the wild type in grey, the tracks (displacement, pLDDT difference,
contacts gained and lost), the caveat in place with its source, and downloads of both
structures and the per-residue table.
"""

from __future__ import annotations

import streamlit as st

from flamino_core.jobs import DONE
from flamino_core.model import ModelId
from flamino_core.store import default_store
from flamino_core.structure import choose_chain, folding, molecular_scene, parse_structure_bytes

from app_pages._ui.frame.downloads import safe_name, show_figure, text_button
from app_pages._ui.frame.widgets import counted, kept_text_input, plain, widget_key
from app_pages._ui.server import heavy_jobs, jobs_panel
from app_pages._ui.server.policy import current_limits, hosted_mode
from app_pages._ui.structure import molecule_view, prediction

TEXT = "vfold"  # session state: the variants to fold (a kept text box, not in links)
SUGGESTED = "_vfold_suggested"  # session state: what the list offered it last


def section(ctx, suggested: str = "", author=None) -> None:
    """The section under the list's results: ``suggested`` fills the box at first (the list's
    first entry); ``author``: the structure's numbering the list is read in (None: the record's)."""
    seq = ctx.sequence.upper()
    st.subheader("A variant's structure (ESMFold)")
    st.warning(plain(f"Read this first: {folding.CAVEAT}"), icon=":material/warning:")
    ss = st.session_state
    if ss.get(TEXT) in (None, ss.get(SUGGESTED)):  # not edited: it follows the list (and its numbering)
        ss[TEXT] = suggested
        ss.pop(widget_key(TEXT), None)  # the kept widget is seeded from it on this draw
    ss[SUGGESTED] = suggested
    text = kept_text_input("Variants to fold beside the wild type (substitutions: E6V, or A23V:G45D; comma "
                           "separated)", TEXT, default=suggested)
    if not text.strip():
        return
    try:
        variants = folding.substitution_variants(text, seq, ctx.numbering, author)
    except ValueError as err:
        st.error(plain(f"Not folded: {err}"), icon=":material/block:")
        return
    text, stem = prediction.chosen_model()  # the Structure page's choice: one fold model for both pages
    identifier = ModelId.parse(text)  # the page's door: read once, passed as a value
    label = prediction.with_stem(prediction.model_label(identifier), stem)
    where = "" if hosted_mode() else "; change it there"
    st.caption(plain(f"Fold model: {label} (the Structure page's choice{where})."))
    refusal = folding.length_refusal(len(seq), hosted_mode())
    if refusal:
        st.error(plain(f"Not folded: {refusal}."), icon=":material/block:")
        return
    try:
        config = prediction.fold_config(identifier)
        key = folding.model_key(identifier, config.trunk.max_recycles, stem)
    except (ValueError, OSError) as err:
        st.error(plain(f"The ESMFold model could not be read: {err}"), icon=":material/error:")
        return
    store = default_store()
    sequences = [seq] + [v.apply(seq).upper() for v in variants]
    missing = [s for s in dict.fromkeys(sequences) if folding.stored_fold(store, key, s) is None]
    if missing and not _folded(ctx, missing, identifier, stem, key, config, label, store):
        return
    _, results = folding.fold_variants(lambda s: folding.stored_fold(store, key, s), seq, variants, ctx.numbering,
                                       author)
    _show(ctx, results, label, key)


def _folded(ctx, missing: list[str], identifier: ModelId, stem: str, key: str, config, label: str, store) -> bool:
    """The folds still missing as background jobs, one after another (each the Structure page's
    job for that sequence, so a fold running there is this one); True once none is missing."""
    timing = folding.fold_time_estimate(config, len(missing[0]), key)
    memory = folding.fold_memory(config, len(missing[0]), stem_precision=stem)
    keys = [("fold", key, s) for s in missing]
    approved = st.session_state.get(jobs_panel.APPROVED, set())
    st.caption(plain(f"{counted(len(missing), 'fold')} to run with {label}: each {timing.describe()}; memory "
                     f"{memory.describe()}."))
    if not any(k in approved for k in keys):
        wild_type_too = ctx.sequence.upper() in missing
        variants = counted(len(missing) - wild_type_too, "variant")
        st.button(f"Fold the wild type and {variants}" if wild_type_too else f"Fold {variants}",
                  on_click=_approve_all, args=(keys,), icon=":material/neurology:", type="primary",
                  key="_variant_fold_button")
        return False
    sequence = missing[0]
    plan = folding.FoldPlan(lambda: prediction.loaded_model(identifier, stem), store, key, sequence, config,
                            timing.seconds, label, visitor=heavy_jobs.visitor_key() or "")
    which = "the wild type" if sequence == ctx.sequence.upper() else "a variant"
    job = jobs_panel.follow_plan(keys[0], f"ESMFold of {ctx.record.id}, {which} ({len(sequence):,} residues)",
                                 plan, None, what="the predicted structure",
                                 model=prediction.with_stem(prediction.short_label(identifier), stem))
    if job is not None and job.state == DONE:
        st.rerun()
    return False


def _approve_all(keys: list) -> None:
    for key in keys:
        jobs_panel.approve(key)


def _show(ctx, results: list, label: str, key: str) -> None:
    """One variant at a time: its summary, the superposed 3D view, the tracks, the downloads."""
    names = [r.variant for r in results]
    shown = st.selectbox("Variant shown", names, key="_variant_fold_shown") if len(names) > 1 else names[0]
    result = results[names.index(shown)]
    st.caption(plain(f"Folded by {label}. {result.describe()}."))
    record = ctx.record.id
    both = folding.both_chains_pdb(result, label, record)
    stem = prediction.fold_file_stem(record, key)  # the record and the fold model, as the Structure page's
    if molecule_view.available():
        parsed = parse_structure_bytes(both.encode(), f"{safe_name(record)}_{result.variant}_superposed.pdb",
                                       **current_limits().structure_limits())
        alignment = choose_chain(parsed, result.folded.sequence, "A")
        mutated = int(result.table.index[result.table["mutated"]][0])
        scene = molecular_scene(parsed, alignment, result.table["ca_displacement"].to_numpy(float),
                                "C-alpha displacement (Å)", numbering=ctx.numbering, chosen=mutated)
        st.caption("The variant (chain A) coloured by its C-alpha displacement after superposition on the wild type "
                   "(chain B, grey); the mutated residue in magenta sticks. Hover a residue for its value.")
        molecule_view.molecule_view(scene, key="variant_structure_viewer")
    show_figure(folding.variant_structure_tracks(result.table, f"{result.variant} against the wild type ({label})"),
                "variant_structure_tracks", f"{stem}_{safe_name(result.variant)}_tracks")
    row = st.container(horizontal=True)
    with row:
        text_button("Wild type (PDB)", lambda: folding.prediction_pdb(result.wild_type, label, record),
                    f"{stem}.pdb", "chemical/x-pdb", "variant_fold_wt_pdb")
        text_button(f"{result.variant}, superposed on the wild type (PDB)",
                    lambda: folding.superposed_pdb(result, label, record), f"{stem}_{safe_name(result.variant)}.pdb",
                    "chemical/x-pdb", "variant_fold_mt_pdb")
        text_button("Per-residue table (CSV)", lambda: folding.table_csv(results), f"{stem}_variants.csv", "text/csv",
                    "variant_fold_csv")
