"""The page context (issue 21 item 4): each rerun reads the input once and looks the engine up
once, whatever the page; the Input page names the pages of the registry."""

from __future__ import annotations

import pytest
import streamlit as st

from app_pages._ui.input import reading as inputs, model_loading as models
from app_pages._ui.frame.views import PAGES
from test_app import UBIQUITIN, assert_clean, environment, open_page, paste, start, unescaped  # noqa: F401

AppTest = pytest.importorskip("streamlit.testing.v1").AppTest
TWO = f">ubiquitin\n{UBIQUITIN}\n>other/5-40\n{UBIQUITIN[4:40]}\n"


@pytest.fixture
def counted(monkeypatch):
    """Calls of the input's parser and of the engine lookup, as the app makes them, and the script's
    runs (``st.navigation`` is called once a run, in app.py). One ``AppTest.run()`` can be two runs
    of the script: a job started by the page may report while the page draws, and then the jobs
    watcher reruns the app (``jobs_panel._watch``, as a browser's page redraws what arrived). On a
    quiet machine the Records page's first chunk does: 2 parses in 2 runs, not a second parse."""
    calls = {"parse": 0, "engine": 0, "runs": 0}
    parse, lookup, navigation = inputs.parse_input, models.active_engine, st.navigation

    def parse_counted(*args, **kwargs):
        calls["parse"] += 1
        return parse(*args, **kwargs)

    def lookup_counted(*args, **kwargs):
        calls["engine"] += 1
        return lookup(*args, **kwargs)

    def navigation_counted(*args, **kwargs):
        calls["runs"] += 1
        return navigation(*args, **kwargs)

    monkeypatch.setattr(inputs, "parse_input", parse_counted)
    monkeypatch.setattr(models, "active_engine", lookup_counted)
    monkeypatch.setattr(st, "navigation", navigation_counted)
    return calls


def one_of_each_per_run(counted: dict[str, int]) -> bool:
    return counted["runs"] >= 1 and counted["parse"] == counted["engine"] == counted["runs"]


@pytest.mark.parametrize("page", [key for key in PAGES if key != "input"])
def test_one_parse_and_one_engine_lookup_per_rerun_on_every_page(page, counted):
    at = open_page(paste(start(), TWO), page)  # the first run of a page computes its results
    assert_clean(at)
    for _ in range(2):  # a rerun: as when the user moves a widget
        counted.update(parse=0, engine=0, runs=0)
        at.run()
        assert_clean(at)
        assert one_of_each_per_run(counted), (page, counted)
    at.sidebar.selectbox(key="_w_record").set_value("other/5-40")
    counted.update(parse=0, engine=0, runs=0)
    at.run()  # another record: still one of each
    assert_clean(at)
    assert one_of_each_per_run(counted), (page, counted)


def test_the_input_page_names_every_page_of_the_registry_in_menu_order():
    at = start()
    (intro,) = [m.value for m in at.markdown if "open any page in the menu" in m.value]
    places = [unescaped(intro).index(f"**{page.title}**") for key, page in PAGES.items() if key != "input"]
    assert places == sorted(places)
