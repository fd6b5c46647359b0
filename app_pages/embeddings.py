"""Embeddings: per-residue and per-sequence representations, projected with PCA."""

import numpy as np
import pandas as pd
import streamlit as st

from app_pages._ui import inputs, models, ranges, results
from app_pages._ui.downloads import csv_button, npz_button, show_figure
from app_pages._ui.widgets import kept_radio, kept_selectbox, layer_names
from flamino_core import analysis, figures


def main() -> None:
    page = models.page_inputs()
    if page is None:
        return
    record, engine, model, seq, stem = page
    n = engine.config.num_layers
    st.header("Embeddings")
    inputs.record_caption(record)
    shown = ranges.page_range(record)  # the per-residue half covers the range, in the record's numbering
    part, first, part_stem = seq[shown.span], shown.number, stem + shown.stem()

    names = layer_names(n)
    controls = st.columns([2, 1, 2])
    with controls[0]:
        layer = kept_selectbox("Layer", "elayer", names, default=n, format_func=names.get)
    with controls[1]:
        dims = kept_radio("Projection", "dims", horizontal=True)
    with controls[2]:
        colour = kept_radio("Colour by", "colour", horizontal=True)

    st.subheader("Per-residue embeddings")
    reps = results.representations(model, seq, layer)[shown.span]  # (shown, D)
    result = analysis.pca(reps, n_components=3)
    ratios = result.explained_variance_ratio
    fig = figures.residue_pca_scatter(
        result, part, colour_by=colour, dims=int(dims), first=first,
        title=f"Per-residue embeddings{'' if shown.whole else ' of ' + shown.label()}, {names[layer]} (PCA)",
    )  # fmt: skip
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
                    "position": np.arange(first, first + len(part)),
                    "residue": list(part),
                    "class": [analysis.residue_class(aa) for aa in part],
                    **{f"PC{i + 1}": result.coords[:, i] for i in range(result.coords.shape[1])},
                }
            ),
            f"{part_stem}_layer{layer}_pca.csv",
            "residue_csv",
        )
    with right:
        st.metric("Variance explained by PC1–PC" + dims, f"{100 * ratios[: int(dims)].sum():.1f}%")
        show_figure(
            figures.explained_variance_bars(ratios), "variance", f"{part_stem}_layer{layer}_variance"
        )

    st.subheader("Per-sequence mean embeddings")
    found = inputs.records()
    if len(found) < 2:
        st.info("Add two or more records on the Input page to compare sequences here.")
        return
    ids = [r.id for r in found]
    means = results.mean_embeddings(model, tuple(r.sequence for r in found), layer)  # (N, D)
    seq_result = analysis.pca(means, n_components=2)
    fig = figures.sequence_pca_scatter(
        seq_result, ids, title=f"Mean embeddings of {len(ids)} records, {names[layer]} (PCA)"
    )
    with show_figure(fig, "sequence_pca", f"records_layer{layer}_pca"):
        npz_button(
            "Mean embeddings (NPZ)",
            lambda: {"ids": np.array(ids), "layer": np.array(layer), "mean_embeddings": means},
            f"records_layer{layer}_mean_embeddings.npz",
            "sequence_npz",
        )
        csv_button(
            "PCA coordinates of records (CSV)",
            lambda: pd.DataFrame({"id": ids, "PC1": seq_result.coords[:, 0], "PC2": seq_result.coords[:, 1]}),
            f"records_layer{layer}_pca.csv",
            "sequence_csv",
        )


main()
