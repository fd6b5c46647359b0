"""Attention: one layer's maps (one head, or their average), all heads at a glance, and contacts."""

import numpy as np
import pandas as pd
import streamlit as st

from app_pages import _state as state
from flamino_core import analysis, figures
from flamino_core.config import MAX_RESIDUES


def contacts_frame(contacts: np.ndarray, sequence: str) -> pd.DataFrame:
    """Every residue pair i < j with its contact probability."""
    i, j = np.triu_indices(len(sequence), k=1)
    letters = np.array(list(sequence))
    return pd.DataFrame(
        {
            "i": i + 1,
            "residue_i": letters[i],
            "j": j + 1,
            "residue_j": letters[j],
            "probability": contacts[i, j],
        }
    )


def main() -> None:
    inputs = state.page_inputs()
    if inputs is None:
        return
    record, engine, model, seq, stem = inputs
    n, heads = engine.config.num_layers, engine.config.attention_heads
    st.header("Attention")
    state.record_caption(record)
    shown_seq = seq[:MAX_RESIDUES]
    if len(seq) > MAX_RESIDUES:
        st.info(
            f"This sequence has {len(seq)} residues. Attention maps are shown for the first "
            f"{MAX_RESIDUES} (ESM-2's training length); contacts cover the whole sequence, "
            "predicted in overlapping windows."
        )

    names = state.layer_names(n, first=1)
    head_names = {0: "average of all heads", **{h: f"head {h}" for h in range(1, heads + 1)}}
    controls = st.columns([2, 2, 1, 2], vertical_alignment="bottom")
    layer = controls[0].selectbox(
        "Layer", list(names), format_func=names.get, **state.seeded("alayer", n, lambda v: v in names, options=names)
    )
    state.remember("alayer", layer)
    head = controls[1].selectbox(
        "Head",
        list(head_names),
        format_func=head_names.get,
        **state.seeded("head", 0, lambda v: v in head_names, options=head_names),
    )
    state.remember("head", head)
    use_apc = controls[2].toggle(
        "APC",
        **state.seeded("apc", False, lambda v: isinstance(v, bool)),
        help="Average product correction of the symmetrised map, as the contact head applies it: "
        "removes the background of tokens that attend (or are attended) everywhere.",
    )
    state.remember("apc", use_apc)
    special = controls[3].toggle(
        "Start/end tokens",
        **state.seeded("special", False, lambda v: isinstance(v, bool)),
        help="Show the start (cls) and end (eos) tokens, which often soak up attention. Not with APC.",
        disabled=use_apc,
    )
    state.remember("special", special)

    # Long sequences go through the server's heavy-job queue; when it is full the page says so
    # and shows what it has.
    maps = state.heavy(state.attention, model, seq, layer, what="the attention maps")  # (H, T, T)
    contact_probs = state.heavy(state.contacts, model, seq, what="the contact map")  # (L, L)
    what = "APC-corrected, symmetrised attention" if use_apc else "Attention"

    left, right = st.columns(2)
    if maps is not None:
        matrix = analysis.attention_view(maps, None if head == 0 else head - 1, use_apc, special)
        labels = analysis.residue_labels(shown_seq)
        if special and not use_apc:
            labels = ["<cls>", *labels, "<eos>"]
        title = f"{what}, {names[layer]}, {head_names[head]}"
        with (
            left,
            state.show_figure(
                figures.attention_heatmap(matrix, labels, title, diverging=use_apc),
                "attention_map",
                f"{stem}_layer{layer}_head{head or 'avg'}",
            ),
        ):
            state.csv_button(
                "This map (CSV)",
                lambda: pd.DataFrame(matrix, index=labels, columns=labels).reset_index(names="query"),
                f"{stem}_layer{layer}_head{head or 'avg'}{'_apc' if use_apc else ''}.csv",
                "attention_csv",
            )
    if contact_probs is not None:
        with right, state.show_figure(figures.contact_map(contact_probs, seq), "contacts", f"{stem}_contacts"):
            state.csv_button(
                "Contacts (CSV)",
                lambda: contacts_frame(contact_probs, seq),
                f"{stem}_contacts.csv",
                "contacts_csv",
            )
    if maps is None:
        return

    st.subheader(f"All {heads} heads of {names[layer]}")
    per_head = analysis.strip_special(maps)
    if use_apc:
        per_head = analysis.apc(analysis.symmetrize(per_head))
    grid = figures.attention_grid(per_head, title=f"{what} of every head, {names[layer]}", diverging=use_apc)
    with state.show_figure(grid, "attention_grid", f"{stem}_layer{layer}_all_heads"):
        state.npz_button(
            "All maps of this layer (NPZ, with start/end tokens)",
            lambda: {"sequence": np.array(shown_seq), "layer": np.array(layer), "attentions": maps},
            f"{stem}_layer{layer}_attention.npz",
            "attention_npz",
        )

main()
