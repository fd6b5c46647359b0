"""flamino: what the ESM-2 protein language model thinks of your sequences.

Run with ``streamlit run app.py``. This file only lays out navigation and the sidebar; the pages
in ``app_pages/`` read widgets, call ``flamino_core`` and draw its figures.

The folder is deliberately not called ``pages/``: Streamlit treats a ``pages/`` folder beside the
main script as a legacy multipage app and, in some runs (the first run of a fresh server opened
on a page URL, every AppTest rerun), executes the page file directly without this script.
"""

import logging

import streamlit as st

from app_pages import _state as state

st.set_page_config(page_title="flamino", page_icon="🧬", layout="wide")
state.init_session()
state.sync_input()

PAGES = {
    "input": st.Page(
        "app_pages/input.py", title="Input", icon=":material/edit_note:", url_path="input", default=True
    ),
    "predictions": st.Page(
        "app_pages/predictions.py",
        title="Masked predictions",
        icon=":material/grid_on:",
        url_path="predictions",
    ),
    "embeddings": st.Page(
        "app_pages/embeddings.py", title="Embeddings", icon=":material/scatter_plot:", url_path="embeddings"
    ),
    "attention": st.Page(
        "app_pages/attention.py", title="Attention", icon=":material/hub:", url_path="attention"
    ),
}
page = st.navigation(list(PAGES.values()))
current = next(key for key, candidate in PAGES.items() if candidate.title == page.title)
wanted = state.take_link_page()
if wanted and wanted != current:
    st.switch_page(PAGES[wanted])

with st.sidebar:
    st.title(":material/genetics: flamino")
    st.caption("ESM-2 protein language model explorer")
    state.model_picker()
    state.record_picker()
    image_format = st.radio(
        "Figure image format (camera button on each figure)",
        ["png", "svg"],
        **state.seeded(state.IMAGE_FORMAT, "png", lambda v: v in ("png", "svg"), options=["png", "svg"]),
        format_func=str.upper,
        horizontal=True,
    )
    state.remember(state.IMAGE_FORMAT, image_format)
    link_slot = st.empty()

if problem := st.session_state.pop("_link_problem", None):
    st.warning(problem)
state.model_banner()
try:
    page.run()
except Exception as err:  # never a traceback in front of a biologist; the log keeps it
    logging.getLogger("flamino").exception("page %s failed", current)
    st.error(
        f"Something went wrong on this page: {type(err).__name__}: {err}. Your input is kept; try "
        "another record or option, or reload. If it persists, please report it with the shared link."
    )
state.publish_link(current, link_slot)
