"""Attention: one layer's maps (one head, or their average), all heads at a glance, and contacts."""

import numpy as np
import pandas as pd
import streamlit as st

from app_pages._ui import inputs, models, results
from app_pages._ui.downloads import csv_button, npz_button, show_figure
from app_pages._ui.widgets import kept_selectbox, kept_toggle, layer_names
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
    page = models.page_inputs()
    if page is None:
        return
    record, engine, model, seq, stem = page
    n, heads = engine.config.num_layers, engine.config.attention_heads
    st.header("Attention")
    inputs.record_caption(record)
    shown_seq = seq[:MAX_RESIDUES]
    if len(seq) > MAX_RESIDUES:
        st.info(
            f"This sequence has {len(seq)} residues. Attention maps are shown for the first "
            f"{MAX_RESIDUES} (ESM-2's training length); contacts cover the whole sequence, "
            "predicted in overlapping windows."
        )

    names = layer_names(n, first=1)
    head_names = {0: "average of all heads", **{h: f"head {h}" for h in range(1, heads + 1)}}
    controls = st.columns([2, 2, 1, 2], vertical_alignment="bottom")
    with controls[0]:
        layer = kept_selectbox("Layer", "alayer", names, default=n, format_func=names.get)
    with controls[1]:
        head = kept_selectbox("Head", "head", head_names, format_func=head_names.get)
    with controls[2]:
        use_apc = kept_toggle(
            "APC",
            "apc",
            help="Average product correction of the symmetrised map, as the contact head applies it: "
            "removes the background of tokens that attend (or are attended) everywhere.",
        )
    with controls[3]:
        special = kept_toggle(
            "Start/end tokens",
            "special",
            help="Show the start (cls) and end (eos) tokens, which often soak up attention. Not with APC.",
            disabled=use_apc,
        )

    # Long sequences go through the server's heavy-job queue; when it is full the page says so
    # and shows what it has.
    maps = results.heavy(results.attention, model, seq, layer, what="the attention maps")  # (H, T, T)
    contact_probs = results.heavy(results.contacts, model, seq, what="the contact map")  # (L, L)
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
            show_figure(
                figures.attention_heatmap(matrix, labels, title, diverging=use_apc),
                "attention_map",
                f"{stem}_layer{layer}_head{head or 'avg'}",
            ),
        ):
            csv_button(
                "This map (CSV)",
                lambda: pd.DataFrame(matrix, index=labels, columns=labels).reset_index(names="query"),
                f"{stem}_layer{layer}_head{head or 'avg'}{'_apc' if use_apc else ''}.csv",
                "attention_csv",
            )
    if contact_probs is not None:
        with right, show_figure(figures.contact_map(contact_probs, seq), "contacts", f"{stem}_contacts"):
            csv_button(
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
    with show_figure(grid, "attention_grid", f"{stem}_layer{layer}_all_heads"):
        npz_button(
            "All maps of this layer (NPZ, with start/end tokens)",
            lambda: {"sequence": np.array(shown_seq), "layer": np.array(layer), "attentions": maps},
            f"{stem}_layer{layer}_attention.npz",
            "attention_npz",
        )

main()
