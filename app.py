"""flamino: what the ESM-2 protein language model thinks of your sequences.

Run with ``streamlit run app.py``. This file only lays out navigation (the pages declared in
``app_pages/_ui/views.py``), the sidebar and the error boundary; the pages in ``app_pages/`` read
widgets, call ``flamino_core`` and draw its figures, with the helpers in ``app_pages/_ui/``.

The folder is deliberately not called ``pages/``: Streamlit treats a ``pages/`` folder beside the
main script as a legacy multipage app and, in some runs (the first run of a fresh server opened
on a page URL, every AppTest rerun), executes the page file directly without this script.
"""

import logging

import streamlit as st

from app_pages._ui import downloads, inputs, model_picker, models, numbering, session
from app_pages._ui.policy import hosted_mode
from app_pages._ui.views import DEFAULT_PAGE, PAGES

st.set_page_config(page_title="flamino", page_icon="🧬", layout="wide")
session.init_session()
inputs.sync_input()

pages = {
    key: st.Page(page.file, title=page.title, icon=page.icon, url_path=key, default=key == DEFAULT_PAGE)
    for key, page in PAGES.items()
}
page = st.navigation(list(pages.values()))
current = next(key for key, candidate in pages.items() if candidate.title == page.title)
wanted = session.take_link_page()
if wanted and wanted != current:
    st.switch_page(pages[wanted])

with st.sidebar:
    st.title(":material/genetics: flamino")
    st.caption("ESM-2 protein language model explorer")
    model_picker.model_picker()
    engine_slot = st.empty()  # filled once the model is loaded (below): how it runs
    inputs.record_picker()
    if (record := inputs.selected_record(as_read=True)) is not None:
        numbering.numbering_controls(record)
    downloads.image_format_picker()
    link_slot = st.empty()

if problem := session.take_link_problem():
    st.warning(problem)
session.link_model_banner()
models.model_banner(engine_slot)
try:
    page.run()
except Exception as err:  # never a traceback in front of a biologist; the log keeps it
    logging.getLogger("flamino").exception("page %s failed", current)
    # A hosted server's visitors get no error text: it may name the server's files.
    what = type(err).__name__ if hosted_mode() else f"{type(err).__name__}: {err}"
    st.error(
        f"Something went wrong on this page ({what}). Your input is kept; try another record or "
        "option, or reload. If it persists, please report it with the shared link."
    )
session.publish_link(current, link_slot)
