"""The Structure page's predicted complex (ESMFold2), beside ESMFold v1's single chain
(``prediction.py``, whose behaviour is unchanged and stays the default).

The visitor picks the chains from their records (a multiselect; the order picked is the chain
order: the first record is chain A, the second B, ...; one record folds as one chain), the model
(``random:esmfold2-tiny``, an untrained test model labelled wherever its output appears, by default
and on a hosted server unless its operator sets ``FLAMINO_FOLD2_MODEL``; ``esmfold2-fast`` or a
``save_pretrained`` folder in local mode). The fold's memory and time are said before it starts; it
runs as a background job in the heavy-job queue (``folding.ComplexPlan`` through
``jobs_panel.follow_plan``, as v1's ``FoldPlan``), is kept in the result store by model and chains,
and is held like an uploaded structure, so the page's chain picker, contacts, tracks and SaProt
read its chains. Shown: the 3D view by chain or by AlphaFold's pLDDT bands, pTM/ipTM, the PAE
heatmap with the chains' blocks, the chain-pair ipTM table, and mmCIF/PDB/confidences downloads.
"""

from __future__ import annotations

import functools

import streamlit as st

from flamino_core import settings
from flamino_core.jobs import DONE
from flamino_core.model import ModelId
from flamino_core.store import default_store
from flamino_core.structure import folding, parse_structure_bytes

from app_pages._ui.frame.downloads import safe_name, show_figure, text_button
from app_pages._ui.frame.widgets import plain
from app_pages._ui.server import background, heavy_jobs, jobs_panel
from app_pages._ui.server.policy import current_limits, hosted_mode
from app_pages._ui.structure import loaded_structure, molecule_view
from app_pages._ui.structure.prediction import in_worker, stem_choice, with_stem

ENGINE = "fold_engine"  # session state: which structure model the offer uses
V1, V2 = "ESMFold (one record)", "ESMFold2 (a record or a complex)"
CHAINS = "fold2_chains"  # session state: the records picked as chains, in chain order
MODEL = "fold2_model"
STEM = "fold2_stem_precision"  # session state: ESM C's precision (fp32, or the labelled bf16)
STEM_HELP = ("ESMFold2's ESM C stem in bf16 stores its dense layers in half the memory (ESM C 6B: 12.7 GB instead "
             "of 25.4 GB, what one 16 GiB accelerator can hold) and gives other numbers than the reference: its folds "
             "are labelled and stored apart")
COLOUR = "fold2_colour"
PREDICTION = "_structure_complex"  # (structure key, FoldedComplex, model label)
PREDICT = "Predict the complex (ESMFold2)"


def offer_either(ctx, offer_v1) -> None:
    """The fold offered for a record without a structure: ESMFold (v1, the default) or ESMFold2."""
    engine = st.radio("Structure model", (V1, V2), key=ENGINE, horizontal=True,
                      help="ESMFold folds one chain; ESMFold2 folds one chain or a complex of several records.")
    if engine == V1:
        offer_v1(ctx)
    else:
        offer(ctx)


def model_choice() -> str:
    if hosted_mode():
        return settings.FOLD2_MODEL.get() or folding.RANDOM_MODEL2
    st.session_state.setdefault(MODEL, folding.RANDOM_MODEL2)
    chosen = st.text_input("ESMFold2 model", key=MODEL,
                           help="random:esmfold2-tiny[:seed] (untrained), esmfold2-fast or esmfold2 "
                                "(biohub/ESMFold2-Fast, biohub/ESMFold2, MIT licence: the ESM C 6B stem, ~25 GB, "
                                "from the Hugging Face cache; single sequences, no MSA), or a folder written by "
                                "transformers' EsmFold2Model.save_pretrained")
    return chosen.strip() or folding.RANDOM_MODEL2


@st.cache_resource(show_spinner=False, max_entries=2)
def _model(identifier: ModelId, stem_precision: str = "fp32"):
    return folding.load_complex_model(identifier, stem_precision)


def complex_chains(records, record) -> list[str]:
    """The ids of the chains of ``record``'s complex where it was written ``A:B`` (the input
    reader's ``chain_records``: ``hd:A``, ``hd:B``, ...), in order; else just ``record``'s."""
    if not record.complex_of:
        return [record.id]
    return [r.id for r in records if r.complex_of == record.complex_of]


def _pick(ids: list[str]) -> None:
    st.session_state[CHAINS] = ids


def picked_chains(ctx) -> list:
    """The records picked as chains, in the order picked (chain A first): by default the record, or
    every chain of its complex where the record was written in the A:B notation."""
    by_id = {r.id: r for r in ctx.records}
    own = complex_chains(ctx.records, ctx.record)
    if CHAINS not in st.session_state or any(i not in by_id for i in st.session_state[CHAINS]):
        st.session_state[CHAINS] = own
    if len(own) > 1 and st.session_state[CHAINS] != own:
        st.button(f"Fold {ctx.record.complex_of} as written ({len(own)} chains: {', '.join(own)})",
                  on_click=_pick, args=(own,), key="fold2_own_complex")
    ids = st.multiselect("Chains of the complex, in order", list(by_id), key=CHAINS,
                         help="The first record picked is chain A, the second chain B, and so on; one record folds "
                              "as a single chain. A record written A:B on the Input page (a homodimer: MKV...:MKV...) "
                              "is read as its chains, <id>:A, <id>:B, ..., picked together here.")
    st.caption(plain("Chains: " + (", ".join(f"{letter} = {i} ({len(by_id[i].sequence):,} residues)"
                                             for letter, i in zip(folding.chain_letters(len(ids)), ids)) or "none")
                     + ". Pick records in the order you want them lettered."))
    return [by_id[i] for i in ids]


def offer(ctx) -> None:
    """The complex offered: chains, model, cost, Predict, the job."""
    st.subheader("Predict a complex (ESMFold2)")
    records = picked_chains(ctx)
    identifier = ModelId.parse(model_choice())  # the page's door: read once, passed as a value
    stem = stem_choice(STEM, STEM_HELP)
    if folding.is_random(identifier):
        st.warning(f"Folding with {folding.complex_label(identifier, hosted_mode())}; it shows what the page does.",
                   icon=":material/science:")
    if hosted_mode():
        st.caption(f"This server folds {folding.hosted_fold_limit():,} residues at most, all chains together: "
                   "the trunk's pair state covers every pair of residues of the complex, so its memory grows as the "
                   "square of the complex's length.")
    refusal = folding.complex_refusal([len(r.sequence) for r in records], hosted_mode()) or \
        folding.complex_problem([r.sequence for r in records], " + ".join(r.id for r in records))
    if refusal:
        st.error(plain(f"Not folded: {refusal}."), icon=":material/block:")
        return
    try:
        config = folding.complex_config(identifier)
        # The device's plan (``stem_precision_plan``): bf16 where the fp32 stem cannot fit, said.
        stem, why = folding.stem_precision_plan(config, None if stem == "fp32" else stem)
        key = folding.complex_key(identifier, stem)
    except (ValueError, OSError) as err:
        st.error(plain(f"The ESMFold2 model could not be read or held here: {err}"), icon=":material/error:")
        return
    if why:
        st.info(plain(why), icon=":material/memory:")
    label = with_stem(folding.complex_label(identifier, hosted_mode()), stem)
    sequences = tuple(r.sequence.upper() for r in records)
    names = tuple(r.id for r in records)
    name = "_".join(safe_name(n) for n in names)[:80]
    store = default_store()
    found = folding.stored_complex(store, key, sequences, names, name)
    if found is not None:
        hold(found, key, label)
        st.rerun()
    lengths = [len(s) for s in sequences]
    memory = folding.complex_memory(config, lengths)
    timing = folding.complex_time_estimate(config, lengths, key)
    st.caption(plain(f"Memory: {memory.describe()}. Time: {timing.describe()}."))
    work_key = ("fold2", key, folding.complex_sequence(sequences))
    budget = current_limits().max_fold_seconds  # v1's budget and worker (#67): one rule for every fold
    refused = folding.time_refusal(timing.seconds, budget)
    if refused and background.find(work_key) is None:
        st.error(plain(f"Not folded: {refused}."), icon=":material/block:")
        return
    if background.find(work_key) is None and work_key not in st.session_state.get(jobs_panel.APPROVED, set()):
        st.button(PREDICT, on_click=jobs_panel.approve, args=(work_key,), icon=":material/neurology:", type="primary")
        return
    short = f"{identifier.text} (untrained test model)" if folding.is_random(identifier) else "ESMFold2"
    request = folding.ComplexRequest(identifier, sequences, names, name, stem) if in_worker() else None
    plan = folding.ComplexPlan(functools.partial(_model, identifier, stem), store, key, sequences, names, name, config,
                               timing.seconds, label, visitor=heavy_jobs.visitor_key() or "", request=request,
                               budget=2 * budget if budget else None)
    job = jobs_panel.follow_plan(work_key, f"ESMFold2 of {' + '.join(names)} ({sum(lengths):,} residues)", plan,
                                 None, what="the predicted complex", model=short)
    if job is not None and job.state == DONE and job.value is not None:
        hold(job.value, key, label)
        st.rerun()


def structure_text(folded, label: str) -> tuple[str, str]:
    """(text, format): PDB where the complex fits it (the page's tracks export PDB), else mmCIF.
    The title says ESMFold2 prediction, which SaProt reads as "B-factors are pLDDT"."""
    title = f"ESMFOLD2 PREDICTION OF {folded.name} ({label})"
    if folding.pdb_problem(folded) is None:
        return folding.complex_pdb(folded, title), "pdb"
    return folding.complex_mmcif(folded, title), "cif"


def hold(folded, key: str, label: str) -> None:
    """Hold the complex as the page's structure; each record opens on its own chain."""
    text, fmt = structure_text(folded, label)
    limits = current_limits().structure_limits()
    parsed = parse_structure_bytes(text.encode(), f"{folded.name}_esmfold2.{fmt}", **limits)
    structure_key = f"fold:{key}:{folding.complex_sequence(folded.sequences)}"
    loaded_structure.hold(parsed, structure_key, f"predicted by {label}")
    own = {}
    for chain_id, record_id in zip(folded.chain_ids, folded.chain_names):
        own.setdefault(record_id, chain_id)
    st.session_state[loaded_structure.CHAINS] = (structure_key, own)
    st.session_state[PREDICTION] = (structure_key, folded, label)


def held(structure_key: str):
    """(FoldedComplex, model label) when the page's structure is a predicted complex, else None."""
    found = st.session_state.get(PREDICTION)
    return found[1:] if found is not None and found[0] == structure_key else None


def of_another_sequence(structure_key: str, sequence: str) -> bool:
    """Whether the page's structure is a predicted complex none of whose chains is ``sequence``."""
    found = held(structure_key)
    return found is not None and sequence.upper() not in found[0].sequences


def section(ctx, structure_key: str) -> None:
    """The complex's confidence: the 3D view by chain or pLDDT, pTM/ipTM, PAE, ipTM table, downloads."""
    folded, label = held(structure_key)
    st.subheader("The predicted complex")
    chains = ", ".join(f"{c} = {n} ({len(s):,})" for c, n, s in zip(folded.chain_ids, folded.chain_names,
                                                                      folded.sequences))
    st.caption(plain(f"Predicted by {label}; chains {chains}; the best of {folded.samples} diffusion samples by "
                     f"pTM. pLDDT 0-100 (above 70 the backbone is usually right, for trained weights); pTM and "
                     f"ipTM 0-1 (ipTM above 0.8 is usually a confident interface, below 0.6 likely a wrong one)."))
    columns = st.columns(3)
    columns[0].metric("pTM", f"{folded.ptm:.3f}")
    columns[1].metric("ipTM", f"{folded.iptm:.3f}" if len(folded.sequences) > 1 else "— (one chain)")
    columns[2].metric("Mean pLDDT", f"{100 * folded.mean_plddt:.1f}")
    if molecule_view.available():
        by = st.radio("Colour the complex by", ("chain", "pLDDT"), key=COLOUR, horizontal=True)
        text, fmt = structure_text(folded, label)
        scene = folding.complex_scene(folded, text, fmt, by)
        st.caption("Cartoon of every chain, coloured by chain or by AlphaFold's pLDDT bands (very high > 90, "
                   "confident 70-90, low 50-70, very low < 50: each residue's mean over its atoms); hover a residue "
                   "for its chain, number and pLDDT. The files hold each atom's pLDDT in the B-factor column.")
        molecule_view.molecule_view(scene, key="complex_viewer")
    stem = safe_name(f"{ctx.stem}_{folded.name}_esmfold2")
    show_figure(folding.complex_pae_heatmap(folded, f"Predicted aligned error, chains {'/'.join(folded.chain_ids)} "
                                                    f"({label})"), "complex_pae", f"{stem}_pae")
    st.caption("Black lines: the chains' boundaries. The blocks off the diagonal are the error across chains, "
               "what ipTM summarises.")
    if len(folded.sequences) > 1:
        st.markdown("**Chain-pair ipTM** (row: aligned on that chain, column: the chain scored)")
        st.dataframe(folding.iptm_table(folded), hide_index=True)
    title = f"ESMFold2 prediction of {folded.name} ({label})"
    row = st.container(horizontal=True)
    with row:
        text_button("Predicted complex (mmCIF, pLDDT as B-factors)", lambda: folding.complex_mmcif(folded, title),
                    f"{stem}.cif", "chemical/x-mmcif", "complex_cif")
        problem = folding.pdb_problem(folded)
        if problem is None:
            text_button("Predicted complex (PDB)", lambda: folding.complex_pdb(folded, title), f"{stem}.pdb",
                        "chemical/x-pdb", "complex_pdb")
        else:
            st.caption(plain(f"No PDB download: {problem}."))
        text_button("Confidences (JSON: pLDDT, PAE, pTM, ipTM)", lambda: folding.confidences_json(folded, label),
                    f"{stem}_confidences.json", "application/json", "complex_json")
