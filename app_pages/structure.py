"""Structure: predicted contacts against a PDB/mmCIF structure, and any per-residue track on its chain in 3D."""

import streamlit as st

from app_pages._ui.structure import molecule_view, loaded_structure as structures, prediction, structure_aware
from app_pages._ui.structure import complex_prediction

from app_pages._ui.results import one_record as results
from app_pages._ui.input.reading import record_caption
from app_pages._ui.rerun.context import PageContext, current, ready
from app_pages._ui.frame.downloads import safe_name, show_figure, text_button
from app_pages._ui.rerun.session import LINK_NOTE
from app_pages._ui.frame.views import BEST_CHAIN
from app_pages._ui.frame.widgets import counted, kept_number_input, kept_radio, kept_selectbox, layer_names, plain
from flamino_core.model import contact_families
from flamino_core.structure import (CUTOFFS, NEEDS, PARAMS, StructureError, TRACKS, contact_comparison_map,
                                    molecular_scene, pdb_export_problem, pdb_with_track, precision_by_model,
                                    precision_csv, structure_trace_3d, top_predictions, true_contacts)
from flamino_core.options import STRATEGIES

INTRO = (
    "Compare the model's predicted contacts with a structure of this protein, and colour the "
    "structure by what the model says about each residue. The chain is aligned to the sequence "
    "(residue numbers are never taken for positions); only aligned residues are compared."
)


def model_and_chains(parsed):
    """The model picker (files with several) and what the file holds: (model index, protein chains)."""
    model_index = 0
    if parsed.n_models > 1:
        model_index = kept_selectbox(
            f"Model in the file ({parsed.n_models}, as in an NMR ensemble)",
            "smodel",
            list(range(parsed.n_models)),
            format_func=lambda i: f"model {i + 1}",
        )
    summaries = parsed.chains(model_index)
    st.markdown("**What the file holds**\n\n" + "\n".join(f"- {plain(s.describe())}" for s in summaries))
    return model_index, [s.chain_id for s in summaries if s.is_protein]


def use_chain_buttons(chains, model_index, ctx: PageContext, exclude=None) -> None:
    """One "use this chain's sequence" button per chain (but ``exclude``, the record's own)."""
    existing = {r.id: r.sequence for r in ctx.records_read or ()}
    row = st.container(horizontal=True)
    for chain in chains:
        if chain != exclude:
            row.button(f"Use chain {chain}'s sequence", key=f"_use_chain_{chain}", icon=":material/input:",
                       on_click=structures.use_chain, args=(chain, model_index, existing),
                       help="Add this chain's amino acids (as modelled, numbered from the file) to the input "
                            "as a record, and analyse it on every page.")


def chain_and_alignment(parsed, key, ctx: PageContext):
    """Model and chain pickers, what the file holds, and the chosen chain's alignment (or None).
    A record made of one of the structure's chains is aligned to that chain unless another is picked."""
    seq = ctx.sequence
    model_index, protein = model_and_chains(parsed)
    own = structures.record_chain(ctx.record_read.id) if model_index == 0 else None
    chain = kept_selectbox(
        "Chain",
        "schain",
        [BEST_CHAIN, *protein],
        format_func=lambda c: (f"the record's own chain ({own})" if own else "best match to the sequence")
        if c == BEST_CHAIN else f"chain {c}",
        help="Chains without amino acids (DNA, ligands, water) cannot be compared and are not offered.",
    )
    chain = own if chain == BEST_CHAIN and own in protein else chain
    try:
        alignment = structures.alignment(key, seq, None if chain == BEST_CHAIN else chain, model_index, parsed)
    except StructureError as err:
        st.error(plain(str(err)), icon=":material/error:")
        use_chain_buttons(protein, model_index, ctx)
        return None
    st.success(plain(alignment.describe()), icon=":material/link:")
    if alignment.identity < 1 or alignment.coverage < 1:  # the record is not this chain as modelled
        use_chain_buttons([alignment.chain_id], model_index, ctx)
    for note in alignment.chain.notes:
        st.caption(plain(f"Chain {alignment.chain_id}: {note}"))
    with st.expander("Alignment (sequence above, structure below)"):
        st.code(alignment.text, language=None)
    return alignment


def precision_section(alignment, contacts, record, seq, file_stem, numbering):
    """The precision table and the contact map; returns the top pairs marked (the 3D view draws them)."""
    st.subheader("Contact precision")
    by_model = structures.contacts_by_model(seq)
    table = precision_by_model(alignment, by_model, record.id)
    st.caption(
        f"Top L, L/2 and L/5 predicted pairs in each separation range (|i − j| in sequence positions), "
        f"L = {len(seq)} (the analysed sequence's length). A true contact: C-beta atoms (C-alpha for "
        f"glycine) closer than 8 Å within chain {plain(alignment.chain_id)}. Only pairs with both residues in the "
        "structure are judged; n_pairs says how many. One block per model run on this page in this session."
    )
    st.dataframe(table, hide_index=True, width="stretch")
    text_button("Precision (CSV)", lambda: precision_csv(table), f"{file_stem}_precision.csv", "text/csv",
                "precision_csv")

    st.subheader("Predicted contacts vs the structure")
    left, right = st.columns(2)
    with left:
        separation = kept_radio("Separation", "srange", horizontal=True)
    with right:
        cutoff = kept_radio("Marked predictions", "scut", horizontal=True)
    truth = true_contacts(alignment)
    top = top_predictions(contacts, truth, separation, k=len(seq) // CUTOFFS[cutoff])
    title = (f"Predicted (above the diagonal) vs chain {alignment.chain_id} (below); top {cutoff} {separation}-range "
             f"pairs marked: {int(top.is_contact.sum())} of {len(top)} true")
    figure = contact_comparison_map(contacts, truth, top, title, numbering=numbering)  # the record's
    show_figure(figure, "structure_contacts", f"{file_stem}_contacts")
    return top


def track_choices(n_layers, n_heads, seq, numbering, family):
    """The track picker and a kept widget for each choice the chosen track declares
    (``structure.tracks``), four to a row; ``numbering``: the record's residue numbering.
    A ``family`` without a contact head is not offered the tracks of predicted contacts (the 3D
    view vanished on choosing one); a kept one (a link, another model before) is said, not dropped silently."""
    offered = [name for name, spec in TRACKS.items() if family.contact_head or "contacts" not in spec.needs]
    wanted = st.session_state.get("strack")
    track = kept_selectbox("Colour the chain by", "strack", offered,
                           format_func=lambda t: f"{t}: {TRACKS[t].description}")
    if wanted in TRACKS and wanted not in offered:
        st.caption(f"The {wanted} track needs predicted contacts, which {family.title} cannot give (no contact head): "
                   f"showing {track}; choose {contact_families()} in the sidebar for it.")
    spec, choice = TRACKS[track], {}
    columns = st.columns(4)
    for index, key in enumerate(spec.params):
        with columns[index % len(columns)]:
            choice[key] = track_widget(PARAMS[key], spec, n_layers, n_heads, seq, numbering)
    if "residue" not in spec.params:  # the residue the 3D view draws as sticks (kept in the same link key)
        with columns[3]:
            choice["residue"] = track_widget(PARAMS["residue"], spec, n_layers, n_heads, seq, numbering,
                                             label="Residue drawn as sticks")
    return track, choice


def track_widget(param, spec, n_layers, n_heads, seq, numbering, label=None):
    """One track choice's kept widget, generated from its ``tracks.Param`` (``label``: another
    label than the param's); returns the value as people count it (``tracks.check_choices``' terms)."""
    label = label or param.label
    if param.limit == "length":  # asked in the record's own numbering; the link keeps the 1-based position
        return kept_number_input(f"{label} ({numbering.first:,}–{numbering.last(len(seq)):,})", param.link,
                                 max_value=len(seq), shift=numbering.shift)
    if param.limit == "layers":  # attention comes from layers 1 and up
        names = layer_names(n_layers, first=max(NEEDS[need].first_layer for need in spec.needs))
        return kept_selectbox(label, param.link, names, default=n_layers, format_func=names.get)
    if param.limit == "heads":
        heads = {0: param.none_means, **{h: f"head {h}" for h in range(1, n_heads + 1)}}
        return kept_selectbox(label, param.link, heads, format_func=heads.get) or None  # 0: left out
    if param.widget == "radio":
        return kept_radio(label, param.link, help=param.help)
    if param.widget == "select":
        return kept_selectbox(label, param.link)
    return kept_number_input(label, param.link)


def view_3d(ctx: PageContext, parsed, alignment, contacts, top, file_stem):
    st.subheader("The structure in 3D")
    seq, engine, numbering = ctx.sequence, ctx.engine, ctx.numbering
    track, choice = track_choices(engine.config.num_layers, engine.config.attention_heads, seq, numbering,
                                  engine.family)
    tokens = structure_aware.structure_choice(engine, seq, chain=alignment.chain_id)
    if tokens is not None and not ("scores" in TRACKS[track].needs and STRATEGIES[choice["strategy"]].masked):
        st.caption("This track reads the sequence only; the score tracks of a masked strategy read the "
                   "structure's 3Di letters.")
        tokens = None
    try:
        values, label = structures.track_values(track, engine, seq, contacts, choice, numbering,
                                                tokens.letters if tokens is not None else None)
    except ValueError as err:
        st.warning(plain(str(err)))
        return
    if values is None:
        return
    structure_aware.describe(tokens, numbering)
    title = f"Chain {alignment.chain_id} of {parsed.name}: {label}"
    spec = TRACKS[track]
    if molecule_view.available():
        # The best L/5 of the marked pairs: all L of them hide the chain (223 lines on 1GBT).
        drawn = None if top is None else top.first(max(1, len(seq) // 5))
        scene = molecular_scene(parsed, alignment, values, label, signed=spec.signed, scale=spec.pdb_scale,
                                numbering=numbering, chosen=choice["residue"] - 1, top=drawn)
        st.markdown(f"**{plain(title)}**")
        st.caption(
            "Cartoon coloured by the track (grey: no value), other chains in light grey, ligands as sticks; the "
            "residue chosen above in magenta sticks; the best L/5 of the pairs marked on the contact map as lines "
            "between their C-beta atoms (green: a contact in the structure, dashed vermillion: none). Hover a "
            "residue or a line for what it is; drag to turn, scroll to zoom."
        )
        molecule_view.molecule_view(scene, key="structure_viewer")
        row = st.container(horizontal=True)
    else:  # the viewer's script is missing: the C-alpha trace, on the same colours
        fig = structure_trace_3d(alignment, values, label, title, signed=spec.signed, numbering=numbering)
        st.caption("C-alpha trace (the molecular viewer's script is missing from this installation); hover a "
                   "residue for its number in the file, its name, its position and the value. Grey: no value.")
        row = show_figure(fig, "structure_3d", f"{file_stem}_{track}_3d")
    scale = spec.pdb_scale
    with row:
        problem = pdb_export_problem(parsed, alignment, values, label, scale)
        if problem:
            st.caption(plain(f"No PDB download: {problem}"))
        else:
            text_button(
                f"Structure with {track} as B-factors (PDB)",
                lambda: pdb_with_track(parsed, alignment, values, label, scale=scale),
                f"{file_stem}_{track}.pdb",
                "chemical/x-pdb",
                "structure_pdb",
            )


def main(ctx: PageContext) -> None:
    # The page draws its own frame: without a record it still takes a structure, whose chains
    # can become the records ("use this chain's sequence").
    st.header("Structure")
    if ctx.record is not None:
        record_caption(ctx.record, ctx.record_read, ctx.numbering)
    record, model, seq, stem = ctx.record, ctx.model, ctx.sequence, ctx.stem
    st.markdown(INTRO)
    structures.source_panel()
    held = structures.held()
    if held is not None and record is not None and (prediction.of_another_sequence(held[1], seq)
                                                     or complex_prediction.of_another_sequence(held[1], seq)):
        held = None  # a prediction is of one sequence (a complex, of its chains): another record is offered its own
    if held is None:
        if st.session_state.get(structures.PROBLEM):  # after a refusal, its message says what to do
            return
        if record is None:
            st.info("Upload a PDB or mmCIF file here or on the **Input** page (its protein chains become the "
                    "records), or start on Input with a sequence.")
        else:
            st.info("Upload a PDB or mmCIF file of this protein (or download one) to compare it with the predictions, "
                    "or predict one below.")
            if ready(ctx):
                complex_prediction.offer_either(ctx, prediction.offer)  # ESMFold (the default) or ESMFold2
        return
    parsed, key, origin = held
    note = structures.link_note()
    st.session_state[LINK_NOTE] = note  # the share panel says it too
    st.caption(plain(f"Shown: {parsed.name}, {origin} ({parsed.file_format}, {counted(parsed.n_models, 'model')}). "
                     f"{note}"))
    if record is None:  # a structure but no sequence yet: its chains can be the records
        model_index, protein = model_and_chains(parsed)
        st.info("Choose the chain to analyse: its sequence becomes the input's record.")
        use_chain_buttons(protein, model_index, ctx)
        return
    if not ready(ctx):
        return
    alignment = chain_and_alignment(parsed, key, ctx)
    if alignment is None:
        return
    file_stem = f"{stem}_{safe_name(parsed.name.split('.')[0])}_{alignment.chain_id}"
    if prediction.held_prediction(key) is not None:  # pLDDT, PAE and the downloads; then as an upload
        prediction.section(ctx, parsed, alignment, key, file_stem)
    if complex_prediction.held(key) is not None:  # a complex: by chain and pLDDT, PAE, ipTM, downloads
        complex_prediction.section(ctx, key)
    # Long sequences go through the server's heavy-job queue; a full queue is a warning here.
    family = ctx.engine.family  # a family without a contact head (ESM-1v, ESM C): no comparison, tracks still
    if family.contact_head:
        contacts = results.heavy(results.contacts, ctx.engine, seq, what="the contact map")  # (L, L)
    else:
        contacts = None
        st.info(f"{family.title} has no contact head (none was published), so there are no predicted contacts to "
                f"compare with the structure; choose {contact_families()} for them. The 3D view colours every "
                "other track.")
    top = None
    if contacts is not None:
        structures.remember_contacts(model, seq, contacts)
        top = precision_section(alignment, contacts, record, seq, file_stem, ctx.numbering)
    view_3d(ctx, parsed, alignment, contacts, top, file_stem)


if __name__ == "__main__":  # run by app.py (context.serve), with this rerun's context
    main(current())
