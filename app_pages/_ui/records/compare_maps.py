"""The Embeddings page's "Compare models": the records' map of mean embeddings per model (#35
item 5), up to three more models beside the sidebar's, side by side.

Each model's mean embeddings (its final layer: layer numbers differ between models) come from
the same unmasked pass per record as the page's own map (``set_results.record_outputs``: through
the result store, as a background job per model), one more engine loaded per rerun; each map is
its own PCA, coloured by the same choice as the page's map, the selected record ringed.
An ensemble has no embedding of its own: its members are offered one by one instead.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from app_pages._ui.frame.downloads import safe_name, show_figure
from app_pages._ui.frame.widgets import kept_multiselect, plain
from app_pages._ui.input.model_loading import LOCAL_CHOICE, other_engine
from app_pages._ui.input.model_picker import model_choices, model_label
from app_pages._ui.records import set_results
from flamino_core.records import project, record_map_figure
from flamino_core.variants import MAX_MODELS

CHOICE = "embedding_compare"


def comparison_choices(current: str) -> list[str]:
    return [m for m in model_choices() if m not in (LOCAL_CHOICE, current)]


def section(ctx) -> None:
    records = ctx.records
    if len(records) < 2:
        return
    with st.expander("Compare models: the records' map per model", icon=":material/compare_arrows:",
                     expanded=bool(st.session_state.get(CHOICE))):
        others = kept_multiselect(f"Models (up to {MAX_MODELS - 1} beside the sidebar's)", CHOICE,
                                  comparison_choices(ctx.model), max_selections=MAX_MODELS - 1, format_func=model_label,
                                  help="Each model's final-layer mean embedding of every record, on a map of its own.")
        if not others:
            st.caption("Choose models to see how each places the records.")
            return
        sequences = tuple(r.sequence for r in records)
        maps = [(ctx.model, ctx.engine)]
        for model in others:
            engine, problem = other_engine(model)
            if problem:
                st.warning(plain(problem))
                return
            maps.append((model, engine))
        columns = st.columns(2)
        for index, (model, engine) in enumerate(maps):
            with columns[index % 2]:
                _one_map(index, model, engine, records, sequences, ctx.record)


def _one_map(index: int, model: str, engine, records, sequences: tuple[str, ...], selected) -> None:
    layer = engine.config.num_layers
    arrived = set_results.record_outputs(engine, model, sequences, f"mean/{layer}", f"the records' map of {model}")
    found = [r for r in records if r.sequence in arrived.values]
    if len(found) < len(records):
        st.caption(f"{model_label(model)}: {len(found):,} of {len(records):,} records so far.")
        return
    means = np.stack([arrived.values[r.sequence] for r in found])
    ids = [r.id for r in found]
    figure = record_map_figure(project(means, "pca"), ids, selected=selected.id if selected else None,
                               labels=len(ids) <= 30, title=f"{model_label(model)}, layer {layer} (PCA)")
    show_figure(figure, f"compare_map_{index}", f"records_{safe_name(model_label(model))}_pca")
