"""The Structure page's predicted structure (ESMFold): for a record without a structure, the
model to fold with (the untrained test model by default, labelled; a folder on this machine in
local mode), the fold's memory and time said before it starts (a fold over the server's time
budget refused then), the fold as a background job (``folding.FoldPlan`` run by
``jobs_panel.follow_plan``, in the heavy-job queue; hosted, in the fold worker: ``in_worker``), and its
result held like an uploaded structure
(the page's tracks, contacts and SaProt then read it) with its pLDDT view, PAE heatmap and PDB and
mmCIF downloads. The work is ``flamino_core.structure.folding``'s; the fold is kept in the result
store by model and sequence (a second session folding the same sequence reads it back).
"""

from __future__ import annotations

import functools

import streamlit as st

from flamino_core import settings
from flamino_core.jobs import DONE
from flamino_core.model import STEM_PRECISIONS, ModelId
from flamino_core.options import Precision
from flamino_core.store import default_store
from flamino_core.structure import folding
from flamino_core.structure import PLDDT_BANDS, band_counts, molecular_scene, pae_heatmap, parse_structure_bytes

from app_pages._ui.frame.downloads import safe_name, show_figure, text_button
from app_pages._ui.frame.widgets import plain
from app_pages._ui.server import background, heavy_jobs, jobs_panel
from app_pages._ui.server.policy import current_limits, hosted_mode
from app_pages._ui.structure import loaded_structure, molecule_view

MODEL = "fold_model"  # session state: the ESMFold model chosen (text input)
STEM = "fold_stem_precision"  # session state: the stem's precision (fp32 or the labelled bf16)
CHOSEN, CHOSEN_STEM = "_fold_model_chosen", "_fold_stem_chosen"  # their copies, for other pages
STEM_BF16_LABEL = "stem in bf16: not the reference's numbers"
PREDICTION = "_structure_prediction"  # (structure key, FoldedProtein, model label, record id)


def in_worker() -> bool:
    """Whether folds run in the server's fold worker (``folding.fold_worker``: stopped by Cancel and a
    closed tab, bounded in memory, a lower priority): hosted, unless ``FLAMINO_FOLD_WORKER=0``;
    locally when ``FLAMINO_FOLD_WORKER=1`` (a local fold runs in the server's process, to its end)."""
    chosen = settings.FOLD_WORKER.get()
    return hosted_mode() if chosen is None else chosen


def model_choice() -> str:
    """The ESMFold model: hosted, the test model (or the operator's ``FLAMINO_FOLD_MODEL``); local, any folder."""
    if hosted_mode():
        return settings.FOLD_MODEL.get() or folding.RANDOM_MODEL
    st.session_state.setdefault(MODEL, st.session_state.get(CHOSEN, folding.RANDOM_MODEL))  # back from another page
    chosen = st.text_input("ESMFold model", key=MODEL,
                           help="random:esmfold-tiny[:seed] (untrained), esmfold_v1 (the published weights, "
                                "MIT licence: downloaded once, 8.4 GB, into the Hugging Face cache), or a folder "
                                "written by transformers' EsmForProteinFolding.save_pretrained")
    chosen = chosen.strip() or folding.RANDOM_MODEL
    st.session_state[CHOSEN] = chosen  # a widget's state goes with the page: other pages read this copy
    return chosen


def chosen_model() -> tuple[str, str]:
    """(the fold model, the stem's precision) as chosen on the Structure page, without drawing
    its widgets (hosted: the operator's): what another page folds with."""
    if hosted_mode():
        return settings.FOLD_MODEL.get() or folding.RANDOM_MODEL, settings.FOLD_STEM_PRECISION.get()
    ss = st.session_state
    return ss.get(CHOSEN) or folding.RANDOM_MODEL, ss.get(CHOSEN_STEM, "fp32")


STEM_HELP = ("ESMFold's ESM-2 stem in bf16 stores its dense layers in half the memory (5.6 GB less for esmfold_v1) "
             "and gives other numbers than the reference: its folds are labelled and stored apart")


def stem_choice(key: str = STEM, help_text: str = STEM_HELP) -> str:
    """The stem's precision: fp32 by default; bf16 on request (half the stem's dense weights: what
    a long fold with esmfold_v1, or ESMFold2's ESM C 6B at all, needs on a 16 GiB accelerator),
    labelled. ``key``: the widget's (ESMFold's by default, whose choice other pages read; ESMFold2's
    panel has its own). Hosted: the operator's ``FLAMINO_FOLD_STEM_PRECISION``."""
    if hosted_mode():
        return settings.FOLD_STEM_PRECISION.get()
    st.session_state.setdefault(key, st.session_state.get(CHOSEN_STEM, "fp32") if key == STEM else "fp32")
    chosen = st.radio("Language-model stem", STEM_PRECISIONS, key=key, horizontal=True,
                      format_func=lambda p: "fp32 (the reference's numbers)" if p == Precision.FP32
                      else "bf16 (less memory)", help=help_text)
    if key == STEM:
        st.session_state[CHOSEN_STEM] = chosen
    return chosen


def with_stem(label: str, stem_precision: str) -> str:
    return label if stem_precision == Precision.FP32 else f"{label} ({STEM_BF16_LABEL})"


def _is_random(identifier: ModelId) -> bool:
    return identifier.is_random and identifier.fold == "esmfold"


def short_label(identifier: ModelId) -> str:
    """The model as a job line names it."""
    if _is_random(identifier):
        return f"{identifier.text} (untrained test model)"
    return "ESMFold" if hosted_mode() else f"ESMFold ({identifier.text.rstrip('/').rsplit('/', 1)[-1]})"


def model_label(identifier: ModelId) -> str:
    if _is_random(identifier):
        return f"{identifier.text}, an {folding.RANDOM_LABEL}"
    return f"ESMFold from {identifier.text}" if not hosted_mode() else "ESMFold"


@st.cache_resource(show_spinner=False, max_entries=2)
def _model(identifier: ModelId, stem_precision: str = "fp32"):
    from flamino_core.weights import load_fold_model

    return load_fold_model(identifier, stem_precision)[0]


def _config(identifier: ModelId):
    from flamino_core.model import FoldConfig

    from flamino_core.weights import FOLD_PRESETS

    if _is_random(identifier):
        return FoldConfig.tiny()
    if identifier.fold_preset in FOLD_PRESETS:  # its shape is known: nothing loads before Predict
        return FOLD_PRESETS[identifier.fold_preset].expect()
    return _model(identifier).config  # a folder: its shape is read with its weights


def loaded_model(identifier: ModelId, stem_precision: str = "fp32"):
    """The fold model, loaded once per process (what the Variant effects page's folds run)."""
    return _model(identifier, stem_precision)


def fold_config(identifier: ModelId):
    """The fold model's shape, known before it loads where it can be (the test model, a preset)."""
    return _config(identifier)


def offer(ctx) -> None:
    """The prediction offered for the record (no structure held): its cost, Predict, the job."""
    seq = ctx.sequence.upper()
    st.subheader("Predict the structure (ESMFold)")
    identifier = ModelId.parse(model_choice())  # the page's door: read once, passed as a value
    stem = stem_choice()
    label = with_stem(model_label(identifier), stem)
    if _is_random(identifier):
        st.warning(f"Folding with {label}: the coordinates, pLDDT and PAE only show what the page does.",
                   icon=":material/science:")
    try:
        config = _config(identifier)
        key = folding.model_key(identifier, config.trunk.max_recycles, stem)
    except (ValueError, OSError) as err:  # ModelNotAvailableError is a ValueError
        st.error(plain(f"The ESMFold model could not be read: {err}"), icon=":material/error:")
        return
    longest, where = device_limit(config, stem)
    refusal = folding.length_refusal(len(seq), hosted_mode(), longest=longest, where=where)
    if refusal:
        st.error(plain(f"Not folded: {refusal}."), icon=":material/block:")
        return
    if len(seq) > folding.TRAINED_RESIDUES:
        st.warning(plain(f"{len(seq):,} residues: {folding.PAST_TRAINED_NOTE}."), icon=":material/warning:")
        label += f"; {len(seq):,} residues, {folding.PAST_TRAINED_NOTE}"
    store = default_store()
    found = folding.stored_fold(store, key, seq)
    if found is not None:
        hold(found, key, label, ctx.record.id)
        st.rerun()
    request = folding.FoldRequest(identifier, stem, seq) if in_worker() else None
    if request is not None:  # the express lane's lengths compiled before a short fold is asked (issue #67)
        folding.warm_express(identifier, stem)
    compiled = folding.runner_for(request).compiled(request.shape_key) if request is not None else None
    memory = folding.fold_memory(config, len(seq), stem_precision=stem, compiled=bool(compiled),
                                 platform=folding.fold_platform())
    timing = folding.fold_time_estimate(config, len(seq), key, compiled=compiled)
    st.caption(plain(f"Memory: {memory.describe()}. Time: {timing.describe()}."))
    work_key = ("fold", key, seq)
    budget = current_limits().max_fold_seconds
    refused = folding.time_refusal(timing.seconds, budget)
    if refused and background.find(work_key) is None:
        st.error(plain(f"Not folded: {refused}."), icon=":material/block:")
        return
    if background.find(work_key) is None and work_key not in st.session_state.get(jobs_panel.APPROVED, set()):
        st.button("Predict the structure (ESMFold)", on_click=jobs_panel.approve, args=(work_key,),
                  icon=":material/neurology:", type="primary")
        return
    plan = folding.FoldPlan(functools.partial(_model, identifier, stem), store, key, seq, config, timing.seconds,
                            label, visitor=heavy_jobs.visitor_key() or "", request=request,
                            budget=2 * budget if budget else None)
    job = jobs_panel.follow_plan(work_key, f"ESMFold of {ctx.record.id} ({len(seq):,} residues)", plan, None,
                                 what="the predicted structure", model=with_stem(short_label(identifier), stem))
    if job is not None and job.state == DONE and job.value is not None:
        hold(job.value, key, label, ctx.record.id)
        st.rerun()


def device_limit(config, stem_precision: str) -> tuple[int, str]:
    """(the longest fold here, where that comes from), said on the page before any work: the rule
    ``flamino fold``'s plan says (``folding.run_length_limit``: this device's memory by the estimate,
    at the page's 64-row chunks), with this server's own limit when hosted."""
    longest, where, _ = folding.run_length_limit(config, folding.memory_room(), 64, stem_precision)
    hosted = f"; this server folds {folding.hosted_fold_limit():,} at most" if hosted_mode() else ""
    st.caption(plain(f"Length limit on this device: {longest:,} residues {where}{hosted}."))
    return longest, where


def hold(folded, key: str, label: str, record_id: str) -> None:
    """Hold the prediction as the page's structure (as an upload is held)."""
    name = f"{record_id}_esmfold.pdb"
    text = folding.prediction_pdb(folded, label, record_id)
    parsed = parse_structure_bytes(text.encode(), name, **current_limits().structure_limits())
    structure_key = f"fold:{key}:{folded.sequence}"
    loaded_structure.hold(parsed, structure_key, f"predicted by {label}")
    st.session_state[PREDICTION] = (structure_key, folded, label, record_id)


def held_prediction(structure_key: str):
    """(FoldedProtein, model label, record id) when the page's structure is a prediction, else None."""
    found = st.session_state.get(PREDICTION)
    return found[1:] if found is not None and found[0] == structure_key else None


def of_another_sequence(structure_key: str, sequence: str) -> bool:
    """Whether the page's structure is a prediction of another sequence than ``sequence``."""
    found = held_prediction(structure_key)
    return found is not None and found[0].sequence != sequence.upper()


def fold_file_stem(record_id: str, structure_key: str) -> str:
    """The predicted structure's file names: the record, then the fold model that made the file
    (``abeta42_esmfold-tiny``, ``abeta42_esmfold_v1``), never the sidebar's language model, and the
    record once (the page's stem for uploads joins the record, the model and the file's name)."""
    model = structure_key.split("|")[1] if structure_key.count("|") >= 2 else "esmfold"
    if model.startswith(folding.RANDOM_MODEL):  # random:esmfold-tiny:<seed>: the seed only when not 0
        name, _, seed = model[len("random:"):].partition(":")
        model = name if seed in ("", "0") else f"{name}-seed{seed}"
    else:  # a Hub repository (facebook/esmfold_v1) or a folder: its last part
        model = model.rstrip("/").rsplit("/", 1)[-1]
    stem = f"{safe_name(record_id)}_{safe_name(model)}"
    return stem if "stem=bf16" not in structure_key else f"{stem}_stem-bf16"


def section(ctx, parsed, alignment, structure_key: str, file_stem: str) -> None:
    """The prediction's confidence: the 3D view by pLDDT bands, pLDDT along the sequence, the PAE
    heatmap, PDB and mmCIF downloads named by the fold model."""
    folded, label, record_id = held_prediction(structure_key)
    file_stem = fold_file_stem(record_id, structure_key.removeprefix("fold:"))
    st.subheader("The predicted structure")
    plddt = 100 * folded.residue_plddt
    counts = ", ".join(f"{n} {name}" for name, n in band_counts(plddt).items() if n)
    st.caption(plain(f"Predicted by {label}: mean pLDDT {100 * folded.mean_plddt:.1f} (0-100; above 70 the "
                     f"backbone is usually right, above 90 the side chains too, for trained weights), "
                     f"pTM {folded.ptm:.3f}. Residues by confidence: {counts}."))
    bands = ", ".join(f"{band.describe()} {band.colour}" for band in PLDDT_BANDS)
    if molecule_view.available():
        scene = molecular_scene(parsed, alignment, plddt, "pLDDT", scale=1.0, numbering=ctx.numbering,
                                confidence=True)
        st.caption(f"Cartoon coloured by pLDDT (0-100, the predicted lDDT of each residue's C-alpha) in AlphaFold's "
                   f"fixed confidence bands ({bands}); hover a residue for its value. The PDB download holds it in "
                   "the B-factor column, as ESMFold writes it.")
        molecule_view.molecule_view(scene, key="prediction_viewer")
    show_figure(folding.plddt_track(plddt, f"pLDDT per residue ({label})", ctx.numbering), "prediction_plddt",
                f"{file_stem}_plddt")
    figure = pae_heatmap(folded.pae, f"Predicted aligned error ({label})", ctx.numbering)
    show_figure(figure, "prediction_pae", f"{file_stem}_pae")
    pdb_text = folding.prediction_pdb(folded, label, record_id)
    row = st.container(horizontal=True)
    with row:
        text_button("Predicted structure (PDB, pLDDT as B-factors)", lambda: pdb_text, f"{file_stem}.pdb",
                    "chemical/x-pdb", "prediction_pdb")
        text_button("Predicted structure (mmCIF)", lambda: folding.prediction_mmcif(pdb_text, record_id),
                    f"{file_stem}.cif", "chemical/x-mmcif", "prediction_cif")
