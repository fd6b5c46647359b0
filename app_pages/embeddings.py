"""Embeddings: per-residue and per-sequence representations, projected with PCA."""

import numpy as np
import pandas as pd
import streamlit as st

from app_pages import _state as state
from flamino_core import analysis, figures

COLOURS = {"position": "position", "residue": "residue", "class": "residue class"}


def main() -> None:
    inputs = state.page_inputs()
    if inputs is None:
        return
    record, engine, model, seq, stem = inputs
    n = engine.config.num_layers
    st.header("Embeddings")
    state.record_caption(record)

    names = state.layer_names(n)
    controls = st.columns([2, 1, 2])
    layer = controls[0].selectbox(
        "Layer", list(names), format_func=names.get, **state.seeded("elayer", n, lambda v: v in names, options=names)
    )
    state.remember("elayer", layer)
    dims = controls[1].radio(
        "Projection",
        ["2", "3"],
        format_func=lambda d: f"{d}D",
        horizontal=True,
        **state.seeded("dims", "2", lambda v: v in ("2", "3"), options=["2", "3"]),
    )
    state.remember("dims", dims)
    colour = controls[2].radio(
        "Colour by",
        list(COLOURS),
        format_func=COLOURS.get,
        horizontal=True,
        **state.seeded("colour", "position", lambda v: v in COLOURS, options=COLOURS),
    )
    state.remember("colour", colour)

    st.subheader("Per-residue embeddings")
    reps = state.representations(model, seq, layer)  # (L, D)
    result = analysis.pca(reps, n_components=3)
    ratios = result.explained_variance_ratio
    fig = figures.residue_pca_scatter(
        result, seq, colour_by=colour, dims=int(dims), title=f"Per-residue embeddings, {names[layer]} (PCA)"
    )
    left, right = st.columns([3, 1])
    with left, state.show_figure(fig, "residue_pca", f"{stem}_layer{layer}_pca{dims}d"):
        state.npz_button(
            "Embeddings and PCA (NPZ)",
            lambda: {
                "sequence": np.array(seq),
                "layer": np.array(layer),
                "embeddings": reps,
                "pca_coords": result.coords,
                "explained_variance_ratio": ratios,
                "pca_components": result.components,
            },
            f"{stem}_layer{layer}_embeddings.npz",
            "residue_npz",
        )
        state.csv_button(
            "PCA coordinates (CSV)",
            lambda: pd.DataFrame(
                {
                    "position": np.arange(1, len(seq) + 1),
                    "residue": list(seq),
                    "class": [analysis.residue_class(aa) for aa in seq],
                    **{f"PC{i + 1}": result.coords[:, i] for i in range(result.coords.shape[1])},
                }
            ),
            f"{stem}_layer{layer}_pca.csv",
            "residue_csv",
        )
    with right:
        st.metric("Variance explained by PC1–PC" + dims, f"{100 * ratios[: int(dims)].sum():.1f}%")
        state.show_figure(
            figures.explained_variance_bars(ratios), "variance", f"{stem}_layer{layer}_variance"
        )

    st.subheader("Per-sequence mean embeddings")
    found = state.records()
    if len(found) < 2:
        st.info("Add two or more records on the Input page to compare sequences here.")
        return
    ids = [r.id for r in found]
    means = state.mean_embeddings(model, tuple(r.sequence for r in found), layer)  # (N, D)
    seq_result = analysis.pca(means, n_components=2)
    fig = figures.sequence_pca_scatter(
        seq_result, ids, title=f"Mean embeddings of {len(ids)} records, {names[layer]} (PCA)"
    )
    with state.show_figure(fig, "sequence_pca", f"records_layer{layer}_pca"):
        state.npz_button(
            "Mean embeddings (NPZ)",
            lambda: {"ids": np.array(ids), "layer": np.array(layer), "mean_embeddings": means},
            f"records_layer{layer}_mean_embeddings.npz",
            "sequence_npz",
        )
        state.csv_button(
            "PCA coordinates of records (CSV)",
            lambda: pd.DataFrame({"id": ids, "PC1": seq_result.coords[:, 0], "PC2": seq_result.coords[:, 1]}),
            f"records_layer{layer}_pca.csv",
            "sequence_csv",
        )


main()
