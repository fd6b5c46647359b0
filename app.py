"""flamino: what protein language models (ESM-2, ESM-1b, the ESM-1v ensemble, ESM C, SaProt) think of your
sequences.

Run with ``streamlit run app.py``. This file only lays out navigation (the pages declared in
``app_pages/_ui/frame/views.py``), the sidebar and the error boundary, and computes each rerun's page
context once (``app_pages/_ui/rerun/context.py``: the input read once, the record, its numbering, the
engine looked up once); each page in ``app_pages/`` is a ``main(ctx)`` that reads widgets, calls
``flamino_core`` and draws its figures, with the helpers in ``app_pages/_ui/``.

The folder is deliberately not called ``pages/``: Streamlit treats a ``pages/`` folder beside the
main script as a legacy multipage app and, in some runs (the first run of a fresh server opened
on a page URL, every AppTest rerun), executes the page file directly without this script.
"""

import faulthandler
import logging
import signal
import sys
import uuid

import streamlit as st

from flamino_core.model import FAMILIES

from app_pages._ui.frame import downloads
from app_pages._ui.rerun import context, session

from app_pages._ui.input import reading as inputs, model_picker, model_loading as models, numbering, uploads

from app_pages._ui.server import background, jobs_panel
from app_pages._ui.server.policy import hosted_mode
from app_pages._ui.frame.views import DEFAULT_PAGE, PAGES

LOG = logging.getLogger("flamino")

# `kill -USR1 <server pid>` writes every thread's stack to the server's log (docs/deploy.md): how
# to tell a job that is working from one that waits forever, on a live server.
try:
    faulthandler.register(signal.SIGUSR1, file=sys.__stderr__, all_threads=True)
except (AttributeError, ValueError, OSError):  # no SIGUSR1 (Windows) or no stderr to write to
    pass

st.set_page_config(page_title="flamino", page_icon="🧬", layout="wide")
if hosted_mode():
    # What escapes the guards below (a widget callback runs before this script) is shown by
    # Streamlit itself: on a public server without its message or traceback, which name files.
    st.set_option("client.showErrorDetails", "none")


def failed(err: Exception, where: str) -> None:
    """Log the traceback under a short error id and tell the visitor only that id (hosted) or
    the error too (locally): a message may name the server's files and lines."""
    error_id = uuid.uuid4().hex[:8]
    LOG.exception("%s failed (error id %s)", where, error_id)
    what = f"error id {error_id}" if hosted_mode() else f"{type(err).__name__}: {err}; error id {error_id}"
    st.error(
        f"Something went wrong on this page ({what}). Your input is kept; try another record or "
        "option, or reload. If it persists, please report it with the shared link and the error id."
    )


def main() -> None:
    uploads.bound_streamlit_uploads()  # once per process: at most a few stored files per session
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

    parsed, counts = inputs.read_input()  # the one reading of the input in this rerun
    with st.sidebar:
        st.title(":material/genetics: flamino")
        st.caption(f"Protein language model explorer ({', '.join(f.title for f in FAMILIES.values())})")
        model_picker.model_picker()
        engine_slot = st.empty()  # filled once the model is loaded (below): how it runs
        record = inputs.record_picker(parsed.records if parsed else ())
        first = numbering.numbering_controls(record) if record is not None else None
        downloads.image_format_picker()
        link_slot = st.empty()

    if problem := session.take_link_problem():
        st.warning(problem)
    session.link_model_banner()
    ctx = context.build(current, parsed, counts, first)  # the one engine lookup in this rerun
    models.model_banner(ctx.model_id, ctx.engine, ctx.engine_problem, engine_slot)
    jobs_seen = jobs_panel.version()  # before the page draws: news during it reruns the page
    try:
        context.serve(page, ctx)
    except Exception as err:  # never a traceback in front of a biologist; the log keeps it
        failed(err, f"page {current}")
    with st.sidebar:  # this session's jobs, whichever page started them (after the page: its news)
        jobs_panel.sidebar_panel(jobs_seen)
    uploads.drop_unheld_uploads()  # Streamlit's copies of uploads the callbacks took in
    session.publish_link(ctx, link_slot)


# One guard around the whole run (the sidebar, the link, the page): Streamlit's own stop and
# rerun signals are not Exceptions and pass through.
try:
    with background.browser_run():  # this session's browser is there: its jobs go on
        main()
except Exception as err:
    failed(err, "the app")
