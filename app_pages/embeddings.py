"""Embeddings: per-residue representations projected with PCA, and every record's mean embedding
on one map (``_ui/records/set_map.py``); each half has its own controls, the layer serves both."""

import numpy as np
import pandas as pd
import streamlit as st

from app_pages._ui.results import one_record as results
from app_pages._ui.rerun.context import PageContext, current
from app_pages._ui.frame.downloads import csv_button, npz_button, show_figure
from app_pages._ui.records import compare_maps
from app_pages._ui.records.set_map import records_section
from app_pages._ui.frame.widgets import kept_radio, kept_selectbox, layer_names
from flamino_core.analysis import pca, residue_class
from flamino_core import figures


def main(ctx: PageContext) -> None:
    engine, seq, stem = ctx.engine, ctx.sequence, ctx.stem
    shown = ctx.shown  # the per-residue half covers the range, in the record's numbering
    n = ctx.engine.config.num_layers
    part, first, part_stem = seq[shown.span], shown.number, stem + shown.stem()

    names = layer_names(n)
    layer = kept_selectbox("Layer (both halves)", "elayer", names, default=n, format_func=names.get)

    st.subheader("Per-residue embeddings")
    controls = st.columns([1, 2])
    with controls[0]:
        dims = kept_radio("Projection", "dims", horizontal=True)
    with controls[1]:
        colour = kept_radio("Colour residues by", "colour", horizontal=True)
    reps = results.representations(engine, seq, layer)[shown.span]  # (shown, D)
    result = pca(reps, n_components=3)
    ratios = result.explained_variance_ratio
    fig = figures.residue_pca_scatter(
        result, part, colour_by=colour, dims=int(dims), numbering=shown.numbering,
        title=f"Per-residue embeddings{'' if shown.whole else ' of ' + shown.label()}, {names[layer]} (PCA)",
    )
    left, right = st.columns([3, 1])
    with left, show_figure(fig, "residue_pca", f"{part_stem}_layer{layer}_pca{dims}d"):
        npz_button(
            "Embeddings and PCA (NPZ)",
            lambda: {
                "sequence": np.array(part),
                "first_number": np.array(first),
                "layer": np.array(layer),
                "embeddings": reps,
                "pca_coords": result.coords,
                "explained_variance_ratio": ratios,
                "pca_components": result.components,
            },
            f"{part_stem}_layer{layer}_embeddings.npz",
            "residue_npz",
        )
        csv_button(
            "PCA coordinates (CSV)",
            lambda: pd.DataFrame(
                {
                    "position": np.asarray(shown.numbering.numbers(len(part))),
                    "residue": list(part),
                    "class": [residue_class(aa) for aa in part],
                    **{f"PC{i + 1}": result.coords[:, i] for i in range(result.coords.shape[1])},
                }
            ),
            f"{part_stem}_layer{layer}_pca.csv",
            "residue_csv",
            model=ctx.model_name,
        )
    with right:
        st.metric("Variance explained by PC1–PC" + dims, f"{100 * ratios[: int(dims)].sum():.1f}%")
        show_figure(
            figures.explained_variance_bars(ratios), "variance", f"{part_stem}_layer{layer}_variance"
        )

    records_section(ctx, layer, names[layer])
    compare_maps.section(ctx)


if __name__ == "__main__":  # run by app.py (context.serve), with this rerun's context
    main(current())
