"""Attention: one layer's maps (one head, or their average), all heads at a glance, and contacts.

Everything covers the page's residue range, numbered in the sequence's own numbering. Attention
maps cover at most 1,022 residues (they cannot be stitched from windows): a longer sequence's
maps come from the 1,022-residue window centred on the range. Contacts of a long sequence come
from overlapping windows; pairs no window holds are NaN, *not predicted*, and drawn as such.
"""

import numpy as np
import pandas as pd
import streamlit as st

from app_pages._ui.results import one_record as results
from app_pages._ui.rerun.context import PageContext, current
from app_pages._ui.frame.downloads import csv_button, npz_button, show_figure
from app_pages._ui.frame.widgets import kept_selectbox, kept_toggle, layer_names
from flamino_core.analysis import (apc, attention_view, contacts_frame, crop_square, residue_labels,
                                   strip_special, symmetrize, top_contacts_frame)
from flamino_core import figures
from flamino_core.model import MAX_RESIDUES, contact_families
from flamino_core.runtime import WINDOW_STEP, residue_window_start


def contact_note(contacts: np.ndarray, length: int) -> str | None:
    """Which pairs a long sequence's windows predict, and how many of those shown were not."""
    if length <= MAX_RESIDUES:
        return None
    upper = contacts[np.triu_indices(len(contacts), k=1)]
    missing = int(np.isnan(upper).sum())
    share = f"{missing / max(len(upper), 1):.0%} of the pairs shown are" if missing else "No pair shown is"
    return (
        f"Contacts of this {length:,}-residue sequence come from overlapping windows of {MAX_RESIDUES:,} "
        f"residues: every pair within {WINDOW_STEP} positions of each other is predicted, pairs further "
        f"apart only when one window holds both (never {MAX_RESIDUES:,} or more apart). {share} not "
        "predicted: drawn in orange, NaN in the downloads."
    )


def main(ctx: PageContext) -> None:
    engine, seq, stem, shown = ctx.engine, ctx.sequence, ctx.stem, ctx.shown
    n, heads = ctx.engine.config.num_layers, ctx.engine.config.attention_heads
    part, first, record_stem, stem = seq[shown.span], shown.number, stem, stem + shown.stem()
    # The residues the maps cover (at most 1,022) and the window of the sequence they come from.
    maps_stop = min(shown.stop, shown.start + MAX_RESIDUES)
    window = residue_window_start([shown.start, maps_stop - 1], len(seq), min(len(seq), MAX_RESIDUES))
    window_seq = seq[window:window + MAX_RESIDUES]
    maps_first = ctx.numbering.number(shown.start)
    if len(seq) > MAX_RESIDUES:
        cut = "" if maps_stop == shown.stop else f" the first {MAX_RESIDUES:,} residues of the range,"
        st.info(
            f"Attention maps cover at most {MAX_RESIDUES:,} residues (the models' training length): these show"
            f"{cut} from the {MAX_RESIDUES:,}-residue window of the sequence that holds them."
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
    maps = results.heavy(results.attention, engine, window_seq, layer, what="the attention maps")  # (H, T, T)
    # A family without a contact head (ESM-1v, ESM C) shows its maps and says where contacts come from.
    has_contacts = engine.family.contact_head
    contact_probs = results.heavy(results.contacts, engine, seq, what="the contact map") if has_contacts else None
    what = "APC-corrected, symmetrised attention" if use_apc else "Attention"
    crop = (shown.start - window, maps_stop - window)  # the maps' residues within the window

    left, right = st.columns(2)
    if maps is not None:
        keep_special = special and not use_apc
        view = attention_view(maps, None if head == 0 else head - 1, use_apc, keep_special)
        matrix = crop_square(view, *crop, with_special=keep_special)
        labels = residue_labels(seq[shown.start:maps_stop], maps_first)
        if keep_special:
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
    if not has_contacts:
        with right:
            st.info(f"{engine.family.title} has no contact head (none was published), so this page shows its "
                    f"attention maps only: contacts come from {contact_families()}.")
    if contact_probs is not None:
        shown_contacts = contact_probs[shown.span, shown.span]
        with right:
            with show_figure(figures.contact_map(shown_contacts, part, first=first), "contacts", f"{stem}_contacts"):
                pairs = len(part) * (len(part) - 1) // 2
                csv_button(
                    "Contacts (CSV)",
                    lambda: contacts_frame(shown_contacts, part, first),
                    f"{stem}_contacts.csv",
                    "contacts_csv",
                    model=ctx.model_name,
                    na_rep="NaN",
                    help=f"Every pair of the residues shown: {pairs:,} rows, about {pairs * 27 / 1e6:,.1f} MB.",
                )
                csv_button(
                    f"Top {len(part):,} contacts (CSV)",
                    lambda: top_contacts_frame(shown_contacts, part, first),
                    f"{stem}_top_contacts.csv",
                    "top_contacts_csv",
                    model=ctx.model_name,
                    help="The L most probable pairs at least 6 positions apart (those contact precision judges), "
                    "best first.",
                )
                npz_button(
                    "Whole contact map (NPZ)",
                    lambda: {
                        "sequence": np.array(seq),
                        "first_number": np.array(ctx.first),
                        "contacts": contact_probs,
                    },
                    f"{record_stem}_contacts.npz",
                    "contacts_npz",
                )
            note = contact_note(shown_contacts, len(seq))
            if note:
                st.caption(note)
    if maps is None:
        return

    st.subheader(f"All {heads} heads of {names[layer]}")
    per_head = strip_special(maps)
    if use_apc:
        per_head = apc(symmetrize(per_head))
    per_head = crop_square(per_head, *crop)
    grid = figures.attention_grid(
        per_head, title=f"{what} of every head, {names[layer]}", diverging=use_apc, first=maps_first
    )
    with show_figure(grid, "attention_grid", f"{stem}_layer{layer}_all_heads"):
        npz_button(
            "All maps of this layer (NPZ, with start/end tokens)",
            lambda: {
                "sequence": np.array(window_seq),
                "first_number": np.array(ctx.numbering.number(window)),
                "layer": np.array(layer),
                "attentions": maps,
            },
            f"{stem}_layer{layer}_attention.npz",
            "attention_npz",
        )


if __name__ == "__main__":  # run by app.py (context.serve), with this rerun's context
    main(current())
