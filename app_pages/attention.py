"""Attention: one layer's maps (one head, or their average), all heads at a glance, and contacts.

Everything covers the page's residue range, numbered in the sequence's own numbering. Attention
maps cover at most 1,022 residues (they cannot be stitched from windows): a longer sequence's
maps come from the 1,022-residue window centred on the range. Contacts of a long sequence come
from overlapping windows; pairs no window holds are NaN, *not predicted*, and drawn as such.
"""

from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from app_pages._ui.results import one_record as results
from app_pages._ui.rerun.context import PageContext, current
from app_pages._ui.frame.downloads import csv_button, npz_button, show_figure
from app_pages._ui.frame.widgets import kept_selectbox, kept_toggle, layer_names
from flamino_core.wording import byte_size
from flamino_core.analysis import (apc, attention_view, contacts_frame, crop_square, residue_labels,
                                   strip_special, symmetrize, top_contacts_frame)
from flamino_core import figures
from flamino_core.model import MAX_RESIDUES, contact_families
from flamino_core.engine import WINDOW_STEP, residue_window_start
from flamino_core.numbering import Numbering


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


@dataclass(frozen=True)
class _Window:
    """The residues the maps cover (at most 1,022) and the window of the sequence they come from."""

    start: int  # the window's first residue in the sequence
    seq: str
    maps_stop: int  # one past the maps' last residue, in the sequence
    numbering: Numbering  # the maps' numbering (index 0: their first residue)
    crop: tuple[int, int]  # the maps' residues within the window


@dataclass(frozen=True)
class _Choice:
    """The layer and head the controls picked, and how to draw them."""

    names: dict  # layer number: its name
    head_names: dict  # head number (0: their average): its name
    layer: int
    head: int
    use_apc: bool
    special: bool

    @property
    def what(self) -> str:
        return "APC-corrected, symmetrised attention" if self.use_apc else "Attention"


def maps_window(ctx: PageContext) -> _Window:
    """The window the maps come from; a long sequence's page says the maps cover only part of it."""
    seq, shown = ctx.sequence, ctx.shown
    maps_stop = min(shown.stop, shown.start + MAX_RESIDUES)
    width = min(len(seq), MAX_RESIDUES)
    start = residue_window_start([shown.start, maps_stop - 1], len(seq), width)
    if len(seq) > MAX_RESIDUES:
        cut = "" if maps_stop == shown.stop else f" the first {MAX_RESIDUES:,} residues of the range,"
        st.info(
            f"Attention maps cover at most {MAX_RESIDUES:,} residues (the models' training length): these show"
            f"{cut} from the {MAX_RESIDUES:,}-residue window of the sequence that holds them."
        )
    window_seq = seq[start:start + MAX_RESIDUES]
    crop = (shown.start - start, maps_stop - start)
    return _Window(start, window_seq, maps_stop, shown.numbering, crop)


def controls(n: int, heads: int) -> _Choice:
    """The row of layer, head, APC and start/end token controls."""
    names = layer_names(n, first=1)
    head_names = {0: "average of all heads", **{h: f"head {h}" for h in range(1, heads + 1)}}
    columns = st.columns([2, 2, 1, 2], vertical_alignment="bottom")
    with columns[0]:
        layer = kept_selectbox("Layer", "alayer", names, default=n, format_func=names.get)
    with columns[1]:
        head = kept_selectbox("Head", "head", head_names, format_func=head_names.get)
    with columns[2]:
        use_apc = kept_toggle(
            "APC",
            "apc",
            help="Average product correction of the symmetrised map, as the contact head applies it: "
            "removes the background of tokens that attend (or are attended) everywhere.",
        )
    with columns[3]:
        special = kept_toggle(
            "Start/end tokens",
            "special",
            help="Show the start (cls) and end (eos) tokens, which often soak up attention. Not with APC.",
            disabled=use_apc,
        )
    return _Choice(names, head_names, layer, head, use_apc, special)


def attention_map(ctx: PageContext, maps: np.ndarray, window: _Window, choice: _Choice,
                  stem: str) -> None:
    """The chosen head's map (or the heads' average) over the residues shown, and its CSV."""
    keep_special = choice.special and not choice.use_apc
    head = None if choice.head == 0 else choice.head - 1
    view = attention_view(maps, head, choice.use_apc, keep_special)
    matrix = crop_square(view, *window.crop, with_special=keep_special)
    labels = residue_labels(ctx.sequence[ctx.shown.start:window.maps_stop], window.numbering.first)
    if keep_special:
        labels = ["<cls>", *labels, "<eos>"]
    title = f"{choice.what}, {choice.names[choice.layer]}, {choice.head_names[choice.head]}"
    name = f"{stem}_layer{choice.layer}_head{choice.head or 'avg'}"
    heatmap = figures.attention_heatmap(matrix, labels, title, diverging=choice.use_apc)
    with show_figure(heatmap, "attention_map", name):
        csv_button(
            "This map (CSV)",
            lambda: pd.DataFrame(matrix, index=labels, columns=labels).reset_index(names="query"),
            f"{name}{'_apc' if choice.use_apc else ''}.csv",
            "attention_csv",
        )


def contacts_panel(ctx: PageContext, contact_probs: np.ndarray, stem: str) -> None:
    """The contact map of the residues shown, its three downloads, what a long sequence misses."""
    seq, shown = ctx.sequence, ctx.shown
    part, numbering = seq[shown.span], shown.numbering
    shown_contacts = contact_probs[shown.span, shown.span]
    with show_figure(figures.contact_map(shown_contacts, part, numbering=numbering), "contacts", f"{stem}_contacts"):
        pairs = len(part) * (len(part) - 1) // 2
        csv_button(
            "Contacts (CSV)",
            lambda: contacts_frame(shown_contacts, part, numbering),
            f"{stem}_contacts.csv",
            "contacts_csv",
            model=ctx.model_name,
            na_rep="NaN",
            help=f"Every pair of the residues shown: {pairs:,} rows, about {byte_size(pairs * 27)}.",
        )
        csv_button(
            f"Top {len(part):,} contacts (CSV)",
            lambda: top_contacts_frame(shown_contacts, part, numbering),
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
            f"{ctx.stem}_contacts.npz",
            "contacts_npz",
        )
    note = contact_note(shown_contacts, len(seq))
    if note:
        st.caption(note)


def all_heads(ctx: PageContext, maps: np.ndarray, window: _Window, choice: _Choice,
              stem: str) -> None:
    """Every head of the chosen layer at a glance, and the layer's whole maps."""
    layer = choice.layer
    st.subheader(f"All {ctx.engine.config.attention_heads} heads of {choice.names[layer]}")
    per_head = strip_special(maps)
    if choice.use_apc:
        per_head = apc(symmetrize(per_head))
    per_head = crop_square(per_head, *window.crop)
    grid = figures.attention_grid(
        per_head, title=f"{choice.what} of every head, {choice.names[layer]}",
        diverging=choice.use_apc, numbering=window.numbering,
    )
    with show_figure(grid, "attention_grid", f"{stem}_layer{layer}_all_heads"):
        npz_button(
            "All maps of this layer (NPZ, with start/end tokens)",
            lambda: {
                "sequence": np.array(window.seq),
                "first_number": np.array(ctx.numbering.number(window.start)),
                "layer": np.array(layer),
                "attentions": maps,
            },
            f"{stem}_layer{layer}_attention.npz",
            "attention_npz",
        )


def main(ctx: PageContext) -> None:
    engine, stem = ctx.engine, ctx.stem + ctx.shown.stem()
    window = maps_window(ctx)
    choice = controls(engine.config.num_layers, engine.config.attention_heads)
    # Long sequences go through the server's heavy-job queue; when it is full the page says so
    # and shows what it has.
    maps = results.heavy(results.attention, engine, window.seq, choice.layer,
                         what="the attention maps")  # (H, T, T)
    # A family without a contact head (ESM-1v, ESM C) shows its maps and says where contacts come from.
    has_contacts = engine.family.contact_head
    contact_probs = (results.heavy(results.contacts, engine, ctx.sequence, what="the contact map")
                     if has_contacts else None)

    left, right = st.columns(2)
    if maps is not None:
        with left:
            attention_map(ctx, maps, window, choice, stem)
    if not has_contacts:
        with right:
            st.info(f"{engine.family.title} has no contact head (none was published), so this page shows its "
                    f"attention maps only: contacts come from {contact_families()}.")
    if contact_probs is not None:
        with right:
            contacts_panel(ctx, contact_probs, stem)
    if maps is not None:
        all_heads(ctx, maps, window, choice, stem)


if __name__ == "__main__":  # run by app.py (context.serve), with this rerun's context
    main(current())
